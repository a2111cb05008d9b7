/*
 * test_scale.c — many clients on a small pool: 200 concurrent libmongoc
 * clients doing verified mixed work over pool_size = 4, and 2,000 idle
 * client connections held open on one proxy.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ---------------------------------------------------- 200 concurrent clients */

#define NCLIENTS  200
#define NDOCS	  10
#define POOL_SIZE 4
/* Clients share NCOLLS collections (10 clients, 100 documents each): the
 * batcher can merge lookups on one namespace, and backends that scan for
 * every query (FerretDB) stay fast. */
#define NCOLLS 20

struct shared {
	const char *uri;
	mongoc_client_pool_t *pool; /* set: workers pop clients from it */
	char db[64];
	pthread_barrier_t start;
	atomic_int ops_ok, ops_failed, clients_failed;
	atomic_bool stop_sampling;
	pthread_mutex_t mu;
	char first_error[512];
	/* sampled from mongoplexStats while the clients run */
	int max_backend_live, max_clients, samples, stats_errors;
};

struct worker {
	struct shared *sh;
	int tid;
	int ok, failed;
};

static void fail_op(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail_op(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	w->failed++;
	pthread_mutex_lock(&w->sh->mu);
	if (w->sh->first_error[0] == '\0') {
		int n =
		    snprintf(w->sh->first_error, sizeof(w->sh->first_error), "client %d: ", w->tid);

		va_start(ap, fmt);
		vsnprintf(w->sh->first_error + n, sizeof(w->sh->first_error) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&w->sh->mu);
}

#define CHECK(w, cond, ...)                                                                        \
	do {                                                                                       \
		if (cond)                                                                          \
			(w)->ok++;                                                                 \
		else                                                                               \
			fail_op(w, __VA_ARGS__);                                                   \
	} while (0)

static void doc_id(char *buf, size_t len, int tid, int i)
{
	snprintf(buf, len, "t%03d_%02d", tid, i);
}

/* All docs of a find, in order; returns the count or -1. */
static int find_all(mongoc_collection_t *col, const bson_t *filter, const bson_t *opts, int *vals,
		    int maxvals, bson_error_t *err)
{
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, opts, NULL);
	const bson_t *doc;
	int n = 0;

	while (mongoc_cursor_next(cur, &doc)) {
		if (n < maxvals)
			vals[n] = (int)h_get_int(doc, "i", -1);
		n++;
	}
	if (mongoc_cursor_error(cur, err))
		n = -1;
	mongoc_cursor_destroy(cur);
	return n;
}

static void worker_ops(struct worker *w, mongoc_client_t *c)
{
	mongoc_collection_t *col;
	bson_error_t err;
	char id[32], coll[16];
	int vals[NDOCS * 2], n;
	int tid = w->tid;

	snprintf(coll, sizeof(coll), "c%02d", tid % NCOLLS);
	col = mongoc_client_get_collection(c, w->sh->db, coll);
	/* 10 inserts: 5 insert_one, 1 insert_many of 5 (counted as 5) */
	for (int i = 0; i < 5; i++) {
		bson_t *d;

		doc_id(id, sizeof(id), tid, i);
		d = BCON_NEW("_id", BCON_UTF8(id), "owner", BCON_INT32(tid), "i", BCON_INT32(i));
		CHECK(w, mongoc_collection_insert_one(col, d, NULL, NULL, &err), "insert_one: %s",
		      err.message);
		bson_destroy(d);
	}
	{
		bson_t *docs[5];

		for (int i = 5; i < NDOCS; i++) {
			doc_id(id, sizeof(id), tid, i);
			docs[i - 5] = BCON_NEW("_id", BCON_UTF8(id), "owner", BCON_INT32(tid), "i",
					       BCON_INT32(i));
		}
		if (mongoc_collection_insert_many(col, (const bson_t **)docs, 5, NULL, NULL, &err))
			w->ok += 5;
		else
			fail_op(w, "insert_many: %s", err.message);
		for (int i = 0; i < 5; i++)
			bson_destroy(docs[i]);
	}
	/* 10 lookups by _id (the batchable shape) */
	for (int i = 0; i < NDOCS; i++) {
		bson_t *f;

		doc_id(id, sizeof(id), tid, i);
		f = BCON_NEW("_id", BCON_UTF8(id));
		n = find_all(col, f, NULL, vals, 1, &err);
		CHECK(w, n == 1 && vals[0] == i, "find by _id %s: n=%d i=%d (%s)", id, n,
		      n > 0 ? vals[0] : -1, n < 0 ? err.message : "");
		bson_destroy(f);
	}
	/* 5 lookups by $in of three ids */
	for (int k = 0; k < 5; k++) {
		char a[32], b[32], d[32];
		bson_t *f;

		doc_id(a, sizeof(a), tid, k);
		doc_id(b, sizeof(b), tid, k + 5);
		doc_id(d, sizeof(d), (tid + 1) % NCLIENTS, 99); /* never exists */
		f = BCON_NEW("_id", "{", "$in", "[", BCON_UTF8(b), BCON_UTF8(a), BCON_UTF8(d), "]",
			     "}");
		n = find_all(col, f, NULL, vals, 3, &err);
		CHECK(w, n == 2 && vals[0] == k && vals[1] == k + 5, "find $in: n=%d (%s)", n,
		      n < 0 ? err.message : "");
		bson_destroy(f);
	}
	/* 5 finds by owner, sorted */
	for (int k = 0; k < 5; k++) {
		bson_t *f = BCON_NEW("owner", BCON_INT32(tid));
		bson_t *o = BCON_NEW("sort", "{", "i", BCON_INT32(1), "}");
		bool good;

		n = find_all(col, f, o, vals, NDOCS * 2, &err);
		good = n == NDOCS;
		for (int i = 0; good && i < NDOCS; i++)
			good = vals[i] == i;
		CHECK(w, good, "find by owner: n=%d (%s)", n, n < 0 ? err.message : "");
		bson_destroy(f);
		bson_destroy(o);
	}
	/* 5 aggregates: $group/$sum, and $count (one accumulator per $group:
	 * FerretDB 1.24 returns 0 for the second $sum of a $group) */
	for (int k = 0; k < 5; k++) {
		bson_t *pipe =
		    k % 2 == 0
			? BCON_NEW("pipeline", "[", "{", "$match", "{", "owner", BCON_INT32(tid),
				   "}", "}", "{", "$group", "{", "_id", BCON_UTF8("$owner"), "s",
				   "{", "$sum", BCON_UTF8("$i"), "}", "}", "}", "]")
			: BCON_NEW("pipeline", "[", "{", "$match", "{", "owner", BCON_INT32(tid),
				   "}", "}", "{", "$count", BCON_UTF8("n"), "}", "]");
		mongoc_cursor_t *cur =
		    mongoc_collection_aggregate(col, MONGOC_QUERY_NONE, pipe, NULL, NULL);
		const bson_t *doc;
		int64_t s = -1, cnt = -1, groups = 0;

		while (mongoc_cursor_next(cur, &doc)) {
			groups++;
			s = h_get_int(doc, "s", -1);
			cnt = h_get_int(doc, "n", -1);
		}
		if (mongoc_cursor_error(cur, &err))
			fail_op(w, "aggregate: %s", err.message);
		else
			CHECK(w,
			      groups == 1 &&
				  (k % 2 == 0 ? s == 45 && cnt == -1 : s == -1 && cnt == NDOCS),
			      "aggregate: groups=%lld s=%lld n=%lld", (long long)groups,
			      (long long)s, (long long)cnt);
		mongoc_cursor_destroy(cur);
		bson_destroy(pipe);
	}
	/* 5 counts */
	for (int k = 0; k < 5; k++) {
		bson_t *f = BCON_NEW("owner", BCON_INT32(tid));
		int64_t cnt = mongoc_collection_count_documents(col, f, NULL, NULL, NULL, &err);

		CHECK(w, cnt == NDOCS, "count_documents: %lld (%s)", (long long)cnt,
		      cnt < 0 ? err.message : "");
		bson_destroy(f);
	}
	/* 5 updates, each read back by _id */
	for (int k = 0; k < 5; k++) {
		bson_t *sel, *upd, reply;
		mongoc_cursor_t *cur;
		const bson_t *doc;
		int64_t u = -1;

		doc_id(id, sizeof(id), tid, k);
		sel = BCON_NEW("_id", BCON_UTF8(id));
		upd = BCON_NEW("$set", "{", "u", BCON_INT32(1000 * tid + k), "}");
		if (mongoc_collection_update_one(col, sel, upd, NULL, &reply, &err))
			CHECK(w, h_get_int(&reply, "matchedCount", -1) == 1,
			      "update_one matched %lld",
			      (long long)h_get_int(&reply, "matchedCount", -1));
		else
			fail_op(w, "update_one: %s", err.message);
		bson_destroy(&reply);
		cur = mongoc_collection_find_with_opts(col, sel, NULL, NULL);
		if (mongoc_cursor_next(cur, &doc))
			u = h_get_int(doc, "u", -1);
		CHECK(w, u == 1000 * tid + k, "read after update: u=%lld", (long long)u);
		mongoc_cursor_destroy(cur);
		bson_destroy(sel);
		bson_destroy(upd);
	}
	mongoc_collection_destroy(col);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char app[32];
	mongoc_client_t *c;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1)), reply;
	bson_error_t err;
	bool connected;

	snprintf(app, sizeof(app), "itest-200-%d", w->tid);
	c = w->sh->pool ? mongoc_client_pool_pop(w->sh->pool) : h_client_uri(w->sh->uri, app);
	connected = c != NULL && h_cmd(c, "admin", ping, &reply, &err);
	if (c != NULL)
		bson_destroy(&reply);
	if (!connected) {
		fail_op(w, "cannot connect: %s", c ? err.message : "no client");
		atomic_fetch_add(&w->sh->clients_failed, 1);
	}
	/* All clients connected before anyone starts: 200 at once. */
	pthread_barrier_wait(&w->sh->start);
	if (connected)
		worker_ops(w, c);
	atomic_fetch_add(&w->sh->ops_ok, w->ok);
	atomic_fetch_add(&w->sh->ops_failed, w->failed);
	bson_destroy(ping);
	if (c != NULL && w->sh->pool != NULL)
		mongoc_client_pool_push(w->sh->pool, c);
	else if (c != NULL)
		mongoc_client_destroy(c);
	return NULL;
}

