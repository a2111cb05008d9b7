/*
 * proxy.h — process-wide state: the event loop, the config in force, the
 * cached clock, and the lifecycle (startup, reload, shutdown).
 *
 * Rules: only the main thread touches any of it; `now_usec` is refreshed
 * once per loop callback batch (proxy_tick) and is what timeouts compare to.
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
	uint64_t now_usec;    /* cached monotonic-ish clock (event_base cached time) */
	bool shutting_down;   /* SIGTERM received: refuse new work, drain */
	uint64_t shutdown_deadline_usec;
	int exit_code;
};

extern struct proxy_globals g;

/* Refresh the cached clock; called at the top of every event callback path. */
uint64_t proxy_tick(void);

/* Set everything up from `cfg` (ownership moves) and run until shutdown. */
int proxy_main(struct cfg *cfg, const char *cfg_path);

/* Re-read the config file (SIGHUP). */
void proxy_reload(void);

/* Apply settings that need action after a config swap. */
void proxy_apply_cfg(void);
