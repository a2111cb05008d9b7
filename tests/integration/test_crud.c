/*
 * test_crud.c — ordinary driver traffic through the proxy, compared with the
 * same operations sent straight to the backend: inserts (including one raw
 * OP_MSG carrying 100,000 documents), cursors with getMore and killCursors,
 * updates, deletes, aggregation, counts, server errors, 16 MB documents,
 * unacknowledged writes and sessions.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ------------------------------------------------------------------ helpers */

/* Commands seen by a client (command monitoring). */
struct apm_log {
	int started_find, started_getmore, started_killcursors;
	int getmore_with_lsid, find_with_lsid;
	bson_t lsid;		  /* expected lsid (empty: not checked) */
	bson_t killcursors_reply; /* last killCursors reply */
	bool have_kill_reply;
};

static bool lsid_matches(const struct apm_log *log, const bson_t *cmd)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	bson_t got;

	if (!bson_iter_init_find(&it, cmd, "lsid") || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return false;
	if (log->lsid.len <= 5)
		return true;
	bson_iter_document(&it, &len, &data);
	return bson_init_static(&got, data, len) && bson_equal(&got, &log->lsid);
}

static void apm_started(const mongoc_apm_command_started_t *ev)
{
	struct apm_log *log = mongoc_apm_command_started_get_context(ev);
	const char *name = mongoc_apm_command_started_get_command_name(ev);
	const bson_t *cmd = mongoc_apm_command_started_get_command(ev);

	if (strcmp(name, "find") == 0) {
		log->started_find++;
		log->find_with_lsid += lsid_matches(log, cmd);
	} else if (strcmp(name, "getMore") == 0) {
		log->started_getmore++;
		log->getmore_with_lsid += lsid_matches(log, cmd);
	} else if (strcmp(name, "killCursors") == 0) {
		log->started_killcursors++;
	}
}

static void apm_succeeded(const mongoc_apm_command_succeeded_t *ev)
{
	struct apm_log *log = mongoc_apm_command_succeeded_get_context(ev);

	if (strcmp(mongoc_apm_command_succeeded_get_command_name(ev), "killCursors") == 0) {
		if (log->have_kill_reply)
			bson_destroy(&log->killcursors_reply);
		bson_copy_to(mongoc_apm_command_succeeded_get_reply(ev), &log->killcursors_reply);
		log->have_kill_reply = true;
	}
}

static void apm_attach(mongoc_client_t *c, struct apm_log *log)
{
	mongoc_apm_callbacks_t *cbs = mongoc_apm_callbacks_new();

	memset(log, 0, sizeof(*log));
	bson_init(&log->lsid);
	mongoc_apm_set_command_started_cb(cbs, apm_started);
	mongoc_apm_set_command_succeeded_cb(cbs, apm_succeeded);
	cr_assert(mongoc_client_set_apm_callbacks(c, cbs, log));
	mongoc_apm_callbacks_destroy(cbs);
}

static void apm_reset(struct apm_log *log)
{
	bson_destroy(&log->lsid);
	if (log->have_kill_reply)
		bson_destroy(&log->killcursors_reply);
	memset(log, 0, sizeof(*log));
	bson_init(&log->lsid);
}

static char *json(const bson_t *doc)
{
	return bson_as_relaxed_extended_json(doc, NULL);
}

/* Assert two replies are equal once volatile fields are dropped. */
static void assert_same(const bson_t *via_proxy, const bson_t *direct, const char *what)
{
	char *why = NULL;

	cr_assert(h_same_reply(via_proxy, direct, &why), "%s differs through the proxy:\n%s", what,
		  why);
}

static void insert_docs(mongoc_client_t *c, const char *db, const char *coll, int n)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	mongoc_bulk_operation_t *bulk =
	    mongoc_collection_create_bulk_operation_with_opts(col, NULL);
	bson_error_t err;
	bson_t reply;
	bool ok;

	for (int i = 0; i < n; i++) {
		bson_t doc = BSON_INITIALIZER;

		BSON_APPEND_INT32(&doc, "_id", i);
		BSON_APPEND_INT32(&doc, "g", i % 5);
		BSON_APPEND_INT32(&doc, "v", i);
		BSON_APPEND_UTF8(&doc, "s", "some text to make the document less trivial");
		mongoc_bulk_operation_insert(bulk, &doc);
		bson_destroy(&doc);
	}
	ok = mongoc_bulk_operation_execute(bulk, &reply, &err) != 0;
	cr_assert(ok, "inserting %d docs into %s.%s failed: %s", n, db, coll, err.message);
	cr_assert_eq(h_get_int(&reply, "nInserted", -1), n);
	bson_destroy(&reply);
	mongoc_bulk_operation_destroy(bulk);
	mongoc_collection_destroy(col);
}

/* count_documents; -1 on error. */
static int64_t count_docs_soft(mongoc_client_t *c, const char *db, const char *coll,
			       const bson_t *filter, bson_error_t *err)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t empty = BSON_INITIALIZER;
	int64_t n =
	    mongoc_collection_count_documents(col, filter ? filter : &empty, NULL, NULL, NULL, err);

	mongoc_collection_destroy(col);
	bson_destroy(&empty);
	return n;
}

static int64_t count_docs(mongoc_client_t *c, const char *db, const char *coll,
			  const bson_t *filter)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t empty = BSON_INITIALIZER;
	bson_error_t err;
	int64_t n = mongoc_collection_count_documents(col, filter ? filter : &empty, NULL, NULL,
						      NULL, &err);

	cr_assert(n >= 0, "count_documents on %s.%s failed: %s", db, coll, err.message);
	mongoc_collection_destroy(col);
	bson_destroy(&empty);
	return n;
}

/* ------------------------------------------------------------------ inserts */

