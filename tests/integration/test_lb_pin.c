/*
 * test_lb_pin.c — load-balanced mode (loadBalanced=true): cursors and
 * transactions pinned to one backend connection (pool/pin.c).
 *
 * The proof of "the same connection" is the fake backend's fake_pin.c: a
 * cursor or a transaction exists only on the backend connection that opened
 * it (43 / 251 anywhere else, counted). A client on a plain connection then
 * sends {insert: "f_stall"} (never answered), which on a proxy without pins
 * takes the most recently used idle connection: the one the cursor or the
 * transaction was opened on. So without pinning the next getMore, kill,
 * transaction command or abort lands on another connection and is counted.
 *
 *   getmore_on_pin       libmongoc LB cursor: every batch from one connection,
 *                        pin released on exhaustion
 *   release_kill_close   killCursors of a destroyed cursor, and the kill the
 *                        proxy sends when an LB client closes, on the pin
 *   starvation           pool_size 3 (2 pins at most), 3 LB clients, 7 cursors
 *                        (the mongobetween pinning-starvation case): a client
 *                        at its bound shares its own pin, one with no pin
 *                        (its cursor killed on the spare connection) waits and
 *                        is refused with 462 after queue_timeout_ms, or gets
 *                        its pin when one ends; plain clients keep
 *                        working throughout; everything completes
 *   identity_bound       one client identity (application name) with three
 *                        connections and idle cursors holds at most
 *                        lb_max_pinned_per_client pins: another LB client's
 *                        one-document find, a find whose reply closes its
 *                        cursor and a startTransaction all run at once, the
 *                        finds without pinning; the identity's pinless
 *                        connection's cursor is killed on its connection, waits
 *                        for room and gets 462 after queue_timeout_ms
 *   pin_queue_timeout    a client at its bound (lb_max_pinned_per_client = 1)
 *                        whose transaction's pin runs a statement that is
 *                        never answered: its
 *                        next find waits on that pin and gets the queue
 *                        timeout (462) after queue_timeout_ms; nothing is
 *                        left waiting, the proxy exits clean
 *   idle_expiry          a cursor pin idle past lb_pin_idle_timeout_ms: its
 *                        cursor is killed on its connection, the pin released,
 *                        the getMore gets 43 with the reason; a transaction's
 *                        pin stays and commits
 *   identity_user        with client authentication the identity is the user:
 *                        three connections of one user under three application
 *                        names hold at most lb_max_pinned_per_client pins
 *   txn_pinned           a transaction on raw sockets: every statement and the
 *                        commit on the connection that started it; a client
 *                        closing mid-transaction gets abortTransaction there
 *   txn_driver           the same with libmongoc's own session transaction
 *   same_as_direct       the test backend (FerretDB in its pass): LB cursors
 *                        of several batches, interleaved, identical to direct
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/users.h"
#include "fake_backend.h"
#include "fake_pin.h"
#include "harness.h"

#define GUARD_MS 20000 /* hang guard for polls */

static struct fake *lb_fake(void)
{
	struct fake_cfg cfg = fake_default_cfg();

	cfg.max_wire = 17;
	cfg.session_minutes = 30;
	return fake_start_cfg(0, &cfg);
}

static struct proxy *lb_proxy(const struct fake *f, int pool_size, const char *more)
{
	char extra[1024];

	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://127.0.0.1:%d/\npool_size = %d\n"
		 "reconnect_backoff_max_ms = 200\n%s",
		 f->port, pool_size, more != NULL ? more : "");
	return proxy_start(extra);
}

static mongoc_client_t *lb_client(struct proxy *p, const char *app)
{
	char uri[200];
	mongoc_client_t *c;

	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d/?loadBalanced=true", p->port);
	c = h_client_uri(uri, app);
	cr_assert(c != NULL, "libmongoc refused %s", uri);
	return c;
}

/* A raw socket whose hello says loadBalanced: true (serviceId checked). */
static int lb_raw(struct proxy *p)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "loadBalanced", BCON_BOOL(true), "$db",
				 BCON_UTF8("admin"));
	bson_t reply;
	bson_iter_t it;
	int fd = raw_connect(p);

	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 1, hello, &reply, 10000), "LB hello");
	cr_assert(bson_iter_init_find(&it, &reply, "serviceId") && BSON_ITER_HOLDS_OID(&it),
		  "LB hello without serviceId");
	bson_destroy(&reply);
	bson_destroy(hello);
	return fd;
}

