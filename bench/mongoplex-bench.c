/*
 * mongoplex-bench — benchmark tool for mongoplex.
 *
 * Reproduces the user's original experiment (shared/000_*.txt): random-_id
 * lookups of 1, 10 or 20 ids per query from 1..100 client threads, a fixed
 * number of queries per thread, and the same table of total time and
 * throughput — measured for several "paths" (direct to the server, through a
 * plain TCP relay, through mongoplex, ...) side by side in one run.
 *
 *   mongoplex-bench load --uri URI [--docs N]
 *       Insert N documents {_id: int64 0..N-1, ~200 bytes of payload} into
 *       bench.docs with bulk inserts; skipped when the collection already
 *       holds exactly N documents.
 *
 *   mongoplex-bench run --path NAME=URI [--path ...] [--docs N]
 *       [--threads 1,5,10,20,50,100] [--ids 1,10,20] [--queries N]
 *       [--repeat R] [--pool-mode per-thread|shared10] [--warmup N] [--seed S]
 *       [--cell-queries N]
 *       [--json FILE] [--plot FILE.png]
 *       Runs every (threads, ids) cell R times per path, the paths
 *       interleaved inside each cell so that drift hits all paths alike,
 *       and reports medians, latency percentiles and ratios between paths.
 *
 * Every query checks that it got back exactly as many documents as it asked
 * for; errors and count mismatches are counted and reported, and make the
 * tool exit with status 1.
 *
 * Written in C11 against libmongoc/libbson 1.23 and pthreads.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mongoc/mongoc.h>
#include <stddef.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "order.h"

#define BENCH_DB	    "bench"
#define BENCH_COLL	    "docs"
#define MAX_PATHS	    16 /* bench/adaptive.sh: 10 fixed pool sizes + adaptive */
#define MAX_LIST	    16
#define MAX_THREADS	    1000
#define MAX_IDS		    1000
#define LOAD_BATCH	    1000
#define GIVE_UP_AFTER	    20 /* consecutive failed queries before a thread stops */
#define EXIT_MEASURE_ERRORS 1
#define EXIT_SETUP	    2

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* One measured path: a display name, the URI the client connects to, and
 * the pid of the process in between (0: none given; see --proc). */
typedef struct {
	char name[64];
	const char *uri;
	long pid;
} bench_path_t;

typedef struct {
	bool load;	 /* load mode (else run mode) */
	const char *uri; /* load mode: where to insert */
	int64_t docs;	 /* collection size / id range */
	bench_path_t paths[MAX_PATHS];
	int npaths;
	int threads[MAX_LIST];
	int nthreads;
	int ids[MAX_LIST];
	int nids;
	int64_t queries; /* per thread */
	/* --cell-queries: queries per run of a cell, split evenly among its
	 * threads (the seed's 10,000 per run); 0: --queries per thread */
	int64_t cell_queries;
	int64_t warmup; /* untimed queries per path and ids size */
	int repeat;	/* runs per cell; the median is reported */
	int pool_size;	/* 0 = each thread its own client */
	uint64_t seed;
	const char *json;
	const char *plot;
	long backend_pid; /* --backend-pid: its CPU per lookup is measured (0: not) */
	int backend_port; /* --backend-port: its established connections are counted */
} bench_opts_t;

/* Result of one timed run of one cell on one path. */
typedef struct {
	double sum_thread_ms; /* elapsed time summed over threads ("total time") */
	double wall_ms;	      /* first thread released .. last thread finished */
	double p50_us;
	double p99_us;
	int64_t queries;    /* queries planned: threads x queries per thread */
	int64_t errors;	    /* failed queries (driver or server error) */
	int64_t mismatches; /* queries that returned the wrong document count */
	/* From /proc over the timed part (NAN when not measured): the path's
	 * process (--proc) and the backend (--backend-pid, --backend-port). */
	double proxy_user_us, proxy_sys_us; /* CPU time, all threads */
	double proxy_vcsw;		    /* voluntary context switches */
	double backend_cpu_us;		    /* user + system, all threads */
	double backend_conns;		    /* established at the end of the run */
} run_result_t;

/* Medians over the repeats of one cell on one path, plus derived rates. */
typedef struct {
	double total_ms, wall_ms, p50_us, p99_us;
	double tput_orig; /* threads*queries / (total_time_s / threads) */
	double tput_wall; /* threads*queries / wall_s */
	int64_t errors, mismatches;
	/* Medians of the /proc figures, per query (proxy) or per lookup (backend). */
	double proxy_user_us_q, proxy_sys_us_q, proxy_vcsw_q, backend_us_lookup, backend_conns;
} cell_summary_t;

static void usage(FILE *f)
{
	fprintf(f, "usage:\n"
		   "  mongoplex-bench load --uri URI [--docs N]\n"
		   "  mongoplex-bench run --path NAME=URI [--path NAME=URI ...]\n"
		   "      [--docs N] [--threads 1,5,10,20,50,100] [--ids 1,10,20]\n"
		   "      [--queries N] [--repeat R] [--pool-mode per-thread|shared10]\n"
		   "      [--warmup N] [--seed S] [--json FILE] [--plot FILE.png]\n"
		   "      [--proc NAME=PID ...] [--backend-pid PID] [--backend-port PORT]\n"
		   "      [--cell-queries N]  (N queries per run split among its threads,\n"
		   "                           as the seed's 10000; overrides --queries)\n"
		   "defaults: --docs 1000000 --queries 10000 (per thread) --repeat 3\n"
		   "          --pool-mode per-thread --warmup 1000 (untimed queries per path\n"
		   "          and ids size, on one thread, before the first timed run)\n");
}

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "mongoplex-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
	exit(EXIT_SETUP);
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p) {
		die("out of memory", NULL);
	}
	return p;
}

/* Parses a positive integer no larger than max, or dies naming the option. */
static int64_t parse_pos(const char *s, int64_t max, const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max) {
		die("bad value for", what);
	}
	return v;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Parses "10,1,5" into out[] sorted ascending ({1, 5, 10}); returns the
 * count. Duplicates are refused. */
static int parse_list(const char *s, int *out, int max_value, const char *what)
{
	char buf[256];
	int n = 0;
	if (strlen(s) >= sizeof buf) {
		die("list too long for", what);
	}
	strcpy(buf, s);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == MAX_LIST) {
			die("too many values for", what);
		}
		out[n++] = (int)parse_pos(tok, max_value, what);
	}
	if (n == 0) {
		die("empty list for", what);
	}
	qsort(out, (size_t)n, sizeof *out, cmp_int);
	for (int i = 1; i < n; i++) {
		if (out[i] == out[i - 1]) {
			die("duplicate value in", what);
		}
	}
	return n;
}

/* Parses NAME=URI for --path. */
static void parse_path(bench_opts_t *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof o->paths[0].name || !eq[1]) {
		die("--path wants NAME=URI", arg);
	}
	if (o->npaths == MAX_PATHS) {
		die("too many --path options", NULL);
	}
	bench_path_t *p = &o->paths[o->npaths++];
	memcpy(p->name, arg, (size_t)(eq - arg));
	p->name[eq - arg] = '\0';
	p->uri = eq + 1;
}

/* --proc NAME=PID: the process serving path NAME (declared before or after). */
static void parse_proc(bench_opts_t *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1]) {
		die("--proc wants NAME=PID", arg);
	}
	for (int i = 0; i < o->npaths; i++) {
		if (strlen(o->paths[i].name) == (size_t)(eq - arg) &&
		    !strncmp(o->paths[i].name, arg, (size_t)(eq - arg))) {
			o->paths[i].pid = (long)parse_pos(eq + 1, INT32_MAX, "--proc");
			return;
		}
	}
	die("--proc names no --path given before it", arg);
}

