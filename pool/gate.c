/*
 * gate.c — the one admission decision of pool/ (the table in gate.h): each
 * step is the conjunction of its terms, in the order they are cheap and
 * free of side effects (max_backend_conn's eviction comes last).
 */
#include "pool/gate.h"

#include <inttypes.h>

#include "core/errors.h"
#include "core/globals.h"
#include "pool/pin.h"
#include "pool/pool.h"
#include "pool/pool_pause.h"
#include "pool/pool_users.h"
#include "pool/sticky.h"
#include "pool/topology.h"

/* Terms on the request. */
static bool owner_reads(const struct request *req)
{
	return request_owner_may_dispatch(req->owner);
}

static bool may_dispatch(const struct request *req, struct pool *p)
{
	if (p != NULL && pool_paused(p))
		return false;	/* held in the queue until resume (pool/pool_pause.h) */
	if (req->owner == NULL) /* the proxy's own: a merged batch waits for its share */
		return p == NULL || pool_gate_share(req, p);
	return owner_reads(req) && !sticky_behind_unacked(req) && pin_may_dispatch(req, p);
}

/* Terms on the pool. */
static bool below_size(const struct pool *p)
{
	return pool_live(p) < pool_gate_size(p);
}

/* Paused: no new connection, except one for the clients' handshakes on a
 * pool that never learnt its backend's hello (a worker restarted during a
 * pause, proxy/wctl_master.c); keep() closes it once idle. */
static bool may_connect(const struct pool *p)
{
	bool hello_only = !p->info.known && p->hello_waiters.n > 0 && pool_live(p) == 0;

	return (!pool_paused(p) || hello_only) && below_size(p) &&
	       pool_live(p) < pool_gate_limit(p) && g.now_usec >= p->next_connect_usec;
}

static bool janitor_may(const struct pool *p)
{
	return !g.shutting_down && !(p->parent == NULL && topology_active() && !p->rs_present);
}

/* Terms on a connection: false closes it. */
static bool keep(struct server *s)
{
	if (pool_paused(s->pool)) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "paused by an admin");
		return false;
	}
	if (s->generation != s->pool->generation) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "replaced (reconnect asked by an admin)");
		return false;
	}
	if (pool_live(s->pool) <= pool_gate_size(s->pool))
		return true;
	server_close(s, MP_ERR(HOST_UNREACHABLE), "pool shrank (pool_size = %" PRId64 ")",
		     pool_gate_size(s->pool));
	return false;
}

bool pool_gate(enum gate_step step, struct pool *p, const struct request *req, struct server *s)
{
	switch (step) {
	case GATE_DISPATCH:
		return pool_gate_room(p) && may_dispatch(req, p);
	case GATE_RUN_HERE:
		return owner_reads(req);
	case GATE_CONNECT:
		return may_connect(p) && pool_cap_room(p, true);
	case GATE_REFILL:
		return janitor_may(p) && may_connect(p) && pool_cap_room(p, true);
	case GATE_MINIMUM:
		return janitor_may(p) && p->usable && pool_live(p) < g.cfg.min_pool_size &&
		       may_connect(p) && pool_cap_room(p, false);
	case GATE_KEEP:
		return keep(s);
	case GATE_TAKE_NEXT:
		/* max_backend_conn: a pool with no connection gets this slot */
		return keep(s) && !pool_cap_retire(s);
	case GATE_PIN:
		return pin_pool_count(p) < pool_gate_size(p) - 1;
	}
	return false;
}
