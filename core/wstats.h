/*
 * wstats.h — the workers' shared statistics (workers > 1): one slot per
 * worker in a MAP_SHARED anonymous mapping the master creates before it
 * forks. A worker's counters live in its slot (stats_p points there), so
 * whichever worker answers mongoplexStats or /metrics sums every slot.
 *
 * Rules: a slot's counters are written only by its worker (aligned 64-bit
 * stores: a reader sees each value whole, the set of them not as one
 * snapshot); pid, ready and restarts only by the master, except ready,
 * which the worker sets once it listens and the master clears before a
 * restart. A restarted worker keeps its slot's counters: totals never go
 * back.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <bson/bson.h>

#include "core/stats.h"

#define WSTATS_GAUGES 32	   /* room for proxy/stats_report.c's gauge table */
#define WSTATS_HISTS  4		   /* and for its histograms */
#define WSTATS_ROWS   (256 * 1024) /* a worker's pool rows, BSON (wstats_rows_put) */

/* A histogram's values as a worker last published them (bounds are fixed
 * and the same in every worker: core/stats.c). */
struct whist {
	uint64_t buckets[HIST_MAX_BUCKETS + 1];
	uint64_t count;
	double sum;
};

struct wslot {
	int32_t pid;	   /* the worker's process id (master) */
	int32_t ready;	   /* 1 once the worker listens (worker), 0 at (re)start (master) */
	uint64_t restarts; /* times the master restarted this worker */
	struct mp_counters counters;
	/* Gauges and histograms are state, not counts: each worker publishes
	 * them into its slot every janitor tick (100 ms) and before it answers
	 * mongoplexStats or /metrics (proxy/stats_report.c: stats_publish). */
	int64_t gauges[WSTATS_GAUGES];
	struct whist hists[WSTATS_HISTS];
	/* Its pools' rows as a BSON document, published with the gauges;
	 * rows_seq is odd while the worker writes (a seqlock: readers retry). */
	uint32_t rows_seq;
	uint32_t rows_len;
	uint8_t rows[WSTATS_ROWS];
};

/* Create n slots (the master, before forking); false if mmap fails. */
bool wstats_create(int n) __attribute__((warn_unused_result));
/* In a worker: count into slot i from now on. */
void wstats_attach(int i);
/* Slots (0 when there are no workers) and slot i. */
int wstats_count(void);
struct wslot *wstats_slot(int i);
/* The sum of every slot's counters into out. */
void wstats_sum(struct mp_counters *out);
/* In a worker: publish doc (its pool rows) into its slot; a document over
 * WSTATS_ROWS is replaced by {truncated: true}. */
void wstats_rows_put(const bson_t *doc);
/* Slot i's last published rows into *out (initialized here); false: none
 * yet, or the worker kept writing while this read (out is then empty). */
bool wstats_rows_get(int i, bson_t *out);
/* In a worker: mark its slot listening. */
void wstats_ready(void);
