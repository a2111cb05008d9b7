/*
 * test_cursors.c — cursor ownership (issue 8, item 3): a client can only
 * getMore and killCursors the cursors it opened itself. Another client's
 * cursor is answered as mongod answers an unknown cursor (code 43 for
 * getMore, cursorsNotFound for killCursors) and never reaches the backend;
 * the owner's cursor keeps working. A client that disconnects with cursors
 * open has them killed on the backend by the proxy (checked with a direct
 * getMore on the backend, which both mongo-java-server and FerretDB allow
 * from any connection). cursors_open in mongoplexStats counts the table.
 *
 * Clients are raw OP_MSG sockets (one socket is one client connection, so
 * which client sends what is exact) and libmongoc for the owner's own
 * iteration and killCursors.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy/cursor.h" /* CURSOR_KILL_CHUNK */

#define NDOCS	   10
#define HANG_MS	   20000
#define PROBE_DOCS 200 /* getMores of one document in HANG_MS, at most */

static int32_t next_rid = 880000;

static struct proxy *start_proxy(void)
{
	return proxy_start("pool_size = 2\n");
}

static int connect_client(struct proxy *p)
{
	int fd = raw_connect(p);

	cr_assert(fd >= 0, "cannot connect to the proxy");
	return fd;
}

/* Run cmd (with $db appended) on fd; the reply must arrive. */
static void run(int fd, const char *db, bson_t *cmd, bson_t *reply)
{
	BSON_APPEND_UTF8(cmd, "$db", db);
	cr_assert(raw_command(fd, next_rid++, cmd, reply, HANG_MS), "no reply to %s",
		  bson_as_relaxed_extended_json(cmd, NULL));
	bson_destroy(cmd);
}

static char *json(const bson_t *b)
{
	static char buf[4096];
	char *s = bson_as_relaxed_extended_json(b, NULL);

	snprintf(buf, sizeof(buf), "%s", s);
	bson_free(s);
	return buf;
}

static void fill(struct proxy *p, const char *db, const char *coll, int n)
{
	mongoc_client_t *c = h_proxy_client(p, "itest-cursors-fill");
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_error_t err;

	bson_t **docs = calloc((size_t)n, sizeof(*docs));

	for (int i = 0; i < n; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i * 10));
	cr_assert(
	    mongoc_collection_insert_many(col, (const bson_t **)docs, (size_t)n, NULL, NULL, &err),
	    "insert: %s", err.message);
	for (int i = 0; i < n; i++)
		bson_destroy(docs[i]);
	free(docs);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

static int64_t reply_cursor_id(const bson_t *reply)
{
	return h_get_int(reply, "cursor.id", -1);
}

static int batch_len(const bson_t *reply, const char *which)
{
	bson_iter_t it, arr;
	char path[64];
	int n = 0;

	snprintf(path, sizeof(path), "cursor.%s", which);
	if (!bson_iter_init(&it, reply) || !bson_iter_find_descendant(&it, path, &it) ||
	    !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr))
		return -1;
	while (bson_iter_next(&arr))
		n++;
	return n;
}

/* find with batchSize on fd: returns the open cursor's id (asserted nonzero). */
static int64_t open_find(int fd, const char *db, const char *coll, int batch)
{
	bson_t reply;
	int64_t id;

	run(fd, db, BCON_NEW("find", BCON_UTF8(coll), "batchSize", BCON_INT32(batch)), &reply);
	id = reply_cursor_id(&reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1 && id > 0 &&
		      batch_len(&reply, "firstBatch") == batch,
		  "find did not leave a cursor open: %s", json(&reply));
	bson_destroy(&reply);
	return id;
}

static void getmore(int fd, const char *db, const char *coll, int64_t id, int batch, bson_t *reply)
{
	run(fd, db,
	    BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8(coll), "batchSize",
		     BCON_INT32(batch)),
	    reply);
}

static void killcursors(int fd, const char *db, const char *coll, const int64_t *ids, int n,
			bson_t *reply)
{
	bson_t *cmd = BCON_NEW("killCursors", BCON_UTF8(coll)), arr;

	BSON_APPEND_ARRAY_BEGIN(cmd, "cursors", &arr);
	for (int i = 0; i < n; i++) {
		char key[16];
		const char *k;

		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_int64(&arr, k, -1, ids[i]);
	}
	bson_append_array_end(cmd, &arr);
	run(fd, db, cmd, reply);
}

