/*
 * test_admin_ctl.c — the operator's control commands (issue 24, item 2):
 * mongoplexPause / mongoplexResume around a database restart, the pause's
 * bound, mongoplexReconnect under load, mongoplexKill and mongoplexReload.
 *
 * The maintenance scenario runs on a FerretDB of the test's own (its SQLite
 * data survives a restart on the same port: scripts/backend.sh restart),
 * with LOAD_THREADS libmongoc clients looping acknowledged inserts (unique
 * ids) and reads of what they inserted: paused, FerretDB restarted, resumed,
 * no operation fails and every acknowledged insert is there exactly once;
 * the same restart without the pause fails operations (the test can fail).
 * Through a replica-set URI (ferretdb-rs) the proxy's monitor loses the
 * member while it is down; a request arriving then waits under the pause's
 * bound, not serverSelectionTimeoutMS. The other tests use the suite's
 * backend (MONGOPLEX_TEST_URI).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define LOAD_THREADS 50
#define RS_THREADS   10
#define WAIT_MS	     60000 /* hang guard of every wait below */

/* ------------------------------------------------------------ the load */

/* Rules: the workers only touch the atomics and their own struct; the main
 * thread reads the rest after joining them. */
struct load {
	char uri[300];
	char db[64], coll[64];
	atomic_bool stop;
	atomic_long ops, failures;
	atomic_llong max_stall_ms;
	pthread_mutex_t mu;
	char first_error[400];
};

struct worker {
	struct load *l;
	int tid;
	long acked;
	mongoc_client_t *c;
	pthread_t th;
};

static void note_failure(struct load *l, const char *what, const bson_error_t *err)
{
	atomic_fetch_add(&l->failures, 1);
	pthread_mutex_lock(&l->mu);
	if (l->first_error[0] == '\0')
		snprintf(l->first_error, sizeof(l->first_error), "%s: %s (code %u)", what,
			 err->message, err->code);
	pthread_mutex_unlock(&l->mu);
}

/* One insert of a new unique id, then a read of it. */
static void one_round(struct worker *w, mongoc_collection_t *col, long n)
{
	struct load *l = w->l;
	int64_t id = (int64_t)w->tid * 10000000 + n, t0 = h_now_ms(), stall;
	bson_t *doc = BCON_NEW("_id", BCON_INT64(id), "t", BCON_INT32(w->tid));
	bson_t *filter = BCON_NEW("_id", BCON_INT64(id));
	mongoc_cursor_t *cur;
	const bson_t *got;
	bson_error_t err;

	if (mongoc_collection_insert_one(col, doc, NULL, NULL, &err))
		w->acked++;
	else
		note_failure(l, "insert", &err);
	cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
	if (!mongoc_cursor_next(cur, &got) && mongoc_cursor_error(cur, &err))
		note_failure(l, "find", &err);
	mongoc_cursor_destroy(cur);
	bson_destroy(doc);
	bson_destroy(filter);
	atomic_fetch_add(&l->ops, 2);
	stall = h_now_ms() - t0;
	for (long long m = atomic_load(&l->max_stall_ms); stall > m;)
		if (atomic_compare_exchange_weak(&l->max_stall_ms, &m, stall))
			break;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	mongoc_collection_t *col = mongoc_client_get_collection(w->c, w->l->db, w->l->coll);

	for (long n = 0; !atomic_load(&w->l->stop); n++)
		one_round(w, col, n);
	mongoc_collection_destroy(col);
	return NULL;
}

static void load_start(struct load *l, struct worker *ws, int n, const char *uri)
{
	memset(l, 0, sizeof(*l));
	h_unique(l->db, sizeof(l->db), "it_ctl");
	snprintf(l->coll, sizeof(l->coll), "load");
	pthread_mutex_init(&l->mu, NULL);
	/* The driver's own retries off: a restart that fails an operation
	 * must show as a failure here, and "0 failed" under a pause means the
	 * proxy held everything, not that libmongoc retried once in time (an
	 * ASan run of the no-pause control saw every failure retried away). */
	snprintf(l->uri, sizeof(l->uri), "%s%sretryWrites=false&retryReads=false", uri,
		 strchr(uri, '?') != NULL ? "&" : (uri[strlen(uri) - 1] == '/' ? "?" : "/?"));
	for (int i = 0; i < n; i++) { /* clients made here: the harness asserts */
		ws[i] = (struct worker){.l = l, .tid = i};
		ws[i].c = h_client_uri(l->uri, "admin-ctl-load");
		cr_assert(ws[i].c != NULL);
	}
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&ws[i].th, NULL, worker_main, &ws[i]), 0);
}

