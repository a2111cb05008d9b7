/*
 * client.c — client connections: reading, framing, routing, replies.
 *
 *   accept ──▶ client_accept ──▶ [CL_ACTIVE] ◀──────────────────────────────┐
 *                                  │ read cb                                │
 *                                  ▼                                        │
 *                           process_input ── may_parse()? no: pause reading │
 *                                  │ yes                                    │
 *                      wire_frame_check ── NEED_MORE: wait (read timeout)   │
 *                                  │ BAD: error reply, flush, close         │
 *                                  ▼ READY                                  │
 *                           handle_message                                  │
 *          OP_QUERY ─▶ legacy handshake (OP_REPLY) or error                 │
 *          OP_MSG   ─▶ wire_parse_msg ── invalid: error reply ──────────────┤
 *                      router_classify                                      │
 *                        hello/ping/stats/auth ─▶ answered here ────────────┤
 *                        forward ─▶ request ─▶ batcher | pool ─▶ server     │
 *          other    ─▶ error reply                                          │
 *   server reply ─▶ request_reply_raw ─▶ client_send ─▶ output ─────────────┘
 *
 * Rules: a client is parsed only while it has fewer than
 * max_inflight_per_client requests, less than max_client_buffer_bytes of
 * unsent output and of parsed request messages not yet sent, and the proxy
 * is not at max_buffer_bytes (proxy/membound.h); otherwise its socket is not
 * read (TCP backpressure). Replies are bounded too: a client's requests are
 * dispatched only while client_may_dispatch (unsent replies stay within the
 * limit plus one message); its queued requests wait and are kicked when it
 * drains. A closed client's requests are abandoned (each request's abandon
 * callback, proxy/client_ops.c): queued ones are dropped, running ones have
 * their reply discarded on arrival. Frees are deferred.
 */
#include "proxy/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "pool/batch.h"
#include "proxy/janitor.h"
#include "pool/pool.h"
#include "pool/sticky.h"
#include "proxy/admin.h"
#include "proxy/cursor.h"
#include "core/handshake.h"
#include "proxy/membound.h"
#include "proxy/proxy.h"
#include "proxy/router.h"
#include "core/stats.h"
#include "core/wire.h"

static struct client_list clients_active = TAILQ_HEAD_INITIALIZER(clients_active);
static struct client_list clients_justfree = TAILQ_HEAD_INITIALIZER(clients_justfree);
static int n_active;
static uint64_t next_client_id = 1;

static int n_over_limit; /* accepted beyond max_client_conn, awaiting refusal */

static void sbuf_cb_client(struct sbuf *sb, enum sbuf_event ev, void *arg);
static void resume_cb(evutil_socket_t fd, short what, void *arg);

/* Every change of a client's socket buffers, for the memory bound. */
static void account_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct client *c = arg;
	int64_t delta = (int64_t)info->n_added - (int64_t)info->n_deleted;

	(void)buf;
	c->io_bytes = (size_t)((int64_t)c->io_bytes + delta);
	membound_add(delta);
}

static bool account_start(struct client *c)
{
	return evbuffer_add_cb(c->sb.in, account_cb, c) != NULL &&
	       evbuffer_add_cb(c->sb.out, account_cb, c) != NULL;
}

static void account_stop(struct client *c)
{
	if (c->sb.in != NULL)
		evbuffer_remove_cb(c->sb.in, account_cb, c);
	if (c->sb.out != NULL)
		evbuffer_remove_cb(c->sb.out, account_cb, c);
	membound_add(-(int64_t)c->io_bytes);
	c->io_bytes = 0;
}

static const char *const state_names[] = {"new", "active", "justfree"};

static void client_set_state(struct client *c, enum client_state st)
{
	if (c->state == st)
		return;
	client_debug(c, "state %s -> %s", state_names[c->state], state_names[st]);
	if (c->state == CL_ACTIVE) {
		TAILQ_REMOVE(&clients_active, c, link);
		n_active--;
		if (c->over_limit)
			n_over_limit--;
	}
	c->state = st;
	if (st == CL_ACTIVE) {
		TAILQ_INSERT_TAIL(&clients_active, c, link);
		n_active++;
	} else {
		TAILQ_INSERT_TAIL(&clients_justfree, c, link);
		janitor_schedule_free();
	}
}

