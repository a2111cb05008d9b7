/*
 * pin_end.c — how load-balanced pins end without a reply (rules in pin.h):
 * a cursor pin idle past lb_pin_idle_timeout_ms expires (pin_janitor: its
 * cursors killed on it, remembered in the expired ring so that the owner's
 * getMore gets 43 with the reason), and a closing client's pins get their
 * cleanup commands (killCursors, abortTransaction) queued on the pinned
 * connection itself (pin_owner_closed). pin.c owns the pins, their queue,
 * bounds and replies.
 */
#include <inttypes.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/wire.h"
#include "core/xalloc.h"
#include "pool/pin_int.h"
#include "pool/pool.h"
#include "pool/route.h"
#include "pool/server.h"

/* ---- expired pins ----------------------------------------------------- */

/* Cursors killed because their pin sat idle past lb_pin_idle_timeout_ms, so
 * the owner's next getMore of one gets 43 with the reason, and its close
 * sends no second kill (pin_holds_cursor). Rules: a ring; an entry leaves
 * only when overwritten (a getMore of that cursor then gets the backend's
 * own 43). */
#define PIN_EXPIRED_MAX 256

static struct {
	uint64_t owner_id;
	int64_t id;
} expired[PIN_EXPIRED_MAX];
static unsigned expired_next;

static void expired_add(uint64_t owner_id, int64_t id)
{
	expired[expired_next % PIN_EXPIRED_MAX].owner_id = owner_id;
	expired[expired_next % PIN_EXPIRED_MAX].id = id;
	expired_next++;
}

static int expired_find(uint64_t owner_id, int64_t id)
{
	for (int i = 0; i < PIN_EXPIRED_MAX; i++)
		if (id != 0 && expired[i].id == id && expired[i].owner_id == owner_id)
			return i;
	return -1;
}

/* A getMore of an expired cursor: answered 43 with the reason. */
bool pin_expired_refuse(struct request *req)
{
	const struct pin_note *n = req->route->pin_note;
	char msg[400];

	if (req->owner == NULL || req->route->pin != NULL || !(n->op & PIN_OP_GETMORE) ||
	    expired_find(req->owner->id, n->cursor) < 0)
		return false;
	snprintf(msg, sizeof(msg),
		 "mongoplex: load-balanced cursor %" PRId64 " expired: its pinned backend "
		 "connection was idle longer than lb_pin_idle_timeout_ms = %" PRId64
		 " ms, so the proxy killed the cursor and returned the connection to the pool",
		 n->cursor, g.cfg.lb_pin_idle_timeout_ms);
	req->ops->error(req, MP_ERR(CURSOR_NOT_FOUND), msg, NULL);
	return true;
}

/* ---- idle pins expire ------------------------------------------------- */

static bool has_txn(const struct lb_pin *pin)
{
	for (int i = 0; i < pin->nitems; i++)
		if (pin->items[i].txn)
			return true;
	return false;
}

/* A cursor pin (transactions keep theirs) whose connection has run nothing
 * for `limit` µs, and whose owner has nothing waiting there that it reads. */
static bool idle_expired(const struct lb_pin *pin, uint64_t now, uint64_t limit)
{
	return pin->owner != NULL && !has_txn(pin) && pin_server_free(pin->server) &&
	       (waitq_count(&pin->waiting) == 0 || !request_owner_may_dispatch(pin->owner)) &&
	       now - pin->server->idle_since_usec > limit;
}

/* Detach `pin` from its owner, kill its cursors on it and remember them;
 * its waiters go back to pool_submit (a getMore of one gets 43 there). */
static void expire(struct lb_pin *pin)
{
	struct request_queue moved = {TAILQ_HEAD_INITIALIZER(moved.list), 0};

	STAT_INC(lb_pins_expired);
	waitq_take_all(&pin->waiting, &moved);
	pin_unlink_owner(pin);
	for (int i = 0; i < pin->nitems; i++) {
		expired_add(pin->owner_id, pin->items[i].id);
		pin_queue_kill(pin, pin->items[i].id, pin->items[i].ns);
	}
	server_info(pin->server,
		    "load-balanced C-%" PRIu64 "'s pinned connection idle longer than "
		    "lb_pin_idle_timeout_ms = %" PRId64 " ms: killing its %d cursors, releasing it",
		    pin->owner_id, g.cfg.lb_pin_idle_timeout_ms, pin->nitems);
	pin_after_exchange(pin->server);
	waitq_resubmit(&moved, pin_resubmit, NULL);
}