/* Until `more` operations past now are done (asserts within WAIT_MS). */
static void load_progress(struct load *l, long more)
{
	long want = atomic_load(&l->ops) + more;
	int64_t end = h_now_ms() + WAIT_MS;

	while (atomic_load(&l->ops) < want && h_now_ms() < end)
		h_sleep_ms(20);
	cr_assert_geq(atomic_load(&l->ops), want, "the load made no progress: %s", l->first_error);
}

/* Stop and join; the total of acknowledged inserts. */
static long load_stop(struct load *l, struct worker *ws, int n)
{
	long acked = 0;

	atomic_store(&l->stop, true);
	for (int i = 0; i < n; i++) {
		pthread_join(ws[i].th, NULL);
		mongoc_client_destroy(ws[i].c);
		acked += ws[i].acked;
	}
	return acked;
}

/* ------------------------------------------------------------ commands */

/* An admin command (JSON) on c; *reply always initialised. */
static bool ctl(mongoc_client_t *c, const char *json, bson_t *reply)
{
	bson_error_t err;

	return h_cmd_json(c, "admin", json, reply, &err);
}

static char *js(const bson_t *b)
{
	static __thread char buf[2000];
	char *s = bson_as_relaxed_extended_json(b, NULL);

	snprintf(buf, sizeof(buf), "%s", s ? s : "?");
	bson_free(s);
	return buf;
}

/* mongoplexPause: 1, then its progress until "paused"; the last reply. */
static void pause_until_paused(mongoc_client_t *c, bson_t *reply)
{
	int64_t end = h_now_ms() + WAIT_MS;
	const char *state;

	cr_assert(ctl(c, "{\"mongoplexPause\": 1}", reply), "pause: %s", js(reply));
	cr_assert(h_get_bool(reply, "paused"), "%s", js(reply));
	for (;;) {
		state = h_get_str(reply, "state");
		cr_assert(state != NULL, "%s", js(reply));
		if (strcmp(state, "paused") == 0 || h_now_ms() > end)
			break;
		cr_assert_str_eq(state, "pausing", "%s", js(reply));
		bson_destroy(reply);
		h_sleep_ms(20);
		cr_assert(ctl(c, "{\"mongoplexPause\": 1}", reply), "pause: %s", js(reply));
	}
	cr_assert_str_eq(state, "paused", "never paused: %s", js(reply));
	cr_assert_eq(h_get_int(reply, "inFlight", -1), 0, "%s", js(reply));
}

static int64_t count_docs(const char *uri, const char *db, const char *coll)
{
	mongoc_client_t *c = h_client_uri(uri, "admin-ctl-count");
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t filter = BSON_INITIALIZER;
	bson_error_t err;
	int64_t n = mongoc_collection_count_documents(col, &filter, NULL, NULL, NULL, &err);

	cr_assert_geq(n, 0, "count: %s", err.message);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return n;
}

/* A stats path (dotted) read through c: during a pause a fresh client
 * would stall in its destroy (libmongoc's endSessions is forwarded, so held). */
static int64_t stat_c(mongoc_client_t *c, const char *path)
{
	bson_t st;
	int64_t v;

	h_stats(c, &st);
	v = h_get_int(&st, path, -1);
	bson_destroy(&st);
	return v;
}

/* Poll a stats path through c until >= want. */
static int64_t wait_stat(mongoc_client_t *c, const char *path, int64_t want)
{
	int64_t v = -1, end = h_now_ms() + WAIT_MS;

	while (h_now_ms() < end) {
		if ((v = stat_c(c, path)) >= want)
			return v;
		h_sleep_ms(20);
	}
	cr_assert_fail("%s stayed at %lld (want %lld)", path, (long long)v, (long long)want);
	return v;
}

/* ------------------------------------------------------------ maintenance */

/* Paused, FerretDB restarted on the same port and data, resumed: nothing
 * fails, nothing is lost or doubled; the longest stall is printed. */
