/*
 * server.c — backend connections: nonblocking connect, the proxy's hello,
 * one request/reply exchange at a time, raw forwarding with only
 * requestID/responseTo rewritten.
 *
 *   server_connect ─▶ [CONNECTING] ─ TCP up ─▶ send hello ─ reply ─▶ [SCRAM login,
 *                     pool/auth.c] ─▶ its watchers' `ready` (the pool)
 *   pool gives a request ─▶ server_start ─▶ [ACTIVE] ─ reply ─▶ client ─▶ server_release
 *        ─▶ its watchers in order (server.h; pool.c's table: pin, sticky, pool)
 *           until one takes it
 *   moreToCome request: done once its bytes are written; the connection stays
 *   with its client until an acknowledged exchange ends there (pool/sticky.c)
 *   any error/EOF ─▶ server_close ─▶ request gets HostUnreachable ─▶ every
 *        watcher's `closed` ─▶ [JUSTFREE]
 */
#include "pool/server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "core/evpool.h"
#include "core/xalloc.h"
#include "pool/auth.h"
#include "pool/backend_compress.h"
#include "pool/backend_tls.h"
#include "pool/pool.h"
#include "core/handshake.h"
#include "core/globals.h"
#include "core/request.h"
#include "core/stats.h"
#include "core/wire.h"
#include "pool/route.h"

static struct server_list servers_justfree = TAILQ_HEAD_INITIALIZER(servers_justfree);
static uint64_t next_server_id = 1;
static void (*justfree_hook)(void);
static const struct server_watcher *const *watchers; /* server_set_watchers */

/* Each watcher `w` in table order. */
#define EACH_WATCHER(w) for (const struct server_watcher *const *w = watchers; w && *w; w++)
/* Every watcher that has `event`, in order, with the arguments that follow. */
#define TELL_WATCHERS(event, ...)                                                                  \
	do {                                                                                       \
		EACH_WATCHER(w_)                                                                   \
			if ((*w_)->event != NULL)                                                  \
				(*w_)->event(__VA_ARGS__);                                         \
	} while (0)

void server_set_justfree_hook(void (*hook)(void))
{
	justfree_hook = hook;
}

static const char *const state_names[] = {"new", "connecting", "idle", "active", "justfree"};

static struct server_list *state_list(struct server *s, enum server_state st, int **count)
{
	struct pool *p = s->pool;

	switch (st) {
	case SV_NEW:
		*count = NULL;
		return NULL;
	case SV_CONNECTING:
		*count = &p->n_connecting;
		return &p->connecting;
	case SV_IDLE:
		*count = &p->n_idle;
		return &p->idle;
	case SV_ACTIVE:
		*count = &p->n_active;
		return &p->active;
	case SV_JUSTFREE:
		break;
	}
	*count = NULL;
	return &servers_justfree;
}

void server_set_state(struct server *s, enum server_state st)
{
	struct server_list *from, *to;
	int *cfrom, *cto;

	if (s->state == st)
		return;
	from = state_list(s, s->state, &cfrom);
	to = state_list(s, st, &cto);
	if (from != NULL)
		TAILQ_REMOVE(from, s, link);
	if (cfrom)
		(*cfrom)--;
	if (st == SV_IDLE)
		TAILQ_INSERT_HEAD(to, s, link); /* LIFO: hot connections first */
	else
		TAILQ_INSERT_TAIL(to, s, link);
	if (cto)
		(*cto)++;
	server_debug(s, "state %s -> %s", state_names[s->state], state_names[st]);
	s->state = st;
	if (st == SV_JUSTFREE && justfree_hook != NULL)
		justfree_hook();
}

static void sbuf_cb_server(struct sbuf *sb, enum sbuf_event ev, void *arg);

