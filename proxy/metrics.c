/*
 * metrics.c — GET /metrics on metrics_listen returns stats_to_prometheus().
 *
 * The endpoint faces whatever can reach metrics_listen, so evhttp's
 * unbounded defaults are replaced: headers and body are capped (a body
 * over the cap is refused as soon as its Content-Length or chunk sizes show
 * it, and is not buffered), only GET and HEAD of /metrics are served (405 with Allow for other
 * methods, 404 for other paths), every reply closes its connection, at most
 * metrics_max_connections are open at once, and each connection is closed
 * metrics_timeout_ms after it was accepted whatever it is doing. That last
 * bound is total, not per read (evhttp's own timeout restarts on every byte,
 * so a client sending a header byte a second would never be cut). evhttp
 * (2.1) has no hook for a new connection, so bev_cb, which makes each
 * connection's bufferevent, remembers it, and right after evhttp set up the
 * connection (before any of its I/O) attach_cb takes the connection from the
 * bufferevent's callback argument (evhttp passes its connection there) and
 * registers a close callback.
 */
#include "proxy/metrics.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/xalloc.h"
#include "proxy/proxy.h"
#include "core/stats.h"
#include "proxy/stats_report.h"

#define METRICS_MAX_HEADERS 8192 /* request line + headers */
#define METRICS_MAX_BODY    4096

/* One accepted metrics connection. Rules: made by bev_cb for each connection
 * evhttp accepts, counted in nconns; until attach_cb ran, `evcon` is NULL and
 * a reference on `bev` keeps it readable; afterwards freed only by close_cb
 * (evhttp calls it when it frees the connection, including from
 * evhttp_connection_free in deadline_cb), so `evcon` is valid while mc lives. */
struct mconn {
	struct bufferevent *bev;	 /* evhttp's bufferevent for it */
	struct evhttp_connection *evcon; /* set by attach_cb */
	struct event *ev;		 /* attach_cb at once, then deadline_cb */
	bool refused;			 /* over metrics_max_connections when accepted */
};

static struct evhttp *http;
static int64_t nconns; /* struct mconn alive */

/* "host:port" of a socket's local address. */
static void format_addr(evutil_socket_t fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		snprintf(buf, len, "?");
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
	} else {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
}

static void mconn_free(struct mconn *mc)
{
	event_free(mc->ev);
	free(mc);
	nconns--;
}

static void close_cb(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	mconn_free(arg);
}

/* Cut a connection, saying why. evhttp calls close_cb from inside. */
static void mconn_close(struct mconn *mc, const char *why)
{
	char *peer = NULL;
	ev_uint16_t port = 0;

	evhttp_connection_get_peer(mc->evcon, &peer, &port);
	log_info("metrics: %s:%u: %s", peer != NULL ? peer : "?", port, why);
	evhttp_connection_free(mc->evcon);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	char why[96];

	(void)fd;
	(void)what;
	proxy_tick();
	snprintf(why, sizeof(why), "closed: not done after %" PRId64 " ms (metrics_timeout_ms)",
		 g.cfg.metrics_timeout_ms);
	mconn_close(arg, why);
}

static void attach_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mconn *mc = arg;
	bufferevent_event_cb eventcb = NULL;
	void *cbarg = NULL;
	struct timeval tv;
	char why[96];

	(void)fd;
	(void)what;
	proxy_tick();
	bufferevent_getcb(mc->bev, NULL, NULL, &eventcb, &cbarg);
	bufferevent_decref(mc->bev);
	if (eventcb == NULL || cbarg == NULL) { /* evhttp gave up on it already */
		mconn_free(mc);
		return;
	}
	mc->evcon = cbarg;
	evhttp_connection_set_closecb(mc->evcon, close_cb, mc);
	if (mc->refused) {
		snprintf(why, sizeof(why),
			 "closed at once: %" PRId64 " connections open (metrics_max_connections)",
			 g.cfg.metrics_max_connections);
		mconn_close(mc, why);
		return;
	}
	tv.tv_sec = (time_t)(g.cfg.metrics_timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(g.cfg.metrics_timeout_ms % 1000 * 1000);
	event_assign(mc->ev, g.base, -1, 0, deadline_cb, mc);
	evtimer_add(mc->ev, &tv);
}

