/*
 * lsim.h — a discrete-event SIMULATION of clients, mongoplex pools and a
 * curve-model backend, for designing and checking the adaptive concurrency
 * limit (pool/limit.h) in simulated time: nothing here measures the
 * machine, and the same inputs give the same figures on any machine, loaded
 * or not. It is a model of a model (bench/curve.h: the user's table as a
 * curve), never MongoDB and never the proxy itself; the real figures come
 * from bench/adaptive.sh.
 *
 * What is simulated:
 *   - `clients` closed-loop clients, spread evenly over `proxies` proxies;
 *     each sends a query of `ids` ids, waits for its reply, thinks (an
 *     exponential time of mean `think_us`, or exactly that with think_exp
 *     off), sends the next;
 *   - each proxy has one pool: a FIFO queue and a limit on its in-flight
 *     requests, fixed (`fixed_limit`) or the real controller of pool/limit.c
 *     (`fixed_limit` 0); with `batching`, a dispatch merges the queued
 *     lookups into one query of up to `batch_max_ids` ids (as pool/batch.c
 *     does while no backend connection is free);
 *   - one backend shared by the proxies: a query of k ids arriving while c
 *     queries are in flight on it (itself included) is answered after
 *     curve_latency_s(k, c) + rtt_us, as bench/cm_sched.c does;
 *   - optional noise: each latency times exp(noise * N(0, 1)), from a seeded
 *     generator (the same seed, the same run);
 *   - optional run-time change: the curve becomes `curve2` at `switch_at_s`
 *     and the first one again at `back_at_s`;
 *   - optional stagger: proxy p's clients send their first query
 *     p x `stagger_s` later (a proxy started after the others);
 *   - optional clock skew: proxy p's controller reads a clock p x
 *     `clock_skew_s` ahead (proxies on different hosts).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "bench/curve.h"

struct climit;

#define LSIM_MAX_PROXIES 4

struct lsim_cfg {
	const struct curve *curve;
	const struct curve *curve2; /* NULL: no run-time change */
	double switch_at_s, back_at_s;
	int clients, proxies, ids;
	double think_us, rtt_us, noise;
	bool think_exp; /* think times exponential around think_us (else fixed) */
	uint64_t seed;
	int fixed_limit; /* 0: adaptive (pool/limit.c) */
	double tolerance;
	int min_limit, ceiling;
	bool batching;
	int batch_max_ids;
	double batch_even;	  /* 0: a free slot takes what is queued; else see lsim.c */
	double batch_hold_us;	  /* the longest a batch waits for its share */
	double warm_s, measure_s; /* figures over [warm_s, warm_s + measure_s) */
	double trace_every_s;	  /* 0: no trace */
	/* trace: t, limit and in flight of proxy 0, client queries/s over the
	 * last interval (all proxies) */
	void (*trace)(void *arg, double t, int limit, int inflight, double qps);
	void *trace_arg;
	/* trace, if set: every proxy's controller at each trace tick */
	void (*trace_proxy)(void *arg, double t, int proxy, const struct climit *l, int inflight);
	double stagger_s;    /* proxy p's clients start p x stagger_s late */
	double clock_skew_s; /* proxy p's clock reads p x clock_skew_s ahead */
};

struct lsim_result {
	double qps;			/* client queries completed per second (all proxies) */
	double lookups_s;		/* ids per second delivered to clients */
	double p50_ms, p99_ms;		/* client latency: queue + backend */
	double mean_limit;		/* proxy 0, time-weighted over the measured span */
	double ids_per_query;		/* at the backend */
	double share[LSIM_MAX_PROXIES]; /* each proxy's part of qps */
};

/* Defaults: 100 clients, 1 proxy, 1 id, think 100 µs (exponential), no rtt, no noise,
 * tolerance 2, min_limit 3, ceiling 100, batch_max_ids 100, warm 5 s,
 * measure 20 s. */
void lsim_defaults(struct lsim_cfg *cfg, const struct curve *curve);

/* Runs one simulation; false (with a message) on a bad configuration. */
bool lsim_run(const struct lsim_cfg *cfg, struct lsim_result *out, char *err, int errlen)
    __attribute__((warn_unused_result));

/* The best fixed limit among sizes[0..n) by qps: its index, its result in
 * *best. */
int lsim_best_fixed(const struct lsim_cfg *cfg, const int *sizes, int n, struct lsim_result *best,
		    struct lsim_result *each);
