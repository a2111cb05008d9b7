/*
 * pool_dispatch.c — the fair wait queue and the hand-over of requests to
 * backend servers: submit, enqueue, dispatch, the next waiter for a server
 * that became idle, connections opened for waiters, and the janitor's
 * queue, connect, query and idle expiry.
 *
 * Fair queuing: a request gets round max(pool->round, R)+1, R the highest
 * round of its client's requests still waiting in this pool, and is
 * inserted after every request of a lower or equal round. Each client
 * therefore has at most one request per round and a client that pipelines
 * or floods only delays itself: service is round-robin across clients.
 * (A request dispatched from the queue raised pool->round to its own round,
 * so only the waiting ones can be ahead of it.)
 */
#include "pool/pool.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/stats.h"
#include "pool/gate.h"
#include "pool/pin.h"
#include "pool/pool_int.h"
#include "pool/pool_pause.h"
#include "pool/pool_users.h"
#include "pool/route.h"
#include "pool/select.h"
#include "pool/sticky.h"

/* Open connections for waiting requests that no connecting server covers
 * (step: GATE_CONNECT, or GATE_REFILL from the janitor). */
void pool_connect_for_waiters_at(struct pool *p, enum gate_step step)
{
	int want = waitq_count(&p->waiting);

	if (p->addrlen == 0)
		return; /* the unresolved mongodb+srv:// placeholder */
	if (want == 0 && p->hello_waiters.n > 0 && pool_live(p) == 0)
		want = 1;
	if ((p->last_code == 18 || p->tls_failed) && want > 1)
		want = 1; /* credentials or TLS failed: one probe per backoff step */
	while (want > p->n_connecting && pool_gate(step, p, NULL, NULL)) {
		if (!server_connect(p))
			return;
		pool_cap_note_peak();
	}
}

void pool_connect_for_waiters(struct pool *p)
{
	pool_connect_for_waiters_at(p, GATE_CONNECT);
}

/* The highest round among req's owner's requests waiting in p's queue. */
static uint64_t owner_round(const struct pool *p, const struct request *req)
{
	const struct request *r;
	uint64_t max = 0;

	if (req->owner == NULL || req->owner->n_state[REQ_QUEUED] == 0)
		return 0;
	TAILQ_FOREACH(r, &req->owner->requests, client_link)
		if (r->route->waitq == &p->waiting && r->route->round > max)
			max = r->route->round;
	return max;
}

static void enqueue(struct pool *p, struct request *req)
{
	uint64_t r = p->round, mine = owner_round(p, req);
	struct request *after;

	if (mine > r)
		r = mine;
	req->route->round = r + 1;
	after = TAILQ_LAST(&p->waiting.q.list, request_list);
	while (after != NULL && after->route->round > req->route->round)
		after = TAILQ_PREV(after, request_list, queue_link);
	waitq_add_after(&p->waiting, req, after);
	req->route->pool = p;
	req->enqueued_usec = g.now_usec;
}

void pool_unqueue(struct request *req)
{
	if (!request_waiting(req))
		return;
	if (req->route->waitq != NULL)
		waitq_unqueue(req);
	else
		request_set_state(req, REQ_NEW, NULL); /* REQ_HELLO_WAIT */
}

static void dispatch(struct server *s, struct request *req)
{
	struct pool *p = s->pool;

	if (request_waiting(req)) {
		pool_unqueue(req);
		hist_observe(&hist_queue_wait_ms,
			     (double)(g.now_usec - req->enqueued_usec) / 1000.0);
		if (req->route->round > p->round)
			p->round = req->route->round;
	}
	p->requests_dispatched++;
	if (req->ops->start != NULL)
		req->ops->start(req); /* the client's memory charge ends; a batch is sealed */
	server_start(s, req);
	pin_started(s, req);
	sticky_started(s, req);
}

void pool_dispatch(struct server *s, struct request *req)
{
	dispatch(s, req);
}