static bool array_has(const bson_t *reply, const char *field, int64_t id)
{
	bson_iter_t it, arr;

	if (!bson_iter_init_find(&it, reply, field) || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return false;
	while (bson_iter_next(&arr))
		if (BSON_ITER_HOLDS_NUMBER(&arr) && bson_iter_as_int64(&arr) == id)
			return true;
	return false;
}

/* The reply mongod gives a getMore of an unknown cursor. */
static void assert_cursor_not_found(const bson_t *reply, int64_t id, const char *what)
{
	char want[64];
	const char *msg = h_get_str(reply, "errmsg");

	snprintf(want, sizeof(want), "cursor id %lld not found", (long long)id);
	cr_assert(h_get_int(reply, "ok", 1) == 0, "%s: not refused: %s", what, json(reply));
	cr_assert_eq(h_get_int(reply, "code", 0), 43, "%s: %s", what, json(reply));
	cr_assert_str_eq(h_get_str(reply, "codeName"), "CursorNotFound", "%s", what);
	cr_assert(msg != NULL && strstr(msg, want) != NULL, "%s: errmsg %s", what, json(reply));
}

/* getMore the owner's cursor to its end; returns the documents read. */
static int drain(int fd, const char *db, const char *coll, int64_t id, int batch)
{
	int n = 0;

	for (int round = 0; round < 100; round++) {
		bson_t reply;
		int64_t next;

		getmore(fd, db, coll, id, batch, &reply);
		cr_assert(h_get_int(&reply, "ok", 0) == 1, "owner's getMore failed: %s",
			  json(&reply));
		n += batch_len(&reply, "nextBatch");
		next = reply_cursor_id(&reply);
		bson_destroy(&reply);
		if (next == 0)
			return n;
		cr_assert_eq(next, id, "getMore returned another cursor id");
	}
	cr_assert_fail("cursor %lld never ended", (long long)id);
	return n;
}

static int64_t stat_of(struct proxy *p, const char *path)
{
	bson_t st;
	int64_t v;

	proxy_stats(p, &st);
	v = h_get_int(&st, path, -1);
	bson_destroy(&st);
	return v;
}

static void wait_stat(struct proxy *p, const char *path, int64_t want)
{
	int64_t v = -1;

	for (int64_t end = h_now_ms() + HANG_MS; h_now_ms() < end; h_sleep_ms(20))
		if ((v = stat_of(p, path)) == want)
			return;
	cr_assert_fail("%s = %lld, expected %lld", path, (long long)v, (long long)want);
}

/* getMores straight to the backend (any connection may getMore there)
 * until it says the cursor does not exist; fails after HANG_MS. Each
 * probe reads one document: the cursor must have more than
 * PROBE_DOCS left, or the probes themselves would exhaust it. */
static void assert_gone_on_backend(const char *db, const char *coll, int64_t id)
{
	int fd = raw_connect_backend();
	bson_t reply = BSON_INITIALIZER;

	for (int64_t end = h_now_ms() + HANG_MS; h_now_ms() < end;
	     h_sleep_ms(HANG_MS / PROBE_DOCS)) {
		bson_destroy(&reply);
		getmore(fd, db, coll, id, 1, &reply);
		if (h_get_int(&reply, "ok", 1) == 0 && h_get_int(&reply, "code", 0) == 43)
			break;
	}
	cr_assert(h_get_int(&reply, "ok", 1) == 0 && h_get_int(&reply, "code", 0) == 43,
		  "cursor %lld still alive on the backend: %s", (long long)id, json(&reply));
	bson_destroy(&reply);
	close(fd);
}

struct fixture {
	struct proxy *p;
	char db[64];
};

static void setup(struct fixture *f, int ndocs)
{
	f->p = start_proxy();
	h_unique(f->db, sizeof(f->db), "it_cur");
	fill(f->p, f->db, "c", ndocs);
}

static void teardown(struct fixture *f)
{
	mongoc_client_t *c = h_proxy_client(f->p, "itest-cursors-drop");

	h_drop_db(c, f->db);
	mongoc_client_destroy(c);
	proxy_stop(f->p);
}

/* ------------------------------------------------------------------ tests */

Test(cursors, foreign_getmore_refused_owner_continues, .timeout = 120)
{
	struct fixture f;
	int a, b;
	int64_t id;
	bson_t reply;
	int n;

	setup(&f, NDOCS);
	a = connect_client(f.p);
	b = connect_client(f.p);
	id = open_find(a, f.db, "c", 2);

	getmore(b, f.db, "c", id, 2, &reply);
	assert_cursor_not_found(&reply, id, "B's getMore of A's cursor");
	bson_destroy(&reply);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 1);
	if (id <= INT32_MAX) { /* mongo-java-server takes an int32 id too */
		run(b, f.db,
		    BCON_NEW("getMore", BCON_INT32((int32_t)id), "collection", BCON_UTF8("c")),
		    &reply);
		assert_cursor_not_found(&reply, id, "B's getMore of A's cursor as int32");
		bson_destroy(&reply);
	}
	/* mongo-java-server runs command names in any case. */
	run(b, f.db, BCON_NEW("getmore", BCON_INT64(id), "collection", BCON_UTF8("c")), &reply);
	assert_cursor_not_found(&reply, id, "B's lowercase getmore of A's cursor");
	bson_destroy(&reply);
	run(b, f.db, BCON_NEW("killcursors", BCON_UTF8("c"), "cursors", "[", BCON_INT64(id), "]"),
	    &reply);
	cr_assert(!array_has(&reply, "cursorsKilled", id), "B's lowercase killcursors: %s",
		  json(&reply));
	bson_destroy(&reply);
	/* A duplicate getMore field must not smuggle A's id past the check. */
	run(b, f.db,
	    BCON_NEW("getMore", BCON_INT64(id + 1000), "collection", BCON_UTF8("c"), "getMore",
		     BCON_INT64(id)),
	    &reply);
	cr_assert(h_get_int(&reply, "ok", 1) == 0, "duplicate getMore accepted: %s", json(&reply));
	bson_destroy(&reply);
	run(b, f.db,
	    BCON_NEW("GETMORE", BCON_INT64(id + 1000), "collection", BCON_UTF8("c"), "getMore",
		     BCON_INT64(id)),
	    &reply);
	cr_assert(h_get_int(&reply, "ok", 1) == 0, "GETMORE + getMore accepted: %s", json(&reply));
	bson_destroy(&reply);

	n = 2 + drain(a, f.db, "c", id, 2);
	cr_assert_eq(n, NDOCS, "A read %d documents, expected %d", n, NDOCS);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 0);
	cr_assert_geq(stat_of(f.p, "counters.cursor_refusals"), 2);
	close(a);
	close(b);
	teardown(&f);
}

