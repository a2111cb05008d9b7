/*
 * sticky.h — a client's operations run in the order it sent them, also
 * across unacknowledged (moreToCome) writes.
 *
 * MongoDB runs the operations of one connection in order, but a moreToCome
 * write gets no reply: the proxy cannot tell when the backend has run it.
 * So from the moment such a write is dispatched to a backend connection its
 * client is "sticky" to that connection:
 *  - the client's next requests wait on that server's own queue (not the
 *    shared queue, not the batcher), counted in max_queue, expired by
 *    queue_timeout_ms, and run there one at a time in arrival order;
 *  - a request that arrives while the client's moreToCome write still waits
 *    in the shared queue waits behind it (the pool does not dispatch it) and
 *    moves to the sticky queue when the write is dispatched;
 *  - the stickiness ends when an acknowledged exchange completes on that
 *    server: a request of the client or, when the client has nothing ready
 *    to run after its write is on the wire, a {ping: 1} fence the proxy sends
 *    itself (so an idle client never pins a connection);
 *  - when the server closes, its waiting requests (never sent) go back to
 *    the pool: what was sent on that connection has run or never will.
 * While sticky the server is SV_ACTIVE: it serves nobody else.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct pool;
struct request_owner;
struct request;
struct server;
struct server_watcher;

/* The server `req` must wait on (its client is sticky to it), or NULL. */
struct server *sticky_target(const struct request *req);
/* Does an earlier moreToCome write of req's client still wait in the shared
 * queue? Then req must not be dispatched before it. */
bool sticky_behind_unacked(const struct request *req);

/* The servers' watcher (server.h): a new server's (empty) queue; a sticky
 * server's releases; a closed one's waiting requests go back to the pool. */
extern const struct server_watcher sticky_watcher;
/* `req` waits on s's queue (WAITQ_STICKY; pool_unqueue takes it off). */
void sticky_enqueue(struct server *s, struct request *req);

/* `req` was just started on `s`. */
void sticky_started(struct server *s, struct request *req);
/* The moreToCome write on `s` is on the wire (s->req is cleared). */
void sticky_written(struct server *s);
/* The fence on `s` was answered. */
void sticky_fence_reply(struct server *s);
/* An acknowledged exchange finished on `s`: end stickiness, back to the pool. */
void sticky_release(struct server *s);
/* `o`'s client is closing (its requests were abandoned already). */
void sticky_owner_closed(struct request_owner *o);

/* Clients currently sticky (stats gauge). */
int sticky_clients(void);