/* A document with most BSON types, deterministic. */
static void typed_doc(bson_t *doc, int i)
{
	bson_t sub, arr;
	bson_oid_t oid;
	uint8_t bin[4] = {1, 2, 3, (uint8_t)i};
	char hex[25];

	snprintf(hex, sizeof(hex), "65a1b2c3d4e5f60718%06x", i);
	bson_oid_init_from_string(&oid, hex);
	bson_init(doc);
	BSON_APPEND_INT32(doc, "_id", i);
	BSON_APPEND_INT64(doc, "i64", (int64_t)i * 10000000000LL);
	BSON_APPEND_DOUBLE(doc, "d", i + 0.25);
	BSON_APPEND_UTF8(doc, "s", "h\xc3\xa9llo w\xc3\xb6rld");
	BSON_APPEND_BOOL(doc, "b", i % 2 == 0);
	BSON_APPEND_NULL(doc, "n");
	BSON_APPEND_OID(doc, "oid", &oid);
	BSON_APPEND_DATE_TIME(doc, "when", 1700000000000LL + i);
	BSON_APPEND_BINARY(doc, "bin", BSON_SUBTYPE_BINARY, bin, sizeof(bin));
	BSON_APPEND_DOCUMENT_BEGIN(doc, "sub", &sub);
	BSON_APPEND_INT32(&sub, "x", i);
	BSON_APPEND_UTF8(&sub, "y", "nested");
	bson_append_document_end(doc, &sub);
	BSON_APPEND_ARRAY_BEGIN(doc, "arr", &arr);
	BSON_APPEND_INT32(&arr, "0", 1);
	BSON_APPEND_UTF8(&arr, "1", "two");
	BSON_APPEND_DOUBLE(&arr, "2", 3.5);
	bson_append_array_end(doc, &arr);
}

static void do_inserts(mongoc_client_t *c, const char *db, const char *coll, bson_t *r_one,
		       bson_t *r_many)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	const bson_t *docs[20];
	bson_t store[20], one;
	bson_error_t err;
	bool ok;

	typed_doc(&one, 1000);
	ok = mongoc_collection_insert_one(col, &one, NULL, r_one, &err);
	cr_assert(ok, "insert_one into %s.%s failed: %s", db, coll, err.message);
	for (int i = 0; i < 20; i++) {
		typed_doc(&store[i], i);
		docs[i] = &store[i];
	}
	ok = mongoc_collection_insert_many(col, docs, 20, NULL, r_many, &err);
	cr_assert(ok, "insert_many into %s.%s failed: %s", db, coll, err.message);
	for (int i = 0; i < 20; i++)
		bson_destroy(&store[i]);
	bson_destroy(&one);
	mongoc_collection_destroy(col);
}

Test(crud, insert_one_and_many, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-insert");
	mongoc_client_t *dc = h_backend_client("itest-insert-direct");
	bson_t p_one, p_many, d_one, d_many, p_docs, d_docs, p_docs_direct;
	char db[64];
	int64_t n;

	h_unique(db, sizeof(db), "it_ins");
	do_inserts(pc, db, "via_proxy", &p_one, &p_many);
	do_inserts(dc, db, "direct", &d_one, &d_many);
	assert_same(&p_one, &d_one, "insert_one reply");
	assert_same(&p_many, &d_many, "insert_many reply");
	cr_assert_eq(h_get_int(&p_many, "insertedCount", -1), 20);

	/* What the proxy wrote, read through the proxy and directly, equals
	 * what the same inserts wrote directly. */
	n = h_all_docs(pc, db, "via_proxy", &p_docs);
	cr_assert_eq(n, 21, "read back %lld documents through the proxy", (long long)n);
	cr_assert_eq(h_all_docs(dc, db, "direct", &d_docs), 21);
	cr_assert_eq(h_all_docs(dc, db, "via_proxy", &p_docs_direct), 21);
	cr_assert(bson_equal(&p_docs, &d_docs), "documents differ:\nproxy: %s\ndirect: %s",
		  json(&p_docs), json(&d_docs));
	cr_assert(bson_equal(&p_docs, &p_docs_direct));

	h_drop_db(dc, db);
	bson_destroy(&p_one);
	bson_destroy(&p_many);
	bson_destroy(&d_one);
	bson_destroy(&d_many);
	bson_destroy(&p_docs);
	bson_destroy(&d_docs);
	bson_destroy(&p_docs_direct);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* One OP_MSG: body {insert, ordered, $db} + a kind-1 "documents" sequence. */
static void build_bulk_insert(struct h_buf *b, int32_t request_id, const char *db, const char *coll,
			      int ndocs)
{
	bson_t body = BSON_INITIALIZER;
	size_t seq_start;

	BSON_APPEND_UTF8(&body, "insert", coll);
	BSON_APPEND_BOOL(&body, "ordered", true);
	BSON_APPEND_UTF8(&body, "$db", db);
	hb_header(b, request_id, 0, H_WIRE_OP_MSG);
	hb_i32(b, 0);
	hb_u8(b, 0);
	hb_doc(b, &body);
	hb_u8(b, 1);
	seq_start = b->len;
	hb_i32(b, 0); /* size, patched below */
	hb_cstr(b, "documents");
	for (int i = 0; i < ndocs; i++) {
		bson_t doc = BSON_INITIALIZER;

		BSON_APPEND_INT32(&doc, "_id", i);
		BSON_APPEND_INT32(&doc, "v", i % 7);
		hb_doc(b, &doc);
		bson_destroy(&doc);
	}
	hb_set_i32(b, seq_start, (int32_t)(b->len - seq_start));
	hb_finish(b, false);
	bson_destroy(&body);
}

/* Send the message on a fresh socket and return the reply body. */
static void raw_exchange(int fd, const struct h_buf *b, int32_t request_id, bson_t *reply,
			 const char *what)
{
	struct raw_reply r;
	enum raw_status st;
	uint8_t *msg;
	size_t len;

	cr_assert(fd >= 0, "%s: cannot connect", what);
	cr_assert(raw_send(fd, b->data, b->len), "%s: send failed", what);
	st = raw_recv_msg(fd, &msg, &len, 120000);
	cr_assert_eq(st, RAW_OK, "%s: no reply (%s)", what, raw_status_name(st));
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc, "%s: unparseable reply", what);
	cr_assert_eq(r.response_to, request_id, "%s: responseTo %d, expected %d", what,
		     r.response_to, request_id);
	bson_copy_to(&r.doc, reply);
	free(msg);
}

static void bulk_api_insert(mongoc_client_t *c, const char *db, const char *coll, int ndocs)
{
	insert_docs(c, db, coll, ndocs);
	cr_assert_eq(count_docs(c, db, coll, NULL), ndocs);
}

