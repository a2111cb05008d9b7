/*
 * test_lb_tier.c — a load-balanced tier (issue 25 item 3): two mongoplex
 * instances in front of one backend, reached through HAProxy in TCP mode by
 * loadBalanced=true clients, or listed together in one seed list
 * (advertise_mongos = on) by ordinary clients; one instance drained with
 * SIGTERM while 20 client threads run reads and acknowledged inserts.
 *
 *   haproxy_same_as_direct  loadBalanced=true through HAProxy: inserts, a
 *                           cursor of many batches (its getMores on the pin),
 *                           a count and an aggregation give what the backend
 *                           gives directly
 *   haproxy_drain           20 pooled libmongoc clients (loadBalanced=true)
 *                           through HAProxy; SIGTERM one instance: it exits 0,
 *                           the other serves on, 0 failed operations, every
 *                           insert the clients saw acknowledged is in the
 *                           backend once, every read found its document
 *   seedlist_drain          the same without HAProxy: both instances in one
 *                           multi-host URI (the driver sees two mongoses)
 *
 * HAProxy is Debian's /usr/sbin/haproxy (scripts/install-deps.sh test); its
 * configuration is generated in the test's directory with free ports, and the
 * test stops only the HAProxy it started. The configuration is the one
 * docs/scaling.md shows. Nothing here measures time: the waits are bounded
 * polls for counters, and the assertions are counts. The drains have teeth:
 * with SIGINT (exit at once) instead of SIGTERM both fail, with inserts that
 * were applied, lost their reply, were retried by the driver and got E11000.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define HAPROXY_BIN  "/usr/sbin/haproxy"
#define LOAD_THREADS 20
#define SAME_DOCS    300

/* ------------------------------------------------------------ HAProxy */

/* One HAProxy this test started: its pid (the only one it signals), its
 * directory (haproxy.cfg, haproxy.log) and the port clients use. */
struct haproxy {
	pid_t pid;
	int port;
	char dir[256];
	char cfg[300];
	char log[300];
};

/* The configuration: TCP mode, round robin over the two instances, a
 * connect check every 200 ms (a draining instance closes its listener, so it
 * is marked down at the next check), and a refused connect retried on the
 * other instance (retries + redispatch) until the check has noticed. */
static void haproxy_write_cfg(const struct haproxy *h, int port_a, int port_b)
{
	FILE *f = fopen(h->cfg, "w");

	cr_assert(f != NULL, "%s: %s", h->cfg, strerror(errno));
	fprintf(f,
		"global\n"
		"    maxconn 4096\n"
		"\n"
		"defaults\n"
		"    mode tcp\n"
		"    timeout connect 5s\n"
		"    timeout client 1h\n"
		"    timeout server 1h\n"
		"    retries 3\n"
		"    option redispatch 1\n"
		"\n"
		"frontend mongoplex\n"
		"    bind 127.0.0.1:%d\n"
		"    default_backend mongoplex_instances\n"
		"\n"
		"backend mongoplex_instances\n"
		"    balance roundrobin\n"
		"    server a 127.0.0.1:%d check inter 200ms fall 1 rise 2\n"
		"    server b 127.0.0.1:%d check inter 200ms fall 1 rise 2\n",
		h->port, port_a, port_b);
	cr_assert(fclose(f) == 0, "%s: %s", h->cfg, strerror(errno));
}

