/*
 * stats_report.c — the whole picture rendered as BSON (the mongoplexStats
 * admin command) and as Prometheus text (/metrics): the counters and
 * histograms of core/stats.h plus gauges read from every layer at read time.
 * Both renderings come from the one MP_COUNTERS declaration and the same
 * gauge table.
 */
#include "proxy/awaithello.h"
#include "proxy/stats_report.h"

#include <stdio.h>

#include "pool/batch.h"
#include "pool/gate.h"
#include "pool/pool.h"
#include "pool/pin.h"
#include "pool/pool_users.h"
#include "pool/sticky.h"
#include "proxy/cauth_query.h"
#include "proxy/client.h"
#include "proxy/cursor.h"
#include "proxy/cursor_table.h"
#include "proxy/membound.h"
#include "core/stats.h"
#include "core/wstats.h"
#include "proxy/stats_workers.h"
#include "proxy/proxy.h"
#include "version.h"

static struct hist *const hists[] = {&hist_queue_wait_ms, &hist_batch_ids, &hist_batch_wait_ms};
#define NHISTS (sizeof(hists) / sizeof(hists[0]))

/* Gauges computed from list counts at read time. */
struct gauges {
	int clients, clients_idle, clients_waiting, clients_running;
	int servers_connecting, servers_idle, servers_active, requests_waiting;
	int lookups_batching;
	int cursors_open;
	int64_t bytes_buffered;
	int memory_paused, clients_memory_paused, clients_pinned_unacked;
	int hellos_held;
	int lb_pinned_connections;
	int clients_unauthenticated, auth_query_cache_entries, auth_query_inflight;
};

static void gauges_read(struct gauges *gs)
{
	client_phase_counts(&gs->clients_idle, &gs->clients_waiting, &gs->clients_running);
	gs->clients = client_count();
	gs->servers_connecting = gs->servers_idle = gs->servers_active = 0;
	for (int i = 0; i < pool_count(); i++) {
		struct pool *p = pool_at(i);

		gs->servers_connecting += p->n_connecting;
		gs->servers_idle += p->n_idle;
		gs->servers_active += p->n_active;
	}
	gs->requests_waiting = pool_total_waiting();
	gs->lookups_batching = batch_open_lookups();
	gs->cursors_open = cursor_open_count();
	gs->bytes_buffered = membound_bytes();
	gs->memory_paused = membound_paused();
	gs->clients_memory_paused = client_count_memory_paused();
	gs->clients_pinned_unacked = sticky_clients();
	gs->hellos_held = awaithello_held_count();
	gs->lb_pinned_connections = pin_count();
	gs->clients_unauthenticated = client_count_unauthenticated();
	gs->auth_query_cache_entries = cq_cache_entries();
	gs->auth_query_inflight = cq_inflight();
}

#define MP_GAUGES(X)                                                                               \
	X(clients, "Client connections open")                                                      \
	X(clients_idle, "Clients with no request in flight")                                       \
	X(clients_waiting, "Clients whose requests wait for a backend connection")                 \
	X(clients_running, "Clients with a request running on a backend")                          \
	X(servers_connecting, "Backend connections being established")                             \
	X(servers_idle, "Backend connections idle in the pool")                                    \
	X(servers_active, "Backend connections running a request")                                 \
	X(requests_waiting, "Requests waiting for a backend connection")                           \
	X(lookups_batching, "Lookups waiting in a batch that still accepts members")               \
	X(cursors_open, "Backend cursors open, by owning client (the cursor table)")               \
	X(bytes_buffered, "Bytes buffered for clients (input, parsed requests, unsent replies)")   \
	X(memory_paused,                                                                           \
	  "1 while max_buffer_bytes is reached (clients above their share not read)")              \
	X(clients_memory_paused, "Clients not read because of a memory bound (own or global)")     \
	X(clients_pinned_unacked, "Clients whose requests follow their unacknowledged write")      \
	X(hellos_held, "Awaitable hellos held until a topology change or maxAwaitTimeMS")          \
	X(lb_pinned_connections, "Backend connections pinned to load-balanced "                    \
				 "cursors/transactions")                                           \
	X(clients_unauthenticated, "Client connections not logged in (auth_mode = scram)")         \
	X(auth_query_cache_entries, "auth_query cache entries, lookups in progress included")      \
	X(auth_query_inflight, "auth_query lookups sent to the backend and not answered yet")