/*
 * May `req` go to a backend now (pool_gate, GATE_DISPATCH)? Requests the
 * gate holds back keep their place in the queue and are skipped;
 * pool_owner_kick runs them when their client drains.
 */
static bool may_dispatch(const struct request *req)
{
	return pool_gate(GATE_DISPATCH, req->route->pool, req, NULL);
}

static struct request *first_dispatchable(struct pool *p)
{
	struct request *req;

	if (!pool_gate_room(p))
		return NULL; /* the pool's own terms: no request may go */
	TAILQ_FOREACH(req, &p->waiting.q.list, queue_link)
		if (may_dispatch(req))
			return req;
	return NULL;
}

void pool_owner_kick(struct request_owner *o)
{
	struct request *req;
	struct server *s;

	pin_owner_kick(o);
	for (;;) {
		if (o->n_state[REQ_QUEUED] == 0)
			return;
		TAILQ_FOREACH(req, &o->requests, client_link)
			if (waitq_is(req, WAITQ_POOL))
				break;
		if (req == NULL || !may_dispatch(req) ||
		    (s = TAILQ_FIRST(&req->route->pool->idle)) == NULL)
			return;
		dispatch(s, req);
	}
}

static void refuse_overload(struct request *req, const char *msg)
{
	req->ops->error(req, MP_ERR(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED), msg,
			MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED));
}

void pool_refuse_timeout(struct request *req)
{
	char msg[200];

	STAT_INC(refused_queue_timeout);
	snprintf(msg, sizeof(msg),
		 "mongoplex: request waited more than queue_timeout_ms = %" PRId64
		 " ms for a backend connection; retry later",
		 g.cfg.queue_timeout_ms);
	refuse_overload(req, msg);
}

static void refuse_queue_full(struct request *req)
{
	char msg[200];

	STAT_INC(refused_queue_full);
	snprintf(msg, sizeof(msg),
		 "mongoplex: too many requests waiting for a backend connection "
		 "(max_queue = %" PRId64 "); retry later",
		 g.cfg.max_queue);
	refuse_overload(req, msg);
}

void pool_submit(struct request *req)
{
	struct pool *p = topology_active() ? select_pool(req) : pool_target();
	struct server *s;
	struct server *sticky = sticky_target(req);

	if (req->route->pin_note != NULL && (req->route->pin != NULL || p != NULL) &&
	    pin_submit(req, p))
		return;	 /* load-balanced: runs on (or waits for) a pinned connection */
	if (p == NULL) { /* replica set: no member for it yet */
		if (request_count(REQ_QUEUED) >= g.cfg.max_queue)
			refuse_queue_full(req);
		else
			select_wait(req);
		return;
	}
	if (p->member.type == TOPO_SECONDARY && topology_active())
		STAT_INC(rs_secondary_routed);
	if (req->route->user != NULL) /* per_user: the user's own pool under that member */
		p = pool_users_pool(p, req->route->user);
	s = TAILQ_FIRST(&p->idle);
	req->route->pool = p;
	if (sticky == NULL && s != NULL && may_dispatch(req)) {
		dispatch(s, req);
		return;
	}
	if (request_count(REQ_QUEUED) >= g.cfg.max_queue) {
		refuse_queue_full(req);
		return;
	}
	if (sticky != NULL) {
		sticky_enqueue(sticky, req);
		return;
	}
	if (pool_live(p) == 0 && g.now_usec < p->next_connect_usec && !pool_paused(p)) {
		pool_fail_unreachable(p, req, p->last_error);
		return;
	}
	enqueue(p, req);
	pool_connect_for_waiters(p);
}

/* A connection went idle while requests wait that the gate held back (a
 * merged batch short of its share, batch_hold_us): one timer for the whole
 * process looks at such pools again batch_hold_us later, so a held batch
 * goes at the latest about twice its hold after it opened even when nothing
 * else happens on its pool (joins and completions look at it sooner). */
static struct event *recheck_ev;

