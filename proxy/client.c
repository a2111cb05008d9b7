/*
 * client.c — client connections: lifecycle, reading and framing, output and
 * its limits (what a message becomes: proxy/client_msg.c). It calls nothing
 * above it by name: what it tells or asks the modules above (a message, a
 * close, a free) goes through the table of proxy/client_hooks.h.
 *
 *   accept ──▶ client_accept ──▶ [CL_ACTIVE] ◀──────────────────────────────┐
 *                                  │ read cb                                │
 *                                  ▼                                        │
 *                           process_input ── may_parse()? no: pause reading │
 *                                  │ yes                                    │
 *                      wire_frame_check ── NEED_MORE: wait (read timeout)   │
 *                                  │ BAD: error reply, flush, close         │
 *                                  ▼ READY                                  │
 *              client_hooks->message: client_handle_message (client_msg.c)  │
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
 * unsent output and of parsed request messages not yet sent; otherwise its
 * socket is not read (TCP backpressure). At max_buffer_bytes a client
 * holding its share of it is not read either (memory_held, proxy/membound.h;
 * the janitor rechecks). Replies are bounded too: a client's requests are
 * dispatched only while client_may_dispatch (unsent replies stay within the
 * limit plus one message; at max_buffer_bytes the limit is the share); its
 * queued requests wait and are kicked when it drains. A client whose unsent
 * output has not shrunk for client_write_timeout_ms is closed (janitor).
 * A closed client's requests are abandoned (each request's abandon
 * callback, proxy/client_ops.c): queued ones are dropped, running ones have
 * their reply discarded on arrival. Frees are deferred.
 */
#define _GNU_SOURCE /* struct ucred */
#include "proxy/client.h"
#include "proxy/client_hooks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/errors.h"
#include "core/evpool.h"
#include "core/xalloc.h"
#include "proxy/janitor.h"
#include "pool/pin.h"
#include "pool/pool.h"
#include "pool/route.h"
#include "pool/select.h"
#include "pool/sticky.h"
#include "proxy/cauth.h"
#include "proxy/client_tls.h"
#include "proxy/membound.h"
#include "proxy/proxy.h"
#include "core/stats.h"
#include "core/wire.h"

static struct client_list clients_active = TAILQ_HEAD_INITIALIZER(clients_active);
static struct client_list clients_justfree = TAILQ_HEAD_INITIALIZER(clients_justfree);
static int n_active;
/* What it calls above it (client_hooks.h), installed at start. */
const struct client_hooks *client_hooks;
static uint64_t next_client_id = 1;

static int n_over_limit; /* accepted beyond a limit (refused_by), awaiting refusal */
static int n_unauth;	 /* active, admitted and not logged in (max_unauth_conn) */
/* Repeatable lines: refusals at accept and their closes, auth_timeout_ms closes. */
static struct log_rl rl_refused = {.what = "connections refused at accept"};
static struct log_rl rl_refused_close = {.what = "refused connections closed"};
static struct log_rl rl_auth_timeout = {.what = "connections closed by auth_timeout_ms"};

static void sbuf_cb_client(struct sbuf *sb, enum sbuf_event ev, void *arg);
static void resume_cb(evutil_socket_t fd, short what, void *arg);

static const char *const state_names[] = {"new", "active", "justfree"};

static void client_set_state(struct client *c, enum client_state st)
{
	if (c->state == st)
		return;
	client_debug(c, "state %s -> %s", state_names[c->state], state_names[st]);
	if (c->state == CL_ACTIVE) {
		TAILQ_REMOVE(&clients_active, c, link);
		n_active--;
		if (c->refused_by != NULL)
			n_over_limit--;
		else if (!c->authenticated)
			n_unauth--;
	}
	c->state = st;
	if (st == CL_ACTIVE) {
		TAILQ_INSERT_TAIL(&clients_active, c, link);
		n_active++;
		n_unauth++; /* new: neither refused nor logged in */
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

/* The peer uid of an accepted unix-socket connection (SO_PEERCRED), -1 if
 * unknown: who may run admin commands with auth_mode = none (admin.h). */
static int64_t peer_uid(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred))
		return -1;
	return (int64_t)cred.uid;
}

