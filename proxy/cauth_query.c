/*
 * cauth_query.c — auth_query's cache and lookups (see cauth_query.h). A
 * lookup is a proxy-made request (no client) through pool_submit, like the
 * proxy's own killCursors (proxy/cursor.c); its reply comes back through
 * request->internal_reply. Submits are deferred to their own event: a
 * lookup may be asked for while the pool is calling back (a hello reply).
 */
#include "proxy/cauth_query.h"

#include <event2/event.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "config/cfg.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/request.h"
#include "core/stats.h"
#include "core/usersinfo.h"
#include "core/wire.h"
#include "pool/pool.h"
#include "proxy/client.h"

#define CQ_MAX_ENTRIES 10000 /* least recently fetched idle entries go first */

enum cq_state {
	E_STALE,     /* nothing usable: look up on the next cq_get */
	E_QUEUED,    /* lookup to submit (pump) */
	E_RUNNING,   /* lookup sent */
	E_FOUND,     /* ue holds the secrets, fetched at fetched_usec */
	E_NOT_FOUND, /* the backend has no such user (as of fetched_usec) */
};

TAILQ_HEAD(cq_waiter_list, cq_waiter);

/* One user's cache entry. Rules: unique by (db, user) in `entries`, oldest
 * fetch first; waiters only while E_QUEUED / E_RUNNING; ue wiped whenever
 * the state leaves E_FOUND; req is the lookup in flight (E_RUNNING), whose
 * internal_reply points here, and `timer` (queue_timeout_ms) bounds it: on
 * expiry the request is cut loose (its late reply is dropped). */
struct cq_entry {
	TAILQ_ENTRY(cq_entry) link;
	enum cq_state state;
	struct request *req;
	struct event *timer;
	uint64_t fetched_usec;
	struct users_entry ue;
	struct cq_waiter_list waiters;
};

TAILQ_HEAD(cq_entry_list, cq_entry);
static struct cq_entry_list entries = TAILQ_HEAD_INITIALIZER(entries);
static size_t nentries;
static struct event *pump_ev;

bool cq_enabled(void)
{
	return g.cfg.auth_query;
}

static struct cq_entry *find(const char *db, const char *user)
{
	struct cq_entry *e;

	TAILQ_FOREACH(e, &entries, link)
		if (strcmp(e->ue.db, db) == 0 && strcmp(e->ue.user, user) == 0)
			return e;
	return NULL;
}

static void entry_free(struct cq_entry *e)
{
	TAILQ_REMOVE(&entries, e, link);
	nentries--;
	if (e->timer != NULL)
		event_free(e->timer);
	OPENSSL_cleanse(e, sizeof(*e));
	free(e);
}

/* Room for one more: drop the oldest entry nobody waits for. */
static void make_room(void)
{
	struct cq_entry *e;

	if (nentries < CQ_MAX_ENTRIES)
		return;
	TAILQ_FOREACH(e, &entries, link)
		if (e->state != E_QUEUED && e->state != E_RUNNING) {
			entry_free(e);
			return;
		}
}

static struct cq_entry *entry_get(const char *db, const char *user)
{
	struct cq_entry *e = find(db, user);

	if (e != NULL)
		return e;
	if (strlen(db) >= sizeof(e->ue.db) || strlen(user) >= sizeof(e->ue.user))
		return NULL;
	make_room();
	e = xcalloc(1, sizeof(*e));
	snprintf(e->ue.db, sizeof(e->ue.db), "%s", db);
	snprintf(e->ue.user, sizeof(e->ue.user), "%s", user);
	TAILQ_INIT(&e->waiters);
	TAILQ_INSERT_TAIL(&entries, e, link);
	nentries++;
	return e;
}

static bool fresh(const struct cq_entry *e)
{
	return (e->state == E_FOUND || e->state == E_NOT_FOUND) &&
	       g.now_usec - e->fetched_usec < (uint64_t)g.cfg.auth_cache_ttl_ms * 1000;
}

static void set_stale(struct cq_entry *e)
{
	OPENSSL_cleanse(&e->ue.sha1, sizeof(e->ue.sha1));
	OPENSSL_cleanse(&e->ue.sha256, sizeof(e->ue.sha256));
	e->state = E_STALE;
}

/* Every waiter's done(), each taken off the list first. */
static void wake(struct cq_entry *e, enum cq_status st, const char *why)
{
	struct cq_waiter *w;

	while ((w = TAILQ_FIRST(&e->waiters)) != NULL) {
		TAILQ_REMOVE(&e->waiters, w, link);
		w->entry = NULL;
		w->done(w, st, st == CQ_FOUND ? &e->ue : NULL, why);
	}
}

