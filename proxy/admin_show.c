/*
 * admin_show.c — mongoplexShow (see admin_show.h): each list is walked once,
 * one row per object, read with the accessors the stats code uses
 * (proxy/stats_report.h, pool/gate.h, the list counts of client.h and
 * pool.h). Rows hold only bounded strings (peer, names from the hello
 * metadata cut at 64/128 bytes), so a page's size is checked per row.
 *
 *   admin_show ─▶ which list ─▶ walk ─▶ row_begin ─▶ fields ─▶ row_end
 *                                        (skip, byte bound: truncated/next)
 */
#include "proxy/admin_show.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config/cfg.h"
#include "core/compress.h"
#include "core/errors.h"
#include "pool/gate.h"
#include "pool/pool.h"
#include "pool/pool_users.h"
#include "proxy/cauth.h"
#include "proxy/client.h"
#include "proxy/cursor_table.h"
#include "proxy/membound.h"
#include "proxy/proxy.h"
#include "proxy/stats_report.h"

/* A page being built: the rows array, how many rows to skip, the byte bound. */
struct page {
	bson_t *reply, rows, row;
	int64_t skip, seen, added;
	int64_t max_bytes;
	bool full;
	char key[16];
};

/* Start a row; false when it is skipped or the page is full (then no
 * fields are written and row_end must not be called). */
static bool row_begin(struct page *pg)
{
	const char *k;

	pg->seen++;
	if (pg->seen <= pg->skip || pg->full)
		return false;
	/* rows is open in reply (whose len libbson updates only when rows ends) */
	if ((int64_t)pg->reply->len + (int64_t)pg->rows.len >= pg->max_bytes) {
		pg->full = true;
		return false;
	}
	bson_uint32_to_string((uint32_t)pg->added, &k, pg->key, sizeof(pg->key));
	BSON_APPEND_DOCUMENT_BEGIN(&pg->rows, k, &pg->row);
	return true;
}

static void row_end(struct page *pg)
{
	bson_append_document_end(&pg->rows, &pg->row);
	pg->added++;
}

static int64_t ms_since(uint64_t usec)
{
	return usec == 0 || usec > g.now_usec ? 0 : (int64_t)((g.now_usec - usec) / 1000);
}

/* Every pool: the members' own, then the per-user children. */
static void each_pool(void (*fn)(struct pool *p, void *arg), void *arg)
{
	for (int i = 0; i < pool_count(); i++)
		if (stats_pool_shown(pool_at(i)))
			fn(pool_at(i), arg);
	pool_users_foreach(fn, arg);
}

static const char *pool_user_of(const struct pool *p, char *buf, size_t len)
{
	if (p->user == NULL)
		return "";
	snprintf(buf, len, "%s.%s", pool_user_db(p->user), pool_user_name(p->user));
	return buf;
}

static void pool_row(struct pool *p, void *arg)
{
	struct page *pg = arg;
	const struct request *first = waitq_first(&p->waiting);
	char user[300];

	if (!row_begin(pg))
		return;
	BSON_APPEND_UTF8(&pg->row, "member", pool_name(pool_member_of(p)));
	BSON_APPEND_UTF8(&pg->row, "user", pool_user_of(p, user, sizeof(user)));
	BSON_APPEND_UTF8(&pg->row, "role", stats_member_type(pool_member_of(p)));
	BSON_APPEND_INT32(&pg->row, "size", p->n_connecting + p->n_idle + p->n_active);
	BSON_APPEND_INT32(&pg->row, "in_use", p->n_active);
	BSON_APPEND_INT32(&pg->row, "idle", p->n_idle);
	BSON_APPEND_INT32(&pg->row, "connecting", p->n_connecting);
	BSON_APPEND_INT32(&pg->row, "waiting", waitq_count(&p->waiting));
	BSON_APPEND_INT64(&pg->row, "oldest_wait_ms", first ? ms_since(first->enqueued_usec) : 0);
	BSON_APPEND_INT64(&pg->row, "pool_size", pool_gate_size(p));
	BSON_APPEND_INT32(&pg->row, "limit", pool_gate_limit(p)); /* adaptive, else pool_size */
	BSON_APPEND_INT64(&pg->row, "requests", (int64_t)p->requests_dispatched);
	BSON_APPEND_INT64(&pg->row, "errors", (int64_t)p->connects_failed);
	row_end(pg);
}