int64_t client_max_unauth(void)
{
	int64_t n = g.cfg.max_unauth_conn ? g.cfg.max_unauth_conn : g.cfg.max_client_conn / 2;

	return n < 1 ? 1 : n;
}

int client_count_unauthenticated(void)
{
	return cauth_enabled() ? n_unauth : 0;
}

void client_set_authenticated(struct client *c, bool on)
{
	if (c->authenticated == on)
		return;
	c->authenticated = on;
	if (c->state == CL_ACTIVE && c->refused_by == NULL)
		n_unauth += on ? -1 : 1;
}

/* Accepted beyond `limit` (of value max): its first request is refused. */
static void refuse(struct client *c, const char *limit, int64_t max)
{
	c->refused_by = limit;
	n_over_limit++;
	n_unauth--;
	client_log_rl(&rl_refused, LOG_LVL_WARNING, c, "over %s (%" PRId64 "), will refuse", limit,
		      max);
}

void client_accept(int fd, const struct sockaddr *addr, int addrlen)
{
	struct client *c = xcalloc(1, sizeof(*c));
	int one = 1;

	(void)addrlen;
	/* With workers, ids are unique over the proxy: id modulo N is the
	 * worker (mongoplexKill finds it so, proxy/admin_fan.c). */
	c->id = next_client_id++ * (uint64_t)(g.nworkers > 1 ? g.nworkers : 1) +
		(uint64_t)(g.nworkers > 1 ? g.worker_id : 0);
	c->state = CL_NEW;
	c->compressor = c->msg_compressor = -1;
	request_owner_init(&c->owner, c->id, client_hooks->owner_ops);
	format_peer(addr, c->peer, sizeof(c->peer));
	c->peer_uid = addr->sa_family == AF_UNIX ? peer_uid(fd) : -1;
	if (addr->sa_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!sbuf_accept(&c->sb, g.base, fd, sbuf_cb_client, c) ||
	    (addr->sa_family != AF_UNIX && !client_tls_attach(&c->sb)) ||
	    (c->resume_ev = event_new(g.base, -1, 0, resume_cb, c)) == NULL) {
		log_error("cannot set up client %s", c->peer);
		sbuf_free(&c->sb); /* closes fd */
		if (c->resume_ev != NULL)
			event_free(c->resume_ev);
		free(c);
		return;
	}
	c->connected_usec = c->last_active_usec = c->out_progress_usec = g.now_usec;
	c->reply_est = (size_t)g.cfg.max_client_buffer_bytes; /* unknown: assume large */
	client_set_state(c, CL_ACTIVE);
	STAT_INC(clients_accepted);
	if (n_active - n_over_limit > g.cfg.max_client_conn) {
		STAT_INC(clients_refused);
		refuse(c, "max_client_conn", g.cfg.max_client_conn);
	} else if (cauth_enabled() && n_unauth > client_max_unauth()) {
		STAT_INC(clients_refused_unauth);
		refuse(c, "max_unauth_conn", client_max_unauth());
	}
	sbuf_set_read_high(&c->sb, (size_t)g.cfg.max_client_buffer_bytes);
	client_debug(c, "connected");
}

