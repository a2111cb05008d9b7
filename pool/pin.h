/*
 * pin.h — load-balanced mode (specification load-balancers.md): a cursor or
 * a transaction of a client that said loadBalanced: true in its hello runs
 * on ONE backend connection for its whole life.
 *
 * Rules:
 *  - A load-balanced client's find/aggregate/list* runs on an ordinary pooled
 *    connection; only a reply with a non-zero cursor id makes that
 *    connection the client's pin (id 0: released as usual, no slot taken).
 *    A transaction's first command (lsid + txnNumber + startTransaction)
 *    waits for room and pins its connection before it runs.
 *    Every getMore/killCursors of that cursor and every command of that
 *    transaction waits on the pin's own queue and runs there, one at a time.
 *  - A pin ends when it holds nothing any more: cursor exhausted (id 0),
 *    killed, gone on the backend (43 CursorNotFound: the cursor timed out),
 *    transaction committed or aborted. The connection goes back to the pool.
 *  - A pinned connection is SV_ACTIVE: no other request uses it.
 *  - Bounds (the pool is never starved): at most lb_max_pinned_per_client
 *    pins per client identity (owner ops `identity`: the logged-in user, else
 *    the hello's application name, else the connection alone) and at most
 *    pool_size - 1 pins per pool, so one connection always serves everybody
 *    else. A cursor or transaction of a connection that has a pin, beyond a
 *    bound, runs on one of its own pins (queued behind its exchange there). A
 *    cursor opened on an ordinary connection with no room left is killed
 *    there (its reply dropped) and the command waits, as a startTransaction
 *    with no room does, in the pool's queue (skipped, keeping its place)
 *    until a pin ends, then runs again with its pin reserved; after
 *    queue_timeout_ms it gets 462 with the overload labels (a read, or
 *    nothing sent: retrying is safe). A command over PIN_RETRY_MAX_BYTES, or
 *    one that met room at submit and lost it by its reply, gets the 462 at
 *    once. Never a deadlock: every waiter either gets a pin freed by an
 *    exchange that is running or idle on a client's pin, or times out.
 *    A request waiting on a pin's own queue (pool/waitq.h, WAITQ_PIN) also
 *    gets the queue timeout (462) after queue_timeout_ms when the pin never
 *    frees; the proxy's own cleanup commands there do not expire.
 *  - A cursor pin idle (nothing running or waiting) past
 *    lb_pin_idle_timeout_ms expires (janitor): its cursors are killed on it,
 *    it goes back to the pool, and the owner's getMore gets 43 saying so.
 *    Transaction pins do not expire (they end at commit/abort or close).
 *  - The client closes: its waiting requests are dropped; the proxy kills
 *    the pin's cursors and aborts its transactions ON the pinned connection,
 *    then releases it. The backend closes a pinned connection: the requests
 *    waiting on it fail with a network error (what a driver sees on a pinned
 *    connection) and the pin ends.
 *  - Only for load-balanced clients; others keep the ordinary routing.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/list.h"
#include "core/request.h"

struct pool;
struct server;
struct server_watcher;

/* What a request's reply does to its pin (struct pin_note: op bits). */
enum {
	PIN_OP_OPEN = 1,      /* may open a cursor: pins its connection */
	PIN_OP_GETMORE = 2,   /* getMore of `cursor`: id 0 / 43 ends the cursor */
	PIN_OP_KILL = 4,      /* killCursors: the ids killed leave the pin */
	PIN_OP_TXN_START = 8, /* startTransaction: the transaction pins */
	PIN_OP_TXN_END = 16,  /* commit/abortTransaction: the transaction ends */
	PIN_OP_WANT = 32,     /* needs a connection of its own (a new pin) */
};

/* A load-balanced request's routing note (req->pin_note); freed with it. */
struct pin_note {
	unsigned op;
	int64_t cursor; /* PIN_OP_GETMORE / KILL: the (first) cursor id */
	bson_t *lsid;	/* transaction commands: the session id document */
	int64_t txn_number;
	/* PIN_OP_OPEN submitted with no room for a new pin: a copy of its
	 * message (at most PIN_RETRY_MAX_BYTES), to run it again with a pin
	 * reserved if its reply leaves a cursor open; NULL: none kept */
	struct evbuffer *retry_msg;
};

#define PIN_RETRY_MAX_BYTES 16384

/* The client's first hello: is it load-balanced? */
void pin_note_hello(struct request_owner *o, const bson_t *hello);

/* A load-balanced client's forwarded request: find its pin or note that it
 * may need one. */
void pin_route(struct request *req, const bson_t *body, bool in_txn);
void pin_note_free(struct pin_note *n);

/* pool_submit, `p` chosen: true when the request was taken (queued on or
 * dispatched to a pin). */
bool pin_submit(struct request *req, struct pool *p);
/* May `req` be dispatched to a fresh connection of `p` now (pin bounds)? */
bool pin_may_dispatch(const struct request *req, struct pool *p);
/* A waiting request held back only by the pool's pin bound: refuse it. */
bool pin_blocked(const struct request *req);
void pin_refuse_timeout(struct request *req);
/* dispatch: `req` was started on `s` (creates its pin when it wants one). */
void pin_started(struct server *s, struct request *req);
/* A reply to `req` on `s`, before it goes to the client; false: answered
 * here (its cursor found no room: killed, 462), only release `s`. */
bool pin_on_reply(struct server *s, struct request *req, const bson_t *body)
    __attribute__((warn_unused_result));
/* A pinned server's watcher (server.h): its releases and its close. */
extern const struct server_watcher pin_watcher;
/* server_release of a pinned server: next waiter, stay, or release. */
void pin_after_exchange(struct server *s);
/* o's output drained: run its pins' waiters. */
void pin_owner_kick(struct request_owner *o);
/* o's client closes (its requests were abandoned already). */
void pin_owner_closed(struct request_owner *o);
/* The janitor: expire cursor pins idle past lb_pin_idle_timeout_ms. */
void pin_janitor(uint64_t now);
/* Is cursor `id` of client `owner_id` held (and killed) by a pin, or was it
 * killed when its pin expired? */
bool pin_holds_cursor(uint64_t owner_id, int64_t id);

/* Gauges. */
int pin_count(void);
int pin_pool_count(const struct pool *p);