static void format_peer(const struct sockaddr *addr, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)addr;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->sin_port));
	} else if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "unix");
	}
}

void client_accept(int fd, const struct sockaddr *addr, int addrlen)
{
	struct client *c = calloc(1, sizeof(*c));
	int one = 1;

	if (c == NULL)
		fatal("out of memory");
	(void)addrlen;
	c->id = next_client_id++;
	c->state = CL_NEW;
	request_owner_init(&c->owner, c->id, &client_owner_ops);
	format_peer(addr, c->peer, sizeof(c->peer));
	if (addr->sa_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!sbuf_accept(&c->sb, g.base, fd, sbuf_cb_client, c) ||
	    (c->resume_ev = event_new(g.base, -1, 0, resume_cb, c)) == NULL || !account_start(c)) {
		log_error("cannot set up client %s", c->peer);
		account_stop(c);
		sbuf_free(&c->sb); /* closes fd */
		if (c->resume_ev != NULL)
			event_free(c->resume_ev);
		free(c);
		return;
	}
	c->connected_usec = c->last_active_usec = g.now_usec;
	c->reply_est = (size_t)g.cfg.max_client_buffer_bytes; /* unknown: assume large */
	client_set_state(c, CL_ACTIVE);
	STAT_INC(clients_accepted);
	if (n_active - n_over_limit > g.cfg.max_client_conn) {
		c->over_limit = true;
		n_over_limit++;
		STAT_INC(clients_refused);
		log_warning("C-%" PRIu64 " %s: over max_client_conn (%" PRId64 "), will refuse",
			    c->id, c->peer, g.cfg.max_client_conn);
	}
	sbuf_set_read_high(&c->sb, (size_t)g.cfg.max_client_buffer_bytes);
	client_debug(c, "connected");
}

void client_close(struct client *c, const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	if (c->state == CL_JUSTFREE)
		return;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (strcmp(reason, "client closed") == 0)
		client_debug(c, "closing: %s", reason);
	else
		client_info(c, "closing: %s", reason);
	request_owner_abandon_all(&c->owner); /* each request's abandon callback */
	cursor_client_closed(c->id);	      /* kills its open cursors on the backend */
	sticky_owner_closed(&c->owner);
	sbuf_close(&c->sb);
	event_del(c->resume_ev);
	client_set_state(c, CL_JUSTFREE);
}

void client_free_deferred(void)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&clients_justfree)) != NULL) {
		TAILQ_REMOVE(&clients_justfree, c, link);
		account_stop(c);
		sbuf_free(&c->sb);
		event_free(c->resume_ev);
		free(c);
	}
}

static bool output_full(const struct client *c)
{
	return sbuf_pending_out(&c->sb) >= (size_t)g.cfg.max_client_buffer_bytes;
}

static bool may_parse(const struct client *c)
{
	return c->state == CL_ACTIVE && !c->closing &&
	       c->owner.inflight < g.cfg.max_inflight_per_client && !output_full(c) &&
	       c->req_bytes < (size_t)g.cfg.max_client_buffer_bytes && !membound_paused();
}

int client_running(const struct client *c)
{
	return c->owner.n_state[REQ_RUNNING] + c->owner.n_state[REQ_BATCHED];
}

bool client_may_dispatch(const struct client *c)
{
	size_t out = sbuf_pending_out(&c->sb);
	size_t limit = (size_t)g.cfg.max_client_buffer_bytes;
	int running;

	if (c->state != CL_ACTIVE)
		return true; /* its replies are dropped */
	if (out >= limit)
		return false;
	running = client_running(c);
	return running == 0 || out + (size_t)(running + 1) * c->reply_est <= limit;
}

static void set_reading(struct client *c, bool on)
{
	if (c->reading_paused == !on)
		return;
	c->reading_paused = !on;
	sbuf_set_reading(&c->sb, on);
}

