/*
 * cursor.c — cursor ownership at the request level: admission of a client's
 * getMore/killCursors, the table updates a reply makes, and the proxy's own
 * killCursors for clients that went away. The table itself (which client
 * connection owns which backend cursor) is proxy/cursor_table.c.
 *
 *   any forwarded reply with top-level cursor {id != 0, ns}
 *        ──▶ record (id, ns) → client id, pool          (cursor_on_reply)
 *   getMore / killCursors from a client ──▶ cursor_admit
 *        every id the client's own ──▶ forwarded; its reply updates the table
 *        getMore of a cursor it does not own ──▶ 43 CursorNotFound, here
 *        killCursors: foreign ids ──▶ cursorsNotFound; owned ones forwarded
 *                     alone and the backend's reply merged with the rest
 *   getMore reply id 0 (or 43) / killCursors reply ok ──▶ forget
 *   client closes ──▶ its entries leave the table, sorted by (pool, ns)
 *        ──▶ kill jobs (one namespace, ≤ CURSOR_KILL_CHUNK ids each)
 *        ──▶ at most CURSOR_KILL_INFLIGHT internal killCursors (no client)
 *            through pool_submit, so admission and the fair queue apply;
 *            the next job starts (deferred) when one finishes
 *   a reply opening a cursor for a client already gone ──▶ kill job
 *
 * Rules: only the top-level `cursor` subdocument of a reply and the
 * top-level fields of a command are read (bounded walk, no recursion).
 * Command and field names are matched in any case and must appear once
 * (mongo-java-server runs {getmore: id}; a duplicate must not carry an id
 * the proxy did not check).
 * "Not owned" includes "does not exist": the answer never tells a client
 * whether another client holds an id. Entries are removed only for their
 * owner. Cursors the reply named no namespace for are kept under ns "" and
 * cannot be killed on close (killCursors needs the collection).
 */
#include "proxy/cursor.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/bsonval.h"
#include "core/errors.h"
#include "core/xalloc.h"
#include "pool/pin.h"
#include "pool/pool.h"
#include "pool/pool_users.h"
#include "proxy/client.h"
#include "proxy/cursor_read.h"
#include "proxy/cursor_table.h"
#include "proxy/proxy.h"
#include "core/request.h"
#include "core/stats.h"
#include "core/wire.h"
#include "pool/route.h"
#include "proxy/client_req.h"

/* ---- reading commands and replies (top level only) ------------------ */

/* The fields of a getMore or killCursors, each present at most once. */
struct cursor_cmd {
	const char *name;   /* "getMore" / "killCursors" */
	const char *second; /* "collection" / "cursors" */
	bson_iter_t first_it, second_it;
	bool have_second;
	const char *db;
};

static bool read_cmd(const bson_t *body, struct cursor_cmd *cc, char *err, size_t errlen)
{
	bson_iter_t it;
	int nfirst = 0, nsecond = 0, ndb = 0;

	if (!bson_iter_init(&it, body))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		/* Names compared in any case: a server that matches them so
		 * must not read a second spelling the proxy did not check. */
		if (strcasecmp(k, cc->name) == 0 && nfirst++ == 0) {
			cc->first_it = it;
		} else if (strcasecmp(k, cc->second) == 0 && nsecond++ == 0) {
			cc->second_it = it;
			cc->have_second = true;
		} else if (strcasecmp(k, "$db") == 0 && ndb++ == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
			cc->db = bson_iter_utf8(&it, NULL);
		}
	}
	if (nfirst > 1 || nsecond > 1 || ndb > 1) {
		snprintf(err, errlen, "mongoplex: %s: duplicate field '%s'", cc->name,
			 nfirst > 1    ? cc->name
			 : nsecond > 1 ? cc->second
				       : "$db");
		return false;
	}
	return cc->db != NULL;
}

/* ---- request notes: what a reply must update ------------------------- */

enum note_kind {
	NOTE_GETMORE,	 /* a client's getMore of ids[0] */
	NOTE_KILL,	 /* a client's killCursors of ids (foreign ones answered here) */
	NOTE_CLOSE_KILL, /* the proxy's killCursors for a closed client */
};

/* Owned by its request (req->cursor), freed by request_free. */
struct cursor_note {
	enum note_kind kind;
	uint64_t owner;
	char *ns;
	int64_t *ids; /* forwarded */
	int nids;
	int64_t *foreign; /* NOTE_KILL: ids reported as not found */
	int nforeign;
};

static struct cursor_note *note_new(enum note_kind kind, uint64_t owner, const char *ns)
{
	struct cursor_note *n = xcalloc(1, sizeof(*n));

	n->ns = xstrdup(ns);
	n->kind = kind;
	n->owner = owner;
	return n;
}

static int64_t *ids_alloc(size_t n)
{
	return xmalloc(sizeof(int64_t) * (n ? n : 1));
}

