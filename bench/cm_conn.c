/*
 * cm_conn.c — connections of the curve model (see cm_conn.h).
 *
 *   accept ─▶ read_cb ─▶ frame (wire_frame_check) ─▶ handle ─▶ cm_cmd_* ─▶ schedule
 *   schedule: find ─▶ timer(curve latency, in service) ─▶ timer(rtt) ─▶ write
 *             other ─▶ timer(rtt) ─▶ write            (rtt 0: no second timer)
 */
#include "bench/cm_conn.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event_struct.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "bench/cm.h"
#include "bench/cm_cmd.h"
#include "bench/cm_ratelimit.h"
#include "core/list.h"
#include "core/log.h"
#include "core/wire.h"
#include "core/xalloc.h"

struct cm_conn;

/* One reply waiting for its time. Rules: on conn->pending from schedule
 * until written or its connection closes; counted in cm.in_service while
 * in_service. */
struct cm_pending {
	struct event timer;
	struct cm_conn *conn;
	struct evbuffer *reply; /* the framed reply */
	bool in_service;
	int64_t due_usec; /* when its current timer should fire (monotonic) */
	TAILQ_ENTRY(cm_pending) link;
};

/* One client connection. Rules: on the conns list from accept to close. */
struct cm_conn {
	int64_t id;
	struct bufferevent *bev;
	char peer[64];
	TAILQ_HEAD(, cm_pending) pending; /* in arrival order */
	int npending;
	bool paused; /* reading stopped by the bounds (cm_conn.h) */
	TAILQ_ENTRY(cm_conn) link;
};

static TAILQ_HEAD(, cm_conn) conns = TAILQ_HEAD_INITIALIZER(conns);
static int64_t next_conn_id = 1;

static void read_cb(struct bufferevent *bev, void *arg);

static void conn_close(struct cm_conn *c, const char *why)
{
	struct cm_pending *p, *tmp;

	if (why)
		log_info("curve-model: C-%lld %s: closing: %s", (long long)c->id, c->peer, why);
	TAILQ_FOREACH_SAFE(p, &c->pending, link, tmp) {
		event_del(&p->timer);
		if (p->in_service)
			cm.in_service--;
		evbuffer_free(p->reply);
		free(p);
	}
	TAILQ_REMOVE(&conns, c, link);
	cm.conns--;
	bufferevent_free(c->bev);
	free(c);
}

void cm_conn_close_all(void)
{
	while (!TAILQ_EMPTY(&conns))
		conn_close(TAILQ_FIRST(&conns), NULL);
}

/* ------------------------------------------------------------ replies */

static bool over_bounds(struct cm_conn *c)
{
	return c->npending >= CM_MAX_PENDING ||
	       evbuffer_get_length(bufferevent_get_output(c->bev)) >= CM_MAX_OUTPUT;
}

/* Reading resumes once the bounds allow it again. */
static void maybe_resume(struct cm_conn *c)
{
	if (!c->paused || over_bounds(c))
		return;
	c->paused = false;
	bufferevent_enable(c->bev, EV_READ);
	read_cb(c->bev, c); /* messages already buffered */
}

static void write_pending(struct cm_pending *p)
{
	struct cm_conn *c = p->conn;

	struct evbuffer *out = bufferevent_get_output(c->bev);

	TAILQ_REMOVE(&c->pending, p, link);
	c->npending--;
	/* straight to the socket when nothing waits before it: no write event
	 * to add and remove per reply (half the model's system calls) */
	if (evbuffer_get_length(out) == 0)
		evbuffer_write(p->reply, bufferevent_getfd(c->bev));
	if (evbuffer_get_length(p->reply) > 0)
		bufferevent_write_buffer(c->bev, p->reply);
	evbuffer_free(p->reply);
	free(p);
	maybe_resume(c);
}

static int64_t mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Fires in usec, earlier by the mean lateness of the timers so far (the
 * loop wakes late on a busy machine): replies go out on time on average. */
static void arm(struct cm_pending *p, int64_t usec)
{
	int64_t early = usec - (int64_t)cm.late_usec_avg;
	struct timeval tv;

	p->due_usec = mono_usec() + usec;
	if (early < 0)
		early = 0;
	tv.tv_sec = (time_t)(early / 1000000);
	tv.tv_usec = (suseconds_t)(early % 1000000);
	evtimer_add(&p->timer, &tv);
}

/* Mean lateness, a moving average over about the last 64 timers. */
static void note_lateness(const struct cm_pending *p)
{
	/* as if armed on time */
	double late = (double)(mono_usec() - p->due_usec) + (double)(int64_t)cm.late_usec_avg;

	if (late < 0)
		late = 0;
	if (late > 2000)
		late = 2000; /* a stall is not the loop's usual lateness */
	cm.late_usec_avg += (late - cm.late_usec_avg) / 64;
}

/* The curve latency ran out (then the round trip), or the round trip did. */
static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cm_pending *p = arg;

	note_lateness(p);
	if (p->in_service) {
		p->in_service = false;
		cm.in_service--;
		if (cm.rtt_us > 0) {
			arm(p, cm.rtt_us);
			return;
		}
	}
	write_pending(p);
}

/* Queues the framed reply with its delay: the curve's for a query of
 * cost_ids ids (fixed now, from the queries in service), then the rtt. */
static void schedule(struct cm_conn *c, struct evbuffer *reply, int cost_ids)
{
	struct cm_pending *p = xcalloc(1, sizeof *p);
	int64_t usec = cm.rtt_us;

	p->conn = c;
	p->reply = reply;
	evtimer_assign(&p->timer, cm.base, timer_cb, p);
	TAILQ_INSERT_TAIL(&c->pending, p, link);
	c->npending++;
	if (cost_ids >= 0) {
		int conc = ++cm.in_service;

		if (conc > cm.max_in_service)
			cm.max_in_service = conc;
		cm.queries++;
		p->in_service = true;
		usec = (int64_t)(curve_latency_s(cm.curve, cost_ids, conc) * 1e6 + 0.5);
	}
	if (usec <= 0 && !p->in_service) {
		write_pending(p);
		return;
	}
	arm(p, usec);
}

/* ------------------------------------------------------------ messages */

static void reply_msg(struct cm_conn *c, int32_t request_id, struct cm_reply *r, bool legacy)
{
	struct evbuffer *out;

	if (r->no_reply)
		goto out;
	out = xevbuffer_new();
	if (legacy)
		wire_append_op_reply(out, request_id, 0, &r->doc);
	else
		wire_append_msg(out, wire_next_request_id(), request_id, 0, &r->doc);
	schedule(c, out, r->cost_ids);
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

static void read_cb(struct bufferevent *bev, void *arg)
{
	static struct cm_ratelimit rl;
	struct cm_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

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
			bufferevent_disable(bev, EV_READ);
			return;
		}
		if (!handle(c, evbuffer_pullup(in, len), (size_t)len))
			return;
		evbuffer_drain(in, (size_t)len);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	maybe_resume(arg);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct cm_conn *c = arg;

	if (what & BEV_EVENT_EOF)
		conn_close(c, NULL);
	else if (what & BEV_EVENT_ERROR)
		conn_close(c, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
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
	c = xcalloc(1, sizeof *c);
	c->id = next_conn_id++;
	TAILQ_INIT(&c->pending);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
		snprintf(c->peer, sizeof c->peer, "%s:%d", a, ntohs(in->sin_port));
	}
	c->bev = bufferevent_socket_new(cm.base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&conns, c, link);
	cm.conns++;
	log_debug("curve-model: C-%lld %s: connected", (long long)c->id, c->peer);
}