static void send_only(int fd, const bson_t *cmd)
{
	struct h_buf b;

	hb_init(&b);
	h_build_msg(&b, 99, 0, cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
}

/* A plain client whose {insert: "f_stall"} holds a backend connection for
 * good: without pins, the one most recently used. Returns its socket. */
static int stall_conn(struct proxy *p, struct fake *f)
{
	bson_t *cmd = BCON_NEW("insert", BCON_UTF8("f_stall"), "$db", BCON_UTF8("lb"));
	int before = FAKE_GET(f, commands), fd = raw_connect(p);
	int64_t t0 = h_now_ms();

	cr_assert(fd >= 0);
	send_only(fd, cmd);
	bson_destroy(cmd);
	while (FAKE_GET(f, commands) == before) {
		cr_assert(h_now_ms() - t0 < GUARD_MS, "the stalling insert never reached the fake");
		h_sleep_ms(5);
	}
	return fd;
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
	int64_t t0 = h_now_ms(), v;

	while ((v = stat_of(p, path)) != want) {
		cr_assert(h_now_ms() - t0 < GUARD_MS, "%s stayed %lld, expected %lld", path,
			  (long long)v, (long long)want);
		h_sleep_ms(10);
	}
}

static int doc_conn(const bson_t *doc)
{
	return (int)h_get_int(doc, "conn", -1);
}

static mongoc_cursor_t *open_cursor(mongoc_client_t *c, const char *coll, int *conn)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, "lb", coll);
	bson_t filter = BSON_INITIALIZER;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, NULL, NULL);
	const bson_t *doc;
	bson_error_t err;

	mongoc_collection_destroy(col);
	if (!mongoc_cursor_next(cur, &doc)) {
		cr_assert(mongoc_cursor_error(cur, &err));
		*conn = -1;
		return cur;
	}
	*conn = doc_conn(doc);
	return cur;
}

/* The rest of an open cursor: every doc from `conn`; returns docs read. */
static int drain(mongoc_cursor_t *cur, int conn, const char *what)
{
	const bson_t *doc;
	bson_error_t err;
	int n = 0;

	while (mongoc_cursor_next(cur, &doc)) {
		cr_assert_eq(doc_conn(doc), conn,
			     "%s: a batch came from backend connection %d, the cursor's is %d",
			     what, doc_conn(doc), conn);
		n++;
	}
	cr_assert(!mongoc_cursor_error(cur, &err), "%s: getMore failed: %s", what, err.message);
	return n;
}

static void plain_count_ok(mongoc_client_t *c, const char *what)
{
	bson_t reply;
	bson_error_t err;

	cr_assert(h_cmd_json(c, "lb", "{\"count\": \"c\"}", &reply, &err), "%s: %s", what,
		  err.message);
	bson_destroy(&reply);
}

Test(lbpin, getmore_on_pin, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 3, NULL);
	mongoc_client_t *c = lb_client(p, "lb-getmore"), *plain = h_proxy_client(p, "lb-plain");
	struct fake_pin_stats st;
	mongoc_cursor_t *cur;
	int conn, stall;

	cur = open_cursor(c, "pin_a", &conn);
	cr_assert_geq(conn, 1, "find through the proxy failed");
	stall = stall_conn(p, f);
	plain_count_ok(plain, "a plain client while a cursor is pinned");
	cr_assert_eq(drain(cur, conn, "LB cursor"), FAKE_PIN_DOCS - 1);
	mongoc_cursor_destroy(cur);
	fake_pin_stats(&st);
	cr_assert_eq(st.getmores_wrong_conn, 0, "%d getMores reached another connection",
		     st.getmores_wrong_conn);
	cr_assert_eq(st.getmores_ok, FAKE_PIN_DOCS - 1);
	cr_assert_eq(stat_of(p, "counters.lb_pins_opened"), 1, "the cursor did not pin");
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	cr_assert_eq(stat_of(p, "counters.lb_pins_opened"), 1);
	mongoc_client_destroy(plain);
	mongoc_client_destroy(c);
	close(stall);
	proxy_stop(p);
	fake_stop(f);
}

Test(lbpin, release_kill_close, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 4, NULL);
	mongoc_client_t *c = lb_client(p, "lb-kill");
	bson_t *find = BCON_NEW("find", BCON_UTF8("pin_r"), "batchSize", BCON_INT32(1), "$db",
				BCON_UTF8("lb"));
	struct fake_pin_stats st;
	mongoc_cursor_t *cur;
	bson_t reply;
	int conn, stall1, stall2, fd;
	int64_t t0;

	/* killCursors of a cursor the driver drops early */
	cur = open_cursor(c, "pin_k", &conn);
	cr_assert_geq(conn, 1);
	stall1 = stall_conn(p, f);
	mongoc_cursor_destroy(cur); /* libmongoc sends killCursors */
	fake_pin_stats(&st);
	cr_assert_eq(st.kills_ok, 1,
		     "killCursors did not kill on the cursor's connection "
		     "(kills there %d, elsewhere %d)",
		     st.kills_ok, st.kills_wrong_conn);
	wait_stat(p, "gauges.lb_pinned_connections", 0);

	/* the client closes with a cursor open: the proxy kills it on the pin */
	fd = lb_raw(p);
	cr_assert(raw_command(fd, 2, find, &reply, 10000));
	cr_assert_neq(h_get_int(&reply, "cursor.id", 0), 0, "no cursor opened");
	bson_destroy(&reply);
	stall2 = stall_conn(p, f);
	close(fd);
	t0 = h_now_ms();
	for (;;) {
		fake_pin_stats(&st);
		if (st.kills_ok + st.kills_wrong_conn >= 2)
			break;
		cr_assert(h_now_ms() - t0 < GUARD_MS, "no killCursors after the client closed");
		h_sleep_ms(10);
	}
	cr_assert_eq(st.kills_wrong_conn, 0, "the close-time kill went to another connection");
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	cr_assert_eq(stat_of(p, "counters.lb_pin_cleanups"), 1);
	cr_assert_eq(stat_of(p, "counters.cursor_kills_sent"), 0,
		     "the pinned cursor was also killed through the pool");
	bson_destroy(find);
	mongoc_client_destroy(c);
	close(stall1);
	close(stall2);
	proxy_stop(p);
	fake_stop(f);
}

