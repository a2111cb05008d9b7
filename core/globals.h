/*
 * globals.h — process-wide state shared by every layer: the event loop, the
 * settings in force, the cached clock and the shutdown flags.
 *
 * Rules: only the main thread touches any of it; `now_usec` is refreshed by
 * proxy_tick() at the top of each event callback path and is what timeouts
 * compare to. The lifecycle that fills it in (startup, reload, shutdown) is
 * proxy/proxy.c.
 */
#pragma once

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/cfg.h"

struct proxy_globals {
	struct event_base *base;
	struct cfg cfg;	      /* the settings in force */
	const char *cfg_path; /* file given with -c, for reload; NULL: defaults */
	uint64_t now_usec;    /* cached monotonic clock (see proxy_tick) */
	bool shutting_down;   /* SIGTERM received: refuse new work, drain */
	uint64_t shutdown_deadline_usec;
	int exit_code;
	int nworkers;  /* worker processes (proxy/workers.c); 1: no master */
	int worker_id; /* this process's index, 0 .. nworkers - 1 */
	int ctl_fd;    /* a worker's end of the master's channel (proxy/wctl.h), nworkers > 1 */
};

extern struct proxy_globals g;

/* Refresh the cached clock; called at the top of every event callback path. */
uint64_t proxy_tick(void);