static void recheck_one(struct pool *p, void *arg)
{
	(void)arg;
	if (!p->recheck)
		return;
	p->recheck = false;
	pool_fill_idle(p);
}

static void recheck_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	pool_users_foreach(recheck_one, NULL);
	for (int i = 0; i < pool_count(); i++)
		recheck_one(pool_at(i), NULL);
}

static void recheck_arm(struct pool *p)
{
	struct timeval tv = {0, (suseconds_t)g.cfg.batch_hold_us};

	if (g.cfg.batch_hold_us == 0)
		return;
	p->recheck = true;
	if (recheck_ev == NULL)
		recheck_ev = evtimer_new(g.base, recheck_cb, NULL);
	if (recheck_ev != NULL && !evtimer_pending(recheck_ev, NULL))
		evtimer_add(recheck_ev, &tv);
}

void pool_server_idle(struct server *s)
{
	struct pool *p = s->pool;
	struct request *req = first_dispatchable(p);

	if (s->state == SV_JUSTFREE)
		return;
	/* Surplus after a shrink: retired now, even with requests waiting (the
	 * remaining connections serve them); max_backend_conn may hand it over. */
	if (!pool_gate(GATE_TAKE_NEXT, p, NULL, s))
		return;
	if (req == NULL) {
		server_set_state(s, SV_IDLE);
		s->idle_since_usec = g.now_usec;
		if (waitq_count(&p->waiting) > 0)
			recheck_arm(p);
		return;
	}
	dispatch(s, req);
	if (g.cfg.adaptive_concurrency)
		pool_fill_idle(p); /* the limit may have risen by more than one */
}

void pool_fill_idle(struct pool *p)
{
	struct server *s;
	struct request *req;

	while ((s = TAILQ_FIRST(&p->idle)) != NULL && (req = first_dispatchable(p)) != NULL)
		dispatch(s, req);
}

/* Probe at most every 5 s (pool/limit.h): about 1 % of the time below the
 * limit, soon enough to follow a backend that got slower within 20 s. */
#define LIMIT_PROBE_USEC 5000000ULL

void pool_limit_begin(struct server *s, const struct request *req)
{
	if (req->more_to_come)
		return; /* no reply, no round trip */
	s->in_limit = true;
	s->limit_ids = req->route->ids; /* 0: not a lookup (pool/limit.h) */
	s->pool->inflight++;
	s->pool->inflight_ids += s->limit_ids;
}

/* The wall clock minus g.now_usec's monotonic clock: the limit's probes fall
 * on multiples of its interval in wall-clock time, so proxies on hosts with
 * synchronised clocks (and every worker) probe together (pool/limit.h). */
static int64_t wall_phase_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000) - (int64_t)g.now_usec;
}

void pool_limit_init(struct pool *p)
{
	int min = (int)g.cfg.adaptive_min_limit;

	climit_init(&p->limit, (double)g.cfg.adaptive_tolerance_pct / 100.0, min,
		    (int)g.cfg.pool_size, min, LIMIT_PROBE_USEC);
	p->limit.phase_usec = wall_phase_usec();
}

void pool_limit_end(struct server *s, bool dropped)
{
	struct pool *p = s->pool;

	if (!s->in_limit)
		return;
	s->in_limit = false;
	p->inflight--;
	p->inflight_ids -= s->limit_ids;
	if (!g.cfg.adaptive_concurrency)
		return;
	climit_configure(&p->limit, (double)g.cfg.adaptive_tolerance_pct / 100.0,
			 (int)g.cfg.adaptive_min_limit, (int)g.cfg.pool_size);
	if (p->limit.probing)
		p->limit.phase_usec = wall_phase_usec(); /* follows NTP's slewing */
	limit_sample(&p->limit, g.now_usec, g.now_usec - s->exchange_started_usec, s->limit_ids,
		     dropped, p->inflight);
}

uint64_t pool_queue_limit_usec(void)
{
	return (uint64_t)g.cfg.queue_timeout_ms * 1000;
}

