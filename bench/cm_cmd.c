/*
 * cm_cmd.c — the commands the curve model answers (see cm_cmd.h): one
 * handler per command name, looked up in one table.
 */
#include "bench/cm_cmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "bench/cm.h"
#include "bench/cm_docs.h"
#include "core/errors.h"

#define MODEL_NOTE                                                                                 \
	"a model calibrated to the user's table (shared/000_6c2d24415accf5c2.txt), not MongoDB"
#define MAX_WIRE_VERSION 21 /* MongoDB 7.0 */

/* One command being answered. */
struct ctx {
	const bson_t *body;
	const char *name; /* the command: the body's first key */
	const char *db;
	const uint8_t *data; /* the whole message (OP_MSG), for kind-1 sequences */
	size_t len;
	const struct wire_msg *m;
	int64_t conn_id;
	struct cm_reply *r;
};

void cm_cmd_error(bson_t *doc, int code, const char *codename, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n = snprintf(msg, sizeof msg, "curve-model: ");

	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
	va_end(ap);
	bson_reinit(doc);
	BSON_APPEND_DOUBLE(doc, "ok", 0.0);
	BSON_APPEND_UTF8(doc, "errmsg", msg);
	BSON_APPEND_INT32(doc, "code", code);
	BSON_APPEND_UTF8(doc, "codeName", codename);
}

static void ok(bson_t *doc)
{
	BSON_APPEND_DOUBLE(doc, "ok", 1.0);
}

/* Integer option (int32, int64 or integral double) at key; dflt when absent. */
static bool opt_int(const bson_t *body, const char *key, int64_t dflt, int64_t *out)
{
	bson_iter_t it;

	*out = dflt;
	if (!bson_iter_init_find(&it, body, key))
		return true;
	if (!BSON_ITER_HOLDS_NUMBER(&it))
		return false;
	*out = bson_iter_as_int64(&it);
	return *out >= 0;
}

static const char *opt_utf8(const bson_t *body, const char *key)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, body, key) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* ------------------------------------------------------------ handshake */