/* per-thread -> 0; sharedN (e.g. shared10) -> N. */
static int parse_pool_mode(const char *s)
{
	if (strcmp(s, "per-thread") == 0) {
		return 0;
	}
	if (strncmp(s, "shared", 6) == 0 && s[6]) {
		return (int)parse_pos(s + 6, 10000, "--pool-mode");
	}
	die("--pool-mode wants per-thread or sharedN (e.g. shared10)", s);
	return 0;
}

static void set_defaults(bench_opts_t *o)
{
	static const int threads[] = {1, 5, 10, 20, 50, 100};
	static const int ids[] = {1, 10, 20};
	memset(o, 0, sizeof *o);
	o->docs = 1000000;
	o->queries = 10000;
	o->repeat = 3;
	o->warmup = 1000;
	o->seed = 20240601;
	o->nthreads = 6;
	memcpy(o->threads, threads, sizeof threads);
	o->nids = 3;
	memcpy(o->ids, ids, sizeof ids);
}

/* Applies one "--name value" option; returns false if the name is unknown. */
static bool apply_option(bench_opts_t *o, const char *name, const char *v)
{
	if (!strcmp(name, "--uri")) {
		o->uri = v;
	} else if (!strcmp(name, "--docs")) {
		o->docs = parse_pos(v, INT64_C(1) << 40, name);
	} else if (!strcmp(name, "--path")) {
		parse_path(o, v);
	} else if (!strcmp(name, "--threads")) {
		o->nthreads = parse_list(v, o->threads, MAX_THREADS, name);
	} else if (!strcmp(name, "--ids")) {
		o->nids = parse_list(v, o->ids, MAX_IDS, name);
	} else if (!strcmp(name, "--queries")) {
		o->queries = parse_pos(v, INT64_C(100000000), name);
	} else if (!strcmp(name, "--cell-queries")) {
		o->cell_queries = parse_pos(v, INT64_C(100000000), name);
	} else if (!strcmp(name, "--warmup")) {
		o->warmup = strcmp(v, "0") ? parse_pos(v, INT64_C(100000000), name) : 0;
	} else if (!strcmp(name, "--repeat")) {
		o->repeat = (int)parse_pos(v, 1000, name);
	} else if (!strcmp(name, "--pool-mode")) {
		o->pool_size = parse_pool_mode(v);
	} else if (!strcmp(name, "--seed")) {
		o->seed = (uint64_t)parse_pos(v, INT64_MAX, name);
	} else if (!strcmp(name, "--json")) {
		o->json = v;
	} else if (!strcmp(name, "--plot")) {
		o->plot = v;
	} else if (!strcmp(name, "--proc")) {
		parse_proc(o, v);
	} else if (!strcmp(name, "--backend-pid")) {
		o->backend_pid = (long)parse_pos(v, INT32_MAX, name);
	} else if (!strcmp(name, "--backend-port")) {
		o->backend_port = (int)parse_pos(v, 65535, name);
	} else {
		return false;
	}
	return true;
}

/* Parses argv into o; dies with usage on anything malformed. */
static void parse_args(bench_opts_t *o, int argc, char **argv)
{
	set_defaults(o);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		exit(argc < 2 ? EXIT_SETUP : 0);
	}
	if (strcmp(argv[1], "load") && strcmp(argv[1], "run")) {
		usage(stderr);
		die("unknown mode", argv[1]);
	}
	o->load = !strcmp(argv[1], "load");
	for (int i = 2; i < argc; i += 2) {
		if (i + 1 >= argc || !apply_option(o, argv[i], argv[i + 1])) {
			usage(stderr);
			die("bad or incomplete option", argv[i]);
		}
	}
	if (o->load && !o->uri) {
		die("load mode needs --uri", NULL);
	}
	if (!o->load && o->npaths == 0) {
		die("run mode needs at least one --path NAME=URI", NULL);
	}
	for (int i = 0; !o->load && i < o->nids; i++) {
		if (o->ids[i] > o->docs) {
			die("--ids value larger than --docs", NULL);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Copies uri into out with any password replaced by "***". */
static void redact_uri(const char *uri, char *out, size_t outlen)
{
	const char *scheme = strstr(uri, "://");
	const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
	const char *colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
	if (!colon) {
		snprintf(out, outlen, "%s", uri);
		return;
	}
	snprintf(out, outlen, "%.*s***%s", (int)(colon + 1 - uri), uri, at);
}

/* Parses a URI and adds client-side timeouts unless the URI sets them, so a
 * dead path fails fast instead of hanging the whole run. */
static mongoc_uri_t *make_uri(const char *uri_str, int pool_size)
{
	bson_error_t err;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &err);
	if (!uri) {
		die("bad URI", err.message);
	}
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS)) {
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
	}
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SOCKETTIMEOUTMS)) {
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 60000);
	}
	if (pool_size > 0) {
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_MAXPOOLSIZE, pool_size);
	}
	mongoc_uri_set_appname(uri, "mongoplex-bench");
	return uri;
}

/* A single-threaded client for uri_str, or death with the reason. */
static mongoc_client_t *make_client(const char *uri_str)
{
	bson_error_t err;
	mongoc_uri_t *uri = make_uri(uri_str, 0);
	mongoc_client_t *c = mongoc_client_new_from_uri_with_error(uri, &err);
	mongoc_uri_destroy(uri);
	if (!c) {
		die("cannot create client", err.message);
	}
	mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
	return c;
}

/* splitmix64: small, fast, good enough to pick random ids. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* ------------------------------------------------------------------------ */
/* load mode                                                                 */
/* ------------------------------------------------------------------------ */

/* Appends one benchmark document (~200 bytes of payload fields) to bulk. */
static void add_doc(mongoc_bulk_operation_t *bulk, int64_t id)
{
	static const char filler[] = "the quick brown fox jumps over the lazy dog; "
				     "pack my box with five dozen liquor jugs; "
				     "sphinx of black quartz, judge my vow.";
	char name[32];
	bson_t doc;
	snprintf(name, sizeof name, "user-%010" PRId64, id);
	bson_init(&doc);
	BSON_APPEND_INT64(&doc, "_id", id);
	BSON_APPEND_UTF8(&doc, "name", name);
	BSON_APPEND_INT32(&doc, "group", (int32_t)(id % 1000));
	BSON_APPEND_DOUBLE(&doc, "score", (double)(id % 10007) / 100.0);
	BSON_APPEND_DATE_TIME(&doc, "created", INT64_C(1700000000000) + id * 1000);
	BSON_APPEND_BOOL(&doc, "active", id % 3 != 0);
	BSON_APPEND_UTF8(&doc, "payload", filler);
	mongoc_bulk_operation_insert(bulk, &doc);
	bson_destroy(&doc);
}

/* Draws "[#####.....]  45%  450000/1000000 docs  52000 docs/s" on stderr:
 * redrawn in place at most 5 times a second on a terminal, else one line
 * per 10% so that logs stay readable. */
static void progress(int64_t done, int64_t total, double t0)
{
	static double last_ms;
	static int last_decile = -1;
	bool tty = isatty(STDERR_FILENO);
	int decile = (int)(10 * done / total);
	if (tty ? (now_ms() - last_ms < 200 && done < total) : decile == last_decile) {
		return;
	}
	last_ms = now_ms();
	last_decile = decile;
	char bar[41];
	int filled = (int)(40 * done / total);
	for (int i = 0; i < 40; i++) {
		bar[i] = i < filled ? '#' : '.';
	}
	bar[40] = '\0';
	double secs = (now_ms() - t0) / 1e3;
	fprintf(stderr, "%s[%s] %3d%% %" PRId64 "/%" PRId64 " docs %8.0f docs/s%s", tty ? "\r" : "",
		bar, (int)(100 * done / total), done, total, secs > 0 ? (double)done / secs : 0.0,
		tty ? "" : "\n");
	fflush(stderr);
}

