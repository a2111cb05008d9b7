/*
 * test_workers.c — workers = 2 (issue 25 item 1): connections spread over
 * both workers and all work; the summed counters, gauges and histograms
 * equal the per-worker figures; a SIGKILLed worker is restarted while the other serves; SIGHUP
 * reaches every worker; SIGTERM drains them all; max_client_conn is
 * divided between the workers; a worker restarted after a reload runs the
 * reloaded settings; a killed master takes its workers with it. Waits are hang guards, never
 * thresholds.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

#define NCLIENTS 16
#define WAIT_MS	 30000 /* hang guard */

/* workers = 2, started by `start` (proxy_start, or proxy_start_admin: the
 * admin console on worker 0's unix socket), once both listen. */
static struct proxy *start_with(struct proxy *(*start)(const char *), const char *extra)
{
	char cfg[512];
	struct proxy *p;

	snprintf(cfg, sizeof(cfg), "workers = 2\n%s", extra ? extra : "");
	p = start(cfg);
	cr_assert(log_wait(p, "all 2 workers listening", WAIT_MS), "workers not listening");
	return p;
}

static struct proxy *start_workers(const char *extra)
{
	return start_with(proxy_start, extra);
}

/* A ping, then which worker answered this client's connection. */
static int client_worker(mongoc_client_t *c, bson_t *st)
{
	h_stats(c, st);
	return (int)h_get_int(st, "worker", -1);
}

/* mongoplexStats through c into *st (initialized here) until `until` holds
 * or WAIT_MS (a hang guard): the last document either way, for the
 * caller's assertions. */
static void stats_until(mongoc_client_t *c, bson_t *st, bool (*until)(const bson_t *st))
{
	int64_t deadline = h_now_ms() + WAIT_MS;

	for (;;) {
		h_stats(c, st);
		if (until(st) || h_now_ms() >= deadline)
			return;
		bson_destroy(st);
		h_sleep_ms(20);
	}
}

static bool all_clients_counted(const bson_t *st)
{
	return h_get_int(st, "gauges.clients", -1) >= NCLIENTS;
}

static bool worker1_back(const bson_t *st)
{
	return h_get_int(st, "workers.1.restarts", 0) == 1 && h_get_bool(st, "workers.1.listening");
}

static bool both_reloaded(const bson_t *st)
{
	return h_get_int(st, "workers.0.counters.reloads", -1) == 1 &&
	       h_get_int(st, "workers.1.counters.reloads", -1) == 1;
}

static bool worker1_reloaded(const bson_t *st)
{
	return h_get_int(st, "workers.1.counters.reloads", -1) == 1;
}

/* One insert and a read of it through c; true when both worked. */
static bool crud(mongoc_client_t *c, const char *db, int i)
{
	char json[128];
	bson_t reply;
	bson_error_t err;
	bool ok;

	snprintf(json, sizeof(json), "{\"insert\": \"w\", \"documents\": [{\"_id\": %d}]}", i);
	ok = h_cmd_json(c, db, json, &reply, &err) && h_get_int(&reply, "n", -1) == 1;
	bson_destroy(&reply);
	if (!ok)
		return false;
	snprintf(json, sizeof(json), "{\"find\": \"w\", \"filter\": {\"_id\": %d}}", i);
	ok = h_cmd_json(c, db, json, &reply, &err) &&
	     h_get_int(&reply, "cursor.firstBatch.0._id", -1) == i;
	bson_destroy(&reply);
	return ok;
}

/* pid, listening and restarts of each worker, for a failure message. */
static const char *js_workers(const bson_t *st)
{
	static char buf[256];

	snprintf(
	    buf, sizeof(buf),
	    "0: pid %lld listening %d restarts %lld; 1: pid %lld listening %d restarts %lld",
	    (long long)h_get_int(st, "workers.0.pid", -1), h_get_bool(st, "workers.0.listening"),
	    (long long)h_get_int(st, "workers.0.restarts", -1),
	    (long long)h_get_int(st, "workers.1.pid", -1), h_get_bool(st, "workers.1.listening"),
	    (long long)h_get_int(st, "workers.1.restarts", -1));
	return buf;
}

