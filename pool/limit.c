/*
 * limit.c — the adaptive concurrency limit of one pool (the design is in
 * limit.h).
 */
#include "pool/limit.h"

#include <stdlib.h>
#include <string.h>

#define WINDOW_MIN    4
#define GRADIENT_MIN  0.5
#define GRADIENT_MAX  2.0
#define SMOOTHING     0.5
#define DROP_FACTOR   0.7
#define PROBE_SAMPLES 3 /* per unit of min_limit */
#define AVG_WEIGHT    0.125
#define CLIMB_STEP    0.15 /* the climber's step, x its limit */
#define CLIMB_TURN    0.02 /* a window this much worse turns it round */
#define CLIMB_WINDOW  64   /* completions a window, at least */
/* ... and at least this long: at a fast backend's 28k q/s a window of 64
 * completions lasts 2 ms, which scheduling noise decides */
#define CLIMB_USEC 50000
/* The latency term's fairness allowance: target = limit x gradient + QUEUE
 * (Gradient2's queue). A purely multiplicative law keeps whatever split
 * several proxies had; with the allowance each settles where
 * limit x (1 - gradient) = QUEUE, the same limit for every proxy that sees
 * the same gradient */
#define QUEUE 3.0
/* A probe counts only requests started this many (pre-probe) round trips
 * after it began: the other proxies' requests of before are out by then */
#define PROBE_WAIT 2.0
/* A probe raises a base by at most this factor: a probe that overlapped
 * other proxies' load (their clocks apart) reads their queue as the base,
 * and a base too high lets every proxy push the backend further */
#define BASE_RISE_MAX 1.5

int limit_class(int ids)
{
	uint64_t k = (uint64_t)ids;
	int b, c;

	if (ids < 1)
		return CLIMIT_OTHER;
	b = 63 - __builtin_clzll(k);
	c = 2 * b + (k * k >= (1ULL << (2 * b + 1)) ? 1 : 0);
	if (b >= 31) /* k * k would overflow: the last class anyway */
		return CLIMIT_OTHER - 1;
	return c < CLIMIT_OTHER ? c : CLIMIT_OTHER - 1;
}