static uint64_t pool_waitq_limit(const struct waitq *w)
{
	const struct pool *p =
	    (const struct pool *)((const char *)w - offsetof(struct pool, waiting));

	return pool_pause_limit_usec(p);
}

static void pool_waiter_expired(struct request *req)
{
	if (req->route->pool != NULL && pool_paused(req->route->pool))
		pool_refuse_paused(req);
	else if (pin_blocked(req))
		pin_refuse_timeout(req); /* load-balanced: no pin came free */
	else
		pool_refuse_timeout(req);
}

/* A request skipped because its own client does not read its replies: the
 * client is the cause, so its wait counts from when it drains. */
const struct waitq_ops pool_waitq_ops = {
    .kind = WAITQ_POOL,
    .limit_usec = pool_queue_limit_usec,
    .limit_for = pool_waitq_limit,
    .owner_clock = true,
    .expired = pool_waiter_expired,
};

static void expire_servers(struct pool *p, uint64_t now)
{
	uint64_t connect_limit = (uint64_t)g.cfg.connect_timeout_ms * 1000;
	uint64_t query_limit = (uint64_t)g.cfg.query_timeout_ms * 1000;
	uint64_t idle_limit = (uint64_t)g.cfg.server_idle_timeout_ms * 1000;
	struct server *s, *tmp;

	TAILQ_FOREACH_SAFE(s, &p->connecting, link, tmp)
		if (now - s->created_usec > connect_limit)
			server_close(s, MP_ERR(NETWORK_TIMEOUT),
				     "connect/handshake timed out after %" PRId64 " ms",
				     g.cfg.connect_timeout_ms);
	if (query_limit)
		TAILQ_FOREACH_SAFE(s, &p->active, link, tmp)
			if ((s->pin == NULL || s->req != NULL) &&
			    now - s->exchange_started_usec > query_limit) {
				STAT_INC(query_timeouts);
				server_close(
				    s, MP_ERR(NETWORK_TIMEOUT),
				    "backend did not answer within query_timeout_ms = %" PRId64
				    " ms",
				    g.cfg.query_timeout_ms);
			}
	TAILQ_FOREACH_SAFE(s, &p->idle, link, tmp) {
		/* A user's pool keeps no minimum: it empties and is freed. */
		int64_t keep = p->parent != NULL ? 0 : g.cfg.min_pool_size;

		if (!pool_gate(GATE_KEEP, p, NULL, s))
			continue; /* closed: the pool shrank */
		if (idle_limit && now - s->idle_since_usec > idle_limit && pool_live(p) > keep)
			server_close(s, MP_ERR(HOST_UNREACHABLE),
				     "idle for more than server_idle_timeout_ms");
	}
}

/* The janitor's work on a per-user pool (no min_pool_size there). */
static void janitor_user_pool(struct pool *p, void *arg)
{
	uint64_t now = *(const uint64_t *)arg;

	expire_servers(p, now);
}

static void janitor_user_connect(struct pool *p, void *arg)
{
	(void)arg;
	pool_fill_idle(p);
	pool_connect_for_waiters_at(p, GATE_REFILL);
}

void pool_janitor(uint64_t now)
{
	pool_users_foreach(janitor_user_pool, &now);
	for (int i = 0; i < pool_count(); i++)
		expire_servers(pool_at(i), now);
	waitq_expire_all(now); /* every wait: pools, sticky, member selection, pins */
	pool_users_foreach(janitor_user_connect, NULL);
	pool_users_sweep();
	pin_janitor(now);
	pool_pause_janitor();
	for (int i = 0; i < pool_count(); i++) {
		struct pool *p = pool_at(i);

		while (pool_gate(GATE_MINIMUM, p, NULL, NULL)) {
			if (!server_connect(p))
				break;
			pool_cap_note_peak();
		}
		pool_fill_idle(p);
		pool_connect_for_waiters_at(p, GATE_REFILL);
	}
}