/* ---- kill on close ---------------------------------------------------- */

/* killCursors to send for closed clients: one namespace, ≤ CHUNK ids. */
struct kill_job {
	TAILQ_ENTRY(kill_job) link;
	struct pool *pool;
	char *ns;
	int n;
	int64_t ids[CURSOR_KILL_CHUNK];
};

TAILQ_HEAD(kill_job_list, kill_job);
static struct kill_job_list kill_jobs = TAILQ_HEAD_INITIALIZER(kill_jobs);
static int kill_inflight;
static struct event *pump_ev;

static void kill_enqueue(struct pool *pool, const char *ns, int64_t id)
{
	struct kill_job *j = TAILQ_LAST(&kill_jobs, kill_job_list);

	if (j == NULL || j->pool != pool || strcmp(j->ns, ns) != 0 || j->n == CURSOR_KILL_CHUNK) {
		j = xcalloc(1, sizeof(*j));
		j->ns = xstrdup(ns);
		j->pool = pool;
		TAILQ_INSERT_TAIL(&kill_jobs, j, link);
	}
	j->ids[j->n++] = id;
}

static void append_ids(bson_t *doc, const char *key, const int64_t *a, int na, const int64_t *b,
		       int nb)
{
	bson_t arr;
	char kbuf[16];
	const char *k;
	uint32_t i = 0;

	BSON_APPEND_ARRAY_BEGIN(doc, key, &arr);
	for (int x = 0; x < na; x++, i++) {
		bson_uint32_to_string(i, &k, kbuf, sizeof(kbuf));
		bson_append_int64(&arr, k, -1, a[x]);
	}
	for (int x = 0; x < nb; x++, i++) {
		bson_uint32_to_string(i, &k, kbuf, sizeof(kbuf));
		bson_append_int64(&arr, k, -1, b[x]);
	}
	bson_append_array_end(doc, &arr);
}

static void kill_send(struct kill_job *j)
{
	const char *dot = strchr(j->ns, '.');
	struct request *req = client_request_new(NULL);
	struct cursor_note *n = note_new(NOTE_CLOSE_KILL, 0, j->ns);
	bson_t cmd;
	char db[256];

	snprintf(db, sizeof(db), "%.*s", (int)(dot - j->ns), j->ns);
	bson_init(&cmd);
	BSON_APPEND_UTF8(&cmd, "killCursors", dot + 1);
	append_ids(&cmd, "cursors", j->ids, j->n, NULL, 0);
	BSON_APPEND_UTF8(&cmd, "$db", db);
	req->msg = xevbuffer_new();
	wire_append_msg(req->msg, 0, 0, 0, &cmd);
	bson_destroy(&cmd);
	snprintf(req->cmd, sizeof(req->cmd), "killCursors");
	n->nids = j->n;
	req->client->cursor = n;
	req->route->route_pool = j->pool;
	kill_inflight++;
	STAT_INC(cursor_kills_sent);
	log_debug("killing %d cursors of a closed client on %s", j->n, j->ns);
	pool_submit(req);
}

static void pump(void)
{
	struct kill_job *j;

	while (kill_inflight < CURSOR_KILL_INFLIGHT && (j = TAILQ_FIRST(&kill_jobs)) != NULL) {
		TAILQ_REMOVE(&kill_jobs, j, link);
		kill_send(j);
		free(j->ns);
		free(j);
	}
}

static void pump_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	pump();
}

/* Deferred: never submit from inside the pool's or a server's callback. */
static void pump_schedule(void)
{
	if (g.base == NULL || TAILQ_EMPTY(&kill_jobs))
		return;
	if (pump_ev == NULL && (pump_ev = event_new(g.base, -1, 0, pump_cb, NULL)) == NULL)
		fatal("out of memory");
	event_active(pump_ev, EV_TIMEOUT, 1);
}

struct closed_kill {
	uint64_t client_id;
	int unkillable;
};

static void kill_closed_cb(struct pool *pool, const char *ns, int64_t id, void *arg)
{
	struct closed_kill *ck = arg;

	if (pin_holds_cursor(ck->client_id, id))
		return; /* load-balanced: killed on its pinned connection (pool/pin.c) */
	if (ns[0] != '\0' && strchr(ns, '.') != NULL)
		kill_enqueue(pool, ns, id);
	else
		ck->unkillable++;
}

void cursor_client_closed(uint64_t client_id)
{
	cursor_client_dropped(client_id, "closed");
}

void cursor_client_dropped(uint64_t client_id, const char *why)
{
	struct closed_kill ck = {.client_id = client_id};
	int total = cursor_table_drop_owner(client_id, kill_closed_cb, &ck);
	int unkillable = ck.unkillable;

	if (total == 0)
		return;
	log_info("C-%" PRIu64 " %s with %d open cursors: killing them on the backend%s", client_id,
		 why, total, unkillable ? " (some without namespace: left to time out)" : "");
	pump_schedule();
}

