/*
 * test_admission.c — admission control under load: fair queuing across
 * clients (one client pipelining batches of 1,000 requests beside 50
 * well-behaved ones; the order of service read from the proxy's debug
 * log), max_queue with 2,000 concurrent
 * requests, max_client_conn, query_timeout_ms and queue_timeout_ms against a slow backend, and what
 * pymongo does with the proxy's overload errors (retry_pymongo.py).
 *
 * Slow replies come from a scripted mockupdb backend (mock_backend.py, run
 * with /usr/bin/python3, which has Debian's pymongo and mockupdb): a command
 * on a collection named "d<MS>_..." is answered after MS milliseconds.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

#define PYTHON	     "/usr/bin/python3"
#define MOCK_SCRIPT  MP_SOURCE_DIR "/tests/integration/mock_backend.py"
#define RETRY_SCRIPT MP_SOURCE_DIR "/tests/integration/retry_pymongo.py"

#define OVERLOAD_CODE	  462
#define OVERLOAD_CODENAME "IngressRequestRateLimitExceeded"

/* ================================================================ helpers */

/* A mockupdb backend process (mock_backend.py). Its stdin is a pipe we hold:
 * it exits when we close it, or die. */
struct mock {
	pid_t pid;
	int port;
	int stdin_fd;
	char uri[64];
};

/* In a forked child: close every inherited descriptor from lowfd up. */
static struct mock *mock_start(int wire)
{
	struct mock *m = calloc(1, sizeof(*m));
	int in[2], out[2];
	char wire_s[16], line[128];
	size_t got = 0;
	int64_t deadline;

	cr_assert(m != NULL);
	cr_assert(access(PYTHON, X_OK) == 0, "%s not found (Debian python3 with mockupdb)", PYTHON);
	cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0, "pipe: %s",
		  strerror(errno));
	snprintf(wire_s, sizeof(wire_s), "%d", wire);
	fflush(NULL);
	m->pid = fork();
	cr_assert(m->pid >= 0, "fork: %s", strerror(errno));
	if (m->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], 0);
		dup2(out[1], 1);
		h_close_fds_above(3);
		signal(SIGPIPE, SIG_DFL);
		execl(PYTHON, PYTHON, MOCK_SCRIPT, "--wire", wire_s, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	m->stdin_fd = in[1];
	/* "port N\n" */
	deadline = h_now_ms() + 20000;
	while (memchr(line, '\n', got) == NULL && got < sizeof(line) - 1) {
		struct pollfd pfd = {.fd = out[0], .events = POLLIN};
		int64_t left = deadline - h_now_ms();
		ssize_t n;

		cr_assert(left > 0, "mock_backend.py did not print its port within 20 s");
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(out[0], line + got, sizeof(line) - 1 - got);
		cr_assert(n > 0,
			  "mock_backend.py exited before listening (is python3-mockupdb "
			  "installed for %s?)",
			  PYTHON);
		got += (size_t)n;
	}
	line[got] = '\0';
	close(out[0]);
	cr_assert(sscanf(line, "port %d", &m->port) == 1 && m->port > 0, "mock_backend.py said: %s",
		  line);
	snprintf(m->uri, sizeof(m->uri), "mongodb://127.0.0.1:%d/", m->port);
	return m;
}

static void mock_stop(struct mock *m)
{
	if (m == NULL)
		return;
	kill(m->pid, SIGTERM);
	close(m->stdin_fd);
	waitpid(m->pid, NULL, 0);
	free(m);
}

/* A proxy in front of the mock: "backend_uri = ...\n" + extra. */
static struct proxy *proxy_on_mock(struct mock *m, const char *extra)
{
	char cfg[1024];

	snprintf(cfg, sizeof(cfg), "backend_uri = %s\n%s", m->uri, extra);
	return proxy_start(cfg);
}

/* {find: coll, filter: {n: n}, $db: db} */
static bson_t *find_cmd(const char *db, const char *coll, int n)
{
	return BCON_NEW("find", BCON_UTF8(coll), "filter", "{", "n", BCON_INT32(n), "}", "$db",
			BCON_UTF8(db));
}

static bool send_cmd(int fd, int32_t request_id, const bson_t *cmd)
{
	struct h_buf b;
	bool ok;

	hb_init(&b);
	h_build_msg(&b, request_id, 0, cmd);
	ok = raw_send(fd, b.data, b.len);
	hb_free(&b);
	return ok;
}

/* Receive one reply: its body copied to *doc, its responseTo to *response_to. */
static enum raw_status recv_reply(int fd, int timeout_ms, bson_t *doc, int32_t *response_to)
{
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	enum raw_status st = raw_recv_msg(fd, &msg, &len, timeout_ms);

	bson_init(doc);
	if (st != RAW_OK)
		return st;
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc || r.opcode != H_WIRE_OP_MSG) {
		free(msg);
		return RAW_ERROR;
	}
	bson_destroy(doc);
	bson_copy_to(&r.doc, doc);
	if (response_to != NULL)
		*response_to = r.response_to;
	free(msg);
	return RAW_OK;
}

/* Send cmd on fd and wait for its reply (fails the test on no reply). */
static void roundtrip(int fd, int32_t request_id, const bson_t *cmd, bson_t *reply, int timeout_ms,
		      const char *what)
{
	int32_t rt = 0;
	enum raw_status st;

	cr_assert(send_cmd(fd, request_id, cmd), "%s: send failed", what);
	st = recv_reply(fd, timeout_ms, reply, &rt);
	cr_assert(st == RAW_OK, "%s: no reply (%s)", what, raw_status_name(st));
	cr_assert_eq(rt, request_id, "%s: reply to %d, expected %d", what, rt, request_id);
}

/* The proxy's overload refusal naming `limit` in its errmsg? (no asserts:
 * usable from any thread; *why says what is wrong) */
static bool is_overload_error(const bson_t *reply, const char *limit, const char **why)
{
	const char *cn = h_get_str(reply, "codeName"), *msg = h_get_str(reply, "errmsg");

	*why = NULL;
	if (h_get_int(reply, "ok", 1) != 0)
		*why = "ok is not 0";
	else if (h_get_int(reply, "code", 0) != OVERLOAD_CODE)
		*why = "code is not 462";
	else if (cn == NULL || strcmp(cn, OVERLOAD_CODENAME) != 0)
		*why = "codeName is not " OVERLOAD_CODENAME;
	else if (!h_has_label(reply, "SystemOverloadedError"))
		*why = "no SystemOverloadedError label";
	else if (!h_has_label(reply, "RetryableError"))
		*why = "no RetryableError label";
	else if (msg == NULL || strstr(msg, limit) == NULL)
		*why = "errmsg does not name the limit";
	return *why == NULL;
}

static void assert_overload_error(const bson_t *reply, const char *limit, const char *what)
{
	const char *why;
	char *json;

	if (is_overload_error(reply, limit, &why))
		return;
	json = bson_as_relaxed_extended_json(reply, NULL);
	cr_assert_fail("%s: expected the overload refusal (code %d %s, labels "
		       "SystemOverloadedError + RetryableError, errmsg naming %s): %s; got %s",
		       what, OVERLOAD_CODE, OVERLOAD_CODENAME, limit, why, json);
}

static void assert_ok(const bson_t *reply, const char *what)
{
	char *json;

	if (h_get_int(reply, "ok", 0) == 1)
		return;
	json = bson_as_relaxed_extended_json(reply, NULL);
	cr_assert_fail("%s: expected ok: 1, got %s", what, json);
}

/* n echoed by the mock's find reply (cursor.firstBatch.0.n), or -1. */
static int64_t echoed_n(const bson_t *reply)
{
	return h_get_int(reply, "cursor.firstBatch.0.n", -1);
}

/* mongoplexStats over a raw socket (answered by the proxy itself, so it
 * works while the pool is saturated and without opening a connection). */
static void raw_stats(int fd, bson_t *out)
{
	static int32_t id = 900000;
	bson_t *cmd = BCON_NEW("mongoplexStats", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	roundtrip(fd, id++, cmd, out, 10000, "mongoplexStats");
	assert_ok(out, "mongoplexStats");
	bson_destroy(cmd);
}

/* Poll mongoplexStats on fd until path == want (or timeout); returns the last value. */
static int64_t wait_stat(int fd, const char *path, int64_t want, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms, v;

	for (;;) {
		bson_t st;

		raw_stats(fd, &st);
		v = h_get_int(&st, path, -1);
		bson_destroy(&st);
		if (v == want || h_now_ms() > deadline)
			return v;
		h_sleep_ms(10);
	}
}

static int count_keys(const bson_t *doc, const char *path)
{
	bson_iter_t it, child;
	int n = 0;

	if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &child) ||
	    !BSON_ITER_HOLDS_ARRAY(&child) || !bson_iter_recurse(&child, &it))
		return -1;
	while (bson_iter_next(&it))
		n++;
	return n;
}

