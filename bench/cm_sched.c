/*
 * cm_sched.c — when the curve model's replies go out, and its loop (see
 * cm_sched.h).
 */
#include "bench/cm_sched.h"

#include <event2/event.h>
#include <stdlib.h>
#include <time.h>

#include "bench/cm.h"
#include "core/xalloc.h"

#define MIN_SLEEP_US  50   /* the shortest sleep bound while queries are in service */
#define FREE_PENDINGS 1024 /* pending structs kept for reuse */

static struct cm_heap due_heap, svc_heap;
static struct cm_pending **arrivals; /* messages read, not yet scheduled */
static int narrivals, arrivals_cap;
static struct cm_pending *free_list[FREE_PENDINGS];
static int nfree;

int64_t cm_mono_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct cm_pending *cm_sched_new(struct cm_conn *c)
{
	struct cm_pending *p = nfree ? free_list[--nfree] : NULL;

	if (!p) {
		p = xcalloc(1, sizeof *p);
		p->reply = xevbuffer_new();
	}
	cm_heap_node_init(&p->due);
	cm_heap_node_init(&p->svc);
	p->gen++;
	p->conn = c;
	p->queued = false;
	return p;
}

/* Back to the free list once nothing holds p any more. */
static void release(struct cm_pending *p)
{
	if (p->conn || p->queued || cm_heap_in(&p->due) || cm_heap_in(&p->svc))
		return;
	evbuffer_drain(p->reply, evbuffer_get_length(p->reply));
	if (nfree < FREE_PENDINGS) {
		free_list[nfree++] = p;
		return;
	}
	evbuffer_free(p->reply);
	free(p);
}

void cm_sched_queue(struct cm_pending *p, int64_t arrival_us, int cost_ids, double think_us)
{
	p->arrival_us = arrival_us;
	p->cost_ids = cost_ids;
	p->think_us = think_us;
	if (narrivals == arrivals_cap) {
		arrivals_cap = arrivals_cap ? arrivals_cap * 2 : 256;
		arrivals = xrealloc(arrivals, (size_t)arrivals_cap * sizeof *arrivals);
	}
	p->queued = true;
	arrivals[narrivals++] = p;
}

void cm_sched_forget(struct cm_pending *p)
{
	if (cm_heap_in(&p->due))
		cm_heap_remove(&due_heap, &p->due);
	p->conn = NULL;
	release(p);
}

void cm_sched_end_service(struct cm_pending *p, uint32_t gen)
{
	if (p->gen != gen || !cm_heap_in(&p->svc))
		return;
	cm_heap_remove(&svc_heap, &p->svc);
	cm.in_service = svc_heap.n;
	release(p);
}

void cm_sched_free_all(void)
{
	struct cm_heap_node *x;

	for (int i = 0; i < narrivals; i++) {
		arrivals[i]->queued = false;
		release(arrivals[i]);
	}
	narrivals = 0;
	while ((x = cm_heap_pop(&svc_heap)))
		release(cm_heap_entry(x, struct cm_pending, svc));
	while (nfree) {
		struct cm_pending *p = free_list[--nfree];

		evbuffer_free(p->reply);
		free(p);
	}
	free(arrivals);
	arrivals = NULL;
	arrivals_cap = 0;
	cm_heap_free(&due_heap);
	cm_heap_free(&svc_heap);
	cm.in_service = 0;
}

/* Signed error of a write against its due time: the wake is set earlier by
 * the running mean, so that replies go out on time on average (the loop
 * wakes late on a busy machine; replies written early by the slack pull it
 * back). The lead stays in [-slack, 2 ms], an error counts up to 5 ms: a
 * long stall is not the loop's usual lateness. */
static void note_error(int64_t err_us)
{
	double e = (double)err_us;

	if (e > 5000)
		e = 5000;
	cm.late_usec_avg += e / 64;
	if (cm.late_usec_avg > 2000)
		cm.late_usec_avg = 2000;
	if (cm.late_usec_avg < -(double)cm.slack_us)
		cm.late_usec_avg = -(double)cm.slack_us;
}

/* Queries whose service ended by t leave the in-service count. */
static void retire(int64_t t)
{
	struct cm_heap_node *x;

	while ((x = cm_heap_top(&svc_heap)) && x->key <= t) {
		cm_heap_pop(&svc_heap);
		release(cm_heap_entry(x, struct cm_pending, svc));
	}
	cm.in_service = svc_heap.n;
}

static int by_arrival(const void *a, const void *b)
{
	const struct cm_pending *x = *(struct cm_pending *const *)a;
	const struct cm_pending *y = *(struct cm_pending *const *)b;

	return (x->arrival_us > y->arrival_us) - (x->arrival_us < y->arrival_us);
}