static void close_kill_reply(const struct cursor_note *n, const bson_t *body)
{
	int32_t code;

	if (cursor_reply_ok(body, &code)) {
		STAT_ADD(cursors_killed_on_close, (uint64_t)n->nids);
		return;
	}
	log_warning("killCursors of %d cursors on %s for a closed client failed (code %d)", n->nids,
		    n->ns, code);
}

void cursor_note_free(struct cursor_note *n)
{
	if (n == NULL)
		return;
	if (n->kind == NOTE_CLOSE_KILL) {
		kill_inflight--;
		pump_schedule();
	}
	free(n->ns);
	free(n->ids);
	free(n->foreign);
	free(n);
}

/* ---- admission of getMore / killCursors ------------------------------ */

static void refuse_unknown(struct request *req, int64_t id)
{
	char msg[96];

	STAT_INC(cursor_refusals);
	snprintf(msg, sizeof(msg), "mongoplex: cursor id %" PRId64 " not found", id);
	request_fail(req, MP_ERR(CURSOR_NOT_FOUND), msg, NULL);
}

static char *ns_of(const char *db, const char *coll)
{
	return bson_strdup_printf("%s.%s", db, coll);
}

static bool admit_getmore(struct request *req, const bson_t *body)
{
	struct cursor_cmd cc = {.name = "getMore", .second = "collection"};
	char err[128] = "mongoplex: getMore: field '$db' is missing or not a string";
	int64_t id;
	char *ns;

	if (!read_cmd(body, &cc, err, sizeof(err))) {
		request_fail(req, MP_ERR(IDL_DUPLICATE_FIELD), err, NULL);
		return true;
	}
	if (!cursor_id_value(&cc.first_it, &id)) {
		request_fail(req, MP_ERR(TYPE_MISMATCH),
			     "mongoplex: getMore: the cursor id must be a 64-bit integer", NULL);
		return true;
	}
	if (!cc.have_second || !BSON_ITER_HOLDS_UTF8(&cc.second_it)) {
		request_fail(req, MP_ERR(IDL_FAILED_TO_PARSE),
			     "mongoplex: getMore: field 'collection' is missing or not a string",
			     NULL);
		return true;
	}
	ns = ns_of(cc.db, bson_iter_utf8(&cc.second_it, NULL));
	if (cursor_table_owner(id, ns) != req->owner->id) {
		bson_free(ns);
		refuse_unknown(req, id);
		return true;
	}
	req->client->cursor = note_new(NOTE_GETMORE, req->owner->id, ns);
	req->route->route_pool = cursor_table_pool(id, ns); /* replica sets: the cursor's member */
	req->client->cursor->ids = ids_alloc(1);
	req->client->cursor->ids[0] = id;
	req->client->cursor->nids = 1;
	bson_free(ns);
	return false;
}

/* The ids of killCursors' `cursors`, split into the client's and the rest. */
static bool split_ids(struct request *req, bson_iter_t *arr, const char *ns, struct cursor_note *n)
{
	bson_iter_t it;
	uint32_t count = 0;

	if (!bson_iter_recurse(arr, &it))
		return false;
	while (bson_iter_next(&it))
		count++;
	n->ids = ids_alloc(count);
	n->foreign = ids_alloc(count);
	if (!bson_iter_recurse(arr, &it))
		return false;
	while (bson_iter_next(&it)) {
		int64_t id;

		if (!cursor_id_value(&it, &id))
			return false;
		if (cursor_table_owner(id, ns) == req->owner->id) {
			n->ids[n->nids++] = id;
			if (req->route->route_pool == NULL)
				req->route->route_pool = cursor_table_pool(id, ns);
		} else {
			n->foreign[n->nforeign++] = id;
		}
	}
	return true;
}