Test(crud, raw_insert_100k_docs_in_one_message, .timeout = 240)
{
	const int ndocs = 100000;
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-raw-insert");
	mongoc_client_t *dc = h_backend_client("itest-raw-insert-direct");
	struct h_buf b;
	bson_t r_proxy, r_direct;
	char db[64];
	int64_t n_proxy, n_direct, t0, ms_proxy, ms_direct;
	int fd;

	h_unique(db, sizeof(db), "it_raw100k");
	hb_init(&b);
	build_bulk_insert(&b, 4242, db, "docs", ndocs);
	cr_log_info("raw insert: one OP_MSG of %zu bytes carrying %d documents", b.len, ndocs);

	/* Through the proxy, then (same namespace, dropped in between, so
	 * messages naming the namespace match) straight to the backend. */
	t0 = h_now_ms();
	fd = raw_connect(p);
	raw_exchange(fd, &b, 4242, &r_proxy, "raw insert through the proxy");
	close(fd);
	ms_proxy = h_now_ms() - t0;
	n_proxy = count_docs(pc, db, "docs", NULL);
	h_drop_db(dc, db);
	t0 = h_now_ms();
	fd = raw_connect_backend();
	raw_exchange(fd, &b, 4242, &r_direct, "raw insert to the backend");
	close(fd);
	ms_direct = h_now_ms() - t0;
	n_direct = count_docs(dc, db, "docs", NULL);
	h_drop_db(dc, db);
	cr_log_info("raw insert of %d docs: backend replied %s (%lld landed, %lld ms); through "
		    "the proxy %s (%lld landed, %lld ms)",
		    ndocs, json(&r_direct), (long long)n_direct, (long long)ms_direct,
		    json(&r_proxy), (long long)n_proxy, (long long)ms_proxy);
	assert_same(&r_proxy, &r_direct, "reply to the 100,000-document insert");
	cr_assert_eq(n_proxy, n_direct, "%lld documents landed through the proxy, %lld directly",
		     (long long)n_proxy, (long long)n_direct);
	if (h_get_int(&r_direct, "ok", 0) == 1 && n_direct == ndocs) {
		cr_assert_eq(h_get_int(&r_proxy, "n", -1), ndocs);
	} else {
		cr_log_info("the backend refuses %d documents in one batch; the proxy relays the "
			    "same answer",
			    ndocs);
	}
	/* libmongoc's bulk API splits by the maxWriteBatchSize the proxy
	 * mirrors; all 100,000 land either way. */
	t0 = h_now_ms();
	bulk_api_insert(pc, db, "bulk", ndocs);
	cr_log_info("libmongoc bulk insert of %d docs through the proxy: %lld ms", ndocs,
		    (long long)(h_now_ms() - t0));

	h_drop_db(dc, db);
	hb_free(&b);
	bson_destroy(&r_proxy);
	bson_destroy(&r_direct);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* ------------------------------------------------------------------ cursors */

static int read_cursor(mongoc_client_t *c, const char *db, const char *coll, int batch_size,
		       bson_t *docs_out)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t filter = BSON_INITIALIZER, *opts;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_error_t err;
	char key[24];
	const char *k;
	int n = 0;

	opts =
	    BCON_NEW("batchSize", BCON_INT32(batch_size), "sort", "{", "_id", BCON_INT32(1), "}");
	bson_init(docs_out);
	cur = mongoc_collection_find_with_opts(col, &filter, opts, NULL);
	while (mongoc_cursor_next(cur, &doc)) {
		bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));
		bson_append_document(docs_out, k, -1, doc);
	}
	cr_assert(!mongoc_cursor_error(cur, &err), "cursor on %s.%s failed after %d docs: %s", db,
		  coll, n, err.message);
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	bson_destroy(&filter);
	bson_destroy(opts);
	return n;
}

/* find with a small batch: the reply's cursor id (nonzero) and ns. */
static int64_t open_cursor_cmd(mongoc_client_t *c, const char *db, const char *coll)
{
	bson_t *cmd =
	    BCON_NEW("find", BCON_UTF8(coll), "filter", "{", "}", "batchSize", BCON_INT32(2));
	bson_t reply;
	bson_error_t err;
	int64_t id;
	bool ok = h_cmd(c, db, cmd, &reply, &err);

	cr_assert(ok, "find failed: %s", err.message);
	id = h_get_int(&reply, "cursor.id", 0);
	cr_assert_neq(id, 0, "find with batchSize 2 on 20 docs returned no open cursor: %s",
		      json(&reply));
	bson_destroy(cmd);
	bson_destroy(&reply);
	return id;
}

static void kill_cursor_cmd(mongoc_client_t *c, const char *db, const char *coll, int64_t id,
			    const char *what)
{
	bson_t *cmd = BCON_NEW("killCursors", BCON_UTF8(coll), "cursors", "[", BCON_INT64(id), "]");
	bson_t reply;
	bson_error_t err;
	bool ok = h_cmd(c, db, cmd, &reply, &err);

	cr_assert(ok, "%s: killCursors failed: %s", what, err.message);
	cr_assert_eq(h_get_int(&reply, "cursorsKilled.0", 0), id,
		     "%s: killCursors did not report cursor %lld killed: %s", what, (long long)id,
		     json(&reply));
	cr_assert_eq(h_get_int(&reply, "cursorsKilled.1", -1), -1);
	bson_destroy(cmd);
	bson_destroy(&reply);
}

/* getMore on a dead cursor: the server's error (code, codeName). */
static void getmore_dead(mongoc_client_t *c, const char *db, const char *coll, int64_t id,
			 bson_t *reply)
{
	bson_t *cmd = BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8(coll));
	bson_t full;
	bson_error_t err;
	bool ok = h_cmd(c, db, cmd, &full, &err);
	const char *cn;

	cr_assert(!ok, "getMore on killed cursor %lld succeeded: %s", (long long)id, json(&full));
	bson_init(reply);
	BSON_APPEND_INT64(reply, "code", h_get_int(&full, "code", -1));
	cn = h_get_str(&full, "codeName");
	BSON_APPEND_UTF8(reply, "codeName", cn ? cn : "");
	bson_destroy(cmd);
	bson_destroy(&full);
}

/* Open a cursor through a mongoc_cursor_t, read one batch, destroy it. */
static int64_t destroy_open_cursor(mongoc_client_t *c, const char *db, const char *coll)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t filter = BSON_INITIALIZER, *opts = BCON_NEW("batchSize", BCON_INT32(3));
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, opts, NULL);
	const bson_t *doc;
	int64_t id;

	cr_assert(mongoc_cursor_next(cur, &doc));
	id = mongoc_cursor_get_id(cur);
	cr_assert_neq(id, 0);
	mongoc_cursor_destroy(cur); /* sends killCursors */
	mongoc_collection_destroy(col);
	bson_destroy(&filter);
	bson_destroy(opts);
	return id;
}