/* A worker's find on an LB client (no criterion calls in threads). */
struct waiter {
	mongoc_client_t *c;
	int conn, docs;
	bool ok;
	char err[256];
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	mongoc_collection_t *col = mongoc_client_get_collection(w->c, "lb", "pin_w");
	bson_t filter = BSON_INITIALIZER;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, NULL, NULL);
	const bson_t *doc;
	bson_error_t err;

	w->conn = -1;
	w->ok = true;
	while (mongoc_cursor_next(cur, &doc)) {
		if (w->conn < 0)
			w->conn = doc_conn(doc);
		else if (doc_conn(doc) != w->conn)
			w->ok = false;
		w->docs++;
	}
	if (mongoc_cursor_error(cur, &err)) {
		w->ok = false;
		snprintf(w->err, sizeof(w->err), "%s", err.message);
	}
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	return NULL;
}

Test(lbpin, starvation, .timeout = 180)
{
	struct fake *f = lb_fake();
	/* pool_size 3: at most 2 pins, one connection stays for everyone */
	struct proxy *p = lb_proxy(f, 3, "queue_timeout_ms = 5000\n");
	mongoc_client_t *a = lb_client(p, "lb-a"), *b = lb_client(p, "lb-b");
	mongoc_client_t *cc = lb_client(p, "lb-c"), *plain = h_proxy_client(p, "lb-plain");
	mongoc_cursor_t *a1, *a2, *a3, *b1;
	int ca1, ca2, ca3, cb1;
	struct waiter w = {.c = cc};
	pthread_t thr;
	bson_error_t err;
	struct fake_pin_stats st;

	a1 = open_cursor(a, "pin_a1", &ca1);
	a2 = open_cursor(a, "pin_a2", &ca2);
	cr_assert(ca1 >= 1 && ca2 >= 1, "a's two cursors: connections %d, %d", ca1, ca2);
	/* a is at its bound (and the pool at pool_size - 1 pins): its third
	 * cursor runs on one of its own pins */
	a3 = open_cursor(a, "pin_a3", &ca3);
	cr_assert(ca3 == ca1 || ca3 == ca2, "a's third cursor on connection %d, not its pins", ca3);
	/* plain clients and b's non-cursor commands keep the spare connection */
	for (int i = 0; i < 20; i++) {
		plain_count_ok(plain, "plain client while the pins are full");
		plain_count_ok(b, "LB client's count while the pins are full");
	}
	/* b has no pin and the pool has no room: refused after queue_timeout_ms */
	b1 = open_cursor(b, "pin_b1", &cb1);
	cr_assert_eq(cb1, -1, "b's cursor got a connection beyond pool_size - 1 pins");
	cr_assert(mongoc_cursor_error(b1, &err));
	cr_assert_eq(err.code, 462, "b's refusal: code %u: %s", err.code, err.message);
	cr_assert(strstr(err.message, "pinned") != NULL, "unclear refusal: %s", err.message);
	cr_assert(ca1 != ca2, "a's two cursors share connection %d", ca1);
	cr_assert_eq(stat_of(p, "counters.lb_pin_shared"), 1);
	cr_assert_eq(stat_of(p, "gauges.lb_pinned_connections"), 2);
	cr_log_info("starvation: refusal: %s", err.message);
	mongoc_cursor_destroy(b1);
	cr_assert_geq(stat_of(p, "counters.lb_pin_refusals"), 1);
	/* c waits for a pin; a's first cursor ends and c gets its connection */
	pthread_create(&thr, NULL, waiter_main, &w);
	{
		int64_t t0 = h_now_ms();

		while (stat_of(p, "gauges.requests_waiting") < 1) {
			cr_assert(h_now_ms() - t0 < 4500, "c's find never waited for a pin");
			h_sleep_ms(5);
		}
	}
	plain_count_ok(plain, "plain client while c waits");
	cr_assert_eq(drain(a1, ca1, "a1") + drain(a3, ca3, "a3"), 2 * (FAKE_PIN_DOCS - 1));
	pthread_join(thr, NULL);
	cr_assert(w.ok, "c's cursor: %s (connection %d, %d docs)", w.err, w.conn, w.docs);
	cr_assert_eq(w.docs, FAKE_PIN_DOCS);
	cr_assert_eq(drain(a2, ca2, "a2"), FAKE_PIN_DOCS - 1);
	mongoc_cursor_destroy(a1);
	mongoc_cursor_destroy(a2);
	mongoc_cursor_destroy(a3);
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	cr_assert_geq(stat_of(p, "counters.lb_pin_waits"), 1);
	fake_pin_stats(&st);
	cr_assert_eq(st.getmores_wrong_conn, 0);
	cr_log_info("starvation: pins opened %lld, shared %lld, waits %lld, refusals %lld",
		    (long long)stat_of(p, "counters.lb_pins_opened"),
		    (long long)stat_of(p, "counters.lb_pin_shared"),
		    (long long)stat_of(p, "counters.lb_pin_waits"),
		    (long long)stat_of(p, "counters.lb_pin_refusals"));
	/* and b gets a cursor now */
	b1 = open_cursor(b, "pin_b1", &cb1);
	cr_assert_geq(cb1, 1, "b's cursor after the pins ended");
	cr_assert_eq(drain(b1, cb1, "b1"), FAKE_PIN_DOCS - 1);
	mongoc_cursor_destroy(b1);
	mongoc_client_destroy(a);
	mongoc_client_destroy(b);
	mongoc_client_destroy(cc);
	mongoc_client_destroy(plain);
	proxy_stop(p);
	fake_stop(f);
}

