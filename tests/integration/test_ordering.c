/*
 * test_ordering.c — a client's unacknowledged (moreToCome) writes run in the
 * order it sent them, and they go through admission control (issue 8, items
 * 9 and 5).
 *
 * MongoDB runs the operations of one connection in order; through the proxy
 * that must stay true although a w:0 write gets no reply (pool/sticky.h).
 * The sequences (from pymongo's own suite):
 *   bulk   unordered w:0 bulk: insert a:1 and a:2, upsert a:3, delete a:1,
 *          then an acknowledged count: 2 documents (3 when the delete ran
 *          first, 0 when the count overtook the writes);
 *   count  a w:0 insert, then an acknowledged count of it: 1.
 * Sent as raw OP_MSG (all messages in one send, so the proxy sees them at
 * once) and through pymongo 3.11 (ordering_pymongo.py, maxPoolSize=1, w=0).
 *
 * What the backend itself does with moreToCome writes is probed on one raw
 * socket: FerretDB runs them (and replies anyway; the replies are skipped by
 * responseTo); mongo-java-server closes the connection without running
 * them. On such a backend the right outcome is 0 documents, and the
 * acknowledged request after the writes must still be answered.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif
#define ORDER_SCRIPT MP_SOURCE_DIR "/tests/integration/ordering_pymongo.py"
#define PYTHON	     "/usr/bin/python3"

#define BULK_RUNS  100
#define COUNT_RUNS 300

static int32_t next_id = 1000;

static void add_msg(struct h_buf *all, uint32_t flags, const bson_t *body, int32_t *id)
{
	struct h_buf b;

	hb_init(&b);
	*id = next_id++;
	h_build_msg(&b, *id, flags, body);
	hb_add(all, b.data, b.len);
	hb_free(&b);
}

#define NO_REPLY      (-1)
#define NETWORK_ERROR (-2)

/* Receive until the reply to `id` (stray replies to moreToCome messages
 * are counted and skipped); its n, NETWORK_ERROR for an error reply with
 * code 6 (HostUnreachable), or NO_REPLY when the connection closed, timed
 * out or the reply was anything else. */
static int64_t recv_n_within(int fd, int32_t id, int *stray, int timeout_ms)
{
	for (;;) {
		struct raw_reply r;
		uint8_t *msg;
		size_t len;
		int64_t n = -1;
		bool mine;

		if (raw_recv_msg(fd, &msg, &len, timeout_ms) != RAW_OK)
			return -1;
		mine = raw_parse_reply(msg, len, &r) && r.response_to == id;
		if (mine && r.have_doc && h_get_int(&r.doc, "ok", 0) == 1)
			n = h_get_int(&r.doc, "n", NO_REPLY);
		else if (mine && r.have_doc && h_get_int(&r.doc, "code", 0) == 6)
			n = NETWORK_ERROR;
		free(msg);
		if (mine)
			return n;
		(*stray)++;
	}
}

static int64_t recv_n(int fd, int32_t id, int *stray)
{
	return recv_n_within(fd, id, stray, 60000);
}

enum seq { SEQ_BULK, SEQ_COUNT };