static const char *const phase_names[] = {"idle", "waiting", "running"};

static void client_row(struct page *pg, const struct client *c)
{
	char user[300] = "", since[32];
	int ph = c->owner.phase;

	if (!row_begin(pg))
		return;
	(void)cauth_user_name(c, user, sizeof(user));
	snprintf(since, sizeof(since), "%" PRId64 "s ago", ms_since(c->connected_usec) / 1000);
	BSON_APPEND_INT64(&pg->row, "id", (int64_t)c->id);
	BSON_APPEND_UTF8(&pg->row, "peer", c->peer);
	BSON_APPEND_UTF8(&pg->row, "user", user);
	BSON_APPEND_BOOL(&pg->row, "tls", c->sb.tls != NULL);
	BSON_APPEND_UTF8(&pg->row, "compression",
			 c->compressor >= 0 ? compress_name(c->compressor) : "");
	BSON_APPEND_UTF8(&pg->row, "state",
			 c->closing ? "closing" : phase_names[ph >= 0 && ph < 3 ? ph : 0]);
	BSON_APPEND_INT64(&pg->row, "connected_ms", ms_since(c->connected_usec));
	BSON_APPEND_INT64(&pg->row, "requests", (int64_t)c->requests);
	BSON_APPEND_INT32(&pg->row, "in_flight", c->owner.inflight);
	BSON_APPEND_INT64(&pg->row, "bytes_in", (int64_t)c->sb.in_total);
	BSON_APPEND_INT64(&pg->row, "bytes_out", (int64_t)c->sb.out_total);
	BSON_APPEND_INT32(&pg->row, "cursors", cursor_table_owner_count(c->id));
	BSON_APPEND_UTF8(&pg->row, "app_name", c->app_name);
	BSON_APPEND_UTF8(&pg->row, "driver", c->driver_name);
	BSON_APPEND_UTF8(&pg->row, "driver_version", c->driver_version);
	row_end(pg);
}

static void show_clients(struct page *pg)
{
	const struct client *c;

	TAILQ_FOREACH(c, client_active_list(), link)
		client_row(pg, c);
}

static void server_row(struct page *pg, const struct server *s, const char *state)
{
	const struct pool *p = s->pool;
	const struct request *r = s->state == SV_ACTIVE ? s->req : NULL;
	char user[300];

	if (!row_begin(pg))
		return;
	BSON_APPEND_INT64(&pg->row, "id", (int64_t)s->id);
	BSON_APPEND_UTF8(&pg->row, "member", pool_name(pool_member_of(s->pool)));
	BSON_APPEND_UTF8(&pg->row, "user", pool_user_of(p, user, sizeof(user)));
	BSON_APPEND_UTF8(&pg->row, "state", s->pin != NULL ? "pinned" : state);
	BSON_APPEND_INT64(&pg->row, "age_ms", ms_since(s->created_usec));
	BSON_APPEND_INT64(&pg->row, "requests", (int64_t)s->exchanges);
	BSON_APPEND_UTF8(&pg->row, "running", r != NULL ? r->cmd : "");
	BSON_APPEND_INT64(&pg->row, "running_ms",
			  r != NULL ? ms_since(s->exchange_started_usec) : 0);
	row_end(pg);
}

static void pool_servers(struct pool *p, void *arg)
{
	const struct server *s;

	TAILQ_FOREACH(s, &p->connecting, link)
		server_row(arg, s, "connecting");
	TAILQ_FOREACH(s, &p->active, link)
		server_row(arg, s, "active");
	TAILQ_FOREACH(s, &p->idle, link)
		server_row(arg, s, "idle");
}

static void show_config(struct page *pg)
{
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n);
	char v[2048];

	for (size_t i = 0; i < n; i++) {
		if (!row_begin(pg))
			continue;
		cfg_format_shown(&g.cfg, &keys[i], v, sizeof(v));
		BSON_APPEND_UTF8(&pg->row, "name", keys[i].name);
		BSON_APPEND_UTF8(&pg->row, "value", v);
		BSON_APPEND_UTF8(&pg->row, "default", keys[i].def);
		BSON_APPEND_BOOL(&pg->row, "reloadable", keys[i].reloadable);
		row_end(pg);
	}
}

