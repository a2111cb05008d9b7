/*
 * test_adaptive.c — adaptive_concurrency (pool/limit.h, a term of
 * pool/gate.c) in front of the benchmark's curve model (a model of the
 * user's server that collapses past 20 threads, never MongoDB: this tests
 * what the proxy sends, not what a database answers). 100 client
 * connections loop random-_id lookups through a proxy with pool_size 100.
 * Assertions are on counts and state, never on time: how many queries the
 * model serves at once (curveModelStatus.inService, sampled while the load
 * runs) and the pool's limit in mongoplexStats.
 *
 *  - limit on: the model serves near its curve's peak (median <= 40 in
 *    service), not the 100 clients;
 *  - limit off (the control: fails if the load never reaches the model);
 *    the median is near 100;
 *  - the curve replaced at run time by one whose peak is at twice the
 *    threads and twice as high: the limit rises.
 *
 * SERIAL (tests/integration/SERIAL): 100 client threads and the model need
 * the machine's cores to keep 100 requests outstanding.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "harness_model.h"

#define CLIENTS 100
#define DOCS	100000

struct load {
	const char *uri;
	atomic_long done, failed;
	atomic_bool stop;
	pthread_t threads[CLIENTS];
};

static void *client_loop(void *arg)
{
	struct load *ld = arg;
	mongoc_client_t *c = h_client_uri(ld->uri, "test_adaptive");
	mongoc_collection_t *coll = mongoc_client_get_collection(c, "bench", "docs");
	unsigned seed = (unsigned)(uintptr_t)pthread_self();

	while (!atomic_load(&ld->stop)) {
		bson_t *filter = BCON_NEW("_id", BCON_INT64(rand_r(&seed) % DOCS));
		mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
		const bson_t *doc;
		bson_error_t err;
		int n = 0;

		while (mongoc_cursor_next(cur, &doc))
			n++;
		if (mongoc_cursor_error(cur, &err) || n != 1)
			atomic_fetch_add(&ld->failed, 1);
		else
			atomic_fetch_add(&ld->done, 1);
		mongoc_cursor_destroy(cur);
		bson_destroy(filter);
	}
	mongoc_collection_destroy(coll);
	mongoc_client_destroy(c);
	return NULL;
}

static void load_start(struct load *ld, const char *uri)
{
	memset(ld, 0, sizeof(*ld));
	ld->uri = uri;
	for (int i = 0; i < CLIENTS; i++)
		cr_assert_eq(pthread_create(&ld->threads[i], NULL, client_loop, ld), 0);
}

static void load_stop(struct load *ld)
{
	atomic_store(&ld->stop, true);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(ld->threads[i], NULL);
	cr_assert_eq(atomic_load(&ld->failed), 0, "%ld lookups failed", atomic_load(&ld->failed));
}

/* Waits until the clients completed `n` more lookups (bounded: 5 minutes,
 * a hang guard, not a measurement). */
