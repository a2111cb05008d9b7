/*
 * gate.h — the one admission decision of pool/: may work start on a pool,
 * or on a given connection, now. Every dispatch and every connect asks
 * here; pool_size is read here only, so a new limit (an adaptive
 * concurrency limit per pool) is one more term in pool_gate.
 *
 *   step           asks                                   terms
 *   GATE_DISPATCH  may `req` start on a free connection   `p` not paused; in flight below
 *                  of `p`                                 the adaptive limit
 *                                                         (pool_gate_room); its client
 *                                                         reads its replies; not behind
 *                                                         its client's unacked write
 *                                                         (sticky order); pin bounds
 *   GATE_RUN_HERE  may `req` start on `s`, the connection its client reads its replies
 *                  it waits for (sticky, pinned)
 *   GATE_CONNECT   may `p` open one more connection for   not paused; below pool_size and
 *                  its waiters                            the adaptive limit; not backing
 *                                                         off; max_backend_conn (evicting
 *                                                         another pool's oldest idle
 *                                                         connection)
 *   GATE_REFILL    the janitor's connects for waiters     not shutting down; a member the
 *                                                         topology lists; as CONNECT
 *   GATE_MINIMUM   the janitor's connects for             as REFILL; p usable; below
 *                  min_pool_size                          min_pool_size; max_backend_conn
 *                                                         without eviction
 *   GATE_KEEP      may idle connection `s` stay           its pool not paused; of its pool's
 *                                                         generation (reconnect); its pool
 *                                                         within pool_size
 *   GATE_TAKE_NEXT may `s` (just free) take its pool's    as KEEP; max_backend_conn: a
 *                  next request or go idle                pool with none gets its slot
 *   GATE_PIN       may `p` hold one more pinned           fewer than pool_size - 1 pins
 *                  connection
 *
 * Pause and reconnect (pool/pool_pause.h) are the terms "not paused" and
 * "of its pool's generation". Rules: true means yes. For KEEP and TAKE_NEXT false means the gate
 * closed `s` with the reason. CONNECT may close another pool's idle
 * connection to make room (max_backend_conn).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/globals.h"
#include "core/request.h"
#include "pool/limit.h"
#include "pool/pool.h"
#include "pool/route.h"

struct pool;
struct request;
struct server;

enum gate_step {
	GATE_DISPATCH,
	GATE_RUN_HERE,
	GATE_CONNECT,
	GATE_REFILL,
	GATE_MINIMUM,
	GATE_KEEP,
	GATE_TAKE_NEXT,
	GATE_PIN,
};

bool pool_gate(enum gate_step step, struct pool *p, const struct request *req, struct server *s)
    __attribute__((warn_unused_result));

/* Inline: field and setting reads, no call between files
 * (check-cycles.py). */

/* The connections p may hold now (pool_size), for messages and stats. */
static inline int64_t pool_gate_size(const struct pool *p)
{
	(void)p;
	return g.cfg.pool_size;
}

/* Requests that may be in flight on p now: its adaptive limit
 * (adaptive_concurrency, pool/limit.h), else pool_size. */
static inline int pool_gate_limit(const struct pool *p)
{
	int lim = limit_value(&p->limit);

	if (!g.cfg.adaptive_concurrency || lim > pool_gate_size(p))
		return (int)pool_gate_size(p);
	return lim;
}

/* The pool's own term of GATE_DISPATCH: in flight below pool_gate_limit. */
static inline bool pool_gate_room(const struct pool *p)
{
	return p->inflight < pool_gate_limit(p);
}

/* A term of GATE_DISPATCH for the batcher's merged queries: an open one
 * (route->hold_until_usec set, pool/batch.c) starts once it holds its share
 * of p's lookups, queued and in flight over what may run at once, or once
 * its hold has passed, or when nothing else of p is in flight. */
static inline bool pool_gate_share(const struct request *req, const struct pool *p)
{
	const struct req_route *r = req->route;

	if (r->hold_until_usec == 0 || g.now_usec >= r->hold_until_usec || p->inflight == 0)
		return true;
	return (int64_t)r->ids * pool_gate_limit(p) >= (int64_t)r->ids + p->inflight_ids;
}
