/*
 * test_limit.c — the adaptive concurrency limit (pool/limit.h) on scripted
 * latency sequences: a simulated closed loop where `demand` clients keep
 * min(limit, demand) requests in flight and a backend function gives each
 * request's round trip from the concurrency it ran at. Time is simulated;
 * nothing here measures the machine. Also the gate's term that holds a
 * merged batch for its share (batch_hold_us).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/globals.h"
#include "pool/gate.h"
#include "pool/limit.h"

#define TOL	  2.0
#define MIN_LIMIT 3
#define PROBE_US  5000000ULL

/* A backend: round trip (µs) of a request of `ids` ids at concurrency c. */
struct backend {
	double base_us; /* one lookup, idle */
	int knee;	/* concurrency it serves without queueing */
	double slope;	/* relative latency added per request beyond the knee, x knee */
	double per_id;	/* relative cost of each id beyond the first */
};

static uint64_t rtt_of(const struct backend *b, int c, int ids)
{
	double t = b->base_us * (1.0 + b->per_id * (ids - 1));

	if (c > b->knee)
		t *= 1.0 + b->slope * (double)(c - b->knee) / b->knee;
	return (uint64_t)t;
}

struct sim {
	struct climit l;
	uint64_t now;
	double sum; /* limit over the last run */
	int n;
};

static void sim_init(struct sim *s, int ceiling)
{
	memset(s, 0, sizeof(*s));
	climit_init(&s->l, TOL, MIN_LIMIT, ceiling, MIN_LIMIT, PROBE_US);
	s->now = 1000000;
}

/* `count` completions; every `big_every`-th one (0: none) has `big_ids`. */
static void sim_run(struct sim *s, const struct backend *b, int count, int demand, int big_every,
		    int big_ids)
{
	s->sum = 0;
	s->n = 0;
	for (int i = 0; i < count; i++) {
		int lim = limit_value(&s->l), c = lim < demand ? lim : demand;
		int ids = big_every && i % big_every == 0 ? big_ids : 1;
		uint64_t rtt = rtt_of(b, c, ids);

		s->now += rtt / (uint64_t)c;
		limit_sample(&s->l, s->now, rtt, ids, false, c - 1);
		s->sum += limit_value(&s->l);
		s->n++;
	}
}

static double sim_mean(const struct sim *s)
{
	return s->sum / s->n;
}

Test(limit, size_classes)
{
	cr_assert_eq(limit_class(0), CLIMIT_OTHER);
	cr_assert_eq(limit_class(1), 0);
	cr_assert_eq(limit_class(2), 2);
	cr_assert_eq(limit_class(3), 3);
	cr_assert_eq(limit_class(5), 4);
	cr_assert_eq(limit_class(6), 5);
	cr_assert_eq(limit_class(8), 6);
	cr_assert_eq(limit_class(11), 6);
	cr_assert_eq(limit_class(12), 7);
	cr_assert_eq(limit_class(80), 12);
	cr_assert_eq(limit_class(1 << 30), CLIMIT_OTHER - 1);
	cr_assert_eq(limit_class(2147483647), CLIMIT_OTHER - 1);
}

Test(limit, constant_latency_grows_to_ceiling)
{
	struct backend b = {1000, 1000000, 0, 0};
	struct sim s;

	sim_init(&s, 100);
	cr_assert_eq(limit_value(&s.l), MIN_LIMIT);
	/* throughput grows with every request let in: the latency term and
	 * the climber both go up, 15 % a window (of 4 x limit completions and
	 * 50 ms: about 50 x limit completions at this 1 ms latency) */
	sim_run(&s, &b, 80000, 1000, 0, 0);
	cr_assert_eq(limit_value(&s.l), 100, "limit %d", limit_value(&s.l));
	cr_assert_eq(limit_min_rtt(&s.l), 1000);
}

Test(limit, quiet_pool_does_not_grow)
{
	struct backend b = {1000, 1000000, 0, 0};
	struct sim s;

	sim_init(&s, 100);
	sim_run(&s, &b, 2000, 1, 0, 0); /* one client: never more than one in flight */
	cr_assert_leq(limit_value(&s.l), 2 * MIN_LIMIT + 1, "limit %d", limit_value(&s.l));
}

Test(limit, settles_near_the_knee)
{
	struct backend b = {2000, 20, 3.0, 0};
	struct sim s;

	sim_init(&s, 100);
	sim_run(&s, &b, 20000, 1000, 0, 0);
	sim_run(&s, &b, 5000, 1000, 0, 0);
	cr_assert(sim_mean(&s) >= 18 && sim_mean(&s) <= 32, "mean limit %.1f", sim_mean(&s));
}

Test(limit, errors_shrink)
{
	struct backend b = {1000, 1000000, 0, 0};
	struct sim s;

	sim_init(&s, 100);
	sim_run(&s, &b, 80000, 1000, 0, 0);
	cr_assert_eq(limit_value(&s.l), 100);
	for (int i = 0; i < 400; i++) {
		s.now += 100;
		limit_sample(&s.l, s.now, 1000, 1, true, limit_value(&s.l) - 1);
	}
	cr_assert_leq(limit_value(&s.l), 10, "limit %d", limit_value(&s.l));
	cr_assert_geq(limit_value(&s.l), MIN_LIMIT);
}

