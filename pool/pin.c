/*
 * pin.c — load-balanced mode: cursors and transactions pinned to one
 * backend connection, bounded per client identity and per pool (rules in
 * pin.h).
 *
 *   LB client's find ─▶ pin_route (PIN_OP_OPEN) ─▶ pool_submit ─▶ pin_submit
 *        identity or pool at its bound, this connection has a pin
 *                               ─▶ queued on its least busy pin
 *        otherwise ─▶ the pool's ordinary path, no pin reserved
 *        (no room at submit: a copy of the message is kept, retry_msg)
 *   its reply ─▶ pin_on_reply: cursor id 0 ─▶ released as usual
 *        id != 0, bounds allow ─▶ pin_new: that connection becomes the pin
 *        id != 0, no room ─▶ cursor killed there (owner-less pin); with a
 *                            copy: re-submitted wanting a pin (waits for
 *                            room as a transaction does); else 462
 *   startTransaction (PIN_OP_TXN_START|WANT) ─▶ waits for room in the pool's
 *        queue (pin_may_dispatch); pin_started pins the server that runs it
 *   reply on a pin ─▶ cursor id != 0 kept, id 0 / 43 / killed / txn end
 *        dropped ─▶ server_release ─▶ pin_after_exchange: next waiter, stay
 *        pinned (idle), or release to the pool when empty
 *   getMore / txn command ─▶ pin_route finds the pin ─▶ its queue
 *   janitor ─▶ pin_janitor: a cursor pin idle past lb_pin_idle_timeout_ms is
 *        detached, its cursors killed on it and remembered (expired ring):
 *        the owner's getMore then gets 43 with the reason
 * The idle expiry and the cleanup commands of a closing client live in
 * pin_end.c, the bounds on who may hold a pin in pin_bounds.c; this file
 * owns the pins, their queue and replies.
 */
#include "pool/pin.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/wire.h"
#include "core/xalloc.h"
#include "pool/gate.h"
#include "pool/pool.h"
#include "pool/server.h"
#include "pool/pin_int.h"
#include "pool/route.h"
#include "pool/sticky.h"
#include "pool/pool_ops.h"

struct pin_list pin_all = TAILQ_HEAD_INITIALIZER(pin_all);
static int npins;

int pin_count(void)
{
	return npins;
}

int pin_pool_count(const struct pool *p)
{
	const struct lb_pin *pin;
	int n = 0;

	TAILQ_FOREACH(pin, &pin_all, all_link)
		if (pin->server->pool == p)
			n++;
	return n;
}

/* ---- reading commands and replies ------------------------------------ */

void pin_note_hello(struct request_owner *o, const bson_t *hello)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, hello, "loadBalanced") && bson_iter_as_bool(&it) &&
	    !owner_load_balanced(o)) {
		owner_route(o)->load_balanced = true;
		STAT_INC(lb_clients);
	}
}

static bool read_int64(const bson_iter_t *it, int64_t *v)
{
	if (!BSON_ITER_HOLDS_INT64(it) && !BSON_ITER_HOLDS_INT32(it) && !BSON_ITER_HOLDS_DOUBLE(it))
		return false;
	*v = bson_iter_as_int64(it);
	return true;
}

static bool opens_cursor(const char *cmd)
{
	static const char *const names[] = {"find", "aggregate", "listCollections", "listIndexes",
					    NULL};

	for (int i = 0; names[i] != NULL; i++)
		if (strcasecmp(cmd, names[i]) == 0)
			return true;
	return false;
}

/* From the session fields the router parsed (req->session); the lsid is
 * copied (the note outlives the body). */
static void read_txn(struct pin_note *n, const struct req_session *ss)
{
	if (ss->has_lsid)
		n->lsid = bson_new_from_data(ss->lsid_doc, ss->lsid_len);
	n->txn_number = ss->txn_numeric ? ss->txn_number : 0;
	if (ss->start_txn)
		n->op |= PIN_OP_TXN_START | PIN_OP_WANT;
}

/* The first cursor id of a getMore (its value) or killCursors (`cursors`). */
static bool first_cursor(const char *cmd, const bson_t *body, int64_t *id)
{
	bson_iter_t it, arr;

	if (strcasecmp(cmd, "getMore") == 0)
		return bson_iter_init(&it, body) && bson_iter_next(&it) && read_int64(&it, id);
	return bson_iter_init_find(&it, body, "cursors") && BSON_ITER_HOLDS_ARRAY(&it) &&
	       bson_iter_recurse(&it, &arr) && bson_iter_next(&arr) && read_int64(&arr, id);
}