Test(crud, cursor_getmore_and_killcursors, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-cursor");
	mongoc_client_t *dc = h_backend_client("itest-cursor-direct");
	struct apm_log plog, dlog;
	bson_t p_docs, d_docs, st0, st1, p_err, d_err;
	char db[64];
	int64_t id, cursor_reqs;
	int n;

	h_unique(db, sizeof(db), "it_cur");
	apm_attach(pc, &plog);
	apm_attach(dc, &dlog);
	insert_docs(dc, db, "c", 100);
	h_stats(pc, &st0);

	/* 100 docs in batches of 10: a find and at least 9 getMores. */
	n = read_cursor(pc, db, "c", 10, &p_docs);
	cr_assert_eq(n, 100, "read %d of 100 documents through the proxy", n);
	read_cursor(dc, db, "c", 10, &d_docs);
	cr_assert(bson_equal(&p_docs, &d_docs), "cursor contents differ through the proxy");
	cr_assert_geq(plog.started_getmore, 3, "only %d getMore batches", plog.started_getmore);
	cr_assert_eq(plog.started_getmore, dlog.started_getmore,
		     "%d getMores through the proxy, %d direct", plog.started_getmore,
		     dlog.started_getmore);
	h_stats(pc, &st1);
	cursor_reqs = h_get_int(&st1, "counters.cursor_requests", 0) -
		      h_get_int(&st0, "counters.cursor_requests", 0);
	cr_assert_geq(cursor_reqs, plog.started_getmore,
		      "proxy counted %lld cursor requests for %d getMores", (long long)cursor_reqs,
		      plog.started_getmore);
	cr_log_info("cursor: 100 docs through the proxy in 1 find + %d getMore batches",
		    plog.started_getmore);

	/* killCursors as a command, on a fresh cursor; then the cursor is gone. */
	id = open_cursor_cmd(pc, db, "c");
	kill_cursor_cmd(pc, db, "c", id, "through the proxy");
	getmore_dead(pc, db, "c", id, &p_err);
	id = open_cursor_cmd(dc, db, "c");
	kill_cursor_cmd(dc, db, "c", id, "direct");
	getmore_dead(dc, db, "c", id, &d_err);
	assert_same(&p_err, &d_err, "getMore on a killed cursor");

	/* mongoc_cursor_destroy on an open cursor sends killCursors. */
	apm_reset(&plog);
	id = destroy_open_cursor(pc, db, "c");
	cr_assert_eq(plog.started_killcursors, 1, "mongoc_cursor_destroy sent %d killCursors",
		     plog.started_killcursors);
	cr_assert(plog.have_kill_reply, "killCursors through the proxy did not succeed");
	cr_assert_eq(h_get_int(&plog.killcursors_reply, "cursorsKilled.0", 0), id,
		     "killCursors reply: %s", json(&plog.killcursors_reply));

	/* The connection is still in order. */
	cr_assert_eq(count_docs(pc, db, "c", NULL), 100);

	h_drop_db(dc, db);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	apm_reset(&plog);
	apm_reset(&dlog);
	bson_destroy(&p_docs);
	bson_destroy(&d_docs);
	bson_destroy(&st0);
	bson_destroy(&st1);
	bson_destroy(&p_err);
	bson_destroy(&d_err);
	proxy_stop(p);
}

/* ------------------------------------------------------ update/delete/etc. */

/* A fixed script of writes and reads; every answer is appended to *out
 * under a step name, to be compared between the two paths. */
static void crud_script(mongoc_client_t *c, const char *db, const char *coll, bson_t *out)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_error_t err;
	bson_t reply, *sel, *upd, *opts, *pipeline, *cmd;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_t arr;
	int n;
	bool ok;

	bson_init(out);