bool server_connect(struct pool *p)
{
	struct server *s = xcalloc(1, sizeof(*s));

	s->id = next_server_id++;
	s->pool = p;
	s->state = SV_NEW;
	s->created_usec = g.now_usec;
	s->compressor = -1;
	s->generation = p->generation;
	EACH_WATCHER(w)
		if ((*w)->opened != NULL)
			(*w)->opened(s);
	server_set_state(s, SV_CONNECTING);
	if (!sbuf_connect(&s->sb, g.base, (struct sockaddr *)&p->addr, p->addrlen, sbuf_cb_server,
			  s)) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "connect: %s", strerror(s->sb.err));
		return false;
	}
	if (!backend_tls_attach(&s->sb, p->host)) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "cannot set up TLS");
		return false;
	}
	return true;
}

static void send_hello(struct server *s)
{
	bson_t cmd;
	struct evbuffer *out = xevbuffer_new();

	handshake_backend_hello(&cmd);
	bcomp_extend_hello(&cmd);
	auth_extend_hello(s, &cmd);
	s->expect_response_to = wire_next_request_id();
	wire_append_msg(out, s->expect_response_to, 0, 0, &cmd);
	bson_destroy(&cmd);
	sbuf_write(&s->sb, out);
	evbuffer_free(out);
}

void server_start(struct server *s, struct request *req)
{
	uint8_t *h = evbuffer_pullup(req->msg, WIRE_HEADER_LEN);
	int32_t id = wire_next_request_id();

	server_set_state(s, SV_ACTIVE);
	s->req = req;
	s->exchange_started_usec = g.now_usec;
	req->route->server = s;
	req->route->started_usec = g.now_usec;
	req->backend_request_id = id;
	req->sent = true;
	TELL_WATCHERS(started, s, req);
	request_set_state(req, REQ_RUNNING, NULL);
	wire_write_i32(h + 4, id);
	wire_write_i32(h + 8, 0);
	s->expect_response_to = req->more_to_come ? 0 : id;
	s->flush_then_release = req->more_to_come;
	bcomp_wrap_request(s, req);
	sbuf_write(&s->sb, req->msg);
	if (req->more_to_come)
		sbuf_notify_drained(&s->sb, 0); /* released once on the wire */
}

void server_send_more(struct server *s, struct evbuffer *msg, int32_t request_id)
{
	s->expect_response_to = request_id;
	sbuf_write(&s->sb, msg);
}

void server_set_watchers(const struct server_watcher *const *table)
{
	watchers = table;
}

void server_released(struct server *s)
{
	EACH_WATCHER(w)
		if ((*w)->released != NULL && (*w)->released(s))
			return;
}

void server_release(struct server *s)
{
	TELL_WATCHERS(ended, s, false);
	s->req = NULL;
	s->expect_response_to = 0;
	s->flush_then_release = false;
	s->exchanges++;
	server_released(s);
}

void server_close(struct server *s, int code, const char *codename, const char *fmt, ...)
{
	char reason[256];
	struct request *req = s->req;
	bool was_connecting = s->state == SV_CONNECTING;
	struct server_closing why = {was_connecting, code, codename, reason};
	va_list ap;

	if (s->state == SV_JUSTFREE)
		return;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	server_log(req || was_connecting ? LOG_LVL_WARNING : LOG_LVL_INFO, s, "closing: %s",
		   reason);
	sbuf_close(&s->sb);
	s->req = NULL;
	TELL_WATCHERS(ended, s, true);
	server_set_state(s, SV_JUSTFREE);
	if (!was_connecting)
		STAT_INC(backend_disconnects);
	if (req != NULL) {
		req->route->server = NULL;
		req->ops->network_error(req, code, codename, reason);
	}
	EACH_WATCHER(w)
		if ((*w)->closed != NULL)
			(*w)->closed(s, &why);
}

void server_free_deferred(void)
{
	struct server *s;

	while ((s = TAILQ_FIRST(&servers_justfree)) != NULL) {
		TAILQ_REMOVE(&servers_justfree, s, link);
		EACH_WATCHER(w)
			if ((*w)->freed != NULL)
				(*w)->freed(s);
		sbuf_free(&s->sb);
		auth_conv_free(s);
		free(s);
	}
}

