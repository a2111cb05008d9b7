/*
 * janitor.c — a 100 ms timer for everything time-based (client and server
 * timeouts, queue timeouts, pool minimums, idle reaping), and an event that
 * frees closed objects outside of any connection's callback. A leaf of
 * proxy/: what it runs there is the table of janitor_start (janitor.h).
 */
#include "proxy/janitor.h"

#include <event2/event.h>

#include "core/log.h"
#include "pool/pool.h"
#include "pool/server.h"
#include "proxy/proxy.h"

static struct event *tick_ev;
static struct event *free_ev;
static const struct janitor_tasks *tasks; /* janitor_start's */

static void free_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	tasks->free_clients();
	server_free_deferred();
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = proxy_tick();

	(void)fd;
	(void)what;
	(void)arg;
	tasks->clients(now);
	pool_janitor(now);
	log_rl_tick();	  /* counts of rate-limited log lines */
	tasks->publish(); /* workers > 1: gauges for the other workers' reports */
}

void janitor_start(const struct janitor_tasks *t)
{
	struct timeval tv = {0, JANITOR_INTERVAL_MS * 1000};

	tasks = t;
	tick_ev = event_new(g.base, -1, EV_PERSIST, tick_cb, NULL);
	free_ev = event_new(g.base, -1, 0, free_cb, NULL);
	server_set_justfree_hook(janitor_schedule_free);
	event_add(tick_ev, &tv);
}

void janitor_stop(void)
{
	if (tick_ev != NULL) {
		event_free(tick_ev);
		tick_ev = NULL;
	}
	if (free_ev != NULL) {
		server_set_justfree_hook(NULL);
		free_cb(-1, 0, NULL);
		event_free(free_ev);
		free_ev = NULL;
	}
}

void janitor_schedule_free(void)
{
	if (free_ev != NULL)
		event_active(free_ev, EV_TIMEOUT, 0);
}