/* ================================================================ (a) fairness */

#define FAIR_INFLIGHT	16   /* max_inflight_per_client (the default) */
#define FAIR_GREEDY	1000 /* one batch of the greedy pipeline */
#define FAIR_GREEDY_MAX (20 * FAIR_GREEDY)
#define FAIR_CLIENTS	50
#define FAIR_REQS	20
#define FAIR_DOCS	3

/*
 * What is asserted is the order of service in the proxy, read from its log
 * (fair_order below): it depends only on the queue. The clients' own view,
 * "greedy replies that arrived while a well-behaved request waited", is
 * logged beside it; it still depends on when our threads, the proxy and
 * the backend get a CPU (it once failed in CI under load), so it is not
 * asserted. To blur it as little as possible every stamp is on
 * CLOCK_REALTIME in nanoseconds and comes from the kernel where it matters:
 *  - a greedy reply: the kernel's receive time of its last byte
 *    (SO_TIMESTAMPNS). Two things would still blur it, and are prevented:
 *    TCP flow control holding replies back in the proxy while our reader
 *    lags (the receive buffer is made big enough for all replies), and
 *    TCP coalescing unread segments, which gives all of them the newest
 *    arrival time (the reader runs SCHED_FIFO when allowed, and so never
 *    lags by more than microseconds);
 *  - a well-behaved request: from the moment its bytes were handed to the
 *    kernel to the kernel's receive time of its reply (ts_stream below).
 */
static int64_t now_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Read exactly n bytes; *ts_ns = kernel receive time of the last chunk. */
static enum raw_status recv_full_ts(int fd, uint8_t *buf, size_t n, int64_t deadline_ms,
				    int64_t *ts_ns)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		struct iovec iov = {.iov_base = buf + got, .iov_len = n - got};
		union {
			char buf[CMSG_SPACE(sizeof(struct timespec))];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf)};
		int64_t left = deadline_ms - h_now_ms();
		ssize_t r;
		int pr;

		if (left <= 0)
			return RAW_TIMEOUT;
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno != EINTR)
			return RAW_ERROR; /* never spin: this may run SCHED_FIFO */
		if (pr <= 0)
			continue;
		r = recvmsg(fd, &mh, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? RAW_EOF : RAW_ERROR;
		got += (size_t)r;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;

				memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
				*ts_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
			}
	}
	return RAW_OK;
}

/*
 * The well-behaved clients are libmongoc clients whose connections go
 * through this stream (mongoc_client_set_stream_initiator): a plain TCP
 * socket that records when a request has been handed to the kernel and the
 * kernel's receive time of the last byte of the reply (SO_TIMESTAMPNS). So
 * a client thread that waits for a CPU before sending or after its reply
 * arrived does not stretch the measured wait. Its local port names the
 * connection in the proxy's log.
 */
struct ts_ctx {
	int64_t sent_ns; /* last writev completed */
	int64_t rx_ns;	 /* kernel arrival of the last bytes read */
	int port;	 /* local port of the connection: names it in the proxy's log */
};

struct ts_stream {
	mongoc_stream_t vt;
	int fd;
	int err; /* errno of the last operation that did not complete */
	struct ts_ctx *ctx;
};

#define TS_STREAM_TYPE 0x4d50 /* not one of libmongoc's own stream types */

static int64_t expire_of(int32_t timeout_msec)
{
	return timeout_msec < 0 ? -1 : h_now_ms() + timeout_msec;
}

/* Wait for `events` until expire (-1: forever). false: timed out (err set). */
static bool ts_wait(struct ts_stream *s, short events, int64_t expire)
{
	for (;;) {
		struct pollfd pfd = {.fd = s->fd, .events = events};
		int64_t left = expire < 0 ? -1 : expire - h_now_ms();
		int r;

		if (expire >= 0 && left <= 0) {
			s->err = ETIMEDOUT;
			return false;
		}
		r = poll(&pfd, 1, (int)left);
		if (r > 0)
			return true;
		if (r < 0 && errno != EINTR) {
			s->err = errno;
			return false;
		}
	}
}

static ssize_t ts_writev(mongoc_stream_t *stream, mongoc_iovec_t *iov, size_t iovcnt,
			 int32_t timeout_msec)
{
	struct ts_stream *s = (struct ts_stream *)stream;
	int64_t expire = expire_of(timeout_msec);
	ssize_t done = 0;
	size_t cur = 0;

	s->err = 0;
	while (cur < iovcnt) {
		struct msghdr mh = {.msg_iov = (struct iovec *)&iov[cur],
				    .msg_iovlen = iovcnt - cur};
		ssize_t n = sendmsg(s->fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			s->err = EAGAIN;
			if (timeout_msec == 0 || !ts_wait(s, POLLOUT, expire))
				break;
			continue;
		}
		if (n < 0) {
			s->err = errno;
			break;
		}
		done += n;
		while (cur < iovcnt && (size_t)n >= iov[cur].iov_len)
			n -= (ssize_t)iov[cur++].iov_len;
		if (cur < iovcnt) {
			iov[cur].iov_base = (char *)iov[cur].iov_base + n;
			iov[cur].iov_len -= (size_t)n;
		}
	}
	if (done == 0 && s->err != 0) {
		errno = s->err;
		return -1;
	}
	s->ctx->sent_ns = now_real_ns();
	return done;
}

static ssize_t ts_readv(mongoc_stream_t *stream, mongoc_iovec_t *iov, size_t iovcnt,
			size_t min_bytes, int32_t timeout_msec)
{
	struct ts_stream *s = (struct ts_stream *)stream;
	int64_t expire = expire_of(timeout_msec);
	ssize_t ret = 0;
	size_t cur = 0;

	s->err = 0;
	while (cur < iovcnt) {
		union {
			char buf[CMSG_SPACE(sizeof(struct timespec))];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = {.msg_iov = (struct iovec *)&iov[cur],
				    .msg_iovlen = iovcnt - cur,
				    .msg_control = ctl.buf,
				    .msg_controllen = sizeof(ctl.buf)};
		ssize_t n = recvmsg(s->fd, &mh, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			s->err = EAGAIN;
			if (ret >= (ssize_t)min_bytes && (ret > 0 || timeout_msec == 0))
				return ret;
			if (timeout_msec == 0 || !ts_wait(s, POLLIN, expire))
				break;
			continue;
		}
		if (n <= 0) {
			s->err = n == 0 ? ECONNRESET : errno;
			break;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;

				memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
				s->ctx->rx_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
			}
		ret += n;
		while (cur < iovcnt && (size_t)n >= iov[cur].iov_len)
			n -= (ssize_t)iov[cur++].iov_len;
		if (cur < iovcnt) {
			iov[cur].iov_base = (char *)iov[cur].iov_base + n;
			iov[cur].iov_len -= (size_t)n;
		}
		if (ret >= (ssize_t)min_bytes && cur < iovcnt)
			return ret;
	}
	if (ret >= (ssize_t)min_bytes && (ret > 0 || s->err == EAGAIN))
		return ret;
	errno = s->err;
	return -1;
}

static int ts_close(mongoc_stream_t *stream)
{
	struct ts_stream *s = (struct ts_stream *)stream;

	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	return 0;
}

static void ts_destroy(mongoc_stream_t *stream)
{
	ts_close(stream);
	free(stream);
}

static int ts_flush(mongoc_stream_t *stream)
{
	(void)stream;
	return 0;
}

static int ts_setsockopt(mongoc_stream_t *stream, int level, int optname, void *optval,
			 mongoc_socklen_t optlen)
{
	return setsockopt(((struct ts_stream *)stream)->fd, level, optname, optval, optlen);
}

static bool ts_check_closed(mongoc_stream_t *stream)
{
	struct ts_stream *s = (struct ts_stream *)stream;
	struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
	char c;

	if (s->fd < 0)
		return true;
	if (poll(&pfd, 1, 0) <= 0)
		return false;
	if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL))
		return true;
	return recv(s->fd, &c, 1, MSG_PEEK) <= 0;
}

static ssize_t ts_poll(mongoc_stream_poll_t *streams, size_t nstreams, int32_t timeout)
{
	struct pollfd *pfds = calloc(nstreams, sizeof(*pfds));
	int r;

	for (size_t i = 0; i < nstreams; i++)
		pfds[i] = (struct pollfd){.fd = ((struct ts_stream *)streams[i].stream)->fd,
					  .events = (short)streams[i].events};
	r = poll(pfds, (nfds_t)nstreams, timeout);
	for (size_t i = 0; r >= 0 && i < nstreams; i++)
		streams[i].revents = pfds[i].revents;
	free(pfds);
	return r;
}

static void ts_failed(mongoc_stream_t *stream)
{
	ts_destroy(stream);
}

static bool ts_timed_out(mongoc_stream_t *stream)
{
	return ((struct ts_stream *)stream)->err == ETIMEDOUT;
}

