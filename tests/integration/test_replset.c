/*
 * test_replset.c — replica sets through the proxy: libmongoc SDAM in the
 * proxy (pool/topology.c), read-preference routing (pool/select.c),
 * failover. The backend is rs_mock.py: three mockupdb members of "rs0"
 * (hello with setName, hosts, primary, electionId/setVersion,
 * topologyVersion) plus a spare member outside the seed list, scripted over
 * the mock's stdin (elect, nopri, hide, add, refuse). Every member says in
 * its replies which member answered, and counts what it received.
 *
 * Asserts: writes and primary reads on the primary; secondary reads only on
 * secondaries (mock counters); tags; a member not in the seed list is
 * discovered and used; a hidden member gets no more reads; an election moves
 * writes to the new primary; getMore follows its cursor's member; a
 * transaction stays on its member across an election; "not primary" reaches
 * the client as the server said it and makes the proxy recheck; with no
 * primary a write waits and goes to the next primary, or fails with 133
 * after serverSelectionTimeoutMS, and ping fails; a write loop across an
 * election loses and duplicates nothing (figures printed with --verbose).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

#define PYTHON	"/usr/bin/python3"
#define RS_MOCK MP_SOURCE_DIR "/tests/integration/rs_mock.py"

/* The mock replica set: its process, the members' ports, its control pipe. */
struct rs {
	pid_t pid;
	int port[4];
	int to_fd;
	FILE *from;
	char seeds[200]; /* 127.0.0.1:P0,127.0.0.1:P1,127.0.0.1:P2 */
};

static struct rs *rs_start(void)
{
	struct rs *r = calloc(1, sizeof(*r));
	int in[2], out[2];
	char line[256];

	cr_assert(r != NULL);
	cr_assert(access(PYTHON, X_OK) == 0, "%s not found (Debian python3 with mockupdb)", PYTHON);
	cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe: %s",
		  strerror(errno));
	fflush(NULL);
	r->pid = fork();
	cr_assert(r->pid >= 0, "fork: %s", strerror(errno));
	if (r->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], 0);
		dup2(out[1], 1);
		h_close_fds_above(3);
		execl(PYTHON, PYTHON, RS_MOCK, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	r->to_fd = in[1];
	r->from = fdopen(out[0], "r");
	cr_assert(fgets(line, sizeof(line), r->from) != NULL,
		  "rs_mock.py exited before listening (is python3-mockupdb installed?)");
	cr_assert(sscanf(line, "ports %d %d %d %d", &r->port[0], &r->port[1], &r->port[2],
			 &r->port[3]) == 4,
		  "rs_mock.py said: %s", line);
	snprintf(r->seeds, sizeof(r->seeds), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", r->port[0],
		 r->port[1], r->port[2]);
	return r;
}

/* Send one control line; returns the mock's answer (malloc'd). */
static char *rs_ctl(struct rs *r, const char *cmd)
{
	size_t cap = 1 << 20;
	char *buf = malloc(cap);

	cr_assert(buf != NULL);
	cr_assert(write(r->to_fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd) &&
		      write(r->to_fd, "\n", 1) == 1,
		  "rs_mock.py: cannot send %s", cmd);
	cr_assert(fgets(buf, (int)cap, r->from) != NULL, "rs_mock.py died on %s", cmd);
	return buf;
}

static void rs_do(struct rs *r, const char *cmd)
{
	char *a = rs_ctl(r, cmd);

	cr_assert(strncmp(a, "ok", 2) == 0, "rs_mock.py %s: %s", cmd, a);
	free(a);
}

/* The mock's stats as BSON. */
static void rs_stats(struct rs *r, bson_t *out)
{
	char *a = rs_ctl(r, "stats");
	bson_error_t err;

	cr_assert(strncmp(a, "stats ", 6) == 0, "rs_mock.py stats: %s", a);
	cr_assert(bson_init_from_json(out, a + 6, -1, &err), "stats json: %s", err.message);
	free(a);
}

/* How many `cmd` commands member k received. */
static int64_t rs_count(struct rs *r, int k, const char *cmd)
{
	char path[64];
	bson_t st;
	int64_t n;

	rs_stats(r, &st);
	snprintf(path, sizeof(path), "counters.%d.%s", k, cmd);
	n = h_get_int(&st, path, 0);
	bson_destroy(&st);
	return n;
}