enum {
#define X(name, help) GAUGE_##name,
	MP_GAUGES(X)
#undef X
	    NGAUGES
};
_Static_assert(NGAUGES <= WSTATS_GAUGES, "core/wstats.h: WSTATS_GAUGES too small");
_Static_assert(NHISTS <= WSTATS_HISTS, "core/wstats.h: WSTATS_HISTS too small");

/* workers > 1: this worker's gauges and histograms into its slot. */
static void pools_part(bson_t *out);

void stats_publish(void)
{
	struct gauges gs;
	struct wslot *w;
	bson_t rows;

	if (wstats_count() == 0)
		return;
	w = wstats_slot(g.worker_id);
	gauges_read(&gs);
#define X(name, help) w->gauges[GAUGE_##name] = (int64_t)gs.name;
	MP_GAUGES(X)
#undef X
	for (size_t i = 0; i < NHISTS; i++) {
		memcpy(w->hists[i].buckets, hists[i]->buckets, sizeof(w->hists[i].buckets));
		w->hists[i].count = hists[i]->count;
		w->hists[i].sum = hists[i]->sum;
	}
	bson_init(&rows);
	pools_part(&rows);
	wstats_rows_put(&rows);
	bson_destroy(&rows);
}

/* The whole proxy's gauges: this process's, or with workers the sum of
 * every worker's slot (the others' as of their last tick). */
static void gauges_total(struct gauges *gs)
{
	int64_t v[NGAUGES] = {0};

	gauges_read(gs);
	if (wstats_count() == 0)
		return;
	stats_publish();
	for (int i = 0; i < wstats_count(); i++)
		for (int k = 0; k < NGAUGES; k++)
			v[k] += wstats_slot(i)->gauges[k];
#define X(name, help) gs->name = (__typeof__(gs->name))v[GAUGE_##name];
	MP_GAUGES(X)
#undef X
}

/* Histogram i of the whole proxy into out (names and bounds from ours). */
static const struct hist *hist_total(size_t i, struct hist *out)
{
	if (wstats_count() == 0)
		return hists[i];
	*out = *hists[i];
	memset(out->buckets, 0, sizeof(out->buckets));
	out->count = 0;
	out->sum = 0;
	for (int w = 0; w < wstats_count(); w++) {
		const struct whist *h = &wstats_slot(w)->hists[i];

		for (int b = 0; b <= out->nbounds; b++)
			out->buckets[b] += h->buckets[b];
		out->count += h->count;
		out->sum += h->sum;
	}
	return out;
}

static void hist_to_bson(bson_t *parent, const struct hist *h)
{
	bson_t doc, b;
	char key[32];

	BSON_APPEND_DOCUMENT_BEGIN(parent, h->name, &doc);
	BSON_APPEND_INT64(&doc, "count", (int64_t)h->count);
	BSON_APPEND_DOUBLE(&doc, "sum", h->sum);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "le", &b);
	for (int i = 0; i <= h->nbounds; i++) {
		if (i < h->nbounds)
			snprintf(key, sizeof(key), "%g", h->bounds[i]);
		else
			snprintf(key, sizeof(key), "+Inf");
		BSON_APPEND_INT64(&b, key, (int64_t)h->buckets[i]);
	}
	bson_append_document_end(&doc, &b);
	bson_append_document_end(parent, &doc);
}

/* A pool's member type: the monitor's (replica sets), else the kind its
 * last hello reported. */
const char *stats_member_type(const struct pool *p)
{
	return topology_active() ? topology_type_name(p->member.type)
				 : handshake_kind_name(p->info.kind);
}

/* Shown per member: every pool but the unresolved mongodb+srv:// placeholder. */
bool stats_pool_shown(const struct pool *p)
{
	return p->addrlen != 0;
}

/* adaptive_concurrency (pool/limit.h): the limit the gate applies now
 * (pool_size when off), its two terms (the latency term, the throughput
 * climber: the smaller is in force; 0 when off), its idle round-trip
 * estimate, what is in flight. */
