/*
 * janitor.h — the periodic timer that owns timeouts, pool minimums and idle
 * reaping, and the deferred-free step that runs after callbacks.
 */
#pragma once

#define JANITOR_INTERVAL_MS 100

void janitor_start(void);
void janitor_stop(void);

/* Closed clients/servers wait on just-freed lists; this makes sure they are
 * released once the current callbacks are done. */
void janitor_schedule_free(void);
