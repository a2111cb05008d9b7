/*
 * workers.h — workers = N > 1: a master process forks N workers, each the
 * single-process proxy of proxy/proxy.c on its own SO_REUSEPORT socket.
 */
#pragma once

#include <stdint.h>

#include "config/cfg.h"

#define WORKERS_MAX 64

/* The worker count cfg asks for (workers = 0: one per online CPU). */
int workers_wanted(const struct cfg *cfg);
/* Run the master: fork, forward signals, restart; returns the exit code
 * (in a worker: that worker's, after proxy_main). */
int workers_main(struct cfg *cfg, const char *cfg_path, int n);

/* The restart-rate rule of the master (pure, for tests): a worker that ended
 * at `now` after `start_failures` failures in a row before listening (0: it
 * had listened) waits 0.2 s, 0.4 s, ... (doubling per failure) before it is
 * forked again; and at most WORKERS_RESTARTS_PER_SEC restarts in a one-second
 * window go at once, the rest wait 1 s. `w` is the window, kept by the
 * caller. Returns the delay in µs. */
#define WORKERS_RESTARTS_PER_SEC 5

struct workers_restart_window {
	uint64_t start_usec;
	int restarts;
};

uint64_t workers_restart_delay(struct workers_restart_window *w, uint64_t now_usec,
			       int start_failures);