static void rs_stop(struct rs *r)
{
	kill(r->pid, SIGTERM);
	close(r->to_fd);
	fclose(r->from);
	waitpid(r->pid, NULL, 0);
	free(r);
}

/* The proxy in front of the mock set. */
static struct proxy *rs_proxy(struct rs *r, int sst_ms)
{
	char cfg[600];

	snprintf(cfg, sizeof(cfg),
		 "backend_uri = mongodb://%s/?replicaSet=rs0&heartbeatFrequencyMS=500"
		 "&serverSelectionTimeoutMS=%d\n",
		 r->seeds, sst_ms);
	return proxy_start(cfg);
}

/* The pools entry of mongoplexStats for member k, or -1. */
static int stats_pool_of(const bson_t *st, struct rs *r, int k)
{
	char want[64], path[64];

	snprintf(want, sizeof(want), "127.0.0.1:%d", r->port[k]);
	for (int i = 0; i < 64; i++) {
		const char *h;

		snprintf(path, sizeof(path), "pools.%d.host", i);
		if ((h = h_get_str(st, path)) == NULL)
			return -1;
		if (strcmp(h, want) == 0)
			return i;
	}
	return -1;
}

/* Member k's type as mongoplexStats shows it ("gone": not a member). */
static void member_type(struct proxy *p, struct rs *r, int k, char *out, size_t outlen)
{
	bson_t st;
	char path[64];
	int i;

	proxy_stats(p, &st);
	i = stats_pool_of(&st, r, k);
	snprintf(path, sizeof(path), "pools.%d.member", i);
	if (i < 0 || !h_get_bool(&st, path)) {
		snprintf(out, outlen, "gone");
	} else {
		snprintf(path, sizeof(path), "pools.%d.memberType", i);
		snprintf(out, outlen, "%s", h_get_str(&st, path) ? h_get_str(&st, path) : "?");
	}
	bson_destroy(&st);
}

/* Wait (hang guard 20 s) until the proxy sees member k as `type`. */
static void wait_member(struct proxy *p, struct rs *r, int k, const char *type)
{
	char now[64] = "";
	int64_t deadline = h_now_ms() + 20000;

	while (h_now_ms() < deadline) {
		member_type(p, r, k, now, sizeof(now));
		if (strcmp(now, type) == 0)
			return;
		h_sleep_ms(50);
	}
	cr_assert_fail("member %d: proxy still says %s, expected %s", k, now, type);
}

static void wait_set(struct proxy *p, struct rs *r, int primary)
{
	for (int k = 0; k < 3; k++)
		wait_member(p, r, k, k == primary ? "RSPrimary" : "RSSecondary");
}

/* find on coll with read preference `mode` (NULL: none) and optional tags
 * JSON; returns the member that answered, or -1 and the error in *err. */
static int find_member(mongoc_client_t *c, const char *coll, const char *mode, const char *tags,
		       bson_error_t *err)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, "test", coll);
	mongoc_read_prefs_t *rp = NULL;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_t filter = BSON_INITIALIZER;
	int member = -1;

	if (mode != NULL) {
		rp = mongoc_read_prefs_new(strcmp(mode, "secondary") == 0 ? MONGOC_READ_SECONDARY
					   : strcmp(mode, "secondaryPreferred") == 0
					       ? MONGOC_READ_SECONDARY_PREFERRED
					   : strcmp(mode, "nearest") == 0 ? MONGOC_READ_NEAREST
									  : MONGOC_READ_PRIMARY);
		if (tags != NULL) {
			bson_t *t = bson_new_from_json((const uint8_t *)tags, -1, NULL);

			cr_assert(t != NULL);
			mongoc_read_prefs_set_tags(rp, t);
			bson_destroy(t);
		}
	}
	cur = mongoc_collection_find_with_opts(col, &filter, NULL, rp);
	if (mongoc_cursor_next(cur, &doc))
		member = (int)h_get_int(doc, "member", -1);
	else if (!mongoc_cursor_error(cur, err))
		snprintf(err->message, sizeof(err->message), "no document");
	mongoc_cursor_destroy(cur);
	if (rp != NULL)
		mongoc_read_prefs_destroy(rp);
	mongoc_collection_destroy(col);
	return member;
}