Test(workers, connections_spread_and_all_work, .timeout = 120)
{
	/* every find by _id goes through a batch (a 1 ms window), so that both
	 * workers observe the batch_ids histogram */
	struct proxy *p = start_workers("batch_max_wait_us = 1000\n");
	mongoc_client_t *cs[NCLIENTS];
	int seen[2] = {0, 0}, w;
	char db[64];
	bson_t st;

	h_unique(db, sizeof(db), "it_wk");
	for (int i = 0; i < NCLIENTS; i++) {
		cs[i] = h_proxy_client(p, "itest-workers");
		cr_assert(crud(cs[i], db, i), "client %d: CRUD failed", i);
		w = client_worker(cs[i], &st);
		cr_assert(w == 0 || w == 1, "client %d: worker %d", i, w);
		seen[w]++;
		bson_destroy(&st);
	}
	if (seen[0] == 0 || seen[1] == 0) { /* say why: the workers' state and the log */
		char *tail = proxy_log_tail(p, 6000);

		h_stats(cs[0], &st);
		cr_assert_fail("connections on workers: %d and %d; workers: %s; log:\n%s", seen[0],
			       seen[1], js_workers(&st), tail);
	}
	/* The totals are the sum of the workers' slots, in one document. */
	h_stats(cs[0], &st);
	cr_assert_eq(h_get_int(&st, "workers.0.counters.requests_total", -1) +
			 h_get_int(&st, "workers.1.counters.requests_total", -1),
		     h_counter(&st, "requests_total"));
	cr_assert_eq(h_get_int(&st, "workers.0.counters.clients_accepted", -1) +
			 h_get_int(&st, "workers.1.counters.clients_accepted", -1),
		     h_counter(&st, "clients_accepted"));
	cr_assert_geq(h_counter(&st, "clients_accepted"), NCLIENTS);
	bson_destroy(&st);
	/* Gauges and histograms are the whole proxy's too: the 16 open clients
	 * are on two workers, neither holds them all, the total counts them
	 * (another worker's figures are as of its last 100 ms tick). */
	stats_until(cs[0], &st, all_clients_counted);
	cr_assert_geq(h_get_int(&st, "gauges.clients", -1), NCLIENTS, "gauges.clients");
	cr_assert_eq(h_get_int(&st, "workers.0.gauges.clients", -1) +
			 h_get_int(&st, "workers.1.gauges.clients", -1),
		     h_get_int(&st, "gauges.clients", -1));
	cr_assert_lt(h_get_int(&st, "workers.0.gauges.clients", -1), NCLIENTS);
	cr_assert_lt(h_get_int(&st, "workers.1.gauges.clients", -1), NCLIENTS);
	/* batch_ids: one observation per merged query sent (each find by _id) */
	for (int k = 0; k < 2; k++) {
		char a[64], b[64];

		snprintf(a, sizeof(a), "workers.%d.histogramCounts.batch_ids", k);
		snprintf(b, sizeof(b), "workers.%d.counters.batches_sent", k);
		cr_assert_gt(h_get_int(&st, a, -1), 0, "%s", a);
		cr_assert_eq(h_get_int(&st, a, -1), h_get_int(&st, b, -2), "%s", a);
	}
	cr_assert_eq(h_get_int(&st, "histograms.batch_ids.count", -1),
		     h_counter(&st, "batches_sent"));
	bson_destroy(&st);
	for (int i = 0; i < NCLIENTS; i++)
		mongoc_client_destroy(cs[i]);
	proxy_stop(p);
}

Test(workers, killed_worker_is_restarted, .timeout = 120)
{
	struct proxy *p = start_workers(NULL);
	mongoc_client_t *c = h_proxy_client(p, "itest-workers-kill");
	char db[64];
	bson_t st;
	pid_t victim;
	int fails = 0;

	h_unique(db, sizeof(db), "it_wk_kill");
	h_stats(c, &st);
	victim = (pid_t)h_get_int(&st, "workers.1.pid", -1);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	cr_assert_gt(victim, 0);
	cr_assert_eq(kill(victim, SIGKILL), 0);
	cr_assert(log_wait(p, "killed by signal 9", WAIT_MS), "the death was not logged");
	/* Meanwhile, and after its restart, every new client works. */
	for (int i = 0; i < NCLIENTS; i++) {
		c = h_proxy_client(p, "itest-workers-kill");
		fails += !crud(c, db, i);
		mongoc_client_destroy(c);
	}
	cr_assert_eq(fails, 0);
	c = h_proxy_client(p, "itest-workers-kill");
	stats_until(c, &st, worker1_back);
	cr_assert_eq(h_get_int(&st, "workers.1.restarts", 0), 1);
	cr_assert_neq(h_get_int(&st, "workers.1.pid", -1), victim);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	proxy_assert_alive(p, "after a worker was killed");
	proxy_stop(p);
}