static bson_t *txn_cmd(const char *name, const char *arg, const bson_t *lsid, int64_t txn,
		       bool start)
{
	bson_t *cmd = bson_new();
	bson_t docs, d;

	if (strcmp(name, "insert") == 0) {
		BSON_APPEND_UTF8(cmd, "insert", arg);
		BSON_APPEND_ARRAY_BEGIN(cmd, "documents", &docs);
		BSON_APPEND_DOCUMENT_BEGIN(&docs, "0", &d);
		BSON_APPEND_INT64(&d, "_id", txn);
		bson_append_document_end(&docs, &d);
		bson_append_array_end(cmd, &docs);
	} else {
		BSON_APPEND_INT32(cmd, name, 1);
	}
	BSON_APPEND_DOCUMENT(cmd, "lsid", lsid);
	BSON_APPEND_INT64(cmd, "txnNumber", txn);
	if (start)
		BSON_APPEND_BOOL(cmd, "startTransaction", true);
	BSON_APPEND_BOOL(cmd, "autocommit", false);
	BSON_APPEND_UTF8(cmd, "$db", strcmp(name, "insert") == 0 ? "lb" : "admin");
	return cmd;
}

static bson_t *new_lsid(uint8_t seed)
{
	uint8_t uuid[16];
	bson_t *lsid = bson_new();

	for (int i = 0; i < 16; i++)
		uuid[i] = (uint8_t)(seed * 31 + i);
	BSON_APPEND_BINARY(lsid, "id", BSON_SUBTYPE_UUID, uuid, 16);
	return lsid;
}

static void txn_ok(int fd, bson_t *cmd, const char *what)
{
	bson_t reply;
	char *js;

	cr_assert(raw_command(fd, 3, cmd, &reply, 10000), "%s: no reply", what);
	js = bson_as_relaxed_extended_json(&reply, NULL);
	cr_assert_eq(h_get_int(&reply, "ok", 0), 1, "%s: %s", what, js);
	bson_free(js);
	bson_destroy(&reply);
	bson_destroy(cmd);
}

Test(lbpin, txn_pinned, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 4, NULL);
	bson_t *lsid = new_lsid(1), *lsid2 = new_lsid(2);
	struct fake_pin_stats st;
	int fd = lb_raw(p), fd2, stall1, stall2;
	int64_t t0;

	txn_ok(fd, txn_cmd("insert", "t", lsid, 1, true), "first statement");
	stall1 = stall_conn(p, f);
	txn_ok(fd, txn_cmd("insert", "t", lsid, 1, false), "second statement");
	txn_ok(fd, txn_cmd("commitTransaction", NULL, lsid, 1, false), "commit");
	fake_pin_stats(&st);
	cr_assert_eq(st.txn_commits, 1);
	cr_assert_eq(st.txn_wrong_conn, 0);
	wait_stat(p, "gauges.lb_pinned_connections", 0);

	/* a client leaves mid-transaction: abortTransaction on the pin */
	fd2 = lb_raw(p);
	txn_ok(fd2, txn_cmd("insert", "t", lsid2, 5, true), "other client's first statement");
	stall2 = stall_conn(p, f);
	close(fd2);
	t0 = h_now_ms();
	for (;;) {
		fake_pin_stats(&st);
		if (st.txn_aborts + st.txn_wrong_conn >= 1)
			break;
		cr_assert(h_now_ms() - t0 < GUARD_MS,
			  "no abortTransaction after the client closed");
		h_sleep_ms(10);
	}
	cr_assert_eq(st.txn_aborts, 1, "abortTransaction not on the transaction's connection");
	cr_assert_eq(st.txn_wrong_conn, 0);
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	bson_destroy(lsid);
	bson_destroy(lsid2);
	close(fd);
	close(stall1);
	close(stall2);
	proxy_stop(p);
	fake_stop(f);
}