Test(cursors, foreign_killcursors_not_found_owner_continues, .timeout = 120)
{
	struct fixture f;
	int a, b;
	int64_t id;
	bson_t reply;
	int n;

	setup(&f, NDOCS);
	a = connect_client(f.p);
	b = connect_client(f.p);
	id = open_find(a, f.db, "c", 2);
	killcursors(b, f.db, "c", &id, 1, &reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1, "%s", json(&reply));
	cr_assert(array_has(&reply, "cursorsNotFound", id), "A's id not in cursorsNotFound: %s",
		  json(&reply));
	cr_assert(!array_has(&reply, "cursorsKilled", id), "B killed A's cursor: %s", json(&reply));
	bson_destroy(&reply);

	n = 2 + drain(a, f.db, "c", id, 3);
	cr_assert_eq(n, NDOCS, "A read %d documents after B's killCursors", n);
	close(a);
	close(b);
	teardown(&f);
}

/* A killCursors naming the client's own cursor, another client's and one
 * that does not exist: only the first is killed, the others are reported
 * as not found, and the other client's cursor lives on. */
Test(cursors, mixed_killcursors, .timeout = 120)
{
	struct fixture f;
	int a, b;
	int64_t a1, a2, b1, ids[3];
	bson_t reply;

	setup(&f, NDOCS);
	a = connect_client(f.p);
	b = connect_client(f.p);
	a1 = open_find(a, f.db, "c", 2);
	a2 = open_find(a, f.db, "c", 2);
	b1 = open_find(b, f.db, "c", 2);
	ids[0] = a1;
	ids[1] = b1;
	ids[2] = b1 + a1 + a2 + 12345; /* no such cursor */
	killcursors(a, f.db, "c", ids, 3, &reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1, "%s", json(&reply));
	cr_assert(array_has(&reply, "cursorsNotFound", b1), "%s", json(&reply));
	cr_assert(array_has(&reply, "cursorsNotFound", ids[2]), "%s", json(&reply));
	cr_assert(!array_has(&reply, "cursorsNotFound", a1), "%s", json(&reply));
	cr_assert(!array_has(&reply, "cursorsKilled", b1), "%s", json(&reply));
	bson_destroy(&reply);

	getmore(a, f.db, "c", a1, 2, &reply); /* A's own, killed */
	assert_cursor_not_found(&reply, a1, "A's getMore of its killed cursor");
	bson_destroy(&reply);
	cr_assert_eq(2 + drain(b, f.db, "c", b1, 4), NDOCS, "B's cursor was damaged");
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 1, "A's other cursor");
	cr_assert_eq(2 + drain(a, f.db, "c", a2, 4), NDOCS, "A's other cursor was damaged");
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 0);
	close(a);
	close(b);
	teardown(&f);
}