static void close_reason(struct client *c, struct log_rl *rl, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* client_close's work; the reason logged through rl if not NULL. */
static void close_reason(struct client *c, struct log_rl *rl, const char *fmt, va_list ap)
{
	char reason[256];

	if (c->state == CL_JUSTFREE)
		return;
	vsnprintf(reason, sizeof(reason), fmt, ap);
	if (strcmp(reason, "client closed") == 0)
		client_debug(c, "closing: %s", reason);
	else if (rl != NULL)
		client_log_rl(rl, LOG_LVL_INFO, c, "closing: %s", reason);
	else
		client_info(c, "closing: %s", reason);
	client_hooks->closing(c);	      /* its held hello */
	request_owner_abandon_all(&c->owner); /* each request's abandon callback */
	pin_owner_closed(&c->owner);	      /* LB pins: kill/abort on the pinned connection */
	client_hooks->closed(c);	      /* kills its open cursors on the backend */
	sticky_owner_closed(&c->owner);
	pool_owner_fini(&c->owner); /* pool/'s part of the owner, once both let go */
	sbuf_close(&c->sb);
	event_del(c->resume_ev);
	client_set_state(c, CL_JUSTFREE);
}

void client_close(struct client *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	close_reason(c, NULL, fmt, ap);
	va_end(ap);
}

void client_close_rl(struct client *c, struct log_rl *rl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	close_reason(c, rl, fmt, ap);
	va_end(ap);
}

void client_free_deferred(void)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&clients_justfree)) != NULL) {
		TAILQ_REMOVE(&clients_justfree, c, link);
		client_account_stop(c);
		sbuf_free(&c->sb);
		event_free(c->resume_ev);
		client_hooks->freed(c); /* its login state */
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
	       c->req_bytes < (size_t)g.cfg.max_client_buffer_bytes;
}

/* At max_buffer_bytes: does c hold its share (its socket is then not read)? */
static bool memory_heavy(const struct client *c)
{
	return membound_heavy(c->io_bytes + c->req_bytes, n_active);
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
	if (membound_paused() && membound_share(n_active) < limit)
		limit = membound_share(n_active); /* proxy/membound.h */
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
	client_account_sync(c);
	if (output_full(c)) {
		/* Resume once half of it has drained. */
		sbuf_notify_drained(&c->sb, (size_t)g.cfg.max_client_buffer_bytes / 2);
		set_reading(c, false);
	} else if (sbuf_pending_out(&c->sb) > 0) {
		/* Requests held back by client_may_dispatch go once it is empty. */
		sbuf_notify_drained(&c->sb, 0);
	}
}

static void process_input(struct client *c)
{
	if (c->state == CL_ACTIVE)
		pool_owner_kick(&c->owner);

	while (may_parse(c)) {
		size_t avail = evbuffer_get_length(c->sb.in); /* sbuf_take_input replaces sb.in */
		const uint8_t *hdr = evbuffer_pullup(
		    c->sb.in, avail < WIRE_HEADER_LEN ? (ssize_t)avail : WIRE_HEADER_LEN);
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
			client_account_sync(c);
			c->memory_held = memory_heavy(c);
			set_reading(c, !c->memory_held);
			return;
		case WIRE_FRAME_BAD:
			client_hooks->framing_lost(c, len, hdr, avail);
			break;
		case WIRE_FRAME_READY:
			c->partial_since_usec = 0;
			msg = sbuf_take_input(&c->sb, (size_t)len);
			client_hooks->message(c, &msg, (size_t)len); /* may take msg */
			evpool_put(msg);
			break;
		}
	}
	client_account_sync(c); /* what was read and not parsed; a framing error's drain */
	if (c->state == CL_ACTIVE && !c->closing)
		set_reading(c, false);
	if (c->closing) {
		if (sbuf_pending_out(&c->sb) == 0 && c->refused_by != NULL)
			client_close_rl(c, &rl_refused_close, "closed after error reply (%s)",
					c->refused_by);
		else if (sbuf_pending_out(&c->sb) == 0)
			client_close(c, "closed after error reply");
		else
			sbuf_notify_drained(&c->sb, 0);
	}
}