void client_send(struct client *c, struct evbuffer *msg)
{
	size_t len = evbuffer_get_length(msg);

	if (c->state != CL_ACTIVE)
		return;
	c->last_active_usec = g.now_usec;
	c->reply_est = len > c->reply_est / 2 ? len : c->reply_est / 2;
	sbuf_write(&c->sb, msg);
	if (output_full(c)) {
		/* Resume once half of it has drained. */
		sbuf_notify_drained(&c->sb, (size_t)g.cfg.max_client_buffer_bytes / 2);
		set_reading(c, false);
	} else if (sbuf_pending_out(&c->sb) > 0) {
		/* Requests held back by client_may_dispatch go once it is empty. */
		sbuf_notify_drained(&c->sb, 0);
	}
}

/* Reply built here, for a message that never became a queued request. */
static void reply_doc(struct client *c, int32_t response_to, bool legacy, const bson_t *doc)
{
	struct evbuffer *out = evbuffer_new();

	if (legacy)
		wire_append_op_reply(out, response_to, 0, doc);
	else
		wire_append_msg(out, wire_next_request_id(), response_to, 0, doc);
	client_send(c, out);
	evbuffer_free(out);
}

static void reply_error(struct client *c, int32_t response_to, bool legacy, int code,
			const char *codename, const char *msg, const char *const *labels)
{
	bson_t doc;

	STAT_INC(requests_errors);
	wire_error_doc(&doc, code, codename, msg, labels);
	reply_doc(c, response_to, legacy, &doc);
	bson_destroy(&doc);
}

/* Answer a hello once backend_info is known (also called by the pool). */
void client_answer_hello(struct request *req, const struct backend_info *bi)
{
	struct client *c = client_of(req);
	bson_t reply;

	if (c == NULL) {
		request_done(req);
		return;
	}
	if (handshake_client_reply(req->hello_cmd, req->cmd, bi, (int64_t)c->id, !c->hello_seen,
				   &reply))
		c->hello_seen = true;
	else
		STAT_INC(requests_errors);
	request_reply_doc(req, &reply);
	bson_destroy(&reply);
}

static void handle_hello(struct client *c, struct request *req, const bson_t *body)
{
	struct pool *p = pool_target();

	req->hello_cmd = bson_copy(body);
	if (p->info.known) {
		client_answer_hello(req, &p->info);
		return;
	}
	pool_wait_hello(req, client_answer_hello);
}

static void handle_local(struct client *c, const struct wire_msg *m, const struct route_info *ri,
			 struct request *req)
{
	bson_t doc;

	STAT_INC(requests_local);
	if (ri->route != ROUTE_HELLO)
		request_set_state(req, REQ_LOCAL, NULL);
	switch (ri->route) {
	case ROUTE_HELLO:
		handle_hello(c, req, &m->body);
		return;
	case ROUTE_PING:
		bson_init(&doc);
		BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
		request_reply_doc(req, &doc);
		bson_destroy(&doc);
		return;
	case ROUTE_STATS:
		admin_stats_reply(req);
		return;
	case ROUTE_AUTH:
		request_fail(
		    req, 18, "AuthenticationFailed",
		    "mongoplex: client authentication is not supported yet; connect without "
		    "credentials (the proxy authenticates to the backend itself)",
		    NULL);
		return;
	default:
		request_fail(req, 59, "CommandNotFound", ri->refuse_msg, NULL);
		return;
	}
}

static void count_forward(const struct route_info *ri, bool more_to_come)
{
	STAT_INC(requests_forwarded);
	if (more_to_come)
		STAT_INC(more_to_come_writes);
	if (ri->cursor_op)
		STAT_INC(cursor_requests);
	if (ri->in_txn)
		STAT_INC(txn_requests);
}

/* A lookup may join a batch only when nothing orders or holds it back: the
 * batcher neither follows unacknowledged writes (pool/sticky.h) nor knows
 * client_may_dispatch. */
