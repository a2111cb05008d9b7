/*
 * pool_pause.h — maintenance on the backend side of pool/: pause (stop starting
 * requests, let the running ones finish, close every backend connection as
 * it becomes idle, hold new requests in the pools' wait queues), resume
 * (reopen and dispatch what waited, in order) and reconnect (replace every
 * backend connection as it becomes idle, failing nothing).
 *
 * Rules:
 *  - A pool is paused when the whole proxy is, or its member pool is (a
 *    per-user child pool follows its member). pool/gate.c asks
 *    pool_paused(): nothing is dispatched to a paused pool, nothing
 *    connects, the janitor does not refill it, an idle or released
 *    connection of it is closed.
 *  - Requests held by a pause wait on the pool's own queue (WAITQ_POOL) up
 *    to pause_timeout_ms counted from the pause (or their arrival, if
 *    later); queue_timeout_ms does not run during a pause and counts again
 *    from the resume. A request that outwaits pause_timeout_ms was never
 *    sent and gets ExceededTimeLimit (262) with RetryableError and
 *    RetryableWriteError: safe to retry, writes included.
 *  - Replica sets: while every pool is paused, a request waiting for a
 *    member (the monitor lost the restarted one: WAITQ_SELECT) waits up to
 *    the larger of serverSelectionTimeoutMS and pause_timeout_ms, and past
 *    it gets the same ExceededTimeLimit; its clock restarts at pause and
 *    resume as the pools' waiters' do.
 *  - Requests bound to a connection that is still open (sticky order after
 *    an unacknowledged write, load-balanced pins) run there: the pause
 *    counts them as in flight and is "paused" once no connection is left.
 *  - Reconnect raises the pool's generation; a connection of an older
 *    generation is closed when it is next idle (pool/gate.c, GATE_KEEP and
 *    GATE_TAKE_NEXT) and the pool opens new ones for its waiters.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct pool;
struct request;

/* What a pause or resume touched, and where it stands. */
struct pause_report {
	int pools;	/* member pools concerned (child pools follow) */
	int closed;	/* idle connections closed now */
	int in_flight;	/* connections still running an exchange (or pinned) */
	int connecting; /* connections still logging in (closed once ready) */
	int waiting;	/* requests held in the pools' queues */
	bool paused;	/* every connection of the pools is closed */
	uint64_t since_usec;
};

/* Is p (or its member pool, or the whole proxy; p NULL: the whole proxy) paused? */
bool pool_paused(const struct pool *p);

/* Pause every pool (member NULL) or one member pool and its child pools. */
void pool_pause(struct pool *member, struct pause_report *r);
/* Resume what pool_pause(member) paused; false when that is not paused
 * (or member is named while the whole proxy is paused). */
bool pool_resume(struct pool *member, struct pause_report *r) __attribute__((warn_unused_result));
/* Where the pause of member (NULL: all) stands, without changing it. */
void pool_pause_progress(struct pool *member, struct pause_report *r);

/* Replace every connection of every pool (member NULL) or of one member
 * and its child pools; the idle ones are closed now (returned). */
int pool_reconnect(struct pool *member);

/* The member pool called `name` (host:port), or NULL. */
struct pool *pool_by_name(const char *name);

/* The queue limit (µs) of p's waiters: pause_timeout_ms while paused. */
uint64_t pool_pause_limit_usec(const struct pool *p);

/* Held past pause_timeout_ms: ExceededTimeLimit, never sent (the rules above). */
void pool_refuse_paused(struct request *req);

/* pool_janitor: log once that a pause is complete. */
void pool_pause_janitor(void);
