/*
 * cm_conn.c — connections of the curve model and its loop (see cm_conn.h).
 *
 *   accept ─▶ read_cb (recvmsg: the bytes and their kernel receive time)
 *          ─▶ frame (wire_frame_check) ─▶ handle ─▶ cm_cmd_* ─▶ arrivals
 *   service pass: arrivals by receive time ─▶ c from the in-service heap
 *          ─▶ due heap ─▶ every reply due by now + slack is written
 *   cm_conn_run: replies waiting ─▶ sleep until the next wake, then poll
 *          the loop without blocking; none ─▶ block in the loop
 */
#include "bench/cm_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bench/cm.h"
#include "bench/cm_cmd.h"
#include "bench/cm_heap.h"
#include "bench/cm_ratelimit.h"
#include "core/list.h"
#include "core/log.h"
#include "core/wire.h"
#include "core/xalloc.h"

#define THINK_MAX_US  5000 /* a longer gap is an idle client, not its think time */
#define MIN_SLEEP_US  50   /* the shortest sleep bound while queries are in service */
#define FREE_PENDINGS 1024 /* pending structs kept for reuse */
#define READ_ROUNDS   4	   /* recvmsg calls per read event at most */

struct cm_conn;

/* One reply from its message's arrival until written (or its connection
 * closes), and a query until its service ends. Rules: on conn->pending while
 * conn is set; queued while in the arrivals array; in due_heap from the
 * service pass until written; in svc_heap (finds) from the service pass for
 * its curve latency, even after its connection closed (the server would
 * still be working on it); reused (free_list) when in none of them. */
struct cm_pending {
	struct cm_heap_node due; /* key: when to write it (µs, monotonic) */
	struct cm_heap_node svc; /* key: when its service ends */
	struct cm_conn *conn;	 /* NULL once its connection closed */
	struct evbuffer *reply;	 /* the framed reply (kept for reuse) */
	int64_t arrival_us;	 /* the message's kernel receive time */
	double think_us;	 /* the connection's think time then (-1: none) */
	int cost_ids;		 /* ids of a find, -1 for other commands */
	bool queued;
	TAILQ_ENTRY(cm_pending) link;
};

/* One client connection. Rules: on the conns list from accept to close. */
struct cm_conn {
	int64_t id;
	evutil_socket_t fd;
	struct event rd, wr;
	struct evbuffer *in, *out;
	char peer[64];
	TAILQ_HEAD(, cm_pending) pending; /* in arrival order */
	int npending;
	bool paused;	  /* reading stopped by the bounds (cm_conn.h) */
	bool writing;	  /* wr is added: out holds bytes */
	int64_t rx_us;	  /* receive time of the bytes being framed */
	int64_t wrote_us; /* when its last reply was written, 0: none yet */
	double think_us;  /* running mean think time, -1: no sample yet */
	TAILQ_ENTRY(cm_conn) link;
};

static TAILQ_HEAD(, cm_conn) conns = TAILQ_HEAD_INITIALIZER(conns);
static int64_t next_conn_id = 1;
static struct cm_heap due_heap, svc_heap;
static struct cm_pending **arrivals; /* messages read, not yet scheduled */
static int narrivals, arrivals_cap;
static struct cm_pending *free_list[FREE_PENDINGS];
static int nfree;

static void process_input(struct cm_conn *c);

static int64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ------------------------------------------------------------ pendings */

static struct cm_pending *pending_new(struct cm_conn *c)
{
	struct cm_pending *p = nfree ? free_list[--nfree] : NULL;

	if (!p) {
		p = xcalloc(1, sizeof *p);
		p->reply = xevbuffer_new();
	}
	cm_heap_node_init(&p->due);
	cm_heap_node_init(&p->svc);
	p->conn = c;
	p->queued = false;
	TAILQ_INSERT_TAIL(&c->pending, p, link);
	c->npending++;
	return p;
}

/* Back to the free list once nothing holds p any more. */
static void pending_release(struct cm_pending *p)
{
	if (p->conn || p->queued || cm_heap_in(&p->due) || cm_heap_in(&p->svc))
		return;
	evbuffer_drain(p->reply, evbuffer_get_length(p->reply));
	if (nfree < FREE_PENDINGS) {
		free_list[nfree++] = p;
		return;
	}
	evbuffer_free(p->reply);
	free(p);
}