#define STEP(name, call)                                                                           \
	do {                                                                                       \
		ok = (call);                                                                       \
		cr_assert(ok, "%s on %s.%s failed: %s", name, db, coll, err.message);              \
		BSON_APPEND_DOCUMENT(out, name, &reply);                                           \
		bson_destroy(&reply);                                                              \
	} while (0)

	sel = BCON_NEW("g", BCON_INT32(1));
	upd = BCON_NEW("$inc", "{", "v", BCON_INT32(100), "}");
	STEP("update_many", mongoc_collection_update_many(col, sel, upd, NULL, &reply, &err));
	bson_destroy(sel);
	bson_destroy(upd);

	sel = BCON_NEW("_id", BCON_INT32(3));
	upd = BCON_NEW("$set", "{", "t", BCON_UTF8("x"), "}");
	STEP("update_one", mongoc_collection_update_one(col, sel, upd, NULL, &reply, &err));
	bson_destroy(upd);
	upd = BCON_NEW("$set", "{", "t", BCON_UTF8("x"), "}");
	STEP("update_one_noop", mongoc_collection_update_one(col, sel, upd, NULL, &reply, &err));
	bson_destroy(sel);
	bson_destroy(upd);

	sel = BCON_NEW("_id", BCON_INT32(1000));
	upd = BCON_NEW("$set", "{", "v", BCON_INT32(1), "g", BCON_INT32(9), "}");
	opts = BCON_NEW("upsert", BCON_BOOL(true));
	STEP("upsert", mongoc_collection_update_one(col, sel, upd, opts, &reply, &err));
	bson_destroy(sel);
	bson_destroy(upd);
	bson_destroy(opts);

	sel = BCON_NEW("_id", BCON_INT32(4));
	upd = BCON_NEW("g", BCON_INT32(4), "v", BCON_INT32(-4), "replaced", BCON_BOOL(true));
	STEP("replace_one", mongoc_collection_replace_one(col, sel, upd, NULL, &reply, &err));
	bson_destroy(sel);
	bson_destroy(upd);

	sel = BCON_NEW("_id", BCON_INT32(0));
	STEP("delete_one", mongoc_collection_delete_one(col, sel, NULL, &reply, &err));
	bson_destroy(sel);
	sel = BCON_NEW("g", BCON_INT32(2));
	STEP("delete_many", mongoc_collection_delete_many(col, sel, NULL, &reply, &err));
	bson_destroy(sel);
	sel = BCON_NEW("g", BCON_INT32(77));
	STEP("delete_none", mongoc_collection_delete_many(col, sel, NULL, &reply, &err));
	bson_destroy(sel);

	/* count command, and count_documents (an aggregate under the hood) */
	cmd = BCON_NEW("count", BCON_UTF8(coll), "query", "{", "g", BCON_INT32(1), "}");
	STEP("count_cmd", h_cmd(c, db, cmd, &reply, &err));
	bson_destroy(cmd);
	sel = BCON_NEW("g", BCON_INT32(1));
	bson_init(&reply);
	BSON_APPEND_INT64(&reply, "n",
			  mongoc_collection_count_documents(col, sel, NULL, NULL, NULL, &err));
	ok = h_get_int(&reply, "n", -1) >= 0;
	cr_assert(ok, "count_documents failed: %s", err.message);
	BSON_APPEND_DOCUMENT(out, "count_documents", &reply);
	bson_destroy(&reply);
	bson_destroy(sel);

	cmd = BCON_NEW("findAndModify", BCON_UTF8(coll), "query", "{", "_id", BCON_INT32(7), "}",
		       "update", "{", "$set", "{", "fam", BCON_INT32(1), "}", "}", "new",
		       BCON_BOOL(true));
	STEP("findAndModify", h_cmd(c, db, cmd, &reply, &err));
	bson_destroy(cmd);

	/* aggregate: group and sort */
	pipeline = BCON_NEW("pipeline", "[", "{", "$match", "{", "v", "{", "$gte", BCON_INT32(10),
			    "}", "}", "}", "{", "$group", "{", "_id", BCON_UTF8("$g"), "total", "{",
			    "$sum", BCON_UTF8("$v"), "}", "n", "{", "$sum", BCON_INT32(1), "}", "}",
			    "}", "{", "$sort", "{", "_id", BCON_INT32(1), "}", "}", "]");
	cur = mongoc_collection_aggregate(col, MONGOC_QUERY_NONE, pipeline, NULL, NULL);
	BSON_APPEND_ARRAY_BEGIN(out, "aggregate", &arr);
	n = 0;
	while (mongoc_cursor_next(cur, &doc)) {
		char key[16];
		const char *k;

		bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));
		bson_append_document(&arr, k, -1, doc);
	}
	bson_append_array_end(out, &arr);
	cr_assert(!mongoc_cursor_error(cur, &err), "aggregate failed: %s", err.message);
	cr_assert_geq(n, 3, "aggregate returned %d groups", n);
	mongoc_cursor_destroy(cur);
	bson_destroy(pipeline);

	/* final contents */
	cr_assert_geq(h_all_docs(c, db, coll, &reply), 1);
	BSON_APPEND_DOCUMENT(out, "final", &reply);
	bson_destroy(&reply);
#undef STEP
	mongoc_collection_destroy(col);
}

Test(crud, update_delete_aggregate_count, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-crud");
	mongoc_client_t *dc = h_backend_client("itest-crud-direct");
	bson_t p_out, d_out;
	char db[64];
	char *why = NULL;

	h_unique(db, sizeof(db), "it_crud");
	insert_docs(pc, db, "via_proxy", 50);
	insert_docs(dc, db, "direct", 50);
	crud_script(pc, db, "via_proxy", &p_out);
	crud_script(dc, db, "direct", &d_out);
	cr_assert_eq(h_get_int(&p_out, "update_many.matchedCount", -1), 10);
	cr_assert_eq(h_get_int(&p_out, "update_many.modifiedCount", -1), 10);
	cr_assert_eq(h_get_int(&p_out, "delete_many.deletedCount", -1), 10);
	cr_assert_eq(h_get_int(&p_out, "count_cmd.n", -1), 10);
	cr_assert_eq(h_get_int(&p_out, "count_documents.n", -1), 10);
	cr_assert(h_same_reply(&p_out, &d_out, &why), "results differ:\n%s", why);

	h_drop_db(dc, db);
	bson_destroy(&p_out);
	bson_destroy(&d_out);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* ------------------------------------------------------------------ errors */

/* Run cmd through both clients (same namespace) and compare the replies. */
static void same_error(mongoc_client_t *pc, mongoc_client_t *dc, const char *db, const char *js,
		       bool expect_ok, const char *what)
{
	bson_t rp, rd;
	bson_error_t ep, ed;
	bool okp = h_cmd_json(pc, db, js, &rp, &ep);
	bool okd = h_cmd_json(dc, db, js, &rd, &ed);

	cr_assert_eq(okp, okd, "%s: ok through the proxy = %d, direct = %d (%s / %s)", what, okp,
		     okd, ep.message, ed.message);
	cr_assert_eq(okp, expect_ok, "%s: unexpected %s: %s", what, okp ? "success" : "failure",
		     json(&rd));
	if (!okp) {
		cr_assert_eq(ep.code, ed.code, "%s: code %u through the proxy, %u direct", what,
			     ep.code, ed.code);
		cr_assert_str_eq(ep.message, ed.message);
	}
	assert_same(&rp, &rd, what);
	cr_log_info("%s: %s", what, json(&rp));
	bson_destroy(&rp);
	bson_destroy(&rd);
}

Test(crud, server_errors_reach_the_client_unchanged, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-errors");
	mongoc_client_t *dc = h_backend_client("itest-errors-direct");
	mongoc_collection_t *pcol, *dcol;
	bson_error_t ep, ed;
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "a", BCON_INT32(1));
	bson_t rp, rd;
	char db[64], js[256];
	bool okp, okd;

	h_unique(db, sizeof(db), "it_err");
	dcol = mongoc_client_get_collection(dc, db, "dup");
	pcol = mongoc_client_get_collection(pc, db, "dup");
	cr_assert(mongoc_collection_insert_one(dcol, doc, NULL, NULL, &ed), "%s", ed.message);

	/* duplicate key through the driver API */
	okp = mongoc_collection_insert_one(pcol, doc, NULL, &rp, &ep);
	okd = mongoc_collection_insert_one(dcol, doc, NULL, &rd, &ed);
	cr_assert(!okp && !okd, "duplicate insert succeeded (proxy %d, direct %d)", okp, okd);
	cr_assert_eq(ep.code, 11000, "duplicate key through the proxy: code %u (%s)", ep.code,
		     ep.message);
	cr_assert_eq(ep.code, ed.code);
	cr_assert_str_eq(ep.message, ed.message);
	assert_same(&rp, &rd, "duplicate key reply (insert_one)");
	bson_destroy(&rp);
	bson_destroy(&rd);

	/* the raw command replies, writeErrors and all */
	snprintf(js, sizeof(js), "{\"insert\": \"dup\", \"documents\": [{\"_id\": 1}]}");
	same_error(pc, dc, db, js, true, "insert duplicate (command reply with writeErrors)");
	same_error(pc, dc, db, "{\"noSuchCommandXyz\": 1}", false, "unknown command");
	same_error(pc, dc, db, "{\"find\": \"dup\", \"filter\": {\"a\": {\"$bogus\": 1}}}", false,
		   "unknown query operator");
	same_error(pc, dc, db,
		   "{\"update\": \"dup\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": "
		   "{\"$frobnicate\": {\"a\": 1}}}]}",
		   true, "unknown update operator");
	same_error(pc, dc, db,
		   "{\"aggregate\": \"dup\", \"pipeline\": [{\"$nonsenseStage\": {}}], "
		   "\"cursor\": {}}",
		   false, "unknown aggregation stage");

	/* the connection is fine afterwards */
	cr_assert_eq(count_docs(pc, db, "dup", NULL), 1);

	h_drop_db(dc, db);
	bson_destroy(doc);
	mongoc_collection_destroy(pcol);
	mongoc_collection_destroy(dcol);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* ---------------------------------------------------------- 16 MB documents */

static bson_t *big_doc(const char *id, size_t total)
{
	bson_t *doc = bson_new();
	size_t base, len;
	char *s;

	BSON_APPEND_UTF8(doc, "_id", id);
	BSON_APPEND_UTF8(doc, "s", "");
	base = doc->len;
	bson_destroy(doc);
	len = total - base;
	s = malloc(len + 1);
	for (size_t i = 0; i < len; i++)
		s[i] = (char)('a' + (i * 7 + i / 1000) % 26);
	s[len] = '\0';
	doc = bson_new();
	BSON_APPEND_UTF8(doc, "_id", id);
	bson_append_utf8(doc, "s", 1, s, (int)len);
	free(s);
	cr_assert_eq(doc->len, total);
	return doc;
}

/* find_one by _id (the batchable shape) and by another field. */
static bool read_big(mongoc_client_t *c, const char *db, const char *id, bool by_id, bson_t *out,
		     bson_error_t *err)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, "big");
	bson_t *filter =
	    by_id ? BCON_NEW("_id", BCON_UTF8(id))
		  : BCON_NEW("_id", "{", "$gte", BCON_UTF8(id), "$lte", BCON_UTF8(id), "}");
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
	const bson_t *doc;
	bool found = mongoc_cursor_next(cur, &doc);

	if (found)
		bson_copy_to(doc, out);
	else if (!mongoc_cursor_error(cur, err))
		bson_set_error(err, 0, 0, "not found");
	mongoc_cursor_destroy(cur);
	bson_destroy(filter);
	mongoc_collection_destroy(col);
	return found;
}

