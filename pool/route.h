/*
 * route.h — pool/'s part of every request (req->route, a request part:
 * core/request.h request_part_set): where the request goes, what it waits
 * on, what routing noted about it. Allocated zeroed with the request;
 * pool_route_fini (route.c) frees what pool/ attached here, so core/ never
 * frees pool/'s memory. A new pool feature adds its field here, not in
 * core/request.h.
 */
#pragma once

#include <bson/bson.h>
#include <stdint.h>

#include "core/request.h"
#include "core/session.h"

struct pool;
struct server;
struct waitq;
struct batch;
struct lookup;
struct pool_user;
struct lb_pin;
struct pin_note;
struct backend_info;

struct req_route {
	struct pool *pool;     /* the pool it was submitted to (or waits on) */
	struct server *server; /* REQ_RUNNING: the connection it runs on */
	struct waitq *waitq;   /* REQ_QUEUED: the wait queue it is on (pool/waitq.h) */
	uint64_t round;	       /* fair-queuing round (pool_dispatch.c) */
	uint64_t started_usec; /* sent to `server` */
	/* lsid, txnNumber, ... as the router parsed them (core/session.h); the
	 * two document pointers are valid during routing only. */
	struct req_session session;
	/* pool/select.c (replica sets): the member it must go to (its cursor's,
	 * its transaction's), its $readPreference (NULL: primary; owned here),
	 * its slot + 1 in the transaction pin table. */
	struct pool *route_pool;
	bson_t *read_pref;
	int txn_pin;
	/* auth_pool_mode = per_user: the logged-in user it runs as (pool/
	 * pool_users.h; the owner or batch holds the reference), NULL: the
	 * proxy's own identity. */
	struct pool_user *user;
	/* pool/pin.c (load-balanced clients): the pinned connection it runs on
	 * or waits for (REQ_QUEUED on the pin's queue), and its routing note
	 * (owned here). */
	struct lb_pin *pin;
	struct pin_note *pin_note;
	struct batch *batch;   /* the batch it runs (merged query) or belongs to */
	struct lookup *lookup; /* REQ_BATCHED: its ids (pool/batch.c) */
	int ids;	       /* a lookup's or merged query's ids (pool/limit.h), 0: other */
	/* an open merged query held for its share until then (batch_hold_us,
	 * pool_gate_share), 0: not held; its `ids` count its members' so far */
	uint64_t hold_until_usec;
	/* REQ_HELLO_WAIT: answers it once the backend's limits are known */
	void (*hello_answer)(struct request *req, const struct backend_info *bi);
};

/* pool/'s part of a request owner (a client: o->route, core/request.h):
 * allocated on first use by owner_route(), freed by pool_owner_fini when
 * the owner goes. Readers of an owner that may have none use the
 * owner_* accessors, which answer "nothing" for NULL. */
struct owner_route {
	struct server *sticky; /* pool/sticky.c: connection of its unacknowledged write */
	bool load_balanced;    /* pool/pin.c: said loadBalanced: true in its hello */
	TAILQ_HEAD(owner_pins, lb_pin) pins; /* pool/pin.c: its pinned connections */
	int n_pins;
};

struct owner_route *owner_route(struct request_owner *o);
struct server *owner_sticky(const struct request_owner *o);
bool owner_load_balanced(const struct request_owner *o);
int owner_pin_count(const struct request_owner *o);
/* The owner's gone: frees its part (after pin_owner_closed and
 * sticky_owner_closed have let go of what it held). */
void pool_owner_fini(struct request_owner *o);

/* The part's description for request_part_set(REQUEST_PART_ROUTE, ...). */
extern const struct request_part pool_route_part;
