/*
 * test_membound.c — memory is bounded per client and globally (issue 8,
 * item 4).
 *
 * A client that pipelines finds of a 15 MB document and never reads its
 * replies must not make the proxy hold a reply per request in flight:
 * with max_client_buffer_bytes = 1 MiB each such client holds at most the
 * limit plus one message, the well-behaved clients keep being served, and
 * the memory is given back when the non-readers go. Over all clients,
 * max_buffer_bytes stops reading the clients that hold the memory (more than
 * their share), not everyone: a new client's ping and find are answered
 * while non-readers fill it (issue 20, item 2), and client_write_timeout_ms
 * closes the non-readers, which ends the pause.
 *
 * The proxy's peak RSS is read from /proc/PID/status (VmHWM): freed memory
 * may stay with the allocator, the peak is what must be bounded.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define BIG_BYTES   (15 * 1000 * 1000)
#define PIPELINED   64
#define NON_READERS 5
#define MAX_LAT	    100000
#define MIB	    (1024L * 1024L)

/* db.big gets {_id: 1, pad: <15 MB>}, db.small {_id: 2} (apart: FerretDB
 * needs about a second to find even a small document beside a 15 MB one). */
static void insert_docs(mongoc_client_t *c, const char *db)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, "big");
	mongoc_collection_t *scol = mongoc_client_get_collection(c, db, "small");
	char *pad = malloc(BIG_BYTES + 1);
	bson_t *big, *small;
	bson_error_t err;

	memset(pad, 'x', BIG_BYTES);
	pad[BIG_BYTES] = '\0';
	big = BCON_NEW("_id", BCON_INT32(1), "pad", BCON_UTF8(pad));
	small = BCON_NEW("_id", BCON_INT32(2), "v", BCON_INT32(2));
	cr_assert(mongoc_collection_insert_one(col, big, NULL, NULL, &err), "insert big: %s",
		  err.message);
	cr_assert(mongoc_collection_insert_one(scol, small, NULL, NULL, &err), "insert small: %s",
		  err.message);
	bson_destroy(big);
	bson_destroy(small);
	free(pad);
	mongoc_collection_destroy(col);
	mongoc_collection_destroy(scol);
}