Test(crud, documents_near_16mb, .timeout = 180)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-big");
	mongoc_client_t *dc = h_backend_client("itest-big-direct");
	mongoc_collection_t *pcol, *dcol;
	bson_t *doc = big_doc("big16M", 16000000), *maxdoc;
	bson_t got;
	bson_error_t err, ep, ed;
	char db[64];
	bool okp, okd;

	h_unique(db, sizeof(db), "it_big");
	pcol = mongoc_client_get_collection(pc, db, "big");
	dcol = mongoc_client_get_collection(dc, db, "big");
	cr_assert(mongoc_collection_insert_one(pcol, doc, NULL, NULL, &err),
		  "inserting a 16,000,000-byte document through the proxy: %s", err.message);
	for (int by_id = 1; by_id >= 0; by_id--) {
		cr_assert(read_big(pc, db, "big16M", by_id, &got, &err),
			  "reading it back through the proxy (%s): %s",
			  by_id ? "by _id" : "by range", err.message);
		cr_assert(bson_equal(&got, doc),
			  "the document read back through the proxy differs "
			  "(%u bytes, expected %u)",
			  got.len, doc->len);
		bson_destroy(&got);
	}
	cr_assert(read_big(dc, db, "big16M", true, &got, &err), "%s", err.message);
	cr_assert(bson_equal(&got, doc), "the document stored through the proxy differs");
	bson_destroy(&got);

	/* Exactly maxBsonObjectSize: whatever the backend says, the proxy says. */
	maxdoc = big_doc("max", 16 * 1024 * 1024);
	okd = mongoc_collection_insert_one(dcol, maxdoc, NULL, NULL, &ed);
	if (okd) {
		bson_t *sel = BCON_NEW("_id", BCON_UTF8("max"));

		mongoc_collection_delete_one(dcol, sel, NULL, NULL, NULL);
		bson_destroy(sel);
	}
	okp = mongoc_collection_insert_one(pcol, maxdoc, NULL, NULL, &ep);
	cr_assert_eq(okp, okd, "16 MiB document: insert through the proxy %s (%s), direct %s (%s)",
		     okp ? "ok" : "failed", ep.message, okd ? "ok" : "failed", ed.message);
	if (okp) {
		cr_assert(read_big(pc, db, "max", true, &got, &err),
			  "reading the 16 MiB document back through the proxy: %s", err.message);
		cr_assert(bson_equal(&got, maxdoc));
		bson_destroy(&got);
	} else {
		cr_assert_eq(ep.code, ed.code);
		cr_assert_str_eq(ep.message, ed.message);
	}
	cr_log_info("16,000,000-byte document round-tripped; 16 MiB document: %s",
		    okp ? "round-tripped" : ep.message);

	h_drop_db(dc, db);
	bson_destroy(doc);
	bson_destroy(maxdoc);
	mongoc_collection_destroy(pcol);
	mongoc_collection_destroy(dcol);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* ------------------------------------------------------ unacknowledged writes */

/* The same w:0 script on either path: 20 insert_one, one insert_many of 30,
 * one update_many, then a ping on the same connection. Returns after polling
 * (acknowledged reads) up to wait_ms for all 50 documents to show u: 1. */