Test(limit, follows_latency_steps)
{
	struct backend b = {2000, 20, 3.0, 0};
	struct backend slower = {4000, 20, 3.0, 0};
	struct backend faster = {1000, 50, 3.0, 0};
	struct sim s;

	sim_init(&s, 100);
	sim_run(&s, &b, 20000, 1000, 0, 0);
	cr_assert(sim_mean(&s) >= 18 && sim_mean(&s) <= 32, "mean limit %.1f", sim_mean(&s));
	/* twice as slow, same knee: only a probe can tell (its minimum rises;
	 * with the old base the latency term would stay below the knee). 25,000
	 * samples here are about 10 s of simulated time: a probe or two. The
	 * throughput peaks at the knee, 20, where the climber keeps it. */
	sim_run(&s, &slower, 20000, 1000, 0, 0);
	sim_run(&s, &slower, 5000, 1000, 0, 0);
	cr_assert(sim_mean(&s) >= 16 && sim_mean(&s) <= 32, "mean limit %.1f", sim_mean(&s));
	cr_assert_geq(s.l.probes, 1);
	sim_run(&s, &faster, 40000, 1000, 0, 0);
	sim_run(&s, &faster, 5000, 1000, 0, 0);
	cr_assert(sim_mean(&s) >= 45 && sim_mean(&s) <= 80, "mean limit %.1f", sim_mean(&s));
}

Test(limit, big_in_samples_do_not_shrink_it)
{
	/* An 80-id $in costs 8x a lookup on an idle backend: compared with
	 * the lookups' base it would look like heavy congestion. */
	struct backend b = {2000, 20, 3.0, 0.1};
	struct sim s, ref;

	sim_init(&ref, 100);
	sim_run(&ref, &b, 20000, 1000, 0, 0);
	sim_init(&s, 100);
	sim_run(&s, &b, 20000, 1000, 0, 0);
	sim_run(&s, &b, 20000, 1000, 3, 80); /* one in three is an 80-id $in */
	cr_assert(sim_mean(&s) >= 0.8 * sim_mean(&ref), "mean limit %.1f, without $in %.1f",
		  sim_mean(&s), sim_mean(&ref));
}

Test(limit, long_round_trip_fills_the_pipe)
{
	/* 1 ms network + 0.5 ms service, the backend itself queues beyond 80:
	 * Little's law wants far more than a local backend's limit. */
	struct backend b = {1500, 80, 3.0, 0};
	struct sim s;

	sim_init(&s, 200);
	sim_run(&s, &b, 150000, 1000, 0, 0);
	cr_assert_geq(sim_mean(&s), 70, "mean limit %.1f", sim_mean(&s));
}

Test(limit, reconfigure_clamps)
{
	struct backend b = {1000, 1000000, 0, 0};
	struct sim s;

	sim_init(&s, 100);
	sim_run(&s, &b, 80000, 1000, 0, 0);
	climit_configure(&s.l, TOL, MIN_LIMIT, 10);
	cr_assert_eq(limit_value(&s.l), 10);
	climit_configure(&s.l, TOL, 20, 10); /* min above the ceiling: the ceiling wins */
	cr_assert_eq(limit_value(&s.l), 10);
}

/* batch_hold_us's term of the gate (pool_gate_share, pool/gate.h): an open
 * merged query waits for its share of the pool's lookups, (queued + in
 * flight) / the limit, until its hold passes or nothing else is in flight. */
Test(limit, held_batch_waits_for_its_share)
{
	static struct pool p;
	struct req_route r;
	struct request req;

	memset(&p, 0, sizeof(p));
	memset(&r, 0, sizeof(r));
	memset(&req, 0, sizeof(req));
	req.route = &r;
	g.cfg.pool_size = 8;
	g.cfg.adaptive_concurrency = false;
	g.now_usec = 1000000;
	cr_assert(pool_gate_share(&req, &p), "not a held batch");
	r.hold_until_usec = g.now_usec + 1000;
	r.ids = 3;
	cr_assert(pool_gate_share(&req, &p), "nothing in flight: nothing to wait for");
	p.inflight = 7;
	p.inflight_ids = 77; /* share: (ids + 77) / 8 */
	cr_assert_not(pool_gate_share(&req, &p), "3 of a share of 10");
	r.ids = 10;
	cr_assert_not(pool_gate_share(&req, &p), "10 of 87 / 8");
	r.ids = 11;
	cr_assert(pool_gate_share(&req, &p), "11 of 88 / 8: its share");
	r.ids = 3;
	g.now_usec += 1000;
	cr_assert(pool_gate_share(&req, &p), "the hold passed");
	g.now_usec -= 1000;
	g.cfg.adaptive_concurrency = true; /* the limit is the adaptive one when on */
	climit_init(&p.limit, 2.0, 3, 100, 3, 5000000);
	p.inflight_ids = 12; /* share: (ids + 12) / 3, the limit starting at 3 */
	cr_assert_not(pool_gate_share(&req, &p));
	r.ids = 6;
	cr_assert(pool_gate_share(&req, &p), "6 of 18 / 3");
	g.cfg.adaptive_concurrency = false;
}