/* One run of a sequence on fd; the count's n, or -1 if not answered. */
static int64_t run_seq(int fd, enum seq seq, int run, const char *db, const char *coll, int *stray)
{
	struct h_buf all;
	bson_t *m1, *m2 = NULL, *m3 = NULL, *cnt;
	int32_t id;
	int64_t n;

	hb_init(&all);
	if (seq == SEQ_BULK) {
		m1 = BCON_NEW("insert", BCON_UTF8(coll), "ordered", BCON_BOOL(false), "documents",
			      "[", "{", "a", BCON_INT32(1), "run", BCON_INT32(run), "}", "{", "a",
			      BCON_INT32(2), "run", BCON_INT32(run), "}", "]", "writeConcern", "{",
			      "w", BCON_INT32(0), "}", "$db", BCON_UTF8(db));
		m2 = BCON_NEW("update", BCON_UTF8(coll), "ordered", BCON_BOOL(false), "updates",
			      "[", "{", "q", "{", "a", BCON_INT32(3), "run", BCON_INT32(run), "}",
			      "u", "{", "$set", "{", "b", BCON_INT32(1), "}", "}", "upsert",
			      BCON_BOOL(true), "}", "]", "writeConcern", "{", "w", BCON_INT32(0),
			      "}", "$db", BCON_UTF8(db));
		m3 = BCON_NEW("delete", BCON_UTF8(coll), "ordered", BCON_BOOL(false), "deletes",
			      "[", "{", "q", "{", "a", BCON_INT32(1), "run", BCON_INT32(run), "}",
			      "limit", BCON_INT32(1), "}", "]", "writeConcern", "{", "w",
			      BCON_INT32(0), "}", "$db", BCON_UTF8(db));
		cnt = BCON_NEW("count", BCON_UTF8(coll), "query", "{", "run", BCON_INT32(run), "}",
			       "$db", BCON_UTF8(db));
	} else {
		m1 = BCON_NEW("insert", BCON_UTF8(coll), "documents", "[", "{", "k",
			      BCON_INT32(run), "}", "]", "writeConcern", "{", "w", BCON_INT32(0),
			      "}", "$db", BCON_UTF8(db));
		cnt = BCON_NEW("count", BCON_UTF8(coll), "query", "{", "k", BCON_INT32(run), "}",
			       "$db", BCON_UTF8(db));
	}
	add_msg(&all, H_MSG_MORE_TO_COME, m1, &id);
	if (m2)
		add_msg(&all, H_MSG_MORE_TO_COME, m2, &id);
	if (m3)
		add_msg(&all, H_MSG_MORE_TO_COME, m3, &id);
	add_msg(&all, 0, cnt, &id);
	n = raw_send(fd, all.data, all.len) ? recv_n(fd, id, stray) : -1;
	hb_free(&all);
	bson_destroy(m1);
	if (m2)
		bson_destroy(m2);
	if (m3)
		bson_destroy(m3);
	bson_destroy(cnt);
	return n;
}

static int backend_fd(void)
{
	return raw_connect_backend();
}

/* Does the backend run moreToCome writes (true) or close the connection
 * without running them (false)? One raw socket, straight to it. */
static bool backend_runs_unacked(const char *db)
{
	int fd = backend_fd(), stray = 0;
	int64_t n = run_seq(fd, SEQ_COUNT, -1, db, "probe", &stray);

	close(fd);
	cr_log_info("backend %s: a moreToCome insert then a count on one socket: %s",
		    h_backend_name(),
		    n < 0    ? "connection closed"
		    : n == 1 ? "ran"
			     : "not run");
	cr_assert(n != 0, "the backend answered the count but did not run the write");
	return n == 1;
}

/*
 * `runs` runs of seq on one connection; the number of wrong outcomes. A
 * network error reply (the backend closed the connection after the write,
 * as mongo-java-server does; the same as a driver gets straight from it) is
 * allowed only when net_errors_ok; no reply at all never is.
 */
static int count_wrong(int (*connect_fn)(void *), void *arg, enum seq seq, int runs, const char *db,
		       const char *coll, int64_t want, bool net_errors_ok, int *unanswered)
{
	int fd = connect_fn(arg), wrong = 0, stray = 0, neterr = 0, hist[4] = {0};

	*unanswered = 0;
	for (int i = 0; i < runs; i++) {
		int64_t n = run_seq(fd, seq, i, db, coll, &stray);

		if (n == NETWORK_ERROR) {
			neterr++;
			if (!net_errors_ok)
				wrong++;
			continue;
		}
		if (n < 0) {
			(*unanswered)++;
			break;
		}
		hist[n >= 0 && n < 4 ? n : 3]++;
		if (n != want)
			wrong++;
	}
	close(fd);
	cr_log_info("%s %s: %d of %d wrong (n=0: %d, 1: %d, 2: %d, 3+: %d, network error: %d), "
		    "%d unanswered, %d stray replies",
		    coll, seq == SEQ_BULK ? "bulk" : "insert-then-count", wrong, runs, hist[0],
		    hist[1], hist[2], hist[3], neterr, *unanswered, stray);
	return wrong;
}