static void *sampler_main(void *arg)
{
	struct shared *sh = arg;
	mongoc_client_t *c = h_client_uri(sh->uri, "itest-200-sampler");
	bson_t *cmd = BCON_NEW("mongoplexStats", BCON_INT32(1));

	while (!atomic_load(&sh->stop_sampling)) {
		bson_t reply;
		bson_error_t err;

		if (c != NULL && h_cmd(c, "admin", cmd, &reply, &err)) {
			int live = (int)(h_get_int(&reply, "pools.0.connecting", 0) +
					 h_get_int(&reply, "pools.0.idle", 0) +
					 h_get_int(&reply, "pools.0.active", 0));
			int clients = (int)h_get_int(&reply, "gauges.clients", 0);

			if (live > sh->max_backend_live)
				sh->max_backend_live = live;
			if (clients > sh->max_clients)
				sh->max_clients = clients;
			sh->samples++;
			bson_destroy(&reply);
		} else {
			sh->stats_errors++;
			if (c != NULL)
				bson_destroy(&reply);
		}
		h_sleep_ms(5);
	}
	bson_destroy(cmd);
	if (c != NULL)
		mongoc_client_destroy(c);
	return NULL;
}

Test(scale, clients_200_on_pool_of_4, .timeout = 240)
{
	struct proxy *p = proxy_start("pool_size = 4\n");
	struct shared sh;
	struct worker *ws = calloc(NCLIENTS, sizeof(*ws));
	pthread_t th[NCLIENTS], sampler;
	mongoc_client_t *check;
	bson_t st;
	int64_t t0, ms, accepted, connects, idle, active;

	memset(&sh, 0, sizeof(sh));
	cr_assert_geq(h_raise_nofile(1024), 600, "need ~600 file descriptors");
	sh.uri = p->uri;
	h_unique(sh.db, sizeof(sh.db), "it_200");
	pthread_mutex_init(&sh.mu, NULL);
	pthread_barrier_init(&sh.start, NULL, NCLIENTS + 1);
	cr_assert_eq(pthread_create(&sampler, NULL, sampler_main, &sh), 0);
	for (int i = 0; i < NCLIENTS; i++) {
		ws[i].sh = &sh;
		ws[i].tid = i;
		cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0,
			     "cannot start thread %d", i);
	}
	pthread_barrier_wait(&sh.start);
	t0 = h_now_ms();
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(th[i], NULL);
	ms = h_now_ms() - t0;
	atomic_store(&sh.stop_sampling, true);
	pthread_join(sampler, NULL);

	proxy_assert_alive(p, "during the 200-client run");
	check = h_proxy_client(p, "itest-200-check");
	h_stats(check, &st);
	accepted = h_get_int(&st, "counters.clients_accepted", -1);
	connects = h_get_int(&st, "counters.backend_connects", -1);
	idle = h_get_int(&st, "pools.0.idle", -1);
	active = h_get_int(&st, "pools.0.active", -1);
	cr_log_info("200 clients x ~50 ops on pool_size %d: %d ops ok, %d failed in %lld ms; "
		    "client connections accepted %lld (peak open %d); backend connections made "
		    "%lld, now idle %lld + active %lld, sampled peak live %d over %d samples; "
		    "batcher: %lld lookups, %lld merged, %lld merged queries",
		    POOL_SIZE, atomic_load(&sh.ops_ok), atomic_load(&sh.ops_failed), (long long)ms,
		    (long long)accepted, sh.max_clients, (long long)connects, (long long)idle,
		    (long long)active, sh.max_backend_live, sh.samples,
		    (long long)h_get_int(&st, "counters.batch_lookups", -1),
		    (long long)h_get_int(&st, "counters.batch_lookups_merged", -1),
		    (long long)h_get_int(&st, "counters.batches_sent", -1));

	cr_assert_eq(atomic_load(&sh.clients_failed), 0, "%d clients could not connect: %s",
		     atomic_load(&sh.clients_failed), sh.first_error);
	cr_assert_eq(atomic_load(&sh.ops_failed), 0, "%d of %d operations failed; first: %s",
		     atomic_load(&sh.ops_failed),
		     atomic_load(&sh.ops_failed) + atomic_load(&sh.ops_ok), sh.first_error);
	cr_assert_geq(atomic_load(&sh.ops_ok), NCLIENTS * 50);
	cr_assert_gt(sh.samples, 0, "mongoplexStats never answered during the run (%d errors)",
		     sh.stats_errors);
	cr_assert_leq(sh.max_backend_live, POOL_SIZE,
		      "the pool had %d backend connections at once (pool_size %d)",
		      sh.max_backend_live, POOL_SIZE);
	cr_assert_leq(idle + active, POOL_SIZE);
	cr_assert_geq(accepted, NCLIENTS, "only %lld client connections accepted",
		      (long long)accepted);
	cr_assert_geq(sh.max_clients, NCLIENTS, "never saw %d clients at once (peak %d)", NCLIENTS,
		      sh.max_clients);

	h_drop_db(check, sh.db);
	bson_destroy(&st);
	mongoc_client_destroy(check);
	pthread_barrier_destroy(&sh.start);
	pthread_mutex_destroy(&sh.mu);
	free(ws);
	proxy_stop(p);
}