static bool same_lsid(const bson_t *a, const bson_t *b)
{
	return a != NULL && b != NULL && a->len == b->len &&
	       memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

static struct lb_pin *find_pin(const struct request_owner *o, const struct pin_note *n, bool txn)
{
	struct lb_pin *pin;

	if (o->route == NULL)
		return NULL;
	TAILQ_FOREACH(pin, &o->route->pins, owner_link)
		for (int i = 0; i < pin->nitems; i++) {
			const struct pin_item *it = &pin->items[i];

			if (txn && it->txn && it->id == n->txn_number &&
			    same_lsid(it->lsid, n->lsid))
				return pin;
			if (!txn && !it->txn && it->id == n->cursor)
				return pin;
		}
	return NULL;
}

void pin_route(struct request *req, const bson_t *body, bool in_txn)
{
	struct request_owner *o = req->owner;
	struct pin_note *n;

	if (o == NULL || !owner_load_balanced(o) || req->more_to_come)
		return;
	n = xcalloc(1, sizeof(*n));
	req->route->pin_note = n;
	if (in_txn) {
		read_txn(n, &req->route->session);
		if (strcasecmp(req->cmd, "commitTransaction") == 0 ||
		    strcasecmp(req->cmd, "abortTransaction") == 0)
			n->op |= PIN_OP_TXN_END;
		if (!(n->op & PIN_OP_TXN_START))
			req->route->pin = find_pin(o, n, true);
	}
	if (strcasecmp(req->cmd, "getMore") == 0 || strcasecmp(req->cmd, "killCursors") == 0) {
		if (first_cursor(req->cmd, body, &n->cursor)) {
			n->op |=
			    req->cmd[0] == 'g' || req->cmd[0] == 'G' ? PIN_OP_GETMORE : PIN_OP_KILL;
			if (req->route->pin == NULL)
				req->route->pin = find_pin(o, n, false);
		}
	} else if (opens_cursor(req->cmd)) {
		n->op |= PIN_OP_OPEN; /* pinned only if its reply leaves a cursor open */
	}
	if (req->route->pin != NULL)
		n->op &= ~(unsigned)PIN_OP_WANT;
}

void pin_note_free(struct pin_note *n)
{
	if (n == NULL)
		return;
	if (n->lsid != NULL)
		bson_destroy(n->lsid);
	if (n->retry_msg != NULL)
		evbuffer_free(n->retry_msg);
	free(n);
}

/* ---- the pin's queue ------------------------------------------------- */

bool pin_server_free(const struct server *s)
{
	return s->req == NULL && s->fence_id == 0 && s->state == SV_ACTIVE;
}

/* A pin's waiter expires like any other: queue_timeout_ms. */
static const struct waitq_ops pin_waitq_ops = {
    .kind = WAITQ_PIN,
    .limit_usec = pool_ops_queue_limit_usec,
    .owner_clock = true,    /* its own client is the cause */
    .keep_ownerless = true, /* cleanup: runs after the exchange it follows */
    .expired = pool_ops_refuse_timeout,
};

void pin_enqueue(struct lb_pin *pin, struct request *req)
{
	req->route->pin = pin;
	req->route->pool = pin->server->pool;
	req->enqueued_usec = g.now_usec;
	waitq_add(&pin->waiting, req);
}

/* Run the pin's first waiter that may go; false: none. */
static bool run_next(struct lb_pin *pin)
{
	struct request *req;

	TAILQ_FOREACH(req, &pin->waiting.q.list, queue_link)
		if (pool_ops->gate(GATE_RUN_HERE, pin->server->pool, req, pin->server)) {
			pool_ops->dispatch(pin->server, req);
			return true;
		}
	return false;
}

/* The client's pin with the fewest waiters. */
static struct lb_pin *least_busy(const struct request_owner *o)
{
	struct lb_pin *pin, *best = NULL;

	if (o->route == NULL)
		return NULL;
	TAILQ_FOREACH(pin, &o->route->pins, owner_link)
		if (best == NULL || waitq_count(&pin->waiting) + (pin->server->req != NULL) <
					waitq_count(&best->waiting) + (best->server->req != NULL))
			best = pin;
	return best;
}

/* A cursor-opening command submitted with no room for a new pin: keep its
 * message, so that it can wait for room if its reply opens a cursor. */
static void keep_retry_copy(struct request *req)
{
	struct pin_note *n = req->route->pin_note;
	size_t len = req->msg != NULL ? evbuffer_get_length(req->msg) : 0;

	if (n->retry_msg != NULL || len == 0 || len > PIN_RETRY_MAX_BYTES)
		return;
	n->retry_msg = xevbuffer_new();
	evbuffer_add(n->retry_msg, evbuffer_pullup(req->msg, -1), len);
}

bool pin_submit(struct request *req, struct pool *p)
{
	struct lb_pin *pin = req->route->pin;

	if (pin_expired_refuse(req))
		return true;
	if (pin == NULL && (pin_wants(req) || pin_may_open(req)) && req->owner != NULL &&
	    owner_pin_count(req->owner) > 0 && (!pin_owner_room(req->owner) || !pin_pool_room(p))) {
		pin = least_busy(req->owner); /* at a bound: share one of its own pins */
		req->route->pin_note->op &= ~(unsigned)PIN_OP_WANT;
		STAT_INC(lb_pin_shared);
	}
	if (pin == NULL) {
		if (pin_wants(req) && !pin_may_dispatch(req, p))
			STAT_INC(lb_pin_waits);
		if (pin_may_open(req) && req->owner != NULL && pin_no_room(req->owner, p, NULL, 0))
			keep_retry_copy(req);
		return false;
	}
	pin_enqueue(pin, req);
	if (pin_server_free(pin->server))
		run_next(pin);
	return true;
}

void pin_owner_kick(struct request_owner *o)
{
	struct lb_pin *pin;

	if (o->route == NULL)
		return;
	TAILQ_FOREACH(pin, &o->route->pins, owner_link)
		if (pin_server_free(pin->server))
			run_next(pin);
}

/* ---- pins ------------------------------------------------------------- */

/* `s` becomes a pin of `o` (NULL: owner-less, for cleanup commands only). */
static struct lb_pin *pin_new(struct server *s, struct request_owner *o)
{
	struct lb_pin *pin = xcalloc(1, sizeof(*pin));

	pin->server = s;
	waitq_init(&pin->waiting, &pin_waitq_ops);
	TAILQ_INSERT_TAIL(&pin_all, pin, all_link);
	npins++;
	s->pin = pin;
	if (o == NULL)
		return pin;
	pin->owner = o;
	pin->owner_id = o->id;
	pin_owner_identity(o, pin->identity, sizeof(pin->identity));
	TAILQ_INSERT_TAIL(&owner_route(o)->pins, pin, owner_link);
	o->route->n_pins++;
	server_debug(s, "pinned to C-%" PRIu64 " (%d pins)", pin->owner_id, o->route->n_pins);
	return pin;
}

void pin_started(struct server *s, struct request *req)
{
	if (!pin_wants(req) || req->owner == NULL || s->pin != NULL)
		return;
	req->route->pin = pin_new(s, req->owner);
	req->route->pin_note->op &= ~(unsigned)PIN_OP_WANT;
}

static void item_add(struct lb_pin *pin, bool txn, int64_t id, const char *ns, const bson_t *lsid)
{
	struct pin_item *it;

	if (pin->nitems == pin->cap) {
		pin->cap = pin->cap ? pin->cap * 2 : 4;
		pin->items = xrealloc(pin->items, sizeof(*pin->items) * (size_t)pin->cap);
	}
	it = &pin->items[pin->nitems++];
	it->txn = txn;
	it->id = id;
	it->ns = ns != NULL ? xstrdup(ns) : NULL;
	it->lsid = lsid != NULL ? bson_copy(lsid) : NULL;
	if (!pin->held) {
		pin->held = true;
		STAT_INC(lb_pins_opened);
	}
}

static void item_del(struct lb_pin *pin, int i)
{
	free(pin->items[i].ns);
	if (pin->items[i].lsid != NULL)
		bson_destroy(pin->items[i].lsid);
	pin->items[i] = pin->items[--pin->nitems];
}

static void drop_cursor(struct lb_pin *pin, int64_t id)
{
	for (int i = 0; i < pin->nitems; i++)
		if (!pin->items[i].txn && pin->items[i].id == id) {
			item_del(pin, i);
			return;
		}
}

static void drop_txn(struct lb_pin *pin, const bson_t *lsid)
{
	for (int i = pin->nitems - 1; i >= 0; i--)
		if (pin->items[i].txn && same_lsid(pin->items[i].lsid, lsid))
			item_del(pin, i);
}

/* killCursors reply: every id it names (killed, not found, unknown). */
static void drop_killed(struct lb_pin *pin, const bson_t *body)
{
	static const char *const keys[] = {"cursorsKilled", "cursorsNotFound", "cursorsUnknown"};
	bson_iter_t it, arr;
	int64_t id;

	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (bson_iter_init_find(&it, body, keys[k]) && BSON_ITER_HOLDS_ARRAY(&it) &&
		    bson_iter_recurse(&it, &arr))
			while (bson_iter_next(&arr))
				if (read_int64(&arr, &id))
					drop_cursor(pin, id);
}

/* Top-level ok/code and cursor {id, ns} of a reply. */
struct reply_info {
	bool ok, have_cursor;
	int32_t code;
	int64_t id;
	const char *ns;
};

static void read_reply(const bson_t *body, struct reply_info *r)
{
	bson_iter_t it, sub;

	memset(r, 0, sizeof(*r));
	if (bson_iter_init_find(&it, body, "ok"))
		r->ok = bson_iter_as_bool(&it);
	if (bson_iter_init_find(&it, body, "code") && BSON_ITER_HOLDS_INT32(&it))
		r->code = bson_iter_int32(&it);
	if (!bson_iter_init_find(&it, body, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &sub))
		return;
	while (bson_iter_next(&sub)) {
		if (strcmp(bson_iter_key(&sub), "id") == 0)
			r->have_cursor = read_int64(&sub, &r->id);
		else if (strcmp(bson_iter_key(&sub), "ns") == 0 && BSON_ITER_HOLDS_UTF8(&sub))
			r->ns = bson_iter_utf8(&sub, NULL);
	}
}

/* Its reply dropped, `req` runs again wanting a pin of its own (it waits for
 * room in the pool's queue, like a transaction) once `pin`'s kill is sent. */
static void rerun_later(struct lb_pin *pin, struct request *req)
{
	struct pin_note *n = req->route->pin_note;

	evbuffer_drain(req->msg, evbuffer_get_length(req->msg));
	evbuffer_add_buffer(req->msg, n->retry_msg);
	evbuffer_free(n->retry_msg);
	n->retry_msg = NULL;
	n->op |= PIN_OP_WANT;
	req->route->server = NULL;
	request_set_state(req, REQ_NEW, NULL);
	pin->rerun = req;
	server_debug(pin->server,
		     "C-%" PRIu64 "'s cursor found no pin slot: killed, R-%" PRIu64
		     " waits for room",
		     req->owner->id, req->id);
}

/* An ordinary exchange's reply left cursor r->id open on `s`: `s` becomes
 * the client's pin when the bounds allow. Otherwise the cursor is killed on
 * `s` and the reply dropped: the command runs again wanting a pin when a
 * copy of it was kept, else the client gets 462 (false: not to be
 * delivered). */
static bool open_on_reply(struct server *s, struct request *req, const struct reply_info *r)
{
	char why[300], msg[500];
	struct lb_pin *pin;

	if (!(req->route->pin_note->op & PIN_OP_OPEN) || !r->ok || !r->have_cursor || r->id == 0)
		return true; /* nothing stays open: the connection is released as usual */
	if (req->owner != NULL && !pin_no_room(req->owner, s->pool, why, sizeof(why))) {
		req->route->pin = pin_new(s, req->owner);
		item_add(req->route->pin, false, r->id, r->ns, NULL);
		return true;
	}
	pin = pin_new(s, NULL); /* owner-less: the kill runs there, then it is released */
	pin_queue_kill(pin, r->id, r->ns);
	if (req->owner == NULL) {
		request_done(req); /* its client left meanwhile */
		return false;
	}
	if (req->route->pin_note->retry_msg != NULL) {
		rerun_later(pin, req);
		return false;
	}
	STAT_INC(lb_pin_refusals);
	snprintf(msg, sizeof(msg),
		 "mongoplex: load-balanced cursor needs a backend connection of its own and %s; "
		 "the cursor was killed, retry later",
		 why);
	req->ops->error(req, MP_ERR(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED), msg,
			MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED));
	return false;
}