static int connect_proxy(void *p)
{
	int fd = raw_connect(p);

	cr_assert(fd >= 0, "cannot connect to the proxy");
	return fd;
}

static int connect_backend(void *unused)
{
	(void)unused;
	return backend_fd();
}

static void raw_case(enum seq seq, int runs)
{
	struct proxy *p = proxy_start(NULL);
	char db[64];
	bool runs_unacked;
	int64_t want;
	int wrong, unanswered;

	h_unique(db, sizeof(db), "it_order");
	runs_unacked = backend_runs_unacked(db);
	want = !runs_unacked ? 0 : seq == SEQ_BULK ? 2 : 1;
	if (runs_unacked) {
		/* The reference: straight to the server the order holds. */
		wrong = count_wrong(connect_backend, NULL, seq, runs, db, "direct", want, false,
				    &unanswered);
		cr_assert_eq(unanswered, 0);
		cr_assert_eq(wrong, 0, "straight to the backend %d of %d runs were wrong", wrong,
			     runs);
	}
	wrong = count_wrong(connect_proxy, p, seq, runs, db, "via_proxy", want, !runs_unacked,
			    &unanswered);
	proxy_assert_alive(p, "after the runs");
	cr_assert_eq(unanswered, 0, "the count after the w:0 writes was not answered");
	cr_assert_eq(wrong, 0,
		     "through the proxy %d of %d runs ended with the wrong count (want %lld): the "
		     "client's operations ran out of order",
		     wrong, runs, (long long)want);
	proxy_stop(p);
}

Test(ordering, raw_bulk_w0, .timeout = 300)
{
	raw_case(SEQ_BULK, BULK_RUNS);
}

Test(ordering, raw_insert_then_count, .timeout = 300)
{
	raw_case(SEQ_COUNT, COUNT_RUNS);
}

/* ---------------------------------------------------------------- pymongo */

/* pymongo 3.11, maxPoolSize=1, w=0: the bulk x100 and insert-then-count
 * x300 through the proxy, all right (details in ordering_pymongo.py). */
Test(ordering, pymongo_w0_in_order, .timeout = 600)
{
	struct proxy *p = proxy_start(NULL);
	char db[64], bulk[16], count[16];
	char *out = calloc(1, 65536);
	const char *argv[9];
	int st;

	h_unique(db, sizeof(db), "it_orderpy");
	/* The raw probe here logs in when the URI has credentials; the script's
	 * own raw probe could not. */
	argv[7] = backend_runs_unacked(db) ? "runs" : "drops";
	snprintf(bulk, sizeof(bulk), "%d", BULK_RUNS);
	snprintf(count, sizeof(count), "%d", COUNT_RUNS);
	argv[0] = PYTHON;
	argv[1] = ORDER_SCRIPT;
	argv[2] = p->uri;
	argv[3] = h_direct_uri();
	argv[4] = db;
	argv[5] = bulk;
	argv[6] = count;
	argv[8] = NULL;
	st = h_run_capture(argv, out, 65536, 580000);
	cr_log_info("ordering_pymongo.py:\n%s", out);
	proxy_assert_alive(p, "during ordering_pymongo.py");
	cr_assert(st != -1, "ordering_pymongo.py did not finish in time:\n%s", out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "pymongo's w:0 operations through the proxy ran out of order:\n%s", out);
	free(out);
	proxy_stop(p);
}

/* ------------------------------------------------- admission of w:0 writes */

#define FLOOD_WRITES 200
#define FLOOD_DOCS   2000
#define READERS	     3
#define MAX_LAT	     200000