/* Off its connection (written, or the connection closes). */
static void pending_detach(struct cm_pending *p)
{
	struct cm_conn *c = p->conn;

	TAILQ_REMOVE(&c->pending, p, link);
	c->npending--;
	p->conn = NULL;
}

/* ------------------------------------------------------------ connections */

static void conn_close(struct cm_conn *c, const char *why)
{
	struct cm_pending *p;

	if (why)
		log_info("curve-model: C-%lld %s: closing: %s", (long long)c->id, c->peer, why);
	while ((p = TAILQ_FIRST(&c->pending))) {
		if (cm_heap_in(&p->due))
			cm_heap_remove(&due_heap, &p->due);
		pending_detach(p);
		pending_release(p); /* kept while queued or in service */
	}
	TAILQ_REMOVE(&conns, c, link);
	cm.conns--;
	event_del(&c->rd);
	event_del(&c->wr);
	evutil_closesocket(c->fd);
	evbuffer_free(c->in);
	evbuffer_free(c->out);
	free(c);
}

void cm_conn_close_all(void)
{
	struct cm_heap_node *x;

	while (!TAILQ_EMPTY(&conns))
		conn_close(TAILQ_FIRST(&conns), NULL);
	for (int i = 0; i < narrivals; i++) {
		arrivals[i]->queued = false;
		pending_release(arrivals[i]);
	}
	narrivals = 0;
	while ((x = cm_heap_pop(&svc_heap)))
		pending_release(cm_heap_entry(x, struct cm_pending, svc));
	while (nfree) {
		struct cm_pending *p = free_list[--nfree];

		evbuffer_free(p->reply);
		free(p);
	}
	free(arrivals);
	arrivals = NULL;
	arrivals_cap = 0;
	cm_heap_free(&due_heap);
	cm_heap_free(&svc_heap);
	cm.in_service = 0;
}

static bool over_bounds(struct cm_conn *c)
{
	return c->npending >= CM_MAX_PENDING || evbuffer_get_length(c->out) >= CM_MAX_OUTPUT;
}

/* Reading resumes once the bounds allow it again. */
static void maybe_resume(struct cm_conn *c)
{
	if (!c->paused || over_bounds(c))
		return;
	c->paused = false;
	event_add(&c->rd, NULL);
	c->rx_us = mono_usec(); /* held back: they arrive now */
	process_input(c);	/* messages already buffered */
}

/* ------------------------------------------------------------ replies */

/* Signed error of a write against its due time: the wake is set earlier by
 * the running mean, so that replies go out on time on average (the loop
 * wakes late on a busy machine; replies written early by the slack pull it
 * back). Clamped to [-slack, 2 ms]: a stall is not the loop's usual lateness. */
static void note_error(int64_t err_us)
{
	double e = (double)err_us;

	if (e > 2000)
		e = 2000;
	cm.late_usec_avg += e / 64;
	if (cm.late_usec_avg > 2000)
		cm.late_usec_avg = 2000;
	if (cm.late_usec_avg < -(double)cm.slack_us)
		cm.late_usec_avg = -(double)cm.slack_us;
}

static void write_pending(struct cm_pending *p, int64_t now)
{
	struct cm_conn *c = p->conn;

	pending_detach(p);
	/* straight to the socket when nothing waits before it: no write event */
	if (evbuffer_get_length(c->out) == 0 && evbuffer_write(p->reply, c->fd) < 0 &&
	    errno != EAGAIN && errno != EINTR) {
		pending_release(p);
		conn_close(c, strerror(errno));
		return;
	}
	if (evbuffer_get_length(p->reply) > 0) {
		evbuffer_add_buffer(c->out, p->reply);
		if (!c->writing) {
			c->writing = true;
			event_add(&c->wr, NULL);
		}
	}
	c->wrote_us = now;
	pending_release(p);
	maybe_resume(c);
}

static void write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cm_conn *c = arg;

	if (evbuffer_write(c->out, fd) < 0 && errno != EAGAIN && errno != EINTR) {
		conn_close(c, strerror(errno));
		return;
	}
	if (evbuffer_get_length(c->out) == 0) {
		c->writing = false;
		event_del(&c->wr);
	}
	maybe_resume(c);
}