static bool ts_should_retry(mongoc_stream_t *stream)
{
	return ((struct ts_stream *)stream)->err == EAGAIN;
}

static int local_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	return getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 ? ntohs(sa.sin_port) : -1;
}

static mongoc_stream_t *ts_initiator(const mongoc_uri_t *uri, const mongoc_host_list_t *host,
				     void *user_data, bson_error_t *error)
{
	struct ts_stream *s;
	int fd = raw_connect_to(host->host, host->port), one = 1;

	(void)uri;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
		bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT,
			       "cannot connect to %s", host->host_and_port);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	s->fd = fd;
	s->ctx = user_data;
	s->ctx->port = local_port(fd);
	s->vt.type = TS_STREAM_TYPE;
	s->vt.destroy = ts_destroy;
	s->vt.close = ts_close;
	s->vt.flush = ts_flush;
	s->vt.writev = ts_writev;
	s->vt.readv = ts_readv;
	s->vt.setsockopt = ts_setsockopt;
	s->vt.check_closed = ts_check_closed;
	s->vt.poll = ts_poll;
	s->vt.failed = ts_failed;
	s->vt.timed_out = ts_timed_out;
	s->vt.should_retry = ts_should_retry;
	return &s->vt;
}

struct fair {
	const char *uri;
	char db[64];
	int greedy_fd;
	int greedy_port, wb_port[FAIR_CLIENTS]; /* local ports: C-<id> in the proxy's log */
	pthread_barrier_t start, go;
	/* greedy sender and reader */
	atomic_int greedy_sent, greedy_read, wb_done;
	atomic_bool greedy_stop, greedy_reader_done;
	int greedy_ok, greedy_bad, greedy_dups, greedy_no_kernel_ts;
	bool greedy_rt_prio;
	enum raw_status greedy_status;
	int64_t greedy_ts[FAIR_GREEDY_MAX]; /* arrival of the i-th greedy reply */
	/* well-behaved request k of client i waited from t0 to t1 */
	int64_t t0[FAIR_CLIENTS][FAIR_REQS], t1[FAIR_CLIENTS][FAIR_REQS];
	atomic_int wb_ok, wb_failed;
	pthread_mutex_t mu;
	char first_error[512];
};

struct fair_worker {
	struct fair *f;
	int tid;
};

/* A forwarded command with a small reply ({n: FAIR_DOCS, ok: 1}): never
 * batched, answered by the backend. */
static bson_t *fair_cmd(const char *db)
{
	return db != NULL ? BCON_NEW("count", BCON_UTF8("fair"), "query", "{", "n", "{", "$gte",
				     BCON_INT32(0), "}", "}", "$db", BCON_UTF8(db))
			  : BCON_NEW("count", BCON_UTF8("fair"), "query", "{", "n", "{", "$gte",
				     BCON_INT32(0), "}", "}");
}

static void fair_error(struct fair *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fair_error(struct fair *f, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&f->mu);
	if (f->first_error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(f->first_error, sizeof(f->first_error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&f->mu);
}

/* The greedy socket, with a receive buffer that holds all its replies
 * (~50 B each): they enter it the moment the proxy sends them, even if the
 * reader is late, instead of waiting in the proxy for the TCP window. */
static int greedy_connect(int port, int *rcvbuf)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, want = 4 << 20;
	socklen_t sl = sizeof(*rcvbuf);

	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) != 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, rcvbuf, &sl);
	return fd;
}

static bool greedy_send_batch(struct fair *f, const bson_t *cmd, int first_id)
{
	struct h_buf all;
	bool ok;

	hb_init(&all);
	for (int i = 0; i < FAIR_GREEDY; i++) {
		struct h_buf one;

		hb_init(&one);
		h_build_msg(&one, first_id + i, 0, cmd);
		hb_add(&all, one.data, one.len);
		hb_free(&one);
	}
	ok = raw_send(f->greedy_fd, all.data, all.len);
	if (!ok)
		fair_error(f, "greedy: send failed: %s", strerror(errno));
	hb_free(&all);
	return ok;
}

/*
 * The greedy pipeline: batches of FAIR_GREEDY requests, the next one sent
 * whenever fewer than FAIR_GREEDY are unanswered, until every well-behaved
 * client is done. So the greedy client has requests waiting in the proxy
 * during the whole measured phase, however fast it is served (on a busy
 * machine the well-behaved threads may not send for a while, and it is
 * then served alone); the proxy reads FAIR_INFLIGHT at a time. The
 * well-behaved clients start once its first reply is back: their first
 * requests already find it queued.
 */
static void *greedy_sender(void *arg)
{
	struct fair *f = arg;
	bson_t *cmd = fair_cmd(f->db);
	bool released = false;
	int sent = 0;

	while (sent + FAIR_GREEDY <= FAIR_GREEDY_MAX && greedy_send_batch(f, cmd, sent + 1)) {
		sent += FAIR_GREEDY;
		atomic_store(&f->greedy_sent, sent);
		for (;;) {
			int unanswered = sent - atomic_load(&f->greedy_read);

			if (!released &&
			    (unanswered < sent || atomic_load(&f->greedy_reader_done))) {
				pthread_barrier_wait(&f->go);
				released = true;
			}
			if ((released && atomic_load(&f->wb_done) == FAIR_CLIENTS) ||
			    atomic_load(&f->greedy_reader_done))
				goto out;
			if (released && unanswered < FAIR_GREEDY)
				break;
			usleep(1000);
		}
	}
out:
	if (!released)
		pthread_barrier_wait(&f->go);
	atomic_store(&f->greedy_stop, true);
	bson_destroy(cmd);
	return NULL;
}

static void *greedy_reader(void *arg)
{
	struct fair *f = arg;
	bool *seen = calloc(FAIR_GREEDY_MAX + 1, sizeof(bool));
	int64_t deadline = h_now_ms() + 120000;
	struct sched_param sp = {.sched_priority = 1};

	/* See greedy_connect: the reader should never lag. A real-time
	 * priority (when allowed) keeps it ahead of everything else. */
	f->greedy_rt_prio = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;

	f->greedy_status = RAW_OK;
	for (int n = 0;; n++) {
		uint8_t hdr[16], *msg;
		int32_t len;
		int64_t ts = 0;
		struct raw_reply r;
		enum raw_status st;

		/* Every reply owed is read; stop once the sender has stopped. */
		while (n == atomic_load(&f->greedy_sent) && !atomic_load(&f->greedy_stop))
			usleep(1000);
		if (n == atomic_load(&f->greedy_sent))
			break;
		st = recv_full_ts(f->greedy_fd, hdr, 16, deadline, &ts);
		if (st == RAW_OK) {
			memcpy(&len, hdr, 4);
			len = (int32_t)BSON_UINT32_FROM_LE((uint32_t)len);
			st = len >= 16 && len < 1 << 24 ? RAW_OK : RAW_ERROR;
		}
		if (st != RAW_OK) {
			f->greedy_status = st;
			break;
		}
		msg = malloc((size_t)len);
		memcpy(msg, hdr, 16);
		st = recv_full_ts(f->greedy_fd, msg + 16, (size_t)len - 16, deadline, &ts);
		if (st != RAW_OK) {
			f->greedy_status = st;
			free(msg);
			break;
		}
		if (ts == 0) {
			f->greedy_no_kernel_ts++;
			ts = now_real_ns();
		}
		f->greedy_ts[n] = ts;
		atomic_store(&f->greedy_read, n + 1);
		if (!raw_parse_reply(msg, (size_t)len, &r) || !r.have_doc) {
			f->greedy_bad++;
		} else if (r.response_to < 1 || r.response_to > FAIR_GREEDY_MAX ||
			   seen[r.response_to]) {
			f->greedy_dups++;
		} else {
			seen[r.response_to] = true;
			if (h_get_int(&r.doc, "ok", 0) == 1 &&
			    h_get_int(&r.doc, "n", -1) == FAIR_DOCS)
				f->greedy_ok++;
			else
				f->greedy_bad++;
		}
		free(msg);
	}
	atomic_store(&f->greedy_reader_done, true);
	free(seen);
	return NULL;
}

