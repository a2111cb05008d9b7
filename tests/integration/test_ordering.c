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

#define NO_REPLY	 (-1)
#define NETWORK_ERROR (-2)

/* Receive until the reply to `id` (stray replies to moreToCome messages
 * are counted and skipped); its n, NETWORK_ERROR for an error reply with
 * code 6 (HostUnreachable), or NO_REPLY when the connection closed, timed
 * out or the reply was anything else. */
static int64_t recv_n(int fd, int32_t id, int *stray)
{
	for (;;) {
		struct raw_reply r;
		uint8_t *msg;
		size_t len;
		int64_t n = -1;
		bool mine;

		if (raw_recv_msg(fd, &msg, &len, 60000) != RAW_OK)
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

enum seq { SEQ_BULK, SEQ_COUNT };

/* One run of a sequence on fd; the count's n, or -1 if not answered. */
static int64_t run_seq(int fd, enum seq seq, int run, const char *db, const char *coll,
		       int *stray)
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
		m2 = BCON_NEW("update", BCON_UTF8(coll), "ordered", BCON_BOOL(false), "updates", "[",
			      "{", "q", "{", "a", BCON_INT32(3), "run", BCON_INT32(run), "}", "u",
			      "{", "$set", "{", "b", BCON_INT32(1), "}", "}", "upsert",
			      BCON_BOOL(true), "}", "]", "writeConcern", "{", "w", BCON_INT32(0),
			      "}", "$db", BCON_UTF8(db));
		m3 = BCON_NEW("delete", BCON_UTF8(coll), "ordered", BCON_BOOL(false), "deletes", "[",
			      "{", "q", "{", "a", BCON_INT32(1), "run", BCON_INT32(run), "}",
			      "limit", BCON_INT32(1), "}", "]", "writeConcern", "{", "w",
			      BCON_INT32(0), "}", "$db", BCON_UTF8(db));
		cnt = BCON_NEW("count", BCON_UTF8(coll), "query", "{", "run", BCON_INT32(run), "}",
			       "$db", BCON_UTF8(db));
	} else {
		m1 = BCON_NEW("insert", BCON_UTF8(coll), "documents", "[", "{", "k", BCON_INT32(run),
			      "}", "]", "writeConcern", "{", "w", BCON_INT32(0), "}", "$db",
			      BCON_UTF8(db));
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
	char host[256];
	int port, fd;

	h_backend_hostport(host, sizeof(host), &port);
	fd = raw_connect_to(host, port);
	cr_assert(fd >= 0, "cannot connect to the backend");
	return fd;
}

/* Does the backend run moreToCome writes (true) or close the connection
 * without running them (false)? One raw socket, straight to it. */
static bool backend_runs_unacked(const char *db)
{
	int fd = backend_fd(), stray = 0;
	int64_t n = run_seq(fd, SEQ_COUNT, -1, db, "probe", &stray);

	close(fd);
	cr_log_info("backend %s: a moreToCome insert then a count on one socket: %s",
		    h_backend_name(), n < 0 ? "connection closed" : n == 1 ? "ran" : "not run");
	cr_assert(n != 0, "the backend answered the count but did not run the write");
	return n == 1;
}

/*
 * `runs` runs of seq on one connection; the number of wrong outcomes. A
 * network error reply (the backend closed the connection after the write,
 * as mongo-java-server does; the same as a driver gets straight from it) is
 * allowed only when net_errors_ok; no reply at all never is.
 */
static int count_wrong(int (*connect_fn)(void *), void *arg, enum seq seq, int runs,
		       const char *db, const char *coll, int64_t want, bool net_errors_ok,
		       int *unanswered)
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

static void close_fds_above(int lowfd)
{
	for (int fd = lowfd; fd < 1024; fd++)
		close(fd);
}

/* Run the script, output into out; the wait status, -1 if it was killed. */
static int run_script(const char *const argv[], char *out, size_t outlen, int timeout_ms)
{
	int pipefd[2], st = -1;
	size_t got = 0;
	int64_t deadline = h_now_ms() + timeout_ms;
	pid_t pid;

	cr_assert(pipe2(pipefd, O_CLOEXEC) == 0);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null_fd, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		close_fds_above(3);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
		int64_t left = deadline - h_now_ms();
		char buf[4096];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			st = -1;
			break;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(pipefd[0], buf, sizeof(buf));
		if (n <= 0) {
			waitpid(pid, &st, 0);
			break;
		}
		if (got + (size_t)n < outlen) {
			memcpy(out + got, buf, (size_t)n);
			got += (size_t)n;
		}
	}
	out[got] = '\0';
	close(pipefd[0]);
	return st;
}

/* pymongo 3.11, maxPoolSize=1, w=0: the bulk x100 and insert-then-count
 * x300 through the proxy, all right (details in ordering_pymongo.py). */
Test(ordering, pymongo_w0_in_order, .timeout = 600)
{
	struct proxy *p = proxy_start(NULL);
	char db[64], bulk[16], count[16];
	char *out = calloc(1, 65536);
	const char *argv[8];
	int st;

	h_unique(db, sizeof(db), "it_orderpy");
	snprintf(bulk, sizeof(bulk), "%d", BULK_RUNS);
	snprintf(count, sizeof(count), "%d", COUNT_RUNS);
	argv[0] = PYTHON;
	argv[1] = ORDER_SCRIPT;
	argv[2] = p->uri;
	argv[3] = h_backend_uri();
	argv[4] = db;
	argv[5] = bulk;
	argv[6] = count;
	argv[7] = NULL;
	st = run_script(argv, out, 65536, 580000);
	cr_log_info("ordering_pymongo.py:\n%s", out);
	proxy_assert_alive(p, "during ordering_pymongo.py");
	cr_assert(st != -1, "ordering_pymongo.py did not finish in time:\n%s", out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "pymongo's w:0 operations through the proxy ran out of order:\n%s", out);
	free(out);
	proxy_stop(p);
}
