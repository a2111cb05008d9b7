/*
 * sticky.c — keeping a client's operations in order across unacknowledged
 * writes (see sticky.h for the rules).
 */
#include "pool/sticky.h"

#include "core/xalloc.h"
#include "pool/gate.h"
#include "pool/pool.h"
#include "pool/server.h"
#include "core/globals.h"
#include "core/stats.h"
#include "core/wire.h"
#include "pool/route.h"
#include "pool/pool_ops.h"

static int n_sticky; /* owners with a sticky connection (o->route->sticky) */

struct server *sticky_target(const struct request *req)
{
	return req->owner != NULL ? owner_sticky(req->owner) : NULL;
}

bool sticky_behind_unacked(const struct request *req)
{
	const struct request *r;

	if (req->owner == NULL)
		return false;
	TAILQ_FOREACH(r, &req->owner->requests, client_link) {
		if (r == req)
			return false;
		if (r->more_to_come && request_waiting(r) && !waitq_is(r, WAITQ_STICKY))
			return true;
	}
	return false;
}

static const struct waitq_ops sticky_waitq_ops = {
    .kind = WAITQ_STICKY,
    .limit_usec = pool_ops_queue_limit_usec,
    .owner_clock = true, /* its own client is the cause */
    .expired = pool_ops_refuse_timeout,
};

static void sticky_init(struct server *s)
{
	waitq_init(&s->sticky_waiting, &sticky_waitq_ops);
}

void sticky_enqueue(struct server *s, struct request *req)
{
	waitq_add(&s->sticky_waiting, req);
	req->route->pool = s->pool;
	req->enqueued_usec = g.now_usec;
}

static void attach(struct server *s, struct request_owner *o)
{
	if (owner_sticky(o) == s)
		return;
	owner_route(o)->sticky = s;
	s->sticky_owner = o;
	n_sticky++;
}

static void detach(struct server *s)
{
	struct request_owner *o = s->sticky_owner;

	if (o == NULL)
		return;
	o->route->sticky = NULL;
	s->sticky_owner = NULL;
	n_sticky--;
}

/* The client's later requests still in the shared queue now wait on s. */
static void gather_followers(struct server *s, struct request *req)
{
	struct request *r = TAILQ_NEXT(req, client_link);

	for (; r != NULL; r = TAILQ_NEXT(r, client_link)) {
		if (r->state != REQ_QUEUED || waitq_is(r, WAITQ_STICKY))
			continue;
		pool_ops->unqueue(r);
		sticky_enqueue(s, r);
	}
}

void sticky_started(struct server *s, struct request *req)
{
	if (!req->more_to_come || req->owner == NULL)
		return;
	attach(s, req->owner);
	gather_followers(s, req);
}

static void send_fence(struct server *s)
{
	struct evbuffer *out = xevbuffer_new();
	bson_t cmd = BSON_INITIALIZER;

	BSON_APPEND_INT32(&cmd, "ping", 1);
	BSON_APPEND_UTF8(&cmd, "$db", "admin");
	s->fence_id = wire_next_request_id();
	s->expect_response_to = s->fence_id;
	s->exchange_started_usec = g.now_usec;
	wire_append_msg(out, s->fence_id, 0, 0, &cmd);
	bson_destroy(&cmd);
	STAT_INC(unacked_fences);
	server_debug(s, "fence after an unacknowledged write");
	sbuf_write(&s->sb, out);
	evbuffer_free(out);
}

void sticky_written(struct server *s)
{
	struct request *req = waitq_first(&s->sticky_waiting);

	if (req != NULL && pool_ops->gate(GATE_RUN_HERE, s->pool, req, s)) {
		pool_ops->dispatch(s, req);
		return;
	}
	send_fence(s);
}

/* Take the waiting requests off s (in order, staged in REQ_NEW) and end
 * the stickiness. */
static void end(struct server *s, struct request_queue *moved)
{
	detach(s);
	waitq_take_all(&s->sticky_waiting, moved);
}

void sticky_fence_reply(struct server *s)
{
	s->fence_id = 0;
	s->expect_response_to = 0;
	s->exchanges++;
	sticky_release(s);
}

void sticky_release(struct server *s)
{
	struct request_queue moved = {TAILQ_HEAD_INITIALIZER(moved.list), 0};

	end(s, &moved);
	pool_ops->server_idle(s);
	waitq_resubmit(&moved, NULL, NULL);
}

static void sticky_server_closed(struct server *s)
{
	struct request_queue moved = {TAILQ_HEAD_INITIALIZER(moved.list), 0};

	s->fence_id = 0;
	end(s, &moved);
	waitq_resubmit(&moved, NULL, NULL);
}

void sticky_owner_closed(struct request_owner *o)
{
	if (owner_sticky(o) != NULL)
		detach(owner_sticky(o));
}

static bool watch_released(struct server *s)
{
	if (s->sticky_owner == NULL && waitq_count(&s->sticky_waiting) == 0)
		return false; /* not sticky: the pool's */
	sticky_release(s);
	return true;
}

static void watch_closed(struct server *s, const struct server_closing *why)
{
	(void)why;
	sticky_server_closed(s);
}

static void watch_freed(struct server *s)
{
	waitq_fini(&s->sticky_waiting);
}

const struct server_watcher sticky_watcher = {
    .name = "sticky",
    .opened = sticky_init,
    .released = watch_released,
    .closed = watch_closed,
    .freed = watch_freed,
    .written = sticky_written,
    .fenced = sticky_fence_reply,
};

int sticky_clients(void)
{
	return n_sticky;
}