static void *fair_worker_main(void *arg)
{
	struct fair_worker *w = arg;
	struct fair *f = w->f;
	struct ts_ctx ts = {0, 0, -1};
	char app[32];
	mongoc_client_t *c;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1)), *cmd = fair_cmd(NULL), reply;
	bson_error_t err;
	bool connected;

	snprintf(app, sizeof(app), "itest-fair-%d", w->tid);
	c = h_client_uri(f->uri, app);
	if (c != NULL)
		mongoc_client_set_stream_initiator(c, ts_initiator, &ts);
	/* Handshake before the start line, so each measured call is one command. */
	connected = c != NULL && h_cmd(c, "admin", ping, &reply, &err);
	if (c != NULL)
		bson_destroy(&reply);
	if (!connected)
		fair_error(f, "client %d cannot connect: %s", w->tid, c ? err.message : "-");
	f->wb_port[w->tid] = ts.port;
	pthread_barrier_wait(&f->start);
	/* Request -1 is not measured (the 50 threads wake up together); the
	 * greedy client starts sending when all 50 have had its answer. */
	for (int i = -1; i < FAIR_REQS; i++) {
		bool ok;

		if (i == 0)
			pthread_barrier_wait(&f->go);
		if (!connected)
			continue;

		ts.sent_ns = ts.rx_ns = 0;
		ok = h_cmd(c, f->db, cmd, &reply, &err);
		if (i >= 0) {
			f->t0[w->tid][i] = ts.sent_ns;
			f->t1[w->tid][i] = ts.rx_ns;
			/* rx < sent: the thread lost its CPU right after sending and
			 * the reply came first; the wait then counts as empty. */
			if (ok && (ts.sent_ns == 0 || ts.rx_ns == 0))
				fair_error(f, "client %d request %d: no send/receive timestamps",
					   w->tid, i);
		}
		if (ok && h_get_int(&reply, "n", -1) == FAIR_DOCS) {
			atomic_fetch_add(&f->wb_ok, 1);
		} else {
			atomic_fetch_add(&f->wb_failed, 1);
			fair_error(f, "client %d request %d: %s", w->tid, i,
				   ok ? "wrong count" : err.message);
		}
		bson_destroy(&reply);
	}
	atomic_fetch_add(&f->wb_done, 1); /* the greedy sender stops when all are */
	bson_destroy(cmd);
	bson_destroy(ping);
	if (c != NULL)
		mongoc_client_destroy(c);
	return NULL;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Number of ts[] strictly inside (lo, hi). */
static int count_between(const int64_t *ts, int n, int64_t lo, int64_t hi)
{
	int c = 0;

	for (int i = 0; i < n; i++)
		c += ts[i] > lo && ts[i] < hi;
	return c;
}

/*
 * The order of service, read from the proxy's own log (log_level = debug):
 * "C-<id> 127.0.0.1:<port>: connected" names each of our connections, and
 * "R-<id> (client) C-<id> <from> -> <to>" is every move of a request, in
 * the order the proxy's one event loop made them. A well-behaved request
 * arrives at its first line ("new -> queued", or "new -> running" when a
 * connection was idle) and is dispatched at "-> running"; we count the
 * greedy dispatches between the two. Nothing here depends on when our
 * threads, the proxy or the backend get a CPU: only on the queue.
 */
struct fair_order {
	uint64_t greedy_cid, wb_cid[FAIR_CLIENTS];
	int greedy_dispatched; /* greedy "-> running" lines so far */
	int greedy_queued;     /* greedy requests in the queue now */
	struct {
		uint64_t open; /* the request between arrival and dispatch, 0: none */
		int at;	       /* greedy_dispatched when it arrived */
		bool contended;
		int forwarded; /* its requests dispatched so far (the first is not measured) */
	} wb[FAIR_CLIENTS];
	int served[FAIR_CLIENTS][FAIR_REQS];	 /* greedy dispatched while request k waited */
	bool contended[FAIR_CLIENTS][FAIR_REQS]; /* the greedy client had one queued */
};

static void order_connected(struct fair_order *o, const struct fair *f, uint64_t cid, int port)
{
	if (port == f->greedy_port)
		o->greedy_cid = cid;
	for (int i = 0; i < FAIR_CLIENTS; i++)
		if (port == f->wb_port[i])
			o->wb_cid[i] = cid;
}

static void order_greedy(struct fair_order *o, const char *from, const char *to)
{
	if (strcmp(to, "running") == 0)
		o->greedy_dispatched++;
	if (strcmp(to, "queued") == 0)
		o->greedy_queued++;
	if (strcmp(from, "queued") == 0)
		o->greedy_queued--;
}

static void order_wb(struct fair_order *o, int i, uint64_t rid, const char *from, const char *to)
{
	int k;

	if (strcmp(from, "new") == 0 && rid != o->wb[i].open) { /* arrival */
		o->wb[i].open = rid;
		o->wb[i].at = o->greedy_dispatched;
		o->wb[i].contended = o->greedy_queued > 0;
	}
	if (strcmp(to, "running") != 0 || rid != o->wb[i].open)
		return;
	k = o->wb[i].forwarded++ - 1;
	o->wb[i].open = 0;
	if (k < 0 || k >= FAIR_REQS)
		return;
	o->served[i][k] = o->greedy_dispatched - o->wb[i].at;
	o->contended[i][k] = o->wb[i].contended;
}

static void order_line(struct fair_order *o, const struct fair *f, const char *line)
{
	const char *d = strstr(line, " debug ");
	uint64_t rid, cid;
	char from[16], to[16];
	int port;

	if (d == NULL)
		return;
	d += strlen(" debug ");
	if (sscanf(d, "C-%" SCNu64 " 127.0.0.1:%d: %15s", &cid, &port, to) == 3 &&
	    strcmp(to, "connected") == 0) {
		order_connected(o, f, cid, port); /* a port seen before: the newest wins */
		return;
	}
	if (sscanf(d, "R-%" SCNu64 " (%*[^)]) C-%" SCNu64 " %15s -> %15s", &rid, &cid, from, to) !=
	    4)
		return;
	if (cid == o->greedy_cid) {
		order_greedy(o, from, to);
		return;
	}
	for (int i = 0; i < FAIR_CLIENTS; i++)
		if (cid == o->wb_cid[i]) {
			order_wb(o, i, rid, from, to);
			return;
		}
}

static void fair_order_read(struct proxy *p, const struct fair *f, struct fair_order *o)
{
	char *log = proxy_log(p), *line = log, *nl;

	memset(o, 0, sizeof(*o));
	for (; *line != '\0'; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl == NULL)
			break; /* a partial last line */
		*nl = '\0';
		order_line(o, f, line);
	}
	free(log);
}

/* What one run of the experiment measured. */
struct fair_result {
	int pool;
	int n;				      /* measured well-behaved requests */
	int served[FAIR_CLIENTS * FAIR_REQS]; /* greedy dispatches per wait (proxy log), sorted */
	int worst_c, worst_k;
	int median, p90, p99, max;
	int contended; /* arrived while the greedy client had a request queued */
	/* What our clients saw (client clocks; logged, not asserted: it
	 * depends on when our threads run). */
	int seen[FAIR_CLIENTS * FAIR_REQS]; /* greedy replies per wait, sorted */
	int seen_median, seen_p90, seen_max;
	int greedy_in_phase, greedy_before, greedy_after;
	double phase_ms;
};

/* The greedy client's first replies, one at a time before the measured
 * phase: a new client's reply size is unknown and assumed to be the
 * max_client_buffer_bytes limit, so until a few replies have taught the
 * proxy their size (proxy/client.c, reply_est halves per reply), only one
 * of its requests may run and the others are skipped in the queue. After
 * these, the greedy client's requests are always dispatchable (its replies
 * total ~60 kB, far below the limit) and the queue is served from its head. */
static void greedy_warm_up(struct fair *f)
{
	bson_t *cmd = fair_cmd(f->db);

	for (int i = 0; i < FAIR_INFLIGHT; i++) {
		int32_t rt = 0;
		bson_t doc;

		cr_assert(send_cmd(f->greedy_fd, FAIR_GREEDY_MAX + 1 + i, cmd),
			  "greedy warm-up send");
		cr_assert_eq(recv_reply(f->greedy_fd, 10000, &doc, &rt), RAW_OK,
			     "greedy warm-up reply");
		cr_assert_eq(h_get_int(&doc, "n", -1), FAIR_DOCS, "greedy warm-up count");
		cr_assert_eq(rt, FAIR_GREEDY_MAX + 1 + i);
		bson_destroy(&doc);
	}
	bson_destroy(cmd);
}

static void fair_client_view(const struct fair *f, struct fair_result *res)
{
	int64_t phase_lo = INT64_MAX, phase_hi = 0;
	int n = 0;

	for (int i = 0; i < FAIR_CLIENTS; i++)
		for (int k = 0; k < FAIR_REQS; k++) {
			res->seen[n++] = count_between(f->greedy_ts, atomic_load(&f->greedy_read),
						       f->t0[i][k], f->t1[i][k]);
			if (f->t0[i][k] < phase_lo)
				phase_lo = f->t0[i][k];
			if (f->t1[i][k] > phase_hi)
				phase_hi = f->t1[i][k];
		}
	qsort(res->seen, (size_t)n, sizeof(int), cmp_int);
	res->seen_median = res->seen[n / 2];
	res->seen_p90 = res->seen[n * 9 / 10];
	res->seen_max = res->seen[n - 1];
	res->phase_ms = (double)(phase_hi - phase_lo) / 1e6;
	res->greedy_in_phase =
	    count_between(f->greedy_ts, atomic_load(&f->greedy_read), phase_lo, phase_hi);
	res->greedy_before = count_between(f->greedy_ts, atomic_load(&f->greedy_read), 0, phase_lo);
	res->greedy_after =
	    count_between(f->greedy_ts, atomic_load(&f->greedy_read), phase_hi, INT64_MAX);
}

