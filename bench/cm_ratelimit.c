/*
 * cm_ratelimit.c — rate-limited warnings for mongoplex-curvemodel (see
 * cm_ratelimit.h).
 */
#include "bench/cm_ratelimit.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/log.h"

void cm_log_limited(struct cm_ratelimit *rl, const char *fmt, ...)
{
	struct timespec ts;
	char line[1024];
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (ts.tv_sec - rl->window_start_s >= CM_RL_WINDOW_S) {
		rl->window_start_s = ts.tv_sec;
		rl->in_window = 0;
	}
	if (rl->in_window >= CM_RL_BURST) {
		rl->dropped++;
		return;
	}
	rl->in_window++;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (rl->dropped) {
		log_warning("%s (and %llu similar lines left out)", line,
			    (unsigned long long)rl->dropped);
		rl->dropped = 0;
	} else {
		log_warning("%s", line);
	}
}