static bool may_batch(struct client *c, const struct request *req)
{
	const struct request *r;

	if (c->owner.sticky != NULL || !client_may_dispatch(c))
		return false;
	TAILQ_FOREACH(r, &c->owner.requests, client_link)
		if (r != req && r->more_to_come)
			return false;
	return true;
}

/* Build the request that forwards this message and hand it on. */
static void forward(struct client *c, struct evbuffer *buf, uint8_t *data, size_t len,
		    const struct wire_msg *m, const struct route_info *ri, struct request *req)
{
	size_t newlen;

	if (ri->cursor_op && cursor_admit(req, m))
		return; /* not this client's cursor: answered by proxy/cursor.c */
	newlen = wire_msg_prepare_forward(data, len);
	count_forward(ri, req->more_to_come);
	req->retryable_write = ri->retryable_write;
	if (newlen != len) { /* checksum stripped: keep the first newlen bytes */
		req->msg = evbuffer_new();
		evbuffer_add(req->msg, data, newlen);
	} else {
		req->msg = evbuffer_new();
		evbuffer_add_buffer(req->msg, buf);
	}
	req->held_bytes = evbuffer_get_length(req->msg);
	c->req_bytes += req->held_bytes;
	membound_add((int64_t)req->held_bytes);
	if (ri->is_find && !ri->in_txn && g.cfg.batching && may_batch(c, req) &&
	    batch_try_submit(req, &m->body))
		return;
	pool_submit(req);
}

static void handle_op_msg(struct client *c, struct evbuffer *buf, uint8_t *data, size_t len)
{
	struct wire_msg m;
	struct wire_error err;
	struct route_info ri;
	struct request *req;

	if (!wire_parse_msg(data, len, &m, &err)) {
		STAT_INC(bad_messages);
		client_info(c, "bad OP_MSG: %s", err.msg);
		/* Under 20 bytes there is no flagBits word to read (the bytes past
		 * len are stale buffer memory): the flags are unknown, so answer. */
		if (len < WIRE_HEADER_LEN + 4 ||
		    !(wire_read_i32(data + WIRE_HEADER_LEN) & MSG_MORE_TO_COME))
			reply_error(c, wire_read_i32(data + 4), false, err.code, err.codename,
				    err.msg, NULL);
		return;
	}
	req = client_request_new(c);
	req->client_request_id = m.h.request_id;
	req->more_to_come = (m.flags & MSG_MORE_TO_COME) != 0;
	if (!router_classify(&m.body, &ri)) {
		request_fail(req, 40571, "Location40571", ri.refuse_msg, NULL);
		return;
	}
	snprintf(req->cmd, sizeof(req->cmd), "%s", ri.cmd);
	if (g.shutting_down && ri.route != ROUTE_HELLO) {
		static const char *const labels[] = {"RetryableError", "RetryableWriteError", NULL};

		STAT_INC(refused_shutdown);
		request_fail(req, 91, "ShutdownInProgress", "mongoplex is shutting down", labels);
		return;
	}
	if (ri.route != ROUTE_FORWARD) {
		handle_local(c, &m, &ri, req);
		return;
	}
	forward(c, buf, data, len, &m, &ri, req);
}

static bool is_handshake_cmd(const char *name)
{
	return strcmp(name, "hello") == 0 || strcasecmp(name, "isMaster") == 0;
}

/* Legacy OP_QUERY: only the handshake is served, answered with OP_REPLY. */
static void handle_op_query(struct client *c, uint8_t *data, size_t len)
{
	struct wire_query q;
	struct wire_error err;
	struct request *req;
	bson_iter_t it;
	const char *dot;

	if (!wire_parse_query(data, len, &q, &err)) {
		STAT_INC(bad_messages);
		client_info(c, "bad OP_QUERY: %s", err.msg);
		reply_error(c, wire_read_i32(data + 4), true, err.code, err.codename, err.msg,
			    NULL);
		return;
	}
	dot = strchr(q.collection, '.');
	if (!bson_iter_init(&it, &q.query) || !bson_iter_next(&it) || dot == NULL ||
	    strcmp(dot, ".$cmd") != 0 || !is_handshake_cmd(bson_iter_key(&it))) {
		STAT_INC(bad_messages);
		client_info(c, "refused legacy OP_QUERY on %s", q.collection);
		reply_error(
		    c, q.h.request_id, true, 352, "UnsupportedOpQueryCommand",
		    "mongoplex: OP_QUERY is only supported for the hello/isMaster handshake; "
		    "use OP_MSG",
		    NULL);
		return;
	}
	STAT_INC(requests_local);
	req = client_request_new(c);
	req->client_request_id = q.h.request_id;
	req->legacy_reply = true;
	snprintf(req->cmd, sizeof(req->cmd), "%s", bson_iter_key(&it));
	handle_hello(c, req, &q.query);
}