/* Queries whose service ended by t leave the in-service count. */
static void retire(int64_t t)
{
	struct cm_heap_node *x;

	while ((x = cm_heap_top(&svc_heap)) && x->key <= t) {
		cm_heap_pop(&svc_heap);
		pending_release(cm_heap_entry(x, struct cm_pending, svc));
	}
	cm.in_service = svc_heap.n;
}

static int by_arrival(const void *a, const void *b)
{
	const struct cm_pending *x = *(struct cm_pending *const *)a;
	const struct cm_pending *y = *(struct cm_pending *const *)b;

	return (x->arrival_us > y->arrival_us) - (x->arrival_us < y->arrival_us);
}

/* Fixes each arrival's delay, in receive order: a find of k ids gets the
 * curve's latency at c = the queries in service at its receive time + 1
 * (less the connection's think time with --think-compensation), then the
 * rtt; any other command the rtt only. */
static void schedule_arrivals(void)
{
	int n = narrivals;

	if (n > 1)
		qsort(arrivals, (size_t)n, sizeof *arrivals, by_arrival);
	narrivals = 0;
	for (int i = 0; i < n; i++) {
		struct cm_pending *p = arrivals[i];
		double delay_s = 0;

		p->queued = false;
		if (!p->conn) { /* its connection closed */
			pending_release(p);
			continue;
		}
		if (p->cost_ids >= 0) {
			double lat;
			int conc;

			retire(p->arrival_us);
			conc = svc_heap.n + 1;
			if (conc > cm.max_in_service)
				cm.max_in_service = conc;
			cm.queries++;
			lat = curve_latency_s(cm.curve, p->cost_ids, conc);
			cm_heap_push(&svc_heap, &p->svc,
				     p->arrival_us + (int64_t)(lat * 1e6 + 0.5));
			cm.in_service = svc_heap.n;
			delay_s = cm.think_comp && p->think_us >= 0
				      ? curve_compensated_s(lat, p->think_us / 1e6)
				      : lat;
		}
		cm_heap_push(&due_heap, &p->due,
			     p->arrival_us + (int64_t)(delay_s * 1e6 + 0.5) + cm.rtt_us);
	}
}

/* Writes every reply due by now + the lead (the wake's offset, next_wake)
 * + slack, earliest first: the replies whose wake has come. */
static void write_due(int64_t now)
{
	int64_t horizon = now + (int64_t)cm.late_usec_avg + cm.slack_us;
	struct cm_heap_node *x;

	while ((x = cm_heap_top(&due_heap)) && x->key <= horizon) {
		struct cm_pending *p = cm_heap_entry(x, struct cm_pending, due);

		cm_heap_pop(&due_heap);
		note_error(now - x->key);
		write_pending(p, now);
	}
}

/* One service pass, after the loop ran: schedule what was read, write what is due. */
static void service(void)
{
	for (int i = 0; i < 8 && (narrivals || i == 0); i++) {
		int64_t now = mono_usec();

		schedule_arrivals();
		retire(now);
		write_due(now); /* may resume a connection: more arrivals */
	}
}

/* When to wake while replies wait (false: none wait, block in the loop).
 * The earliest due reply, set earlier by the mean lateness; and at most
 * the shortest latency a query arriving meanwhile could get (so that it is
 * read, dated by its receive time, before it is due): its c is at least 1 +
 * the queries still in service at the wake (curve_min_latency_s), less the
 * largest think time when that is subtracted. */
static bool next_wake(int64_t now, int64_t *wake)
{
	struct cm_heap_node *x = cm_heap_top(&due_heap);
	int64_t t, bound;
	int conc;

	if (!x)
		return false;
	t = x->key - (int64_t)cm.late_usec_avg;
	conc = 1 + svc_heap.n - cm_heap_count_le(&svc_heap, t);
	bound = (int64_t)(curve_min_latency_s(cm.curve, conc) * 1e6);
	if (cm.think_comp)
		bound -= (int64_t)cm.think_hi_us;
	bound += cm.rtt_us - (int64_t)cm.late_usec_avg;
	if (bound < MIN_SLEEP_US)
		bound = MIN_SLEEP_US;
	bound += now;
	*wake = t < bound ? t : bound;
	return true;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000),
			      .tv_nsec = (long)(t % 1000000) * 1000};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); /* EINTR: a signal, go on */
}