/* The proxy's order of service into res; asserts that the log names every
 * client and holds every measured request. */
static void fair_proxy_view(struct proxy *p, const struct fair *f, struct fair_result *res)
{
	struct fair_order *o = calloc(1, sizeof(*o));
	int n = 0;

	cr_assert(o != NULL);
	fair_order_read(p, f, o);
	cr_assert_neq(o->greedy_cid, 0, "the proxy's log does not name the greedy client");
	res->max = -1;
	for (int i = 0; i < FAIR_CLIENTS; i++) {
		cr_assert_neq(o->wb_cid[i], 0, "the proxy's log does not name client %d", i);
		cr_assert_geq(o->wb[i].forwarded, FAIR_REQS + 1,
			      "the proxy's log shows %d of client %d's %d requests dispatched",
			      o->wb[i].forwarded, i, FAIR_REQS + 1);
		for (int k = 0; k < FAIR_REQS; k++) {
			if (o->served[i][k] > res->max) {
				res->max = o->served[i][k];
				res->worst_c = i;
				res->worst_k = k;
			}
			res->contended += o->contended[i][k];
			res->served[n++] = o->served[i][k];
		}
	}
	cr_assert_eq(o->greedy_dispatched, FAIR_INFLIGHT + atomic_load(&f->greedy_sent),
		     "the proxy's log shows %d greedy dispatches, not %d", o->greedy_dispatched,
		     FAIR_INFLIGHT + atomic_load(&f->greedy_sent));
	qsort(res->served, (size_t)n, sizeof(int), cmp_int);
	res->n = n;
	res->median = res->served[n / 2];
	res->p90 = res->served[n * 9 / 10];
	res->p99 = res->served[n * 99 / 100];
	free(o);
}

/*
 * One greedy client pipelines counts on one socket (batches of 1,000, as
 * long as the others run) while 50 libmongoc clients each run 20
 * sequential counts (after one unmeasured);
 * for every well-behaved request we count, in the proxy's log, the greedy
 * requests dispatched between its arrival and its own dispatch. Asserts
 * that everybody got every answer.
 */
static void fair_run(int pool, struct fair_result *res)
{
	char cfg[160];
	struct proxy *p;
	struct fair *f = calloc(1, sizeof(*f));
	struct fair_worker ws[FAIR_CLIENTS];
	pthread_t th[FAIR_CLIENTS], sender, reader;
	mongoc_client_t *c;
	mongoc_collection_t *col;
	bson_t st;
	int rcvbuf = 0;

	snprintf(cfg, sizeof(cfg),
		 "pool_size = %d\nmax_inflight_per_client = %d\nlog_level = debug\n", pool,
		 FAIR_INFLIGHT);
	p = proxy_start(cfg);
	memset(res, 0, sizeof(*res));
	res->pool = pool;
	cr_assert(f != NULL);
	cr_assert_geq(h_raise_nofile(1024), 256);
	f->uri = p->uri;
	h_unique(f->db, sizeof(f->db), "it_fair");
	pthread_mutex_init(&f->mu, NULL);
	pthread_barrier_init(&f->start, NULL, FAIR_CLIENTS + 1);
	pthread_barrier_init(&f->go, NULL, FAIR_CLIENTS + 1);

	c = h_proxy_client(p, "itest-fair-setup");
	col = mongoc_client_get_collection(c, f->db, "fair");
	for (int i = 0; i < FAIR_DOCS; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "n", BCON_INT32(i));
		bson_error_t err;

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "insert: %s",
			  err.message);
		bson_destroy(d);
	}

	for (int i = 0; i < FAIR_CLIENTS; i++) {
		ws[i] = (struct fair_worker){.f = f, .tid = i};
		cr_assert_eq(pthread_create(&th[i], NULL, fair_worker_main, &ws[i]), 0);
	}
	f->greedy_fd = greedy_connect(p->port, &rcvbuf);
	cr_assert(f->greedy_fd >= 0, "greedy connect: %s", strerror(errno));
	f->greedy_port = local_port(f->greedy_fd);
	greedy_warm_up(f);
	cr_assert_eq(pthread_create(&reader, NULL, greedy_reader, f), 0);
	cr_assert_eq(pthread_create(&sender, NULL, greedy_sender, f), 0);
	pthread_barrier_wait(&f->start);
	for (int i = 0; i < FAIR_CLIENTS; i++)
		pthread_join(th[i], NULL);
	pthread_join(sender, NULL);
	pthread_join(reader, NULL);

	fair_client_view(f, res);
	proxy_assert_alive(p, "during the fairness run");
	cr_assert_str_empty(f->first_error, "%s", f->first_error);
	fair_proxy_view(p, f, res);
	proxy_stats(p, &st);
	cr_log_info(
	    "fairness, pool_size %d, max_inflight_per_client %d: %d well-behaved requests "
	    "ok, %d failed; greedy requests %d sent, replies %d ok / %d bad / %d unexpected (read "
	    "status %s). "
	    "Greedy requests the proxy dispatched while one well-behaved request waited in it: "
	    "max %d (client %d request %d), p99 %d, p90 %d, median %d, min %d; %d of %d arrived "
	    "while a greedy request was queued. What the clients saw (client clocks, not "
	    "asserted: %d without a kernel timestamp, SO_RCVBUF %d, reader %s): greedy replies "
	    "per wait max %d, p90 %d, median %d; in the %.0f ms the well-behaved requests took, "
	    "the greedy client got %d replies (%d before, %d after). queue_wait_ms: count %lld, "
	    "sum %.0f",
	    pool, FAIR_INFLIGHT, atomic_load(&f->wb_ok), atomic_load(&f->wb_failed),
	    atomic_load(&f->greedy_sent), f->greedy_ok, f->greedy_bad, f->greedy_dups,
	    raw_status_name(f->greedy_status), res->max, res->worst_c, res->worst_k, res->p99,
	    res->p90, res->median, res->served[0], res->contended, res->n, f->greedy_no_kernel_ts,
	    rcvbuf, f->greedy_rt_prio ? "SCHED_FIFO" : "normal priority", res->seen_max,
	    res->seen_p90, res->seen_median, res->phase_ms, res->greedy_in_phase,
	    res->greedy_before, res->greedy_after,
	    (long long)h_get_int(&st, "histograms.queue_wait_ms.count", -1),
	    (double)h_get_int(&st, "histograms.queue_wait_ms.sum", -1));

	cr_assert_eq(atomic_load(&f->wb_ok), FAIR_CLIENTS * (FAIR_REQS + 1),
		     "only %d of %d well-behaved requests succeeded", atomic_load(&f->wb_ok),
		     FAIR_CLIENTS * (FAIR_REQS + 1));
	cr_assert_eq(f->greedy_ok, atomic_load(&f->greedy_sent),
		     "the greedy client got %d good replies of %d (%d bad, %d unexpected, %s)",
		     f->greedy_ok, atomic_load(&f->greedy_sent), f->greedy_bad, f->greedy_dups,
		     raw_status_name(f->greedy_status));
	/* The experiment means something only if the greedy client had a
	 * request waiting in the queue when (nearly) every well-behaved one
	 * arrived. */
	cr_assert_geq(res->contended, res->n * 9 / 10,
		      "only %d of the %d well-behaved requests arrived while a greedy request was "
		      "queued: no contention to measure",
		      res->contended, res->n);

	h_drop_db(c, f->db);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	bson_destroy(&st);
	close(f->greedy_fd);
	pthread_barrier_destroy(&f->start);
	pthread_barrier_destroy(&f->go);
	pthread_mutex_destroy(&f->mu);
	free(f);
	proxy_stop(p);
}

/*
 * The bound, from the queue discipline alone (pool/pool_dispatch.c). A
 * request gets round max(pool->round, R) + 1, R the highest round of its
 * client's waiting requests, and is inserted after every waiting request
 * of a lower or equal round; dispatching one from the queue raises
 * pool->round to its round. After the warm-up every request here is
 * dispatchable (no reply size unknown, no client's output anywhere near
 * max_client_buffer_bytes), so a connection always takes the head of the
 * queue; the queue is sorted by round, so every waiting request has a
 * round >= pool->round.
 *
 * A well-behaved client has nothing else in flight: its request W gets
 * round pool->round + 1 = r. Ahead of W are the waiting requests of rounds
 * pool->round and r, and the greedy client has at most one per round: at
 * most 2 greedy requests are ahead of W. A greedy request that arrives
 * after W gets a round >= r and goes behind W (and pool->round stays <= r
 * until W is dispatched). So while W waits in the proxy at most 2 greedy
 * requests are dispatched, for EVERY wait and whatever the pool size.
 *
 * That is the fair share of one round. The clients see more (the greedy
 * requests already running on the pool_size connections when W arrived,
 * and, with several connections, greedy replies that overtake W's own
 * reply on the others; the earlier client-side bounds were pool_size + 1
 * plus slack for both), but those depend on when threads and the backend
 * run, not on the queue; they are logged, not asserted.
 *
 * A FIFO queue lets every greedy request already queued (up to
 * max_inflight_per_client = 16) go ahead of a later arrival. Run against a
 * pool_dispatch.c whose enqueue() appends at the tail, both tests below
 * fail: median 15..16 and max 16 greedy dispatches per wait, at either
 * pool size, where the round-robin queue gives median 1 and max 1 (2 when
 * the greedy request of the current round is still queued).
 */