/* The usersInfo reply (NULL: the request was abandoned). */
static void on_reply(void *arg, const bson_t *reply)
{
	struct cq_entry *e = arg;
	struct usersinfo_result r;
	char why[300] = "the lookup was abandoned (shutdown or backend gone)";
	int32_t code = 0;

	e->req = NULL;
	if (e->timer != NULL)
		evtimer_del(e->timer);
	if (reply != NULL &&
	    usersinfo_parse(reply, e->ue.db, e->ue.user, &r, &code, why, sizeof(why))) {
		e->fetched_usec = g.now_usec;
		e->state = r.found ? E_FOUND : E_NOT_FOUND;
		e->ue.sha1 = r.sha1;
		e->ue.sha256 = r.sha256;
		OPENSSL_cleanse(&r, sizeof(r));
		TAILQ_REMOVE(&entries, e, link); /* newest fetch last */
		TAILQ_INSERT_TAIL(&entries, e, link);
		log_debug("auth_query: \"%s.%s\" %s", e->ue.db, e->ue.user,
			  e->state == E_FOUND ? "found" : "not on the backend");
		wake(e, e->state == E_FOUND ? CQ_FOUND : CQ_NOT_FOUND, NULL);
		return;
	}
	STAT_INC(auth_query_errors);
	log_error("auth_query: usersInfo for \"%s.%s\" as the proxy's backend_uri identity "
		  "failed: %s%s",
		  e->ue.db, e->ue.user, why,
		  code == 13 ? " (that identity needs the viewUser privilege on this database)"
			     : "");
	set_stale(e);
	wake(e, CQ_ERROR, why);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cq_entry *e = arg;
	char why[128];

	(void)fd;
	(void)what;
	proxy_tick();
	if (e->req == NULL)
		return;
	e->req->internal_reply = NULL; /* its reply, if any, is dropped */
	e->req = NULL;
	snprintf(why, sizeof(why), "no answer within queue_timeout_ms = %" PRId64,
		 g.cfg.queue_timeout_ms);
	STAT_INC(auth_query_errors);
	log_error("auth_query: usersInfo for \"%s.%s\": %s", e->ue.db, e->ue.user, why);
	set_stale(e);
	wake(e, CQ_ERROR, why);
}

/* Bound the lookup by queue_timeout_ms (0: the request's own bounds only). */
static void arm_timer(struct cq_entry *e)
{
	struct timeval tv;

	if (g.cfg.queue_timeout_ms <= 0)
		return;
	if (e->timer == NULL && (e->timer = evtimer_new(g.base, timeout_cb, e)) == NULL)
		fatal("out of memory");
	tv.tv_sec = g.cfg.queue_timeout_ms / 1000;
	tv.tv_usec = (g.cfg.queue_timeout_ms % 1000) * 1000;
	evtimer_add(e->timer, &tv);
}

static void submit(struct cq_entry *e)
{
	struct request *req = client_request_new(NULL); /* no owner: internal_reply gets it */
	bson_t cmd, q;

	bson_init(&cmd);
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "usersInfo", &q);
	BSON_APPEND_UTF8(&q, "user", e->ue.user);
	BSON_APPEND_UTF8(&q, "db", e->ue.db);
	bson_append_document_end(&cmd, &q);
	BSON_APPEND_BOOL(&cmd, "showCredentials", true);
	BSON_APPEND_UTF8(&cmd, "$db", e->ue.db);
	req->msg = xevbuffer_new();
	wire_append_msg(req->msg, 0, 0, 0, &cmd);
	bson_destroy(&cmd);
	snprintf(req->cmd, sizeof(req->cmd), "usersInfo");
	req->internal_reply = on_reply;
	req->internal_arg = e;
	e->state = E_RUNNING;
	e->req = req;
	arm_timer(e);
	STAT_INC(auth_query_lookups);
	log_debug("auth_query: looking up \"%s.%s\" on the backend", e->ue.db, e->ue.user);
	pool_submit(req);
}

static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cq_entry *e, *next;

	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	TAILQ_FOREACH_SAFE(e, &entries, link, next)
		if (e->state == E_QUEUED)
			submit(e);
}

static void start(struct cq_entry *e)
{
	set_stale(e);
	e->state = E_QUEUED;
	if (pump_ev == NULL && (pump_ev = event_new(g.base, -1, 0, pump_cb, NULL)) == NULL)
		fatal("out of memory");
	event_active(pump_ev, EV_TIMEOUT, 1);
}

static void join(struct cq_entry *e, struct cq_waiter *w)
{
	if (w == NULL)
		return;
	if (!TAILQ_EMPTY(&e->waiters))
		STAT_INC(auth_query_shared);
	w->entry = e;
	TAILQ_INSERT_TAIL(&e->waiters, w, link);
}

enum cq_status cq_get(const char *db, const char *user, struct cq_waiter *w,
		      const struct users_entry **out)
{
	struct cq_entry *e = entry_get(db, user);

	*out = NULL;
	if (e == NULL)
		return CQ_NOT_FOUND; /* names longer than any user's */
	if (fresh(e)) {
		STAT_INC(auth_query_cache_hits);
		*out = e->state == E_FOUND ? &e->ue : NULL;
		return e->state == E_FOUND ? CQ_FOUND : CQ_NOT_FOUND;
	}
	if (e->state != E_QUEUED && e->state != E_RUNNING)
		start(e);
	join(e, w);
	return CQ_PENDING;
}

void cq_refresh(const char *db, const char *user, struct cq_waiter *w)
{
	struct cq_entry *e = entry_get(db, user);

	if (e == NULL) {
		w->done(w, CQ_NOT_FOUND, NULL, NULL);
		return;
	}
	if (e->state != E_QUEUED && e->state != E_RUNNING)
		start(e);
	join(e, w);
}

void cq_cancel(struct cq_waiter *w)
{
	if (w->entry == NULL)
		return;
	TAILQ_REMOVE(&w->entry->waiters, w, link);
	w->entry = NULL;
}