Test(admin_ctl, maintenance_pause_restart_resume, .timeout = 600)
{
	static struct worker ws[LOAD_THREADS];
	struct h_ferret f;
	struct load l;
	struct proxy *p;
	mongoc_client_t *admin;
	bson_t r;
	char cfg[1200];
	int64_t t_pause, t_resume;
	long acked;

	cr_assert_geq(h_raise_nofile(1024), 256);
	h_ferret_start(&f, "ferretdb", NULL, NULL);
	snprintf(cfg, sizeof(cfg), "backend_uri = %s\npool_size = 8\n", f.uri);
	p = proxy_start_admin(cfg);
	admin = h_proxy_admin_client(p, "admin-ctl-admin");
	load_start(&l, ws, LOAD_THREADS, p->uri);
	load_progress(&l, 500);

	t_pause = h_now_ms();
	pause_until_paused(admin, &r);
	bson_destroy(&r);
	cr_assert(log_contains(p, "paused: no backend connection open") ||
		      log_wait(p, "paused: no backend connection open", WAIT_MS),
		  "no completion line in the log");
	h_ferret_restart(&f);
	cr_assert(ctl(admin, "{\"mongoplexResume\": 1}", &r), "resume: %s", js(&r));
	t_resume = h_now_ms();
	cr_expect_str_eq(h_get_str(&r, "state"), "running", "%s", js(&r));
	cr_log_info("resume: %s", js(&r));
	bson_destroy(&r);
	load_progress(&l, 500);
	acked = load_stop(&l, ws, LOAD_THREADS);

	cr_assert_eq(atomic_load(&l.failures), 0, "%ld failed operations, first: %s",
		     atomic_load(&l.failures), l.first_error);
	cr_assert_eq(count_docs(f.uri, l.db, l.coll), acked,
		     "acknowledged inserts %ld, documents on FerretDB differ", acked);
	fprintf(stderr,
		"admin_ctl maintenance (NOISY, shared machine): %d clients, %ld ops, pause held "
		"%lld ms (pause to resume, FerretDB restart included), longest stall of one "
		"insert+find %lld ms, 0 failed, %ld acknowledged inserts all present once\n",
		LOAD_THREADS, atomic_load(&l.ops), (long long)(t_resume - t_pause),
		(long long)atomic_load(&l.max_stall_ms), acked);
	mongoc_client_destroy(admin);
	proxy_stop(p);
	h_ferret_stop(&f);
}

/* The same restart under the same load without a pause fails operations:
 * what the pause is for (and proof that the test above can fail). */
Test(admin_ctl, restart_without_pause_fails_operations, .timeout = 600)
{
	static struct worker ws[LOAD_THREADS];
	struct h_ferret f;
	struct load l;
	struct proxy *p;
	char cfg[1200];
	long acked;

	cr_assert_geq(h_raise_nofile(1024), 256);
	h_ferret_start(&f, "ferretdb", NULL, NULL);
	snprintf(cfg, sizeof(cfg), "backend_uri = %s\npool_size = 8\n", f.uri);
	p = proxy_start_admin(cfg);
	load_start(&l, ws, LOAD_THREADS, p->uri);
	load_progress(&l, 500);
	h_ferret_restart(&f);
	load_progress(&l, 500);
	acked = load_stop(&l, ws, LOAD_THREADS);
	cr_assert_gt(atomic_load(&l.failures), 0,
		     "a restart under load without a pause failed "
		     "nothing: the maintenance test proves nothing");
	cr_expect_geq(count_docs(f.uri, l.db, l.coll), acked, "an acknowledged insert was lost");
	cr_log_info("without pause: %ld failed operations, first: %s", atomic_load(&l.failures),
		    l.first_error);
	proxy_stop(p);
	h_ferret_stop(&f);
}

/* A held command on a client of its own (a thread: it blocks while held). */
struct held {
	const char *uri, *db;
	bool insert;
	bool ok;
	bson_t reply;
	pthread_t th;
};

static void *held_main(void *arg)
{
	struct held *h = arg;
	mongoc_client_t *c = h_client_uri(h->uri, "admin-ctl-held");
	char cmd[300];
	bson_error_t err;

	if (h->insert)
		snprintf(cmd, sizeof(cmd), "{\"insert\": \"b\", \"documents\": [{\"_id\": 1}]}");
	else
		snprintf(cmd, sizeof(cmd), "{\"find\": \"b\", \"filter\": {}}");
	h->ok = c != NULL && h_cmd_json(c, h->db, cmd, &h->reply, &err);
	mongoc_client_destroy(c);
	return NULL;
}

