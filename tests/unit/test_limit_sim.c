/*
 * test_limit_sim.c — the adaptive limit (pool/limit.c) against the best
 * fixed pool size in the SIMULATION of bench/lsim.h: 100 closed-loop
 * clients, the pool, and a backend whose latency follows a curve (the
 * user's table, bench/curves/seed.csv, and the run-time change's target,
 * peak40x2.csv). Time is simulated: the figures are the same on any
 * machine, loaded or not, so these are exact checks of the controller's
 * behaviour, not timings; the real proxy against the real curve model is
 * measured by bench/adaptive.sh. Thresholds are issue 23's goals.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "bench/lsim.h"

static const int sizes[] = {1, 2, 4, 8, 12, 16, 20, 32, 50, 100};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static struct curve seed, peak40;

static void load(const char *name, struct curve *c)
{
	char path[512], err[256];

	snprintf(path, sizeof path, "%s/bench/curves/%s", MP_SOURCE_DIR, name);
	cr_assert(curve_load_file(path, c, err, sizeof err), "%s: %s", path, err);
}

static void setup(void)
{
	load("seed.csv", &seed);
	load("peak40x2.csv", &peak40);
}

TestSuite(limit_sim, .init = setup);

/* Adaptive (pool_size 100 as its ceiling) against the best of the fixed
 * sizes, in one configuration; returns the throughput ratio. */
static double against_best(struct lsim_cfg *cfg, double min_ratio, double max_p99_ratio)
{
	struct lsim_result best, ad;
	char err[128];
	int bi = lsim_best_fixed(cfg, sizes, NSIZES, &best, NULL);

	cr_assert_geq(bi, 0);
	cfg->fixed_limit = 0;
	cr_assert(lsim_run(cfg, &ad, err, sizeof err), "%s", err);
	cr_assert_geq(ad.qps, min_ratio * best.qps,
		      "%d ids, noise %.2f: adaptive %.0f q/s (mean limit %.1f) vs best fixed %d: "
		      "%.0f q/s",
		      cfg->ids, cfg->noise, ad.qps, ad.mean_limit, sizes[bi], best.qps);
	if (max_p99_ratio > 0)
		cr_assert_leq(ad.p99_ms, max_p99_ratio * best.p99_ms,
			      "%d ids, noise %.2f: p99 %.1f ms vs best fixed %d: %.1f ms", cfg->ids,
			      cfg->noise, ad.p99_ms, sizes[bi], best.p99_ms);
	return ad.qps / best.qps;
}

Test(limit_sim, seed_curve_every_column_at_its_peak)
{
	static const int ids[] = {1, 10, 20};
	static const double noise[] = {0, 0.2};
	struct lsim_cfg cfg;

	for (int n = 0; n < 2; n++)
		for (int i = 0; i < 3; i++) {
			lsim_defaults(&cfg, &seed);
			cfg.ids = ids[i];
			cfg.noise = noise[n];
			against_best(&cfg, 0.95, 1.2);
		}
}

Test(limit_sim, a_curve_with_a_later_higher_peak)
{
	struct lsim_cfg cfg;

	lsim_defaults(&cfg, &peak40);
	against_best(&cfg, 0.95, 1.2);
}

/* A database on another host: the limit must grow to fill the round trip. */
Test(limit_sim, remote_backend_fills_the_round_trip)
{
	struct lsim_cfg cfg;

	lsim_defaults(&cfg, &seed);
	cfg.rtt_us = 1000;
	against_best(&cfg, 0.90, 1.2);
}

/* A backend that never collapses (throughput flat past 4 in service, as a
 * CPU-bound in-memory server): the limit costs nothing. */
Test(limit_sim, flat_backend_costs_nothing)
{
	static const char flat[] = "ids,threads,queries_per_second\n1,1,5000\n1,2,9000\n"
				   "1,4,12000\n1,100,12000\n20,1,2000\n20,4,5000\n20,100,5000\n";
	static struct curve c;
	struct lsim_cfg cfg;
	char err[128];

	cr_assert(curve_parse(flat, strlen(flat), &c, err, sizeof err), "%s", err);
	lsim_defaults(&cfg, &c);
	against_best(&cfg, 0.95, 1.2);
	cfg.ids = 20;
	against_best(&cfg, 0.95, 1.2);
}

/* Two proxies of 50 clients each (cfg's proxies, seed, noise, stagger and
 * clock skew) against the best single fixed pool `best`: together at least
 * `total` of it, proxy 0's share within [lo, hi]. */