Test(workers, sighup_reaches_every_worker, .timeout = 120)
{
	struct proxy *p = start_workers(NULL);
	mongoc_client_t *c = h_proxy_client(p, "itest-workers-hup");
	bson_t st;
	int64_t r0, r1;

	cr_assert_eq(kill(p->pid, SIGHUP), 0);
	stats_until(c, &st, both_reloaded);
	r0 = h_get_int(&st, "workers.0.counters.reloads", -1);
	r1 = h_get_int(&st, "workers.1.counters.reloads", -1);
	cr_assert(r0 == 1 && r1 == 1, "reloads per worker: %lld, %lld", (long long)r0,
		  (long long)r1);
	cr_assert_eq(h_counter(&st, "reloads"), 2);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

Test(workers, sigterm_drains_every_worker, .timeout = 120)
{
	struct proxy *p = start_workers("shutdown_quiesce_ms = 0\n");

	cr_assert_eq(kill(p->pid, SIGTERM), 0);
	cr_assert(log_wait(p, "every worker has exited; master exiting", WAIT_MS));
	cr_assert(log_contains(p, "workers: worker 0 (pid"));
	for (int64_t deadline = h_now_ms() + WAIT_MS; h_now_ms() < deadline && proxy_alive(p);)
		h_sleep_ms(10);
	cr_assert(!proxy_alive(p));
	cr_assert(WIFEXITED(p->wait_status) && WEXITSTATUS(p->wait_status) == 0);
	proxy_stop(p);
}

/* max_client_conn = 4 over 2 workers: 2 each. Of 5 connections held open,
 * the kernel puts at least 3 on one worker, so at least one is refused,
 * and never more than 4 are served. */
Test(workers, max_client_conn_is_divided, .timeout = 120)
{
	struct proxy *p = start_workers("max_client_conn = 4\n");
	mongoc_client_t *cs[5];
	char db[64];
	int ok = 0;
	bson_t st;

	h_unique(db, sizeof(db), "it_wk_lim");
	for (int i = 0; i < 5; i++) {
		cs[i] = h_proxy_client(p, "itest-workers-limit");
		ok += crud(cs[i], db, i);
	}
	cr_assert(ok >= 1 && ok <= 4, "%d of 5 connections served", ok);
	for (int i = 0; i < 5; i++)
		mongoc_client_destroy(cs[i]);
	cs[0] = h_proxy_client(p, "itest-workers-limit");
	h_stats(cs[0], &st);
	cr_assert_geq(h_counter(&st, "clients_refused"), 5 - ok);
	bson_destroy(&st);
	mongoc_client_destroy(cs[0]);
	proxy_stop(p);
}

/* A getMore for a cursor opened on another connection: refused as today
 * with one worker (cursors belong to their connection), also when that
 * connection is on the other worker; the owner's own getMore still works. */
Test(workers, getmore_from_another_worker, .timeout = 120)
{
	struct proxy *p = start_workers(NULL);
	mongoc_client_t *a = h_proxy_client(p, "itest-workers-cur"), *b = NULL;
	char db[64], json[200];
	bson_t reply, st;
	bson_error_t err;
	int64_t id;
	int wa;
	bool ok;

	h_unique(db, sizeof(db), "it_wk_cur");
	for (int i = 0; i < 6; i++)
		cr_assert(crud(a, db, i));
	cr_assert(h_cmd_json(a, db, "{\"find\": \"w\", \"batchSize\": 2}", &reply, &err), "%s",
		  err.message);
	id = h_get_int(&reply, "cursor.id", 0);
	bson_destroy(&reply);
	cr_assert_neq(id, 0);
	wa = client_worker(a, &st);
	bson_destroy(&st);
	for (int i = 0; i < 64 && b == NULL; i++) {
		b = h_proxy_client(p, "itest-workers-cur");
		if (client_worker(b, &st) == wa) {
			mongoc_client_destroy(b);
			b = NULL;
		}
		bson_destroy(&st);
	}
	cr_assert_not_null(b, "no connection landed on the other worker in 64 tries");
	snprintf(
	    json, sizeof(json),
	    "{\"getMore\": {\"$numberLong\": \"%lld\"}, \"collection\": \"w\", \"batchSize\": 2}",
	    (long long)id);
	ok = h_cmd_json(b, db, json, &reply, &err);
	cr_assert_not(ok, "another worker's client read the cursor");
	cr_log_info("foreign getMore: %s", err.message);
	bson_destroy(&reply);
	ok = h_cmd_json(a, db, json, &reply, &err);
	cr_assert(ok, "the owner's getMore failed: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "cursor.nextBatch.1._id", -1), 3);
	bson_destroy(&reply);
	mongoc_client_destroy(a);
	mongoc_client_destroy(b);
	proxy_stop(p);
}

/* A client that landed on worker w (new connections until one does). */
static mongoc_client_t *client_on(struct proxy *p, int w)
{
	bson_t st;

	for (int i = 0; i < 64; i++) {
		mongoc_client_t *c = h_proxy_client(p, "itest-workers-on");
		int got = client_worker(c, &st);

		bson_destroy(&st);
		if (got == w)
			return c;
		mongoc_client_destroy(c);
	}
	cr_assert_fail("no connection landed on worker %d in 64 tries", w);
	return NULL;
}

/* pool_size 8 (4 per worker), reloaded to 20 (10 per worker); worker 1
 * killed after the reload comes back with the reloaded setting, not with
 * the file the master started from. */
Test(workers, restarted_worker_runs_the_reloaded_config, .timeout = 120)
{
	struct proxy *p = start_workers("pool_size = 8\n");
	mongoc_client_t *c = client_on(p, 1);
	bson_t st;
	pid_t victim;
	FILE *f;

	h_stats(c, &st);
	cr_assert_eq(h_get_int(&st, "pools.0.limit", -1), 4, "pool_size 8 over 2 workers");
	victim = (pid_t)h_get_int(&st, "workers.1.pid", -1);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	f = fopen(p->cfg_path, "a");
	cr_assert_not_null(f);
	fputs("pool_size = 20\n", f);
	fclose(f);
	cr_assert_eq(kill(p->pid, SIGHUP), 0);
	cr_assert(log_wait(p, "configuration valid, reloading every worker", WAIT_MS));
	c = client_on(p, 1);
	stats_until(c, &st, worker1_reloaded);
	cr_assert_eq(h_get_int(&st, "pools.0.limit", -1), 10, "worker 1 after the reload");
	bson_destroy(&st);
	mongoc_client_destroy(c);
	cr_assert_gt(victim, 0);
	cr_assert_eq(kill(victim, SIGKILL), 0);
	cr_assert(log_wait(p, "killed by signal 9", WAIT_MS), "the death was not logged");
	c = h_proxy_client(p, "itest-workers-on");
	stats_until(c, &st, worker1_back);
	cr_assert(h_get_bool(&st, "workers.1.listening"), "worker 1 not back");
	bson_destroy(&st);
	mongoc_client_destroy(c);
	c = client_on(p, 1);
	h_stats(c, &st);
	cr_assert_eq(h_get_int(&st, "pools.0.limit", -1), 10,
		     "the restarted worker runs the reloaded pool_size");
	bson_destroy(&st);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

/* A file whose settings load but whose backend password file cannot be
 * read: the master checks what a worker would (reload_prepare), so no
 * worker sees the SIGHUP and every worker keeps serving the old config. */
Test(workers, reload_rejected_by_the_master_reaches_no_worker, .timeout = 120)
{
	struct proxy *p = start_workers(NULL);
	mongoc_client_t *c;
	char db[64];
	bson_t st;
	FILE *f;

	f = fopen(p->cfg_path, "a");
	cr_assert_not_null(f);
	fputs("backend_password_file = /nonexistent/mongoplex-itest-password\n", f);
	fclose(f);
	cr_assert_eq(kill(p->pid, SIGHUP), 0);
	cr_assert(log_wait(p, "reload rejected, not sent to the workers", WAIT_MS),
		  "the master did not reject the reload");
	h_unique(db, sizeof(db), "it_wk_rej");
	c = h_proxy_client(p, "itest-workers-rej");
	cr_assert(crud(c, db, 1), "the proxy stopped serving after a rejected reload");
	h_stats(c, &st);
	cr_assert_eq(h_counter(&st, "reloads"), 0);
	cr_assert_eq(h_counter(&st, "reload_failures"), 0, "a worker saw the rejected file");
	bson_destroy(&st);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

/* Gone: no such process, or a zombie nobody reaped yet (the master that
 * forked it is dead; in a container pid 1 may never reap it). */
static bool process_gone(pid_t pid)
{
	char path[64], buf[256], *rp;
	FILE *f;
	size_t n;

	if (kill(pid, 0) != 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp != NULL && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* A master killed with SIGKILL (nothing to forward) takes its workers with
 * it: they get SIGTERM from the kernel (PR_SET_PDEATHSIG) and exit, instead
 * of serving on, orphaned. */
Test(workers, killed_master_takes_its_workers, .timeout = 120)
{
	struct proxy *p = start_workers("shutdown_quiesce_ms = 0\n");
	mongoc_client_t *c = h_proxy_client(p, "itest-workers-master");
	pid_t w[2];
	bson_t st;
	bool gone = false;
	int st_master;

	h_stats(c, &st);
	w[0] = (pid_t)h_get_int(&st, "workers.0.pid", -1);
	w[1] = (pid_t)h_get_int(&st, "workers.1.pid", -1);
	bson_destroy(&st);
	mongoc_client_destroy(c);
	cr_assert(w[0] > 0 && w[1] > 0);
	cr_assert_eq(kill(p->pid, SIGKILL), 0);
	cr_assert_eq(waitpid(p->pid, &st_master, 0), p->pid);
	p->exited = true;
	p->wait_status = st_master;
	for (int64_t deadline = h_now_ms() + WAIT_MS; h_now_ms() < deadline && !gone;
	     h_sleep_ms(20))
		gone = process_gone(w[0]) && process_gone(w[1]);
	if (!gone) { /* do not leave them serving after the test */
		kill(w[0], SIGKILL);
		kill(w[1], SIGKILL);
	}
	cr_assert(gone, "workers %d and %d outlived their master", (int)w[0], (int)w[1]);
	proxy_discard(p); /* killed on purpose: no clean exit to check */
}

/* ------------------------------------------------------------ the console */

/* An admin command through c: true when ok; *r the reply (destroy it). */
static bool admin_cmd(mongoc_client_t *c, const char *json, bson_t *r)
{
	bson_error_t err;

	return h_cmd_json(c, "admin", json, r, &err);
}

static char *js(const bson_t *b)
{
	static char buf[2048];
	char *s = bson_as_relaxed_extended_json(b, NULL);

	snprintf(buf, sizeof(buf), "%s", s != NULL ? s : "?");
	bson_free(s);
	return buf;
}

static struct proxy *start_workers_admin(const char *extra)
{
	return start_with(proxy_start_admin, extra);
}

/* The ids of mongoplexShow clients' rows (skip) and their workers. */
static int show_clients(mongoc_client_t *admin, int64_t skip, int64_t *ids, int *wk, int max,
			int64_t *total)
{
	char cmd[128], path[64];
	bson_t r;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "{\"mongoplexShow\": \"clients\", \"skip\": %lld}",
		 (long long)skip);
	cr_assert(admin_cmd(admin, cmd, &r), "show clients: %s", js(&r));
	for (; n < max; n++) {
		snprintf(path, sizeof(path), "rows.%d.id", n);
		if (h_get_int(&r, path, -1) < 0)
			break;
		ids[n] = h_get_int(&r, path, -1);
		snprintf(path, sizeof(path), "rows.%d.worker", n);
		wk[n] = (int)h_get_int(&r, path, -1);
	}
	*total = h_get_int(&r, "total", -1);
	cr_assert_eq(h_get_int(&r, "workers", -1), 2, "%s", js(&r));
	bson_destroy(&r);
	return n;
}

/* A find on a client of its own worker (a thread: it blocks while paused). */
struct held {
	mongoc_client_t *c;
	const char *db;
	bool ok;
	pthread_t th;
};

static void *held_main(void *arg)
{
	struct held *h = arg;
	bson_t reply;
	bson_error_t err;

	h->ok = h_cmd_json(h->c, h->db, "{\"find\": \"w\", \"filter\": {}}", &reply, &err);
	bson_destroy(&reply);
	return NULL;
}

/* Every console command acts on the whole proxy, not on the worker the
 * admin's connection landed on (worker 0: the unix socket): show lists the
 * clients of both workers, each row with its worker, and pages over them
 * as over one list; a pause holds requests on both workers until the
 * resume; a kill reaches a client on the other worker; a reload reloads
 * both. */
Test(workers, console_acts_on_every_worker, .timeout = 180)
{
	struct proxy *p = start_workers_admin("pool_size = 4\n");
	mongoc_client_t *admin = h_proxy_admin_client(p, "itest-workers-admin");
	mongoc_client_t *on[2] = {client_on(p, 0), client_on(p, 1)};
	struct held held[2];
	int64_t ids[64], ids2[64], total, total2, victim = -1;
	int wk[64], wk2[64], n, n2, seen[2] = {0, 0};
	char db[64], cmd[128];
	bson_t r, st;

	h_unique(db, sizeof(db), "it_wk_con");
	/* show: both workers' clients, paged as one list */
	n = show_clients(admin, 0, ids, wk, 64, &total);
	cr_assert_eq(n, total, "one page holds every client");
	cr_assert_geq(n, 3, "the admin and one client per worker: %d rows, total %lld", n,
		      (long long)total);
	for (int i = 0; i < n; i++) {
		cr_assert(wk[i] == 0 || wk[i] == 1, "row %d: worker %d", i, wk[i]);
		cr_assert_eq(ids[i] % 2, wk[i], "client id %lld is not on worker %d",
			     (long long)ids[i], wk[i]);
		seen[wk[i]]++;
		if (wk[i] == 1)
			victim = ids[i];
	}
	cr_assert(seen[0] > 0 && seen[1] > 0, "rows per worker: %d, %d", seen[0], seen[1]);
	n2 = show_clients(admin, 2, ids2, wk2, 64, &total2);
	cr_assert_eq(total2, total);
	cr_assert_eq(n2, n - 2, "skip 2 of %d", n);
	for (int i = 0; i < n2; i++)
		cr_assert_eq(ids2[i], ids[i + 2], "row %d after skip 2", i);

	/* pause: both workers' requests held, then run at resume */
	cr_assert(admin_cmd(admin, "{\"mongoplexPause\": 1}", &r), "pause: %s", js(&r));
	cr_assert_eq(h_get_int(&r, "workers.0.worker", -1), 0, "%s", js(&r));
	cr_assert_eq(h_get_int(&r, "workers.1.worker", -1), 1, "%s", js(&r));
	cr_assert(h_get_bool(&r, "workers.1.reply.paused"), "%s", js(&r));
	cr_assert_str_eq(h_get_str(&r, "state"), "paused", "%s", js(&r));
	bson_destroy(&r);
	for (int i = 0; i < 2; i++) {
		held[i] = (struct held){.c = on[i], .db = db};
		cr_assert_eq(pthread_create(&held[i].th, NULL, held_main, &held[i]), 0);
	}
	for (int64_t deadline = h_now_ms() + WAIT_MS;; h_sleep_ms(20)) {
		cr_assert(admin_cmd(admin, "{\"mongoplexPause\": 1}", &r), "%s", js(&r));
		if (h_get_int(&r, "workers.0.reply.waiting", 0) >= 1 &&
		    h_get_int(&r, "workers.1.reply.waiting", 0) >= 1)
			break;
		cr_assert_lt(h_now_ms(), deadline, "not held on both workers: %s", js(&r));
		bson_destroy(&r);
	}
	cr_assert_eq(h_get_int(&r, "waiting", -1),
		     h_get_int(&r, "workers.0.reply.waiting", -1) +
			 h_get_int(&r, "workers.1.reply.waiting", -1),
		     "the merged count is the sum: %s", js(&r));
	bson_destroy(&r);
	cr_assert(admin_cmd(admin, "{\"mongoplexResume\": 1}", &r), "resume: %s", js(&r));
	cr_assert_str_eq(h_get_str(&r, "state"), "running", "%s", js(&r));
	cr_assert_geq(h_get_int(&r, "dispatching", -1), 2, "%s", js(&r));
	bson_destroy(&r);
	for (int i = 0; i < 2; i++) {
		pthread_join(held[i].th, NULL);
		cr_assert(held[i].ok, "the request held on worker %d failed", i);
	}
	/* a second resume: neither worker is paused, the error names one */
	cr_assert_not(admin_cmd(admin, "{\"mongoplexResume\": 1}", &r), "%s", js(&r));
	cr_assert_not_null(strstr(h_get_str(&r, "errmsg"), "worker 0: "), "%s", js(&r));
	bson_destroy(&r);

	/* kill: a client of worker 1, asked on worker 0 */
	cr_assert_gt(victim, 0);
	snprintf(cmd, sizeof(cmd), "{\"mongoplexKill\": %lld}", (long long)victim);
	cr_assert(admin_cmd(admin, cmd, &r), "kill: %s", js(&r));
	cr_assert_eq(h_get_int(&r, "killed", -1), victim, "%s", js(&r));
	bson_destroy(&r);
	n = show_clients(admin, 0, ids, wk, 64, &total);
	for (int i = 0; i < n; i++)
		cr_assert_neq(ids[i], victim, "the killed client is still listed");
	cr_assert_not(admin_cmd(admin, cmd, &r), "a second kill: %s", js(&r));
	cr_assert_not_null(strstr(h_get_str(&r, "errmsg"), "no client with id"), "%s", js(&r));
	bson_destroy(&r);

	/* reload: both workers */
	cr_assert(admin_cmd(admin, "{\"mongoplexReload\": 1}", &r), "reload: %s", js(&r));
	cr_assert(h_get_bool(&r, "reloaded"), "%s", js(&r));
	cr_assert(h_get_bool(&r, "workers.0.reply.reloaded") &&
		      h_get_bool(&r, "workers.1.reply.reloaded"),
		  "%s", js(&r));
	bson_destroy(&r);
	stats_until(admin, &st, both_reloaded);
	cr_assert(both_reloaded(&st), "reloads per worker: %s", js(&st));
	bson_destroy(&st);
	for (int i = 0; i < 2; i++)
		mongoc_client_destroy(on[i]);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* mongoplexReload of a file the master rejects: the error says why, and
 * no worker reloads. */
Test(workers, console_reload_rejected_by_the_master, .timeout = 120)
{
	struct proxy *p = start_workers_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "itest-workers-admin");
	bson_t r;
	FILE *f;

	f = fopen(p->cfg_path, "a");
	cr_assert_not_null(f);
	fputs("backend_password_file = /nonexistent/mongoplex-itest-password\n", f);
	fclose(f);
	cr_assert_not(admin_cmd(admin, "{\"mongoplexReload\": 1}", &r), "%s", js(&r));
	cr_assert_not_null(strstr(h_get_str(&r, "errmsg"), "reload rejected"), "%s", js(&r));
	cr_assert_not_null(strstr(h_get_str(&r, "errmsg"), "backend_password_file"), "%s", js(&r));
	bson_destroy(&r);
	h_stats(admin, &r);
	cr_assert_eq(h_counter(&r, "reloads"), 0, "%s", js(&r));
	cr_assert_eq(h_counter(&r, "reload_failures"), 0, "a worker saw the file");
	bson_destroy(&r);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* A worker that restarts during a pause comes back paused (the master runs
 * the console's pauses again on it before it listens): a request that lands
 * on it is held until the resume, not served in the middle of the
 * maintenance. */
Test(workers, pause_survives_a_worker_restart, .timeout = 180)
{
	struct proxy *p = start_workers_admin(NULL);
	mongoc_client_t *admin = h_proxy_admin_client(p, "itest-workers-admin");
	struct held h;
	char db[64];
	bson_t r, st;
	pid_t victim;

	h_unique(db, sizeof(db), "it_wk_rep");
	cr_assert(admin_cmd(admin, "{\"mongoplexPause\": 1}", &r), "pause: %s", js(&r));
	bson_destroy(&r);
	h_stats(admin, &st);
	victim = (pid_t)h_get_int(&st, "workers.1.pid", -1);
	bson_destroy(&st);
	cr_assert_gt(victim, 0);
	cr_assert_eq(kill(victim, SIGKILL), 0);
	cr_assert(log_wait(p, "pause/resume command(s) of the console run again", WAIT_MS),
		  "the pause was not replayed on the restarted worker");
	stats_until(admin, &st, worker1_back);
	cr_assert(worker1_back(&st), "worker 1 not back: %s", js(&st));
	bson_destroy(&st);
	h = (struct held){.c = client_on(p, 1), .db = db};
	cr_assert_eq(pthread_create(&h.th, NULL, held_main, &h), 0);
	for (int64_t deadline = h_now_ms() + WAIT_MS;; h_sleep_ms(20)) {
		cr_assert(admin_cmd(admin, "{\"mongoplexPause\": 1}", &r), "%s", js(&r));
		if (h_get_int(&r, "workers.1.reply.waiting", 0) >= 1)
			break;
		cr_assert_lt(h_now_ms(), deadline, "not held on the restarted worker: %s", js(&r));
		bson_destroy(&r);
	}
	cr_assert_str_eq(h_get_str(&r, "workers.1.reply.state"), "paused", "%s", js(&r));
	bson_destroy(&r);
	cr_assert(admin_cmd(admin, "{\"mongoplexResume\": 1}", &r), "resume: %s", js(&r));
	bson_destroy(&r);
	pthread_join(h.th, NULL);
	cr_assert(h.ok, "the held request failed after the resume");
	mongoc_client_destroy(h.c);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* A worker that cannot start (its unix socket's directory does not exist:
 * worker 0 alone binds it) is retried with a growing delay; after 5
 * failures in a row before it ever listened, the master stops every worker
 * and exits 1, instead of restarting it forever. */
Test(workers, worker_failing_to_start_stops_the_master, .timeout = 120)
{
	struct proxy *p =
	    proxy_start("workers = 2\nunix_socket = /nonexistent/mongoplex-itest/mp.sock\n");
	int retries = 0;
	char *log;

	cr_assert(log_wait(p, "failed 5 times in a row before it listened", WAIT_MS),
		  "the master never gave up");
	for (int64_t deadline = h_now_ms() + WAIT_MS; h_now_ms() < deadline && proxy_alive(p);)
		h_sleep_ms(10);
	cr_assert(!proxy_alive(p), "the master outlived its give-up");
	cr_assert(WIFEXITED(p->wait_status) && WEXITSTATUS(p->wait_status) == 1, "exit status %d",
		  p->wait_status);
	log = proxy_log(p);
	for (const char *s = log; (s = strstr(s, "workers: worker 0 (pid")) != NULL; s++)
		retries++;
	cr_assert_eq(retries, 5, "worker 0's exits logged: %d", retries);
	cr_assert_not_null(strstr(log, "nonexistent"), "the cause is not in the log");
	free(log);
	proxy_discard(p);
}

static bool both_pools_ran(const bson_t *st)
{
	return h_get_int(st, "workers.0.pools.0.requestsDispatched", -1) > 0 &&
	       h_get_int(st, "workers.1.pools.0.requestsDispatched", -1) > 0;
}

/* Every worker's pools are reported, each labelled with its worker: in
 * mongoplexStats (workers[i].pools) and in /metrics
 * (mongoplex_worker_pool_*{worker="i",member=...}), whichever worker
 * answers; each pool has its worker's share of pool_size (8 / 2). */
Test(workers, pools_of_every_worker_are_reported, .timeout = 120)
{
	int mport = h_free_port();
	char extra[128], db[64], line[300], member[200], path[64];
	struct proxy *p;
	mongoc_client_t *on[2];
	bson_t st;
	char *m;

	snprintf(extra, sizeof(extra), "pool_size = 8\nmetrics_listen = 127.0.0.1:%d\n", mport);
	p = start_workers(extra);
	h_unique(db, sizeof(db), "it_wk_pools");
	for (int i = 0; i < 2; i++) {
		on[i] = client_on(p, i);
		cr_assert(crud(on[i], db, i), "CRUD on worker %d", i);
	}
	/* worker 0 answers for both; worker 1's rows are as of its last tick */
	stats_until(on[0], &st, both_pools_ran);
	snprintf(member, sizeof(member), "%s", h_get_str(&st, "pools.0.host"));
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "workers.%d.pools.0.poolSize", i);
		cr_assert_eq(h_get_int(&st, path, -1), 4, "%s: %s", path, js(&st));
		snprintf(path, sizeof(path), "workers.%d.pools.0.host", i);
		cr_assert_str_eq(h_get_str(&st, path), member, "%s", js(&st));
		snprintf(path, sizeof(path), "workers.%d.pools.0.requestsDispatched", i);
		cr_assert_gt(h_get_int(&st, path, -1), 0, "worker %d's pool ran nothing: %s", i,
			     js(&st));
	}
	bson_destroy(&st);
	m = h_get_metrics(mport); /* worker 0 serves /metrics */
	for (int i = 0; i < 2; i++) {
		snprintf(line, sizeof(line),
			 "mongoplex_worker_pool_size{worker=\"%d\",member=\"%s\"} 4\n", i, member);
		cr_assert_not_null(strstr(m, line), "no line %s in /metrics", line);
		snprintf(line, sizeof(line),
			 "mongoplex_worker_pool_limit{worker=\"%d\",member=\"%s\"} 4\n", i, member);
		cr_assert_not_null(strstr(m, line), "no line %s in /metrics", line);
	}
	cr_assert_not_null(strstr(m, "# TYPE mongoplex_worker_pool_in_use gauge\n"));
	free(m);
	for (int i = 0; i < 2; i++)
		mongoc_client_destroy(on[i]);
	proxy_stop(p);
}
