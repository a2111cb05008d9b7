/*
 * lsim.c — the discrete-event simulation of clients, pools and a curve-model
 * backend (see lsim.h). Events are kept in a binary heap ordered by time and
 * then by the order they were made, so a run is deterministic.
 */
#include "bench/lsim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/limit.h"

enum ev_kind { EV_SEND, EV_REPLY, EV_TRACE, EV_KICK };

struct ev {
	double t;
	uint64_t seq;
	enum ev_kind kind;
	int idx;
};

/* A query on the backend: its proxy, size, start and the clients it answers. */
struct bq {
	int proxy, ids, nmembers;
	double start;
	int *members;
	int next_free;
};

struct sproxy {
	struct climit limit;
	int *queue; /* ring of client indices */
	int qhead, qlen, inflight;
	int inflight_ids;    /* lookups in flight (batching) */
	double first_queued; /* when the oldest queued lookup came */
	bool kick_pending;
};

struct sim {
	const struct lsim_cfg *cfg;
	struct ev *heap;
	int nheap, capheap;
	uint64_t seq, rng;
	struct bq *q;
	int nq, free_q;
	struct sproxy px[LSIM_MAX_PROXIES];
	double *issued; /* per client: when its query was sent */
	int backend_inflight;
	/* figures */
	double *lat;
	int nlat, caplat;
	double done[LSIM_MAX_PROXIES], lookups, backend_queries, backend_ids;
	double limit_area, last_t;
	double completed, trace_done; /* every client completion; at the last trace */
};

static void push(struct sim *s, double t, enum ev_kind kind, int idx)
{
	int i;

	if (s->nheap == s->capheap) {
		s->capheap = s->capheap ? 2 * s->capheap : 1024;
		s->heap = realloc(s->heap, (size_t)s->capheap * sizeof(*s->heap));
		if (!s->heap)
			abort();
	}
	i = s->nheap++;
	s->heap[i] = (struct ev){t, s->seq++, kind, idx};
	while (i > 0) {
		int up = (i - 1) / 2;
		struct ev tmp;

		if (s->heap[up].t < s->heap[i].t ||
		    (s->heap[up].t == s->heap[i].t && s->heap[up].seq < s->heap[i].seq))
			break;
		tmp = s->heap[up];
		s->heap[up] = s->heap[i];
		s->heap[i] = tmp;
		i = up;
	}
}

static bool before(const struct ev *a, const struct ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static struct ev pop(struct sim *s)
{
	struct ev top = s->heap[0];
	int i = 0;

	s->heap[0] = s->heap[--s->nheap];
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		struct ev tmp;

		if (l < s->nheap && before(&s->heap[l], &s->heap[m]))
			m = l;
		if (r < s->nheap && before(&s->heap[r], &s->heap[m]))
			m = r;
		if (m == i)
			break;
		tmp = s->heap[m];
		s->heap[m] = s->heap[i];
		s->heap[i] = tmp;
		i = m;
	}
	return top;
}