/* Inserts ids [from, to) with one unordered bulk operation. */
static void insert_batch(mongoc_collection_t *coll, int64_t from, int64_t to)
{
	bson_error_t err;
	bson_t opts = BSON_INITIALIZER;
	BSON_APPEND_BOOL(&opts, "ordered", false);
	mongoc_bulk_operation_t *bulk =
	    mongoc_collection_create_bulk_operation_with_opts(coll, &opts);
	for (int64_t id = from; id < to; id++) {
		add_doc(bulk, id);
	}
	if (!mongoc_bulk_operation_execute(bulk, NULL, &err)) {
		fprintf(stderr, "\n");
		die("bulk insert failed", err.message);
	}
	mongoc_bulk_operation_destroy(bulk);
	bson_destroy(&opts);
}

/* Number of documents in coll (count command), or death. A ping goes
 * first: its error names the cause (the count's retry would hide it). */
static int64_t doc_count(mongoc_client_t *client, mongoc_collection_t *coll, const char *where)
{
	bson_error_t err;
	bson_t ping = BSON_INITIALIZER;
	BSON_APPEND_INT32(&ping, "ping", 1);
	bool ok = mongoc_client_command_simple(client, "admin", &ping, NULL, NULL, &err);
	bson_destroy(&ping);
	int64_t n =
	    ok ? mongoc_collection_estimated_document_count(coll, NULL, NULL, NULL, &err) : -1;
	if (n < 0) {
		fprintf(stderr,
			"mongoplex-bench: cannot count %s.%s through %s (is it running?): %s\n",
			BENCH_DB, BENCH_COLL, where, err.message);
		exit(EXIT_SETUP);
	}
	return n;
}

/* load mode: make bench.docs hold exactly docs documents. */
static int cmd_load(const bench_opts_t *o)
{
	char shown[512];
	redact_uri(o->uri, shown, sizeof shown);
	mongoc_client_t *client = make_client(o->uri);
	mongoc_collection_t *coll = mongoc_client_get_collection(client, BENCH_DB, BENCH_COLL);
	int64_t have = doc_count(client, coll, shown);
	if (have == o->docs) {
		fprintf(stderr, "%s.%s already holds %" PRId64 " docs on %s; skipping load\n",
			BENCH_DB, BENCH_COLL, have, shown);
	} else {
		if (have > 0) {
			fprintf(stderr,
				"%s.%s holds %" PRId64 " docs, want %" PRId64 "; dropping it\n",
				BENCH_DB, BENCH_COLL, have, o->docs);
			mongoc_collection_drop(coll, NULL);
		}
		double t0 = now_ms();
		for (int64_t from = 0; from < o->docs; from += LOAD_BATCH) {
			int64_t to = from + LOAD_BATCH < o->docs ? from + LOAD_BATCH : o->docs;
			insert_batch(coll, from, to);
			progress(to, o->docs, t0);
		}
		fprintf(stderr, "%sloaded %" PRId64 " docs in %.1f s\n",
			isatty(STDERR_FILENO) ? "\n" : "", o->docs, (now_ms() - t0) / 1e3);
		if ((have = doc_count(client, coll, shown)) != o->docs) {
			fprintf(stderr,
				"mongoplex-bench: after load the collection holds %" PRId64
				" docs\n",
				have);
			return EXIT_SETUP;
		}
	}
	mongoc_collection_destroy(coll);
	mongoc_client_destroy(client);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* run mode: one worker thread                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
	const bench_opts_t *o;
	mongoc_client_t *client;    /* per-thread mode: this thread's own client */
	mongoc_client_pool_t *pool; /* shared mode: the pool all threads share */
	pthread_barrier_t *barrier; /* releases all threads (and main) at once */
	int nids;		    /* ids per query */
	uint64_t rng;
	float *lat_us; /* [o->queries] latency of each query */
	int64_t sent;  /* queries actually sent (lat_us[0..sent)) */
	double elapsed_ms;
	int64_t errors, mismatches;
	int consecutive_errors;
	char first_error[640]; /* fits a bson_error_t message */
} worker_t;

/* Fills ids[0..n) with distinct random ids in [0, docs). */
static void pick_ids(worker_t *w, int64_t *ids, int n)
{
	for (int i = 0; i < n; i++) {
		int64_t id;
		bool dup;
		do {
			id = (int64_t)(rng_next(&w->rng) % (uint64_t)w->o->docs);
			dup = false;
			for (int j = 0; j < i && !dup; j++) {
				dup = ids[j] == id;
			}
		} while (dup);
		ids[i] = id;
	}
}

/* {_id: id} for one id (find_one style), else {_id: {$in: [ids...]}}. */
static void build_filter(bson_t *filter, const int64_t *ids, int n)
{
	bson_init(filter);
	if (n == 1) {
		BSON_APPEND_INT64(filter, "_id", ids[0]);
		return;
	}
	bson_t id_doc, in_arr;
	BSON_APPEND_DOCUMENT_BEGIN(filter, "_id", &id_doc);
	BSON_APPEND_ARRAY_BEGIN(&id_doc, "$in", &in_arr);
	for (int i = 0; i < n; i++) {
		const char *key;
		char buf[16];
		bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
		bson_append_int64(&in_arr, key, -1, ids[i]);
	}
	bson_append_array_end(&id_doc, &in_arr);
	bson_append_document_end(filter, &id_doc);
}

/* Runs one find; returns the number of documents, or -1 with err set. */
static int64_t run_find(mongoc_client_t *client, const bson_t *filter, const bson_t *opts,
			bson_error_t *err)
{
	mongoc_collection_t *coll = mongoc_client_get_collection(client, BENCH_DB, BENCH_COLL);
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
	const bson_t *doc;
	int64_t n = 0;
	while (mongoc_cursor_next(cur, &doc)) {
		n++;
	}
	if (mongoc_cursor_error(cur, err)) {
		n = -1;
	}
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(coll);
	return n;
}

/* Borrows a client: the thread's own, or one popped from the shared pool. */
static mongoc_client_t *borrow(worker_t *w)
{
	return w->pool ? mongoc_client_pool_pop(w->pool) : w->client;
}

static void give_back(worker_t *w, mongoc_client_t *c)
{
	if (w->pool) {
		mongoc_client_pool_push(w->pool, c);
	}
}

/* Counts a failed query; keeps the first message for the report. */
static void note_error(worker_t *w, int64_t *counter, const char *msg)
{
	(*counter)++;
	w->consecutive_errors++;
	if (!w->first_error[0]) {
		snprintf(w->first_error, sizeof w->first_error, "%s", msg);
	}
}

/* One timed query: pick ids, find, check the count, record the latency. */
static void one_query(worker_t *w, const bson_t *opts, int64_t qi)
{
	int64_t ids[MAX_IDS];
	bson_t filter;
	bson_error_t err;
	char msg[64];
	pick_ids(w, ids, w->nids);
	build_filter(&filter, ids, w->nids);
	double t0 = now_ms();
	mongoc_client_t *c = borrow(w);
	int64_t got = run_find(c, &filter, opts, &err);
	give_back(w, c);
	w->lat_us[qi] = (float)((now_ms() - t0) * 1e3);
	bson_destroy(&filter);
	if (got < 0) {
		note_error(w, &w->errors, err.message);
	} else if (got != w->nids) {
		snprintf(msg, sizeof msg, "expected %d docs, got %" PRId64, w->nids, got);
		note_error(w, &w->mismatches, msg);
	} else {
		w->consecutive_errors = 0;
	}
}

/* Opens the connection before timing starts (ping), so the timed part
 * measures queries, not connection setup. */
static bool warm_up(worker_t *w)
{
	bson_error_t err;
	bson_t ping = BSON_INITIALIZER;
	BSON_APPEND_INT32(&ping, "ping", 1);
	mongoc_client_t *c = borrow(w);
	bool ok = mongoc_client_command_simple(c, "admin", &ping, NULL, NULL, &err);
	give_back(w, c);
	bson_destroy(&ping);
	if (!ok) {
		snprintf(w->first_error, sizeof w->first_error, "warm-up ping: %s", err.message);
	}
	return ok;
}