/* Every document of a cursor over db.coll with batchSize 7, as one array. */
static int read_all(mongoc_client_t *c, const char *db, const char *coll, bson_t *out)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t filter = BSON_INITIALIZER;
	bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7), "sort", "{", "_id", BCON_INT32(1), "}");
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, opts, NULL);
	const bson_t *doc;
	bson_error_t err;
	char key[16];
	const char *k;
	int n = 0;

	bson_init(out);
	while (mongoc_cursor_next(cur, &doc)) {
		bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));
		bson_append_document(out, k, -1, doc);
	}
	cr_assert(!mongoc_cursor_error(cur, &err), "cursor over %s: %s", coll, err.message);
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	bson_destroy(opts);
	return n;
}

Test(lbpin, same_as_direct, .timeout = 180)
{
	struct proxy *p = proxy_start("pool_size = 4\n");
	mongoc_client_t *direct = h_backend_client("lb-direct"), *lb = lb_client(p, "lb-same");
	mongoc_collection_t *col;
	mongoc_cursor_t *cur[3];
	int cnt[3] = {0, 0, 0};
	bson_error_t err;
	char db[64];

	h_unique(db, sizeof(db), "it_lb");
	col = mongoc_client_get_collection(direct, db, "docs");
	for (int i = 0; i < 200; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i * 3));

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	mongoc_collection_destroy(col);
	{
		bson_t a, b;
		char *why = NULL;

		cr_assert_eq(read_all(direct, db, "docs", &a), 200);
		cr_assert_eq(read_all(lb, db, "docs", &b), 200);
		cr_assert(h_same_reply(&a, &b, &why), "LB cursor differs from direct: %s", why);
		bson_destroy(&a);
		bson_destroy(&b);
	}
	/* three cursors of one LB client, interleaved (pins shared at the bound) */
	col = mongoc_client_get_collection(lb, db, "docs");
	for (int i = 0; i < 3; i++) {
		bson_t filter = BSON_INITIALIZER;
		bson_t *opts = BCON_NEW("batchSize", BCON_INT32(5));

		cur[i] = mongoc_collection_find_with_opts(col, &filter, opts, NULL);
		bson_destroy(opts);
	}
	for (bool more = true; more;) {
		more = false;
		for (int i = 0; i < 3; i++) {
			const bson_t *doc;

			if (mongoc_cursor_next(cur[i], &doc)) {
				cnt[i]++;
				more = true;
			}
		}
	}
	for (int i = 0; i < 3; i++) {
		cr_assert(!mongoc_cursor_error(cur[i], &err), "cursor %d: %s", i, err.message);
		cr_assert_eq(cnt[i], 200, "cursor %d read %d docs", i, cnt[i]);
		mongoc_cursor_destroy(cur[i]);
	}
	mongoc_collection_destroy(col);
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	cr_assert_geq(stat_of(p, "counters.lb_pins_opened"), 2);
	h_drop_db(direct, db);
	mongoc_client_destroy(lb);
	mongoc_client_destroy(direct);
	proxy_stop(p);
}

/* libmongoc's own transaction (session, startTransaction, commit) through
 * the proxy in load-balanced mode: every statement and the commit reach the
 * connection that started it. */
Test(lbpin, txn_driver, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 4, NULL);
	mongoc_client_t *c = lb_client(p, "lb-txn");
	mongoc_collection_t *col = mongoc_client_get_collection(c, "lb", "t");
	mongoc_client_session_t *cs;
	struct fake_pin_stats st;
	bson_t opts = BSON_INITIALIZER;
	bson_error_t err;
	int stall = -1;

	cs = mongoc_client_start_session(c, NULL, &err);
	cr_assert(cs != NULL, "start session: %s", err.message);
	cr_assert(mongoc_client_session_start_transaction(cs, NULL, &err), "start: %s",
		  err.message);
	cr_assert(mongoc_client_session_append(cs, &opts, &err), "%s", err.message);
	for (int i = 0; i < 3; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i));

		cr_assert(mongoc_collection_insert_one(col, d, &opts, NULL, &err),
			  "statement %d: %s", i, err.message);
		bson_destroy(d);
		if (i == 0)
			stall = stall_conn(p, f);
	}
	cr_assert(mongoc_client_session_commit_transaction(cs, NULL, &err), "commit: %s",
		  err.message);
	fake_pin_stats(&st);
	cr_assert_eq(st.txn_wrong_conn, 0);
	cr_assert_eq(st.txn_commits, 1, "commits seen by the fake: %d", st.txn_commits);
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	bson_destroy(&opts);
	mongoc_client_session_destroy(cs);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	close(stall);
	proxy_stop(p);
	fake_stop(f);
}