static void handle_message(struct client *c, struct evbuffer *buf, size_t len)
{
	uint8_t *data = evbuffer_pullup(buf, (ssize_t)len);
	int32_t opcode = wire_read_i32(data + 12);
	char msg[128];

	STAT_INC(requests_total);
	if (c->over_limit) {
		snprintf(msg, sizeof(msg),
			 "mongoplex: too many client connections (max_client_conn = %" PRId64 ")",
			 g.cfg.max_client_conn);
		reply_error(c, wire_read_i32(data + 4), opcode == OP_QUERY, OVERLOAD_CODE,
			    OVERLOAD_CODENAME, msg, overload_labels);
		c->closing = true;
		return;
	}
	switch (opcode) {
	case OP_MSG:
		handle_op_msg(c, buf, data, len);
		break;
	case OP_QUERY:
		handle_op_query(c, data, len);
		break;
	default:
		STAT_INC(bad_messages);
		client_info(c, "refused %s (opcode %d)", wire_opcode_name(opcode), opcode);
		snprintf(msg, sizeof(msg), "mongoplex: unsupported opcode %d (%s); use OP_MSG",
			 opcode, wire_opcode_name(opcode));
		reply_error(c, wire_read_i32(data + 4), false, 2, "BadValue", msg, NULL);
		break;
	}
}

/* Framing is lost: say why (as a reply, if the client can read one) and close. */
static void framing_lost(struct client *c, int32_t len, const uint8_t *hdr, size_t avail)
{
	char msg[160];

	STAT_INC(bad_messages);
	STAT_INC(clients_closed_error);
	snprintf(msg, sizeof(msg), "mongoplex: invalid messageLength %d (must be 16..%d)", len,
		 WIRE_MAX_MESSAGE);
	if (avail >= WIRE_HEADER_LEN)
		reply_error(c, wire_read_i32(hdr + 4), false, 10334, "BSONObjectTooLarge", msg,
			    NULL);
	client_info(c, "%s; closing after the error reply", msg);
	c->closing = true;
	evbuffer_drain(c->sb.in, avail);
}

static void process_input(struct client *c)
{
	struct evbuffer *in = c->sb.in;

	if (c->state == CL_ACTIVE)
		pool_owner_kick(&c->owner);

	while (may_parse(c)) {
		size_t avail = evbuffer_get_length(in);
		const uint8_t *hdr =
		    evbuffer_pullup(in, avail < WIRE_HEADER_LEN ? (ssize_t)avail : WIRE_HEADER_LEN);
		int32_t len = 0;
		struct evbuffer *msg;

		switch (wire_frame_check(hdr, avail, &len)) {
		case WIRE_FRAME_NEED_MORE:
			c->partial_since_usec =
			    avail ? (c->partial_since_usec ? c->partial_since_usec : g.now_usec)
				  : 0;
			/* A message may exceed the buffer limit (up to 48 MB):
			 * let it in whole, then go back to the limit. */
			sbuf_set_read_high(&c->sb, (size_t)(len > g.cfg.max_client_buffer_bytes
								? len
								: g.cfg.max_client_buffer_bytes));
			set_reading(c, true);
			return;
		case WIRE_FRAME_BAD:
			framing_lost(c, len, hdr, avail);
			break;
		case WIRE_FRAME_READY:
			c->partial_since_usec = 0;
			msg = evbuffer_new();
			evbuffer_remove_buffer(in, msg, (size_t)len);
			handle_message(c, msg, (size_t)len);
			evbuffer_free(msg);
			break;
		}
	}
	if (c->state == CL_ACTIVE && !c->closing)
		set_reading(c, false);
	if (c->closing) {
		if (sbuf_pending_out(&c->sb) == 0)
			client_close(c, "closed after error reply");
		else
			sbuf_notify_drained(&c->sb, 0);
	}
}