static void two_proxies_check(const struct lsim_cfg *cfg, double best, double total, double lo,
			      double hi)
{
	struct lsim_result ad;
	char err[128];

	cr_assert(lsim_run(cfg, &ad, err, sizeof err), "%s", err);
	cr_assert_geq(ad.qps, total * best,
		      "seed %d noise %.1f stagger %.1f skew %.1f: together %.0f q/s vs one "
		      "fixed pool %.0f",
		      (int)cfg->seed, cfg->noise, cfg->stagger_s, cfg->clock_skew_s, ad.qps, best);
	cr_assert(ad.share[0] >= lo && ad.share[0] <= hi,
		  "seed %d noise %.1f stagger %.1f skew %.1f: shares %.2f / %.2f", (int)cfg->seed,
		  cfg->noise, cfg->stagger_s, cfg->clock_skew_s, ad.share[0], ad.share[1]);
}

/* The seed curve's best single fixed pool, and cfg set for two proxies. */
static double two_proxies_setup(struct lsim_cfg *cfg)
{
	struct lsim_result best;

	lsim_defaults(cfg, &seed);
	cr_assert_geq(lsim_best_fixed(cfg, sizes, NSIZES, &best, NULL), 0);
	cfg->proxies = 2;
	return best.qps;
}

/* Two proxies of 50 clients each in front of one backend: together near
 * the best single fixed pool (the latency term, which both see alike,
 * keeps them from pushing it past its peak together), and each 40-60 %
 * (issue 23's goal). Not one lucky run: three seeds, with and without 20 %
 * noise, the second proxy starting 0, 1.1 or 2.6 s after the first. Their
 * clocks agree (one host, or synchronised clocks: the probes fall on the
 * same multiples of the interval, pool/limit.h). */
Test(limit_sim, two_proxies_share_one_backend)
{
	static const double stagger[] = {0, 1.1, 2.6};
	struct lsim_cfg cfg;
	double best = two_proxies_setup(&cfg);

	for (uint64_t sd = 1; sd <= 3; sd++)
		for (int n = 0; n < 2; n++)
			for (int st = 0; st < 3; st++) {
				cfg.seed = sd;
				cfg.noise = 0.2 * n;
				cfg.stagger_s = stagger[st];
				two_proxies_check(&cfg, best, 0.9, 0.40, 0.60);
			}
}

/* The same with the proxies' clocks 1.3 s apart (hosts without synchronised
 * clocks: their probes never coincide, each base is taken under the other's
 * load). Weaker: neither starved, and not pushed past the peak together (a
 * base taken under load rises at most 1.5x a probe). */
Test(limit_sim, two_proxies_with_clocks_apart)
{
	struct lsim_cfg cfg;
	double best = two_proxies_setup(&cfg);

	cfg.clock_skew_s = 1.3;
	cfg.noise = 0.2;
	for (uint64_t sd = 1; sd <= 2; sd++) {
		cfg.seed = sd;
		two_proxies_check(&cfg, best, 0.85, 0.25, 0.75);
	}
}

/* Cold start: from adaptive_min_limit, the seconds 3-10 already run at
 * the best fixed pool's throughput. */
Test(limit_sim, settles_within_seconds_from_cold)
{
	struct lsim_cfg cfg;

	lsim_defaults(&cfg, &seed);
	cfg.warm_s = 3;
	cfg.measure_s = 7;
	against_best(&cfg, 0.95, 0);
}

/* The curve replaced at run time (peak at 40, twice as high) and back:
 * seconds 10-20 after each change against the best fixed of that curve. */
Test(limit_sim, follows_a_curve_replaced_at_run_time)
{
	struct lsim_cfg cfg, ref;
	struct lsim_result best_new, best_old, ad;
	char err[128];

	lsim_defaults(&ref, &peak40);
	cr_assert_geq(lsim_best_fixed(&ref, sizes, NSIZES, &best_new, NULL), 0);
	lsim_defaults(&ref, &seed);
	cr_assert_geq(lsim_best_fixed(&ref, sizes, NSIZES, &best_old, NULL), 0);

	lsim_defaults(&cfg, &seed);
	cfg.curve2 = &peak40;
	cfg.switch_at_s = 20;
	cfg.back_at_s = 50;
	cfg.warm_s = 30; /* 10-20 s after the change */
	cfg.measure_s = 10;
	cr_assert(lsim_run(&cfg, &ad, err, sizeof err), "%s", err);
	cr_assert_geq(ad.qps, 0.9 * best_new.qps, "after the change %.0f q/s vs %.0f", ad.qps,
		      best_new.qps);
	cfg.warm_s = 60; /* 10-20 s after the way back */
	cr_assert(lsim_run(&cfg, &ad, err, sizeof err), "%s", err);
	cr_assert_geq(ad.qps, 0.9 * best_old.qps, "back %.0f q/s vs %.0f", ad.qps, best_old.qps);
}

/* With batching the query sizes move with the limit (fewer slots, more
 * lookups each): the climber still finds the best fixed pool's rate. */
Test(limit_sim, batching_with_the_limit)
{
	struct lsim_cfg cfg;

	lsim_defaults(&cfg, &seed);
	cfg.batching = true;
	cfg.batch_even = 1.0;
	cfg.batch_hold_us = 1000;
	against_best(&cfg, 0.95, 0);
}