static void limit_to_bson(bson_t *doc, const struct pool *p)
{
	BSON_APPEND_BOOL(doc, "adaptive", g.cfg.adaptive_concurrency);
	BSON_APPEND_INT32(doc, "limit", pool_gate_limit(p));
	BSON_APPEND_INT32(doc, "limitLatency",
			  g.cfg.adaptive_concurrency ? limit_gradient_value(&p->limit) : 0);
	BSON_APPEND_INT32(doc, "limitClimb",
			  g.cfg.adaptive_concurrency ? limit_climb_value(&p->limit) : 0);
	BSON_APPEND_INT64(doc, "minRttMicros", (int64_t)limit_min_rtt(&p->limit));
	BSON_APPEND_INT32(doc, "inflight", p->inflight);
	BSON_APPEND_INT32(doc, "inflightIds", p->inflight_ids);
	BSON_APPEND_INT64(doc, "limitProbes", (int64_t)p->limit.probes);
}

/* A per-user pool (auth_pool_mode = per_user), under its member. */
struct user_pools {
	bson_t *arr;
	int n;
};

static void user_pool_to_bson(struct pool *p, void *arg)
{
	struct user_pools *up = arg;
	bson_t doc;
	char key[16];
	const char *k;

	bson_uint32_to_string((uint32_t)up->n++, &k, key, sizeof(key));
	BSON_APPEND_DOCUMENT_BEGIN(up->arr, k, &doc);
	BSON_APPEND_UTF8(&doc, "member", p->parent->name);
	BSON_APPEND_UTF8(&doc, "db", pool_user_db(p->user));
	BSON_APPEND_UTF8(&doc, "user", pool_user_name(p->user));
	BSON_APPEND_INT32(&doc, "connecting", p->n_connecting);
	BSON_APPEND_INT32(&doc, "idle", p->n_idle);
	BSON_APPEND_INT32(&doc, "active", p->n_active);
	BSON_APPEND_INT32(&doc, "queued", waitq_count(&p->waiting));
	BSON_APPEND_INT64(&doc, "poolSize", pool_gate_size(p));
	limit_to_bson(&doc, p);
	bson_append_document_end(up->arr, &doc);
}

static void pool_to_bson(bson_t *arr, int i, const struct pool *p)
{
	bson_t doc;
	char key[16];
	const char *k;

	bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
	BSON_APPEND_DOCUMENT_BEGIN(arr, k, &doc);
	BSON_APPEND_UTF8(&doc, "host", p->name);
	BSON_APPEND_BOOL(&doc, "target", p == pool_target());
	BSON_APPEND_UTF8(&doc, "kind", handshake_kind_name(p->info.kind));
	BSON_APPEND_INT32(&doc, "maxWireVersion", p->info.max_wire_version);
	BSON_APPEND_INT32(&doc, "connecting", p->n_connecting);
	BSON_APPEND_INT32(&doc, "idle", p->n_idle);
	BSON_APPEND_INT32(&doc, "active", p->n_active);
	BSON_APPEND_INT32(&doc, "waiting", waitq_count(&p->waiting));
	BSON_APPEND_INT64(&doc, "poolSize", pool_gate_size(p));
	BSON_APPEND_INT64(&doc, "connectsOk", (int64_t)p->connects_ok);
	BSON_APPEND_INT64(&doc, "connectsFailed", (int64_t)p->connects_failed);
	BSON_APPEND_INT64(&doc, "requestsDispatched", (int64_t)p->requests_dispatched);
	BSON_APPEND_UTF8(&doc, "lastError", p->last_error);
	BSON_APPEND_UTF8(&doc, "type", stats_member_type(p));
	BSON_APPEND_INT32(&doc, "inUse", p->n_active);
	BSON_APPEND_INT32(&doc, "queued", waitq_count(&p->waiting));
	limit_to_bson(&doc, p);
	if (topology_active()) { /* replica sets: what the monitor says of it */
		BSON_APPEND_BOOL(&doc, "member", p->rs_present);
		BSON_APPEND_UTF8(&doc, "memberType", topology_type_name(p->member.type));
		BSON_APPEND_INT64(&doc, "rttMicros", p->member.rtt_usec);
		BSON_APPEND_INT64(&doc, "lastWriteDate", p->member.last_write_ms);
		BSON_APPEND_BOOL(&doc, "suspect", p->member.last_update_usec <= p->suspect_usec);
	}
	bson_append_document_end(arr, &doc);
}

