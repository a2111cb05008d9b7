/*
 * pin_bounds.c — who may hold one more load-balanced pin (rules in pin.h):
 * at most lb_max_pinned_per_client per client identity over all its
 * connections, at most pool_size - 1 per pool (the pool gate's GATE_PIN),
 * and the 462 a waiter held back by them gets after queue_timeout_ms.
 * pin.c asks these when a request is submitted, started and answered.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/stats.h"
#include "pool/gate.h"
#include "pool/pin_int.h"
#include "pool/pool.h"
#include "pool/route.h"
#include "pool/pool_ops.h"

bool pin_pool_room(struct pool *p)
{
	return pool_ops->gate(GATE_PIN, p, NULL, NULL);
}

void pin_owner_identity(const struct request_owner *o, char *out, size_t len)
{
	if (o->ops == NULL || o->ops->identity == NULL || !o->ops->identity(o, out, len))
		out[0] = '\0';
}

/* Pins held by o's client identity over all its connections (o's own only
 * when its identity is unknown); `id` gets the identity. */
static int identity_pins(const struct request_owner *o, char *id, size_t len)
{
	const struct lb_pin *pin;
	int n = 0;

	pin_owner_identity(o, id, len);
	if (id[0] == '\0')
		return owner_pin_count(o);
	TAILQ_FOREACH(pin, &pin_all, all_link)
		if (pin->owner == o || (pin->owner != NULL && strcmp(pin->identity, id) == 0))
			n++;
	return n;
}

bool pin_owner_room(const struct request_owner *o)
{
	char id[PIN_IDENTITY_MAX];

	return identity_pins(o, id, sizeof(id)) < g.cfg.lb_max_pinned_per_client;
}

/* Why o may not keep one more pin of p; false: it may. */
bool pin_no_room(const struct request_owner *o, struct pool *p, char *why, size_t len)
{
	char id[PIN_IDENTITY_MAX];
	int n = identity_pins(o, id, sizeof(id));

	if (n >= g.cfg.lb_max_pinned_per_client)
		snprintf(why, len,
			 "%s already holds %d pinned connections (lb_max_pinned_per_client = "
			 "%" PRId64 ")",
			 id[0] != '\0' ? id : "this connection", n, g.cfg.lb_max_pinned_per_client);
	else if (p != NULL && !pin_pool_room(p))
		snprintf(why, len,
			 "%d of %s's pool_size = %" PRId64 " connections are pinned (at most "
			 "pool_size - 1)",
			 pin_pool_count(p), pool_name(p), pool_gate_size(p));
	else
		return false;
	return true;
}

bool pin_may_dispatch(const struct request *req, struct pool *p)
{
	return !pin_wants(req) || req->owner == NULL ||
	       (pin_pool_room(p) && pin_owner_room(req->owner));
}

bool pin_blocked(const struct request *req)
{
	return pin_wants(req) && req->owner != NULL && req->route->pool != NULL &&
	       !pin_may_dispatch(req, req->route->pool);
}

void pin_refuse_timeout(struct request *req)
{
	char why[300], msg[600];

	STAT_INC(lb_pin_refusals);
	if (req->owner == NULL || !pin_no_room(req->owner, req->route->pool, why, sizeof(why)))
		snprintf(why, sizeof(why), "no pinned connection ended");
	snprintf(msg, sizeof(msg),
		 "mongoplex: load-balanced %s needs a backend connection of its own and %s; "
		 "waited queue_timeout_ms = %" PRId64 " ms, retry later",
		 (req->route->pin_note->op & PIN_OP_TXN_START) ? "transaction" : "cursor", why,
		 g.cfg.queue_timeout_ms);
	req->ops->error(req, MP_ERR(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED), msg,
			MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED));
}