/* {insert: coll, documents: [{_id: id}]} through the client's helper (a
 * retryable write when retryWrites is on); the reply in *reply. */
static bool insert_id(mongoc_client_t *c, const char *coll, int64_t id, bson_t *reply,
		      bson_error_t *err)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, "test", coll);
	bson_t *doc = BCON_NEW("_id", BCON_INT64(id));
	bool ok = mongoc_collection_insert_one(col, doc, NULL, reply, err);

	bson_destroy(doc);
	mongoc_collection_destroy(col);
	return ok;
}

static mongoc_client_t *client_for(struct proxy *p, const char *opts)
{
	char uri[300];
	mongoc_client_t *c;

	snprintf(uri, sizeof(uri), "%s%s%s", p->uri, strchr(p->uri, '?') ? "&" : "?", opts);
	c = h_client_uri(uri, "replset-test");
	cr_assert(c != NULL, "client for %s", uri);
	return c;
}

/* A control line sent from a thread after a delay (while the test's own
 * thread waits in a request). */
struct later {
	struct rs *r;
	const char *cmd;
	int delay_ms;
};

static void *later_main(void *arg)
{
	struct later *l = arg;

	h_sleep_ms(l->delay_ms);
	rs_do(l->r, l->cmd);
	return NULL;
}

/* ================================================================ tests */

Test(replset, routing_by_read_preference, .timeout = 180)
{
	struct rs *r = rs_start();
	struct proxy *p = rs_proxy(r, 1500);
	mongoc_client_t *c = h_proxy_client(p, "replset-routing");
	bson_error_t err;
	bson_t reply;
	int64_t before[4];
	int m;

	wait_set(p, r, 0);
	/* Writes and primary reads: member 0. */
	cr_assert(insert_id(c, "w", 1, &reply, &err), "insert: %s", err.message);
	bson_destroy(&reply);
	cr_expect_eq(rs_count(r, 0, "insert"), 1, "the insert did not reach the primary");
	for (int i = 0; i < 5; i++)
		cr_expect_eq(find_member(c, "t", NULL, NULL, &err), 0,
			     "a read without "
			     "read preference left "
			     "the primary");
	cr_expect_eq(find_member(c, "t", "primary", NULL, &err), 0);
	/* Secondary reads: members 1 and 2 only (the mock's counters agree). */
	for (int k = 0; k < 3; k++)
		before[k] = rs_count(r, k, "find");
	for (int i = 0; i < 20; i++) {
		m = find_member(c, "t", "secondary", NULL, &err);
		cr_expect(m == 1 || m == 2, "secondary read %d answered by member %d (%s)", i, m,
			  err.message);
	}
	cr_expect_eq(rs_count(r, 0, "find"), before[0], "a secondary read reached the primary");
	cr_expect_eq(rs_count(r, 1, "find") + rs_count(r, 2, "find") - before[1] - before[2], 20,
		     "the secondaries did not get the 20 secondary reads");
	m = find_member(c, "t", "secondaryPreferred", NULL, &err);
	cr_expect(m == 1 || m == 2, "secondaryPreferred answered by %d", m);
	m = find_member(c, "t", "nearest", NULL, &err);
	cr_expect(m >= 0 && m <= 2, "nearest answered by %d (%s)", m, err.message);
	/* Tags nobody has: 133 after serverSelectionTimeoutMS. */
	m = find_member(c, "t", "secondary", "[{\"dc\": \"east\"}]", &err);
	cr_expect_eq(m, -1, "a read with unmatched tags was answered by %d", m);
	cr_expect_eq(err.code, 133, "unmatched tags: code %u (%s), expected 133", err.code,
		     err.message);
	cr_expect(strstr(err.message, "mongoplex: ") != NULL, "error without prefix: %s",
		  err.message);
	/* Member 3 (tags dc: east) joins, not in the seed list: discovered, used. */
	rs_do(r, "add 3");
	wait_member(p, r, 3, "RSSecondary");
	m = find_member(c, "t", "secondary", "[{\"dc\": \"east\"}]", &err);
	cr_expect_eq(m, 3, "the tagged read went to %d, not to the discovered member 3 (%s)", m,
		     err.message);
	/* Member 2 hidden: no more reads reach it. */
	rs_do(r, "hide 2");
	wait_member(p, r, 2, "gone");
	before[2] = rs_count(r, 2, "find");
	for (int i = 0; i < 10; i++) {
		m = find_member(c, "t", "secondary", NULL, &err);
		cr_expect(m == 1 || m == 3, "secondary read after hide answered by %d", m);
	}
	cr_expect_eq(rs_count(r, 2, "find"), before[2], "the hidden member still got reads");
	/* Election: writes follow the new primary. */
	rs_do(r, "elect 1");
	wait_member(p, r, 1, "RSPrimary");
	wait_member(p, r, 0, "RSSecondary");
	cr_assert(insert_id(c, "w", 2, &reply, &err), "insert after election: %s", err.message);
	bson_destroy(&reply);
	cr_expect_eq(rs_count(r, 1, "insert"), 1, "the write did not go to the new primary");
	cr_expect_eq(find_member(c, "t", NULL, NULL, &err), 1, "a primary read after the election");
	mongoc_client_destroy(c);
	proxy_stop(p);
	rs_stop(r);
}