/* The counters of the whole proxy: every worker's slot summed (workers > 1). */
static const struct mp_counters *counters_total(struct mp_counters *buf)
{
	if (wstats_count() == 0)
		return &stats;
	wstats_sum(buf);
	return buf;
}

static void counters_to_bson(bson_t *parent, const char *key, const struct mp_counters *c)
{
	bson_t doc;

	BSON_APPEND_DOCUMENT_BEGIN(parent, key, &doc);
#define X(name, help) BSON_APPEND_INT64(&doc, #name, (int64_t)c->name);
	MP_COUNTERS(X)
#undef X
	bson_append_document_end(parent, &doc);
}

/* A worker's last published gauges and histogram counts. */
static void gauges_to_bson(bson_t *parent, const struct wslot *w)
{
	bson_t doc;

	BSON_APPEND_DOCUMENT_BEGIN(parent, "gauges", &doc);
#define X(name, help) BSON_APPEND_INT64(&doc, #name, w->gauges[GAUGE_##name]);
	MP_GAUGES(X)
#undef X
	bson_append_document_end(parent, &doc);
	BSON_APPEND_DOCUMENT_BEGIN(parent, "histogramCounts", &doc);
	for (size_t i = 0; i < NHISTS; i++)
		BSON_APPEND_INT64(&doc, hists[i]->name, (int64_t)w->hists[i].count);
	bson_append_document_end(parent, &doc);
}

/* workers > 1: which worker answered, and each worker's own counters,
 * gauges and histogram counts. */
/* Worker i's pools and userPools rows, as it last published them. */
static void worker_rows_to_bson(bson_t *doc, int i)
{
	bson_t rows;
	bson_iter_t it;

	if (wstats_rows_get(i, &rows) && bson_iter_init(&it, &rows))
		while (bson_iter_next(&it))
			bson_append_iter(doc, bson_iter_key(&it), -1, &it);
	bson_destroy(&rows);
}

static void workers_to_bson(bson_t *out)
{
	bson_t arr, doc;
	char key[16];
	const char *k;

	if (wstats_count() == 0)
		return;
	BSON_APPEND_INT32(out, "worker", g.worker_id);
	BSON_APPEND_ARRAY_BEGIN(out, "workers", &arr);
	for (int i = 0; i < wstats_count(); i++) {
		const struct wslot *w = wstats_slot(i);

		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &doc);
		BSON_APPEND_INT32(&doc, "worker", i);
		BSON_APPEND_INT32(&doc, "pid", w->pid);
		BSON_APPEND_BOOL(&doc, "listening", w->ready != 0);
		BSON_APPEND_INT64(&doc, "restarts", (int64_t)w->restarts);
		counters_to_bson(&doc, "counters", &w->counters);
		gauges_to_bson(&doc, w);
		worker_rows_to_bson(&doc, i);
		bson_append_document_end(&arr, &doc);
	}
	bson_append_array_end(out, &arr);
}

/* The "pools" and "userPools" arrays: this process's pools. */
static void pools_part(bson_t *out)
{
	bson_t arr;

	BSON_APPEND_ARRAY_BEGIN(out, "pools", &arr);
	for (int i = 0; i < pool_count(); i++)
		pool_to_bson(&arr, i, pool_at(i));
	bson_append_array_end(out, &arr);
	BSON_APPEND_ARRAY_BEGIN(out, "userPools", &arr);
	pool_users_foreach(user_pool_to_bson, &(struct user_pools){&arr, 0});
	bson_append_array_end(out, &arr);
}

void stats_to_bson(bson_t *out)
{
	struct gauges gs;
	struct mp_counters sum;
	struct hist h;
	bson_t doc;

	gauges_total(&gs); /* before workers_to_bson: our slot is fresh */
	BSON_APPEND_UTF8(out, "version", MP_VERSION);
	counters_to_bson(out, "counters", counters_total(&sum));
	workers_to_bson(out);
	BSON_APPEND_DOCUMENT_BEGIN(out, "gauges", &doc);
#define X(name, help) BSON_APPEND_INT64(&doc, #name, (int64_t)gs.name);
	MP_GAUGES(X)
#undef X
	bson_append_document_end(out, &doc);
	pools_part(out);
	BSON_APPEND_DOCUMENT_BEGIN(out, "histograms", &doc);
	for (size_t i = 0; i < NHISTS; i++)
		hist_to_bson(&doc, hist_total(i, &h));
	bson_append_document_end(out, &doc);
}

