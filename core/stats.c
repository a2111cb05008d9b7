/*
 * stats.c — the counter and histogram instances declared in stats.h. The
 * renderings (mongoplexStats, /metrics) are proxy/stats_report.c.
 */
#include "core/stats.h"

static struct mp_counters own_stats;
struct mp_counters *stats_p = &own_stats;

struct hist hist_queue_wait_ms = {"queue_wait_ms",
				  "Time requests waited for a backend connection (ms)",
				  10,
				  {0.1, 0.5, 1, 2, 5, 10, 50, 100, 1000, 10000},
				  {0},
				  0,
				  0};
struct hist hist_batch_ids = {"batch_ids",
			      "Distinct _id values per merged query",
			      10,
			      {1, 2, 4, 8, 16, 32, 64, 128, 512, 1000},
			      {0},
			      0,
			      0};
struct hist hist_batch_wait_ms = {"batch_wait_ms",
				  "Time lookups waited for their merged query to be sent (ms)",
				  9,
				  {0.05, 0.1, 0.5, 1, 2, 5, 10, 100, 1000},
				  {0},
				  0,
				  0};

void hist_observe(struct hist *h, double v)
{
	int i = 0;

	while (i < h->nbounds && v > h->bounds[i])
		i++;
	h->buckets[i]++;
	h->count++;
	h->sum += v;
}