void cm_conn_run(void)
{
	while (!cm.stop) {
		int64_t now = mono_usec(), wake;

		if (next_wake(now, &wake)) {
			if (wake > now) {
				sleep_until(wake);
				cm.wakeups++;
			}
			event_base_loop(cm.base, EVLOOP_NONBLOCK);
		} else {
			event_base_loop(cm.base, EVLOOP_ONCE);
		}
		service();
	}
}

/* ------------------------------------------------------------ messages */

/* A message read: its reply waits in the arrivals until the service pass.
 * A find's gap since the connection's last reply (nothing else in flight)
 * is a think-time sample. */
static void reply_msg(struct cm_conn *c, int32_t request_id, struct cm_reply *r, bool legacy)
{
	struct cm_pending *p;

	if (r->no_reply)
		goto out;
	if (r->cost_ids >= 0 && c->npending == 0 && c->wrote_us > 0) {
		int64_t gap = c->rx_us - c->wrote_us;

		if (gap < 0)
			gap = 0;
		if (gap <= THINK_MAX_US) {
			c->think_us = c->think_us < 0
					  ? (double)gap
					  : c->think_us + ((double)gap - c->think_us) / 8;
			cm.think_hi_us -= cm.think_hi_us / 1024;
			if (c->think_us > cm.think_hi_us)
				cm.think_hi_us = c->think_us;
		}
	}
	p = pending_new(c);
	if (legacy)
		wire_append_op_reply(p->reply, request_id, 0, &r->doc);
	else
		wire_append_msg(p->reply, wire_next_request_id(), request_id, 0, &r->doc);
	p->arrival_us = c->rx_us;
	p->think_us = c->think_us;
	p->cost_ids = r->cost_ids;
	if (narrivals == arrivals_cap) {
		arrivals_cap = arrivals_cap ? arrivals_cap * 2 : 256;
		arrivals = xrealloc(arrivals, (size_t)arrivals_cap * sizeof *arrivals);
	}
	p->queued = true;
	arrivals[narrivals++] = p;
out:
	bson_destroy(&r->doc);
}

/* The framer's message without its "mongoplex: " prefix (it is not the proxy). */
static const char *unprefixed(const char *msg)
{
	static const char pfx[] = "mongoplex: ";

	return strncmp(msg, pfx, sizeof pfx - 1) ? msg : msg + sizeof pfx - 1;
}

static void handle_msg(struct cm_conn *c, const uint8_t *data, size_t len)
{
	struct wire_msg m;
	struct wire_error err;
	struct cm_reply r;

	if (wire_parse_msg(data, len, &m, &err)) {
		cm_cmd_msg(&m, data, len, c->id, &r);
	} else {
		bson_init(&r.doc);
		cm_cmd_error(&r.doc, err.code, err.codename, "%s", unprefixed(err.msg));
		r.cost_ids = -1;
		r.no_reply = false;
	}
	reply_msg(c, wire_read_i32(data + 4), &r, false);
}

static void handle_query(struct cm_conn *c, const uint8_t *data, size_t len)
{
	struct wire_query q;
	struct wire_error err;
	struct cm_reply r;

	if (wire_parse_query(data, len, &q, &err)) {
		cm_cmd_query(&q, c->id, &r);
	} else {
		bson_init(&r.doc);
		cm_cmd_error(&r.doc, err.code, err.codename, "%s", unprefixed(err.msg));
		r.cost_ids = -1;
		r.no_reply = false;
	}
	reply_msg(c, wire_read_i32(data + 4), &r, true);
}

/* One whole message; false: the connection was closed. */
static bool handle(struct cm_conn *c, const uint8_t *data, size_t len)
{
	static struct cm_ratelimit rl;
	int32_t op = wire_read_i32(data + 12);

	if (op == OP_MSG) {
		handle_msg(c, data, len);
	} else if (op == OP_QUERY) {
		handle_query(c, data, len);
	} else {
		cm_log_limited(&rl, "curve-model: C-%lld %s: closing: opcode %d (%s) not answered",
			       (long long)c->id, c->peer, op, wire_opcode_name(op));
		conn_close(c, NULL);
		return false;
	}
	return true;
}

