/*
 * globals.c — the one instance of the process-wide state and its clock.
 */
#include "core/globals.h"

#include <time.h>

struct proxy_globals g;

uint64_t proxy_tick(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	g.now_usec = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	return g.now_usec;
}
