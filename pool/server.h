/*
 * server.h — one backend connection, owned by its pool.
 *
 * States and their lists (server_set_state moves it and logs at debug):
 *   SV_NEW         no list: being set up (server_connect)
 *   SV_CONNECTING  pool->connecting: TCP connect + the proxy's hello + backend
 *                  authentication (pool/auth.c); idle only once logged in
 *   SV_IDLE        pool->idle: ready, no request
 *   SV_ACTIVE      pool->active: exactly one request (server->req) running
 *   SV_JUSTFREE    servers_justfree: closed, freed after this loop iteration
 * A server carries at most one exchange at a time (transaction-level
 * pooling); replies whose responseTo is not the current requestID are stale
 * (e.g. a reply to a moreToCome write) and are dropped.
 */
#pragma once

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "core/list.h"

#include "core/log.h"
#include "core/request.h"
#include "core/sbuf.h"
#include "pool/waitq.h"

struct auth_conv;
struct backend_info;
struct pool;
struct request;

enum server_state {
	SV_NEW,
	SV_CONNECTING,
	SV_IDLE,
	SV_ACTIVE,
	SV_JUSTFREE,
};

struct server {
	uint64_t id;
	enum server_state state;
	TAILQ_ENTRY(server) link;
	struct pool *pool;
	struct sbuf sb;
	struct request *req;	    /* SV_ACTIVE: the exchange in progress */
	int32_t expect_response_to; /* requestID of the message awaiting a reply, 0: none */
	bool flush_then_release;    /* moreToCome: release once the bytes are written */
	int64_t discard_left;	    /* bytes of an oversized merged reply still to skip */
	uint64_t created_usec;
	uint64_t idle_since_usec;
	uint64_t exchange_started_usec;
	uint64_t exchanges;
	struct auth_conv *auth; /* SV_CONNECTING: the login in progress (pool/auth.c) */
	/* pool/sticky.c: the client whose unacknowledged write this connection
	 * carried, and its requests waiting to run here (REQ_QUEUED), in order.
	 * While either is set the server is SV_ACTIVE (running one of them, or
	 * the fence). */
	struct request_owner *sticky_owner;
	struct waitq sticky_waiting; /* WAITQ_STICKY */
	int32_t fence_id;	     /* requestID of the proxy's own {ping: 1} fence, 0: none */
	int8_t compressor;	     /* pool/backend_compress.c: negotiated id, -1: none */
	struct lb_pin *pin;	     /* pool/pin.c: pinned to a load-balanced client (SV_ACTIVE) */
	uint32_t generation;	     /* its pool's at connect: older ones close when idle */
	bool in_limit;		     /* its exchange counts in pool->inflight (pool_limit_begin) */
	int limit_ids;		     /* that exchange's size in ids, for the limit */
};

TAILQ_HEAD(server_list, server);

/* (pool_name: pool/pool.h) */
#define server_log(lvl, s, fmt, ...)                                                               \
	log_msg(lvl, "S-%" PRIu64 " %s: " fmt, (s)->id, pool_name((s)->pool), ##__VA_ARGS__)
#define server_warning(s, fmt, ...)                                                                \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_WARNING))                                                  \
			server_log(LOG_LVL_WARNING, s, fmt, ##__VA_ARGS__);                        \
	} while (0)
#define server_info(s, fmt, ...)                                                                   \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_INFO))                                                     \
			server_log(LOG_LVL_INFO, s, fmt, ##__VA_ARGS__);                           \
	} while (0)
#define server_debug(s, fmt, ...)                                                                  \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_DEBUG))                                                    \
			server_log(LOG_LVL_DEBUG, s, fmt, ##__VA_ARGS__);                          \
	} while (0)

/* Start a new connection for `pool` (state SV_CONNECTING). */
bool server_connect(struct pool *pool) __attribute__((warn_unused_result));

/* Send `req` (its msg is consumed) on an idle server; state SV_ACTIVE. */
void server_start(struct server *s, struct request *req);

/* Send another message within the current exchange (batch getMore). */
void server_send_more(struct server *s, struct evbuffer *msg, int32_t request_id);

/* Finish the current exchange and hand the server back to its pool
 * (through its watchers, below). */
void server_release(struct server *s);

/*
 * Who is told what happens to a connection, the way request_ops tells a
 * request's creator: one table, in order, set by the pool (pool.c: the pin,
 * the sticky order, the pool itself). server.c calls no watcher by name,
 * and nothing above it in pool/ (check-cycles.py).
 * Rules: `released` runs in table order until one takes the server (true);
 * `closed` runs for every entry. NULL entries: not interested.
 */
/* Why a connection closed, as its watchers hear it. */
struct server_closing {
	bool was_connecting; /* it never became ready: a failed connect */
	int code;
	const char *codename, *reason;
};

struct server_watcher {
	const char *name;
	/* A new connection (SV_NEW): set up what the watcher keeps on it. */
	void (*opened)(struct server *s);
	/* The exchange on `s` ended (s->req cleared): true when this watcher
	 * took `s` (it runs the next request, stays, or goes idle). */
	bool (*released)(struct server *s);
	/* `s` closed (its running request has its error already). */
	void (*closed)(struct server *s, const struct server_closing *why);
	/* `s`'s memory goes (deferred free). */
	void (*freed)(struct server *s);
	/* Logged in: `s` is ready for requests (the pool). */
	void (*ready)(struct server *s, const struct backend_info *bi);
	/* An exchange began on `s` (server_start) / ended: released, or
	 * dropped when its connection closed under it (the pool's adaptive
	 * limit). */
	void (*started)(struct server *s, const struct request *req);
	void (*ended)(struct server *s, bool dropped);
	/* A reply to s->req, before its request hears of it (replica sets:
	 * "not primary"). */
	void (*replied)(struct server *s, const bson_t *body);
	/* A moreToCome write is on the wire (s->req cleared); the answer to
	 * the proxy's own fence on `s` (the sticky order). */
	void (*written)(struct server *s);
	void (*fenced)(struct server *s);
};

/* The table, NULL-terminated (pool_init_all). */
void server_set_watchers(const struct server_watcher *const *table);
/* `s` is free again without an exchange ending (its pin ended): tell the
 * watchers as server_release does. */
void server_released(struct server *s);

/* Close: the running request (if any) gets a network error; free deferred. */
void server_close(struct server *s, int code, const char *codename, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void server_set_state(struct server *s, enum server_state st);
void server_free_deferred(void);
/* Called when a server enters SV_JUSTFREE, to schedule server_free_deferred
 * (the janitor installs it; NULL: the caller frees explicitly). */
void server_set_justfree_hook(void (*hook)(void));
