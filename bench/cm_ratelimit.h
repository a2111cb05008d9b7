/*
 * cm_ratelimit.h — log lines a client can trigger, limited: at most
 * CM_RL_BURST lines per CM_RL_WINDOW_S seconds per limiter; the next line
 * after a window says how many were left out.
 */
#pragma once

#include <stdint.h>

#define CM_RL_BURST    10
#define CM_RL_WINDOW_S 10

/* One kind of message (a static per call site). */
struct cm_ratelimit {
	int64_t window_start_s;
	int in_window;	  /* lines logged in this window */
	uint64_t dropped; /* lines left out since the last one logged */
};

/* log_warning(fmt, ...) unless the limiter says no. */
void cm_log_limited(struct cm_ratelimit *rl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