/* Resident set size in bytes, -1 if unknown. */
static int64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long size = 0, res = -1;

	if (f == NULL)
		return -1;
	if (fscanf(f, "%lld %lld", &size, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * (int64_t)sysconf(_SC_PAGESIZE);
}

static void mem_row(struct page *pg, const char *name, int64_t value)
{
	if (!row_begin(pg))
		return;
	BSON_APPEND_UTF8(&pg->row, "name", name);
	BSON_APPEND_INT64(&pg->row, "value", value);
	row_end(pg);
}

static void show_mem(struct page *pg)
{
	static const char *const states[REQ_NSTATES] = {"requests_new",	       "requests_queued",
							"requests_hello_wait", "requests_batched",
							"requests_running",    "requests_local"};

	mem_row(pg, "clients", client_count());
	mem_row(pg, "clients_unauthenticated", client_count_unauthenticated());
	for (int st = 0; st < REQ_NSTATES; st++)
		mem_row(pg, states[st], request_count((enum request_state)st));
	mem_row(pg, "cursors", cursor_open_count());
	mem_row(pg, "buffer_bytes", membound_bytes());
	mem_row(pg, "unsent_reply_bytes", (int64_t)client_unsent_bytes());
	mem_row(pg, "backend_connections_user_pools", pool_users_live());
	mem_row(pg, "rss_bytes", rss_bytes());
}

static void show_pools(struct page *pg)
{
	each_pool(pool_row, pg);
}

static void show_servers(struct page *pg)
{
	each_pool(pool_servers, pg);
}

static const struct {
	const char *name;
	void (*walk)(struct page *pg);
} lists[] = {
    {"pools", show_pools},   {"clients", show_clients}, {"servers", show_servers},
    {"config", show_config}, {"mem", show_mem},
};

/* A non-negative integer option of the command, `dflt` when absent. */
static bool int_opt(const bson_t *body, const char *name, int64_t dflt, int64_t *out)
{
	bson_iter_t it;

	*out = dflt;
	if (!bson_iter_init_find(&it, body, name))
		return true;
	if (!BSON_ITER_HOLDS_NUMBER(&it))
		return false;
	*out = bson_iter_as_int64(&it);
	return *out >= 0;
}

/* The list named by the command (SIZE_MAX: none) and its options; else
 * the reason in *why. */
static size_t parse(const bson_t *body, struct page *pg, const char **why)
{
	bson_iter_t it;
	const char *what;
	size_t i;

	*why = "mongoplexShow takes a list name: pools, clients, servers, config or mem";
	if (!bson_iter_init_find(&it, body, "mongoplexShow") || !BSON_ITER_HOLDS_UTF8(&it))
		return SIZE_MAX;
	what = bson_iter_utf8(&it, NULL);
	for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (strcmp(lists[i].name, what) == 0)
			break;
	if (i == sizeof(lists) / sizeof(lists[0]))
		return SIZE_MAX;
	*why = "mongoplexShow: skip and maxBytes are non-negative numbers";
	if (!int_opt(body, "skip", 0, &pg->skip) ||
	    !int_opt(body, "maxBytes", ADMIN_SHOW_MAX_BYTES, &pg->max_bytes))
		return SIZE_MAX;
	if (pg->max_bytes > ADMIN_SHOW_MAX_BYTES || pg->max_bytes < 1024)
		pg->max_bytes = ADMIN_SHOW_MAX_BYTES;
	return i;
}

void admin_show(struct request *req, const bson_t *body)
{
	struct page pg = {0};
	const char *why;
	bson_t reply;
	size_t i = parse(body, &pg, &why);

	if (i == SIZE_MAX) {
		request_fail(req, MP_ERR(BAD_VALUE), why, NULL);
		return;
	}
	bson_init(&reply);
	pg.reply = &reply;
	BSON_APPEND_ARRAY_BEGIN(&reply, "rows", &pg.rows);
	lists[i].walk(&pg);
	bson_append_array_end(&reply, &pg.rows);
	BSON_APPEND_INT64(&reply, "total", pg.seen);
	BSON_APPEND_BOOL(&reply, "truncated", pg.full);
	if (pg.full)
		BSON_APPEND_INT64(&reply, "next", pg.skip + pg.added);
	BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
	request_reply_doc(req, &reply);
	bson_destroy(&reply);
}
