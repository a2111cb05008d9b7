/*
 * test_batch_numeric.c — differential test of the batcher on numeric _id
 * values (issue 8, item 2: a client asking {_id: 0} received another
 * client's {_id: NumberDecimal("0.5")}).
 *
 * Random mixed numeric ids (int32; int64 near ±2^53 and ±2^63; doubles with
 * -0.0, ±inf, subnormals, 2^53±1, NaN; decimals: integers, fractions, 19-34
 * digits, huge and tiny exponents, -0, NaN, ±Infinity) are inserted
 * directly into the backend, then looked up by many client threads at once
 * through a proxy that forces merging (batch_max_wait_us = 20000, two
 * backend connections). Every lookup is also sent directly to the same
 * backend, and the documents must be the same bytes, in the same order
 * (FerretDB returns an $in in insertion order: compared as a multiset
 * there). The oracle is the backend itself: mongo-java-server's equality
 * differs from mongod's for some values (the decimal 1E-400 equals 0, the
 * double 2^63 equals the int64 2^63-1), and the batcher must reproduce what
 * the backend answers to each lookup alone.
 *
 * MONGOPLEX_NUMERIC_SEED, _THREADS and _LOOKUPS change the run.
 * Worker threads never call criterion; the main thread asserts.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_VALUES 400
#define MAX_IN	   4

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);

	return s && *s ? atoi(s) : dflt;
}

/* xorshift64*: deterministic for a seed. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ULL;
}

static int rnd_below(int n)
{
	return (int)(rnd() % (uint64_t)n);
}

/* ---- values --------------------------------------------------------------- */

struct values {
	bson_value_t v[MAX_VALUES];
	int n;
};

static void add_i32(struct values *a, int32_t x)
{
	if (a->n < MAX_VALUES)
		a->v[a->n++] = (bson_value_t){.value_type = BSON_TYPE_INT32, .value.v_int32 = x};
}

static void add_i64(struct values *a, int64_t x)
{
	if (a->n < MAX_VALUES)
		a->v[a->n++] = (bson_value_t){.value_type = BSON_TYPE_INT64, .value.v_int64 = x};
}

static void add_dbl(struct values *a, double x)
{
	if (a->n < MAX_VALUES)
		a->v[a->n++] = (bson_value_t){.value_type = BSON_TYPE_DOUBLE, .value.v_double = x};
}

static void add_dec(struct values *a, const char *s)
{
	bson_value_t v = {.value_type = BSON_TYPE_DECIMAL128};

	cr_assert(bson_decimal128_from_string(s, &v.value.v_decimal128), "bad decimal %s", s);
	if (a->n < MAX_VALUES)
		a->v[a->n++] = v;
}

/* A random decimal: digits and exponent of every kind. */
static void add_random_dec(struct values *a)
{
	char s[80];
	int nd = 1 + rnd_below(34), len = 0;

	if (rnd() & 1)
		s[len++] = '-';
	for (int i = 0; i < nd; i++)
		s[len++] = (char)('0' + (i == 0 ? 1 + rnd_below(9) : rnd_below(10)));
	switch (rnd_below(4)) {
	case 0: /* an integer */
		s[len] = '\0';
		break;
	case 1: /* a small exponent either way */
		snprintf(s + len, sizeof(s) - (size_t)len, "E%d", rnd_below(21) - 10);
		break;
	default: /* huge or tiny */
		snprintf(s + len, sizeof(s) - (size_t)len, "E%d", rnd_below(12000) - 6100);
		break;
	}
	add_dec(a, s);
}

static const char *const fixed_decimals[] = {
    "0",
    "-0",
    "0E-20",
    "0.5",
    "0.50",
    "-0.5",
    "1",
    "1.0",
    "1E+3",
    "123",
    "9007199254740992",
    "9007199254740993",
    "1234567890123456789",
    "-1234567890123456789",
    "9223372036854775807",
    "9223372036854775808",
    "1234567890123456789012345678901234",
    "1E-400",
    "1E+400",
    "-5E-7",
    "NaN",
    "Infinity",
    "-Infinity",
};