/* A socket that sends PIPELINED finds of the big document and never reads. */
static int non_reader(struct proxy *p, const char *db)
{
	int fd = raw_connect(p), small = 64 * 1024;
	struct h_buf all, b;
	bson_t *find =
	    BCON_NEW("find", "big", "filter", "{", "_id", BCON_INT32(1), "}", "$db", BCON_UTF8(db));

	cr_assert(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	hb_init(&all);
	for (int i = 0; i < PIPELINED; i++) {
		hb_init(&b);
		h_build_msg(&b, 5000 + i, 0, find);
		hb_add(&all, b.data, b.len);
		hb_free(&b);
	}
	cr_assert(raw_send(fd, all.data, all.len));
	hb_free(&all);
	bson_destroy(find);
	return fd;
}

struct worker {
	struct proxy *p;
	const char *db;
	volatile bool stop;
	double *lat;
	int n, errors;
};

/* The well-behaved client: finds of the small document, one at a time. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	mongoc_client_t *c = h_proxy_client(w->p, "itest-membound-worker");
	mongoc_collection_t *col = mongoc_client_get_collection(c, w->db, "small");
	bson_t *filter = BCON_NEW("_id", BCON_INT32(2));

	while (!w->stop && w->n < MAX_LAT) {
		int64_t t0 = h_now_ms();
		mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
		const bson_t *doc;
		bson_error_t err;
		int got = 0;

		while (mongoc_cursor_next(cur, &doc))
			got++;
		if (mongoc_cursor_error(cur, &err) || got != 1)
			w->errors++;
		mongoc_cursor_destroy(cur);
		w->lat[w->n++] = (double)(h_now_ms() - t0);
		h_sleep_ms(5);
	}
	bson_destroy(filter);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return NULL;
}

/* An ASan build of the proxy keeps freed memory in its quarantine (256 MB
 * by default), which is not memory the proxy holds: keep it small for the
 * proxies started here (no effect on other builds). */
static void small_asan_quarantine(void)
{
	const char *old = getenv("ASAN_OPTIONS");
	char buf[1024];

	snprintf(buf, sizeof(buf), "%s%squarantine_size_mb=4:thread_local_quarantine_size_kb=64",
		 old ? old : "", old && *old ? ":" : "");
	setenv("ASAN_OPTIONS", buf, 1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Read the big document once through the proxy (warms the allocator). */
static void read_big_once(mongoc_client_t *c, const char *db)
{
	bson_t *cmd = BCON_NEW("find", "big", "filter", "{", "_id", BCON_INT32(1), "}"), reply;
	bson_error_t err;

	cr_assert(h_cmd(c, db, cmd, &reply, &err), "find big: %s", err.message);
	bson_destroy(&reply);
	bson_destroy(cmd);
}

/*
 * The 64 x 15 MB non-reader plus four more, while a well-behaved client
 * keeps working (pool_size 8: each non-reader may have one request running,
 * so a connection is always left for it): the proxy's peak RSS stays below baseline +
 * max_buffer_bytes + a few messages; the well-behaved client's latency is
 * printed (p99; no timing assertion); when the non-readers go, the buffered
 * bytes drop to ~0 and the proxy keeps serving.
 */
Test(membound, non_readers_do_not_grow_memory, .timeout = 600)
{
	const long max_buffer = 128 * MIB;
	struct proxy *p =
	    (small_asan_quarantine(), proxy_start("max_client_buffer_bytes = 1048576\n"
						  "max_buffer_bytes = 134217728\npool_size = 8\n"));
	mongoc_client_t *sc = h_proxy_client(p, "itest-membound");
	struct worker w = {.p = p};
	pthread_t wt;
	int fds[NON_READERS];
	char db[64];
	long base_kb, peak_kb, after_kb, bound_kb;
	int64_t peak_buffered = 0, peak_paused = 0, after_buffered = -1, deadline;
	bson_t st;

	h_unique(db, sizeof(db), "it_membound");
	w.db = db;
	w.lat = calloc(MAX_LAT, sizeof(double));
	insert_docs(sc, db);
	read_big_once(sc, db);
	base_kb = proxy_status_kb(p, "VmHWM");
	pthread_create(&wt, NULL, worker_main, &w);
	for (int i = 0; i < NON_READERS; i++)
		fds[i] = non_reader(p, db);
	/* Hold them at least 8 s and until each is held back by its bound
	 * (one big reply reached it; FerretDB takes seconds per big find). */
	deadline = h_now_ms() + 90000;
	for (int i = 0; h_now_ms() < deadline; i++) {
		int64_t paused;

		h_sleep_ms(100);
		h_stats(sc, &st);
		paused = h_get_int(&st, "gauges.clients_memory_paused", 0);
		if (h_get_int(&st, "gauges.bytes_buffered", 0) > peak_buffered)
			peak_buffered = h_get_int(&st, "gauges.bytes_buffered", 0);
		if (paused > peak_paused)
			peak_paused = paused;
		bson_destroy(&st);
		if (i >= 80 && paused >= NON_READERS)
			break;
	}
	peak_kb = proxy_status_kb(p, "VmHWM");
	for (int i = 0; i < NON_READERS; i++)
		close(fds[i]);
	deadline = h_now_ms() + 30000;
	while (h_now_ms() < deadline) {
		h_stats(sc, &st);
		after_buffered = h_get_int(&st, "gauges.bytes_buffered", -1);
		bson_destroy(&st);
		if (after_buffered >= 0 && after_buffered < MIB)
			break;
		h_sleep_ms(100);
	}
	h_sleep_ms(500);
	w.stop = true;
	pthread_join(wt, NULL);
	read_big_once(sc, db); /* still serving, big replies too */
	after_kb = proxy_status_kb(p, "VmRSS");
	bound_kb = base_kb + max_buffer / 1024 + 4 * (16 * MIB) / 1024;
	qsort(w.lat, (size_t)w.n, sizeof(double), cmp_double);
	cr_log_info("membound: %d non-readers x %d pipelined finds of a %d-byte document; proxy "
		    "VmHWM baseline %ld kB, peak %ld kB (+%ld MiB; bound %ld kB); VmRSS after they "
		    "left %ld kB; bytes_buffered peak %lld, after %lld; clients_memory_paused peak "
		    "%lld",
		    NON_READERS, PIPELINED, BIG_BYTES, base_kb, peak_kb, (peak_kb - base_kb) / 1024,
		    bound_kb, after_kb, (long long)peak_buffered, (long long)after_buffered,
		    (long long)peak_paused);
	if (w.n > 0)
		cr_log_info(
		    "well-behaved client: %d finds, %d errors, latency ms p50 %.0f p99 %.0f "
		    "max %.0f",
		    w.n, w.errors, w.lat[w.n / 2], w.lat[(w.n * 99) / 100], w.lat[w.n - 1]);
	proxy_assert_alive(p, "after the non-readers");
	cr_assert_gt(w.n, 0);
	cr_assert_eq(w.errors, 0, "%d of the well-behaved client's finds failed", w.errors);
	cr_assert_eq(peak_paused, NON_READERS, "not every non-reader got to its bound");
	cr_assert_leq(peak_kb, bound_kb,
		      "proxy peak RSS %ld kB is above baseline %ld kB + max_buffer_bytes + 4 "
		      "messages (%ld kB)",
		      peak_kb, base_kb, bound_kb);
	cr_assert(after_buffered >= 0 && after_buffered < MIB,
		  "bytes_buffered %lld after the non-readers left", (long long)after_buffered);
	h_drop_db(sc, db);
	mongoc_client_destroy(sc);
	free(w.lat);
	proxy_stop(p);
}

/*
 * max_buffer_bytes: non-readers fill the global bound; a new client is
 * still read (its ping is answered during the pause: it holds nothing);
 * the pause ends once they go. Entering and leaving are logged at warning.
 */
Test(membound, global_bound_pauses_reading, .timeout = 300)
{
	struct proxy *p = proxy_start("max_client_buffer_bytes = 1048576\n"
				      "max_buffer_bytes = 16777216\npool_size = 4\n");
	mongoc_client_t *sc = h_proxy_client(p, "itest-membound-global");
	struct h_buf b;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
	int fds[3], fd;
	char db[64];
	uint8_t *msg = NULL;
	size_t len;
	enum raw_status rs;
	struct raw_reply r;

	h_unique(db, sizeof(db), "it_memglobal");
	insert_docs(sc, db);
	for (int i = 0; i < 3; i++)
		fds[i] = non_reader(p, db);
	cr_assert(log_wait(p, "(max_buffer_bytes = ", 60000),
		  "the proxy never reached max_buffer_bytes:\n%s", proxy_log_tail(p, 4000));
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	hb_init(&b);
	h_build_msg(&b, 77, 0, ping);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	rs = raw_recv_msg(fd, &msg, &len, 30000);
	cr_assert_eq(rs, RAW_OK,
		     "a new client's ping was not answered (%s) while non-readers held "
		     "max_buffer_bytes",
		     raw_status_name(rs));
	cr_assert(raw_parse_reply(msg, len, &r) && r.response_to == 77 && r.have_doc &&
		  h_get_int(&r.doc, "ok", 0) == 1);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	cr_assert(log_wait(p, "reading resumed", 30000), "the pause never ended:\n%s",
		  proxy_log_tail(p, 4000));
	cr_assert(raw_ping_ok(fd, 30000), "a ping after the pause");
	cr_log_info("membound global: paused at max_buffer_bytes = 16 MiB with 3 non-readers, a "
		    "new client's ping answered during the pause");
	free(msg);
	close(fd);
	bson_destroy(ping);
	h_drop_db(sc, db);
	mongoc_client_destroy(sc);
	proxy_stop(p);
}

/* Rewrite the proxy's config as `base` + `extra`, SIGHUP, and wait until the
 * reload is done (applied or rejected: the counters say which). */
static void reload_with(struct proxy *p, const char *base, const char *extra)
{
	int64_t before = proxy_counter(p, "reloads") + proxy_counter(p, "reload_failures");
	int64_t deadline = h_now_ms() + 30000;
	FILE *f = fopen(p->cfg_path, "w");

	cr_assert(f != NULL);
	fprintf(f, "%s%s", base, extra);
	fclose(f);
	cr_assert(kill(p->pid, SIGHUP) == 0);
	while (proxy_counter(p, "reloads") + proxy_counter(p, "reload_failures") == before) {
		cr_assert(h_now_ms() < deadline, "the reload never finished");
		h_sleep_ms(50);
	}
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n = 0;

	cr_assert(f != NULL, "open %s", path);
	cr_assert(getdelim(&buf, &n, '\0', f) > 0, "read %s", path);
	fclose(f);
	return buf;
}

/* A find of db.small {_id: 2} on a raw socket, answered with its document. */
static void raw_find_small(int fd, const char *db, const char *when)
{
	bson_t *find = BCON_NEW("find", "small", "filter", "{", "_id", BCON_INT32(2), "}", "$db",
				BCON_UTF8(db));
	bson_t reply;

	cr_assert(raw_command(fd, 88, find, &reply, 30000), "a find got no answer %s", when);
	cr_assert_eq(h_get_int(&reply, "ok", 0), 1, "find %s: not ok", when);
	cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0._id", -1), 2, "find %s: no document",
		     when);
	bson_destroy(&reply);
	bson_destroy(find);
}

/* Poll the gauges until the non-readers are all held back by their bound
 * (fails with the values seen); returns bytes_buffered then. */
static int64_t wait_heavy_held(mongoc_client_t *sc, int n)
{
	int64_t deadline = h_now_ms() + 60000, paused = -1, held = -1, bytes;
	bson_t st;

	while (h_now_ms() < deadline) {
		h_stats(sc, &st);
		paused = h_get_int(&st, "gauges.memory_paused", -1);
		held = h_get_int(&st, "gauges.clients_memory_paused", -1);
		bytes = h_get_int(&st, "gauges.bytes_buffered", -1);
		bson_destroy(&st);
		if (paused == 1 && held == n)
			return bytes;
		h_sleep_ms(100);
	}
	cr_assert_fail("gauges: memory_paused %lld, clients_memory_paused %lld (want 1 and the "
		       "%d non-readers only)",
		       (long long)paused, (long long)held, n);
	return -1;
}

/*
 * Issue 20, item 2: three non-readers pipelining finds of a 15 MB document
 * fill max_buffer_bytes = 16 MiB. While the proxy is at the bound, a new
 * client's ping and find are answered (bounded waits, no timing threshold),
 * the gauges name only the non-readers, and the peak RSS stays within the
 * bound; once client_write_timeout_ms is short (a reload: until then it is
 * 10 min, so nothing but the fix can answer the ping) each non-reader is
 * closed with the reason logged and counted, the pause ends, the others stay.
 */
Test(membound, non_readers_held_and_closed_others_served, .timeout = 300)
{
	const long max_buffer = 16 * MIB;
	struct proxy *p =
	    (small_asan_quarantine(), proxy_start("max_client_buffer_bytes = 1048576\n"
						  "max_buffer_bytes = 16777216\npool_size = 4\n"));
	mongoc_client_t *sc = h_proxy_client(p, "itest-membound-heavy");
	char *base = read_file(p->cfg_path), db[64];
	int fds[3], fd;
	long base_kb, peak_kb, bound_kb;
	int64_t held_bytes;
	bson_t st;

	h_unique(db, sizeof(db), "it_memheavy");
	insert_docs(sc, db);
	read_big_once(sc, db);
	base_kb = proxy_status_kb(p, "VmHWM");
	reload_with(p, base, "client_write_timeout_ms = 600000\n");
	for (int i = 0; i < 3; i++)
		fds[i] = non_reader(p, db);
	cr_assert(log_wait(p, "(max_buffer_bytes = ", 60000),
		  "the proxy never reached max_buffer_bytes:\n%s", proxy_log_tail(p, 4000));
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_assert(raw_ping_ok(fd, 30000),
		  "a new client's ping was not answered while non-readers held max_buffer_bytes");
	raw_find_small(fd, db, "while non-readers held max_buffer_bytes");
	held_bytes = wait_heavy_held(sc, 3);
	peak_kb = proxy_status_kb(p, "VmHWM");
	/* Each non-reader holds its limit plus one message (the per-client
	 * bound, above the global one here), two more may be on their way. */
	bound_kb = base_kb + max_buffer / 1024 + (3 + 2) * (16 * MIB) / 1024;
	cr_assert_leq(peak_kb, bound_kb,
		      "proxy peak RSS %ld kB is above baseline %ld kB + max_buffer_bytes + 5 "
		      "messages (%ld kB)",
		      peak_kb, base_kb, bound_kb);
	reload_with(p, base, "client_write_timeout_ms = 1000\n");
	for (int i = 0; i < 3; i++) {
		cr_assert(log_wait_client(p, fds[i], "(client_write_timeout_ms)", 30000),
			  "non-reader %d not closed for client_write_timeout_ms:\n%s", i,
			  proxy_log_tail(p, 4000));
		cr_assert(raw_wait_closed(fds[i], 30000), "non-reader %d's socket stays open", i);
	}
	cr_assert(log_wait(p, "reading resumed", 30000), "the pause never ended:\n%s",
		  proxy_log_tail(p, 4000));
	h_stats(sc, &st);
	cr_assert_eq(h_counter(&st, "clients_closed_write_timeout"), 3);
	cr_assert_eq(h_get_int(&st, "gauges.memory_paused", -1), 0);
	cr_log_info(
	    "membound heavy: 3 non-readers held at max_buffer_bytes = 16 MiB, a new client's "
	    "ping and find answered meanwhile; bytes_buffered %lld; VmHWM baseline %ld kB, peak "
	    "%ld kB (bound %ld kB); bytes_buffered after the closes %lld",
	    (long long)held_bytes, base_kb, peak_kb, bound_kb,
	    (long long)h_get_int(&st, "gauges.bytes_buffered", -1));
	bson_destroy(&st);
	raw_find_small(fd, db, "after the non-readers were closed");
	proxy_assert_alive(p, "after closing the non-readers");
	close(fd);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	free(base);
	h_drop_db(sc, db);
	mongoc_client_destroy(sc);
	proxy_stop(p);
}
