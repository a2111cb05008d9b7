/*
 * select.c — replica-set routing by read preference, transaction pins, the
 * queue of requests waiting for a member (see select.h for the rules).
 */
#include "pool/select.h"

#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/request.h"
#include "core/stats.h"
#include "pool/batch.h"
#include "pool/pool.h"
#include "pool/pool_pause.h"
#include "pool/readpref.h"
#include "pool/route.h"
#include "pool/topology.h"
#include "pool/pool_ops.h"

/* The transaction pin table: (lsid, txnNumber) -> member. Bounded; the
 * oldest entry is reused (a session runs one transaction at a time). */
#define PIN_SLOTS 1024
struct txn_route {
	uint8_t lsid[16];
	int64_t txn_number;
	struct pool *pool;
	uint64_t used_usec;
	bool in_use;
};
static struct txn_route pins[PIN_SLOTS];

static uint64_t selection_limit_usec(void);
static uint64_t member_wait_limit(const struct waitq *w);
static void fail_selection(struct request *req);

static const struct waitq_ops member_wait_ops = {
    .kind = WAITQ_SELECT,
    .limit_usec = selection_limit_usec,
    .limit_for = member_wait_limit,
    .expired = fail_selection,
};

/* Requests waiting for a member (REQ_QUEUED, counted in max_queue). */
static struct waitq member_wait = WAITQ_INITIALIZER(member_wait, &member_wait_ops);

int select_waiting_count(void)
{
	return waitq_count(&member_wait);
}

/* ---- reading the command (req->session, parsed by the router) ---- */

static int pin_find(const uint8_t lsid[16], int64_t txn)
{
	for (int i = 0; i < PIN_SLOTS; i++)
		if (pins[i].in_use && pins[i].txn_number == txn &&
		    memcmp(pins[i].lsid, lsid, 16) == 0)
			return i;
	return -1;
}

static int pin_new(const uint8_t lsid[16], int64_t txn)
{
	int best = 0;

	for (int i = 0; i < PIN_SLOTS; i++) {
		if (pins[i].in_use && memcmp(pins[i].lsid, lsid, 16) == 0)
			pins[i].in_use = false; /* the session's previous transaction */
		if (!pins[i].in_use || pins[i].used_usec < pins[best].used_usec)
			best = pins[i].in_use && !pins[best].in_use ? best : i;
	}
	memset(&pins[best], 0, sizeof(pins[best]));
	memcpy(pins[best].lsid, lsid, 16);
	pins[best].txn_number = txn;
	pins[best].in_use = true;
	pins[best].used_usec = g.now_usec;
	return best;
}

static void note_txn(struct request *req)
{
	const struct req_session *ss = &req->route->session;
	int slot;

	if (!ss->has_lsid_uuid || !ss->txn_numeric)
		return;
	slot = pin_find(ss->lsid_uuid, ss->txn_number);
	if (slot < 0)
		slot = pin_new(ss->lsid_uuid, ss->txn_number);
	pins[slot].used_usec = g.now_usec;
	req->route->txn_pin = slot + 1;
	if (pins[slot].pool != NULL)
		req->route->route_pool = pins[slot].pool;
}

void select_note(struct request *req, bool in_txn)
{
	const struct req_session *ss = &req->route->session;

	if (!topology_active())
		return;
	if (in_txn)
		note_txn(req);
	if (ss->read_pref_doc != NULL) { /* copied: the body goes away */
		req->route->read_pref = bson_new_from_data(ss->read_pref_doc, ss->read_pref_len);
		if (req->route->read_pref != NULL) {
			struct readpref rp;
			const char *why;

			if (!readpref_parse(req->route->read_pref, &rp, &why))
				log_debug(
				    "invalid $readPreference (%s): sent to the primary, which "
				    "answers it",
				    why);
			if (rp.mode == READPREF_PRIMARY) { /* the default: nothing to keep */
				bson_destroy(req->route->read_pref);
				req->route->read_pref = NULL;
			}
		}
	}
}

/* ---- choosing ---- */

static enum topo_type type_now(const struct pool *p)
{
	if (!p->rs_present || p->member.last_update_usec <= p->suspect_usec)
		return TOPO_UNKNOWN;
	if (pool_live(p) == 0 && g.now_usec < p->next_connect_usec)
		return TOPO_UNKNOWN; /* backing off after a failed connect */
	return p->member.type;
}

static struct pool *primary(void)
{
	for (int i = 0; i < pool_count(); i++)
		if (type_now(pool_at(i)) == TOPO_PRIMARY)
			return pool_at(i);
	return NULL;
}