static void fixed_values(struct values *a, bool dec)
{
	const int64_t p53 = INT64_C(1) << 53;

	/* Decimals first: the decimal 0.5 is stored, the double 0.5 is then a
	 * duplicate key (the leak of issue 8 needs exactly that). */
	for (size_t i = 0; dec && i < sizeof(fixed_decimals) / sizeof(*fixed_decimals); i++)
		add_dec(a, fixed_decimals[i]);
	for (int k = -3; k <= 3; k++)
		add_i32(a, k);
	add_i32(a, INT32_MAX);
	add_i32(a, INT32_MIN);
	for (int d = -2; d <= 2; d++) {
		add_i64(a, p53 + d);
		add_i64(a, -p53 + d);
		add_i64(a, INT64_MAX - 2 - d);
		add_i64(a, INT64_MIN + 2 + d);
	}
	add_dbl(a, 0.0);
	add_dbl(a, -0.0);
	add_dbl(a, 0.5);
	add_dbl(a, -0.5);
	add_dbl(a, 1.0);
	add_dbl(a, INFINITY);
	add_dbl(a, -INFINITY);
	if (dec) /* FerretDB fails NaN lookups, unlike each other directly and proxied */
		add_dbl(a, NAN);
	add_dbl(a, 5e-324);		     /* smallest subnormal */
	add_dbl(a, 2.2250738585072009e-308); /* largest subnormal */
	add_dbl(a, 2.2250738585072014e-308); /* smallest normal */
	add_dbl(a, (double)(p53 - 1));
	add_dbl(a, (double)p53);
	add_dbl(a, (double)(p53 + 2)); /* 2^53 + 1 is no double */
	add_dbl(a, -(double)p53);
	add_dbl(a, 9223372036854775808.0);  /* 2^63 */
	add_dbl(a, -9223372036854775808.0); /* -2^63 */
	add_dbl(a, 1.2345678901234568e18);
	add_dbl(a, 1e300);
}

static void random_values(struct values *a, int n, bool dec)
{
	for (int i = 0; i < n; i++) {
		int64_t off = (int64_t)rnd_below(2001) - 1000;

		switch (rnd_below(dec ? 6 : 5)) {
		case 0:
			add_i32(a, (int32_t)(rnd() >> 32));
			break;
		case 1:
			add_i64(a, (rnd() & 1 ? (INT64_C(1) << 53) : -(INT64_C(1) << 53)) + off);
			break;
		case 2:
			add_i64(a, rnd() & 1 ? INT64_MAX - (off < 0 ? -off : off)
					     : INT64_MIN + (off < 0 ? -off : off));
			break;
		case 3:
			add_dbl(a, ldexp((double)(int64_t)(rnd() >> 11) / 9007199254740992.0,
					 rnd_below(2200) - 1100)); /* subnormal to huge */
			break;
		case 4:
			add_dbl(a, (double)(rnd_below(64) - 32) / 4.0);
			break;
		default:
			add_random_dec(a);
			break;
		}
	}
}

/* ---- lookups ----------------------------------------------------------------- */

struct found {
	bool ok;
	uint32_t code;
	bson_t **docs;
	int n;
};

struct lookup {
	const char *coll; /* "n" (random values) or a trap collection */
	bson_t filter;	  /* {_id: v} or {_id: {$in: [...]}} */
	struct found direct, proxied;
};

static void found_clear(struct found *f)
{
	for (int i = 0; i < f->n; i++)
		bson_destroy(f->docs[i]);
	free(f->docs);
	memset(f, 0, sizeof(*f));
}

/* The find's documents, as the cursor returns them (getMores included). */
static void run_lookup(mongoc_client_t *c, const char *db, const char *coll, const bson_t *filter,
		       struct found *f)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
	const bson_t *doc;
	bson_error_t err;
	int cap = 0;

	memset(f, 0, sizeof(*f));
	while (mongoc_cursor_next(cur, &doc)) {
		if (f->n == cap) {
			cap = cap ? cap * 2 : 4;
			f->docs = realloc(f->docs, (size_t)cap * sizeof(*f->docs));
		}
		f->docs[f->n++] = bson_copy(doc);
	}
	f->ok = !mongoc_cursor_error(cur, &err);
	f->code = f->ok ? 0 : err.code;
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
}

static int cmp_doc_bytes(const void *a, const void *b)
{
	const bson_t *x = *(bson_t *const *)a, *y = *(bson_t *const *)b;
	uint32_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(bson_get_data(x), bson_get_data(y), n);

	return c ? c : (int)x->len - (int)y->len;
}

/* Same outcome, same documents byte for byte (in order, unless `as_set`). */
static bool same_found(struct found *a, struct found *b, bool as_set)
{
	if (a->ok != b->ok || a->code != b->code || a->n != b->n)
		return false;
	if (as_set && a->n > 1) {
		qsort(a->docs, (size_t)a->n, sizeof(*a->docs), cmp_doc_bytes);
		qsort(b->docs, (size_t)b->n, sizeof(*b->docs), cmp_doc_bytes);
	}
	for (int i = 0; i < a->n; i++)
		if (cmp_doc_bytes(&a->docs[i], &b->docs[i]) != 0)
			return false;
	return true;
}

