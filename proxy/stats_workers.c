/*
 * stats_workers.c — the per-worker Prometheus families (stats_workers.h).
 *
 *   mongoplex_worker_info{worker,pid}, mongoplex_worker_restarts_total{worker}
 *   mongoplex_worker_NAME_total{worker}       every counter
 *   mongoplex_worker_pool_FIELD{worker,member[,user]}
 *       every pool's row of every worker (member pools, then user pools),
 *       as that worker last published it (each janitor tick, 100 ms)
 */
#include "proxy/stats_workers.h"

#include <stdio.h>
#include <string.h>

#include <bson/bson.h>

#include "core/stats.h"
#include "core/wstats.h"

void stats_label_value(char *buf, size_t len, const char *v)
{
	size_t n = 0;

	for (; *v != '\0' && n + 3 < len; v++) {
		if (*v == '\\' || *v == '"' || *v == '\n')
			buf[n++] = '\\';
		buf[n++] = *v == '\n' ? 'n' : *v;
	}
	buf[n] = '\0';
}

/* The pool rows' fields published per worker: family, row field, help. */
static const struct {
	const char *fam, *field, *help;
} pool_fams[] = {
    {"pool_size", "poolSize", "Connections a pool of this worker may hold (its pool_size share)"},
    {"pool_in_use", "active", "Connections of a pool of this worker running a request"},
    {"pool_idle", "idle", "Connections idle in a pool of this worker"},
    {"pool_connecting", "connecting", "Connections of a pool of this worker being established"},
    {"pool_queued", "queued", "Requests waiting for a connection of a pool of this worker"},
    {"pool_limit", "limit", "Requests a pool of this worker may have in flight now"},
    {"pool_inflight", "inflight", "Requests in flight on a pool of this worker"},
};
#define NPOOL_FAMS (sizeof(pool_fams) / sizeof(pool_fams[0]))

static const char *str_of(const bson_t *row, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, row, key) && BSON_ITER_HOLDS_UTF8(&it)
		   ? bson_iter_utf8(&it, NULL)
		   : "";
}

/* One line per row of rows[array] that has `field`. */
static void rows_lines(struct evbuffer *out, int w, const bson_t *rows, const char *array, size_t f)
{
	bson_iter_t it, arr, v;
	const uint8_t *data;
	uint32_t len;
	bson_t row;
	char m[700], u[600], who[400];
	bool user = strcmp(array, "userPools") == 0;

	if (!bson_iter_init_find(&it, rows, array) || !bson_iter_recurse(&it, &arr))
		return;
	while (bson_iter_next(&arr)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
			continue;
		bson_iter_document(&arr, &len, &data);
		if (!bson_init_static(&row, data, len) ||
		    !bson_iter_init_find(&v, &row, pool_fams[f].field))
			continue;
		stats_label_value(m, sizeof(m), str_of(&row, user ? "member" : "host"));
		evbuffer_add_printf(out, "mongoplex_worker_%s{worker=\"%d\",member=\"%s\"",
				    pool_fams[f].fam, w, m);
		if (user) {
			snprintf(who, sizeof(who), "%s.%s", str_of(&row, "db"),
				 str_of(&row, "user"));
			stats_label_value(u, sizeof(u), who);
			evbuffer_add_printf(out, ",user=\"%s\"", u);
		}
		evbuffer_add_printf(out, "} %lld\n", (long long)bson_iter_as_int64(&v));
	}
}

static void pools_prom(struct evbuffer *out)
{
	int n = wstats_count();
	bson_t rows[n > 0 ? n : 1];

	for (int w = 0; w < n; w++)
		(void)wstats_rows_get(w, &rows[w]); /* empty when none yet */
	for (size_t f = 0; f < NPOOL_FAMS; f++) {
		evbuffer_add_printf(out,
				    "# HELP mongoplex_worker_%s %s (per worker)\n"
				    "# TYPE mongoplex_worker_%s gauge\n",
				    pool_fams[f].fam, pool_fams[f].help, pool_fams[f].fam);
		for (int w = 0; w < n; w++) {
			rows_lines(out, w, &rows[w], "pools", f);
			rows_lines(out, w, &rows[w], "userPools", f);
		}
	}
	for (int w = 0; w < n; w++)
		bson_destroy(&rows[w]);
}

void stats_workers_prom(struct evbuffer *out)
{
	if (wstats_count() == 0)
		return;
	evbuffer_add_printf(out, "# HELP mongoplex_worker_info Worker processes: 1 per worker, "
				 "labelled with its pid\n# TYPE mongoplex_worker_info gauge\n");
	for (int i = 0; i < wstats_count(); i++)
		evbuffer_add_printf(out, "mongoplex_worker_info{worker=\"%d\",pid=\"%d\"} 1\n", i,
				    wstats_slot(i)->pid);
	evbuffer_add_printf(out,
			    "# HELP mongoplex_worker_restarts_total Times the master "
			    "restarted a worker\n# TYPE mongoplex_worker_restarts_total counter\n");
	for (int i = 0; i < wstats_count(); i++)
		evbuffer_add_printf(out, "mongoplex_worker_restarts_total{worker=\"%d\"} %llu\n", i,
				    (unsigned long long)wstats_slot(i)->restarts);
#define X(name, help)                                                                              \
	evbuffer_add_printf(out,                                                                   \
			    "# HELP mongoplex_worker_%s_total %s (per worker)\n"                   \
			    "# TYPE mongoplex_worker_%s_total counter\n",                          \
			    #name, help, #name);                                                   \
	for (int i = 0; i < wstats_count(); i++)                                                   \
		evbuffer_add_printf(out, "mongoplex_worker_%s_total{worker=\"%d\"} %llu\n", #name, \
				    i, (unsigned long long)wstats_slot(i)->counters.name);
	MP_COUNTERS(X)
#undef X
	pools_prom(out);
}