static void hist_to_prom(struct evbuffer *out, const struct hist *h)
{
	uint64_t cum = 0;

	evbuffer_add_printf(out, "# HELP mongoplex_%s %s\n# TYPE mongoplex_%s histogram\n", h->name,
			    h->help, h->name);
	for (int i = 0; i <= h->nbounds; i++) {
		cum += h->buckets[i];
		if (i < h->nbounds)
			evbuffer_add_printf(out, "mongoplex_%s_bucket{le=\"%g\"} %llu\n", h->name,
					    h->bounds[i], (unsigned long long)cum);
		else
			evbuffer_add_printf(out, "mongoplex_%s_bucket{le=\"+Inf\"} %llu\n", h->name,
					    (unsigned long long)cum);
	}
	evbuffer_add_printf(out, "mongoplex_%s_sum %g\nmongoplex_%s_count %llu\n", h->name, h->sum,
			    h->name, (unsigned long long)h->count);
}

/* Per-member families: name, help, the value of pool p. */
#define MP_MEMBER_GAUGES(X)                                                                        \
	X(member_pool_size, "Connections a member's pool may hold (pool_size)", pool_gate_size(p)) \
	X(member_in_use, "Connections of a member's pool running a request", p->n_active)          \
	X(member_idle, "Connections idle in a member's pool", p->n_idle)                           \
	X(member_connecting, "Connections of a member's pool being established", p->n_connecting)  \
	X(member_queued, "Requests waiting for a connection of a member's pool",                   \
	  waitq_count(&p->waiting))