static void build_filter(bson_t *f, const struct values *pool, int nids)
{
	bson_t cond, arr;
	char key[16];
	const char *k;

	bson_init(f);
	if (nids == 1) {
		bson_append_value(f, "_id", 3, &pool->v[rnd_below(pool->n)]);
		return;
	}
	BSON_APPEND_DOCUMENT_BEGIN(f, "_id", &cond);
	BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
	for (int i = 0; i < nids; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_value(&arr, k, -1, &pool->v[rnd_below(pool->n)]);
	}
	bson_append_array_end(&cond, &arr);
	bson_append_document_end(f, &cond);
}

/* A number equal to 0 (of any type or sign). */
static bool is_zero(const bson_value_t *v)
{
	char str[BSON_DECIMAL128_STRING];

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32 == 0;
	case BSON_TYPE_INT64:
		return v->value.v_int64 == 0;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double == 0.0;
	case BSON_TYPE_DECIMAL128:
		bson_decimal128_to_string(&v->value.v_decimal128, str);
		return strspn(str, "-0.") == strcspn(str, "E");
	default:
		return false;
	}
}

/* Zero is never stored: a lookup of {_id: 0} must find nothing (the leak
 * handed it another client's decimal 0.5, 19-digit decimal or 1E-400, all
 * taken for 0 by the old comparison). */
static int insert_values(mongoc_client_t *direct, const char *db, const char *coll,
			 const struct values *a)
{
	mongoc_collection_t *col = mongoc_client_get_collection(direct, db, coll);
	int stored = 0;

	for (int i = 0; i < a->n; i++) {
		bson_t doc = BSON_INITIALIZER;
		bson_error_t err;

		if (is_zero(&a->v[i]))
			continue;
		bson_append_value(&doc, "_id", 3, &a->v[i]);
		BSON_APPEND_INT32(&doc, "tag", i);
		stored += mongoc_collection_insert_one(col, &doc, NULL, NULL, &err); /* dups: no */
		bson_destroy(&doc);
	}
	mongoc_collection_destroy(col);
	return stored;
}

/* ---- the leak of issue 8, as found --------------------------------------------- */

/* Collection t05 holds the decimal 0.5, t19 the decimal 1234567890123456789
 * (each with a few integers and no 0); lookups of 0 merged with lookups of
 * the double 0.5 or 1.2345678901234568e18 (which find them) received them. */
static void insert_traps(mongoc_client_t *direct, const char *db)
{
	struct values t05 = {.n = 0}, t19 = {.n = 0};

	add_dec(&t05, "0.5");
	add_dec(&t19, "1234567890123456789");
	for (int k = 1; k <= 4; k++) {
		add_i32(&t05, k);
		add_i32(&t19, k);
	}
	cr_assert_eq(insert_values(direct, db, "t05", &t05), t05.n);
	cr_assert_eq(insert_values(direct, db, "t19", &t19), t19.n);
}

static void trap_lookup(struct lookup *lk)
{
	bool t05 = rnd() & 1;
	int r = rnd_below(3);

	lk->coll = t05 ? "t05" : "t19";
	bson_init(&lk->filter);
	if (r == 0)
		BSON_APPEND_INT32(&lk->filter, "_id", 0);
	else if (r == 1)
		BSON_APPEND_DOUBLE(&lk->filter, "_id", t05 ? 0.5 : 1.2345678901234568e18);
	else
		BSON_APPEND_INT32(&lk->filter, "_id", 1 + rnd_below(4));
}

/* ---- threads ----------------------------------------------------------------- */

struct worker {
	mongoc_client_t *c;
	const char *db;
	struct lookup *lk;
	int n;
	pthread_barrier_t *start;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(w->start);
	for (int i = 0; i < w->n; i++)
		run_lookup(w->c, w->db, w->lk[i].coll, &w->lk[i].filter, &w->lk[i].proxied);
	return NULL;
}

static void log_diff(const struct lookup *lk)
{
	char *f = bson_as_canonical_extended_json(&lk->filter, NULL);
	char line[2048];
	int len = snprintf(line, sizeof(line),
			   "%s filter %s: direct %s %d docs, proxy %s %d docs:", lk->coll, f,
			   lk->direct.ok ? "ok" : "error", lk->direct.n,
			   lk->proxied.ok ? "ok" : "error", lk->proxied.n);

	for (int i = 0; i < lk->proxied.n && len < (int)sizeof(line) - 200; i++) {
		char *d = bson_as_canonical_extended_json(lk->proxied.docs[i], NULL);

		len += snprintf(line + len, sizeof(line) - (size_t)len, " %s", d);
		bson_free(d);
	}
	cr_log_error("%s", line);
	bson_free(f);
}