/* aggregate, listCollections, listIndexes: the same rule for every reply
 * that opens a cursor. Backends that return everything in the first batch
 * (mongo-java-server for all three, FerretDB for the list commands) open
 * no cursor: then nothing may be recorded. */
static void check_command_cursor(struct fixture *f, bson_t *cmd, const char *what)
{
	int a = connect_client(f->p), b = connect_client(f->p);
	bson_t reply;
	int64_t id;
	const char *ns;
	char coll[128];

	run(a, f->db, cmd, &reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1, "%s: %s", what, json(&reply));
	id = reply_cursor_id(&reply);
	ns = h_get_str(&reply, "cursor.ns");
	cr_assert(ns != NULL && strchr(ns, '.') != NULL, "%s: no ns: %s", what, json(&reply));
	snprintf(coll, sizeof(coll), "%s", strchr(ns, '.') + 1);
	bson_destroy(&reply);
	if (id == 0) {
		cr_log_info("%s: %s returned every result in its first batch: no cursor to "
			    "guard (the table is covered by tests/unit/test_cursor.c)",
			    h_backend_name(), what);
		cr_assert_eq(stat_of(f->p, "gauges.cursors_open"), 0, "%s", what);
		goto out;
	}
	cr_assert_eq(stat_of(f->p, "gauges.cursors_open"), 1, "%s: not recorded", what);
	getmore(b, f->db, coll, id, 1, &reply);
	assert_cursor_not_found(&reply, id, what);
	bson_destroy(&reply);
	killcursors(b, f->db, coll, &id, 1, &reply);
	cr_assert(array_has(&reply, "cursorsNotFound", id), "%s: %s", what, json(&reply));
	bson_destroy(&reply);
	getmore(a, f->db, coll, id, 1, &reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1 && batch_len(&reply, "nextBatch") == 1,
		  "%s: owner's getMore: %s", what, json(&reply));
	bson_destroy(&reply);
	killcursors(a, f->db, coll, &id, 1, &reply);
	cr_assert(h_get_int(&reply, "ok", 0) == 1 && !array_has(&reply, "cursorsNotFound", id),
		  "%s: owner's killCursors: %s", what, json(&reply));
	bson_destroy(&reply);
	cr_assert_eq(stat_of(f->p, "gauges.cursors_open"), 0, "%s", what);
out:
	close(a);
	close(b);
}

Test(cursors, aggregate_and_list_cursors, .timeout = 120)
{
	struct fixture f;
	mongoc_client_t *c;

	setup(&f, NDOCS);
	fill(f.p, f.db, "d", 1);
	fill(f.p, f.db, "e", 1);
	c = h_proxy_client(f.p, "itest-cursors-idx");
	for (int i = 0; i < 3; i++) {
		bson_t reply;
		bson_error_t err;
		char json_cmd[200];

		snprintf(json_cmd, sizeof(json_cmd),
			 "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"k%d\": 1}, "
			 "\"name\": \"k%d_1\"}]}",
			 i, i);
		cr_assert(h_cmd_json(c, f.db, json_cmd, &reply, &err), "createIndexes: %s",
			  err.message);
		bson_destroy(&reply);
	}
	mongoc_client_destroy(c);
	check_command_cursor(&f,
			     BCON_NEW("aggregate", BCON_UTF8("c"), "pipeline", "[", "]", "cursor",
				      "{", "batchSize", BCON_INT32(2), "}"),
			     "aggregate");
	check_command_cursor(&f,
			     BCON_NEW("listCollections", BCON_INT32(1), "cursor", "{", "batchSize",
				      BCON_INT32(1), "}"),
			     "listCollections");
	check_command_cursor(
	    &f,
	    BCON_NEW("listIndexes", BCON_UTF8("c"), "cursor", "{", "batchSize", BCON_INT32(1), "}"),
	    "listIndexes");
	teardown(&f);
}

