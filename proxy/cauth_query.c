/*
 * cauth_query.c — auth_query's cache and lookups (see cauth_query.h). A
 * lookup is a proxy-made request (no client) through pool_submit, like the
 * proxy's own killCursors (proxy/cursor.c); its reply comes back through
 * request->internal_reply. Submits are deferred to their own event (the
 * pump): a lookup may be asked for, or end, while the pool is calling back
 * (a hello reply). The pump sends queued lookups in order while fewer than
 * max_inflight() run; the bounds a connection meets are in lookup().
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
#include "pool/gate.h"
#include "pool/pool.h"
#include "proxy/client.h"

#define STR_(x) #x
#define STR(x)	STR_(x)

enum cq_state {
	E_STALE,     /* nothing usable: look up on the next cq_get */
	E_QUEUED,    /* lookup to submit: on `queued` (pump) */
	E_RUNNING,   /* lookup sent (counted in nrunning) */
	E_FOUND,     /* ue holds the secrets, fetched at fetched_usec */
	E_NOT_FOUND, /* the backend has no such user (as of fetched_usec) */
};

TAILQ_HEAD(cq_waiter_list, cq_waiter);

/* One user's cache entry. Rules: unique by (db, user) in `entries`, oldest
 * fetch first; on `queued` (qlink) exactly while E_QUEUED, which it is only
 * with a waiter or as a hello's warm-up (`warm`); waiters only while
 * E_QUEUED / E_RUNNING; ue wiped whenever the state leaves E_FOUND; req is
 * the lookup in flight (E_RUNNING), whose internal_reply points here, and
 * `timer` (queue_timeout_ms) bounds it: on expiry the request is cut loose
 * (its late reply is dropped). */
struct cq_entry {
	TAILQ_ENTRY(cq_entry) link;
	TAILQ_ENTRY(cq_entry) qlink;
	enum cq_state state;
	bool warm;
	struct request *req;
	struct event *timer;
	uint64_t fetched_usec;
	struct users_entry ue;
	struct cq_waiter_list waiters;
};

TAILQ_HEAD(cq_entry_list, cq_entry);
static struct cq_entry_list entries = TAILQ_HEAD_INITIALIZER(entries);
/* E_QUEUED entries in the order their lookups were asked for. */
static struct cq_entry_list queued = TAILQ_HEAD_INITIALIZER(queued);
static int nentries, nqueued, nrunning;
static struct event *pump_ev;
static struct log_rl rl_refused = {.what = "auth_query lookups refused"};
static struct log_rl rl_failed = {.what = "failed auth_query lookups"};

bool cq_enabled(void)
{
	return g.cfg.auth_query;
}

int cq_cache_entries(void)
{
	return nentries;
}

int cq_inflight(void)
{
	return nrunning;
}

/* Lookups sent at once: the setting, and never every connection of the pool. */
static int max_inflight(void)
{
	int64_t n = g.cfg.auth_query_max_inflight;
	int64_t size = pool_gate_size(pool_target());

	if (n > size - 1)
		n = size - 1;
	return n < 1 ? 1 : (int)n;
}