/* The hello reply, then the SASL replies of the login (pool/auth.c). */
static void handle_hello_reply(struct server *s, const struct wire_msg *m)
{
	struct backend_info bi;
	char err[600];

	bcomp_on_hello_reply(s, &m->body);
	switch (auth_on_reply(s, &m->body, &bi, err, sizeof(err))) {
	case AUTH_MORE:
		return;
	case AUTH_FAILED:
		server_close(s, MP_ERR(AUTHENTICATION_FAILED), "%s", err);
		return;
	case AUTH_BAD_HELLO:
		server_close(s, MP_ERR(HOST_UNREACHABLE), "%s", err);
		return;
	case AUTH_DONE:
		break;
	}
	auth_conv_free(s);
	s->expect_response_to = 0;
	STAT_INC(backend_connects);
	server_debug(s, "ready (%s, wire %d..%d)", handshake_kind_name(bi.kind),
		     bi.min_wire_version, bi.max_wire_version);
	TELL_WATCHERS(ready, s, &bi);
}

static void handle_reply(struct server *s, struct evbuffer *buf, size_t len);

/* OP_COMPRESSED (pool/backend_compress.c): handled as the OP_MSG it holds. */
static void handle_compressed_reply(struct server *s, const uint8_t *data, size_t len)
{
	struct evbuffer *plain = evpool_get();
	struct wire_error err;

	if (bcomp_unwrap_reply(data, len, plain, &err))
		handle_reply(s, plain, evbuffer_get_length(plain));
	else
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend sent a bad OP_COMPRESSED: %s",
			     err.msg);
	evpool_put(plain);
}

static void handle_reply(struct server *s, struct evbuffer *buf, size_t len)
{
	uint8_t *data = evbuffer_pullup(buf, (ssize_t)len);
	struct wire_header h;
	struct wire_msg m;
	struct wire_error err;

	wire_read_header(data, &h);
	if (h.opcode == OP_COMPRESSED) {
		handle_compressed_reply(s, data, len);
		return;
	}
	if (h.opcode != OP_MSG) {
		server_close(s, MP_ERR(HOST_UNREACHABLE),
			     "backend sent %s (opcode %d), expected OP_MSG",
			     wire_opcode_name(h.opcode), h.opcode);
		return;
	}
	if (len < WIRE_HEADER_LEN + 5) {
		server_close(s, MP_ERR(HOST_UNREACHABLE),
			     "backend sent a %zu-byte OP_MSG (too short)", len);
		return;
	}
	if (h.response_to == 0 || h.response_to != s->expect_response_to) {
		STAT_INC(stale_replies);
		server_debug(s, "dropping reply to %d (expecting %d)", h.response_to,
			     s->expect_response_to);
		return;
	}
	if ((uint32_t)wire_read_i32(data + WIRE_HEADER_LEN) & MSG_MORE_TO_COME) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend started an exhaust stream");
		return;
	}
	/* Checked, not trusted: checksum, sections, every document valid BSON. */
	if (!wire_parse_reply(data, len, &m, &err)) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend sent an invalid reply: %s",
			     err.msg);
		return;
	}
	if (s->state == SV_CONNECTING)
		handle_hello_reply(s, &m);
	else if (s->req != NULL) { /* the callback releases s or continues the exchange */
		TELL_WATCHERS(replied, s, &m.body); /* replica sets: "not primary" */
		s->req->ops->reply(s, s->req, buf, data, len, &m);
	} else if (s->fence_id != 0)
		TELL_WATCHERS(fenced, s);
}

/* A merged query's reply above the message limit (the backend ignored the
 * limit it advertised): skip its bytes as they arrive instead of losing the
 * connection, then let the batcher re-run its lookups alone. Only for a
 * well-framed OP_MSG answering the batch. Returns false if not applicable. */
static bool discard_oversized(struct server *s, const uint8_t *hdr, size_t avail, int32_t len)
{
	struct wire_header h;

	if (len <= WIRE_MAX_MESSAGE || s->req == NULL || s->req->ops->reply_too_big == NULL ||
	    avail < WIRE_HEADER_LEN)
		return false;
	wire_read_header(hdr, &h);
	if (h.opcode != OP_MSG || h.response_to == 0 || h.response_to != s->expect_response_to)
		return false;
	s->discard_left = len;
	s->req->ops->reply_too_big(s, s->req, len); /* releases s: replies queue behind */
	return true;
}

