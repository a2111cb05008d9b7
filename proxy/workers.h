/*
 * workers.h — workers = N > 1: a master process forks N workers, each the
 * single-process proxy of proxy/proxy.c on its own SO_REUSEPORT socket.
 */
#pragma once

#include "config/cfg.h"

#define WORKERS_MAX 64

/* The worker count cfg asks for (workers = 0: one per online CPU). */
int workers_wanted(const struct cfg *cfg);
/* Run the master: fork, forward signals, restart; returns the exit code
 * (in a worker: that worker's, after proxy_main). */
int workers_main(struct cfg *cfg, const char *cfg_path, int n);