static int64_t w0_script(mongoc_client_t *c, const char *db, const char *coll, int wait_ms,
			 bool via_proxy)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	mongoc_write_concern_t *w0 = mongoc_write_concern_new();
	bson_t *docs[30], *first, *sel, *upd, *updated, *cmd, reply;
	bson_error_t err;
	int64_t n, deadline;

	mongoc_write_concern_set_w(w0, MONGOC_WRITE_CONCERN_W_UNACKNOWLEDGED);
	/* Only the proxy is held to these: straight to a backend that closes
	 * the connection on moreToCome (mongo-java-server) sends fail. */
#define W0_OK(call, what)                                                                          \
	do {                                                                                       \
		if (!(call)) {                                                                     \
			cr_assert(!via_proxy, "%s through the proxy: %s", what, err.message);      \
			cr_log_info("direct: %s failed (%s)", what, err.message);                  \
		}                                                                                  \
	} while (0)
	/* Create the collection with an acknowledged write first. */
	first = BCON_NEW("_id", BCON_INT32(-1));
	W0_OK(mongoc_collection_insert_one(col, first, NULL, NULL, &err), "acknowledged insert");
	bson_destroy(first);
	mongoc_collection_set_write_concern(col, w0);
	for (int i = 0; i < 20; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "w0", BCON_BOOL(true));

		W0_OK(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "w:0 insert_one");
		bson_destroy(d);
	}
	for (int i = 0; i < 30; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(100 + i), "w0", BCON_BOOL(true));
	W0_OK(mongoc_collection_insert_many(col, (const bson_t **)docs, 30, NULL, NULL, &err),
	      "w:0 insert_many");
	for (int i = 0; i < 30; i++)
		bson_destroy(docs[i]);
	sel = BCON_NEW("w0", BCON_BOOL(true));
	upd = BCON_NEW("$set", "{", "u", BCON_INT32(1), "}");
	W0_OK(mongoc_collection_update_many(col, sel, upd, NULL, NULL, &err), "w:0 update_many");
#undef W0_OK

	/* The next command on the same connection gets its own answer (a
	 * backend may drop the connection instead: only the proxy is held to
	 * this). */
	cmd = BCON_NEW("ping", BCON_INT32(1));
	if (!h_cmd(c, "admin", cmd, &reply, &err)) {
		cr_assert(!via_proxy, "ping after w:0 writes through the proxy: %s", err.message);
		cr_log_info("direct: ping after w:0 writes failed (%s)", err.message);
	} else {
		cr_assert_eq(h_get_int(&reply, "ok", 0), 1);
	}
	bson_destroy(&reply);
	bson_destroy(cmd);

	/* Poll: through the proxy the writes may still be running on other
	 * backend connections. */
	updated = BCON_NEW("u", BCON_INT32(1));
	deadline = h_now_ms() + wait_ms;
	while ((n = count_docs_soft(c, db, coll, updated, &err)) != 50 && h_now_ms() < deadline) {
		if (n < 0) {
			cr_assert(!via_proxy, "count after w:0 writes through the proxy: %s",
				  err.message);
			cr_log_info("direct: count after w:0 writes failed (%s)", err.message);
			break;
		}
		h_sleep_ms(50);
	}
	/* Whatever happened, acknowledged traffic through the proxy works. */
	if (via_proxy)
		cr_assert_geq(count_docs(c, db, coll, NULL), 1);
	bson_destroy(sel);
	bson_destroy(upd);
	bson_destroy(updated);
	mongoc_write_concern_destroy(w0);
	mongoc_collection_destroy(col);
	return n;
}

Test(crud, unacknowledged_writes, .timeout = 90)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-w0");
	mongoc_client_t *dc = h_backend_client("itest-w0-direct");
	bson_t st0, st1, *body, *find, *sel;
	char db[64];
	int64_t n_direct, n_proxy, n, mtc, deadline;
	struct h_buf b;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	int fd;

	h_unique(db, sizeof(db), "it_w0");
	n_direct = w0_script(dc, db, "direct", 3000, false);
	h_stats(pc, &st0);
	n_proxy = w0_script(pc, db, "via_proxy", n_direct == 50 ? 10000 : 3000, true);
	h_stats(pc, &st1);
	mtc = h_get_int(&st1, "counters.more_to_come_writes", 0) -
	      h_get_int(&st0, "counters.more_to_come_writes", 0);
	cr_log_info("w:0 writes: %lld of 50 landed directly, %lld through the proxy; the proxy "
		    "counted %lld moreToCome writes",
		    (long long)n_direct, (long long)n_proxy, (long long)mtc);
	cr_assert_geq(mtc, 22, "the proxy counted %lld moreToCome writes", (long long)mtc);
	if (n_direct == 50)
		cr_assert_eq(n_proxy, 50,
			     "%lld of 50 unacknowledged writes landed through the proxy",
			     (long long)n_proxy);
	else
		cr_log_info(
		    "w:0 traffic straight to %s does not complete cleanly (it closes the "
		    "connection or replies to moreToCome); through the proxy only health is "
		    "required (%lld of 50 landed)",
		    h_backend_name(), (long long)n_proxy);

	/* Raw: a moreToCome insert, then finds on the same socket; each reply
	 * must answer its own request (nothing may answer the moreToCome
	 * message, even from a backend that replies to it). */
	body =
	    BCON_NEW("insert", BCON_UTF8("raw"), "documents", "[", "{", "_id", BCON_INT32(999), "}",
		     "]", "writeConcern", "{", "w", BCON_INT32(0), "}", "$db", BCON_UTF8(db));
	find = BCON_NEW("find", BCON_UTF8("via_proxy"), "filter", "{", "_id", BCON_INT32(-1), "}",
			"$db", BCON_UTF8(db));
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	hb_init(&b);
	h_build_msg(&b, 11, H_MSG_MORE_TO_COME, body);
	cr_assert(raw_send(fd, b.data, b.len));
	for (int i = 0; i < 20; i++) {
		int32_t id = 100 + i;

		hb_free(&b);
		h_build_msg(&b, id, 0, find);
		cr_assert(raw_send(fd, b.data, b.len));
		cr_assert_eq(raw_recv_msg(fd, &msg, &len, 10000), RAW_OK,
			     "no reply to find %d after a moreToCome insert", i);
		cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
		cr_assert_eq(
		    r.response_to, id,
		    "reply to request %d arrived for request %d after a moreToCome insert: "
		    "%s",
		    r.response_to, id, json(&r.doc));
		if (h_get_int(&r.doc, "ok", 0) == 1) {
			cr_assert_eq(h_get_int(&r.doc, "cursor.firstBatch.0._id", 0), -1,
				     "find %d answered with someone else's reply: %s", i,
				     json(&r.doc));
		} else {
			/* A backend that drops the connection on moreToCome may
			 * take a find dispatched on it down too: that must be a
			 * proper error, and only where w:0 is broken anyway. */
			cr_assert(n_direct != 50, "find %d after a moreToCome insert: %s", i,
				  json(&r.doc));
			cr_assert_neq(h_get_int(&r.doc, "code", 0), 0, "find %d: %s", i,
				      json(&r.doc));
			cr_log_info("find %d after a moreToCome insert: %s", i, json(&r.doc));
		}
		free(msg);
	}
	cr_assert_eq(raw_recv_msg(fd, &msg, &len, 300), RAW_TIMEOUT,
		     "an extra message arrived after the last reply");
	close(fd);
	hb_free(&b);
	if (n_direct == 50) {
		sel = BCON_NEW("_id", BCON_INT32(999));
		deadline = h_now_ms() + 10000;
		while ((n = count_docs(pc, db, "raw", sel)) != 1 && h_now_ms() < deadline)
			h_sleep_ms(50);
		cr_assert_eq(n, 1, "the raw moreToCome insert did not land");
		bson_destroy(sel);
	}

	h_drop_db(dc, db);
	bson_destroy(body);
	bson_destroy(find);
	bson_destroy(&st0);
	bson_destroy(&st1);
	mongoc_client_destroy(pc);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