Test(batch_numeric, differential_mixed_numbers, .timeout = 600)
{
	bool dec = !h_backend_is("ferretdb"); /* FerretDB 1.24 drops the connection on it */
	bool as_set = h_backend_is("ferretdb");
	int seed = env_int("MONGOPLEX_NUMERIC_SEED", 8);
	int nthreads = env_int("MONGOPLEX_NUMERIC_THREADS", 16);
	int per = env_int("MONGOPLEX_NUMERIC_LOOKUPS", 150);
	struct values stored = {.n = 0}, queried = {.n = 0};
	struct worker w[64];
	pthread_t th[64];
	pthread_barrier_t start;
	mongoc_client_t *direct = h_backend_client("numeric-direct");
	struct lookup *lk;
	struct proxy *p;
	char db[64];
	int nstored, diffs = 0, total;
	bson_t st;

	cr_assert_leq(nthreads, 64);
	rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)seed;
	h_unique(db, sizeof(db), "batch_numeric");
	fixed_values(&stored, dec);
	random_values(&stored, 120, dec);
	nstored = insert_values(direct, db, "n", &stored);
	if (dec)
		insert_traps(direct, db);
	/* Queries: the stored values and fresh ones, int 0 and the double 0.5
	 * often (they met the decimal 0.5 in the leak). */
	fixed_values(&queried, dec);
	random_values(&queried, 80, dec);
	for (int i = 0; i < stored.n && queried.n < MAX_VALUES - 8; i++)
		queried.v[queried.n++] = stored.v[i];
	for (int i = 0; i < 6; i++) {
		add_i32(&queried, 0);
		add_dbl(&queried, 0.5);
	}
	total = nthreads * per;
	lk = calloc((size_t)total, sizeof(*lk));
	for (int i = 0; i < total; i++) {
		int r = rnd_below(10);

		if (dec && r == 0) {
			trap_lookup(&lk[i]);
		} else {
			lk[i].coll = "n";
			build_filter(&lk[i].filter, &queried,
				     r < 6 ? 1 : 2 + rnd_below(MAX_IN - 1));
		}
		run_lookup(direct, db, lk[i].coll, &lk[i].filter, &lk[i].direct);
	}
	p = proxy_start("pool_size = 2\nbatching = on\nbatch_max_wait_us = 20000\n");
	pthread_barrier_init(&start, NULL, (unsigned)nthreads);
	for (int t = 0; t < nthreads; t++) {
		char app[32];

		snprintf(app, sizeof(app), "numeric-%d", t);
		w[t] = (struct worker){h_proxy_client(p, app), db, lk + t * per, per, &start};
		cr_assert_eq(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
	}
	for (int t = 0; t < nthreads; t++) {
		pthread_join(th[t], NULL);
		mongoc_client_destroy(w[t].c);
	}
	pthread_barrier_destroy(&start);
	for (int i = 0; i < total; i++) {
		if (!same_found(&lk[i].direct, &lk[i].proxied, as_set)) {
			if (diffs < 20)
				log_diff(&lk[i]);
			diffs++;
		}
		found_clear(&lk[i].direct);
		found_clear(&lk[i].proxied);
		bson_destroy(&lk[i].filter);
	}
	free(lk);
	proxy_stats(p, &st);
	cr_log_info("batch_numeric (%s, seed %d%s): %d values tried, %d stored; %d lookups by %d "
		    "clients compared byte for byte%s; %d differ; batches_sent %lld, "
		    "batch_lookups %lld, batch_lookups_merged %lld, batch_fallbacks %lld, "
		    "batch_getmores %lld",
		    h_backend_name(), seed, dec ? "" : ", no Decimal128", stored.n, nstored, total,
		    nthreads, as_set ? " (as multisets)" : "", diffs,
		    (long long)h_get_int(&st, "counters.batches_sent", -1),
		    (long long)h_get_int(&st, "counters.batch_lookups", -1),
		    (long long)h_get_int(&st, "counters.batch_lookups_merged", -1),
		    (long long)h_get_int(&st, "counters.batch_fallbacks", -1),
		    (long long)h_get_int(&st, "counters.batch_getmores", -1));
	cr_expect_eq(diffs, 0,
		     "%d of %d lookups through the batcher differ from the backend's "
		     "own answer",
		     diffs, total);
	cr_expect_gt(h_get_int(&st, "counters.batch_lookups_merged", 0), total / 4,
		     "the lookups were not merged: the test proves nothing");
	bson_destroy(&st);
	proxy_stop(p);
	h_drop_db(direct, db);
	mongoc_client_destroy(direct);
}