static void process_input(struct cm_conn *c)
{
	static struct cm_ratelimit rl;
	struct evbuffer *in = c->in;

	for (;;) {
		size_t avail = evbuffer_get_length(in);
		const uint8_t *hdr =
		    evbuffer_pullup(in, avail < WIRE_HEADER_LEN ? -1 : WIRE_HEADER_LEN);
		int32_t len;

		if (avail == 0)
			return;
		switch (wire_frame_check(hdr, avail, &len)) {
		case WIRE_FRAME_NEED_MORE:
			return;
		case WIRE_FRAME_BAD:
			cm_log_limited(&rl,
				       "curve-model: C-%lld %s: closing: messageLength %d out of "
				       "[16, %d]",
				       (long long)c->id, c->peer, wire_read_i32(hdr),
				       WIRE_MAX_MESSAGE);
			conn_close(c, NULL);
			return;
		case WIRE_FRAME_READY:
			break;
		}
		if (over_bounds(c)) { /* TCP backpressure until replies go out */
			c->paused = true;
			event_del(&c->rd);
			return;
		}
		if (!handle(c, evbuffer_pullup(in, len), (size_t)len))
			return;
		evbuffer_drain(in, (size_t)len);
	}
}

/* The kernel's receive time of what recvmsg read (SO_TIMESTAMPNS, real
 * time) on the monotonic clock; now when there is none. */
static int64_t receive_time(struct msghdr *mh, int64_t now)
{
	for (struct cmsghdr *cm_ = CMSG_FIRSTHDR(mh); cm_; cm_ = CMSG_NXTHDR(mh, cm_)) {
		if (cm_->cmsg_level == SOL_SOCKET && cm_->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec rx, real;
			int64_t t;

			memcpy(&rx, CMSG_DATA(cm_), sizeof rx);
			clock_gettime(CLOCK_REALTIME, &real);
			t = now - ((int64_t)(real.tv_sec - rx.tv_sec) * 1000000 +
				   (real.tv_nsec - rx.tv_nsec) / 1000);
			return t < now ? t : now;
		}
	}
	return now;
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
	static uint8_t buf[64 * 1024];
	struct cm_conn *c = arg;

	for (int round = 0; round < READ_ROUNDS; round++) {
		char ctl[CMSG_SPACE(sizeof(struct timespec))];
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = ctl,
				    .msg_controllen = sizeof ctl};
		ssize_t n = recvmsg(fd, &mh, 0);

		if (n == 0) {
			conn_close(c, NULL);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			conn_close(c, strerror(errno));
			return;
		}
		c->rx_us = receive_time(&mh, mono_usec());
		evbuffer_add(c->in, buf, (size_t)n);
		if ((size_t)n < sizeof buf)
			break;
	}
	process_input(c);
}

void cm_conn_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		    void *arg)
{
	static struct cm_ratelimit rl;
	struct cm_conn *c;
	int one = 1;

	if (cm.conns >= cm.max_conns) {
		cm_log_limited(&rl, "curve-model: refusing a connection: %d open (--max-conns)",
			       cm.conns);
		evutil_closesocket(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one); /* receive times */
	evutil_make_socket_nonblocking(fd);
	c = xcalloc(1, sizeof *c);
	c->id = next_conn_id++;
	c->fd = fd;
	c->think_us = -1;
	c->in = xevbuffer_new();
	c->out = xevbuffer_new();
	TAILQ_INIT(&c->pending);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
		snprintf(c->peer, sizeof c->peer, "%s:%d", a, ntohs(in->sin_port));
	}
	event_assign(&c->rd, cm.base, fd, EV_READ | EV_PERSIST, read_cb, c);
	event_assign(&c->wr, cm.base, fd, EV_WRITE | EV_PERSIST, write_cb, c);
	event_add(&c->rd, NULL);
	TAILQ_INSERT_TAIL(&conns, c, link);
	cm.conns++;
	log_debug("curve-model: C-%lld %s: connected", (long long)c->id, c->peer);
}