#define FAIR_SHARE 2

static void fair_assert(const struct fair_result *r)
{
	cr_assert_leq(r->max, FAIR_SHARE,
		      "with pool_size %d a well-behaved request waited in the proxy while %d "
		      "greedy requests were dispatched (client %d request %d; median %d, p90 %d); "
		      "the fair queue allows %d: the greedy client is not limited to one request "
		      "per round",
		      r->pool, r->max, r->worst_c, r->worst_k, r->median, r->p90, FAIR_SHARE);
}

Test(admission, fair_queuing_every_wait_bounded_pool_1, .timeout = 180)
{
	struct fair_result *r = calloc(1, sizeof(*r));

	fair_run(1, r);
	fair_assert(r);
	free(r);
}

/* pool_size = 4: the same bound; the queue, not the number of connections,
 * decides who goes next. */
Test(admission, fair_queuing_greedy_pipeline_vs_50_clients_pool_4, .timeout = 180)
{
	struct fair_result *r = calloc(1, sizeof(*r));

	fair_run(4, r);
	fair_assert(r);
	free(r);
}

/* ================================================================ (b) max_queue */

#define QF_CLIENTS 2000
#define QF_QUEUE   100
#define QF_POOL	   2
#define QF_RSS_MAX (200L * 1024) /* kB */

struct rss_sampler {
	struct proxy *p;
	atomic_bool stop;
	long peak_kb;
	int samples;
};

static void *rss_sampler_main(void *arg)
{
	struct rss_sampler *s = arg;

	while (!atomic_load(&s->stop)) {
		long kb = proxy_rss_kb(s->p);

		if (kb > s->peak_kb)
			s->peak_kb = kb;
		s->samples++;
		h_sleep_ms(5);
	}
	return NULL;
}

/*
 * 2,000 connections each send one find at (nearly) the same moment to a
 * backend that takes 50 ms per reply, through pool_size 2 and max_queue
 * 100: every reply is either the right answer or the labelled overload
 * refusal naming max_queue, and the proxy's memory stays bounded.
 */
Test(admission, max_queue_2000_concurrent_requests, .timeout = 180)
{
	struct mock *m;
	struct proxy *p;
	struct rss_sampler rs = {0};
	pthread_t sampler;
	int *fds = calloc(QF_CLIENTS, sizeof(int));
	bool *done = calloc(QF_CLIENTS, sizeof(bool));
	int served = 0, refused = 0, bad = 0, pending = QF_CLIENTS, stat_fd, first_refused[10];
	char first_bad[600] = "";
	long limit, rss_before;
	int64_t deadline;
	bson_t st;
	char cfg[256];

	limit = h_raise_nofile(4500);
	if (limit < 4500)
		h_cannot_run("RLIMIT_NOFILE cannot be raised to 4500 (got %ld; "
			     "MONGOPLEX_ALLOW_SKIPS=1 to skip)",
			     limit);
	m = mock_start(9);
	snprintf(cfg, sizeof(cfg), "pool_size = %d\nmax_queue = %d\n", QF_POOL, QF_QUEUE);
	p = proxy_on_mock(m, cfg);
	stat_fd = raw_connect(p);
	cr_assert(stat_fd >= 0);
	rss_before = proxy_rss_kb(p);
	rs.p = p;
	cr_assert_eq(pthread_create(&sampler, NULL, rss_sampler_main, &rs), 0);

	for (int i = 0; i < QF_CLIENTS; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0, "connection %d of %d failed", i + 1, QF_CLIENTS);
	}
	/* One find per connection, back to back; n = i is echoed in the reply. */
	for (int i = 0; i < QF_CLIENTS; i++) {
		bson_t *cmd = find_cmd("adm", "d50_q", i);

		cr_assert(send_cmd(fds[i], i + 1, cmd), "send on connection %d failed", i);
		bson_destroy(cmd);
	}
	deadline = h_now_ms() + 90000;
	while (pending > 0 && h_now_ms() < deadline) {
		struct pollfd *pfds = calloc((size_t)pending, sizeof(*pfds));
		int *idx = calloc((size_t)pending, sizeof(int)), np = 0, r;

		for (int i = 0; i < QF_CLIENTS; i++)
			if (!done[i]) {
				pfds[np] = (struct pollfd){.fd = fds[i], .events = POLLIN};
				idx[np++] = i;
			}
		r = poll(pfds, (nfds_t)np, 1000);
		for (int k = 0; r > 0 && k < np; k++) {
			int i = idx[k];
			bson_t reply;
			int32_t rt = 0;
			enum raw_status s;
			const char *why = NULL;

			if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			s = recv_reply(fds[i], 5000, &reply, &rt);
			done[i] = true;
			pending--;
			if (s == RAW_OK && rt == i + 1 && h_get_int(&reply, "ok", 0) == 1 &&
			    echoed_n(&reply) == i) {
				served++;
			} else if (s == RAW_OK && rt == i + 1 &&
				   is_overload_error(&reply, "max_queue", &why)) {
				if (refused++ < 10)
					first_refused[refused - 1] = i;
			} else {
				char *json = bson_as_relaxed_extended_json(&reply, NULL);

				if (bad++ == 0)
					snprintf(
					    first_bad, sizeof(first_bad),
					    "connection %d: %s, responseTo %d (want %d), %s%s%s", i,
					    raw_status_name(s), rt, i + 1, json, why ? ": " : "",
					    why ? why : "");
				bson_free(json);
			}
			bson_destroy(&reply);
		}
		free(pfds);
		free(idx);
	}
	atomic_store(&rs.stop, true);
	pthread_join(sampler, NULL);
	raw_stats(stat_fd, &st);
	cr_log_info("max_queue: %d concurrent finds (50 ms each) on pool_size %d, max_queue %d: "
		    "%d served, %d refused (462), %d bad, %d without reply; refused_queue_full "
		    "%lld; proxy RSS %ld kB before, peak %ld kB over %d samples",
		    QF_CLIENTS, QF_POOL, QF_QUEUE, served, refused, bad, pending,
		    (long long)h_get_int(&st, "counters.refused_queue_full", -1), rss_before,
		    rs.peak_kb, rs.samples);

	proxy_assert_alive(p, "under 2,000 concurrent requests");
	cr_assert_eq(pending, 0, "%d requests got no reply within 90 s", pending);
	cr_assert_eq(bad, 0,
		     "%d replies were neither the answer nor the overload refusal; first: %s", bad,
		     first_bad);
	cr_assert_eq(served + refused, QF_CLIENTS);
	cr_assert_geq(served, 1, "no request was served");
	cr_assert_geq(refused, 1, "no request was refused: the queue never filled");
	/* At most pool + queue can be admitted at once, and 50 ms replies on 2
	 * connections drain only ~40 per second. */
	cr_assert_geq(served, QF_QUEUE, "only %d served: the queue did not hold max_queue", served);
	cr_assert_eq(h_get_int(&st, "counters.refused_queue_full", -1), refused,
		     "counters.refused_queue_full = %lld, refusals seen = %d",
		     (long long)h_get_int(&st, "counters.refused_queue_full", -1), refused);
	cr_assert_eq(h_get_int(&st, "gauges.requests_waiting", -1), 0);
	cr_assert_gt(rs.samples, 0);
	cr_assert_lt(rs.peak_kb, QF_RSS_MAX, "proxy RSS peaked at %ld kB (limit %ld kB)",
		     rs.peak_kb, QF_RSS_MAX);
	/* A refusal leaves the connection usable. */
	for (int k = 0; k < 10 && k < refused; k++) {
		int i = first_refused[k];
		bson_t *cmd = find_cmd("adm", "fast", i), reply;

		cr_assert(raw_ping_ok(fds[i], 5000), "connection %d: no ping after its refusal", i);
		roundtrip(fds[i], 5000 + i, cmd, &reply, 10000, "find after a refusal");
		assert_ok(&reply, "find after a refusal");
		cr_assert_eq(echoed_n(&reply), i);
		bson_destroy(&reply);
		bson_destroy(cmd);
	}

	for (int i = 0; i < QF_CLIENTS; i++)
		close(fds[i]);
	close(stat_fd);
	bson_destroy(&st);
	free(fds);
	free(done);
	proxy_stop(p);
	mock_stop(m);
}