/* The owner's own getMores and killCursors through a real driver. */
Test(cursors, owner_iterates_and_kills_with_libmongoc, .timeout = 120)
{
	struct fixture f;
	mongoc_client_t *c;
	mongoc_collection_t *col;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_t *filter = bson_new(), *opts = BCON_NEW("batchSize", BCON_INT32(2));
	bson_error_t err;
	int n = 0;

	setup(&f, NDOCS);
	c = h_proxy_client(f.p, "itest-cursors-owner");
	col = mongoc_client_get_collection(c, f.db, "c");
	cur = mongoc_collection_find_with_opts(col, filter, opts, NULL);
	while (mongoc_cursor_next(cur, &doc))
		n++;
	cr_assert(!mongoc_cursor_error(cur, &err), "iteration: %s", err.message);
	cr_assert_eq(n, NDOCS);
	mongoc_cursor_destroy(cur);

	cur = mongoc_collection_find_with_opts(col, filter, opts, NULL);
	cr_assert(mongoc_cursor_next(cur, &doc), "first document");
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 1);
	mongoc_cursor_destroy(cur); /* killCursors by the driver */
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 0, "the driver's killCursors");
	cr_assert_eq(stat_of(f.p, "counters.cursor_refusals"), 0, "the owner was refused");
	bson_destroy(filter);
	bson_destroy(opts);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	teardown(&f);
}

/* A client disconnects with cursors open in two collections: the proxy
 * kills them on the backend, one killCursors per namespace. */
Test(cursors, close_kills_cursors_on_backend, .timeout = 120)
{
	struct fixture f;
	int a, b;
	int64_t ids[3];

	setup(&f, PROBE_DOCS + 10);
	fill(f.p, f.db, "d", PROBE_DOCS + 10);
	a = connect_client(f.p);
	b = connect_client(f.p);
	ids[0] = open_find(a, f.db, "c", 2);
	ids[1] = open_find(a, f.db, "c", 3);
	ids[2] = open_find(a, f.db, "d", 2);
	(void)open_find(b, f.db, "c", 2);
	close(a);
	assert_gone_on_backend(f.db, "c", ids[0]);
	assert_gone_on_backend(f.db, "c", ids[1]);
	assert_gone_on_backend(f.db, "d", ids[2]);
	wait_stat(f.p, "counters.cursors_killed_on_close", 3);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 1, "B's cursor is B's");
	cr_assert_eq(stat_of(f.p, "counters.cursor_kills_sent"), 2, "one killCursors per ns");
	close(b);
	wait_stat(f.p, "gauges.cursors_open", 0);
	wait_stat(f.p, "counters.cursors_killed_on_close", 4);
	teardown(&f);
}

/* Many cursors: killCursors in chunks of CURSOR_KILL_CHUNK ids, not one
 * per cursor and not one unbounded message. FerretDB (SQLite) stops
 * answering finds beyond about 100 open cursors, so there fewer are opened. */
Test(cursors, close_kills_in_chunks, .timeout = 300)
{
	int n = h_backend_is("ferretdb") ? 90 : 2 * CURSOR_KILL_CHUNK + 100;
	struct fixture f;
	int a;
	int64_t first = 0, last = 0;

	setup(&f, PROBE_DOCS + 10);
	a = connect_client(f.p);
	for (int i = 0; i < n; i++) {
		last = open_find(a, f.db, "c", 1);
		if (i == 0)
			first = last;
	}
	close(a);
	assert_gone_on_backend(f.db, "c", first);
	assert_gone_on_backend(f.db, "c", last);
	wait_stat(f.p, "counters.cursors_killed_on_close", n);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 0);
	cr_assert_eq(stat_of(f.p, "counters.cursor_kills_sent"),
		     (n + CURSOR_KILL_CHUNK - 1) / CURSOR_KILL_CHUNK, "%d ids in chunks of %d", n,
		     CURSOR_KILL_CHUNK);
	teardown(&f);
}