static bool fresh_enough(const struct pool *p, const struct readpref *rp, const struct pool *prim)
{
	int64_t ref = 0;

	if (rp->max_staleness_s <= 0 || type_now(p) != TOPO_SECONDARY)
		return true;
	if (prim != NULL) {
		ref = prim->member.last_write_ms;
	} else {
		for (int i = 0; i < pool_count(); i++)
			if (type_now(pool_at(i)) == TOPO_SECONDARY &&
			    pool_at(i)->member.last_write_ms > ref)
				ref = pool_at(i)->member.last_write_ms;
	}
	return readpref_fresh_enough(rp, p->member.last_write_ms, ref, topology_heartbeat_ms());
}

static int64_t rtt_of(const struct pool *p)
{
	return p->member.rtt_usec < 0 ? 0 : p->member.rtt_usec;
}

static int load_of(const struct pool *p)
{
	return p->n_active + p->n_connecting + waitq_count(&p->waiting);
}

/* Within localThresholdMS of the nearest candidate, the least loaded. */
static struct pool *pick(struct pool **cand, int n)
{
	int64_t min_rtt = INT64_MAX, window;
	struct pool *best = NULL;

	for (int i = 0; i < n; i++)
		if (rtt_of(cand[i]) < min_rtt)
			min_rtt = rtt_of(cand[i]);
	window = min_rtt + topology_local_threshold_ms() * 1000;
	for (int i = 0; i < n; i++) {
		if (rtt_of(cand[i]) > window)
			continue;
		if (best == NULL || load_of(cand[i]) < load_of(best) ||
		    (load_of(cand[i]) == load_of(best) && rtt_of(cand[i]) < rtt_of(best)))
			best = cand[i];
	}
	return best;
}

/* Members of the wanted types, fresh enough, in the first tag set that
 * matches any of them. */
static int candidates(const struct readpref *rp, bool want_primary, bool want_secondary,
		      struct pool **out)
{
	struct pool *prim = primary();
	bson_iter_t sets;
	bool more_sets = true;

	if (rp->has_tags && !readpref_tag_sets(rp, &sets))
		return 0;

	while (more_sets) {
		bool tagged = rp->has_tags && want_secondary;
		bson_iter_t set;
		int n = 0;

		if (tagged) {
			if (!readpref_next_tag_set(&sets))
				return 0;
			set = sets;
		} else {
			more_sets = false;
		}
		for (int i = 0; i < pool_count(); i++) {
			struct pool *p = pool_at(i);
			enum topo_type t = type_now(p);

			if (!((want_primary && t == TOPO_PRIMARY) ||
			      (want_secondary && t == TOPO_SECONDARY)))
				continue;
			if (t == TOPO_SECONDARY &&
			    (!fresh_enough(p, rp, prim) ||
			     (tagged &&
			      !readpref_tags_match(p->member.tags, p->member.tags_len, &set))))
				continue;
			out[n++] = p;
		}
		if (n > 0 || !tagged)
			return n;
	}
	return 0;
}

/* A sharded cluster (mongodb+srv:// naming mongoses): every mongos serves
 * every request (it applies the $readPreference itself). */
static int mongoses(struct pool **out)
{
	int n = 0;

	for (int i = 0; i < pool_count(); i++)
		if (type_now(pool_at(i)) == TOPO_MONGOS)
			out[n++] = pool_at(i);
	return n;
}

static struct pool *choose(const struct readpref *rp)
{
	struct pool *cand[TOPO_MAX_MEMBERS * 2];
	struct pool *prim = primary();
	int n;

	if (prim == NULL && (n = mongoses(cand)) > 0)
		return pick(cand, n);
	switch (rp->mode) {
	case READPREF_PRIMARY:
		return prim;
	case READPREF_PRIMARY_PREFERRED:
		if (prim != NULL)
			return prim;
		n = candidates(rp, false, true, cand);
		return n ? pick(cand, n) : NULL;
	case READPREF_SECONDARY:
		n = candidates(rp, false, true, cand);
		return n ? pick(cand, n) : NULL;
	case READPREF_SECONDARY_PREFERRED:
		n = candidates(rp, false, true, cand);
		return n ? pick(cand, n) : prim;
	case READPREF_NEAREST:
		n = candidates(rp, true, true, cand);
		return n ? pick(cand, n) : NULL;
	}
	return NULL;
}

struct pool *select_pool(struct request *req)
{
	struct readpref rp;
	struct pool *p;

	if (req->route->route_pool != NULL)
		return req->route->route_pool;
	const char *why;