/* Until the proxy's monitor no longer sees pools.0 as the primary. */
static void wait_member_lost(mongoc_client_t *admin)
{
	int64_t end = h_now_ms() + WAIT_MS;
	bson_t st;
	bool lost = false;

	while (!lost && h_now_ms() < end) {
		const char *t;

		h_stats(admin, &st);
		t = h_get_str(&st, "pools.0.memberType");
		lost = t != NULL && strcmp(t, "RSPrimary") != 0;
		bson_destroy(&st);
		if (!lost)
			h_sleep_ms(50);
	}
	cr_assert(lost, "the monitor never lost the stopped member");
}

/* The same maintenance through a replica-set URI (FerretDB as a one-member
 * set "rs0"): the proxy's monitor loses the member while it is down, and a
 * request that arrives then waits for a member (WAITQ_SELECT) under the
 * pause's bound, not serverSelectionTimeoutMS (1.5 s here, shorter than the
 * outage): nothing fails. */
Test(admin_ctl, maintenance_through_a_replica_set_uri, .timeout = 600)
{
	static struct worker ws[RS_THREADS];
	struct h_ferret f;
	struct load l;
	struct proxy *p;
	mongoc_client_t *admin;
	struct held late = {0};
	bson_t r;
	char cfg[1200];
	long acked;

	h_ferret_start(&f, "ferretdb-rs", NULL, NULL);
	snprintf(cfg, sizeof(cfg),
		 "backend_uri = %s&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=1500\n"
		 "pool_size = 4\n",
		 f.uri);
	p = proxy_start_admin(cfg);
	admin = h_proxy_admin_client(p, "admin-ctl-admin");
	load_start(&l, ws, RS_THREADS, p->uri);
	load_progress(&l, 200);
	pause_until_paused(admin, &r);
	bson_destroy(&r);
	h_ferret_halt(&f);
	wait_member_lost(admin);
	late.uri = p->uri;
	late.db = l.db;
	cr_assert_eq(pthread_create(&late.th, NULL, held_main, &late), 0);
	h_sleep_ms(2500); /* past serverSelectionTimeoutMS: the bound that must not apply */
	h_ferret_restart(&f);
	cr_assert(ctl(admin, "{\"mongoplexResume\": 1}", &r), "resume: %s", js(&r));
	bson_destroy(&r);
	pthread_join(late.th, NULL);
	cr_expect(late.ok, "a request that arrived during the outage failed: %s", js(&late.reply));
	bson_destroy(&late.reply);
	load_progress(&l, 200);
	acked = load_stop(&l, ws, RS_THREADS);
	cr_assert_eq(atomic_load(&l.failures), 0, "%ld failed operations, first: %s",
		     atomic_load(&l.failures), l.first_error);
	cr_assert_eq(count_docs(f.uri, l.db, l.coll), acked, "acknowledged %ld", acked);
	mongoc_client_destroy(admin);
	proxy_stop(p);
	h_ferret_stop(&f);
}

/* ------------------------------------------------------------ the bound */

/* Held past pause_timeout_ms: 262 with the retry labels, the write never
 * sent; queue_timeout_ms (shorter) does not fire during the pause; after
 * resume the same write succeeds; the janitor does not refill min_pool_size
 * meanwhile. A request held longer than
 * queue_timeout_ms but within the bound runs at resume. */