Test(replset, getmore_and_transaction_stay_on_their_member, .timeout = 180)
{
	struct rs *r = rs_start();
	struct proxy *p = rs_proxy(r, 5000);
	mongoc_client_t *c = h_proxy_client(p, "replset-pin");
	mongoc_collection_t *col = mongoc_client_get_collection(c, "test", "cur");
	mongoc_read_prefs_t *rp = mongoc_read_prefs_new(MONGOC_READ_SECONDARY);
	bson_t filter = BSON_INITIALIZER, *opts = BCON_NEW("batchSize", BCON_INT32(1));
	mongoc_client_session_t *s;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_error_t err;
	bson_t reply, st;
	bson_iter_t it, sub;
	int first, second, ntxn = 0;

	wait_set(p, r, 0);
	/* getMore goes where the cursor lives. */
	cur = mongoc_collection_find_with_opts(col, &filter, opts, rp);
	cr_assert(mongoc_cursor_next(cur, &doc), "first batch");
	first = (int)h_get_int(doc, "member", -1);
	cr_assert(mongoc_cursor_next(cur, &doc), "getMore: %s",
		  mongoc_cursor_error(cur, &err) ? err.message : "no document");
	second = (int)h_get_int(doc, "member", -1);
	cr_expect(first == 1 || first == 2, "secondary cursor opened on %d", first);
	cr_expect_eq(second, first, "getMore answered by %d, the cursor is on %d", second, first);
	cr_expect_eq(rs_count(r, first, "getmore"), 1);
	mongoc_cursor_destroy(cur);
	/* A transaction started on member 0 stays there across an election. */
	s = mongoc_client_start_session(c, NULL, &err);
	cr_assert(s != NULL, "session: %s", err.message);
	cr_assert(mongoc_client_session_start_transaction(s, NULL, &err), "start: %s", err.message);
	{
		bson_t *o = bson_new(), *d = BCON_NEW("_id", BCON_INT32(1));
		mongoc_collection_t *w = mongoc_client_get_collection(c, "test", "w");

		cr_assert(mongoc_client_session_append(s, o, &err));
		cr_assert(mongoc_collection_insert_one(w, d, o, NULL, &err), "txn insert: %s",
			  err.message);
		rs_do(r, "elect 1");
		wait_member(p, r, 1, "RSPrimary");
		wait_member(p, r, 0, "RSSecondary");
		cur = mongoc_collection_find_with_opts(w, &filter, o, NULL);
		cr_expect(mongoc_cursor_next(cur, &doc), "txn find: %s",
			  mongoc_cursor_error(cur, &err) ? err.message : "none");
		cr_expect_eq(h_get_int(doc, "member", -1), 0,
			     "a transaction's find left the member it started on");
		mongoc_cursor_destroy(cur);
		cr_expect(mongoc_client_session_commit_transaction(s, &reply, &err), "commit: %s",
			  err.message);
		bson_destroy(&reply);
		bson_destroy(o);
		bson_destroy(d);
		mongoc_collection_destroy(w);
	}
	/* Every command of the transaction reached member 0. */
	rs_stats(r, &st);
	cr_assert(bson_iter_init_find(&it, &st, "txn") && bson_iter_recurse(&it, &sub));
	while (bson_iter_next(&sub)) {
		bson_iter_t m;

		ntxn++;
		cr_assert(bson_iter_recurse(&sub, &m));
		while (bson_iter_next(&m))
			cr_expect_eq(bson_iter_as_int64(&m), 0,
				     "a command of the transaction went to member %lld",
				     (long long)bson_iter_as_int64(&m));
	}
	cr_expect_eq(ntxn, 1, "the mock saw %d transactions", ntxn);
	bson_destroy(&st);
	/* After commit the session is no longer pinned: a write goes to 1. */
	cr_assert(insert_id(c, "w", 2, &reply, &err), "insert after commit: %s", err.message);
	bson_destroy(&reply);
	cr_expect_eq(rs_count(r, 1, "insert"), 1, "the write after commit did not reach 1");
	mongoc_client_session_destroy(s);
	mongoc_read_prefs_destroy(rp);
	bson_destroy(opts);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	proxy_stop(p);
	rs_stop(r);
}