/* Thread body: warm up, wait at the barrier, run the queries, time them. */
static void *worker_main(void *arg)
{
	worker_t *w = arg;
	bson_t opts = BSON_INITIALIZER;
	if (w->nids == 1) { /* what find_one sends */
		BSON_APPEND_INT64(&opts, "limit", 1);
		BSON_APPEND_BOOL(&opts, "singleBatch", true);
	}
	bool ok = warm_up(w);
	pthread_barrier_wait(w->barrier);
	double t0 = now_ms();
	int64_t q = 0;
	for (; ok && q < w->o->queries && w->consecutive_errors < GIVE_UP_AFTER; q++) {
		one_query(w, &opts, q);
	}
	w->elapsed_ms = now_ms() - t0;
	w->sent = q;
	/* A thread that never connected or gave up: its unsent queries failed. */
	w->errors += w->o->queries - q;
	bson_destroy(&opts);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* run mode: one cell (threads x ids) on one path                            */
/* ------------------------------------------------------------------------ */

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double percentile(const float *v, size_t n, double p)
{
	if (n == 0) {
		return NAN;
	}
	size_t rank = (size_t)ceil(p * (double)n);
	return v[rank ? rank - 1 : 0];
}

/* Per-thread or pooled clients for one run; one of the two is set. */
typedef struct {
	mongoc_client_t **clients;
	mongoc_client_pool_t *pool;
} client_set_t;

static client_set_t open_clients(const bench_opts_t *o, const char *uri_str, int nthreads)
{
	client_set_t cs = {0};
	if (o->pool_size > 0) {
		bson_error_t err;
		mongoc_uri_t *uri = make_uri(uri_str, o->pool_size);
		cs.pool = mongoc_client_pool_new_with_error(uri, &err);
		mongoc_uri_destroy(uri);
		if (!cs.pool) {
			die("cannot create client pool", err.message);
		}
		mongoc_client_pool_set_error_api(cs.pool, MONGOC_ERROR_API_VERSION_2);
		return cs;
	}
	cs.clients = xcalloc((size_t)nthreads, sizeof *cs.clients);
	for (int i = 0; i < nthreads; i++) {
		cs.clients[i] = make_client(uri_str);
	}
	return cs;
}

static void close_clients(client_set_t *cs, int nthreads)
{
	if (cs->pool) {
		mongoc_client_pool_destroy(cs->pool);
	}
	for (int i = 0; cs->clients && i < nthreads; i++) {
		mongoc_client_destroy(cs->clients[i]);
	}
	free(cs->clients);
}

/* Seed of thread t: the same for every path, so all paths look up the same
 * ids in the same order. */
static uint64_t thread_seed(const bench_opts_t *o, int nthreads, int nids, int rep, int t)
{
	uint64_t s = o->seed ^ ((uint64_t)nthreads << 40) ^ ((uint64_t)nids << 20) ^
		     ((uint64_t)rep << 10) ^ (uint64_t)t;
	return rng_next(&s);
}

/* The options of one cell: with --cell-queries, its queries per thread
 * (ceil(cell_queries / threads)); otherwise o itself. */
static bench_opts_t cell_opts(const bench_opts_t *o, int nthreads)
{
	bench_opts_t co = *o;
	if (o->cell_queries > 0) {
		co.queries = (o->cell_queries + nthreads - 1) / nthreads;
	}
	return co;
}

/* Sums per-thread counters and merges latencies into r. */
static void collect(const bench_opts_t *o, worker_t *w, int nthreads, run_result_t *r,
		    const char *path)
{
	size_t n = 0;
	float *all = xcalloc((size_t)nthreads * (size_t)o->queries, sizeof *all);
	bool shown = false;
	for (int t = 0; t < nthreads; t++) { /* latencies of the queries sent */
		memcpy(all + n, w[t].lat_us, (size_t)w[t].sent * sizeof(float));
		n += (size_t)w[t].sent;
		r->sum_thread_ms += w[t].elapsed_ms;
		r->errors += w[t].errors;
		r->mismatches += w[t].mismatches;
		if (w[t].first_error[0] && !shown) { /* one sample message per run */
			fprintf(stderr, "  !! %s: first error: %s\n", path, w[t].first_error);
			shown = true;
		}
		free(w[t].lat_us);
	}
	qsort(all, n, sizeof *all, cmp_float);
	r->queries = (int64_t)nthreads * o->queries;
	r->p50_us = percentile(all, n, 0.50);
	r->p99_us = percentile(all, n, 0.99);
	free(all);
}

/* ------------------------------------------------------------------------ */
/* /proc: where the time goes                                                */
/* ------------------------------------------------------------------------ */

/* A process's counters at one moment (fields < 0: could not be read). */
typedef struct {
	double user_us, sys_us, vcsw;
} proc_sample_t;

/* voluntary_ctxt_switches summed over the threads of PID that are alive
 * (/proc/PID/task/TID/status: the process's own status file counts only its
 * main thread, which for a multi-threaded proxy such as mongobetween is
 * idle); -1 if none can be read. */
static double proc_vcsw(long pid)
{
	char path[64], buf[512];
	double sum = -1;
	struct dirent *e;
	snprintf(path, sizeof path, "/proc/%ld/task", pid);
	DIR *d = opendir(path);
	if (d == NULL) {
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char spath[400];
		FILE *f;
		if (e->d_name[0] == '.') {
			continue;
		}
		snprintf(spath, sizeof spath, "%s/%s/status", path, e->d_name);
		if ((f = fopen(spath, "r")) == NULL) {
			continue; /* the thread exited meanwhile */
		}
		while (fgets(buf, sizeof buf, f)) {
			double v;
			if (sscanf(buf, "voluntary_ctxt_switches: %lf", &v) == 1) {
				sum = (sum < 0 ? 0 : sum) + v;
			}
		}
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* utime and stime (fields 14, 15 of /proc/PID/stat, after the ")" of the
 * command name: all threads) and the voluntary context switches of all its
 * threads (proc_vcsw). Clock ticks: 10 ms resolution at the usual 100 Hz. */
static proc_sample_t proc_sample(long pid)
{
	proc_sample_t s = {-1, -1, -1};
	char path[64], buf[2048];
	unsigned long ut, st;
	double tick_us = 1e6 / (double)sysconf(_SC_CLK_TCK);
	FILE *f;
	if (pid <= 0) {
		return s;
	}
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if ((f = fopen(path, "r")) != NULL) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = '\0';
		const char *p = strrchr(buf, ')');
		/* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
		 * majflt cmajflt utime stime */
		if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				&st) == 2) {
			s.user_us = (double)ut * tick_us;
			s.sys_us = (double)st * tick_us;
		}
		fclose(f);
	}
	s.vcsw = proc_vcsw(pid);
	return s;
}

/* Established TCP connections whose local port is `port` (the backend's
 * side of every client connection), from /proc/net/tcp and tcp6. */
static double backend_connections(int port)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	double n = 0;
	if (port <= 0) {
		return NAN;
	}
	for (size_t i = 0; i < 2; i++) {
		char line[512];
		FILE *f = fopen(files[i], "r");
		if (!f) {
			continue;
		}
		while (fgets(line, sizeof line, f)) {
			unsigned lport, state;
			/* "  0: 0100007F:6989 0100007F:D2A4 01 ..." */
			if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &lport,
				   &state) == 2 &&
			    lport == (unsigned)port && state == 1) {
				n++;
			}
		}
		fclose(f);
	}
	return n;
}

/* user + system, or -1 when unreadable. */
static double cpu_us(proc_sample_t s)
{
	return s.user_us < 0 || s.sys_us < 0 ? -1 : s.user_us + s.sys_us;
}