/* ---------------------------------------------------- 2,000 idle connections */

#define NIDLE 2000

static bool raw_hello(int fd, int32_t request_id)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t reply;
	bool ok =
	    raw_command(fd, request_id, hello, &reply, 10000) && h_get_int(&reply, "ok", 0) == 1;

	bson_destroy(&reply);
	bson_destroy(hello);
	return ok;
}

static void find_one_ok(mongoc_client_t *c, const char *db, const char *what)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, "c");
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1), "v", BCON_UTF8(what));
	bson_t *f = BCON_NEW("_id", BCON_INT32(1));
	mongoc_cursor_t *cur;
	const bson_t *got;
	bson_error_t err;

	mongoc_collection_delete_one(col, f, NULL, NULL, NULL);
	cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "%s: insert: %s", what,
		  err.message);
	cur = mongoc_collection_find_with_opts(col, f, NULL, NULL);
	cr_assert(mongoc_cursor_next(cur, &got), "%s: find returned nothing", what);
	cr_assert_str_eq(h_get_str(got, "v"), what);
	mongoc_cursor_destroy(cur);
	bson_destroy(doc);
	bson_destroy(f);
	mongoc_collection_destroy(col);
}

Test(scale, idle_clients_2000, .timeout = 240)
{
	struct proxy *p;
	mongoc_client_t *c;
	int *fds = calloc(NIDLE, sizeof(int));
	long rss0, rss1, limit;
	bson_t st;
	char db[64];
	int64_t clients, t0, deadline;

	limit = h_raise_nofile(4500);
	if (limit < 4500)
		h_cannot_run("RLIMIT_NOFILE cannot be raised to 4500 (got %ld; "
			     "MONGOPLEX_ALLOW_SKIPS=1 to skip)",
			     limit);
	p = proxy_start(NULL); /* inherits the raised limit */
	h_unique(db, sizeof(db), "it_idle");
	c = h_proxy_client(p, "itest-idle-check");
	find_one_ok(c, db, "before");
	rss0 = proxy_rss_kb(p);

	t0 = h_now_ms();
	for (int i = 0; i < NIDLE; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0, "connection %d of %d refused", i + 1, NIDLE);
		cr_assert(raw_hello(fds[i], 1000 + i), "hello on connection %d of %d failed", i + 1,
			  NIDLE);
	}
	cr_log_info("2000 connections opened and greeted in %lld ms", (long long)(h_now_ms() - t0));
	find_one_ok(c, db, "with 2000 idle");
	rss1 = proxy_rss_kb(p);
	h_stats(c, &st);
	clients = h_get_int(&st, "gauges.clients", -1);
	cr_log_info("proxy RSS: %ld kB with 1 client, %ld kB with %d idle clients + 1 "
		    "(%.1f kB per idle client); gauges.clients = %lld",
		    rss0, rss1, NIDLE, (double)(rss1 - rss0) / NIDLE, (long long)clients);
	cr_assert_eq(clients, NIDLE + 1, "gauges.clients = %lld, expected %d", (long long)clients,
		     NIDLE + 1);
	cr_assert(proxy_alive(p));
	/* Each idle connection still answers. */
	for (int i = 0; i < NIDLE; i += 97)
		cr_assert(raw_ping_ok(fds[i], 5000), "idle connection %d no longer answers", i);
	for (int i = 0; i < NIDLE; i++)
		close(fds[i]);
	/* The proxy notices every close. */
	deadline = h_now_ms() + 10000;
	do {
		bson_destroy(&st);
		h_stats(c, &st);
		clients = h_get_int(&st, "gauges.clients", -1);
		if (clients == 1)
			break;
		h_sleep_ms(50);
	} while (h_now_ms() < deadline);
	cr_assert_eq(clients, 1, "%lld clients still open after closing the idle ones",
		     (long long)clients);
	find_one_ok(c, db, "after");

	h_drop_db(c, db);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	free(fds);
	proxy_stop(p);
}

