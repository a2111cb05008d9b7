/*
 * metrics.c — GET /metrics on metrics_listen returns stats_to_prometheus().
 */
#include "proxy/metrics.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy.h"
#include "proxy/stats.h"

static struct evhttp *http;

static void metrics_cb(struct evhttp_request *req, void *arg)
{
	struct evbuffer *out = evbuffer_new();

	(void)arg;
	proxy_tick();
	stats_to_prometheus(out);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "text/plain; version=0.0.4");
	evhttp_send_reply(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

static void notfound_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, HTTP_NOTFOUND, "try /metrics");
}

bool metrics_start(char *err, size_t errlen)
{
	char host[256];
	const char *colon;
	int port;

	if (g.cfg.metrics_listen[0] == '\0')
		return true;
	colon = strrchr(g.cfg.metrics_listen, ':');
	snprintf(host, sizeof(host), "%.*s", (int)(colon - g.cfg.metrics_listen),
		 g.cfg.metrics_listen);
	port = atoi(colon + 1);
	http = evhttp_new(g.base);
	if (http == NULL || evhttp_bind_socket(http, host, (uint16_t)port) != 0) {
		snprintf(err, errlen, "metrics_listen: cannot listen on %s", g.cfg.metrics_listen);
		return false;
	}
	evhttp_set_cb(http, "/metrics", metrics_cb, NULL);
	evhttp_set_gencb(http, notfound_cb, NULL);
	log_notice("metrics on http://%s/metrics", g.cfg.metrics_listen);
	return true;
}

void metrics_stop(void)
{
	if (http != NULL) {
		evhttp_free(http);
		http = NULL;
	}
}