/* ------------------------------------------------------------------ sessions */

/* A find carrying an explicit lsid, raw, through fd: the reply. */
static void raw_find_with_lsid(int fd, const char *db, bson_t *reply)
{
	static const uint8_t uuid[16] = {0x5a, 0x1d, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55,
					 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd};
	bson_t *cmd =
	    BCON_NEW("find", BCON_UTF8("s"), "filter", "{", "}", "sort", "{", "_id", BCON_INT32(1),
		     "}", "lsid", "{", "id", BCON_BIN(BSON_SUBTYPE_UUID, uuid, sizeof(uuid)), "}",
		     "$db", BCON_UTF8(db));

	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 77, cmd, reply, 10000), "no reply to a find carrying an lsid");
	bson_destroy(cmd);
}

Test(crud, sessions, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-sessions");
	mongoc_client_t *dc = h_backend_client("itest-sessions-direct");
	mongoc_client_session_t *probe, *s;
	mongoc_collection_t *col;
	struct apm_log plog;
	bson_error_t err;
	bson_t opts, rp, rd, *filter;
	const bson_t *doc;
	mongoc_cursor_t *cur;
	char db[64];
	int n = 0, fd;

	h_unique(db, sizeof(db), "it_sess");
	insert_docs(dc, db, "s", 30);

	/* An explicit lsid passes through: same answer as direct. */
	fd = raw_connect(p);
	raw_find_with_lsid(fd, db, &rp);
	close(fd);
	fd = raw_connect_backend();
	raw_find_with_lsid(fd, db, &rd);
	close(fd);
	cr_assert_eq(h_get_int(&rp, "ok", 0), 1, "find with lsid through the proxy: %s", json(&rp));
	if (h_get_int(&rp, "cursor.id", 0) == 0 && h_get_int(&rd, "cursor.id", 0) == 0)
		assert_same(&rp, &rd, "find with an explicit lsid");
	else
		cr_assert_eq(h_get_int(&rp, "ok", 0), h_get_int(&rd, "ok", 0));
	bson_destroy(&rp);
	bson_destroy(&rd);

	/* libmongoc sessions, when the backend has them. */
	probe = mongoc_client_start_session(dc, NULL, &err);
	if (probe == NULL) {
		cr_log_info("sessions: %s has no sessions (%s); checked the raw lsid pass-through "
			    "only",
			    h_backend_name(), err.message);
		goto done;
	}
	mongoc_client_session_destroy(probe);

	apm_attach(pc, &plog);
	s = mongoc_client_start_session(pc, NULL, &err);
	cr_assert(s != NULL, "the backend has sessions but through the proxy: %s", err.message);
	bson_copy_to(mongoc_client_session_get_lsid(s), &plog.lsid);
	bson_init(&opts);
	cr_assert(mongoc_client_session_append(s, &opts, &err), "%s", err.message);
	col = mongoc_client_get_collection(pc, db, "s");
	{
		bson_t *d = BCON_NEW("_id", BCON_INT32(500), "in_session", BCON_BOOL(true));

		cr_assert(mongoc_collection_insert_one(col, d, &opts, NULL, &err),
			  "insert in a session: %s", err.message);
		bson_destroy(d);
	}
	/* A cursor created in the session, iterated with getMore in it. */
	BSON_APPEND_INT32(&opts, "batchSize", 5);
	filter = bson_new();
	cur = mongoc_collection_find_with_opts(col, filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &doc))
		n++;
	cr_assert(!mongoc_cursor_error(cur, &err), "session cursor failed after %d docs: %s", n,
		  err.message);
	cr_assert_eq(n, 31, "read %d of 31 documents in the session", n);
	cr_assert_geq(plog.started_getmore, 3);
	cr_assert_eq(plog.find_with_lsid, plog.started_find,
		     "%d of %d finds carried the session's lsid", plog.find_with_lsid,
		     plog.started_find);
	cr_assert_eq(plog.getmore_with_lsid, plog.started_getmore,
		     "%d of %d getMores carried the session's lsid", plog.getmore_with_lsid,
		     plog.started_getmore);
	cr_log_info("sessions: a session cursor read 31 docs with %d getMores in the session",
		    plog.started_getmore);
	mongoc_cursor_destroy(cur);
	bson_destroy(filter);
	bson_destroy(&opts);
	mongoc_collection_destroy(col);
	mongoc_client_session_destroy(s);
	apm_reset(&plog);
done:
	h_drop_db(dc, db);
	mongoc_client_destroy(pc); /* endSessions (FerretDB refuses it; harmless) */
	mongoc_client_destroy(dc);
	proxy_stop(p);
}