bool pin_on_reply(struct server *s, struct request *req, const bson_t *body)
{
	struct lb_pin *pin = s->pin;
	struct pin_note *n = req->route->pin_note;
	struct reply_info r;

	if (n == NULL || (pin != NULL && req->route->pin != pin))
		return true;
	read_reply(body, &r);
	if (pin == NULL)
		return open_on_reply(s, req, &r);
	if ((n->op & PIN_OP_OPEN) && r.ok && r.have_cursor && r.id != 0) {
		item_add(pin, false, r.id, r.ns, NULL);
		if (pin->owner == NULL) /* its client left meanwhile */
			pin_queue_kill(pin, r.id, r.ns);
	}
	if ((n->op & PIN_OP_GETMORE) && ((r.ok && r.have_cursor && r.id == 0) || r.code == 43))
		drop_cursor(pin, n->cursor);
	if ((n->op & PIN_OP_KILL) && r.ok)
		drop_killed(pin, body);
	if ((n->op & PIN_OP_TXN_START) && n->lsid != NULL) {
		drop_txn(pin, n->lsid); /* the session's previous transaction */
		item_add(pin, true, n->txn_number, NULL, n->lsid);
	}
	if ((n->op & PIN_OP_TXN_END) && n->lsid != NULL)
		drop_txn(pin, n->lsid);
	return true;
}