static void sbuf_cb_client(struct sbuf *sb, enum sbuf_event ev, void *arg)
{
	struct client *c = arg;

	proxy_tick();
	if (ev != SBUF_READ) /* a read is counted once process_input has parsed it */
		client_account_sync(c);
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
		if (sb->err == ECONNRESET) /* how many drivers hang up */
			client_close(c, "client closed");
		else if (sbuf_tls_error(sb)[0] != '\0')
			client_close(c, "TLS: %s", sbuf_tls_error(sb));
		else
			client_close(c, "socket error: %s", strerror(sb->err));
		break;
	case SBUF_CONNECTED:
	case SBUF_WROTE:
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

/* Would process_input do anything now? Not for a client that is read, has
 * no bytes buffered, no queued request to kick and no pin, and is not
 * closing: the common case after each reply, where the deferred callback
 * was one more event-loop dispatch per request (its next read parses). */
static bool resume_needed(const struct client *c)
{
	return c->reading_paused || c->closing || evbuffer_get_length(c->sb.in) > 0 ||
	       c->owner.n_state[REQ_QUEUED] > 0 || owner_pin_count(&c->owner) > 0;
}

/* Deferred: never re-enter parsing from inside a server's callback. */
void client_request_finished(struct client *c)
{
	if (c->state != CL_ACTIVE || !resume_needed(c))
		return;
	event_active(c->resume_ev, EV_TIMEOUT, 1);
}

struct client *client_find(uint64_t id)
{
	struct client *c;

	TAILQ_FOREACH(c, &clients_active, link)
		if (c->id == id)
			return c;
	return NULL;
}

void client_close_all(const char *reason)
{
	struct client *c;

	while ((c = TAILQ_FIRST(&clients_active)) != NULL)
		client_close(c, "%s", reason);
}

/* Unsent output that has not shrunk for client_write_timeout_ms: the
 * client does not read its replies (it would hold them for ever). */
static bool write_stalled(const struct client *c, uint64_t now)
{
	uint64_t write_us = (uint64_t)g.cfg.client_write_timeout_ms * 1000;

	return write_us && sbuf_pending_out(&c->sb) > 0 && now - c->out_progress_usec > write_us;
}

static void close_write_stalled(struct client *c)
{
	STAT_INC(clients_closed_write_timeout);
	client_close(
	    c, "%zu bytes of replies unread for more than %" PRId64 " ms (client_write_timeout_ms)",
	    sbuf_pending_out(&c->sb), g.cfg.client_write_timeout_ms);
}

/* A client held back by the memory bound that no longer holds its share
 * (others drained or left, the share grew): read it again. */
static void memory_recheck(struct client *c)
{
	if (c->state == CL_ACTIVE && c->memory_held && !memory_heavy(c)) {
		c->memory_held = false;
		client_request_finished(c);
	}
}

void client_janitor(uint64_t now)
{
	struct client *c, *tmp;
	uint64_t idle_us = (uint64_t)g.cfg.client_idle_timeout_ms * 1000;
	uint64_t read_us = (uint64_t)g.cfg.client_read_timeout_ms * 1000;
	char why[160];

	TAILQ_FOREACH_SAFE(c, &clients_active, link, tmp) {
		memory_recheck(c);
		if (write_stalled(c, now)) {
			close_write_stalled(c);
		} else if (c->refused_by != NULL && now - c->connected_usec > read_us) {
			client_close_rl(c, &rl_refused_close,
					"refused (%s) and sent no request within "
					"client_read_timeout_ms",
					c->refused_by);
		} else if (cauth_login_expired(c, now, why, sizeof(why))) {
			STAT_INC(clients_auth_timeout);
			client_close_rl(c, &rl_auth_timeout, "%s", why);
		} else if (sbuf_tls_handshaking(&c->sb) && now - c->connected_usec > read_us) {
			client_close(c,
				     "TLS handshake not completed within %" PRId64
				     " ms (client_read_timeout_ms)",
				     g.cfg.client_read_timeout_ms);
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

const struct client_list *client_active_list(void)
{
	return &clients_active;
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
		if (!paused) {
			c->memory_held = false;
			client_request_finished(c);
		} else if (memory_heavy(c)) {
			c->memory_held = true;
			set_reading(c, false);
		}
	}
}

int client_count_memory_paused(void)
{
	struct client *c;
	int n = 0;

	TAILQ_FOREACH(c, &clients_active, link)
		if (memory_heavy(c) || output_full(c) ||
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