static void members_to_prom(struct evbuffer *out)
{
	char m[700], t[64];

	evbuffer_add_printf(out, "# HELP mongoplex_member_info Backend members: 1 per member, "
				 "labelled with its type\n# TYPE mongoplex_member_info gauge\n");
	for (int i = 0; i < pool_count(); i++) {
		const struct pool *p = pool_at(i);

		if (!stats_pool_shown(p))
			continue;
		stats_label_value(m, sizeof(m), p->name);
		stats_label_value(t, sizeof(t), stats_member_type(p));
		evbuffer_add_printf(out, "mongoplex_member_info{member=\"%s\",type=\"%s\"} 1\n", m,
				    t);
	}
	if (topology_active()) /* replica sets: the monitor measures it */
		evbuffer_add_printf(out,
				    "# HELP mongoplex_member_rtt_seconds Last heartbeat round trip "
				    "of a member (replica sets; absent until measured)\n"
				    "# TYPE mongoplex_member_rtt_seconds gauge\n");
	for (int i = 0; i < pool_count(); i++) {
		const struct pool *p = pool_at(i);

		if (!stats_pool_shown(p) || !topology_active() || p->member.rtt_usec < 0)
			continue;
		stats_label_value(m, sizeof(m), p->name);
		evbuffer_add_printf(out, "mongoplex_member_rtt_seconds{member=\"%s\"} %.6f\n", m,
				    (double)p->member.rtt_usec / 1e6);
	}
#define X(fam, help, value)                                                                        \
	evbuffer_add_printf(out, "# HELP mongoplex_%s %s\n# TYPE mongoplex_%s gauge\n", #fam,      \
			    help, #fam);                                                           \
	for (int i = 0; i < pool_count(); i++) {                                                   \
		const struct pool *p = pool_at(i);                                                 \
                                                                                                   \
		if (!stats_pool_shown(p))                                                          \
			continue;                                                                  \
		stats_label_value(m, sizeof(m), p->name);                                          \
		evbuffer_add_printf(out, "mongoplex_%s{member=\"%s\"} %lld\n", #fam, m,            \
				    (long long)(value));                                           \
	}
	MP_MEMBER_GAUGES(X)
#undef X
}

/* Per-pool families of the adaptive limit: member pools labelled with the
 * member, per-user pools with the member and db.user. */
#define MP_POOL_GAUGES(X)                                                                          \
	X(pool_limit,                                                                              \
	  "Requests a pool may have in flight now (adaptive_concurrency's limit, "                 \
	  "else pool_size)",                                                                       \
	  "%d", pool_gate_limit(p))                                                                \
	X(pool_min_rtt_seconds, "The adaptive limit's idle round-trip estimate (0: none yet)",     \
	  "%.6f", (double)limit_min_rtt(&p->limit) / 1e6)                                          \
	X(pool_inflight, "Requests in flight on a pool (counted by adaptive_concurrency)", "%d",   \
	  p->inflight)                                                                             \
	X(pool_queued, "Requests waiting for a connection of a pool", "%d",                        \
	  waitq_count(&p->waiting))

enum pool_fam {
#define X(name, help, fmt, value) FAM_##name,
	MP_POOL_GAUGES(X)
#undef X
	    NFAMS
};

static void pool_gauge_line(struct evbuffer *out, enum pool_fam fam, const char *name,
			    const struct pool *p)
{
	char m[700], u[600], who[400], v[64];

	stats_label_value(m, sizeof(m), pool_member_of((struct pool *)p)->name);
	switch (fam) {
#define X(fname, help, fmt, value)                                                                 \
	case FAM_##fname:                                                                          \
		snprintf(v, sizeof(v), fmt, value);                                                \
		break;
		MP_POOL_GAUGES(X)
#undef X
	case NFAMS:
		return;
	}
	if (p->user == NULL) {
		evbuffer_add_printf(out, "mongoplex_%s{member=\"%s\"} %s\n", name, m, v);
		return;
	}
	snprintf(who, sizeof(who), "%s.%s", pool_user_db(p->user), pool_user_name(p->user));
	stats_label_value(u, sizeof(u), who);
	evbuffer_add_printf(out, "mongoplex_%s{member=\"%s\",user=\"%s\"} %s\n", name, m, u, v);
}

struct prom_pools {
	struct evbuffer *out;
	enum pool_fam fam;
	const char *name;
};

static void user_pool_line(struct pool *p, void *arg)
{
	const struct prom_pools *pp = arg;

	pool_gauge_line(pp->out, pp->fam, pp->name, p);
}

static void pools_to_prom(struct evbuffer *out)
{
	static const char *const names[] = {
#define X(name, help, fmt, value) #name,
	    MP_POOL_GAUGES(X)
#undef X
	};
	static const char *const helps[] = {
#define X(name, help, fmt, value) help,
	    MP_POOL_GAUGES(X)
#undef X
	};

	for (int f = 0; f < NFAMS; f++) {
		struct prom_pools pp = {out, (enum pool_fam)f, names[f]};

		evbuffer_add_printf(out, "# HELP mongoplex_%s %s\n# TYPE mongoplex_%s gauge\n",
				    names[f], helps[f], names[f]);
		for (int i = 0; i < pool_count(); i++)
			if (stats_pool_shown(pool_at(i)))
				pool_gauge_line(out, (enum pool_fam)f, names[f], pool_at(i));
		pool_users_foreach(user_pool_line, &pp);
	}
}

void stats_to_prometheus(struct evbuffer *out)
{
	struct gauges gs;
	struct mp_counters sum;
	struct hist h;
	const struct mp_counters *c = counters_total(&sum);

	gauges_total(&gs);
#define X(name, help)                                                                              \
	evbuffer_add_printf(out,                                                                   \
			    "# HELP mongoplex_%s_total %s\n# TYPE mongoplex_%s_total counter\n"    \
			    "mongoplex_%s_total %llu\n",                                           \
			    #name, help, #name, #name, (unsigned long long)c->name);
	MP_COUNTERS(X)
#undef X
	stats_workers_prom(out); /* workers: per worker, labelled */
#define X(name, help)                                                                              \
	evbuffer_add_printf(                                                                       \
	    out, "# HELP mongoplex_%s %s\n# TYPE mongoplex_%s gauge\nmongoplex_%s %lld\n", #name,  \
	    help, #name, #name, (long long)gs.name);
	MP_GAUGES(X)
#undef X
	for (size_t i = 0; i < NHISTS; i++)
		hist_to_prom(out, hist_total(i, &h));
	members_to_prom(out);
	pools_to_prom(out);
}