/* b - a, or NAN when either was unreadable. */
static double delta(double a, double b)
{
	return a < 0 || b < 0 ? NAN : b - a;
}

/* Runs one cell once on one path and returns the measurements. */
static run_result_t run_once(const bench_opts_t *o, const bench_path_t *p, int nthreads, int nids,
			     int rep)
{
	run_result_t r = {0};
	client_set_t cs = open_clients(o, p->uri, nthreads);
	worker_t *w = xcalloc((size_t)nthreads, sizeof *w);
	pthread_t *tids = xcalloc((size_t)nthreads, sizeof *tids);
	pthread_barrier_t barrier;
	pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);
	for (int t = 0; t < nthreads; t++) {
		w[t] = (worker_t){.o = o,
				  .pool = cs.pool,
				  .barrier = &barrier,
				  .nids = nids,
				  .client = cs.clients ? cs.clients[t] : NULL,
				  .rng = thread_seed(o, nthreads, nids, rep, t),
				  .lat_us = xcalloc((size_t)o->queries, sizeof(float))};
		if (pthread_create(&tids[t], NULL, worker_main, &w[t])) {
			die("pthread_create failed", NULL);
		}
	}
	proc_sample_t px0 = proc_sample(p->pid), bk0 = proc_sample(o->backend_pid);
	pthread_barrier_wait(&barrier);
	double t0 = now_ms();
	for (int t = 0; t < nthreads; t++) {
		pthread_join(tids[t], NULL);
	}
	r.wall_ms = now_ms() - t0;
	proc_sample_t px1 = proc_sample(p->pid), bk1 = proc_sample(o->backend_pid);
	r.proxy_user_us = delta(px0.user_us, px1.user_us);
	r.proxy_sys_us = delta(px0.sys_us, px1.sys_us);
	r.proxy_vcsw = delta(px0.vcsw, px1.vcsw);
	r.backend_cpu_us = delta(cpu_us(bk0), cpu_us(bk1));
	r.backend_conns = backend_connections(o->backend_port); /* clients still open */
	collect(o, w, nthreads, &r, p->name);
	pthread_barrier_destroy(&barrier);
	close_clients(&cs, nthreads);
	free(tids);
	free(w);
	return r;
}

/* ------------------------------------------------------------------------ */
/* run mode: summaries                                                       */
/* ------------------------------------------------------------------------ */

/* Index of result (path, ti, ii, rep) in the flat results array. */
static size_t ridx(const bench_opts_t *o, int p, int ti, int ii, int rep)
{
	return (((size_t)p * (size_t)o->nthreads + (size_t)ti) * (size_t)o->nids + (size_t)ii) *
		   (size_t)o->repeat +
	       (size_t)rep;
}