	readpref_parse(req->route->read_pref, &rp, &why);
	p = choose(&rp);
	if (p != NULL && req->route->txn_pin > 0 && pins[req->route->txn_pin - 1].pool == NULL)
		pins[req->route->txn_pin - 1].pool = p; /* the transaction's first command */
	return p;
}

/* ---- waiting for a member ---- */

static void wait_queue(struct request *req, uint64_t since)
{
	req->enqueued_usec = since;
	waitq_add(&member_wait, req);
}

void select_wait(struct request *req)
{
	STAT_INC(rs_waited_for_member);
	wait_queue(req, g.now_usec);
	topology_recheck("no member can serve a request");
}

/* Still no member: back on the queue, its wait counted from the start. */
static void retry_one(struct request *req, void *arg)
{
	(void)arg;
	if (select_pool(req) == NULL)
		wait_queue(req, req->enqueued_usec);
	else
		pool_ops->submit(req);
}

void select_retry_waiting(void)
{
	struct request_queue again = {TAILQ_HEAD_INITIALIZER(again.list), 0};

	waitq_take_all(&member_wait, &again);
	waitq_resubmit(&again, retry_one, NULL);
}

void select_on_topology(void)
{
	pool_ops->sync_members(topology_snapshot());
	select_retry_waiting();
}

/* While every pool is paused (pool/pool_pause.h): the larger of the two. */
static uint64_t member_wait_limit(const struct waitq *w)
{
	uint64_t limit = selection_limit_usec(), paused = (uint64_t)g.cfg.pause_timeout_ms * 1000;

	(void)w;
	return pool_paused(NULL) && paused > limit ? paused : limit;
}

void select_pause_changed(void)
{
	waitq_restart_clocks(&member_wait);
}

static void fail_selection(struct request *req)
{
	static const char *const retry_write[] = {"RetryableWriteError", NULL};
	struct readpref rp;
	char msg[600];

	const char *why;

	if (pool_paused(NULL)) {
		pool_refuse_paused(req); /* never sent: safe to retry */
		return;
	}
	readpref_parse(req->route->read_pref, &rp, &why);
	STAT_INC(refused_no_member);
	snprintf(msg, sizeof(msg),
		 "mongoplex: no replica set member can serve read preference %s within %" PRId64
		 " ms (serverSelectionTimeoutMS / queue_timeout_ms)%s%s",
		 readpref_mode_name(rp.mode), (int64_t)((g.now_usec - req->enqueued_usec) / 1000),
		 topology_srv()->error[0] ? ": " : "", topology_srv()->error);
	req->ops->error(req, MP_ERR(FAILED_TO_SATISFY_READ_PREFERENCE), msg,
			req->retryable_write ? retry_write : NULL);
}

/* serverSelectionTimeoutMS, or queue_timeout_ms when that is shorter. */
static uint64_t selection_limit_usec(void)
{
	uint64_t limit = (uint64_t)topology_selection_timeout_ms() * 1000;

	if (g.cfg.queue_timeout_ms > 0 && (uint64_t)g.cfg.queue_timeout_ms * 1000 < limit)
		limit = (uint64_t)g.cfg.queue_timeout_ms * 1000;
	return limit;
}

/* ---- health of members ---- */

void select_suspect(struct pool *p, const char *why)
{
	if (!topology_active())
		return;
	STAT_INC(rs_suspects);
	p->suspect_usec = bson_get_monotonic_time();
	log_warning("replica set member %s is suspect (%s): not selected until rechecked", p->name,
		    why);
	topology_recheck(why);
}

static bool not_primary_code(int32_t code)
{
	static const int32_t codes[] = {10107, 13435, 13436, 11600, 11602, 189, 91};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i] == code)
			return true;
	return false;
}

void select_on_reply(struct pool *p, const bson_t *body)
{
	bson_iter_t it;

	if (!topology_active() || !bson_iter_init_find(&it, body, "ok") ||
	    bson_iter_as_double(&it) != 0.0)
		return;
	if (bson_iter_init_find(&it, body, "code") && BSON_ITER_HOLDS_NUMBER(&it) &&
	    not_primary_code((int32_t)bson_iter_as_int64(&it)))
		select_suspect(p, "it answered \"not primary\"");
}

bool select_any_usable(void)
{
	for (int i = 0; i < pool_count(); i++) {
		enum topo_type t = type_now(pool_at(i));

		if (t == TOPO_PRIMARY || t == TOPO_SECONDARY || t == TOPO_MONGOS)
			return true;
	}
	return false;
}