static double clampd(double v, double lo, double hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static double bounded(const struct climit *l, double v)
{
	double hi = l->ceiling, lo = l->min_limit < l->ceiling ? l->min_limit : l->ceiling;

	return clampd(v, lo < 1 ? 1 : lo, hi < 1 ? 1 : hi);
}

void climit_configure(struct climit *l, double tolerance, int min_limit, int ceiling)
{
	l->tolerance = tolerance > 1.0 ? tolerance : 1.0;
	l->min_limit = min_limit < 1 ? 1 : min_limit;
	l->ceiling = ceiling < 1 ? 1 : ceiling;
	l->limit = bounded(l, l->limit);
	l->saved_limit = bounded(l, l->saved_limit);
	l->climb.limit = bounded(l, l->climb.limit);
}

void climit_init(struct climit *l, double tolerance, int min_limit, int ceiling, int start,
		 uint64_t probe_interval_usec)
{
	memset(l, 0, sizeof(*l));
	l->limit = start;
	l->saved_limit = start;
	l->climb.limit = start;
	l->climb.dir = 1;
	l->climb.skip = 1; /* the first window starts at the first sample */
	l->probe_interval_usec = probe_interval_usec;
	climit_configure(l, tolerance, min_limit, ceiling);
}

int limit_gradient_value(const struct climit *l)
{
	return (int)(l->limit + 1e-9);
}

int limit_climb_value(const struct climit *l)
{
	return (int)(l->climb.limit + 1e-9);
}

int limit_value(const struct climit *l)
{
	int g = limit_gradient_value(l), c = limit_climb_value(l);

	if (l->probing)
		return (int)bounded(l, l->min_limit);
	return c < g ? c : g;
}

uint64_t limit_min_rtt(const struct climit *l)
{
	return l->base[l->last_class];
}

static void window_reset(struct climit *l)
{
	l->ratio_sum = 0;
	l->n = 0;
	l->max_inflight = 0;
	l->cut = false;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Probes fall where now + phase_usec is a multiple of the interval: every
 * proxy in front of the backend (every worker, every host with its clock
 * synchronised) probes at the same moment, all at min_limit, so all take
 * their bases from the same quiet backend */
static uint64_t next_probe(const struct climit *l, uint64_t now)
{
	int64_t iv = (int64_t)l->probe_interval_usec,
		r = ((int64_t)(now % (uint64_t)iv) + l->phase_usec % iv) % iv;

	if (r < 0)
		r += iv; /* (now + phase) mod interval */
	return now + (uint64_t)(iv - r);
}

/* The probe ended: its minima are the bases of the classes it saw; the
 * others move by the median change of those. */
static void probe_end(struct climit *l, uint64_t now)
{
	double f[CLIMIT_CLASSES], factor = 1.0;
	int nf = 0;

	uint64_t fresh[CLIMIT_CLASSES];

	for (int c = 0; c < CLIMIT_CLASSES; c++) {
		fresh[c] = l->probe_n[c] ? l->probe_sum[c] / (uint64_t)l->probe_n[c] : 0;
		if (fresh[c] == 0 && l->probe_n[c])
			fresh[c] = 1;
		if (fresh[c] != 0 && l->base[c] != 0)
			f[nf++] = (double)fresh[c] / (double)l->base[c];
	}
	if (nf > 0) {
		qsort(f, (size_t)nf, sizeof(f[0]), cmp_double);
		factor = f[nf / 2];
	}
	for (int c = 0; c < CLIMIT_CLASSES; c++) {
		double v = fresh[c] != 0 ? (double)fresh[c] : (double)l->base[c] * factor;

		if (l->base[c] != 0 && v > (double)l->base[c] * BASE_RISE_MAX)
			v = (double)l->base[c] * BASE_RISE_MAX;
		if (v > 0)
			l->base[c] = v < 1.0 ? 1 : (uint64_t)(v + 0.5);
		if (l->base[c] != 0)
			l->avg[c] = (double)l->base[c];
	}
	l->probing = false;
	l->limit = bounded(l, l->saved_limit);
	l->next_probe_usec = next_probe(l, now);
	window_reset(l);
}

static void probe_sample(struct climit *l, uint64_t now, uint64_t rtt, int c, bool dropped,
			 int inflight)
{
	if (l->draining) { /* requests started before the probe are still out */
		if (inflight <= limit_value(l))
			l->draining = false;
		return;
	}
	if (now < rtt || now - rtt < l->probe_from_usec)
		return; /* started while other proxies' requests may still drain */
	if (!dropped) {
		l->probe_sum[c] += rtt;
		l->probe_n[c]++;
	}
	if (--l->probe_left <= 0)
		probe_end(l, now);
}

static void probe_start(struct climit *l, uint64_t now)
{
	l->probe_from_usec = now + (uint64_t)(PROBE_WAIT * l->avg[l->last_class]);
	l->probing = true;
	l->draining = true;
	l->saved_limit = l->limit;
	l->probe_left = PROBE_SAMPLES * l->min_limit;
	memset(l->probe_sum, 0, sizeof(l->probe_sum));
	memset(l->probe_n, 0, sizeof(l->probe_n));
	l->probes++;
}

static void window_end(struct climit *l)
{
	double ratio = l->ratio_sum / l->n,
	       g = clampd(l->tolerance / ratio, GRADIENT_MIN, GRADIENT_MAX);
	double target = l->limit * g + QUEUE;

	if (g > 1.0 && l->max_inflight * 2 < (int)l->limit)
		target = l->limit; /* not used: no evidence for more */
	else if (g > 1.0 && target < l->limit + 1.0)
		target = l->limit + 1.0; /* small limits still grow */
	l->limit = bounded(l, l->limit + (target - l->limit) * SMOOTHING);
	window_reset(l);
}

/* A new window, after `skip` completions (the requests of the old limit). */
static void climb_restart(struct climit *l, int skip)
{
	l->climb.skip = skip;
	l->climb.n = 0;
	l->climb.work = 0;
	l->climb.max_inflight = 0;
}

/* The window ended saturated: one step, turning round if it delivered less
 * than the one before. */
static void climb_step(struct climit *l, double rate)
{
	double c = l->climb.limit, next;

	if (l->climb.last_rate > 0 && rate < l->climb.last_rate * (1.0 - CLIMB_TURN))
		l->climb.dir = -l->climb.dir;
	l->climb.last_rate = rate;
	next = c * (1.0 + CLIMB_STEP * l->climb.dir);
	if (next - c < 1.0 && next - c > -1.0)
		next = c + l->climb.dir; /* small limits still move */
	/* at a bound it stays (clamped below) until a window delivers less */
	if (next > l->limit + 1.0)
		next = l->limit + 1.0; /* never above the latency term */
	l->climb.limit = bounded(l, next);
}

static void climb_sample(struct climit *l, uint64_t now, int ids, bool dropped, int inflight)
{
	int lim = limit_value(l), want = 4 * lim > CLIMB_WINDOW ? 4 * lim : CLIMB_WINDOW;

	if (inflight + 1 > l->climb.max_inflight)
		l->climb.max_inflight = inflight + 1;
	if (l->climb.skip > 0) {
		if (--l->climb.skip == 0) {
			l->climb.t0 = now;
			l->climb.max_inflight = 0;
		}
		return;
	}
	l->climb.work += dropped ? 0.0 : ids > 0 ? (double)ids : 1.0;
	if (++l->climb.n < want || now < l->climb.t0 + CLIMB_USEC)
		return;
	if (l->climb.max_inflight >= lim) {
		climb_step(l, l->climb.work * 1e6 / (double)(now - l->climb.t0));
		climb_restart(l, limit_value(l));
	} else {
		l->climb.last_rate = 0; /* demand set this window's rate, not the limit */
		climb_restart(l, 1);
	}
}

void limit_sample(struct climit *l, uint64_t now_usec, uint64_t rtt_usec, int ids, bool dropped,
		  int inflight)
{
	int c = limit_class(ids);

	if (rtt_usec == 0)
		rtt_usec = 1;
	l->samples++;
	l->last_class = c;
	if (dropped)
		l->drops++;
	if (l->next_probe_usec == 0 && l->probe_interval_usec != 0)
		l->next_probe_usec = next_probe(l, now_usec);
	if (l->probing) {
		probe_sample(l, now_usec, rtt_usec, c, dropped, inflight);
		if (!l->probing) /* the probe's window says nothing of the climb */
			climb_restart(l, limit_value(l));
		return;
	}
	if (l->probe_interval_usec != 0 && now_usec >= l->next_probe_usec) {
		probe_start(l, now_usec);
		probe_sample(l, now_usec, rtt_usec, c, dropped, inflight);
		return;
	}
	climb_sample(l, now_usec, ids, dropped, inflight);
	if (inflight + 1 > l->max_inflight)
		l->max_inflight = inflight + 1; /* in flight while it ran */
	if (dropped) {
		if (!l->cut)
			l->limit = bounded(l, l->limit * DROP_FACTOR);
		l->cut = true;
	} else {
		if (l->base[c] == 0) {
			l->avg[c] = (double)rtt_usec;
			l->base[c] = rtt_usec;
		}
		l->avg[c] += ((double)rtt_usec - l->avg[c]) * AVG_WEIGHT;
		if (l->avg[c] < (double)l->base[c])
			l->base[c] = l->avg[c] < 1.0 ? 1 : (uint64_t)l->avg[c];
		l->ratio_sum += (double)rtt_usec / (double)l->base[c];
	}
	if (++l->n >= (l->limit > WINDOW_MIN ? (int)l->limit : WINDOW_MIN)) {
		if (l->cut)
			window_reset(l); /* an error in the window: no growth */
		else
			window_end(l);
	}
}