static void handshake_doc(bson_t *doc, const bson_t *cmd, const char *name, int64_t conn_id)
{
	bson_iter_t it;
	struct timeval tv;
	bool legacy = strcmp(name, "hello") != 0;

	gettimeofday(&tv, NULL);
	if (bson_iter_init_find(&it, cmd, "helloOk") && bson_iter_as_bool(&it))
		BSON_APPEND_BOOL(doc, "helloOk", true);
	BSON_APPEND_BOOL(doc, legacy ? "ismaster" : "isWritablePrimary", true);
	BSON_APPEND_INT32(doc, "maxBsonObjectSize", WIRE_MAX_BSON);
	BSON_APPEND_INT32(doc, "maxMessageSizeBytes", WIRE_MAX_MESSAGE);
	BSON_APPEND_INT32(doc, "maxWriteBatchSize", 100000);
	BSON_APPEND_DATE_TIME(doc, "localTime", (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000);
	BSON_APPEND_INT32(doc, "logicalSessionTimeoutMinutes", 30);
	BSON_APPEND_INT64(doc, "connectionId", conn_id);
	BSON_APPEND_INT32(doc, "minWireVersion", 0);
	BSON_APPEND_INT32(doc, "maxWireVersion", MAX_WIRE_VERSION);
	BSON_APPEND_BOOL(doc, "readOnly", false);
	BSON_APPEND_UTF8(doc, "curveModel", MODEL_NOTE);
	ok(doc);
}

static void cmd_hello(struct ctx *x)
{
	handshake_doc(&x->r->doc, x->body, x->name, x->conn_id);
}

static void cmd_ok(struct ctx *x)
{
	ok(&x->r->doc);
}

static void cmd_build_info(struct ctx *x)
{
	bson_t *d = &x->r->doc, arr;

	BSON_APPEND_UTF8(d, "version", CM_LABEL);
	BSON_APPEND_UTF8(d, "gitVersion", "curve-model");
	BSON_APPEND_ARRAY_BEGIN(d, "versionArray", &arr);
	for (int i = 0; i < 4; i++) {
		char k[2] = {(char)('0' + i), 0};

		bson_append_int32(&arr, k, -1, 0);
	}
	bson_append_array_end(d, &arr);
	BSON_APPEND_UTF8(d, "curveModel", MODEL_NOTE);
	BSON_APPEND_UTF8(d, "curveFile", cm.curve_path);
	BSON_APPEND_INT32(d, "bits", 64);
	BSON_APPEND_INT32(d, "maxBsonObjectSize", WIRE_MAX_BSON);
	ok(d);
}

static void cmd_status(struct ctx *x)
{
	bson_t *d = &x->r->doc;

	BSON_APPEND_UTF8(d, "model", CM_LABEL);
	BSON_APPEND_UTF8(d, "curveFile", cm.curve_path);
	BSON_APPEND_INT32(d, "cells", cm.curve->ncells);
	BSON_APPEND_INT64(d, "docs", cm.docs);
	BSON_APPEND_INT64(d, "rttUs", cm.rtt_us);
	BSON_APPEND_INT32(d, "inService", cm.in_service);
	BSON_APPEND_INT32(d, "maxInService", cm.max_in_service);
	BSON_APPEND_INT64(d, "queries", (int64_t)cm.queries);
	BSON_APPEND_INT64(d, "commands", (int64_t)cm.commands);
	BSON_APPEND_INT32(d, "connections", cm.conns);
	BSON_APPEND_INT32(d, "cursors", cm_cursor_count());
	BSON_APPEND_DOUBLE(d, "timerLateUs", cm.late_usec_avg);
	BSON_APPEND_INT64(d, "timerSlackUs", cm.slack_us);
	BSON_APPEND_BOOL(d, "thinkCompensation", cm.think_comp);
	BSON_APPEND_DOUBLE(d, "thinkHighUs", cm.think_hi_us);
	BSON_APPEND_INT64(d, "wakeups", (int64_t)cm.wakeups);
	BSON_APPEND_INT64(d, "reloads", (int64_t)cm.reloads);
	BSON_APPEND_INT64(d, "reloadFailures", (int64_t)cm.reload_failures);
	ok(d);
}

/* ------------------------------------------------------------ reads */

/* "db.coll" of a command whose value is the collection name; false if not a string. */
static bool ns_of(struct ctx *x, const char *field, char *ns, size_t len)
{
	const char *coll = opt_utf8(x->body, field);

	if (!coll || !coll[0]) {
		cm_cmd_error(&x->r->doc, MP_ERR(BAD_VALUE), "%s wants a collection name", x->name);
		return false;
	}
	snprintf(ns, len, "%s.%s", x->db, coll);
	return true;
}

/* {cursor: {firstBatch: [docs], id, ns}, ok: 1}; the ids that do not fit
 * the first batch go to a new cursor unless single. Takes ids->v over. */
static void first_batch(struct ctx *x, const char *ns, struct cm_ids *ids, int64_t max, bool single)
{
	bson_t *d = &x->r->doc, cur, arr = BSON_INITIALIZER;
	size_t pos = 0;
	int64_t id = 0;

	cm_docs_batch(&arr, ids->v, ids->n, &pos, max);
	if (pos < ids->n && !single) {
		id = cm_cursor_open(ns, ids->v, ids->n, pos);
		ids->v = NULL;
		if (id == 0) {
			cm_cmd_error(d, MP_ERR(INTERNAL_ERROR),
				     "too many open cursors (at most %d, %d ids in all)",
				     CM_MAX_CURSORS, CM_MAX_CURSOR_IDS);
			goto out;
		}
	}
	BSON_APPEND_DOCUMENT_BEGIN(d, "cursor", &cur);
	BSON_APPEND_ARRAY(&cur, "firstBatch", &arr);
	BSON_APPEND_INT64(&cur, "id", id);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(d, &cur);
	ok(d);
out:
	bson_destroy(&arr);
}

static void cmd_find(struct ctx *x)
{
	char ns[512];
	bson_iter_t it;
	bson_t filter;
	const uint8_t *fd;
	uint32_t fl;
	struct cm_ids ids;
	const char *why;
	int64_t limit, batch;

	if (!ns_of(x, "find", ns, sizeof ns))
		return;
	if (!bson_iter_init_find(&it, x->body, "filter") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
		cm_cmd_error(&x->r->doc, MP_ERR(BAD_VALUE), "find wants a filter on _id");
		return;
	}
	bson_iter_document(&it, &fl, &fd);
	if (!bson_init_static(&filter, fd, fl) || !cm_docs_filter(&filter, cm.docs, &ids, &why)) {
		cm_cmd_error(&x->r->doc, MP_ERR(BAD_VALUE), "%s", why);
		return;
	}
	if (!opt_int(x->body, "limit", 0, &limit) || !opt_int(x->body, "batchSize", -1, &batch)) {
		cm_cmd_error(&x->r->doc, MP_ERR(BAD_VALUE),
			     "limit and batchSize must be numbers >= 0");
		goto out;
	}
	x->r->cost_ids = ids.asked > INT32_MAX ? INT32_MAX : (int)ids.asked;
	if (limit > 0 && ids.n > (size_t)limit)
		ids.n = (size_t)limit;
	first_batch(x, ns, &ids, batch,
		    bson_iter_init_find(&it, x->body, "singleBatch") && bson_iter_as_bool(&it));
out:
	cm_ids_free(&ids);
}

static void cmd_get_more(struct ctx *x)
{
	bson_t *d = &x->r->doc, cur, arr;
	struct cm_cursor *c;
	bson_iter_t it;
	char ns[512];
	int64_t id, batch;

	if (!bson_iter_init_find(&it, x->body, "getMore") || !BSON_ITER_HOLDS_INT64(&it)) {
		cm_cmd_error(d, MP_ERR(TYPE_MISMATCH), "getMore wants an int64 cursor id");
		return;
	}
	id = bson_iter_int64(&it);
	if (!ns_of(x, "collection", ns, sizeof ns))
		return;
	if (!opt_int(x->body, "batchSize", -1, &batch) || batch == 0)
		batch = -1;
	c = cm_cursor_find(id, ns);
	if (!c) {
		cm_cmd_error(d, MP_ERR(CURSOR_NOT_FOUND), "cursor id %lld not found",
			     (long long)id);
		return;
	}
	BSON_APPEND_DOCUMENT_BEGIN(d, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, "nextBatch", &arr);
	id = cm_cursor_next(c, &arr, batch);
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", id);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(d, &cur);
	ok(d);
}

static void cmd_kill_cursors(struct ctx *x)
{
	bson_t *d = &x->r->doc, killed, missing, empty;
	bson_iter_t it, arr;
	uint32_t nk = 0, nm = 0;
	char buf[16];
	const char *key;

	if (!bson_iter_init_find(&it, x->body, "cursors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr)) {
		cm_cmd_error(d, MP_ERR(BAD_VALUE), "killCursors wants a cursors array");
		return;
	}
	BSON_APPEND_ARRAY_BEGIN(d, "cursorsKilled", &killed);
	bson_t notfound = BSON_INITIALIZER;
	while (bson_iter_next(&arr)) {
		int64_t id = BSON_ITER_HOLDS_INT64(&arr) ? bson_iter_int64(&arr) : 0;

		if (id && cm_cursor_kill(id)) {
			bson_uint32_to_string(nk++, &key, buf, sizeof buf);
			bson_append_int64(&killed, key, -1, id);
		} else if (id) {
			bson_uint32_to_string(nm++, &key, buf, sizeof buf);
			bson_append_int64(&notfound, key, -1, id);
		}
	}
	bson_append_array_end(d, &killed);
	BSON_APPEND_ARRAY_BEGIN(d, "cursorsNotFound", &missing);
	bson_concat(&missing, &notfound);
	bson_append_array_end(d, &missing);
	bson_destroy(&notfound);
	BSON_APPEND_ARRAY_BEGIN(d, "cursorsAlive", &empty);
	bson_append_array_end(d, &empty);
	BSON_APPEND_ARRAY_BEGIN(d, "cursorsUnknown", &empty);
	bson_append_array_end(d, &empty);
	ok(d);
}

/* count: every document, or those of an _id query. */
static void cmd_count(struct ctx *x)
{
	bson_iter_t it;
	bson_t q;
	const uint8_t *qd;
	uint32_t ql;
	struct cm_ids ids;
	const char *why;
	int64_t n = cm.docs;

	if (bson_iter_init_find(&it, x->body, "query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &ql, &qd);
		if (!bson_init_static(&q, qd, ql))
			return;
		if (!bson_empty(&q)) {
			if (!cm_docs_filter(&q, cm.docs, &ids, &why)) {
				cm_cmd_error(&x->r->doc, MP_ERR(BAD_VALUE), "count: %s", why);
				return;
			}
			n = (int64_t)ids.n;
			cm_ids_free(&ids);
		}
	}
	BSON_APPEND_INT64(&x->r->doc, "n", n);
	ok(&x->r->doc);
}

/* ------------------------------------------------------------ writes, ignored */

/* Counts the documents of a kind-1 sequence named "documents". */
static bool count_seq(const char *ident, const uint8_t *docs, size_t len, void *arg)
{
	int64_t *n = arg;
	size_t off = 0;

	if (strcmp(ident, "documents") != 0)
		return true;
	while (off + 4 <= len) {
		uint32_t dl = (uint32_t)wire_read_i32(docs + off);

		if (dl < 5 || dl > len - off)
			break;
		(*n)++;
		off += dl;
	}
	return true;
}

static void cmd_insert(struct ctx *x)
{
	bson_iter_t it, arr;
	int64_t n = 0;

	if (bson_iter_init_find(&it, x->body, "documents") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &arr))
		while (bson_iter_next(&arr))
			n++;
	if (!wire_msg_each_sequence(x->data, x->len, x->m, count_seq, &n))
		n = 0;
	BSON_APPEND_INT64(&x->r->doc, "n", n);
	ok(&x->r->doc);
}

static void cmd_write_none(struct ctx *x)
{
	BSON_APPEND_INT32(&x->r->doc, "n", 0);
	if (!strcmp(x->name, "update"))
		BSON_APPEND_INT32(&x->r->doc, "nModified", 0);
	ok(&x->r->doc);
}

static void cmd_create_indexes(struct ctx *x)
{
	BSON_APPEND_INT32(&x->r->doc, "numIndexesBefore", 1);
	BSON_APPEND_INT32(&x->r->doc, "numIndexesAfter", 1);
	BSON_APPEND_BOOL(&x->r->doc, "createdCollectionAutomatically", false);
	ok(&x->r->doc);
}

/* ------------------------------------------------------------ dispatch */

/* Every command the model answers; the rest get CommandNotFound. */
static const struct handler {
	const char *name;
	void (*fn)(struct ctx *x);
} handlers[] = {
    {"hello", cmd_hello},
    {"isMaster", cmd_hello},
    {"ismaster", cmd_hello},
    {"ping", cmd_ok},
    {"buildInfo", cmd_build_info},
    {"buildinfo", cmd_build_info},
    {"curveModelStatus", cmd_status},
    {"find", cmd_find},
    {"getMore", cmd_get_more},
    {"killCursors", cmd_kill_cursors},
    {"count", cmd_count},
    {"endSessions", cmd_ok},
    {"insert", cmd_insert},
    {"update", cmd_write_none},
    {"delete", cmd_write_none},
    {"drop", cmd_ok},
    {"dropDatabase", cmd_ok},
    {"create", cmd_ok},
    {"createIndexes", cmd_create_indexes},
    {"dropIndexes", cmd_ok},
};

static void dispatch(struct ctx *x)
{
	for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
		if (!strcmp(handlers[i].name, x->name)) {
			handlers[i].fn(x);
			return;
		}
	}
	cm_cmd_error(&x->r->doc, MP_ERR(COMMAND_NOT_FOUND),
		     "no such command: '%.100s' (this is a model of the user's table, not MongoDB)",
		     x->name);
}

/* The body's first key, or NULL. */
static const char *first_key(const bson_t *body)
{
	bson_iter_t it;

	return bson_iter_init(&it, body) && bson_iter_next(&it) ? bson_iter_key(&it) : NULL;
}

void cm_cmd_msg(const struct wire_msg *m, const uint8_t *data, size_t len, int64_t conn_id,
		struct cm_reply *r)
{
	struct ctx x = {
	    &m->body, first_key(&m->body), opt_utf8(&m->body, "$db"), data, len, m, conn_id, r};

	bson_init(&r->doc);
	r->cost_ids = -1;
	r->no_reply = (m->flags & MSG_MORE_TO_COME) != 0;
	cm.commands++;
	if (!x.name)
		cm_cmd_error(&r->doc, MP_ERR(BAD_VALUE), "empty command");
	else if (!x.db)
		cm_cmd_error(&r->doc, MP_ERR(LOCATION_40571),
			     "OP_MSG requests require a $db argument");
	else
		dispatch(&x);
}

void cm_cmd_query(const struct wire_query *q, int64_t conn_id, struct cm_reply *r)
{
	const char *name = first_key(&q->query);
	size_t cl = strlen(q->collection);

	bson_init(&r->doc);
	r->cost_ids = -1;
	r->no_reply = false;
	cm.commands++;
	if (name && cl >= 5 && !strcmp(q->collection + cl - 5, ".$cmd") &&
	    (!strcmp(name, "hello") || !strcmp(name, "isMaster") || !strcmp(name, "ismaster")))
		handshake_doc(&r->doc, &q->query, name, conn_id);
	else
		cm_cmd_error(&r->doc, MP_ERR(UNSUPPORTED_OP_QUERY_COMMAND),
			     "Unsupported OP_QUERY command: %.100s (only the handshake)",
			     name ? name : "(none)");
}