static void load_wait(struct load *ld, long n)
{
	long until = atomic_load(&ld->done) + n;
	int64_t guard = h_now_ms() + 300000;

	while (atomic_load(&ld->done) < until) {
		cr_assert(h_now_ms() < guard, "the load made no progress: %ld of %ld lookups",
			  atomic_load(&ld->done), until);
		h_sleep_ms(20);
	}
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

/* The median of `n` samples of the model's queries in service, one after
 * every `every` lookups of the load. */
static long median_in_service(struct h_model *m, struct load *ld, int n, long every)
{
	long v[64];

	cr_assert(n <= 64);
	for (int i = 0; i < n; i++) {
		load_wait(ld, every);
		v[i] = (long)h_model_status(m, "inService");
	}
	qsort(v, (size_t)n, sizeof(v[0]), cmp_long);
	return v[n / 2];
}

static int64_t pool_limit(struct proxy *p)
{
	bson_t st;
	int64_t v;

	proxy_stats(p, &st);
	v = h_get_int(&st, "pools.0.limit", -1);
	cr_assert(h_get_bool(&st, "pools.0.adaptive") || v == 100);
	bson_destroy(&st);
	return v;
}

static struct proxy *proxy_for(struct h_model *m, bool adaptive)
{
	char extra[512];

	snprintf(extra, sizeof extra,
		 "backend_uri = %s\npool_size = 100\nbatching = off\nmax_queue = 1000\n"
		 "adaptive_concurrency = %s\nlog_level = warning\n",
		 m->uri, adaptive ? "on" : "off");
	return proxy_start(extra);
}

static char *seed_curve(void)
{
	return h_read_file(MP_SOURCE_DIR "/bench/curves/seed.csv");
}

Test(adaptive, limit_keeps_the_model_near_its_peak, .timeout = 600)
{
	struct h_model m;
	struct load ld;
	char *curve = seed_curve();
	struct proxy *p;
	long med;
	int64_t lim;

	h_raise_nofile(4096);
	h_model_start(&m, curve, "100000", "0");
	p = proxy_for(&m, true);
	load_start(&ld, p->uri);
	load_wait(&ld, 3000); /* from the cold start (limit 3) to its level */
	med = median_in_service(&m, &ld, 15, 300);
	lim = pool_limit(p);
	load_stop(&ld);
	cr_assert(med <= 40, "the model served a median of %ld queries at once (limit %lld)", med,
		  (long long)lim);
	/* the limit may sit at adaptive_min_limit (3) between probes, and a
	 * sample may catch a reply in flight: at least one in service shows
	 * the load reached the model (the control test shows the bound bites) */
	cr_assert(med >= 1, "the load reached the model (median %ld in service)", med);
	cr_assert(lim >= 3 && lim <= 40, "the pool's limit is %lld", (long long)lim);
	proxy_stop(p);
	h_model_stop(&m);
	free(curve);
}

/* The control: without the limit the same load puts every client on the
 * model at once (so the test above fails with the limit off). */
Test(adaptive, without_the_limit_the_model_serves_every_client, .timeout = 600)
{
	struct h_model m;
	struct load ld;
	char *curve = seed_curve();
	struct proxy *p;
	long med;

	h_raise_nofile(4096);
	h_model_start(&m, curve, "100000", "0");
	p = proxy_for(&m, false);
	load_start(&ld, p->uri);
	load_wait(&ld, 1000);
	med = median_in_service(&m, &ld, 15, 200);
	load_stop(&ld);
	cr_assert(med >= 80, "the model served a median of %ld queries at once", med);
	cr_assert_eq(pool_limit(p), 100);
	proxy_stop(p);
	h_model_stop(&m);
	free(curve);
}

/* The mean of n samples of the pool's limit, one after every `every`
 * lookups. */
static double mean_limit(struct proxy *p, struct load *ld, int n, long every)
{
	double sum = 0;

	for (int i = 0; i < n; i++) {
		load_wait(ld, every);
		sum += (double)pool_limit(p);
	}
	return sum / n;
}

Test(adaptive, limit_rises_when_the_backend_gets_faster, .timeout = 900)
{
	struct h_model m;
	struct load ld;
	char *curve = seed_curve();
	char *faster = h_read_file(MP_SOURCE_DIR "/bench/curves/peak40x2.csv");
	struct proxy *p;
	double before, after = 0;

	h_raise_nofile(4096);
	h_model_start(&m, curve, "100000", "0");
	p = proxy_for(&m, true);
	load_start(&ld, p->uri);
	load_wait(&ld, 3000);
	before = mean_limit(p, &ld, 10, 300);
	h_write_file(m.curve, faster);
	kill(m.pid, SIGHUP);
	cr_assert(h_model_status_wait(&m, "reloads", 1), "the model took the new curve");
	/* Up to 20 rounds of 2,000 lookups: at twice the throughput and a
	 * peak at twice the threads the limit must go clearly higher. */
	for (int round = 0; round < 20 && after < before * 1.4; round++)
		after = mean_limit(p, &ld, 10, 200);
	load_stop(&ld);
	cr_assert(after >= before * 1.4, "limit %.1f before the change, %.1f after", before, after);
	proxy_stop(p);
	h_model_stop(&m);
	free(curve);
	free(faster);
}