static void haproxy_start(struct haproxy *h, int port_a, int port_b)
{
	const char *tmp = getenv("TMPDIR");
	int64_t deadline;
	int fd;

	if (access(HAPROXY_BIN, X_OK) != 0)
		h_cannot_run("%s is not installed (scripts/install-deps.sh test installs Debian's "
			     "haproxy)",
			     HAPROXY_BIN);
	memset(h, 0, sizeof(*h));
	snprintf(h->dir, sizeof(h->dir), "%s/mp-lbtier-XXXXXX", tmp ? tmp : "/tmp");
	cr_assert(mkdtemp(h->dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(h->cfg, sizeof(h->cfg), "%s/haproxy.cfg", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/haproxy.log", h->dir);
	h->port = h_free_port();
	haproxy_write_cfg(h, port_a, port_b);
	h->pid = fork();
	cr_assert(h->pid >= 0, "fork: %s", strerror(errno));
	if (h->pid == 0) {
		fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		h_close_fds_above(3);
		/* Die with the test process, even if it fails mid-way. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGTERM, SIG_DFL);
		/* -db: stay in the foreground, this process is the one to stop. */
		execl(HAPROXY_BIN, HAPROXY_BIN, "-db", "-f", h->cfg, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", HAPROXY_BIN, strerror(errno));
		_exit(127);
	}
	deadline = h_now_ms() + 20000;
	for (;;) {
		int st, s = raw_connect_to("127.0.0.1", h->port);

		if (s >= 0) {
			close(s);
			return;
		}
		if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
			char out[4000];

			h->pid = 0;
			snprintf(out, sizeof(out), "(no log)");
			fd = open(h->log, O_RDONLY);
			if (fd >= 0) {
				ssize_t n = read(fd, out, sizeof(out) - 1);

				out[n > 0 ? n : 0] = '\0';
				close(fd);
			}
			cr_assert_fail("haproxy exited at start (status %d); log:\n%s", st, out);
		}
		cr_assert(h_now_ms() < deadline, "haproxy did not listen on %d within 20 s",
			  h->port);
		h_sleep_ms(20);
	}
}

/* SIGTERM to our HAProxy only, wait for it, remove its directory. */
static void haproxy_stop(struct haproxy *h)
{
	int st;

	if (h->pid <= 0)
		return;
	kill(h->pid, SIGTERM);
	waitpid(h->pid, &st, 0);
	h->pid = 0;
	if (getenv("MONGOPLEX_KEEP_TMP") == NULL) {
		unlink(h->cfg);
		unlink(h->log);
		rmdir(h->dir);
	}
}

/* ------------------------------------------------------------ the tier */

/* Two instances, each with the settings the tier needs: shutdown_quiesce_ms
 * (the default) keeps a drained instance answering with the retryable 91
 * before it closes its connections. */
static void tier_start(struct proxy **a, struct proxy **b, const char *backend, const char *extra)
{
	char cfg[1500];

	snprintf(cfg, sizeof(cfg),
		 "pool_size = 8\n"
		 "shutdown_timeout_ms = 30000\n"
		 "%s%s%s%s",
		 backend ? "backend_uri = " : "", backend ? backend : "", backend ? "\n" : "",
		 extra);
	*a = proxy_start(cfg);
	*b = proxy_start(cfg);
}

/* ------------------------------------------------------------ the load */

/* lbtier_pymongo.py (pymongo 4, h_pymongo4_python()): LOAD_THREADS threads
 * of finds of their last acknowledged document and acknowledged inserts,
 * until its stdin closes; then its JSON result (ok, failed, errors, acked per
 * thread) is read back here. pymongo rather than libmongoc: with the same
 * load in 20 libmongoc 1.23 (Debian 12) pooled clients on FerretDB, each
 * drain failed one operation in the one run made of it (load-balanced: an
 * insert's 91 reached the application; seed list: a read went to the
 * drained instance after it had stopped listening), while pymongo 4.20
 * moved away with none (several runs each). */
struct load {
	FILE *in;
	char dir[256];
	char out[300];
	char log[300];
	char db[64];
	int64_t ok, failed;
	int64_t acked[LOAD_THREADS];
	char errors[2048];
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);
	size_t n;

	cr_assert(buf != NULL);
	if (f == NULL)
		return buf;
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void load_start(struct load *l, const char *uri)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[2048];
	int64_t deadline = h_now_ms() + 120000;

	memset(l, 0, sizeof(*l));
	snprintf(l->dir, sizeof(l->dir), "%s/mp-lbload-XXXXXX", tmp ? tmp : "/tmp");
	cr_assert(mkdtemp(l->dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(l->out, sizeof(l->out), "%s/result.json", l->dir);
	snprintf(l->log, sizeof(l->log), "%s/load.log", l->dir);
	h_unique(l->db, sizeof(l->db), "lbtier");
	snprintf(cmd, sizeof(cmd),
		 "exec '%s' '" MP_SOURCE_DIR "/tests/integration/lbtier_pymongo.py' '%s' '%s' "
		 "'%s' >'%s' 2>&1",
		 h_pymongo4_python(), uri, l->db, l->out, l->log);
	l->in = popen(cmd, "w");
	cr_assert(l->in != NULL, "popen %s: %s", cmd, strerror(errno));
	for (;;) {
		char *log = slurp(l->log);
		bool running = strstr(log, "running") != NULL;

		if (!running && h_now_ms() >= deadline) {
			pclose(l->in);
			cr_assert_fail("the pymongo load did not start within 120 s; its log:\n%s",
				       log);
		}
		free(log);
		if (running)
			return;
		h_sleep_ms(50);
	}
}

/* Close its stdin, wait for it, read its result. */
static void load_stop(struct load *l)
{
	int st = pclose(l->in);
	char *json = slurp(l->out), *log = slurp(l->log);
	bson_error_t err;
	bson_t *res;
	bson_iter_t it, ai;
	int t = 0;

	cr_assert(st == 0, "the pymongo load exited with status 0x%x; its log:\n%s", st, log);
	res = bson_new_from_json((const uint8_t *)json, -1, &err);
	cr_assert(res != NULL, "the load's result %s: %s (%s)", l->out, err.message, json);
	l->ok = h_get_int(res, "ok", -1);
	l->failed = h_get_int(res, "failed", -1);
	if (bson_iter_init_find(&it, res, "errors") && BSON_ITER_HOLDS_ARRAY(&it)) {
		const uint8_t *data;
		uint32_t len;
		bson_t arr;
		char *e;

		bson_iter_array(&it, &len, &data);
		if (bson_init_static(&arr, data, len)) {
			e = bson_array_as_json(&arr, NULL);
			snprintf(l->errors, sizeof(l->errors), "%s", e);
			bson_free(e);
		}
	}
	cr_assert(bson_iter_init_find(&it, res, "acked") && BSON_ITER_HOLDS_ARRAY(&it) &&
		  bson_iter_recurse(&it, &ai));
	while (bson_iter_next(&ai) && t < LOAD_THREADS)
		l->acked[t++] = bson_iter_as_int64(&ai);
	cr_assert_eq(t, LOAD_THREADS, "acked counts of %d threads", t);
	bson_destroy(res);
	free(json);
	free(log);
	if (getenv("MONGOPLEX_KEEP_TMP") == NULL) {
		unlink(l->out);
		unlink(l->log);
		rmdir(l->dir);
	}
}

/* Poll p's requests_forwarded until it reaches n (bounded, not timed). */
static void wait_forwarded(struct proxy *p, int64_t n, const char *what)
{
	int64_t deadline = h_now_ms() + 120000, got = 0;

	while ((got = proxy_counter(p, "requests_forwarded")) < n) {
		cr_assert(h_now_ms() < deadline,
			  "%s: %" PRId64 " of %" PRId64 " requests forwarded", what, got, n);
		h_sleep_ms(50);
	}
}

/* Every acknowledged insert is in the backend once: per thread the count of
 * its documents is what it saw acknowledged (the _id is unique, so a write
 * applied twice would have failed its second time with E11000). */
static void assert_acked_once(struct load *l, const char *backend)
{
	mongoc_client_t *d = h_client_uri(backend, "lbtier-check");
	mongoc_collection_t *col = mongoc_client_get_collection(d, l->db, "tier");
	int64_t total = 0;
	bson_error_t err;

	for (int t = 0; t < LOAD_THREADS; t++) {
		bson_t *filter = BCON_NEW("t", BCON_INT32(t));
		int64_t n = mongoc_collection_count_documents(col, filter, NULL, NULL, NULL, &err);

		cr_assert_eq(n, l->acked[t],
			     "thread %d: %" PRId64 " documents in the backend, %" PRId64
			     " acknowledged (%s)",
			     t, n, l->acked[t], n < 0 ? err.message : "");
		total += l->acked[t];
		bson_destroy(filter);
	}
	{
		bson_t empty = BSON_INITIALIZER;
		int64_t n = mongoc_collection_count_documents(col, &empty, NULL, NULL, NULL, &err);

		cr_assert_eq(n, total, "%" PRId64 " documents in all, %" PRId64 " acknowledged", n,
			     total);
	}
	cr_log_info("lbtier: %" PRId64 " acknowledged inserts, each in the backend once", total);
	h_drop_db(d, l->db);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(d);
}

/* The drain: load on both instances, SIGTERM a, a exits 0, b serves 200 more
 * requests after that, 0 failed operations, the inserts present once. */
static void drain_under_load(struct proxy *a, struct proxy *b, const char *uri, const char *backend)
{
	struct load l;
	int64_t after, deadline;

	load_start(&l, uri);
	wait_forwarded(a, 100, "load reaching the instance to drain");
	wait_forwarded(b, 100, "load reaching the other instance");
	cr_assert(kill(a->pid, SIGTERM) == 0);
	deadline = h_now_ms() + 60000;
	while (proxy_alive(a) && h_now_ms() < deadline)
		h_sleep_ms(20);
	if (proxy_alive(a)) {
		load_stop(&l);
		cr_assert_fail("the drained instance did not exit within 60 s of SIGTERM");
	}
	after = proxy_counter(b, "requests_forwarded");
	wait_forwarded(b, after + 200, "the other instance serving after the drain");
	load_stop(&l);
	cr_log_info("lbtier drain: %" PRId64 " operations ok, %" PRId64 " failed; errors: %s", l.ok,
		    l.failed, l.errors);
	cr_assert_eq(l.failed, 0, "%" PRId64 " failed operations: %s", l.failed, l.errors);
	cr_assert_gt(l.ok, 0, "no operation succeeded");
	cr_assert(log_contains(a, "SIGTERM: no longer accepting"), "the instance was not drained");
	assert_acked_once(&l, backend);
	proxy_stop(a); /* already exited: asserts exit status 0 */
}

/* ------------------------------------------------------------ the tests */

TestSuite(lbtier, .timeout = 300);

Test(lbtier, haproxy_same_as_direct)
{
	struct proxy *a, *b;
	struct haproxy h;
	char uri[160], db[64];
	mongoc_client_t *lb, *d;
	mongoc_collection_t *col;
	bson_t via, direct, reply_via, reply_direct;
	bson_error_t err;
	char *why = NULL;
	const char *agg = "{\"aggregate\": \"same\", \"pipeline\": [{\"$group\": {\"_id\": "
			  "\"$g\", \"sum\": {\"$sum\": \"$n\"}}}, "
			  "{\"$sort\": {\"_id\": 1}}], \"cursor\": {}}";

	tier_start(&a, &b, NULL, "");
	haproxy_start(&h, a->port, b->port);
	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d/?loadBalanced=true", h.port);
	lb = h_client_uri(uri, "lbtier-same");
	cr_assert(lb != NULL);
	d = h_backend_client("lbtier-direct");
	h_unique(db, sizeof(db), "lbtier_same");
	col = mongoc_client_get_collection(lb, db, "same");
	for (int i = 0; i < SAME_DOCS; i++) {
		bson_t *doc = BCON_NEW("_id", BCON_INT32(i), "n", BCON_INT32(i * 3), "g",
				       BCON_INT32(i % 7), "s", BCON_UTF8("lbtier"));

		cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err),
			  "insert %d through HAProxy: %s", i, err.message);
		bson_destroy(doc);
	}
	/* A cursor of many batches: its getMores run on its pin. */
	{
		bson_t *filter = bson_new(), *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1),
							      "}", "batchSize", BCON_INT32(7));
		mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, opts, NULL);
		const bson_t *doc;
		int n = 0;

		while (mongoc_cursor_next(cur, &doc)) {
			cr_assert_eq(h_get_int(doc, "_id", -1), n, "cursor order");
			n++;
		}
		cr_assert_not(mongoc_cursor_error(cur, &err), "LB cursor: %s", err.message);
		cr_assert_eq(n, SAME_DOCS, "%d documents through the LB cursor", n);
		mongoc_cursor_destroy(cur);
		bson_destroy(filter);
		bson_destroy(opts);
	}
	cr_assert_eq(h_all_docs(lb, db, "same", &via), SAME_DOCS);
	cr_assert_eq(h_all_docs(d, db, "same", &direct), SAME_DOCS);
	cr_assert(h_same_reply(&via, &direct, &why), "documents via HAProxy vs direct: %s", why);
	{
		bson_t empty = BSON_INITIALIZER;

		cr_assert_eq(mongoc_collection_count_documents(col, &empty, NULL, NULL, NULL, &err),
			     SAME_DOCS, "count through HAProxy: %s", err.message);
	}
	cr_assert(h_cmd_json(lb, db, agg, &reply_via, &err), "aggregate via HAProxy: %s",
		  err.message);
	cr_assert(h_cmd_json(d, db, agg, &reply_direct, &err), "aggregate direct: %s", err.message);
	cr_assert(h_same_reply(&reply_via, &reply_direct, &why),
		  "aggregate via HAProxy vs direct: %s", why);
	cr_assert_gt(proxy_counter(a, "lb_clients") + proxy_counter(b, "lb_clients"), 0,
		     "no instance saw a loadBalanced hello");
	bson_destroy(&via);
	bson_destroy(&direct);
	bson_destroy(&reply_via);
	bson_destroy(&reply_direct);
	mongoc_collection_destroy(col);
	h_drop_db(d, db);
	mongoc_client_destroy(lb);
	mongoc_client_destroy(d);
	haproxy_stop(&h);
	proxy_stop(a);
	proxy_stop(b);
}

Test(lbtier, haproxy_drain)
{
	struct h_ferret f;
	struct proxy *a, *b;
	struct haproxy h;
	char uri[160];

	h_ferret_shared(&f, "ferretdb");
	tier_start(&a, &b, f.uri, "");
	haproxy_start(&h, a->port, b->port);
	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d/?loadBalanced=true", h.port);
	drain_under_load(a, b, uri, f.uri);
	cr_assert_gt(proxy_counter(b, "lb_clients"), 0, "the clients did not say loadBalanced");
	haproxy_stop(&h);
	proxy_stop(b);
	h_ferret_stop(&f);
}

Test(lbtier, seedlist_drain)
{
	struct h_ferret f;
	struct proxy *a, *b;
	char uri[200];

	h_ferret_shared(&f, "ferretdb");
	tier_start(&a, &b, f.uri, "advertise_mongos = on\n");
	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d,127.0.0.1:%d/?localThresholdMS=1000",
		 a->port, b->port);
	drain_under_load(a, b, uri, f.uri);
	proxy_stop(b);
	h_ferret_stop(&f);
}
