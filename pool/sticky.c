/*
 * sticky.c — keeping a client's operations in order across unacknowledged
 * writes (see sticky.h for the rules).
 */
#include "pool/sticky.h"

#include "core/xalloc.h"
#include "pool/pool.h"
#include "pool/server.h"
#include "core/globals.h"
#include "core/stats.h"
#include "core/wire.h"

static int n_sticky; /* owners with o->sticky set */

struct server *sticky_target(const struct request *req)
{
	return req->owner != NULL ? req->owner->sticky : NULL;
}

bool sticky_behind_unacked(const struct request *req)
{
	const struct request *r;

	if (req->owner == NULL)
		return false;
	TAILQ_FOREACH(r, &req->owner->requests, client_link) {
		if (r == req)
			return false;
		if (r->more_to_come && request_waiting(r) && r->wait_server == NULL)
			return true;
	}
	return false;
}

void sticky_enqueue(struct server *s, struct request *req)
{
	request_set_state(req, REQ_QUEUED, &s->sticky_waiting);
	req->wait_server = s;
	req->pool = s->pool;
	req->enqueued_usec = g.now_usec;
}

void sticky_unqueue(struct request *req)
{
	request_set_state(req, REQ_NEW, NULL);
	req->wait_server = NULL;
}

static void attach(struct server *s, struct request_owner *o)
{
	if (o->sticky == s)
		return;
	o->sticky = s;
	s->sticky_owner = o;
	n_sticky++;
}

static void detach(struct server *s)
{
	struct request_owner *o = s->sticky_owner;

	if (o == NULL)
		return;
	o->sticky = NULL;
	s->sticky_owner = NULL;
	n_sticky--;
}

/* The client's later requests still in the shared queue now wait on s. */
static void gather_followers(struct server *s, struct request *req)
{
	struct request *r = TAILQ_NEXT(req, client_link);

	for (; r != NULL; r = TAILQ_NEXT(r, client_link)) {
		if (r->state != REQ_QUEUED || r->wait_server != NULL)
			continue;
		pool_unqueue(r);
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
	struct request *req = TAILQ_FIRST(&s->sticky_waiting.list);

	if (req != NULL && request_owner_may_dispatch(req->owner)) {
		pool_dispatch(s, req);
		return;
	}
	send_fence(s);
}

/* Take the waiting requests off s (in order, staged in REQ_NEW on a local
 * list) and end the stickiness. */
static void end(struct server *s, struct request_list *moved)
{
	struct request *req;

	detach(s);
	while ((req = TAILQ_FIRST(&s->sticky_waiting.list)) != NULL) {
		sticky_unqueue(req);
		TAILQ_INSERT_TAIL(moved, req, queue_link);
	}
}

static void resubmit(struct request_list *moved)
{
	struct request *req;

	while ((req = TAILQ_FIRST(moved)) != NULL) {
		TAILQ_REMOVE(moved, req, queue_link);
		pool_submit(req);
	}
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
	struct request_list moved = TAILQ_HEAD_INITIALIZER(moved);

	end(s, &moved);
	pool_server_idle(s);
	resubmit(&moved);
}

void sticky_server_closed(struct server *s)
{
	struct request_list moved = TAILQ_HEAD_INITIALIZER(moved);

	s->fence_id = 0;
	end(s, &moved);
	resubmit(&moved);
}

void sticky_owner_closed(struct request_owner *o)
{
	if (o->sticky != NULL)
		detach(o->sticky);
}

void sticky_expire(struct pool *p, uint64_t now)
{
	uint64_t limit = (uint64_t)g.cfg.queue_timeout_ms * 1000;
	struct server *s;
	struct request *req, *tmp;

	if (limit == 0)
		return;
	TAILQ_FOREACH(s, &p->active, link)
		TAILQ_FOREACH_SAFE(req, &s->sticky_waiting.list, queue_link, tmp) {
			if (!request_owner_may_dispatch(req->owner))
				req->enqueued_usec = now; /* its own client is the cause */
			else if (now - req->enqueued_usec > limit) {
				sticky_unqueue(req);
				pool_refuse_timeout(req);
			}
		}
}

int sticky_clients(void)
{
	return n_sticky;
}