/* The same work from threads sharing one mongoc_client_pool_t: libmongoc's
 * pooled mode (background monitoring connections, connection reuse). */
#define NPOOLED 100

Test(scale, client_pool_100_threads, .timeout = 240)
{
	struct proxy *p = proxy_start("pool_size = 4\n");
	struct shared sh;
	struct worker *ws = calloc(NPOOLED, sizeof(*ws));
	pthread_t th[NPOOLED];
	mongoc_uri_t *uri;
	mongoc_client_t *check;
	bson_t st;
	char uri_str[256];

	memset(&sh, 0, sizeof(sh));
	snprintf(uri_str, sizeof(uri_str), "%s?appname=itest-pooled&serverSelectionTimeoutMS=10000",
		 p->uri);
	uri = mongoc_uri_new(uri_str);
	cr_assert(uri != NULL);
	sh.pool = mongoc_client_pool_new(uri);
	mongoc_uri_destroy(uri);
	cr_assert(sh.pool != NULL);
	mongoc_client_pool_set_error_api(sh.pool, MONGOC_ERROR_API_VERSION_2);
	mongoc_client_pool_max_size(sh.pool, NPOOLED);
	h_unique(sh.db, sizeof(sh.db), "it_pool");
	pthread_mutex_init(&sh.mu, NULL);
	pthread_barrier_init(&sh.start, NULL, NPOOLED + 1);
	for (int i = 0; i < NPOOLED; i++) {
		ws[i].sh = &sh;
		ws[i].tid = i;
		cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
	}
	pthread_barrier_wait(&sh.start);
	for (int i = 0; i < NPOOLED; i++)
		pthread_join(th[i], NULL);
	proxy_assert_alive(p, "during the pooled-client run");
	check = h_proxy_client(p, "itest-pooled-check");
	h_stats(check, &st);
	cr_log_info("mongoc_client_pool, %d threads x ~50 ops: %d ok, %d failed; client "
		    "connections accepted %lld; backend connections made %lld",
		    NPOOLED, atomic_load(&sh.ops_ok), atomic_load(&sh.ops_failed),
		    (long long)h_get_int(&st, "counters.clients_accepted", -1),
		    (long long)h_get_int(&st, "counters.backend_connects", -1));
	cr_assert_eq(atomic_load(&sh.clients_failed), 0, "%s", sh.first_error);
	cr_assert_eq(atomic_load(&sh.ops_failed), 0, "%d operations failed; first: %s",
		     atomic_load(&sh.ops_failed), sh.first_error);
	cr_assert_geq(atomic_load(&sh.ops_ok), NPOOLED * 50);
	cr_assert_leq(h_get_int(&st, "pools.0.idle", 0) + h_get_int(&st, "pools.0.active", 0),
		      POOL_SIZE);

	h_drop_db(check, sh.db);
	bson_destroy(&st);
	mongoc_client_destroy(check);
	mongoc_client_pool_destroy(sh.pool);
	pthread_barrier_destroy(&sh.start);
	pthread_mutex_destroy(&sh.mu);
	free(ws);
	proxy_stop(p);
}