static void reply_kill_local(struct request *req, const struct cursor_note *n)
{
	bson_t doc;

	bson_init(&doc);
	append_ids(&doc, "cursorsKilled", NULL, 0, NULL, 0);
	append_ids(&doc, "cursorsNotFound", n->foreign, n->nforeign, NULL, 0);
	append_ids(&doc, "cursorsAlive", NULL, 0, NULL, 0);
	append_ids(&doc, "cursorsUnknown", NULL, 0, NULL, 0);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

/* The same killCursors with only the client's own ids, as req->msg. */
static void rewrite_kill(struct request *req, const bson_t *body, const struct cursor_note *n)
{
	bson_iter_t it;
	bson_t out;

	bson_init(&out);
	if (bson_iter_init(&it, body))
		while (bson_iter_next(&it)) {
			if (strcmp(bson_iter_key(&it), "cursors") == 0)
				append_ids(&out, "cursors", n->ids, n->nids, NULL, 0);
			else
				bson_append_iter(&out, NULL, 0, &it);
		}
	if (req->msg != NULL)
		evbuffer_free(req->msg);
	req->msg = xevbuffer_new();
	wire_append_msg(req->msg, 0, 0, req->more_to_come ? MSG_MORE_TO_COME : 0, &out);
	bson_destroy(&out);
}

static bool admit_kill(struct request *req, const bson_t *body)
{
	struct cursor_cmd cc = {.name = "killCursors", .second = "cursors"};
	char err[128] = "mongoplex: killCursors: field '$db' is missing or not a string";
	struct cursor_note *n;
	char *ns;

	if (!read_cmd(body, &cc, err, sizeof(err))) {
		request_fail(req, MP_ERR(IDL_DUPLICATE_FIELD), err, NULL);
		return true;
	}
	if (!BSON_ITER_HOLDS_UTF8(&cc.first_it) || !cc.have_second ||
	    !BSON_ITER_HOLDS_ARRAY(&cc.second_it)) {
		request_fail(req, MP_ERR(TYPE_MISMATCH),
			     "mongoplex: killCursors needs a collection name and an array "
			     "'cursors' of 64-bit integer cursor ids",
			     NULL);
		return true;
	}
	ns = ns_of(cc.db, bson_iter_utf8(&cc.first_it, NULL));
	n = note_new(NOTE_KILL, req->owner->id, ns);
	bson_free(ns);
	req->client->cursor = n;
	if (!split_ids(req, &cc.second_it, n->ns, n)) {
		request_fail(req, MP_ERR(TYPE_MISMATCH),
			     "mongoplex: killCursors: every cursor id must be a 64-bit integer",
			     NULL);
		return true;
	}
	if (n->nforeign == 0)
		return false;
	STAT_INC(cursor_refusals);
	if (n->nids == 0) {
		reply_kill_local(req, n);
		return true;
	}
	rewrite_kill(req, body, n);
	STAT_INC(requests_forwarded);
	STAT_INC(cursor_requests);
	pool_submit(req);
	return true;
}

bool cursor_admit(struct request *req, const struct wire_msg *m)
{
	if (req->owner == NULL)
		return false;
	if (m->nsequences > 0) {
		request_fail(req, MP_ERR(BAD_VALUE),
			     "mongoplex: getMore/killCursors take no document sequences", NULL);
		return true;
	}
	if (strcasecmp(req->cmd, "getMore") == 0)
		return admit_getmore(req, &m->body);
	if (strcasecmp(req->cmd, "killCursors") == 0)
		return admit_kill(req, &m->body);
	return false;
}

/* ---- replies --------------------------------------------------------- */

/* The backend's killCursors reply with the foreign ids in cursorsNotFound. */
static void reply_kill_merged(struct request *req, const bson_t *body, const struct cursor_note *n)
{
	bson_t doc;

	cursor_merge_not_found(body, n->foreign, n->nforeign, &doc);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

/* A reply opened a cursor (or kept one open). */
static void opened(struct request *req, int64_t id, const char *ns)
{
	if (req->owner != NULL) {
		cursor_table_record(req->owner->id, pool_member_of(req->route->pool), id,
				    ns ? ns : "");
		return;
	}
	if (ns == NULL || strchr(ns, '.') == NULL || req->route->pin != NULL)
		return; /* a pin's cursor is killed on its connection (pool/pin.c) */
	log_debug("cursor %" PRId64 " on %s opened for a client already gone: killing it", id, ns);
	kill_enqueue(pool_member_of(req->route->pool), ns, id);
	pump_schedule();
}

bool cursor_on_reply(struct request *req, const struct wire_msg *reply)
{
	const bson_t *body = &reply->body;
	struct cursor_note *n = req->client->cursor;
	struct cursor_reply f;
	int64_t id;
	const char *ns;
	int32_t code;
	bool ok, have_cursor;

	if (n != NULL && n->kind == NOTE_CLOSE_KILL) {
		close_kill_reply(n, body);
		return false;
	}
	cursor_reply_read(body, &f);
	ok = f.ok;
	code = f.code;
	ns = f.ns;
	id = f.id;
	have_cursor = f.have_cursor;
	if (n != NULL && n->kind == NOTE_GETMORE && ((ok && have_cursor && id == 0) || code == 43))
		cursor_table_forget(n->owner, n->ids[0], n->ns);
	if (n != NULL && n->kind == NOTE_KILL && ok) {
		for (int i = 0; i < n->nids; i++)
			cursor_table_forget(n->owner, n->ids[i], n->ns);
		if (n->nforeign > 0) {
			reply_kill_merged(req, body, n);
			return true;
		}
	}
	if (ok && have_cursor && id != 0)
		opened(req, id, ns);
	return false;
}