void pin_unlink_owner(struct lb_pin *pin)
{
	struct owner_route *r;

	if (pin->owner == NULL)
		return;
	r = pin->owner->route;
	TAILQ_REMOVE(&r->pins, pin, owner_link);
	r->n_pins--;
	pin->owner = NULL;
}

static void pin_free(struct lb_pin *pin)
{
	pin_unlink_owner(pin);
	TAILQ_REMOVE(&pin_all, pin, all_link);
	npins--;
	waitq_fini(&pin->waiting);
	pin->server->pin = NULL;
	while (pin->nitems > 0)
		item_del(pin, pin->nitems - 1);
	free(pin->items);
	free(pin);
}

/* A former waiter of a pin that ended goes back to pool_submit. */
void pin_resubmit(struct request *req, void *arg)
{
	(void)arg;
	req->route->pin = NULL; /* a shared cursor-opening one may pin on its reply */
	pool_ops->submit(req);
}

static void after_exchange(struct server *s);

void pin_after_exchange(struct server *s)
{
	struct request *rerun = s->pin->rerun;

	s->pin->rerun = NULL;
	after_exchange(s);
	if (rerun != NULL)
		pool_ops->submit(rerun); /* its cursor found no room: wants a pin now */
}

static void after_exchange(struct server *s)
{
	struct lb_pin *pin = s->pin;
	struct request_queue moved = {TAILQ_HEAD_INITIALIZER(moved.list), 0};

	if (pin->nitems > 0 || pin->owner == NULL) {
		if (run_next(pin))
			return;
		if (pin->owner != NULL || waitq_count(&pin->waiting) > 0) {
			s->idle_since_usec = g.now_usec; /* pinned, idle */
			return;
		}
	}
	server_debug(s, "unpinned from C-%" PRIu64, pin->owner_id);
	waitq_take_all(&pin->waiting, &moved);
	pin_free(pin);
	server_released(s); /* back to the pool (the next watchers) */
	waitq_resubmit(&moved, pin_resubmit, NULL);
}

static void pin_server_closed(struct server *s)
{
	struct lb_pin *pin = s->pin;
	struct request *req;

	if (pin == NULL)
		return;
	if ((req = pin->rerun) != NULL) {
		pin->rerun = NULL;
		req->ops->network_error(req, MP_ERR(HOST_UNREACHABLE),
					"the backend connection closed");
	}
	while ((req = waitq_first(&pin->waiting)) != NULL) {
		waitq_unqueue(req);
		req->route->pin = NULL;
		req->ops->network_error(req, MP_ERR(HOST_UNREACHABLE),
					"the pinned backend connection closed");
	}
	pin_free(pin);
}

static bool watch_released(struct server *s)
{
	if (s->pin == NULL)
		return false;
	pin_after_exchange(s); /* next waiter, stay pinned, or back to the pool */
	return true;
}

static void watch_closed(struct server *s, const struct server_closing *why)
{
	(void)why;
	pin_server_closed(s);
}

const struct server_watcher pin_watcher = {
    .name = "pin",
    .released = watch_released,
    .closed = watch_closed,
};