/* A find on c of lb.coll with `opts` (JSON, NULL: none): documents read,
 * -1 on an error (in *err). */
static int find_all(mongoc_client_t *c, const char *coll, const char *opts_json, bson_error_t *err)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, "lb", coll);
	bson_t filter = BSON_INITIALIZER;
	bson_t *opts =
	    opts_json != NULL ? bson_new_from_json((const uint8_t *)opts_json, -1, NULL) : NULL;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, opts, NULL);
	const bson_t *doc;
	int n = 0;

	while (mongoc_cursor_next(cur, &doc))
		n++;
	if (mongoc_cursor_error(cur, err))
		n = -1;
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	if (opts != NULL)
		bson_destroy(opts);
	return n;
}

static void wait_kills(int want)
{
	struct fake_pin_stats st;
	int64_t t0 = h_now_ms();

	for (;;) {
		fake_pin_stats(&st);
		if (st.kills_ok >= want)
			break;
		cr_assert(h_now_ms() - t0 < GUARD_MS,
			  "%d killCursors on the cursor's connection, "
			  "expected %d (%d elsewhere)",
			  st.kills_ok, want, st.kills_wrong_conn);
		h_sleep_ms(10);
	}
}

Test(lbpin, identity_bound, .timeout = 120)
{
	struct fake *f = lb_fake();
	/* pool_size 4: at most 3 pins; one identity at most 2 (the default).
	 * queue_timeout_ms bounds how long a build without the bound waits. */
	struct proxy *p = lb_proxy(f, 4, "queue_timeout_ms = 1500\n");
	mongoc_client_t *h1 = lb_client(p, "lb-hog"), *h2 = lb_client(p, "lb-hog");
	mongoc_client_t *h3 = lb_client(p, "lb-hog"), *other = lb_client(p, "lb-other");
	bson_t *lsid = new_lsid(3);
	mongoc_cursor_t *c1, *c2, *c3;
	int ch1, ch2, ch3, fd, n;
	int64_t opened, waits;
	struct fake_pin_stats st;
	bson_error_t err;

	/* one client, two connections with idle cursors, a third cursor */
	c1 = open_cursor(h1, "pin_h1", &ch1);
	c2 = open_cursor(h2, "pin_h2", &ch2);
	c3 = open_cursor(h1, "pin_h3", &ch3);
	cr_assert(ch1 >= 1 && ch2 >= 1 && ch3 >= 1, "hog cursors: %d %d %d", ch1, ch2, ch3);
	cr_assert_neq(ch1, ch2, "two connections' cursors on one backend connection");
	opened = stat_of(p, "counters.lb_pins_opened");
	waits = stat_of(p, "counters.lb_pin_waits");

	/* another LB client: a one-document find and a find whose reply closes
	 * its cursor run at once, without pinning */
	n = find_all(other, "pin_one", "{\"limit\": 1}", &err);
	cr_assert_eq(n, 1, "other client's one-document find: %d docs: %s", n,
		     n < 0 ? err.message : "");
	n = find_all(other, "pinall_o", NULL, &err);
	cr_assert_eq(n, FAKE_PIN_DOCS, "other client's single-batch find: %d docs: %s", n,
		     n < 0 ? err.message : "");
	cr_assert_eq(stat_of(p, "counters.lb_pins_opened"), opened, "a closed cursor pinned");
	cr_assert_eq(stat_of(p, "counters.lb_pin_waits"), waits,
		     "a closed cursor waited for a pin");
	fake_pin_stats(&st);
	cr_assert_eq(st.finds_closed, 2);
	cr_assert_eq(ch3, ch1, "the identity's third cursor took a connection of its own");
	cr_assert_eq(stat_of(p, "gauges.lb_pinned_connections"), 2,
		     "one client identity holds more than lb_max_pinned_per_client pins");

	/* the hog's pinless connection: one-document finds run; a cursor is
	 * killed on its connection, waits for room and is refused */
	cr_assert_eq(find_all(h3, "pin_one", "{\"limit\": 1}", &err), 1, "%s", err.message);
	cr_assert_eq(find_all(h3, "pin_h4", NULL, &err), -1, "a third pin for one identity");
	cr_assert_eq(err.code, 462, "refusal: code %u: %s", err.code, err.message);
	cr_assert(strstr(err.message, "application lb-hog") != NULL &&
		      strstr(err.message, "lb_max_pinned_per_client") != NULL,
		  "unclear refusal: %s", err.message);
	wait_kills(1);
	wait_stat(p, "gauges.lb_pinned_connections", 2);

	/* another client's transaction gets the last pin slot at once */
	fd = lb_raw(p);
	txn_ok(fd, txn_cmd("insert", "t", lsid, 1, true), "other client's startTransaction");
	txn_ok(fd, txn_cmd("commitTransaction", NULL, lsid, 1, false), "commit");
	fake_pin_stats(&st);
	cr_assert_eq(st.txn_commits, 1);
	cr_assert_eq(st.txn_wrong_conn, 0);
	plain_count_ok(other, "other client's count");

	/* the hog's cursors are intact */
	cr_assert_eq(drain(c1, ch1, "c1") + drain(c3, ch3, "c3") + drain(c2, ch2, "c2"),
		     3 * (FAKE_PIN_DOCS - 1));
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	fake_pin_stats(&st);
	cr_assert_eq(st.getmores_wrong_conn, 0);
	cr_log_info("identity_bound: %s", err.message);
	mongoc_cursor_destroy(c1);
	mongoc_cursor_destroy(c2);
	mongoc_cursor_destroy(c3);
	bson_destroy(lsid);
	close(fd);
	mongoc_client_destroy(h1);
	mongoc_client_destroy(h2);
	mongoc_client_destroy(h3);
	mongoc_client_destroy(other);
	proxy_stop(p);
	fake_stop(f);
}