/* cursors_open follows opens, exhaustion, kills and closes of several clients. */
Test(cursors, cursors_open_gauge, .timeout = 120)
{
	struct fixture f;
	int a, b;
	int64_t a_ids[4], b_ids[3];
	bson_t reply;

	setup(&f, NDOCS);
	a = connect_client(f.p);
	b = connect_client(f.p);
	for (int i = 0; i < 4; i++)
		a_ids[i] = open_find(a, f.db, "c", 2);
	for (int i = 0; i < 3; i++)
		b_ids[i] = open_find(b, f.db, "c", 2);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 7);
	drain(a, f.db, "c", a_ids[0], 20);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 6, "exhausted cursor still counted");
	killcursors(b, f.db, "c", &b_ids[0], 1, &reply);
	bson_destroy(&reply);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 5, "killed cursor still counted");
	getmore(b, f.db, "c", a_ids[1], 2, &reply); /* refused: changes nothing */
	bson_destroy(&reply);
	cr_assert_eq(stat_of(f.p, "gauges.cursors_open"), 5);
	close(a);
	wait_stat(f.p, "gauges.cursors_open", 2);
	close(b);
	wait_stat(f.p, "gauges.cursors_open", 0);
	teardown(&f);
}

/* A tailable awaitData cursor: the owner's getMores wait and follow inserts. */
Test(cursors, tailable_await_data_owner, .timeout = 120)
{
	struct fixture f;
	int a, b;
	bson_t reply;
	int64_t id;

	f.p = start_proxy();
	h_unique(f.db, sizeof(f.db), "it_cur");
	a = connect_client(f.p);
	b = connect_client(f.p);
	run(a, f.db,
	    BCON_NEW("create", BCON_UTF8("cap"), "capped", BCON_BOOL(true), "size",
		     BCON_INT32(100000)),
	    &reply);
	if (h_get_int(&reply, "ok", 0) != 1) {
		cr_assert(h_backend_is("mongo-java-server"), "create capped: %s", json(&reply));
		bson_destroy(&reply);
		close(a);
		close(b);
		teardown(&f);
		cr_skip_test("mongo-java-server has no capped collections (tailable cursors)");
	}
	bson_destroy(&reply);
	run(a, f.db,
	    BCON_NEW("insert", BCON_UTF8("cap"), "documents", "[", "{", "_id", BCON_INT32(1), "}",
		     "{", "_id", BCON_INT32(2), "}", "]"),
	    &reply);
	bson_destroy(&reply);
	run(a, f.db,
	    BCON_NEW("find", BCON_UTF8("cap"), "tailable", BCON_BOOL(true), "awaitData",
		     BCON_BOOL(true), "batchSize", BCON_INT32(1)),
	    &reply);
	id = reply_cursor_id(&reply);
	cr_assert(id > 0, "tailable find: %s", json(&reply));
	bson_destroy(&reply);
	for (int round = 0; round < 3; round++) {
		int want = round == 1 ? 0 : 1;

		if (round == 2) {
			run(b, f.db,
			    BCON_NEW("insert", BCON_UTF8("cap"), "documents", "[", "{", "_id",
				     BCON_INT32(3), "}", "]"),
			    &reply);
			bson_destroy(&reply);
		}
		run(a, f.db,
		    BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8("cap"), "maxTimeMS",
			     BCON_INT32(200)),
		    &reply);
		cr_assert(h_get_int(&reply, "ok", 0) == 1 && reply_cursor_id(&reply) == id &&
			      batch_len(&reply, "nextBatch") == want,
			  "awaitData getMore %d: %s", round, json(&reply));
		bson_destroy(&reply);
	}
	getmore(b, f.db, "cap", id, 1, &reply);
	assert_cursor_not_found(&reply, id, "B's getMore of A's tailable cursor");
	bson_destroy(&reply);
	close(a);
	wait_stat(f.p, "gauges.cursors_open", 0);
	close(b);
	teardown(&f);
}