static bool pending(const struct cq_entry *e)
{
	return e->state == E_QUEUED || e->state == E_RUNNING;
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

/* Room for one more within auth_cache_max_entries: drop the oldest entries
 * nobody waits for. False when every entry is a pending lookup. */
static bool make_room(void)
{
	struct cq_entry *e, *next;

	for (e = TAILQ_FIRST(&entries); e != NULL && nentries >= g.cfg.auth_cache_max_entries;
	     e = next) {
		next = TAILQ_NEXT(e, link);
		if (!pending(e))
			entry_free(e);
	}
	return nentries < g.cfg.auth_cache_max_entries;
}

/* A new entry; NULL when the cache is full of pending lookups. */
static struct cq_entry *entry_new(const char *db, const char *user)
{
	struct cq_entry *e;

	if (!make_room())
		return NULL;
	e = xcalloc(1, sizeof(*e));
	snprintf(e->ue.db, sizeof(e->ue.db), "%s", db);
	snprintf(e->ue.user, sizeof(e->ue.user), "%s", user);
	TAILQ_INIT(&e->waiters);
	TAILQ_INSERT_TAIL(&entries, e, link);
	nentries++;
	return e;
}

static bool name_fits(const char *db, const char *user)
{
	struct cq_entry *e;

	return strlen(db) < sizeof(e->ue.db) && strlen(user) < sizeof(e->ue.user);
}

static bool fresh(const struct cq_entry *e)
{
	int64_t ttl = e->state == E_FOUND ? g.cfg.auth_cache_ttl_ms : g.cfg.auth_negative_ttl_ms;

	return (e->state == E_FOUND || e->state == E_NOT_FOUND) &&
	       g.now_usec - e->fetched_usec < (uint64_t)ttl * 1000;
}

static void set_stale(struct cq_entry *e)
{
	OPENSSL_cleanse(&e->ue.sha1, sizeof(e->ue.sha1));
	OPENSSL_cleanse(&e->ue.sha256, sizeof(e->ue.sha256));
	if (e->state == E_QUEUED) {
		TAILQ_REMOVE(&queued, e, qlink);
		nqueued--;
	}
	e->state = E_STALE;
	e->warm = false;
}

static void pump_cb(evutil_socket_t fd, short what, void *arg);

/* Run the pump after this callback (a lookup may be asked for, or end,
 * while the pool is calling back). */
static void kick(void)
{
	if (pump_ev == NULL && (pump_ev = event_new(g.base, -1, 0, pump_cb, NULL)) == NULL)
		fatal("out of memory");
	event_active(pump_ev, EV_TIMEOUT, 1);
}

/* A sent lookup ended (answered, failed, cut loose): its slot is free. */
static void lookup_ended(struct cq_entry *e)
{
	e->req = NULL;
	nrunning--;
	if (nqueued > 0)
		kick();
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

	lookup_ended(e);
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
	log_rl_msg(&rl_failed, LOG_LVL_ERROR,
		   "auth_query: usersInfo for \"%s.%s\" as the proxy's backend_uri identity "
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
	lookup_ended(e);
	snprintf(why, sizeof(why), "no answer within queue_timeout_ms = %" PRId64,
		 g.cfg.queue_timeout_ms);
	STAT_INC(auth_query_errors);
	log_rl_msg(&rl_failed, LOG_LVL_ERROR, "auth_query: usersInfo for \"%s.%s\": %s", e->ue.db,
		   e->ue.user, why);
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
	nrunning++;
	arm_timer(e);
	STAT_INC(auth_query_lookups);
	log_debug("auth_query: looking up \"%s.%s\" on the backend", e->ue.db, e->ue.user);
	pool_submit(req);
}

/* Send queued lookups while slots are free; a queued lookup whose waiters
 * all left is dropped unsent. */
static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cq_entry *e;

	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	while (nrunning < max_inflight() && (e = TAILQ_FIRST(&queued)) != NULL) {
		bool wanted = e->warm || !TAILQ_EMPTY(&e->waiters);

		set_stale(e); /* off the queue */
		if (wanted)
			submit(e);
	}
}

/* The lookup of e waits for a slot; the pump sends it. */
static void start(struct cq_entry *e, bool warm)
{
	set_stale(e);
	e->state = E_QUEUED;
	e->warm = warm;
	TAILQ_INSERT_TAIL(&queued, e, qlink);
	if (++nqueued + nrunning > max_inflight())
		STAT_INC(auth_query_waited);
	kick();
}

static void join(struct cq_entry *e, struct cq_waiter *w)
{
	if (!TAILQ_EMPTY(&e->waiters))
		STAT_INC(auth_query_shared);
	w->entry = e;
	TAILQ_INSERT_TAIL(&e->waiters, w, link);
}

static enum cq_status refuse(struct cq_waiter *w, const char *db, const char *user, const char *why)
{
	STAT_INC(auth_query_refused);
	w->refused = why;
	log_rl_msg(&rl_refused, LOG_LVL_WARNING, "auth_query: no lookup of \"%s.%s\": %s", db, user,
		   why);
	return CQ_REFUSED;
}

/* A new lookup of db.user (e: its entry, NULL if none) for w's connection,
 * within the bounds (see cauth_query.h). */
static enum cq_status lookup(struct cq_entry *e, const char *db, const char *user,
			     struct cq_waiter *w, bool wait)
{
	if (w->lookups >= CQ_CONN_LOOKUPS)
		return refuse(w, db, user,
			      "this connection started " STR(
				  CQ_CONN_LOOKUPS) " lookups and has not logged in since");
	if (!wait && nqueued + nrunning >= max_inflight())
		return refuse(w, db, user,
			      "a hello's lookup, and every auth_query_max_inflight slot is busy");
	if (e == NULL && (e = entry_new(db, user)) == NULL)
		return refuse(w, db, user,
			      "auth_cache_max_entries reached, all of them lookups in progress");
	w->lookups++;
	start(e, !wait);
	if (wait)
		join(e, w);
	return CQ_PENDING;
}

enum cq_status cq_get(const char *db, const char *user, struct cq_waiter *w, bool wait,
		      const struct users_entry **out)
{
	struct cq_entry *e;

	*out = NULL;
	if (!name_fits(db, user))
		return CQ_NOT_FOUND; /* names longer than any user's */
	e = find(db, user);
	if (e != NULL && fresh(e)) {
		if (e->state == E_NOT_FOUND) {
			STAT_INC(auth_query_negative_hits);
			return CQ_NOT_FOUND;
		}
		STAT_INC(auth_query_cache_hits);
		*out = &e->ue;
		return CQ_FOUND;
	}
	if (e != NULL && pending(e)) {
		if (wait)
			join(e, w);
		return CQ_PENDING;
	}
	return lookup(e, db, user, w, wait);
}

enum cq_status cq_refresh(const char *db, const char *user, struct cq_waiter *w)
{
	struct cq_entry *e;

	if (!name_fits(db, user))
		return CQ_NOT_FOUND;
	e = find(db, user);
	if (e != NULL && pending(e)) {
		join(e, w);
		return CQ_PENDING;
	}
	if (e != NULL)
		set_stale(e);
	return lookup(e, db, user, w, true);
}

void cq_cancel(struct cq_waiter *w)
{
	struct cq_entry *e = w->entry;

	if (e == NULL)
		return;
	TAILQ_REMOVE(&e->waiters, w, link);
	w->entry = NULL;
	if (e->state == E_QUEUED && !e->warm && TAILQ_EMPTY(&e->waiters))
		set_stale(e); /* nobody wants it any more: never sent */
}

void cq_logged_in(struct cq_waiter *w)
{
	w->lookups = 0;
}