struct flood {
	struct proxy *p;
	const char *db;
	volatile bool done;
	int64_t count; /* the acknowledged count after the writes, or NO_REPLY/NETWORK_ERROR */
	int64_t ms;
};

struct reader {
	struct proxy *p;
	const char *db;
	struct flood *f;
	double *lat;
	int n;
	int errors;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct h_buf all;
	int32_t id = 0;
	int64_t t0 = h_now_ms();
	int fd = raw_connect(f->p), stray = 0;

	hb_init(&all);
	for (int i = 0; i < FLOOD_WRITES; i++) {
		bson_t cmd = BSON_INITIALIZER, arr, d, w;
		char key[16];

		BSON_APPEND_UTF8(&cmd, "insert", "flood");
		BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
		for (int j = 0; j < FLOOD_DOCS; j++) {
			snprintf(key, sizeof(key), "%d", j);
			bson_append_document_begin(&arr, key, -1, &d);
			BSON_APPEND_INT32(&d, "_id", i * FLOOD_DOCS + j);
			BSON_APPEND_INT32(&d, "w", i);
			bson_append_document_end(&arr, &d);
		}
		bson_append_array_end(&cmd, &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&cmd, "writeConcern", &w);
		BSON_APPEND_INT32(&w, "w", 0);
		bson_append_document_end(&cmd, &w);
		BSON_APPEND_UTF8(&cmd, "$db", f->db);
		add_msg(&all, H_MSG_MORE_TO_COME, &cmd, &id);
		bson_destroy(&cmd);
	}
	{
		bson_t *cnt = BCON_NEW("count", "flood", "$db", BCON_UTF8(f->db));

		add_msg(&all, 0, cnt, &id);
		bson_destroy(cnt);
	}
	f->count = fd >= 0 && raw_send(fd, all.data, all.len)
		       ? recv_n_within(fd, id, &stray, 500000)
		       : NO_REPLY;
	f->ms = h_now_ms() - t0;
	hb_free(&all);
	if (fd >= 0)
		close(fd);
	f->done = true;
	return NULL;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	mongoc_client_t *c = h_proxy_client(r->p, "itest-flood-reader");
	mongoc_collection_t *col = mongoc_client_get_collection(c, r->db, "small");
	bson_t *filter = BCON_NEW("_id", BCON_INT32(1));