/* ================================================================ (c) max_client_conn */

#define CC_MAX	 20
#define CC_EXTRA 10

static void find_ok(int fd, int32_t id, const char *db, const char *what)
{
	bson_t *cmd = BCON_NEW("find", BCON_UTF8("cc"), "filter", "{", "}", "$db", BCON_UTF8(db));
	bson_t reply;

	roundtrip(fd, id, cmd, &reply, 10000, what);
	assert_ok(&reply, what);
	cr_assert_eq(count_keys(&reply, "cursor.firstBatch"), 1, "%s: wrong documents", what);
	bson_destroy(&reply);
	bson_destroy(cmd);
}

/*
 * max_client_conn = 20: 20 connections work; 10 more get the overload
 * refusal on their first request and are closed; the 20 keep working.
 */
Test(admission, max_client_conn_refuses_extra_clients, .timeout = 60)
{
	struct proxy *p;
	mongoc_client_t *c;
	mongoc_collection_t *col;
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1)), st;
	bson_error_t err;
	int fds[CC_MAX], extra[CC_EXTRA], fd;
	char db[64], what[64];
	int64_t v;

	h_unique(db, sizeof(db), "it_cc");
	c = h_backend_client("itest-cc-setup");
	col = mongoc_client_get_collection(c, db, "cc");
	cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "%s", err.message);
	mongoc_collection_destroy(col);

	p = proxy_start("max_client_conn = 20\n");
	fds[0] = raw_connect(p);
	cr_assert(fds[0] >= 0);
	/* proxy_start's probe connection must be gone before we count. */
	v = wait_stat(fds[0], "gauges.clients", 1, 5000);
	cr_assert_eq(v, 1, "gauges.clients = %lld with one connection", (long long)v);
	for (int i = 1; i < CC_MAX; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
	}
	for (int i = 0; i < CC_MAX; i++) {
		snprintf(what, sizeof(what), "client %d before", i);
		cr_assert(raw_ping_ok(fds[i], 5000), "%s: ping failed", what);
		find_ok(fds[i], 100 + i, db, what);
	}
	for (int i = 0; i < CC_EXTRA; i++) {
		extra[i] = raw_connect(p);
		cr_assert(extra[i] >= 0, "the kernel refused connection %d", CC_MAX + i + 1);
	}
	for (int i = 0; i < CC_EXTRA; i++) {
		bson_t *cmd =
		    BCON_NEW("find", BCON_UTF8("cc"), "filter", "{", "}", "$db", BCON_UTF8(db));
		bson_t reply;

		snprintf(what, sizeof(what), "extra client %d", i);
		roundtrip(extra[i], 200 + i, cmd, &reply, 10000, what);
		assert_overload_error(&reply, "max_client_conn", what);
		cr_assert(raw_wait_closed(extra[i], 5000), "%s: still open after its refusal",
			  what);
		bson_destroy(&reply);
		bson_destroy(cmd);
		close(extra[i]);
	}
	for (int i = 0; i < CC_MAX; i++) {
		snprintf(what, sizeof(what), "client %d after", i);
		find_ok(fds[i], 300 + i, db, what);
	}
	raw_stats(fds[0], &st);
	cr_assert_eq(h_get_int(&st, "counters.clients_refused", -1), CC_EXTRA,
		     "counters.clients_refused = %lld",
		     (long long)h_get_int(&st, "counters.clients_refused", -1));
	bson_destroy(&st);
	v = wait_stat(fds[0], "gauges.clients", CC_MAX, 5000);
	cr_assert_eq(v, CC_MAX, "gauges.clients = %lld after the extra ones closed", (long long)v);

	/* A freed slot is reusable. */
	close(fds[CC_MAX - 1]);
	v = wait_stat(fds[0], "gauges.clients", CC_MAX - 1, 5000);
	cr_assert_eq(v, CC_MAX - 1);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	find_ok(fd, 400, db, "client in a freed slot");
	fds[CC_MAX - 1] = fd;
	raw_stats(fds[0], &st);
	cr_assert_eq(h_get_int(&st, "counters.clients_refused", -1), CC_EXTRA);
	bson_destroy(&st);

	for (int i = 0; i < CC_MAX; i++)
		close(fds[i]);
	proxy_stop(p);
	h_drop_db(c, db);
	mongoc_client_destroy(c);
	bson_destroy(doc);
}

/*
 * Refused connections must not hold client slots. With max_client_conn =
 * 20, 20 clients are admitted and 5 more connect but never send anything
 * (so they never get their refusal and are never closed). When one admitted
 * client leaves, only 19 are admitted: a new client must be admitted.
 */
Test(admission, max_client_conn_silent_refused_connections_hold_no_slot, .timeout = 60)
{
	struct proxy *p = proxy_start("max_client_conn = 20\n");
	int fds[CC_MAX], silent[5], fd;
	bson_t st, *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin")), reply;
	int64_t v;

	fds[0] = raw_connect(p);
	cr_assert(fds[0] >= 0);
	v = wait_stat(fds[0], "gauges.clients", 1, 5000);
	cr_assert_eq(v, 1, "gauges.clients = %lld with one connection", (long long)v);
	for (int i = 1; i < CC_MAX; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
		cr_assert(raw_ping_ok(fds[i], 5000), "admitted client %d: ping failed", i);
	}
	for (int i = 0; i < 5; i++) {
		silent[i] = raw_connect(p);
		cr_assert(silent[i] >= 0);
	}
	v = wait_stat(fds[0], "gauges.clients", CC_MAX + 5, 5000);
	cr_assert_eq(v, CC_MAX + 5);
	close(fds[CC_MAX - 1]);
	v = wait_stat(fds[0], "gauges.clients", CC_MAX + 4, 5000);
	cr_assert_eq(v, CC_MAX + 4);

	fd = raw_connect(p);
	cr_assert(fd >= 0);
	roundtrip(fd, 1, ping, &reply, 10000, "new client with 19 admitted");
	if (h_get_int(&reply, "ok", 0) != 1) {
		char *json = bson_as_relaxed_extended_json(&reply, NULL);

		raw_stats(fds[0], &st);
		cr_assert_fail("only %d clients are admitted (max_client_conn = %d), yet a new "
			       "client was refused: the %d silent refused connections still "
			       "count against the limit (clients_refused = %lld); reply: %s",
			       CC_MAX - 1, CC_MAX, 5,
			       (long long)h_get_int(&st, "counters.clients_refused", -1), json);
	}
	bson_destroy(&reply);
	bson_destroy(ping);
	close(fd);
	for (int i = 0; i < 5; i++)
		close(silent[i]);
	for (int i = 0; i < CC_MAX - 1; i++)
		close(fds[i]);
	proxy_stop(p);
}

/* ================================================================ (d) timeouts */

static void assert_network_timeout(const bson_t *reply, bool want_retryable_write_label,
				   const char *what)
{
	char *json = bson_as_relaxed_extended_json(reply, NULL);
	const char *cn = h_get_str(reply, "codeName"), *msg = h_get_str(reply, "errmsg");

	cr_assert(h_get_int(reply, "ok", 1) == 0 && h_get_int(reply, "code", 0) == 89 &&
		      cn != NULL && strcmp(cn, "NetworkTimeout") == 0,
		  "%s: expected code 89 NetworkTimeout, got %s", what, json);
	cr_assert(msg != NULL && strstr(msg, "query_timeout_ms") != NULL,
		  "%s: errmsg does not name query_timeout_ms: %s", what, json);
	cr_assert(!h_has_label(reply, "SystemOverloadedError") &&
		      !h_has_label(reply, "RetryableError"),
		  "%s: a timed-out exchange may have run on the backend; it must not carry the "
		  "overload labels: %s",
		  what, json);
	cr_assert_eq(h_has_label(reply, "RetryableWriteError"), want_retryable_write_label,
		     "%s: RetryableWriteError label %s expected: %s", what,
		     want_retryable_write_label ? "" : "not", json);
	bson_free(json);
}

/*
 * query_timeout_ms = 500 against a backend that answers "d2000_*" after 2 s:
 * the request gets NetworkTimeout (a read and a plain write: no
 * RetryableWriteError; a retryable write with txnNumber: labelled), the
 * backend connection is replaced and the next request succeeds.
 */
