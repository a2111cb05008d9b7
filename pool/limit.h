/*
 * limit.h — the adaptive concurrency limit of one backend pool: how many
 * requests may be in flight on it at once, found from the round trips of
 * the requests it completes (gradient/Vegas style; ideas from Envoy's
 * adaptive-concurrency gradient controller and Netflix's concurrency-limits,
 * no code from either). Pure: no libevent, no globals; time comes in the
 * samples, so it is unit-tested on scripted latency sequences.
 *
 * The signal. A backend that is not congested answers a request of a given
 * size in its base time; queueing inside it (or a collapse past its best
 * concurrency) shows as round trips above that base. The limit moves by the
 * gradient tolerance / (rtt / base): grows while round trips stay within
 * `tolerance` times the base, shrinks when they go beyond.
 *
 * Compare like with like. A merged $in of 80 ids takes longer than one
 * lookup with the backend idle, so a sample is compared only with the base
 * of its own size class, never with a lookup's base. Per-id normalisation
 * (rtt / ids) does not work: a query has a fixed cost (network, parsing,
 * one index descent per id but one reply), so per-id time falls with the
 * size and large batches would look like an idle backend. Classes are
 * half-octaves of the id count, floor(2 log2 ids): 1, 2, 3, 4-5, 6-7,
 * 8-11, 12-15, 16-22, ... (within a class sizes differ by less than 1.5x,
 * and latency grows slower than the id count), each with its own base.
 * Requests that are not lookups (ids 0: hello, ping, writes, other
 * queries) share one class of their own: they never set a lookup's base
 * (a ping's 20 µs would make every lookup look congested). That class
 * mixes cheap and dear commands; under a mixed load the probe keeps its
 * base honest, and its samples weigh only by their number.
 *
 * The base. Each class keeps the smallest value its moving average of
 * round trips (1/8 weight per sample) took since the last probe: it follows
 * a backend that got faster at once, and one fast outlier (a reply timed
 * before the backend was busy) does not set it. A backend that got
 * slower would look congested for ever; so every probe_interval_usec the
 * limit drops to min_limit (Envoy's periodic minRTT measurement): requests
 * started from 2 round trips (as they were before the probe) after it
 * began are all taken at min_limit concurrency, and their mean per class is
 * its fresh base. Classes the probe did not see are rescaled by the median
 * change of those it saw (a slower backend is slower for every size). A
 * probe raises a base by at most 1.5x (a slower backend is followed over a
 * few probes). Then the limit goes back to where it was.
 *
 * Several proxies. Every proxy in front of one backend sees the same round
 * trips, so with the same base their latency terms agree; a proxy whose
 * base was taken while the others loaded the backend reads their queue as
 * its own congestion and starves (the latecomer problem of delay-based
 * control). So probes fall on the multiples of probe_interval_usec of a
 * clock the proxies share (now + phase_usec; the pool sets the phase from
 * the wall clock): all probe together at min_limit, the 2 round trips'
 * wait lets the others' requests drain, and all take their bases from the
 * same quiet backend. Clocks apart by more than a probe's few milliseconds
 * lose this (each base then has the others' load in it, within the 1.5x).
 *
 * Updates. Samples are gathered over a window of max(limit, 4) completions
 * (about one round trip of the whole pool), then the limit moves half-way
 * to limit * clamp(tolerance / mean ratio, 0.5, 2) + 3 (Gradient2's queue
 * allowance: a purely multiplicative law keeps whatever split several
 * proxies had; with it each settles where limit x (1 - gradient) = 3, the
 * same limit for all that see the same gradient; below 6 the term's
 * 0.5 clamp no longer shrinks it, the climber and errors do). It grows only while
 * the pool used at least half of it (a quiet pool does not claim a limit it
 * never tested). An error or timeout is congestion: the limit is cut to
 * 0.7x at once, at most once per window. Bounds: [min_limit, ceiling],
 * ceiling = pool_size.
 *
 * The peak. A latency target alone stops near the knee, not at the
 * throughput peak, and where the requests' sizes move with the limit (the
 * batcher merges more lookups per query when fewer may run) no base of a
 * size class stays comparable. So a second term climbs the delivered work
 * itself (perturb and observe, as a solar tracker finds its maximum power
 * point): while the pool is saturated (its in-flight count reached the
 * limit in the window), every window of max(4 x limit, 64) completions
 * (after letting limit completions pass, the old limit's requests) gives
 * ids delivered per second (a request that is not a lookup counts 1, a
 * failed one 0); the climber steps its own limit 15 % in its direction and
 * turns round when a window delivered 2 % less than the one before. On a
 * flat top it wanders within a step or two of the peak; a pool that is
 * not saturated holds it (demand, not the limit, sets its throughput
 * then). The limit in force is the smaller of the two terms: the latency
 * term is the one every proxy in front of the same backend sees alike, so
 * it keeps several proxies (each climbing its own share) from pushing the
 * backend past its peak together; the climber keeps one proxy from
 * stopping below it. The climber never sits above the latency term.
 *
 * Little's law: with a long network round trip (a database on another
 * host) the base includes it, so the ratio stays near 1 until the backend
 * itself queues, and the limit grows to rtt x throughput as needed.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CLIMIT_CLASSES 40
#define CLIMIT_OTHER   (CLIMIT_CLASSES - 1) /* not a lookup (ids 0) */