/* Skip what is buffered of the reply being discarded; true once all is gone. */
static bool discard_more(struct server *s)
{
	size_t avail = evbuffer_get_length(s->sb.in);
	size_t n = (uint64_t)s->discard_left < avail ? (size_t)s->discard_left : avail;

	evbuffer_drain(s->sb.in, n);
	s->discard_left -= (int64_t)n;
	return s->discard_left == 0;
}

static void read_replies(struct server *s)
{
	while (s->state != SV_JUSTFREE) {
		struct evbuffer *in = s->sb.in; /* sbuf_take_input may replace it */
		size_t avail = evbuffer_get_length(in);
		const uint8_t *hdr;
		int32_t len = 0;
		struct evbuffer *msg;

		if (s->discard_left > 0) {
			if (!discard_more(s))
				return;
			continue;
		}
		hdr =
		    evbuffer_pullup(in, avail < WIRE_HEADER_LEN ? (ssize_t)avail : WIRE_HEADER_LEN);
		switch (wire_frame_check(hdr, avail, &len)) {
		case WIRE_FRAME_NEED_MORE:
			return;
		case WIRE_FRAME_BAD:
			if (len > WIRE_MAX_MESSAGE && avail < WIRE_HEADER_LEN && s->req != NULL &&
			    s->req->ops->reply_too_big != NULL)
				return; /* wait for the header: maybe a merged reply to skip */
			if (discard_oversized(s, hdr, avail, len))
				continue;
			server_close(s, MP_ERR(HOST_UNREACHABLE),
				     "backend sent an invalid messageLength %d", len);
			return;
		case WIRE_FRAME_READY:
			msg = sbuf_take_input(&s->sb, (size_t)len);
			handle_reply(s, msg, (size_t)len);
			evpool_put(msg);
			break;
		}
	}
}

/* A moreToCome write is complete once it is on the wire; the connection
 * stays with its client (pool/sticky.c). */
static void written(struct server *s)
{
	struct request *req = s->req;

	if (!s->flush_then_release || req == NULL)
		return;
	req->route->server = NULL;
	s->req = NULL;
	s->flush_then_release = false;
	s->exchanges++;
	request_done(req);
	TELL_WATCHERS(written, s);
}

static void connected(struct server *s)
{
	int one = 1;

	if (s->pool->addr.ss_family != AF_UNIX)
		setsockopt(s->sb.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	send_hello(s);
}

/* A TLS failure: during the handshake (bad certificate, hostname, version)
 * the pool probes once per backoff step until a handshake succeeds. */
static void tls_failed(struct server *s)
{
	if (s->state == SV_CONNECTING) {
		s->pool->tls_failed = true;
		server_close(s, MP_ERR(HOST_UNREACHABLE), "TLS handshake with %s failed: %s",
			     pool_name(s->pool), sbuf_tls_error(&s->sb));
		return;
	}
	server_close(s, MP_ERR(HOST_UNREACHABLE), "TLS error from the backend: %s",
		     sbuf_tls_error(&s->sb));
}

static void sbuf_cb_server(struct sbuf *sb, enum sbuf_event ev, void *arg)
{
	struct server *s = arg;

	proxy_tick();
	switch (ev) {
	case SBUF_READ:
		read_replies(s);
		break;
	case SBUF_DRAINED:
		written(s);
		break;
	case SBUF_CONNECTED:
		connected(s);
		break;
	case SBUF_WROTE:
		break;
	case SBUF_EOF:
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend closed the connection");
		break;
	case SBUF_ERROR:
		if (sbuf_tls_error(sb)[0] != '\0')
			tls_failed(s);
		else
			server_close(s, MP_ERR(HOST_UNREACHABLE), "backend socket error: %s",
				     strerror(sb->err));
		break;
	}
}
