/*
 * cm_conn.c — connections of the curve model (see cm_conn.h).
 *
 *   accept ─▶ read_cb (recvmsg: the bytes and their kernel receive time)
 *          ─▶ frame (wire_frame_check) ─▶ handle ─▶ cm_cmd_* ─▶ cm_sched_queue
 *   cm_sched.c, when due ─▶ cm_conn_write (one write, straight to the socket)
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
#include "bench/cm_sched.h"
#include "bench/cm_ratelimit.h"
#include "core/list.h"
#include "core/log.h"
#include "core/wire.h"
#include "core/xalloc.h"

#define READ_ROUNDS 4 /* recvmsg calls per read event at most */

/* One client connection. Rules: on the conns list from accept to close. */
struct cm_conn {
	int64_t id;
	evutil_socket_t fd;
	struct event rd, wr;
	struct evbuffer *in, *out;
	char peer[64];
	struct cm_pending_list pending; /* in arrival order */
	int npending;
	bool paused;		      /* reading stopped by the bounds (cm_conn.h) */
	bool writing;		      /* wr is added: out holds bytes */
	int64_t rx_us;		      /* receive time of the bytes being framed */
	int64_t wrote_us;	      /* when its last reply was written, 0: none yet */
	double think_us;	      /* running mean think time, -1: no sample yet */
	struct cm_pending *last_find; /* its last find written (cm_sched_end_service) */
	uint32_t last_find_gen;
	TAILQ_ENTRY(cm_conn) link;
};

static TAILQ_HEAD(, cm_conn) conns = TAILQ_HEAD_INITIALIZER(conns);
static int64_t next_conn_id = 1;

static void process_input(struct cm_conn *c);

/* Off its connection (written, or the connection closes). */
static void pending_detach(struct cm_pending *p)
{
	struct cm_conn *c = p->conn;

	TAILQ_REMOVE(&c->pending, p, link);
	c->npending--;
	cm_sched_forget(p);
}

/* ------------------------------------------------------------ connections */

static void conn_close(struct cm_conn *c, const char *why)
{
	struct cm_pending *p;

	if (why)
		log_info("curve-model: C-%lld %s: closing: %s", (long long)c->id, c->peer, why);
	while ((p = TAILQ_FIRST(&c->pending)))
		pending_detach(p); /* kept while queued or in service */
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
	while (!TAILQ_EMPTY(&conns))
		conn_close(TAILQ_FIRST(&conns), NULL);
	cm_sched_free_all();
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
	c->rx_us = cm_mono_usec(); /* held back: they arrive now */
	process_input(c);	   /* messages already buffered */
}

/* ------------------------------------------------------------ replies */

void cm_conn_write(struct cm_pending *p, int64_t now)
{
	struct cm_conn *c = p->conn;

	TAILQ_REMOVE(&c->pending, p, link);
	c->npending--;
	/* straight to the socket when nothing waits before it: no write event */
	if (evbuffer_get_length(c->out) == 0 && evbuffer_write(p->reply, c->fd) < 0 &&
	    errno != EAGAIN && errno != EINTR) {
		cm_sched_forget(p);
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
	c->wrote_us = cm_mono_usec(); /* after the write: the think time starts */
	if (p->cost_ids >= 0) {
		c->last_find = p;
		c->last_find_gen = p->gen;
	}
	cm_sched_forget(p);
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
		if (gap <= CM_THINK_MAX_US) {
			c->think_us = c->think_us < 0
					  ? (double)gap
					  : c->think_us + ((double)gap - c->think_us) / 8;
			cm.think_hi_us -= cm.think_hi_us / 1024;
			if (c->think_us > cm.think_hi_us)
				cm.think_hi_us = c->think_us;
		}
	}
	if (r->cost_ids >= 0 && c->last_find) {
		cm_sched_end_service(c->last_find, c->last_find_gen);
		c->last_find = NULL;
	}
	p = cm_sched_new(c);
	TAILQ_INSERT_TAIL(&c->pending, p, link);
	c->npending++;
	if (legacy)
		wire_append_op_reply(p->reply, request_id, 0, &r->doc);
	else
		wire_append_msg(p->reply, wire_next_request_id(), request_id, 0, &r->doc);
	cm_sched_queue(p, c->rx_us, r->cost_ids, c->think_us);
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
		c->rx_us = receive_time(&mh, cm_mono_usec());
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