Test(admin_ctl, pause_outlasting_its_bound_gives_retryable_error, .timeout = 180)
{
	struct proxy *p = proxy_start_admin(
	    "pause_timeout_ms = 1500\nqueue_timeout_ms = 100\nmin_pool_size = 2\n");
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	struct held a = {.uri = p->uri}, b = {.uri = p->uri};
	char db[64];
	bson_t r;

	h_unique(db, sizeof(db), "it_ctl_bound");
	a.db = b.db = db;
	pause_until_paused(admin, &r);
	bson_destroy(&r);
	a.insert = true;
	cr_assert_eq(pthread_create(&a.th, NULL, held_main, &a), 0);
	cr_assert_eq(pthread_create(&b.th, NULL, held_main, &b), 0);
	pthread_join(a.th, NULL);
	pthread_join(b.th, NULL);
	cr_assert(!a.ok && !b.ok, "held requests succeeded during a pause");
	for (struct held *h = &a; h != NULL; h = h == &a ? &b : NULL) {
		cr_expect_eq(h_get_int(&h->reply, "code", 0), 262, "%s", js(&h->reply));
		cr_expect_str_eq(h_get_str(&h->reply, "codeName"), "ExceededTimeLimit");
		cr_expect(strstr(h_get_str(&h->reply, "errmsg"), "paused") != NULL);
		cr_expect(h_has_label(&h->reply, "RetryableError"), "%s", js(&h->reply));
		cr_expect(h_has_label(&h->reply, "RetryableWriteError"), "%s", js(&h->reply));
		bson_destroy(&h->reply);
	}
	/* 2, and (FerretDB: sessions) the endSessions of their clients' destroy */
	cr_expect_geq(stat_c(admin, "counters.refused_paused"), 2);
	cr_expect_eq(stat_c(admin, "counters.refused_queue_timeout"), 0);
	cr_expect_eq(count_docs(h_direct_uri(), db, "b"), 0, "the refused insert was sent");
	/* 1.5 s of janitor ticks: min_pool_size = 2 was not refilled while paused */
	cr_expect_eq(stat_c(admin, "pools.0.idle") + stat_c(admin, "pools.0.connecting") +
			 stat_c(admin, "pools.0.active"),
		     0, "the janitor refilled a paused pool");

	/* Within the bound, past queue_timeout_ms: runs at resume. */
	cr_assert_eq(pthread_create(&a.th, NULL, held_main, &a), 0);
	wait_stat(admin, "pools.0.waiting", 1);
	h_sleep_ms(300); /* longer than queue_timeout_ms, well within the bound */
	cr_assert(ctl(admin, "{\"mongoplexResume\": 1}", &r), "resume: %s", js(&r));
	bson_destroy(&r);
	pthread_join(a.th, NULL);
	cr_expect(a.ok, "held insert failed after resume: %s", js(&a.reply));
	bson_destroy(&a.reply);
	cr_expect_eq(count_docs(h_direct_uri(), db, "b"), 1);
	cr_expect_eq(stat_c(admin, "counters.refused_queue_timeout"), 0);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* One member by name: its pool is paused and named in the reply; a request
 * waits; resume by name runs it; the whole proxy was never paused. */
Test(admin_ctl, pause_one_member_by_name, .timeout = 120)
{
	struct proxy *p = proxy_start_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	struct held a = {.uri = p->uri};
	char db[64], cmd[400], host[300];
	bson_t r, st;

	h_unique(db, sizeof(db), "it_ctl_member");
	a.db = db;
	a.insert = true;
	h_stats(admin, &st);
	cr_assert(h_get_str(&st, "pools.0.host") != NULL);
	snprintf(host, sizeof(host), "%s", h_get_str(&st, "pools.0.host"));
	bson_destroy(&st);
	snprintf(cmd, sizeof(cmd), "{\"mongoplexPause\": \"%s\"}", host);
	cr_assert(ctl(admin, cmd, &r), "pause %s: %s", host, js(&r));
	cr_expect_str_eq(h_get_str(&r, "pools.0"), host, "%s", js(&r));
	cr_expect_eq(h_get_int(&r, "pools.1", -7), -7, "more than the member: %s", js(&r));
	bson_destroy(&r);
	cr_assert(!ctl(admin, "{\"mongoplexResume\": \"nosuch:1\"}", &r));
	bson_destroy(&r);
	cr_assert_eq(pthread_create(&a.th, NULL, held_main, &a), 0);
	wait_stat(admin, "pools.0.waiting", 1);
	cr_assert(ctl(admin, cmd, &r), "second pause: %s", js(&r));
	cr_expect_str_eq(h_get_str(&r, "state"), "paused", "%s", js(&r));
	cr_expect_eq(h_get_int(&r, "waiting", -1), 1, "%s", js(&r));
	bson_destroy(&r);
	snprintf(cmd, sizeof(cmd), "{\"mongoplexResume\": \"%s\"}", host);
	cr_assert(ctl(admin, cmd, &r), "resume %s: %s", host, js(&r));
	bson_destroy(&r);
	pthread_join(a.th, NULL);
	cr_expect(a.ok, "held insert failed after resume: %s", js(&a.reply));
	bson_destroy(&a.reply);
	cr_expect_eq(count_docs(h_direct_uri(), db, "b"), 1);
	cr_expect(!ctl(admin, "{\"mongoplexResume\": 1}", &r), "resumed twice: %s", js(&r));
	bson_destroy(&r);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* ------------------------------------------------------------ reconnect */

/* Under load every connection is replaced (connects counted) and nothing fails. */
Test(admin_ctl, reconnect_under_load_replaces_connections, .timeout = 300)
{
	static struct worker ws[20];
	struct proxy *p = proxy_start_admin("pool_size = 4\n");
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	struct load l;
	bson_t r, st;
	int64_t before, replaced;

	load_start(&l, ws, 20, p->uri);
	load_progress(&l, 400);
	for (int round = 0; round < 3; round++) {
		proxy_stats(p, &st);
		before = h_get_int(&st, "pools.0.connectsOk", -1);
		bson_destroy(&st);
		cr_assert(ctl(admin, "{\"mongoplexReconnect\": 1}", &r), "reconnect: %s", js(&r));
		replaced = h_get_int(&r, "closedIdle", 0) + h_get_int(&r, "replacedWhenIdle", 0);
		cr_log_info("reconnect: %s", js(&r));
		bson_destroy(&r);
		cr_assert_gt(replaced, 0, "no connection to replace under load");
		wait_stat(admin, "pools.0.connectsOk", before + replaced);
		load_progress(&l, 200);
	}
	load_stop(&l, ws, 20);
	cr_assert_eq(atomic_load(&l.failures), 0, "%ld failed, first: %s", atomic_load(&l.failures),
		     l.first_error);
	cr_expect(log_contains(p, "replaced (reconnect asked by an admin)") ||
		  log_contains(p, "closing: reconnect asked by an admin"));
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* ------------------------------------------------------------ kill */

static int64_t raw_cursor_find(int fd, const char *db, const char *coll)
{
	bson_t *cmd =
	    BCON_NEW("find", BCON_UTF8(coll), "batchSize", BCON_INT32(2), "$db", BCON_UTF8(db));
	bson_t reply;
	int64_t id;

	cr_assert(raw_command(fd, 7, cmd, &reply, 10000), "find");
	id = h_get_int(&reply, "cursor.id", 0);
	cr_assert_neq(id, 0, "find left no cursor open: %s", js(&reply));
	bson_destroy(&reply);
	bson_destroy(cmd);
	return id;
}

static int64_t raw_getmore_code(int fd, const char *db, const char *coll, int64_t id)
{
	bson_t *cmd = BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8(coll),
			       "batchSize", BCON_INT32(1), "$db", BCON_UTF8(db));
	bson_t reply;
	int64_t code;

	cr_assert(raw_command(fd, 8, cmd, &reply, 10000), "getMore");
	code = h_get_int(&reply, "ok", 0) == 1 ? 0 : h_get_int(&reply, "code", -1);
	bson_destroy(&reply);
	bson_destroy(cmd);
	return code;
}

/* The killed client's connection closes, its cursor dies on the backend,
 * another client continues; an unknown id is an error. */
Test(admin_ctl, kill_closes_client_and_kills_its_cursor, .timeout = 180)
{
	struct proxy *p = proxy_start_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	mongoc_collection_t *col;
	char db[64], cmd[200];
	bson_t r, *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_error_t err;
	int a, other, direct;
	int64_t a_id, cursor;

	h_unique(db, sizeof(db), "it_ctl_kill");
	col = mongoc_client_get_collection(admin, db, "c");
	for (int i = 0; i < 20; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i));

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	a = raw_connect(p);
	other = raw_connect(p);
	cr_assert(raw_command(a, 1, hello, &r, 10000), "hello");
	a_id = h_get_int(&r, "connectionId", -1);
	bson_destroy(&r);
	cr_assert_gt(a_id, 0);
	cursor = raw_cursor_find(a, db, "c");
	direct = raw_connect_backend();
	cr_assert_eq(raw_getmore_code(direct, db, "c", cursor), 0,
		     "cursor not open on the backend");

	snprintf(cmd, sizeof(cmd), "{\"mongoplexKill\": %lld}", (long long)a_id);
	cr_assert(ctl(admin, cmd, &r), "kill: %s", js(&r));
	cr_expect_eq(h_get_int(&r, "killed", -1), a_id, "%s", js(&r));
	bson_destroy(&r);
	cr_assert(raw_wait_closed(a, 10000), "the killed client's connection stayed open");
	wait_stat(admin, "counters.cursors_killed_on_close", 1);
	cr_expect_eq(raw_getmore_code(direct, db, "c", cursor), 43,
		     "the killed client's cursor is still open on the backend");
	cr_expect(raw_ping_ok(other, 10000), "another client stopped working");

	snprintf(cmd, sizeof(cmd), "{\"mongoplexKill\": %lld}", (long long)a_id);
	cr_expect(!ctl(admin, cmd, &r), "killing a gone client succeeded");
	cr_expect(strstr(h_get_str(&r, "errmsg") ? h_get_str(&r, "errmsg") : "",
			 "no client with id") != NULL,
		  "%s", js(&r));
	bson_destroy(&r);
	close(a);
	close(other);
	close(direct);
	bson_destroy(hello);
	h_drop_db(admin, db);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* ------------------------------------------------------------ reload and arguments */

static void append_cfg(struct proxy *p, const char *lines)
{
	FILE *f = fopen(p->cfg_path, "a");

	cr_assert(f != NULL);
	fputs(lines, f);
	fclose(f);
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, ch;

	cr_assert(f != NULL);
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* A bad file: the rejection with its file and line, nothing applied; a good
 * one: applied, and the reply says so. */
Test(admin_ctl, reload_answers_rejection_with_line_or_applies, .timeout = 120)
{
	struct proxy *p = proxy_start_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	char *good, want[400];
	const char *msg;
	bson_t r, st;
	size_t len;
	int bad_line;
	FILE *f;

	f = fopen(p->cfg_path, "r");
	cr_assert(f != NULL);
	good = calloc(1, 65536);
	len = fread(good, 1, 65535, f);
	fclose(f);
	cr_assert_gt(len, 0);
	append_cfg(p, "pool_size = banana\n");
	bad_line = count_lines(p->cfg_path);
	cr_assert(!ctl(admin, "{\"mongoplexReload\": 1}", &r), "bad reload accepted: %s", js(&r));
	msg = h_get_str(&r, "errmsg");
	snprintf(want, sizeof(want), "%s:%d", p->cfg_path, bad_line);
	cr_expect(msg != NULL && strstr(msg, want) != NULL && strstr(msg, "rejected") != NULL,
		  "want %s in %s", want, js(&r));
	bson_destroy(&r);
	cr_expect_eq(proxy_counter(p, "reload_failures"), 1);

	f = fopen(p->cfg_path, "w");
	cr_assert(f != NULL);
	fwrite(good, 1, len, f);
	fputs("pool_size = 7\n", f);
	fclose(f);
	cr_assert(ctl(admin, "{\"mongoplexReload\": 1}", &r), "good reload: %s", js(&r));
	cr_expect(h_get_bool(&r, "reloaded"), "%s", js(&r));
	cr_expect(strstr(h_get_str(&r, "result"), "pool_size=7") != NULL, "%s", js(&r));
	bson_destroy(&r);
	proxy_stats(p, &st);
	cr_expect_eq(h_get_int(&st, "pools.0.poolSize", -1), 7, "%s", js(&st));
	bson_destroy(&st);
	free(good);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* Bad arguments and states are MongoDB errors, the proxy keeps serving. */
Test(admin_ctl, bad_arguments_are_errors, .timeout = 120)
{
	static const char *const bad[] = {"{\"mongoplexPause\": \"nosuchhost:1\"}",
					  "{\"mongoplexPause\": 2}",
					  "{\"mongoplexResume\": 1}",
					  "{\"mongoplexReconnect\": \"x\"}",
					  "{\"mongoplexKill\": \"C-1\"}",
					  "{\"mongoplexKill\": 999999}",
					  "{\"mongoplexKill\": -1}",
					  NULL};
	struct proxy *p = proxy_start_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "admin-ctl-admin");
	bson_t r;

	for (int i = 0; bad[i] != NULL; i++) {
		cr_expect(!ctl(admin, bad[i], &r), "%s accepted: %s", bad[i], js(&r));
		cr_expect_eq(h_get_int(&r, "code", 0), 2, "%s: %s", bad[i], js(&r));
		bson_destroy(&r);
	}
	cr_expect(ctl(admin, "{\"ping\": 1}", &r));
	bson_destroy(&r);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}