Test(replset, not_primary_reply_and_no_primary, .timeout = 180)
{
	struct rs *r = rs_start();
	struct proxy *p = rs_proxy(r, 1500);
	mongoc_client_t *c = client_for(p, "retryWrites=false");
	bson_error_t err;
	bson_t reply, st, *ping = BCON_NEW("ping", BCON_INT32(1));
	int64_t t0;

	wait_set(p, r, 0);
	/* Member 0 refuses writes while its hello still says primary: the
	 * client gets the server's error, and the proxy rechecks at once. */
	rs_do(r, "refuse 0 on");
	cr_assert_not(insert_id(c, "w", 1, &reply, &err), "a refused write succeeded");
	cr_expect_eq(err.code, 10107, "refused write: code %u (%s)", err.code, err.message);
	cr_expect(strstr(err.message, "not primary") != NULL, "not the server's error: %s",
		  err.message);
	bson_destroy(&reply);
	cr_expect(log_wait(p, "immediate recheck", 10000), "no recheck after \"not primary\"");
	proxy_stats(p, &st);
	cr_expect_geq(h_get_int(&st, "counters.rs_suspects", 0), 1);
	bson_destroy(&st);
	rs_do(r, "refuse 0 off");
	/* No primary: a write waits, then goes to the next primary. */
	rs_do(r, "nopri");
	wait_member(p, r, 0, "RSSecondary");
	{
		pthread_t th;
		struct later l = {.r = r, .cmd = "elect 2", .delay_ms = 700};

		cr_assert(pthread_create(&th, NULL, later_main, &l) == 0);
		cr_expect(insert_id(c, "w", 2, &reply, &err), "write across no-primary: %s",
			  err.message);
		pthread_join(th, NULL);
	}
	bson_destroy(&reply);
	cr_expect_eq(rs_count(r, 2, "insert"), 1, "the queued write did not reach the new primary");
	/* Nobody primary for longer than serverSelectionTimeoutMS: 133, and
	 * ping (answered by the proxy) admits there is no primary-capable
	 * path only when no member is usable at all. */
	rs_do(r, "nopri");
	wait_member(p, r, 2, "RSSecondary");
	t0 = h_now_ms();
	cr_assert_not(insert_id(c, "w", 3, &reply, &err), "a write with no primary succeeded");
	cr_expect_eq(err.code, 133, "no primary: code %u (%s), expected 133", err.code,
		     err.message);
	cr_expect(h_now_ms() - t0 >= 1000, "refused before serverSelectionTimeoutMS");
	bson_destroy(&reply);
	proxy_stats(p, &st);
	cr_expect_geq(h_get_int(&st, "counters.refused_no_member", 0), 1);
	bson_destroy(&st);
	cr_expect(h_cmd(c, "admin", ping, &reply, &err), "ping with secondaries up: %s",
		  err.message);
	bson_destroy(&reply);
	/* Every member gone: the proxy's own ping says so (hang guard 30 s). */
	rs_stop(r);
	t0 = h_now_ms();
	while (h_cmd(c, "admin", ping, &reply, &err) && h_now_ms() - t0 < 30000) {
		bson_destroy(&reply);
		h_sleep_ms(100);
	}
	cr_expect_eq(err.code, 6, "ping with no member: code %u (%s)", err.code, err.message);
	cr_expect(strstr(err.message, "mongoplex: ") != NULL, "ping error: %s", err.message);
	bson_destroy(&reply);
	bson_destroy(ping);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

/* The write loop across an election (`how`: the mock's control line):
 * every acknowledged write applied once. */
static void write_loop(const char *how)
{
	enum { N = 300, ELECT_AT = 100 };
	struct rs *r = rs_start();
	struct proxy *p = rs_proxy(r, 10000);
	mongoc_client_t *c = client_for(p, "retryWrites=true");
	bool acked[N] = {false};
	int64_t t_elect = 0, t_first = -1;
	int n_acked = 0, n_failed = 0, lost = 0, dup = 0, extra = 0;
	bson_error_t err;
	bson_t reply, st, applied;
	bson_iter_t it;

	wait_set(p, r, 0);
	for (int i = 0; i < N; i++) {
		if (i == ELECT_AT) {
			rs_do(r, how);
			t_elect = h_now_ms();
		}
		if (insert_id(c, "loop", i, &reply, &err)) {
			acked[i] = true;
			n_acked++;
			if (i >= ELECT_AT && t_first < 0)
				t_first = h_now_ms() - t_elect;
		} else {
			n_failed++;
			cr_log_info("write %d failed: %u %s", i, err.code, err.message);
		}
		bson_destroy(&reply);
	}
	rs_stats(r, &st);
	cr_assert(bson_iter_init_find(&it, &st, "applied") && BSON_ITER_HOLDS_DOCUMENT(&it));
	{
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&it, &len, &data);
		cr_assert(bson_init_static(&applied, data, len));
	}
	for (int i = 0; i < N; i++) {
		char key[24];
		int64_t times;

		snprintf(key, sizeof(key), "%d", i);
		times = h_get_int(&applied, key, 0);
		if (acked[i] && times == 0)
			lost++;
		if (times > 1)
			dup++;
		if (!acked[i] && times > 0)
			extra++; /* failed for the client, yet applied: allowed, reported */
	}
	bson_destroy(&st);
	proxy_stats(p, &st);
	cr_log_info(
	    "failover \"%s\" (mockupdb, heartbeatFrequencyMS 500): %d writes, %d acknowledged, %d "
	    "failed, %d lost, %d duplicated, %d applied but reported failed; first "
	    "successful write %lld ms after the election; proxy: %lld suspects, %lld "
	    "waited for a member, %lld refused for no member",
	    how, N, n_acked, n_failed, lost, dup, extra, (long long)t_first,
	    (long long)h_get_int(&st, "counters.rs_suspects", 0),
	    (long long)h_get_int(&st, "counters.rs_waited_for_member", 0),
	    (long long)h_get_int(&st, "counters.refused_no_member", 0));
	bson_destroy(&st);
	cr_expect_eq(lost, 0, "%d acknowledged writes were not applied", lost);
	cr_expect_eq(dup, 0, "%d writes were applied twice", dup);
	cr_expect_eq(n_failed, 0, "%d writes failed although the driver retries", n_failed);
	cr_expect_geq(rs_count(r, 1, "insert"), N - ELECT_AT, "the new primary got too few writes");
	mongoc_client_destroy(c);
	proxy_stop(p);
	rs_stop(r);
}

Test(replset, write_loop_across_election_loses_nothing, .timeout = 240)
{
	write_loop("elect 1");
}

/* The primary dies: writes sent to it get a network error the driver
 * retries (RetryableWriteError), the rest wait for member 1. */
Test(replset, write_loop_across_primary_death_loses_nothing, .timeout = 240)
{
	write_loop("down 0 1");
}