/* Fixes each arrival's delay, in receive order: a find of k ids gets the
 * curve's latency L at c = the queries in service at its receive time + 1
 * (less the connection's think time with --think-compensation), then the
 * rtt; any other command the rtt only. With the compensation a find stays
 * in service for L + 5 ms or until its connection's next find arrives,
 * whichever comes first: a gap up to 5 ms is think time (the samples' own
 * limit), so a client in a closed loop counts in c for its whole cycle, as
 * the curve's threads do, and an idle one drops out 5 ms after. */
static void schedule_arrivals(void)
{
	int n = narrivals;

	if (n > 1)
		qsort(arrivals, (size_t)n, sizeof *arrivals, by_arrival);
	narrivals = 0;
	for (int i = 0; i < n; i++) {
		struct cm_pending *p = arrivals[i];
		double delay_s = 0;
		int64_t grace = 0;

		p->queued = false;
		if (!p->conn) { /* its connection closed */
			release(p);
			continue;
		}
		if (p->cost_ids >= 0) {
			double lat;
			int conc;

			retire(p->arrival_us);
			conc = svc_heap.n + 1;
			if (conc > cm.max_in_service)
				cm.max_in_service = conc;
			cm.queries++;
			lat = curve_latency_s(cm.curve, p->cost_ids, conc);
			delay_s = lat;
			if (cm.think_comp && p->think_us >= 0) {
				delay_s = curve_compensated_s(lat, p->think_us / 1e6);
				grace = CM_THINK_MAX_US;
			}
			cm_heap_push(&svc_heap, &p->svc,
				     p->arrival_us + (int64_t)(lat * 1e6 + 0.5) + grace);
			cm.in_service = svc_heap.n;
		}
		cm_heap_push(&due_heap, &p->due,
			     p->arrival_us + (int64_t)(delay_s * 1e6 + 0.5) + cm.rtt_us);
	}
}

/* Writes every reply due by now + the lead (the wake's offset, next_wake)
 * + its slack, earliest first: the replies whose wake has come. A reply's
 * slack is --timer-slack-us, at most a fifth of its own delay (a short
 * delay is not made much shorter). */
static void write_due(int64_t now)
{
	int64_t base = now + (int64_t)cm.late_usec_avg;
	struct cm_heap_node *x;

	while ((x = cm_heap_top(&due_heap))) {
		struct cm_pending *p = cm_heap_entry(x, struct cm_pending, due);
		int64_t slack = (x->key - p->arrival_us) / 5;

		if (x->key > base + (slack < cm.slack_us ? slack : cm.slack_us))
			break;
		cm_heap_pop(&due_heap);
		now = cm_mono_usec(); /* the writes before it took time */
		note_error(now - x->key);
		cm_conn_write(p, now);
	}
}

/* One service pass, after the loop ran: schedule what was read, write what is due. */
static void service(void)
{
	for (int i = 0; i < 8 && (narrivals || i == 0); i++) {
		int64_t now = cm_mono_usec();

		schedule_arrivals();
		retire(now);
		write_due(now); /* may resume a connection: more arrivals */
	}
}

/* When to wake while replies wait (false: none wait, block in the loop).
 * The earliest due reply, set earlier by the mean lateness; and at most
 * the shortest latency a query arriving meanwhile could get (so that it is
 * read, dated by its receive time, before it is due): its c is at least 1 +
 * the queries still in service at the wake (curve_min_latency_s), less the
 * largest think time when that is subtracted. */
static bool next_wake(int64_t now, int64_t *wake)
{
	struct cm_heap_node *x = cm_heap_top(&due_heap);
	int64_t t, bound;
	int conc;

	if (!x)
		return false;
	t = x->key - (int64_t)cm.late_usec_avg;
	/* with the compensation an arriving find may end its connection's
	 * previous one, which this counts: one fewer then */
	conc = (cm.think_comp ? 0 : 1) + svc_heap.n - cm_heap_count_le(&svc_heap, t);
	bound = (int64_t)(curve_min_latency_s(cm.curve, conc) * 1e6);
	if (cm.think_comp)
		bound -= (int64_t)cm.think_hi_us;
	bound += cm.rtt_us - (int64_t)cm.late_usec_avg;
	if (bound < MIN_SLEEP_US)
		bound = MIN_SLEEP_US;
	bound += now;
	*wake = t < bound ? t : bound;
	return true;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000),
			      .tv_nsec = (long)(t % 1000000) * 1000};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL); /* EINTR: a signal, go on */
}

void cm_sched_run(void)
{
	while (!cm.stop) {
		int64_t now = cm_mono_usec(), wake;

		if (next_wake(now, &wake)) {
			if (wake > now) {
				sleep_until(wake);
				cm.wakeups++;
			}
			event_base_loop(cm.base, EVLOOP_NONBLOCK);
		} else {
			event_base_loop(cm.base, EVLOOP_ONCE);
		}
		service();
	}
}