/* Median of the field at byte offset off over the repeats of one cell. */
static double median_of(const bench_opts_t *o, const run_result_t *rs, size_t off)
{
	double v[1000];
	for (int i = 0; i < o->repeat; i++) {
		memcpy(&v[i], (const char *)&rs[i] + off, sizeof(double));
	}
	qsort(v, (size_t)o->repeat, sizeof v[0], cmp_double);
	int m = o->repeat / 2;
	return o->repeat % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/* Medians of one cell's repeats plus the two throughput figures. */
static cell_summary_t summarize(const bench_opts_t *o, const run_result_t *rs, int nthreads,
				int nids)
{
	cell_summary_t s = {0};
	s.total_ms = median_of(o, rs, offsetof(run_result_t, sum_thread_ms));
	s.wall_ms = median_of(o, rs, offsetof(run_result_t, wall_ms));
	s.p50_us = median_of(o, rs, offsetof(run_result_t, p50_us));
	s.p99_us = median_of(o, rs, offsetof(run_result_t, p99_us));
	double total_q = (double)nthreads * (double)o->queries;
	s.tput_orig = total_q / (s.total_ms / 1e3 / nthreads);
	s.tput_wall = total_q / (s.wall_ms / 1e3);
	for (int i = 0; i < o->repeat; i++) {
		s.errors += rs[i].errors;
		s.mismatches += rs[i].mismatches;
	}
	s.proxy_user_us_q = median_of(o, rs, offsetof(run_result_t, proxy_user_us)) / total_q;
	s.proxy_sys_us_q = median_of(o, rs, offsetof(run_result_t, proxy_sys_us)) / total_q;
	s.proxy_vcsw_q = median_of(o, rs, offsetof(run_result_t, proxy_vcsw)) / total_q;
	s.backend_us_lookup =
	    median_of(o, rs, offsetof(run_result_t, backend_cpu_us)) / (total_q * nids);
	s.backend_conns = median_of(o, rs, offsetof(run_result_t, backend_conns));
	return s;
}

/* Summary of (path p, threads index ti, ids index ii). */
static cell_summary_t cell(const bench_opts_t *o, const run_result_t *res, int p, int ti, int ii)
{
	bench_opts_t co = cell_opts(o, o->threads[ti]);
	return summarize(&co, &res[ridx(o, p, ti, ii, 0)], o->threads[ti], o->ids[ii]);
}

/* Paths that ratios are taken against, in this order, when present. */
static const char *const ratio_bases[] = {"direct", "relay"};

/* Path index by name, or -1. */
static int find_path(const bench_opts_t *o, const char *name)
{
	for (int i = 0; i < o->npaths; i++) {
		if (!strcmp(o->paths[i].name, name)) {
			return i;
		}
	}
	return -1;
}

/* Whether to show path p against base path (index b in ratio_bases):
 * never against itself, and not direct/relay, which is relay/direct
 * inverted. */
static bool ratio_wanted(const bench_opts_t *o, int p, int b, int base)
{
	return base >= 0 && p != base && !(b == 1 && !strcmp(o->paths[p].name, ratio_bases[0]));
}

/* ------------------------------------------------------------------------ */
/* run mode: text report                                                     */
/* ------------------------------------------------------------------------ */

typedef double (*cell_getter_t)(const cell_summary_t *);

static double get_total(const cell_summary_t *s)
{
	return s->total_ms;
}
static double get_orig(const cell_summary_t *s)
{
	return s->tput_orig;
}
static double get_wall(const cell_summary_t *s)
{
	return s->tput_wall;
}
static double get_p50(const cell_summary_t *s)
{
	return s->p50_us;
}
static double get_p99(const cell_summary_t *s)
{
	return s->p99_us;
}
static double get_err(const cell_summary_t *s)
{
	return (double)(s->errors + s->mismatches);
}
static double get_px_user(const cell_summary_t *s)
{
	return s->proxy_user_us_q;
}
static double get_px_sys(const cell_summary_t *s)
{
	return s->proxy_sys_us_q;
}
static double get_px_vcsw(const cell_summary_t *s)
{
	return s->proxy_vcsw_q;
}
static double get_bk_lookup(const cell_summary_t *s)
{
	return s->backend_us_lookup;
}
static double get_bk_conns(const cell_summary_t *s)
{
	return s->backend_conns;
}

/* Column header: "threads      1 id     10 ids ..." */
static void print_header(const bench_opts_t *o)
{
	printf("  %7s", "threads");
	for (int i = 0; i < o->nids; i++) {
		char h[32];
		snprintf(h, sizeof h, "%d id%s", o->ids[i], o->ids[i] == 1 ? "" : "s");
		printf(" %12s", h);
	}
	printf("\n");
}

/* One table of one figure for one path: rows = threads, columns = ids. */
static void print_table(const bench_opts_t *o, const run_result_t *res, int p, const char *title,
			cell_getter_t get, int decimals)
{
	printf("%s\n", title);
	print_header(o);
	for (int ti = 0; ti < o->nthreads; ti++) {
		printf("  %7d", o->threads[ti]);
		for (int ii = 0; ii < o->nids; ii++) {
			cell_summary_t s = cell(o, res, p, ti, ii);
			printf(" %12.*f", decimals, get(&s));
		}
		printf("\n");
	}
	printf("\n");
}

/* Failed or wrong queries of path p over all cells and repeats. */
static int64_t path_failures(const bench_opts_t *o, const run_result_t *res, int p)
{
	int64_t n = 0;
	for (size_t i = ridx(o, p, 0, 0, 0); i < ridx(o, p + 1, 0, 0, 0); i++) {
		n += res[i].errors + res[i].mismatches;
	}
	return n;
}

/* The tables printed for every path, in order. */
static const struct {
	const char *title;
	cell_getter_t get;
	int decimals;
} path_tables[] = {
    {"total time, ms (elapsed time of each thread, summed over threads)", get_total, 1},
    {"throughput, queries/s, ORIGINAL formula: threads*queries / (total_time_s / threads)",
     get_orig, 1},
    {"throughput, queries/s, WALL CLOCK (the honest one): threads*queries / wall_s", get_wall, 1},
    {"latency p50, us (per query, all threads)", get_p50, 0},
    {"latency p99, us", get_p99, 0},
};

/* The original report's table (and more) for one path. */
static void print_path(const bench_opts_t *o, const run_result_t *res, int p)
{
	char shown[512];
	redact_uri(o->paths[p].uri, shown, sizeof shown);
	printf("=== path %s  (%s)\n\n", o->paths[p].name, shown);
	for (size_t i = 0; i < sizeof path_tables / sizeof path_tables[0]; i++) {
		print_table(o, res, p, path_tables[i].title, path_tables[i].get,
			    path_tables[i].decimals);
	}
	if (o->paths[p].pid > 0) {
		print_table(o, res, p,
			    "proxy CPU, user, us per query (/proc/PID/stat, 10 ms ticks)",
			    get_px_user, 2);
		print_table(o, res, p, "proxy CPU, system, us per query", get_px_sys, 2);
		print_table(o, res, p, "proxy voluntary context switches per query", get_px_vcsw,
			    2);
	}
	if (o->backend_pid > 0) {
		print_table(o, res, p, "backend CPU (user + system), us per lookup", get_bk_lookup,
			    2);
	}
	if (o->backend_port > 0) {
		print_table(o, res, p, "backend connections open (established, end of the run)",
			    get_bk_conns, 0);
	}
	if (path_failures(o, res, p)) {
		print_table(o, res, p, "!! ERRORS + COUNT MISMATCHES (all repeats): NOT VALID",
			    get_err, 0);
	} else {
		printf("errors: none (every query got exactly the documents it asked for)\n\n");
	}
}

/* Ratio table: path p vs path base, for wall throughput and p50 latency. */
static void print_ratio(const bench_opts_t *o, const run_result_t *res, int p, int base)
{
	const char *a_name = o->paths[p].name, *b_name = o->paths[base].name;
	printf("ratio %s / %s: wall-clock throughput (>1: %s faster) | p50 (<1: %s faster)\n",
	       a_name, b_name, a_name, a_name);
	print_header(o);
	for (int ti = 0; ti < o->nthreads; ti++) {
		printf("  %7d", o->threads[ti]);
		for (int ii = 0; ii < o->nids; ii++) {
			cell_summary_t a = cell(o, res, p, ti, ii), b = cell(o, res, base, ti, ii);
			printf("  %5.2f|%5.2f", a.tput_wall / b.tput_wall, a.p50_us / b.p50_us);
		}
		printf("\n");
	}
	printf("\n");
}

/* "backend capacity": backend CPU per lookup direct / through path p (> 1:
 * the backend serves more lookups per CPU second through p). */
static void print_capacity(const bench_opts_t *o, const run_result_t *res, int p, int direct)
{
	printf("backend capacity %s: backend CPU per lookup direct / through %s"
	       " (>1: the backend does less work per lookup through %s)\n",
	       o->paths[p].name, o->paths[p].name, o->paths[p].name);
	print_header(o);
	for (int ti = 0; ti < o->nthreads; ti++) {
		printf("  %7d", o->threads[ti]);
		for (int ii = 0; ii < o->nids; ii++) {
			cell_summary_t a = cell(o, res, p, ti, ii),
				       d = cell(o, res, direct, ti, ii);
			printf(" %12.2f", d.backend_us_lookup / a.backend_us_lookup);
		}
		printf("\n");
	}
	printf("\n");
}

/* How to read the tables, printed above them. */
static const char *const legend[] = {
    "queries: 1 id = find({_id: id}, limit 1) like find_one;",
    "         k ids = find({_id: {$in: [k random ids]}})",
    "total time = each thread's elapsed time, summed over the threads (as in the report).",
    "ORIGINAL throughput = threads*queries / (total_time / threads): the report's formula",
    "  10000/(total_time/threads), its 10000 being every query of a run. It divides by",
    "  the MEAN thread time, so it flatters runs where some threads finish late.",
    "WALL CLOCK throughput = threads*queries / (time until the LAST thread finished):",
    "  the honest one; compare paths on it. Every figure is the median of the repeats.",
};

/* Everything on stdout: settings, formulas, per-path tables, ratios. */
static void print_report(const bench_opts_t *o, const run_result_t *res)
{
	printf("\nmongoplex-bench: %" PRId64 " docs, ", o->docs);
	if (o->cell_queries) {
		printf("%" PRId64 " queries per run split among its threads", o->cell_queries);
	} else {
		printf("%" PRId64 " queries per thread", o->queries);
	}
	printf(", median of %d run%s, pool mode %s", o->repeat, o->repeat == 1 ? "" : "s",
	       o->pool_size ? "shared" : "per-thread (one client per thread)");
	if (o->pool_size) {
		printf(" (one client pool, maxPoolSize=%d)", o->pool_size);
	}
	printf("\n");
	for (size_t i = 0; i < sizeof legend / sizeof legend[0]; i++) {
		printf("%s\n", legend[i]);
	}
	printf("\n");
	for (int p = 0; p < o->npaths; p++) {
		print_path(o, res, p);
	}
	for (int b = 0; b < 2; b++) {
		int base = find_path(o, ratio_bases[b]);
		for (int p = 0; p < o->npaths; p++) {
			if (ratio_wanted(o, p, b, base)) {
				print_ratio(o, res, p, base);
			}
		}
	}
	int direct = find_path(o, ratio_bases[0]);
	for (int p = 0; o->backend_pid > 0 && direct >= 0 && p < o->npaths; p++) {
		if (p != direct) {
			print_capacity(o, res, p, direct);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* run mode: JSON                                                            */
/* ------------------------------------------------------------------------ */

/* Writes s as a JSON string literal. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			fprintf(f, "\\%c", c);
		} else if (c < 0x20) {
			fprintf(f, "\\u%04x", c);
		} else {
			fputc(c, f);
		}
	}
	fputc('"', f);
}

/* A number, or null when it is not finite (JSON has no NaN). */
static void json_num(FILE *f, double v)
{
	if (isfinite(v)) {
		fprintf(f, "%.6g", v);
	} else {
		fputs("null", f);
	}
}

static void json_int_list(FILE *f, const int *v, int n)
{
	fputc('[', f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s%d", i ? ", " : "", v[i]);
	}
	fputc(']', f);
}

/* "config": settings and path list. */
static void json_config(FILE *f, const bench_opts_t *o)
{
	fprintf(f,
		"  \"config\": {\"db\": \"%s\", \"collection\": \"%s\", \"docs\": %" PRId64
		", \"queries_per_thread\": %" PRId64 ", \"cell_queries\": %" PRId64
		", \"repeat\": %d, \"seed\": %" PRIu64
		", \"pool_mode\": \"%s\", \"pool_size\": %d,\n    \"threads\": ",
		BENCH_DB, BENCH_COLL, o->docs, o->queries, o->cell_queries, o->repeat, o->seed,
		o->pool_size ? "shared" : "per-thread", o->pool_size);
	json_int_list(f, o->threads, o->nthreads);
	fprintf(f, ", \"ids\": ");
	json_int_list(f, o->ids, o->nids);
	fprintf(f, ",\n    \"paths\": [");
	for (int p = 0; p < o->npaths; p++) {
		char shown[512];
		redact_uri(o->paths[p].uri, shown, sizeof shown);
		fprintf(f, "%s{\"name\": ", p ? ", " : "");
		json_str(f, o->paths[p].name);
		fprintf(f, ", \"uri\": ");
		json_str(f, shown);
		fputc('}', f);
	}
	fprintf(f, "]},\n");
}

/* One raw run as a JSON object. */
static void json_run(FILE *f, const run_result_t *r)
{
	fprintf(f, "{\"total_time_ms\": ");
	json_num(f, r->sum_thread_ms);
	fprintf(f, ", \"wall_ms\": ");
	json_num(f, r->wall_ms);
	fprintf(f, ", \"p50_us\": ");
	json_num(f, r->p50_us);
	fprintf(f, ", \"p99_us\": ");
	json_num(f, r->p99_us);
	fprintf(f, ", \"proxy_user_us\": ");
	json_num(f, r->proxy_user_us);
	fprintf(f, ", \"proxy_sys_us\": ");
	json_num(f, r->proxy_sys_us);
	fprintf(f, ", \"proxy_vcsw\": ");
	json_num(f, r->proxy_vcsw);
	fprintf(f, ", \"backend_cpu_us\": ");
	json_num(f, r->backend_cpu_us);
	fprintf(f, ", \"backend_conns\": ");
	json_num(f, r->backend_conns);
	fprintf(f,
		", \"queries\": %" PRId64 ", \"errors\": %" PRId64 ", \"mismatches\": %" PRId64 "}",
		r->queries, r->errors, r->mismatches);
}

/* One cell: medians, throughputs and the raw runs. */
static void json_cell(FILE *f, const bench_opts_t *o, const run_result_t *res, int p, int ti,
		      int ii)
{
	cell_summary_t s = cell(o, res, p, ti, ii);
	fprintf(f, "    {\"path\": ");
	json_str(f, o->paths[p].name);
	fprintf(f, ", \"threads\": %d, \"ids\": %d, \"total_time_ms\": ", o->threads[ti],
		o->ids[ii]);
	json_num(f, s.total_ms);
	fprintf(f, ", \"wall_ms\": ");
	json_num(f, s.wall_ms);
	fprintf(f, ", \"tput_original_qps\": ");
	json_num(f, s.tput_orig);
	fprintf(f, ", \"tput_wall_qps\": ");
	json_num(f, s.tput_wall);
	fprintf(f, ", \"lookups_wall_per_s\": ");
	json_num(f, s.tput_wall * o->ids[ii]);
	fprintf(f, ", \"p50_us\": ");
	json_num(f, s.p50_us);
	fprintf(f, ", \"p99_us\": ");
	json_num(f, s.p99_us);
	fprintf(f, ", \"proxy_user_us_per_query\": ");
	json_num(f, s.proxy_user_us_q);
	fprintf(f, ", \"proxy_sys_us_per_query\": ");
	json_num(f, s.proxy_sys_us_q);
	fprintf(f, ", \"proxy_vcsw_per_query\": ");
	json_num(f, s.proxy_vcsw_q);
	fprintf(f, ", \"backend_cpu_us_per_lookup\": ");
	json_num(f, s.backend_us_lookup);
	fprintf(f, ", \"backend_conns\": ");
	json_num(f, s.backend_conns);
	int direct = find_path(o, ratio_bases[0]);
	if (direct >= 0) {
		cell_summary_t d = cell(o, res, direct, ti, ii);
		fprintf(f, ", \"backend_capacity\": ");
		json_num(f, d.backend_us_lookup / s.backend_us_lookup);
	}
	fprintf(f, ", \"errors\": %" PRId64 ", \"mismatches\": %" PRId64 ",\n     \"runs\": [",
		s.errors, s.mismatches);
	for (int r = 0; r < o->repeat; r++) {
		fputs(r ? ", " : "", f);
		json_run(f, &res[ridx(o, p, ti, ii, r)]);
	}
	fprintf(f, "]}");
}

/* "ratios": every path against direct and relay, where present. */
static void json_ratios(FILE *f, const bench_opts_t *o, const run_result_t *res)
{
	bool first = true;
	fprintf(f, "  \"ratios\": [");
	for (int b = 0; b < 2; b++) {
		int base = find_path(o, ratio_bases[b]);
		for (int p = 0; p < o->npaths; p++) {
			for (int ti = 0; ratio_wanted(o, p, b, base) && ti < o->nthreads; ti++) {
				for (int ii = 0; ii < o->nids; ii++) {
					cell_summary_t a = cell(o, res, p, ti, ii),
						       c = cell(o, res, base, ti, ii);
					fprintf(f, "%s\n    {\"path\": ", first ? "" : ",");
					json_str(f, o->paths[p].name);
					fprintf(f,
						", \"vs\": \"%s\", \"threads\": %d, \"ids\": %d, "
						"\"tput_wall_ratio\": ",
						ratio_bases[b], o->threads[ti], o->ids[ii]);
					json_num(f, a.tput_wall / c.tput_wall);
					fprintf(f, ", \"p50_ratio\": ");
					json_num(f, a.p50_us / c.p50_us);
					fputc('}', f);
					first = false;
				}
			}
		}
	}
	fprintf(f, "\n  ]\n");
}

/* Writes every figure of the run to path as JSON. */
static void write_json(const bench_opts_t *o, const run_result_t *res, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "mongoplex-bench: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "{\n  \"tool\": \"mongoplex-bench\",\n");
	json_config(f, o);
	fprintf(f,
		"  \"formulas\": {\"total_time_ms\": \"sum over threads of each thread's elapsed "
		"time\", "
		"\"tput_original_qps\": \"threads*queries_per_thread / (total_time_s / threads)\", "
		"\"tput_wall_qps\": \"threads*queries_per_thread / wall_s\", "
		"\"lookups_wall_per_s\": \"tput_wall_qps * ids\", "
		"\"medians\": \"each figure is the median over the repeats\"},\n");
	fprintf(f, "  \"results\": [\n");
	for (int p = 0; p < o->npaths; p++) {
		for (int ti = 0; ti < o->nthreads; ti++) {
			for (int ii = 0; ii < o->nids; ii++) {
				json_cell(f, o, res, p, ti, ii);
				bool last = p == o->npaths - 1 && ti == o->nthreads - 1 &&
					    ii == o->nids - 1;
				fputs(last ? "\n" : ",\n", f);
			}
		}
	}
	fprintf(f, "  ],\n");
	json_ratios(f, o, res);
	fprintf(f, "}\n");
	fclose(f);
	fprintf(stderr, "wrote %s\n", path);
}

/* ------------------------------------------------------------------------ */
/* run mode: gnuplot                                                         */
/* ------------------------------------------------------------------------ */

/* Gnuplot script: wall throughput vs threads, log x, one line per
 * path x ids (colour = path, dash pattern = ids). Data is inline. */
static void write_gnuplot_script(FILE *f, const bench_opts_t *o, const run_result_t *res,
				 const char *png)
{
	fprintf(f, "set terminal pngcairo size 1200,800 noenhanced\nset output '%s'\n", png);
	fprintf(f,
		"set title 'mongoplex-bench: wall-clock throughput (%" PRId64
		" queries/thread, median of %d)'\n",
		o->queries, o->repeat);
	fprintf(f, "set logscale x\nset xrange [%g:%g]\n", o->threads[0] * 0.8, /* sorted */
		o->threads[o->nthreads - 1] * 1.25);
	fprintf(f,
		"set xlabel 'client threads (%s)'\nset ylabel 'queries/s (wall clock)'\n"
		"set grid\nset key outside right\nset xtics (",
		o->pool_size ? "one shared client pool" : "one client per thread");
	for (int ti = 0; ti < o->nthreads; ti++) {
		fprintf(f, "%s%d", ti ? ", " : "", o->threads[ti]);
	}
	fprintf(f, ")\n");
	for (int p = 0; p < o->npaths; p++) {
		for (int ii = 0; ii < o->nids; ii++) {
			fprintf(f, "$d%d_%d << EOD\n", p, ii);
			for (int ti = 0; ti < o->nthreads; ti++) {
				fprintf(f, "%d %.1f\n", o->threads[ti],
					cell(o, res, p, ti, ii).tput_wall);
			}
			fprintf(f, "EOD\n");
		}
	}
	fprintf(f, "plot ");
	for (int p = 0; p < o->npaths; p++) {
		for (int ii = 0; ii < o->nids; ii++) {
			fprintf(f,
				"%s$d%d_%d with linespoints lw 2 lc %d dt %d title '%s, %d id%s'",
				p || ii ? ", \\\n     " : "", p, ii, p + 1, ii + 1,
				o->paths[p].name, o->ids[ii], o->ids[ii] == 1 ? "" : "s");
		}
	}
	fprintf(f, "\n");
}

/* Runs "gnuplot script"; returns its exit status (127: not installed). */
static int spawn_gnuplot(const char *script)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) < 0) {
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes png via gnuplot; the script is kept beside it as png.gp. */
static void write_plot(const bench_opts_t *o, const run_result_t *res, const char *png)
{
	char script[4096];
	snprintf(script, sizeof script, "%s.gp", png);
	FILE *f = fopen(script, "w");
	if (!f) {
		fprintf(stderr, "mongoplex-bench: cannot write %s: %s\n", script, strerror(errno));
		return;
	}
	write_gnuplot_script(f, o, res, png);
	fclose(f);
	int st = spawn_gnuplot(script);
	if (st == 127) {
		fprintf(stderr, "gnuplot not found: skipping the plot (script left in %s)\n",
			script);
	} else if (st != 0) {
		fprintf(stderr, "gnuplot failed (status %d): see %s\n", st, script);
	} else {
		fprintf(stderr, "wrote %s\n", png);
	}
}

/* ------------------------------------------------------------------------ */
/* run mode: driver                                                          */
/* ------------------------------------------------------------------------ */

/* Before anything is timed, every path must answer and hold the docs. */
static void check_paths(const bench_opts_t *o)
{
	for (int p = 0; p < o->npaths; p++) {
		char shown[512];
		redact_uri(o->paths[p].uri, shown, sizeof shown);
		mongoc_client_t *c = make_client(o->paths[p].uri);
		mongoc_collection_t *coll = mongoc_client_get_collection(c, BENCH_DB, BENCH_COLL);
		int64_t n = doc_count(c, coll, shown);
		mongoc_collection_destroy(coll);
		mongoc_client_destroy(c);
		if (n < o->docs) {
			fprintf(stderr,
				"mongoplex-bench: path %s (%s) holds %" PRId64
				" docs in %s.%s, want %" PRId64
				" (run 'mongoplex-bench load' first, or pass --docs)\n",
				o->paths[p].name, shown, n, BENCH_DB, BENCH_COLL, o->docs);
			exit(EXIT_SETUP);
		}
	}
}

/* Untimed queries on every path before the first cell, so that JIT
 * compilers and caches of servers and proxies are warm for all paths. */
static void warm_paths(const bench_opts_t *o)
{
	bench_opts_t wo = *o;
	wo.queries = o->warmup;
	for (int p = 0; o->warmup && p < o->npaths; p++) {
		for (int ii = 0; ii < o->nids; ii++) {
			run_result_t r = run_once(&wo, &o->paths[p], 1, o->ids[ii], 999);
			if (r.errors || r.mismatches) {
				fprintf(stderr,
					"warm-up on %s: %" PRId64 " errors, %" PRId64
					" mismatches\n",
					o->paths[p].name, r.errors, r.mismatches);
			}
		}
	}
}

/* One progress line per timed run on stderr, with the estimated time left. */
static void log_run(const bench_opts_t *o, int done, int total, const char *path, int th, int ids,
		    int rep, const run_result_t *r, double eta_s)
{
	double qps = (double)r->queries / (r->wall_ms / 1e3);
	fprintf(stderr,
		"[%3d/%d] threads=%-3d ids=%-3d rep %d/%d %-14s %8.0f q/s wall  p50 %6.0f us  eta "
		"%4.0f min",
		done, total, th, ids, rep + 1, o->repeat, path, qps, r->p50_us, eta_s / 60);
	if (r->errors || r->mismatches) {
		fprintf(stderr, "  ERRORS %" PRId64 " MISMATCHES %" PRId64, r->errors,
			r->mismatches);
	}
	fprintf(stderr, "\n");
}

/* Runs every cell; inside a cell, repeats x paths interleaved, in the
 * order bench_order gives each repeat: every path goes first, and follows
 * every other path, equally often over its period (order.h). */
static void measure_all(const bench_opts_t *o, run_result_t *res)
{
	int total = o->nthreads * o->nids * o->repeat * o->npaths, done = 0;
	double all_q = 0, done_q = 0, t0 = now_ms();
	for (int ti = 0; ti < o->nthreads; ti++) {
		bench_opts_t co = cell_opts(o, o->threads[ti]);
		all_q +=
		    (double)o->threads[ti] * (double)(co.queries * o->nids * o->repeat * o->npaths);
	}
	for (int ti = 0; ti < o->nthreads; ti++) {
		bench_opts_t co = cell_opts(o, o->threads[ti]);
		for (int ii = 0; ii < o->nids; ii++) {
			for (int rep = 0; rep < o->repeat; rep++) {
				int order[MAX_PATHS];

				bench_order(o->npaths, rep, order);
				for (int k = 0; k < o->npaths; k++) {
					int p = order[k];
					run_result_t *r = &res[ridx(o, p, ti, ii, rep)];
					*r = run_once(&co, &o->paths[p], o->threads[ti], o->ids[ii],
						      rep);
					done_q += (double)r->queries;
					double eta_s =
					    (now_ms() - t0) / 1e3 * (all_q - done_q) / done_q;
					log_run(o, ++done, total, o->paths[p].name, o->threads[ti],
						o->ids[ii], rep, r, eta_s);
				}
			}
		}
	}
}

/* run mode: measure, print, write JSON and plot; 1 if any query failed. */
static int cmd_run(const bench_opts_t *o)
{
	size_t n = ridx(o, o->npaths, 0, 0, 0);
	run_result_t *res = xcalloc(n, sizeof *res);
	int64_t bad = 0;
	check_paths(o);
	warm_paths(o);
	double t0 = now_ms();
	measure_all(o, res);
	fprintf(stderr, "measured in %.1f s\n", (now_ms() - t0) / 1e3);
	print_report(o, res);
	fflush(stdout); /* the report first, then the messages about files */
	if (o->json) {
		write_json(o, res, o->json);
	}
	if (o->plot) {
		write_plot(o, res, o->plot);
	}
	for (size_t i = 0; i < n; i++) {
		bad += res[i].errors + res[i].mismatches;
	}
	if (bad) {
		fprintf(stderr,
			"mongoplex-bench: %" PRId64
			" failed or wrong queries (see the errors tables)\n",
			bad);
	}
	free(res);
	return bad ? EXIT_MEASURE_ERRORS : 0;
}

int main(int argc, char **argv)
{
	bench_opts_t o;
	parse_args(&o, argc, argv);
	mongoc_init();
	int rc = o.load ? cmd_load(&o) : cmd_run(&o);
	mongoc_cleanup();
	return rc;
}
