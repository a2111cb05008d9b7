/*
 * limitsim.c — mongoplex-limitsim: the adaptive limit (pool/limit.c) against
 * fixed pool sizes in a SIMULATION (bench/lsim.h: simulated clients, pools
 * and a curve-model backend in simulated time; never MongoDB, never the
 * machine's speed). It prints, per ids value, the best fixed limit of a
 * sweep and the adaptive controller's ratio to it, as bench/adaptive.sh does
 * with the real proxy; `--trace` prints the limit over time instead.
 *
 *   mongoplex-limitsim --curve FILE [--ids 1,10,20] [--clients 100]
 *       [--proxies N] [--rtt-us N] [--think-us N] [--noise SIGMA] [--seed N]
 *       [--batching] [--tolerance X] [--min-limit N] [--ceiling N]
 *       [--warm S] [--measure S] [--curve2 FILE --switch-at S --back-at S]
 *       [--stagger S] [--clock-skew S] [--trace S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/lsim.h"

static const int sizes[] = {1, 2, 4, 8, 12, 16, 20, 32, 50, 100};
#define NSIZES ((int)(sizeof(sizes) / sizeof(sizes[0])))

static void usage(void)
{
	fprintf(stderr, "usage: mongoplex-limitsim --curve FILE [--ids 1,10,20] [--clients N] "
			"[--proxies N] [--rtt-us N] [--think-us N] [--noise SIGMA] [--seed N] "
			"[--batching] [--tolerance X] [--min-limit N] [--ceiling N] [--warm S] "
			"[--measure S] [--curve2 FILE --switch-at S [--back-at S]] [--stagger S] "
			"[--clock-skew S] [--trace S]\n"
			"A simulation of the adaptive limit (bench/lsim.h), not a measurement.\n");
	exit(2);
}

static void load(const char *path, struct curve *c)
{
	char err[256];

	if (!curve_load_file(path, c, err, sizeof err)) {
		fprintf(stderr, "limitsim: %s: %s\n", path, err);
		exit(2);
	}
}

static void print_trace(void *arg, double t, int limit, int inflight, double qps)
{
	(void)arg;
	printf("%.2f,%d,%d,%.0f\n", t, limit, inflight, qps);
}

static void run_ids(struct lsim_cfg *cfg, int ids)
{
	struct lsim_result best, each[NSIZES], ad;
	char err[128];
	int bi;

	cfg->ids = ids;
	bi = lsim_best_fixed(cfg, sizes, NSIZES, &best, each);
	cfg->fixed_limit = 0;
	if (bi < 0 || !lsim_run(cfg, &ad, err, sizeof err)) {
		fprintf(stderr, "limitsim: %s\n", bi < 0 ? "no fixed run" : err);
		exit(2);
	}
	printf("| %d | %d | %.0f | %.1f | %.0f | %.1f | %.1f | %.3f | %.2f |", ids, sizes[bi],
	       best.qps, best.p99_ms, ad.qps, ad.p99_ms, ad.mean_limit, ad.qps / best.qps,
	       ad.p99_ms / best.p99_ms);
	if (cfg->proxies > 1)
		for (int p = 0; p < cfg->proxies; p++)
			printf(" %.0f%%", 100 * ad.share[p]);
	if (cfg->batching)
		printf(" %.1f ids/query, %.0f lookups/s", ad.ids_per_query, ad.lookups_s);
	printf("\n  fixed q/s:");
	for (int i = 0; i < NSIZES; i++)
		printf(" %d=%.0f", sizes[i], each[i].qps);
	printf("\n");
}

int main(int argc, char **argv)
{
	static struct curve curve, curve2;
	struct lsim_cfg cfg;
	const char *ids = "1,10,20", *path = NULL, *path2 = NULL;
	double trace = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--batching"))
			continue; /* read with the others below */
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--curve"))
			path = v;
		else if (!strcmp(a, "--curve2"))
			path2 = v;
		else if (!strcmp(a, "--ids"))
			ids = v;
		else if (!strcmp(a, "--trace"))
			trace = atof(v);
		else if (strncmp(a, "--", 2) != 0)
			usage();
	}
	if (!path)
		usage();
	load(path, &curve);
	lsim_defaults(&cfg, &curve);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";

		if (!strcmp(a, "--batching"))
			cfg.batching = true;
		else if (!strcmp(a, "--clients"))
			cfg.clients = atoi(v);
		else if (!strcmp(a, "--proxies"))
			cfg.proxies = atoi(v);
		else if (!strcmp(a, "--rtt-us"))
			cfg.rtt_us = atof(v);
		else if (!strcmp(a, "--think-us"))
			cfg.think_us = atof(v);
		else if (!strcmp(a, "--noise"))
			cfg.noise = atof(v);
		else if (!strcmp(a, "--seed"))
			cfg.seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--tolerance"))
			cfg.tolerance = atof(v);
		else if (!strcmp(a, "--min-limit"))
			cfg.min_limit = atoi(v);
		else if (!strcmp(a, "--ceiling"))
			cfg.ceiling = atoi(v);
		else if (!strcmp(a, "--warm"))
			cfg.warm_s = atof(v);
		else if (!strcmp(a, "--measure"))
			cfg.measure_s = atof(v);
		else if (!strcmp(a, "--think-exp"))
			cfg.think_exp = atoi(v) != 0;
		else if (!strcmp(a, "--batch-even"))
			cfg.batch_even = atof(v);
		else if (!strcmp(a, "--batch-hold-us"))
			cfg.batch_hold_us = atof(v);
		else if (!strcmp(a, "--switch-at"))
			cfg.switch_at_s = atof(v);
		else if (!strcmp(a, "--back-at"))
			cfg.back_at_s = atof(v);
		else if (!strcmp(a, "--stagger"))
			cfg.stagger_s = atof(v);
		else if (!strcmp(a, "--clock-skew"))
			cfg.clock_skew_s = atof(v);
	}
	if (path2) {
		load(path2, &curve2);
		cfg.curve2 = &curve2;
	}
	if (trace > 0) {
		struct lsim_result r;
		char err[128];

		cfg.ids = atoi(ids);
		cfg.trace = print_trace;
		cfg.trace_every_s = trace;
		printf("t,limit,inflight,qps\n");
		if (!lsim_run(&cfg, &r, err, sizeof err)) {
			fprintf(stderr, "limitsim: %s\n", err);
			return 2;
		}
		return 0;
	}
	printf("SIMULATION (bench/lsim.h), not a measurement: %d clients, %d prox%s, think %.0f "
	       "us (%s), rtt %.0f us, noise %.2f, batching %s (hold %.0f us)\n",
	       cfg.clients, cfg.proxies, cfg.proxies == 1 ? "y" : "ies", cfg.think_us,
	       cfg.think_exp ? "exponential" : "fixed", cfg.rtt_us, cfg.noise,
	       cfg.batching ? "on" : "off", cfg.batch_even > 0 ? cfg.batch_hold_us : 0);
	printf("| ids | best fixed | its q/s | its p99 ms | adaptive q/s | adaptive p99 ms | mean "
	       "limit | tput ratio | p99 ratio |\n|---|---|---|---|---|---|---|---|---|\n");
	for (const char *p = ids; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		run_ids(&cfg, atoi(p));
	return 0;
}