/* xorshift64*, then Box-Muller: a seeded normal deviate. */
static double uniform(struct sim *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return ((s->rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static double normal(struct sim *s)
{
	double u = uniform(s), v = uniform(s);

	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int limit_of(const struct sim *s, int p)
{
	return s->cfg->fixed_limit ? s->cfg->fixed_limit : limit_value(&s->px[p].limit);
}

static const struct curve *curve_at(const struct sim *s, double t)
{
	const struct lsim_cfg *c = s->cfg;

	if (c->curve2 && t >= c->switch_at_s && !(c->back_at_s > 0 && t >= c->back_at_s))
		return c->curve2;
	return c->curve;
}

static int new_query(struct sim *s)
{
	int i = s->free_q;

	if (i >= 0) {
		s->free_q = s->q[i].next_free;
		return i;
	}
	s->q = realloc(s->q, (size_t)(s->nq + 1) * sizeof(*s->q));
	if (!s->q)
		abort();
	i = s->nq++;
	s->q[i].members = malloc((size_t)s->cfg->clients * sizeof(int));
	if (!s->q[i].members)
		abort();
	return i;
}

static int queue_take(struct sproxy *px, int clients)
{
	int c = px->queue[px->qhead];

	px->qhead = (px->qhead + 1) % clients;
	px->qlen--;
	return c;
}

/* With batching and batch_even > 0, a batch waits for its share of the
 * lookups in the pool, batch_even x (queued + in flight) / limit, at most
 * batch_hold_us after its oldest lookup came. */
static bool batch_ready(struct sim *s, int p, double t)
{
	const struct lsim_cfg *c = s->cfg;
	struct sproxy *px = &s->px[p];
	double share;

	if (!c->batching || c->batch_even <= 0 || px->inflight == 0)
		return true;
	share = c->batch_even * (px->qlen + px->inflight_ids / c->ids) / limit_of(s, p);
	if (px->qlen >= share || t >= px->first_queued + c->batch_hold_us / 1e6)
		return true;
	if (!px->kick_pending) {
		px->kick_pending = true;
		push(s, px->first_queued + c->batch_hold_us / 1e6, EV_KICK, p);
	}
	return false;
}

/* Dispatches from proxy p's queue while its limit allows. */
static void dispatch(struct sim *s, int p, double t)
{
	const struct lsim_cfg *c = s->cfg;
	struct sproxy *px = &s->px[p];

	while (px->qlen > 0 && px->inflight < limit_of(s, p) && batch_ready(s, p, t)) {
		int qi = new_query(s);
		struct bq *q = &s->q[qi];
		double lat;

		q->proxy = p;
		q->start = t;
		q->nmembers = 0;
		q->ids = 0;
		do {
			q->members[q->nmembers++] = queue_take(px, c->clients);
			q->ids += c->ids;
		} while (c->batching && px->qlen > 0 && q->ids + c->ids <= c->batch_max_ids);
		if (px->qlen > 0)
			px->first_queued = t; /* (the rest's oldest, roughly) */
		px->inflight++;
		px->inflight_ids += q->ids;
		s->backend_inflight++;
		lat = curve_latency_s(curve_at(s, t), q->ids, s->backend_inflight);
		if (c->noise > 0)
			lat *= exp(c->noise * normal(s));
		push(s, t + lat + c->rtt_us / 1e6, EV_REPLY, qi);
	}
}

static bool measured(const struct sim *s, double t)
{
	return t >= s->cfg->warm_s && t < s->cfg->warm_s + s->cfg->measure_s;
}

static void on_send(struct sim *s, int client, double t)
{
	int p = client % s->cfg->proxies;
	struct sproxy *px = &s->px[p];

	s->issued[client] = t;
	if (px->qlen == 0)
		px->first_queued = t;
	px->queue[(px->qhead + px->qlen) % s->cfg->clients] = client;
	px->qlen++;
	dispatch(s, p, t);
}

static void record(struct sim *s, double v)
{
	if (s->nlat == s->caplat) {
		s->caplat = s->caplat ? 2 * s->caplat : 4096;
		s->lat = realloc(s->lat, (size_t)s->caplat * sizeof(double));
		if (!s->lat)
			abort();
	}
	s->lat[s->nlat++] = v;
}

/* A client's think time: fixed, or exponential around it (think_exp). */
static double think_s(struct sim *s)
{
	double u;

	if (!s->cfg->think_exp)
		return s->cfg->think_us / 1e6;
	u = uniform(s);
	return -log(u > 1e-12 ? u : 1e-12) * s->cfg->think_us / 1e6;
}

static void on_reply(struct sim *s, int qi, double t)
{
	struct bq *q = &s->q[qi];
	struct sproxy *px = &s->px[q->proxy];
	int p = q->proxy;

	px->inflight--;
	px->inflight_ids -= q->ids;
	s->backend_inflight--;
	if (!s->cfg->fixed_limit)
		limit_sample(&px->limit, (uint64_t)((t + p * s->cfg->clock_skew_s) * 1e6) + 1000000,
			     (uint64_t)((t - q->start) * 1e6), q->ids, false, px->inflight);
	for (int i = 0; i < q->nmembers; i++) {
		int cl = q->members[i];

		s->completed++;
		if (measured(s, t)) {
			record(s, (t - s->issued[cl]) * 1e3);
			s->done[p]++;
			s->lookups += s->cfg->ids;
		}
		push(s, t + think_s(s), EV_SEND, cl);
	}
	if (measured(s, t)) {
		s->backend_queries++;
		s->backend_ids += q->ids;
	}
	q->next_free = s->free_q;
	s->free_q = qi;
	dispatch(s, p, t);
}

static void on_trace(struct sim *s, double t)
{
	double qps = (s->completed - s->trace_done) / s->cfg->trace_every_s;

	s->trace_done = s->completed;
	if (s->cfg->trace)
		s->cfg->trace(s->cfg->trace_arg, t, limit_of(s, 0), s->px[0].inflight, qps);
	if (s->cfg->trace_proxy)
		for (int p = 0; p < s->cfg->proxies; p++)
			s->cfg->trace_proxy(s->cfg->trace_arg, t, p, &s->px[p].limit,
					    s->px[p].inflight);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void lsim_defaults(struct lsim_cfg *cfg, const struct curve *curve)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->curve = curve;
	cfg->clients = 100;
	cfg->proxies = 1;
	cfg->ids = 1;
	cfg->think_us = 100;
	cfg->think_exp = true;
	cfg->seed = 1;
	cfg->tolerance = 2.0;
	cfg->min_limit = 3;
	cfg->ceiling = 100;
	cfg->batch_max_ids = 100;
	cfg->warm_s = 5;
	cfg->measure_s = 20;
}

static bool check(const struct lsim_cfg *c, char *err, int errlen)
{
	const char *why = NULL;

	if (!c->curve || c->curve->ncols == 0)
		why = "no curve";
	else if (c->clients < 1 || c->clients > 100000)
		why = "clients: 1 to 100000";
	else if (c->proxies < 1 || c->proxies > LSIM_MAX_PROXIES)
		why = "proxies: 1 to 4";
	else if (c->ids < 1 || c->ids > 1000 || c->batch_max_ids < c->ids)
		why = "ids: 1 to 1000, at most batch_max_ids";
	else if (c->measure_s <= 0 || c->warm_s < 0 || c->think_us < 0 || c->rtt_us < 0 ||
		 c->stagger_s < 0 || c->clock_skew_s < 0)
		why = "negative or empty span";
	if (why)
		snprintf(err, (size_t)errlen, "%s", why);
	return why == NULL;
}

static void finish(struct sim *s, struct lsim_result *out)
{
	const struct lsim_cfg *c = s->cfg;
	double total = 0;

	memset(out, 0, sizeof(*out));
	for (int p = 0; p < c->proxies; p++)
		total += s->done[p];
	out->qps = total / c->measure_s;
	out->lookups_s = s->lookups / c->measure_s;
	for (int p = 0; p < c->proxies; p++)
		out->share[p] = total > 0 ? s->done[p] / total : 0;
	out->mean_limit = s->limit_area / c->measure_s;
	out->ids_per_query = s->backend_queries > 0 ? s->backend_ids / s->backend_queries : 0;
	if (s->nlat > 0) {
		qsort(s->lat, (size_t)s->nlat, sizeof(double), cmp_double);
		out->p50_ms = s->lat[(s->nlat - 1) / 2];
		out->p99_ms = s->lat[(int)((s->nlat - 1) * 0.99)];
	}
}

static void sim_free(struct sim *s)
{
	for (int i = 0; i < s->nq; i++)
		free(s->q[i].members);
	free(s->q);
	free(s->heap);
	free(s->lat);
	free(s->issued);
	for (int p = 0; p < LSIM_MAX_PROXIES; p++)
		free(s->px[p].queue);
}

bool lsim_run(const struct lsim_cfg *c, struct lsim_result *out, char *err, int errlen)
{
	struct sim s;
	double end;

	if (!check(c, err, errlen))
		return false;
	memset(&s, 0, sizeof(s));
	s.cfg = c;
	s.free_q = -1;
	s.rng = c->seed ? c->seed : 1;
	s.issued = calloc((size_t)c->clients, sizeof(double));
	for (int p = 0; p < c->proxies; p++) {
		s.px[p].queue = calloc((size_t)c->clients, sizeof(int));
		climit_init(&s.px[p].limit, c->tolerance, c->min_limit, c->ceiling, c->min_limit,
			    5000000);
	}
	/* clients start 10 µs apart, as threads do (each proxy's stagger later) */
	for (int i = 0; i < c->clients; i++)
		push(&s, i * 10e-6 + (i % c->proxies) * c->stagger_s, EV_SEND, i);
	if ((c->trace || c->trace_proxy) && c->trace_every_s > 0)
		push(&s, c->trace_every_s, EV_TRACE, 0);
	end = c->warm_s + c->measure_s;
	s.last_t = 0;
	while (s.nheap > 0) {
		struct ev e = pop(&s);

		if (e.t >= end)
			break;
		if (measured(&s, e.t))
			s.limit_area +=
			    limit_of(&s, 0) * (e.t - (s.last_t > c->warm_s ? s.last_t : c->warm_s));
		s.last_t = e.t;
		if (e.kind == EV_SEND)
			on_send(&s, e.idx, e.t);
		else if (e.kind == EV_REPLY)
			on_reply(&s, e.idx, e.t);
		else if (e.kind == EV_KICK) {
			s.px[e.idx].kick_pending = false;
			dispatch(&s, e.idx, e.t);
		} else {
			on_trace(&s, e.t);
			push(&s, e.t + c->trace_every_s, EV_TRACE, 0);
		}
	}
	finish(&s, out);
	sim_free(&s);
	return true;
}

int lsim_best_fixed(const struct lsim_cfg *cfg, const int *sizes, int n, struct lsim_result *best,
		    struct lsim_result *each)
{
	struct lsim_cfg c = *cfg;
	int bi = -1;
	char err[128];

	for (int i = 0; i < n; i++) {
		struct lsim_result r;

		c.fixed_limit = sizes[i];
		if (!lsim_run(&c, &r, err, sizeof err))
			continue;
		if (each)
			each[i] = r;
		if (bi < 0 || r.qps > best->qps) {
			bi = i;
			*best = r;
		}
	}
	return bi;
}