struct climit {
	/* settings (climit_configure) */
	double tolerance; /* accepted rtt / base before shrinking, > 1 */
	int min_limit;	  /* floor, and the probe's concurrency */
	int ceiling;	  /* pool_size */
	uint64_t probe_interval_usec;
	/* the caller's clock minus a clock shared with the other proxies (the
	 * wall clock): probes fall on its multiples of the interval */
	int64_t phase_usec;
	/* state */
	double limit;
	uint64_t base[CLIMIT_CLASSES]; /* µs, 0: not seen */
	double avg[CLIMIT_CLASSES];    /* moving average of the class's round trips */
	int last_class;
	/* the window */
	double ratio_sum;
	int n, max_inflight;
	bool cut; /* decreased for an error in this window */
	/* the probe */
	uint64_t next_probe_usec;
	bool probing, draining;
	double saved_limit;
	int probe_left;
	uint64_t probe_from_usec;
	uint64_t probe_sum[CLIMIT_CLASSES];
	int probe_n[CLIMIT_CLASSES];
	/* the climber (the peak, above) */
	struct {
		double limit, dir, last_rate, work;
		uint64_t t0;
		int skip, n, max_inflight;
	} climb;
	/* figures */
	uint64_t samples, drops, probes;
};

/* A controller starting at `start` (clamped to the bounds). */
void climit_init(struct climit *l, double tolerance, int min_limit, int ceiling, int start,
		 uint64_t probe_interval_usec);
/* New settings (reload); keeps what was learnt. */
void climit_configure(struct climit *l, double tolerance, int min_limit, int ceiling);

/* One completed request: its backend round trip, its size in ids (0 for
 * anything but a lookup), whether it failed as congestion does (network
 * error, timeout, closed), and the pool's in-flight count after it. */
void limit_sample(struct climit *l, uint64_t now_usec, uint64_t rtt_usec, int ids, bool dropped,
		  int inflight);

/* Requests that may be in flight now. */
int limit_value(const struct climit *l);

/* The latency term and the climber's own limits (the figures; the limit in
 * force is limit_value). */
int limit_gradient_value(const struct climit *l);
int limit_climb_value(const struct climit *l);

/* The base round trip of the latest sample's size class (µs, 0: none). */
uint64_t limit_min_rtt(const struct climit *l);

/* The size class of a request of `ids` ids. */
int limit_class(int ids);
