/*
 * pin_int.h — what pin.c and pin_end.c share inside pool/ (nothing else
 * includes it): the pin and its items, the list of all pins, the pin's
 * queue. The rules of load-balanced pins are in pin.h.
 */
#pragma once

#include <bson/bson.h>

#include "core/request.h"
#include "pool/pin.h"
#include "pool/route.h"
#include "pool/waitq.h"

/* One thing a pin holds: a cursor (id, ns) or a transaction (lsid, txn). */
struct pin_item {
	bool txn;
	int64_t id; /* cursor id, or txnNumber */
	char *ns;   /* cursor: "db.coll" */
	bson_t *lsid;
};

#define PIN_IDENTITY_MAX 400

/* A pinned connection. Rules: on `all` while it exists; on its owner's
 * `pins` while the owner is there (owner NULL: its client closed, its pin
 * expired or its cursor found no room; the cleanup requests run, then it is
 * freed); `server->pin` points back. */
struct lb_pin {
	TAILQ_ENTRY(lb_pin) owner_link;
	TAILQ_ENTRY(lb_pin) all_link;
	struct request_owner *owner;
	uint64_t owner_id;
	struct server *server;
	struct pin_item *items;
	int nitems, cap;
	struct waitq waiting;  /* WAITQ_PIN, req->pin == this */
	struct request *rerun; /* REQ_NEW, its cursor found no room: re-submitted
				  after this exchange (pin_after_exchange) */
	bool held;	       /* has held a cursor or transaction (counted) */
	bool expiring;	       /* pin_janitor: idle too long, to be expired */
	/* the owner's identity when pinned (owner ops `identity`); "": unknown,
	 * the pin counts for its own connection only */
	char identity[PIN_IDENTITY_MAX];
};

TAILQ_HEAD(pin_list, lb_pin);
extern struct pin_list pin_all; /* every pin (pin.c) */

/* The pin's connection runs nothing and may take its next request. */
bool pin_server_free(const struct server *s);
/* Queue `req` on the pin (REQ_QUEUED on its own wait queue). */
void pin_enqueue(struct lb_pin *pin, struct request *req);
/* A former waiter of a pin that ended goes back to pool_submit
 * (waitq_resubmit's callback). */
void pin_resubmit(struct request *req, void *arg);
/* pin_end.c: a getMore of a cursor killed when its pin expired gets 43
 * with the reason; true: answered. */
bool pin_expired_refuse(struct request *req);
/* pin_end.c: queue a killCursors of cursor `id` in `ns` ("db.coll") on the
 * pinned connection (a proxy cleanup command, no owner). */
void pin_queue_kill(struct lb_pin *pin, int64_t id, const char *ns);
/* `pin` leaves its owner's list (o->route, pool/route.h), if it has one. */
void pin_unlink_owner(struct lb_pin *pin);
/* The request wants a connection of its own (a new pin). */
static inline bool pin_wants(const struct request *req)
{
	return req->route->pin == NULL && req->route->pin_note != NULL &&
	       (req->route->pin_note->op & PIN_OP_WANT);
}
/* A cursor-opening command not routed to a pin (it may open a new one). */
static inline bool pin_may_open(const struct request *req)
{
	return req->route->pin == NULL && req->route->pin_note != NULL &&
	       (req->route->pin_note->op & PIN_OP_OPEN);
}
/* pin_bounds.c: */
/* Room for one more pin in `p` (the gate's GATE_PIN). */
bool pin_pool_room(struct pool *p);
/* o's identity may hold one more pin. */
bool pin_owner_room(const struct request_owner *o);
/* Why o may not keep one more pin of p (why NULL: only whether); false: it may. */
bool pin_no_room(const struct request_owner *o, struct pool *p, char *why, size_t len);
/* o's identity (owner ops `identity`), "" when unknown. */
void pin_owner_identity(const struct request_owner *o, char *out, size_t len);