/* evhttp asks for the bufferevent of a connection it just accepted (NULL:
 * it makes one itself, without deadline; only when out of memory). attach_cb
 * is made active now, so it runs in this loop iteration, before the new
 * socket is polled. */
static struct bufferevent *bev_cb(struct event_base *base, void *arg)
{
	struct mconn *mc = xcalloc(1, sizeof(*mc));

	(void)arg;
	mc->ev = event_new(base, -1, 0, attach_cb, mc);
	if (mc->ev != NULL)
		mc->bev = bufferevent_socket_new(base, -1, 0);
	if (mc->bev == NULL) {
		log_error("metrics: out of memory for a connection; serving it without deadline");
		if (mc->ev != NULL)
			event_free(mc->ev);
		free(mc);
		return NULL;
	}
	mc->refused = ++nconns > g.cfg.metrics_max_connections;
	bufferevent_incref(mc->bev);
	event_active(mc->ev, EV_TIMEOUT, 0);
	return mc->bev;
}

static void send_text(struct evhttp_request *req, int code, const char *reason,
		      struct evbuffer *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Connection", "close");
	evhttp_send_reply(req, code, reason, body);
}

static void metrics_cb(struct evhttp_request *req, void *arg)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *out = xevbuffer_new();

	(void)arg;
	proxy_tick();
	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		evhttp_add_header(h, "Allow", "GET, HEAD");
		evhttp_add_header(h, "Content-Type", "text/plain");
		evbuffer_add_printf(out, "only GET and HEAD of /metrics\n");
		send_text(req, HTTP_BADMETHOD, "Method Not Allowed", out);
		evbuffer_free(out);
		return;
	}
	stats_to_prometheus(out);
	evhttp_add_header(h, "Content-Type", "text/plain; version=0.0.4");
	if (m == EVHTTP_REQ_HEAD) {
		/* evhttp 2.1 would send a body with HEAD: send the headers only. */
		char clen[24];

		snprintf(clen, sizeof(clen), "%zu", evbuffer_get_length(out));
		evhttp_add_header(h, "Content-Length", clen);
		evbuffer_drain(out, evbuffer_get_length(out));
	}
	send_text(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

static void notfound_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, HTTP_NOTFOUND, "try /metrics"); /* sets Connection: close */
}

bool metrics_start(char *err, size_t errlen)
{
	char host[256], bound_addr[INET6_ADDRSTRLEN + 8];
	const char *colon;
	struct evhttp_bound_socket *bound = NULL;
	int port;

	if (g.cfg.metrics_listen[0] == '\0')
		return true;
	colon = strrchr(g.cfg.metrics_listen, ':');
	snprintf(host, sizeof(host), "%.*s", (int)(colon - g.cfg.metrics_listen),
		 g.cfg.metrics_listen);
	port = atoi(colon + 1);
	http = evhttp_new(g.base);
	if (http != NULL)
		bound = evhttp_bind_socket_with_handle(http, host, (uint16_t)port);
	if (bound == NULL) {
		snprintf(err, errlen, "metrics_listen: cannot listen on %s", g.cfg.metrics_listen);
		return false;
	}
	evhttp_set_max_headers_size(http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(http, METRICS_MAX_BODY);
	/* Every method reaches the callbacks, which answer 405 or 404 (evhttp
	 * would answer 501 for the ones it is not told about). */
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
					     EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
					     EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
					     EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_bevcb(http, bev_cb, NULL);
	evhttp_set_cb(http, "/metrics", metrics_cb, NULL);
	evhttp_set_gencb(http, notfound_cb, NULL);
	format_addr(evhttp_bound_socket_get_fd(bound), bound_addr, sizeof(bound_addr));
	log_notice("metrics on http://%s/metrics", bound_addr);
	return true;
}

void metrics_stop(void)
{
	if (http != NULL) {
		evhttp_free(http);
		http = NULL;
	}
}
