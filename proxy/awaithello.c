/*
 * awaithello.c — hellos held until the proxy's topologyVersion changes or
 * maxAwaitTimeMS runs out; exhaust (moreToCome) streams of them.
 */
#include "proxy/awaithello.h"

#include <stdlib.h>

#include "core/xalloc.h"
#include "core/globals.h"
#include "core/handshake.h"
#include "core/list.h"
#include "core/stats.h"
#include "core/topover.h"
#include "core/wire.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/client_req.h"

/* Longest hold (a larger maxAwaitTimeMS is cut to this; drivers send ~10 s). */
#define AWAIT_MAX_MS (24LL * 3600 * 1000)
/* Shortest time between two replies of an exhaust stream (maxAwaitTimeMS 0
 * would otherwise stream as fast as the loop turns). */
#define STREAM_MIN_MS 100

/* One held hello. Rules: owned by its client (client->awaiting, at most one
 * per client) and on `held` while its timer runs; its request stays on the
 * client's list (counted in flight) until the last reply; freed when the
 * stream ends or the client closes. */
struct awaited_hello {
	TAILQ_ENTRY(awaited_hello) link;
	struct request *req;
	struct event *timer;
	int64_t wait_ms;     /* maxAwaitTimeMS, capped */
	int32_t response_to; /* responseTo of the next reply */
	bool exhaust;	     /* answer with moreToCome and keep going */
	bool on_list;
};

TAILQ_HEAD(awaited_list, awaited_hello);
static struct awaited_list held = TAILQ_HEAD_INITIALIZER(held);
static int n_held;

static void answer(struct awaited_hello *ah);

static void unlink_held(struct awaited_hello *ah)
{
	if (!ah->on_list)
		return;
	TAILQ_REMOVE(&held, ah, link);
	ah->on_list = false;
	n_held--;
	evtimer_del(ah->timer);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct awaited_hello *ah = arg;

	(void)fd;
	(void)what;
	proxy_tick();
	unlink_held(ah);
	answer(ah);
}

static void hold(struct awaited_hello *ah)
{
	struct timeval tv = {(time_t)(ah->wait_ms / 1000),
			     (suseconds_t)(ah->wait_ms % 1000) * 1000};

	TAILQ_INSERT_TAIL(&held, ah, link);
	ah->on_list = true;
	n_held++;
	evtimer_add(ah->timer, &tv);
}

static void destroy(struct awaited_hello *ah)
{
	unlink_held(ah);
	if (client_of(ah->req) != NULL)
		client_of(ah->req)->awaiting = NULL;
	event_free(ah->timer);
	free(ah);
}

/* Send one more moreToCome reply; the request stays. */
static void stream_reply(struct awaited_hello *ah, struct client *c, const bson_t *doc)
{
	struct evbuffer *out = xevbuffer_new();
	int32_t id = wire_next_request_id();

	wire_append_msg(out, id, ah->response_to, MSG_MORE_TO_COME, doc);
	client_send(c, out);
	evbuffer_free(out);
	ah->response_to = id;
}

/* The reply now: the proxy's current description (or the drain error). */
static void answer(struct awaited_hello *ah)
{
	struct request *req = ah->req;
	struct client *c = client_of(req);
	bson_t doc;
	bool ok;

	STAT_INC(hello_stream_replies);
	if (ah->exhaust && sbuf_pending_out(&c->sb) >= (size_t)g.cfg.max_client_buffer_bytes) {
		/* A stream nobody reads must not grow without bound. */
		client_close(c, "does not read its exhaust hello stream (%zu bytes unsent)",
			     sbuf_pending_out(&c->sb));
		return; /* the close freed ah and its request */
	}
	ok = handshake_client_reply(req->client->hello_cmd, req->cmd, &pool_target()->info,
				    (int64_t)c->id, !c->hello_seen, &doc);
	if (ok)
		c->hello_seen = true;
	else
		STAT_INC(requests_errors);
	if (ok && ah->exhaust && !g.shutting_down && c->state == CL_ACTIVE && !c->closing) {
		stream_reply(ah, c, &doc);
		if (ah->wait_ms < STREAM_MIN_MS)
			ah->wait_ms = STREAM_MIN_MS;
		hold(ah);
	} else {
		req->client_request_id = ah->response_to; /* the last reply of a stream */
		destroy(ah);
		request_reply_doc(req, &doc);
	}
	bson_destroy(&doc);
}

/* topologyVersion changed: every held hello is answered now. */
static void on_bump(void)
{
	struct awaited_list now = TAILQ_HEAD_INITIALIZER(now);
	struct awaited_hello *ah;

	while ((ah = TAILQ_FIRST(&held)) != NULL) {
		unlink_held(ah);
		TAILQ_INSERT_TAIL(&now, ah, link);
	}
	while ((ah = TAILQ_FIRST(&now)) != NULL) {
		TAILQ_REMOVE(&now, ah, link);
		answer(ah);
	}
}

void awaithello_init(void)
{
	topover_init();
	topover_set_listener(on_bump);
}

bool awaithello_take(struct client *c, struct request *req, bool exhaust_allowed)
{
	struct topover_await a;
	struct wire_error err;
	struct awaited_hello *ah;
	bool current;

	switch (topover_parse_await(req->client->hello_cmd, &a, &err)) {
	case TOPOVER_PLAIN:
		return false;
	case TOPOVER_REFUSE:
		client_info(c, "awaitable hello refused: %s", err.msg);
		request_fail(req, err.code, err.codename, err.msg, NULL);
		return true;
	case TOPOVER_AWAIT:
		break;
	}
	current = a.same_process && a.counter == topover_counter();
	exhaust_allowed = exhaust_allowed && !req->legacy_reply;
	/* Answered at once, as an ordinary hello: a stale topologyVersion
	 * without exhaust, a drain, an unknown backend, a second one. */
	if ((!current && !exhaust_allowed) || g.shutting_down || !pool_target()->info.known ||
	    c->awaiting != NULL)
		return false;
	ah = xcalloc(1, sizeof(*ah));
	if ((ah->timer = evtimer_new(g.base, timer_cb, ah)) == NULL)
		fatal("out of memory");
	ah->req = req;
	ah->wait_ms = a.max_await_ms > AWAIT_MAX_MS ? AWAIT_MAX_MS : a.max_await_ms;
	ah->response_to = req->client_request_id;
	ah->exhaust = exhaust_allowed;
	c->awaiting = ah;
	STAT_INC(hellos_awaited);
	if (current)
		hold(ah);
	else
		answer(ah); /* stale: the news now, then the stream goes on */
	return true;
}

void awaithello_client_closed(struct client *c)
{
	struct awaited_hello *ah = c->awaiting;
	struct request *req;

	if (ah == NULL)
		return;
	req = ah->req;
	destroy(ah);
	request_free(req);
}

int awaithello_held_count(void)
{
	return n_held;
}