	while (!r->f->done && r->n < MAX_LAT) {
		int64_t t0 = h_now_ms();
		mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
		const bson_t *doc;
		bson_error_t err;

		while (mongoc_cursor_next(cur, &doc))
			;
		if (mongoc_cursor_error(cur, &err))
			r->errors++;
		mongoc_cursor_destroy(cur);
		r->lat[r->n++] = (double)(h_now_ms() - t0);
	}
	bson_destroy(filter);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * One client floods 200 w:0 inserts of 2,000 documents each (one send, then
 * an acknowledged count on the same connection) while three clients run
 * finds. The w:0 writes are admitted like any request: they stay in the
 * client's in-flight count until written, wait in order on the one backend
 * connection that carries them (never spread over the pool), so the count
 * sees all 400,000 documents and the readers keep being served (their
 * latencies are printed; no timing assertion).
 */
Test(ordering, w0_flood_admitted_in_order, .timeout = 600)
{
	struct proxy *p = proxy_start("pool_size = 4\nmax_inflight_per_client = 4\n");
	mongoc_client_t *sc = h_proxy_client(p, "itest-flood-stats");
	struct flood f = {0};
	struct reader rd[READERS];
	pthread_t ft, rt[READERS];
	bson_t st0, st, *one, reply;
	bson_error_t err;
	char db[64];
	int64_t max_waiting = 0, max_pinned = 0, mtc;
	bool runs_unacked;
	double *all_lat = calloc((size_t)READERS * MAX_LAT, sizeof(double));
	int nlat = 0, errors = 0;

	h_unique(db, sizeof(db), "it_flood");
	runs_unacked = backend_runs_unacked(db);
	one = BCON_NEW("insert", "small", "documents", "[", "{", "_id", BCON_INT32(1), "}", "]");
	cr_assert(h_cmd(sc, db, one, &reply, &err), "insert: %s", err.message);
	bson_destroy(&reply);
	bson_destroy(one);
	h_stats(sc, &st0);
	f.p = p;
	f.db = db;
	for (int i = 0; i < READERS; i++) {
		rd[i] = (struct reader){.p = p, .db = db, .f = &f};
		rd[i].lat = all_lat + (size_t)i * MAX_LAT;
		pthread_create(&rt[i], NULL, reader_main, &rd[i]);
	}
	pthread_create(&ft, NULL, flood_main, &f);
	while (!f.done) {
		h_stats(sc, &st);
		if (h_get_int(&st, "gauges.requests_waiting", 0) > max_waiting)
			max_waiting = h_get_int(&st, "gauges.requests_waiting", 0);
		if (h_get_int(&st, "gauges.clients_pinned_unacked", -1) > max_pinned)
			max_pinned = h_get_int(&st, "gauges.clients_pinned_unacked", -1);
		bson_destroy(&st);
		h_sleep_ms(50);
	}
	pthread_join(ft, NULL);
	for (int i = 0; i < READERS; i++) {
		pthread_join(rt[i], NULL);
		memmove(all_lat + nlat, rd[i].lat, (size_t)rd[i].n * sizeof(double));
		nlat += rd[i].n;
		errors += rd[i].errors;
	}
	h_stats(sc, &st);
	mtc = h_get_int(&st, "counters.more_to_come_writes", 0) -
	      h_get_int(&st0, "counters.more_to_come_writes", 0);
	qsort(all_lat, (size_t)nlat, sizeof(double), cmp_double);
	cr_log_info("w:0 flood: %d inserts x %d docs in %lld ms; count after them on the same "
		    "connection: %lld; proxy counted %lld moreToCome writes, %lld fences; peak "
		    "requests_waiting %lld, peak clients_pinned_unacked %lld",
		    FLOOD_WRITES, FLOOD_DOCS, (long long)f.ms, (long long)f.count, (long long)mtc,
		    (long long)(h_get_int(&st, "counters.unacked_fences", 0) -
				h_get_int(&st0, "counters.unacked_fences", 0)),
		    (long long)max_waiting, (long long)max_pinned);
	if (nlat > 0)
		cr_log_info(
		    "readers during the flood: %d finds, %d errors, latency ms p50 %.0f p99 "
		    "%.0f max %.0f",
		    nlat, errors, all_lat[nlat / 2], all_lat[(nlat * 99) / 100], all_lat[nlat - 1]);
	proxy_assert_alive(p, "after the w:0 flood");
	cr_assert_eq(mtc, FLOOD_WRITES);
	cr_assert_eq(errors, 0, "%d finds of the other clients failed", errors);
	/* The flood's requests waited at most as many as its in-flight limit
	 * allows, beside one per reader. */
	cr_assert_leq(max_waiting, 4 + READERS);
	if (runs_unacked) {
		cr_assert_eq(
		    f.count, FLOOD_WRITES * FLOOD_DOCS,
		    "the acknowledged count after %d w:0 inserts saw %lld of %d documents: "
		    "it overtook them",
		    FLOOD_WRITES, (long long)f.count, FLOOD_WRITES * FLOOD_DOCS);
		cr_assert_geq(max_pinned, 1, "clients_pinned_unacked never showed the flooder");
	} else {
		/* The backend closes the connection on each w:0 write, without
		 * running it: the count is answered, with 0 or a network error. */
		cr_assert(f.count == 0 || f.count == NETWORK_ERROR, "count: %lld",
			  (long long)f.count);
	}
	bson_destroy(&st);
	bson_destroy(&st0);
	h_drop_db(sc, db);
	mongoc_client_destroy(sc);
	free(all_lat);
	proxy_stop(p);
}
