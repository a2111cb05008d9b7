/*
 * janitor.h — the periodic timer that owns timeouts, pool minimums and idle
 * reaping, and the deferred-free step that runs after callbacks.
 */
#pragma once

#include <stdint.h>

#define JANITOR_INTERVAL_MS 100

/* What the janitor runs of proxy/, besides pool/'s and core/'s own work
 * (pool_janitor, log_rl_tick, server_free_deferred, which it calls itself):
 * one table, given by proxy_main to janitor_start, so that the janitor
 * calls nothing above it by name. A tick runs clients, pool/'s janitor,
 * the log's rate limits, then publish; a deferred free runs free_clients,
 * then the servers'. */
struct janitor_tasks {
	void (*clients)(uint64_t now); /* client timeouts (client_janitor) */
	void (*publish)(void);	       /* workers > 1: the shared gauges (stats_publish) */
	void (*free_clients)(void);    /* closed clients (client_free_deferred) */
};

void janitor_start(const struct janitor_tasks *tasks);
void janitor_stop(void);

/* Closed clients/servers wait on just-freed lists; this makes sure they are
 * released once the current callbacks are done. */
void janitor_schedule_free(void);