void pin_janitor(uint64_t now)
{
	uint64_t limit = (uint64_t)g.cfg.lb_pin_idle_timeout_ms * 1000;
	struct lb_pin *pin;

	if (limit == 0)
		return;
	TAILQ_FOREACH(pin, &pin_all, all_link)
		pin->expiring = idle_expired(pin, now, limit);
	/* one at a time from the head: expiring one may end or start others */
	for (;;) {
		TAILQ_FOREACH(pin, &pin_all, all_link)
			if (pin->expiring)
				break;
		if (pin == NULL)
			return;
		pin->expiring = false;
		if (idle_expired(pin, now, limit))
			expire(pin);
	}
}

/* ---- cleanup on the pinned connection ------------------------------------ */

static void cleanup_reply(struct server *s, struct request *req, struct evbuffer *buf,
			  uint8_t *data, size_t len, const struct wire_msg *m)
{
	bson_iter_t it;

	(void)buf;
	(void)data;
	(void)len;
	if (!bson_iter_init_find(&it, &m->body, "ok") || !bson_iter_as_bool(&it))
		server_info(s, "%s for a closed load-balanced client failed", req->cmd);
	request_done(req);
	server_release(s);
}

static void cleanup_failed(struct request *req, int code, const char *codename, const char *why)
{
	(void)code;
	(void)codename;
	log_info("%s for a closed load-balanced client not run: %s", req->cmd, why);
	request_done(req);
}

static void cleanup_error(struct request *req, int code, const char *codename, const char *msg,
			  const char *const *labels)
{
	(void)labels;
	cleanup_failed(req, code, codename, msg);
}

static const struct request_ops cleanup_ops = {
    .name = "lb-cleanup",
    .reply = cleanup_reply,
    .error = cleanup_error,
    .network_error = cleanup_failed,
    .abandon = request_abandon_default,
};

static void queue_cmd(struct lb_pin *pin, bson_t *cmd, const char *name)
{
	struct request *req = request_new(NULL, &cleanup_ops);

	req->msg = xevbuffer_new();
	wire_append_msg(req->msg, 0, 0, 0, cmd);
	snprintf(req->cmd, sizeof(req->cmd), "%s", name);
	STAT_INC(lb_pin_cleanups);
	pin_enqueue(pin, req);
}

void pin_queue_kill(struct lb_pin *pin, int64_t id, const char *ns)
{
	const char *dot = ns != NULL ? strchr(ns, '.') : NULL;
	bson_t cmd, arr;
	char db[256];

	if (dot == NULL)
		return; /* no namespace: left to time out */
	snprintf(db, sizeof(db), "%.*s", (int)(dot - ns), ns);
	bson_init(&cmd);
	BSON_APPEND_UTF8(&cmd, "killCursors", dot + 1);
	BSON_APPEND_ARRAY_BEGIN(&cmd, "cursors", &arr);
	BSON_APPEND_INT64(&arr, "0", id);
	bson_append_array_end(&cmd, &arr);
	BSON_APPEND_UTF8(&cmd, "$db", db);
	queue_cmd(pin, &cmd, "killCursors");
	bson_destroy(&cmd);
}

static void queue_abort(struct lb_pin *pin, const struct pin_item *it)
{
	bson_t cmd;

	bson_init(&cmd);
	BSON_APPEND_INT32(&cmd, "abortTransaction", 1);
	BSON_APPEND_DOCUMENT(&cmd, "lsid", it->lsid);
	BSON_APPEND_INT64(&cmd, "txnNumber", it->id);
	BSON_APPEND_BOOL(&cmd, "autocommit", false);
	BSON_APPEND_UTF8(&cmd, "$db", "admin");
	queue_cmd(pin, &cmd, "abortTransaction");
	bson_destroy(&cmd);
}

void pin_owner_closed(struct request_owner *o)
{
	struct lb_pin *pin;

	while (o->route != NULL && (pin = TAILQ_FIRST(&o->route->pins)) != NULL) {
		pin_unlink_owner(pin);
		for (int i = 0; i < pin->nitems; i++) {
			if (pin->items[i].txn)
				queue_abort(pin, &pin->items[i]);
			else
				pin_queue_kill(pin, pin->items[i].id, pin->items[i].ns);
		}
		server_info(pin->server,
			    "load-balanced C-%" PRIu64 " closed: %d cleanup commands on its pinned "
			    "connection",
			    pin->owner_id, waitq_count(&pin->waiting));
		if (pin_server_free(pin->server))
			pin_after_exchange(pin->server);
	}
}

bool pin_holds_cursor(uint64_t owner_id, int64_t id)
{
	const struct lb_pin *pin;

	if (expired_find(owner_id, id) >= 0)
		return true; /* killed when its pin expired */
	TAILQ_FOREACH(pin, &pin_all, all_link)
		if (pin->owner_id == owner_id)
			for (int i = 0; i < pin->nitems; i++)
				if (!pin->items[i].txn && pin->items[i].id == id)
					return true;
	return false;
}