/* The reply to request `id` on fd (others skipped), within timeout_ms. */
static bool reply_to(int fd, int32_t id, bson_t *out, int timeout_ms)
{
	int64_t t0 = h_now_ms();

	while (h_now_ms() - t0 < timeout_ms) {
		struct raw_reply r;
		uint8_t *msg;
		size_t len;
		bool mine;

		if (raw_recv_msg(fd, &msg, &len, (int)(timeout_ms - (h_now_ms() - t0))) != RAW_OK)
			return false;
		mine = raw_parse_reply(msg, len, &r) && r.response_to == id && r.have_doc;
		if (mine)
			bson_copy_to(&r.doc, out);
		free(msg);
		if (mine)
			return true;
	}
	return false;
}

static void send_id(int fd, int32_t id, bson_t *cmd)
{
	struct h_buf b;

	hb_init(&b);
	h_build_msg(&b, id, 0, cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	bson_destroy(cmd);
}

Test(lbpin, pin_queue_timeout, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 4, "queue_timeout_ms = 1000\nlb_max_pinned_per_client = 1\n");
	bson_t *lsid = new_lsid(7);
	int fd = lb_raw(p);
	bson_t reply;
	bson_iter_t it;
	int64_t t0;

	/* a transaction: its connection becomes the client's only pin */
	txn_ok(fd, txn_cmd("insert", "t", lsid, 1, true), "startTransaction");
	wait_stat(p, "gauges.lb_pinned_connections", 1);
	/* its next statement runs on the pin and is never answered */
	send_id(fd, 3, txn_cmd("insert", "f_stall", lsid, 1, false));
	/* at its bound, the client's cursor waits on that pin, then times out */
	t0 = h_now_ms();
	send_id(fd, 4, BCON_NEW("find", BCON_UTF8("pin_q"), "$db", BCON_UTF8("lb")));
	cr_assert(reply_to(fd, 4, &reply, 10000),
		  "a request waiting on a pin that never frees got no answer");
	cr_assert_eq(h_get_int(&reply, "code", 0), 462, "pin waiter's refusal: code %lld",
		     (long long)h_get_int(&reply, "code", 0));
	cr_assert(bson_iter_init_find(&it, &reply, "errmsg") &&
		      strstr(bson_iter_utf8(&it, NULL), "queue_timeout_ms") != NULL,
		  "pin waiter's refusal does not name queue_timeout_ms");
	cr_assert_geq(h_now_ms() - t0, 900, "refused before queue_timeout_ms");
	bson_destroy(&reply);
	cr_assert_eq(stat_of(p, "gauges.requests_waiting"), 0, "a request is left waiting");
	cr_assert_eq(stat_of(p, "counters.refused_queue_timeout"), 1);
	bson_destroy(lsid);
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(lbpin, idle_expiry, .timeout = 120)
{
	struct fake *f = lb_fake();
	struct proxy *p = lb_proxy(f, 4, "lb_pin_idle_timeout_ms = 300\n");
	mongoc_client_t *c = lb_client(p, "lb-idle");
	bson_t *lsid = new_lsid(4);
	struct fake_pin_stats st;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_error_t err;
	int conn, fd = lb_raw(p);

	cur = open_cursor(c, "pin_e", &conn);
	cr_assert_geq(conn, 1, "find through the proxy failed");
	txn_ok(fd, txn_cmd("insert", "t", lsid, 1, true), "startTransaction");
	/* the cursor's pin expires: killed on its connection, released */
	wait_stat(p, "counters.lb_pins_expired", 1);
	wait_kills(1);
	wait_stat(p, "gauges.lb_pinned_connections", 1); /* the transaction keeps its pin */
	cr_assert(!mongoc_cursor_next(cur, &doc), "getMore after the pin expired returned a doc");
	cr_assert(mongoc_cursor_error(cur, &err));
	cr_assert_eq(err.code, 43, "getMore of an expired cursor: code %u: %s", err.code,
		     err.message);
	cr_assert(strstr(err.message, "lb_pin_idle_timeout_ms") != NULL, "no reason: %s",
		  err.message);
	cr_log_info("idle_expiry: %s", err.message);
	fake_pin_stats(&st);
	cr_assert_eq(st.getmores_ok + st.getmores_wrong_conn + st.getmores_unknown, 0,
		     "the expired cursor's getMore reached the backend");
	cr_assert_eq(st.kills_wrong_conn, 0);
	/* the idle transaction was left alone: it commits on its connection */
	txn_ok(fd, txn_cmd("commitTransaction", NULL, lsid, 1, false), "commit");
	fake_pin_stats(&st);
	cr_assert_eq(st.txn_commits, 1);
	cr_assert_eq(st.txn_wrong_conn, 0);
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	cr_assert_eq(stat_of(p, "counters.lb_pins_expired"), 1);
	mongoc_cursor_destroy(cur);
	bson_destroy(lsid);
	close(fd);
	mongoc_client_destroy(c);
	proxy_stop(p);
	fake_stop(f);
}

/* A users file with db.user / pw (mode 0600) in a new directory `dir`. */
static void users_file(char *dir, const char *dbuser, const char *pw, char *path, size_t len)
{
	char line[2048], err[256];
	FILE *f;

	cr_assert(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
	cr_assert(users_format_line(dbuser, pw, line, sizeof(line), err, sizeof(err)), "%s", err);
	snprintf(path, len, "%s/users", dir);
	f = fopen(path, "w");
	cr_assert(f != NULL);
	fprintf(f, "%s\n", line);
	fclose(f);
	chmod(path, 0600);
}

static mongoc_client_t *lb_login(struct proxy *p, const char *app)
{
	char uri[300];
	mongoc_client_t *c;

	snprintf(uri, sizeof(uri),
		 "mongodb://bob:bob-Pw2@127.0.0.1:%d/?loadBalanced=true&authSource=app", p->port);
	c = h_client_uri(uri, app);
	cr_assert(c != NULL, "libmongoc refused %s", uri);
	return c;
}

/* With client authentication the identity is the user, whatever application
 * names its connections give. */
Test(lbpin, identity_user, .timeout = 120)
{
	struct fake *f = lb_fake();
	char dir[] = "/tmp/mp-lbuser-XXXXXX", users[300], more[600], rm[400];
	struct proxy *p;
	mongoc_client_t *u1, *u2, *u3;
	mongoc_cursor_t *c1, *c2;
	int ch1, ch2;
	bson_error_t err;

	users_file(dir, "app.bob", "bob-Pw2", users, sizeof(users));
	snprintf(more, sizeof(more),
		 "auth_mode = scram\nauth_users_file = %s\nauth_pool_mode = shared\n"
		 "auth_stats_unauthenticated = on\n"
		 "queue_timeout_ms = 1000\n",
		 users);
	p = lb_proxy(f, 4, more);
	u1 = lb_login(p, "lb-u1");
	u2 = lb_login(p, "lb-u2");
	u3 = lb_login(p, "lb-u3");
	c1 = open_cursor(u1, "pin_u1", &ch1);
	c2 = open_cursor(u2, "pin_u2", &ch2);
	cr_assert(ch1 >= 1 && ch2 >= 1, "bob's cursors: %d %d", ch1, ch2);
	cr_assert_eq(find_all(u3, "pin_one", "{\"limit\": 1}", &err), 1, "%s", err.message);
	cr_assert_eq(find_all(u3, "pin_u3", NULL, &err), -1,
		     "a third pin for one user (under another application name)");
	cr_assert_eq(err.code, 462, "refusal: code %u: %s", err.code, err.message);
	cr_assert(strstr(err.message, "user app.bob") != NULL, "unclear refusal: %s", err.message);
	cr_log_info("identity_user: %s", err.message);
	wait_stat(p, "gauges.lb_pinned_connections", 2);
	cr_assert_eq(drain(c1, ch1, "c1") + drain(c2, ch2, "c2"), 2 * (FAKE_PIN_DOCS - 1));
	wait_stat(p, "gauges.lb_pinned_connections", 0);
	mongoc_cursor_destroy(c1);
	mongoc_cursor_destroy(c2);
	mongoc_client_destroy(u1);
	mongoc_client_destroy(u2);
	mongoc_client_destroy(u3);
	proxy_stop(p);
	fake_stop(f);
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	cr_assert_eq(system(rm), 0);
}