static void sbuf_cb_client(struct sbuf *sb, enum sbuf_event ev, void *arg)
{
	struct client *c = arg;

	(void)sb;
	proxy_tick();
	switch (ev) {
	case SBUF_READ:
		c->last_active_usec = g.now_usec;
		process_input(c);
		break;
	case SBUF_DRAINED:
		process_input(c);
		if (c->state == CL_ACTIVE && !c->closing && sbuf_pending_out(&c->sb) > 0)
			sbuf_notify_drained(&c->sb, 0);
		break;
	case SBUF_EOF:
		client_close(c, "client closed");
		break;
	case SBUF_ERROR:
		if (c->sb.err == ECONNRESET) /* how many drivers hang up */
			client_close(c, "client closed");
		else
			client_close(c, "socket error: %s", strerror(c->sb.err));
		break;
	case SBUF_CONNECTED:
		break;
	}
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proxy_tick();
	process_input(arg);
}

/* Deferred: never re-enter parsing from inside a server's callback. */
void client_request_finished(struct client *c)
{
	if (c->state != CL_ACTIVE)
		return;
	event_active(c->resume_ev, EV_TIMEOUT, 1);
}

void client_close_all(const char *reason)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&clients_active)) != NULL)
		client_close(c, "%s", reason);
}

void client_janitor(uint64_t now)
{
	struct client *c, *tmp;
	uint64_t idle_us = (uint64_t)g.cfg.client_idle_timeout_ms * 1000;
	uint64_t read_us = (uint64_t)g.cfg.client_read_timeout_ms * 1000;

	TAILQ_FOREACH_SAFE(c, &clients_active, link, tmp) {
		if (c->over_limit && now - c->connected_usec > read_us) {
			client_close(c, "refused (max_client_conn) and sent no request within "
					"client_read_timeout_ms");
		} else if (c->partial_since_usec && now - c->partial_since_usec > read_us) {
			STAT_INC(clients_closed_error);
			client_close(c,
				     "incomplete message for more than %" PRId64
				     " ms (client_read_timeout_ms)",
				     g.cfg.client_read_timeout_ms);
		} else if (idle_us && c->owner.inflight == 0 &&
			   now - c->last_active_usec > idle_us) {
			client_close(c,
				     "idle for more than %" PRId64 " ms (client_idle_timeout_ms)",
				     g.cfg.client_idle_timeout_ms);
		}
	}
}

void client_apply_cfg(void)
{
	struct client *c;

	TAILQ_FOREACH(c, &clients_active, link) {
		sbuf_set_read_high(&c->sb, (size_t)g.cfg.max_client_buffer_bytes);
		client_request_finished(c);
	}
}

int client_count(void)
{
	return n_active;
}

void client_phase_counts(int *idle, int *waiting, int *running)
{
	request_owner_phases(waiting, running);
	*idle = n_active - *waiting - *running;
}

void client_memory_paused(bool paused)
{
	struct client *c;

	TAILQ_FOREACH(c, &clients_active, link) {
		if (paused)
			set_reading(c, false);
		else
			client_request_finished(c);
	}
}

int client_count_memory_paused(void)
{
	struct client *c;
	int n = 0;

	TAILQ_FOREACH(c, &clients_active, link)
		if (membound_paused() || output_full(c) ||
		    c->req_bytes >= (size_t)g.cfg.max_client_buffer_bytes)
			n++;
	return n;
}

size_t client_unsent_bytes(void)
{
	struct client *c;
	size_t n = 0;

	TAILQ_FOREACH(c, &clients_active, link)
		n += sbuf_pending_out(&c->sb);
	return n;
}
