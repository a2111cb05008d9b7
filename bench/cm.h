/*
 * cm.h — mongoplex-curvemodel's process state: the loop, the curve in
 * force, the virtual collection's size, and the counts the model serves by.
 *
 * mongoplex-curvemodel is a MODEL calibrated to the user's table
 * (shared/000_6c2d24415accf5c2.txt by default, bench/curves/seed.csv), not
 * MongoDB: a MongoDB-wire server whose find replies are delayed so that
 * closed-loop clients see the curve (bench/curve.h), for the benchmark only.
 * Files: curvemodel.c (main, options, signals), cm_conn.c (connections,
 * framing, reads and writes), cm_sched.c (the delays: deadline heaps and the
 * loop), cm_heap.c (the heap), cm_cmd.c (the commands it answers), cm_docs.c
 * (the virtual collection and its cursors), cm_ratelimit.c (log limits),
 * curve.c (the curve file and its math).
 *
 * Rules: one thread; only the loop (cm_sched_run) and its callbacks touch it.
 * in_service is the number of queries (finds) that arrived and whose curve
 * latency has not yet run out: a query's latency is fixed on arrival (its
 * kernel receive time) from in_service + 1 at that time.
 */
#pragma once

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench/curve.h"

#define CM_LABEL "curve-model (not MongoDB)"

struct cm_state {
	struct event_base *base;
	struct curve *curve;	/* in force; replaced whole on SIGHUP */
	const char *curve_path; /* --curve FILE */
	int64_t docs;		/* --docs: ids 0 .. docs-1 exist */
	int64_t rtt_us;		/* --rtt-us: added to every reply */
	int max_conns;		/* --max-conns */
	int port;		/* the port listened on */
	int in_service;		/* queries in service now (c - 1 for the next) */
	int max_in_service;	/* highest in_service seen */
	int conns;		/* open connections */
	uint64_t queries;	/* finds answered through the curve */
	uint64_t commands;	/* every command answered */
	uint64_t reloads;	/* successful SIGHUP reloads */
	uint64_t reload_failures;
	double late_usec_avg; /* how early the wake is set: the loop's mean lateness (cm_conn.c) */
	int64_t slack_us;     /* --timer-slack-us: replies due this soon go out on this wake */
	bool think_comp;      /* --think-compensation: subtract the client's think time */
	double think_hi_us;   /* about the largest per-connection think time (bounds the sleep) */
	uint64_t wakeups;     /* loop passes that slept on a deadline (cm_sched_run) */
	bool stop;	      /* SIGTERM/SIGINT: cm_sched_run returns */
};

extern struct cm_state cm;