Test(admission, query_timeout_network_timeout_and_replacement, .timeout = 90)
{
	struct mock *m = mock_start(9);
	struct proxy *p = proxy_on_mock(m, "pool_size = 2\nquery_timeout_ms = 500\n");
	int fd = raw_connect(p), sfd = raw_connect(p);
	bson_t reply, st, *cmd;
	uint8_t lsid_uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	int64_t disc0;

	cr_assert(fd >= 0 && sfd >= 0);
	cmd = find_cmd("adm", "fast", 1);
	roundtrip(fd, 1, cmd, &reply, 10000, "first find");
	assert_ok(&reply, "first find");
	cr_assert_eq(echoed_n(&reply), 1);
	bson_destroy(&reply);
	bson_destroy(cmd);
	raw_stats(sfd, &st);
	disc0 = h_get_int(&st, "counters.backend_disconnects", -1);
	bson_destroy(&st);

	/* A read beyond query_timeout_ms. */
	cmd = find_cmd("adm", "d2000_slow", 2);
	roundtrip(fd, 2, cmd, &reply, 10000, "slow find");
	assert_network_timeout(&reply, false, "slow find");
	bson_destroy(&reply);
	bson_destroy(cmd);
	raw_stats(sfd, &st);
	cr_assert_eq(h_get_int(&st, "counters.query_timeouts", -1), 1);
	cr_assert_geq(h_get_int(&st, "counters.backend_disconnects", -1), disc0 + 1,
		      "the timed-out backend connection was not closed");
	bson_destroy(&st);

	/* The next request succeeds (on a healthy connection). */
	cmd = find_cmd("adm", "fast", 3);
	roundtrip(fd, 3, cmd, &reply, 10000, "find after the timeout");
	assert_ok(&reply, "find after the timeout");
	cr_assert_eq(echoed_n(&reply), 3);
	bson_destroy(&reply);
	bson_destroy(cmd);

	/* A write without txnNumber: may have run, so no retryable label. */
	cmd = BCON_NEW("insert", BCON_UTF8("d2000_slow"), "documents", "[", "{", "a", BCON_INT32(1),
		       "}", "]", "$db", BCON_UTF8("adm"));
	roundtrip(fd, 4, cmd, &reply, 10000, "slow insert");
	assert_network_timeout(&reply, false, "slow insert (no txnNumber)");
	bson_destroy(&reply);
	bson_destroy(cmd);

	/* A retryable write (lsid + txnNumber): the server deduplicates it. */
	cmd = BCON_NEW("insert", BCON_UTF8("d2000_slow"), "documents", "[", "{", "a", BCON_INT32(2),
		       "}", "]", "lsid", "{", "id", BCON_BIN(BSON_SUBTYPE_UUID, lsid_uuid, 16), "}",
		       "txnNumber", BCON_INT64(1), "$db", BCON_UTF8("adm"));
	roundtrip(fd, 5, cmd, &reply, 10000, "slow retryable insert");
	assert_network_timeout(&reply, true, "slow insert with txnNumber");
	bson_destroy(&reply);
	bson_destroy(cmd);

	cmd = find_cmd("adm", "fast", 6);
	roundtrip(fd, 6, cmd, &reply, 10000, "find after the write timeouts");
	assert_ok(&reply, "find after the write timeouts");
	cr_assert_eq(echoed_n(&reply), 6);
	bson_destroy(&reply);
	bson_destroy(cmd);

	raw_stats(sfd, &st);
	cr_log_info("query_timeout: query_timeouts %lld, backend_disconnects %lld, "
		    "backend_connects %lld, backend_errors %lld",
		    (long long)h_get_int(&st, "counters.query_timeouts", -1),
		    (long long)h_get_int(&st, "counters.backend_disconnects", -1),
		    (long long)h_get_int(&st, "counters.backend_connects", -1),
		    (long long)h_get_int(&st, "counters.backend_errors", -1));
	cr_assert_eq(h_get_int(&st, "counters.query_timeouts", -1), 3);
	cr_assert_geq(h_get_int(&st, "counters.backend_disconnects", -1), disc0 + 3);
	cr_assert_leq(h_get_int(&st, "pools.0.connecting", 0) + h_get_int(&st, "pools.0.idle", 0) +
			  h_get_int(&st, "pools.0.active", 0),
		      2, "more backend connections than pool_size");
	bson_destroy(&st);
	close(fd);
	close(sfd);
	proxy_stop(p);
	mock_stop(m);
}

/*
 * pool_size 1, queue_timeout_ms 300: while one request holds the only
 * backend connection for 1.5 s, a second one waits past the queue timeout
 * and gets the overload refusal naming queue_timeout_ms; the first one
 * still gets its answer, and the connection serves the next request.
 */
Test(admission, queue_timeout_refuses_with_labels, .timeout = 60)
{
	struct mock *m = mock_start(9);
	struct proxy *p = proxy_on_mock(m, "pool_size = 1\nqueue_timeout_ms = 300\n");
	int a = raw_connect(p), b = raw_connect(p), sfd = raw_connect(p);
	bson_t reply, st, *hold, *cmd;
	int32_t rt = 0;
	int64_t v;

	cr_assert(a >= 0 && b >= 0 && sfd >= 0);
	hold = find_cmd("adm", "d1500_hold", 7);
	cr_assert(send_cmd(a, 1, hold));
	v = wait_stat(sfd, "pools.0.active", 1, 5000);
	cr_assert_eq(v, 1, "the holding request never became active");

	cmd = find_cmd("adm", "fast", 8);
	roundtrip(b, 2, cmd, &reply, 10000, "queued find");
	assert_overload_error(&reply, "queue_timeout_ms", "queued find");
	bson_destroy(&reply);
	raw_stats(sfd, &st);
	cr_assert_eq(h_get_int(&st, "counters.refused_queue_timeout", -1), 1);
	cr_assert_eq(h_get_int(&st, "counters.refused_queue_full", -1), 0);
	cr_assert_eq(h_get_int(&st, "gauges.requests_waiting", -1), 0);
	bson_destroy(&st);

	cr_assert_eq(recv_reply(a, 10000, &reply, &rt), RAW_OK, "the holding request got no reply");
	cr_assert_eq(rt, 1);
	assert_ok(&reply, "holding find");
	cr_assert_eq(echoed_n(&reply), 7);
	bson_destroy(&reply);

	roundtrip(b, 3, cmd, &reply, 10000, "find after the queue timeout");
	assert_ok(&reply, "find after the queue timeout");
	cr_assert_eq(echoed_n(&reply), 8);
	bson_destroy(&reply);

	bson_destroy(cmd);
	bson_destroy(hold);
	close(a);
	close(b);
	close(sfd);
	proxy_stop(p);
	mock_stop(m);
}

/* ================================================================ (e) pymongo */

/* Run `python RETRY_SCRIPT uri --expect expect --mock mock_uri`, output (stdout+stderr) into
 * out; returns the wait status, or -1 when it had to be killed. */
static int run_retry_script(const char *python, const char *uri, const char *expect,
			    const char *mock_uri, char *out, size_t outlen, int timeout_ms)
{
	const char *const argv[] = {python, RETRY_SCRIPT, uri,	    "--expect",
				    expect, "--mock",	  mock_uri, NULL};

	return h_run_capture(argv, out, outlen, timeout_ms);
}

static void pymongo_overload_case(const char *python, const char *expect)
{
	struct mock *m = mock_start(9);
	struct proxy *p = proxy_on_mock(m, "pool_size = 1\nmax_queue = 1\n");
	char *out = calloc(1, 65536);
	char mock_uri[64];
	int st;

	snprintf(mock_uri, sizeof(mock_uri), "mongodb://127.0.0.1:%d/", m->port);
	st = run_retry_script(python, p->uri, expect, mock_uri, out, 65536, 120000);

	cr_log_info("retry_pymongo.py (%s, --expect %s):\n%s", python, expect, out);
	proxy_assert_alive(p, "during retry_pymongo.py");
	cr_assert(st != -1, "retry_pymongo.py did not finish within 120 s:\n%s", out);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "retry_pymongo.py (%s, --expect %s) failed (status 0x%x): pymongo's reaction to "
		  "the overload error is not the documented one:\n%s",
		  python, expect, st, out);
	free(out);
	proxy_stop(p);
	mock_stop(m);
}

/*
 * Debian's pymongo 3.11 does not know SystemOverloadedError/RetryableError:
 * a find or insert refused with 462 raises OperationFailure after one
 * attempt (its retryable reads retry only network errors and a fixed code
 * list without 462). Details in retry_pymongo.py.
 */
Test(admission, pymongo_debian_does_not_retry_overload, .timeout = 120)
{
	pymongo_overload_case(PYTHON, "no-retry");
}

/* A pymongo >= 4.17 (client backpressure spec): 462 + SystemOverloadedError
 * + RetryableError is retried with exponential backoff, up to
 * max_adaptive_retries (2) times, reads and writes alike, and succeeds once
 * the overload clears. Needs a Python with such a pymongo
 * (h_pymongo4_python). Finding none is a failure, not a skip: the suite must not pass
 * without this driver. */
Test(admission, pymongo4_retries_overload_with_backoff, .timeout = 120)
{
	pymongo_overload_case(h_pymongo4_python(), "backpressure");
}
