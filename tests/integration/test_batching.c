/*
 * test_batching.c — the _id batcher against the real backend through the real
 * proxy, compared query by query with the same query sent directly to the
 * backend (docs/batching.md, "_id coalescing").
 *
 *   differential_32_clients   the main test: a collection whose _id values
 *                             are of mixed types (with equality traps), 32
 *                             threads each with a proxy client and a direct
 *                             client, thousands of random lookups and
 *                             non-batchable finds; every reply compared
 *                             document by document and in order
 *   merged_failure_rerun_alone, cluster_time, oversized_member(_near_16mb),
 *   batching_off, max_wait_single_client
 *                             the smaller cases (a)-(e) of the brief
 *   equality_traps_merged, namespaces_kept_apart, pipelined_lookups_one_
 *   connection, abandoned_lookups, long_in_lists_and_small_batch_max_ids,
 *   lookups_that_find_nothing
 *                             merging forced (batch_max_wait_us, one backend
 *                             connection) on the cases that matter
 *   empty_bindata_id, duplicate_filter_key, nul_in_collection_name,
 *   single_batch_with_batch_size
 *                             reproductions of batcher bugs (the last one
 *                             fixed in 9102de1; see the comments at each)
 *
 * Replies are compared as the documents obtained by iterating the cursor
 * (libmongoc getMores included), so a direct reply split over batches equals
 * a batched reply that carries everything in its first batch. The backend
 * returns an $in in _id index order, which the batcher reproduces; FerretDB
 * returns it in insertion order, so there documents are compared as a
 * multiset (logged), and Decimal128 is not used (FerretDB 1.24 closes the
 * connection on it).
 *
 * Worker threads never call criterion: they record results, the main thread
 * asserts.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* ================================================================ helpers */

static bool backend_is_ferretdb(void)
{
	return h_backend_is("ferretdb");
}

/* Does the backend return an $in in _id order (as mongod's _id index scan)? */
static bool backend_orders_in_by_id(void)
{
	return !backend_is_ferretdb();
}

/* Does the backend take Decimal128 (FerretDB 1.24 drops the connection)? */
static bool backend_has_decimal(void)
{
	return !backend_is_ferretdb();
}

/* mongo-java-server's own comparison quirks (not MongoDB's): BinData equal
 * whatever the subtype, and a double beyond the int64 range equal to
 * INT64_MAX/INT64_MIN (it converts the double to a long). The data set leaves
 * those traps out there. */
static bool backend_is_java(void)
{
	return h_backend_is("mongo-java-server");
}

/* xorshift64*: a per-thread deterministic generator. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static int rnd_int(uint64_t *s, int n)
{
	return (int)(rnd(s) % (uint64_t)n);
}

/* A growable array of owned bson values. */
struct vals {
	bson_value_t *v;
	int n, cap;
};

static void vals_push(struct vals *a, const bson_value_t *v)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->v = realloc(a->v, (size_t)a->cap * sizeof(*a->v));
	}
	bson_value_copy(v, &a->v[a->n++]);
}

static void vals_free(struct vals *a)
{
	for (int i = 0; i < a->n; i++)
		bson_value_destroy(&a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

static void push_i32(struct vals *a, int32_t x)
{
	bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = x};

	vals_push(a, &v);
}

static void push_i64(struct vals *a, int64_t x)
{
	bson_value_t v = {.value_type = BSON_TYPE_INT64, .value.v_int64 = x};

	vals_push(a, &v);
}

static void push_dbl(struct vals *a, double x)
{
	bson_value_t v = {.value_type = BSON_TYPE_DOUBLE, .value.v_double = x};

	vals_push(a, &v);
}

static void push_dec(struct vals *a, const char *s)
{
	bson_value_t v = {.value_type = BSON_TYPE_DECIMAL128};

	bson_decimal128_from_string(s, &v.value.v_decimal128);
	vals_push(a, &v);
}

static void push_str(struct vals *a, const char *s)
{
	bson_value_t v = {.value_type = BSON_TYPE_UTF8};

	v.value.v_utf8.str = (char *)s;
	v.value.v_utf8.len = (uint32_t)strlen(s);
	vals_push(a, &v);
}

static void push_oid(struct vals *a, uint32_t seed)
{
	bson_value_t v = {.value_type = BSON_TYPE_OID};

	for (int i = 0; i < 12; i++)
		v.value.v_oid.bytes[i] =
		    (uint8_t)((seed * 2654435761u) >> ((i % 4) * 8)) ^ (uint8_t)i;
	v.value.v_oid.bytes[0] = (uint8_t)(0x60 + (seed & 0x0f));
	vals_push(a, &v);
}

static void push_date(struct vals *a, int64_t ms)
{
	bson_value_t v = {.value_type = BSON_TYPE_DATE_TIME, .value.v_datetime = ms};

	vals_push(a, &v);
}

static void push_bin(struct vals *a, bson_subtype_t st, const char *bytes, uint32_t len)
{
	bson_value_t v = {.value_type = BSON_TYPE_BINARY};

	v.value.v_binary.subtype = st;
	v.value.v_binary.data = (uint8_t *)bytes;
	v.value.v_binary.data_len = len;
	vals_push(a, &v);
}

/* ---- running a find and comparing -------------------------------------- */

struct result {
	bool ok;
	uint32_t domain, code;
	char msg[200];
	bson_t **docs;
	int ndocs, cap;
};

static void result_clear(struct result *r)
{
	for (int i = 0; i < r->ndocs; i++)
		bson_destroy(r->docs[i]);
	free(r->docs);
	memset(r, 0, sizeof(*r));
}

static void result_add(struct result *r, const bson_t *doc)
{
	if (r->ndocs == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 16;
		r->docs = realloc(r->docs, (size_t)r->cap * sizeof(*r->docs));
	}
	r->docs[r->ndocs++] = bson_copy(doc);
}

/* find with opts, iterating the whole cursor. */
static void run_find(mongoc_client_t *c, const char *db, const char *coll, const bson_t *filter,
		     const bson_t *opts, struct result *r)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, filter, opts, NULL);
	const bson_t *doc;
	bson_error_t err;

	memset(r, 0, sizeof(*r));
	while (mongoc_cursor_next(cur, &doc))
		result_add(r, doc);
	r->ok = !mongoc_cursor_error(cur, &err);
	if (!r->ok) {
		r->domain = err.domain;
		r->code = err.code;
		snprintf(r->msg, sizeof(r->msg), "%s", err.message);
	}
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
}

/* A raw command; on success the cursor's first batch becomes the documents. */
static void run_cmd(mongoc_client_t *c, const char *db, const bson_t *cmd, struct result *r,
		    bson_t *reply_out)
{
	bson_t reply;
	bson_error_t err;
	bson_iter_t it, arr;

	memset(r, 0, sizeof(*r));
	r->ok = mongoc_client_command_simple(c, db, cmd, NULL, &reply, &err);
	if (!r->ok) {
		r->domain = err.domain;
		r->code = err.code;
		snprintf(r->msg, sizeof(r->msg), "%s", err.message);
	} else if (bson_iter_init(&it, &reply) &&
		   bson_iter_find_descendant(&it, "cursor.firstBatch", &arr) &&
		   BSON_ITER_HOLDS_ARRAY(&arr) && bson_iter_recurse(&arr, &it)) {
		while (bson_iter_next(&it)) {
			const uint8_t *data;
			uint32_t len;
			bson_t d;

			bson_iter_document(&it, &len, &data);
			if (bson_init_static(&d, data, len))
				result_add(r, &d);
		}
	}
	if (reply_out != NULL)
		bson_copy_to(&reply, reply_out);
	bson_destroy(&reply);
}

static int cmp_doc_bytes(const void *a, const void *b)
{
	const bson_t *x = *(bson_t *const *)a, *y = *(bson_t *const *)b;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(bson_get_data(x), bson_get_data(y), x->len);
}

static char *docs_json(const struct result *r)
{
	bson_string_t *s = bson_string_new("[");

	for (int i = 0; i < r->ndocs; i++) {
		char *j = bson_as_relaxed_extended_json(r->docs[i], NULL);

		if (strlen(j) > 300)
			strcpy(j + 290, "...}");
		bson_string_append_printf(s, "%s%s", i ? ", " : "", j);
		bson_free(j);
		if (s->len > 3000) {
			bson_string_append(s, ", ...");
			break;
		}
	}
	bson_string_append(s, "]");
	return bson_string_free(s, false);
}

/* Same outcome? On a difference *why (malloc'd) says what differs. With
 * ordered false, documents are compared as a multiset (both sorted). */
static bool same_result(struct result *px, struct result *dr, bool ordered, char **why)
{
	*why = NULL;
	if (px->ok != dr->ok) {
		char *dj = docs_json(px->ok ? px : dr);

		*why = bson_strdup_printf("proxy %s, direct %s (%s: code %u %s; other: %d docs %s)",
					  px->ok ? "ok" : "error", dr->ok ? "ok" : "error",
					  px->ok ? "direct" : "proxy", px->ok ? dr->code : px->code,
					  px->ok ? dr->msg : px->msg,
					  px->ok ? px->ndocs : dr->ndocs, dj);
		bson_free(dj);
		return false;
	}
	if (!px->ok) {
		if (px->domain == dr->domain && px->code == dr->code)
			return true;
		/* The backend hung up: directly that is a stream error, through
		 * the proxy a HostUnreachable (6) reply to that request. */
		if (dr->domain == MONGOC_ERROR_STREAM && px->domain == MONGOC_ERROR_SERVER &&
		    px->code == 6)
			return true;
		*why = bson_strdup_printf("errors differ: proxy %u.%u \"%s\", direct %u.%u \"%s\"",
					  px->domain, px->code, px->msg, dr->domain, dr->code,
					  dr->msg);
		return false;
	}
	if (!ordered && px->ndocs > 1)
		qsort(px->docs, (size_t)px->ndocs, sizeof(bson_t *), cmp_doc_bytes);
	if (!ordered && dr->ndocs > 1)
		qsort(dr->docs, (size_t)dr->ndocs, sizeof(bson_t *), cmp_doc_bytes);
	if (px->ndocs == dr->ndocs) {
		int i = 0;

		while (i < px->ndocs && bson_equal(px->docs[i], dr->docs[i]))
			i++;
		if (i == px->ndocs)
			return true;
	}
	{
		char *pj = docs_json(px), *dj = docs_json(dr);

		*why = bson_strdup_printf(
		    "documents differ:\n    proxy  (%d): %s\n    direct (%d): %s", px->ndocs, pj,
		    dr->ndocs, dj);
		bson_free(pj);
		bson_free(dj);
	}
	return false;
}

/* ---- stats ------------------------------------------------------------- */

struct batch_stats {
	int64_t batches_sent, lookups, merged, getmores, fallbacks;
	int64_t ids_count, ids_le[11]; /* histograms.batch_ids buckets: 1 2 4 ... 1000 +Inf */
};

static const char *const ids_bounds[] = {"1",  "2",   "4",   "8",    "16",  "32",
					 "64", "128", "512", "1000", "+Inf"};

static void read_batch_stats(struct proxy *p, struct batch_stats *bs)
{
	bson_t st;
	char path[96];

	proxy_stats(p, &st);
	bs->batches_sent = h_get_int(&st, "counters.batches_sent", -1);
	bs->lookups = h_get_int(&st, "counters.batch_lookups", -1);
	bs->merged = h_get_int(&st, "counters.batch_lookups_merged", -1);
	bs->getmores = h_get_int(&st, "counters.batch_getmores", -1);
	bs->fallbacks = h_get_int(&st, "counters.batch_fallbacks", -1);
	bs->ids_count = h_get_int(&st, "histograms.batch_ids.count", -1);
	for (int i = 0; i < 11; i++) {
		snprintf(path, sizeof(path), "histograms.batch_ids.le.%s", ids_bounds[i]);
		bs->ids_le[i] = h_get_int(&st, path, -1);
	}
	bson_destroy(&st);
	cr_assert(bs->batches_sent >= 0 && bs->lookups >= 0 && bs->merged >= 0 &&
		      bs->fallbacks >= 0 && bs->ids_count >= 0 && bs->ids_le[0] >= 0,
		  "mongoplexStats lacks the batch counters/histogram");
}

static void log_batch_stats(const char *what, const struct batch_stats *bs)
{
	char hist[400] = "";

	for (int i = 0; i < 11; i++) {
		char one[40];

		snprintf(one, sizeof(one), "%s<=%s:%lld", i ? " " : "", ids_bounds[i],
			 (long long)bs->ids_le[i]);
		strcat(hist, one);
	}
	cr_log_info("%s: batches_sent %lld, batch_lookups %lld, batch_lookups_merged %lld, "
		    "batch_getmores %lld, batch_fallbacks %lld; batch_ids histogram (distinct ids "
		    "per merged query): %s",
		    what, (long long)bs->batches_sent, (long long)bs->lookups,
		    (long long)bs->merged, (long long)bs->getmores, (long long)bs->fallbacks, hist);
}

/* ================================================================ data set */

struct dataset {
	char db[64];
	struct vals stored;   /* every _id in the collection */
	struct vals variants; /* equal to a stored _id, another numeric type */
	struct vals missing;  /* in no document */
};

static char strbuf[256][16];

static void build_ids(struct dataset *ds)
{
	bool dec = backend_has_decimal();
	int ns = 0;

	/* int32, including 5 (queried as 5.0 and NumberLong(5)) */
	for (int k = -20; k < 200; k++) {
		push_i32(&ds->stored, k);
		push_dbl(&ds->variants, (double)k);
		push_i64(&ds->variants, k);
		if (dec && k % 7 == 0) {
			char s[16];

			snprintf(s, sizeof(s), "%d", k);
			push_dec(&ds->variants, s);
		}
	}
	/* int64: small ones (queried as int32/double), above 2^53 (2^53 and 2^53+1
	 * side by side: the double 9007199254740992.0 equals only the first) */
	for (int64_t k = 1000; k < 1020; k++) {
		push_i64(&ds->stored, k);
		push_i32(&ds->variants, (int32_t)k);
		push_dbl(&ds->variants, (double)k);
	}
	for (int64_t j = 0; j < 16; j++) {
		push_i64(&ds->stored, (INT64_C(1) << 53) + j);
		if (j % 2 == 0)
			push_dbl(&ds->variants, (double)((INT64_C(1) << 53) + j));
		else
			push_i64(&ds->missing, (INT64_C(1) << 53) + 1000 + j);
		push_i64(&ds->stored, -(INT64_C(1) << 53) - j);
	}
	for (int64_t j = 0; j < 4; j++)
		push_i64(&ds->stored, (INT64_C(1) << 62) + j);
	push_i64(&ds->stored, INT64_MAX);
	push_i64(&ds->stored, INT64_MIN);
	/* double: non-integral, integral stored as double, big, tiny */
	for (int k = -5; k < 45; k++) {
		push_dbl(&ds->stored, k + 0.5);
		if (dec && k % 5 == 0) {
			char s[16];

			snprintf(s, sizeof(s), "%d.5", k);
			push_dec(&ds->variants, s);
		}
		push_dbl(&ds->missing, k + 0.25);
	}
	for (int k = 300; k < 310; k++) {
		push_dbl(&ds->stored, (double)k);
		push_i32(&ds->variants, k);
		push_i64(&ds->variants, k);
	}
	if (!backend_is_java())
		push_dbl(&ds->stored, 1e20);
	push_dbl(&ds->stored, -0.25);
	push_dbl(&ds->stored, 3.25e-7);
	push_dbl(&ds->missing, 0.1);
	/* strings: prefixes, case, multibyte */
	for (int k = 0; k < 100; k++) {
		snprintf(strbuf[ns], sizeof(strbuf[ns]), "s%03d", k);
		push_str(&ds->stored, strbuf[ns++]);
		snprintf(strbuf[ns], sizeof(strbuf[ns]), "S%03d", k);
		push_str(&ds->missing, strbuf[ns++]);
	}
	push_str(&ds->stored, "");
	push_str(&ds->stored, "a");
	push_str(&ds->stored, "ab");
	push_str(&ds->stored, "abc");
	push_str(&ds->stored, "B");
	push_str(&ds->stored, "\xc3\xa9t\xc3\xa9");
	push_str(&ds->missing, "abcd");
	push_str(&ds->missing, "A");
	push_str(&ds->missing, "5");
	/* ObjectIds */
	for (uint32_t k = 0; k < 40; k++)
		push_oid(&ds->stored, k);
	for (uint32_t k = 1000; k < 1010; k++)
		push_oid(&ds->missing, k);
	/* a few dates and binaries: more of the type order */
	for (int64_t k = 0; k < 6; k++)
		push_date(&ds->stored, 1600000000000LL + k * 86400000LL - 3 * 86400000LL);
	push_date(&ds->missing, 1);
	push_bin(&ds->stored, BSON_SUBTYPE_BINARY, "\x01\x02\x03", 3);
	push_bin(&ds->stored, BSON_SUBTYPE_BINARY, "\xff", 1);
	push_bin(&ds->stored, BSON_SUBTYPE_UUID, "0123456789abcdef", 16);
	if (!backend_is_java())
		push_bin(&ds->missing, BSON_SUBTYPE_USER, "\x01\x02\x03", 3);
	else
		push_bin(&ds->missing, BSON_SUBTYPE_BINARY, "\x01\x02\x04", 3);
}

/* Insert one document per stored id. */
static void load_dataset(struct dataset *ds, mongoc_client_t *direct, const char *coll)
{
	mongoc_collection_t *col = mongoc_client_get_collection(direct, ds->db, coll);
	bson_error_t err;
	bson_t **docs = calloc((size_t)ds->stored.n, sizeof(bson_t *));
	bool ok;

	for (int i = 0; i < ds->stored.n; i++) {
		bson_t sub, arr;
		char pad[256];
		int padlen = (i * 37) % 200;

		memset(pad, 'a' + i % 26, (size_t)padlen);
		pad[padlen] = '\0';
		docs[i] = bson_new();
		bson_append_value(docs[i], "_id", 3, &ds->stored.v[i]);
		BSON_APPEND_INT32(docs[i], "n", i);
		BSON_APPEND_UTF8(docs[i], "s", pad);
		BSON_APPEND_DOCUMENT_BEGIN(docs[i], "sub", &sub);
		BSON_APPEND_INT32(&sub, "x", i % 10);
		BSON_APPEND_ARRAY_BEGIN(&sub, "y", &arr);
		BSON_APPEND_INT32(&arr, "0", i);
		BSON_APPEND_INT32(&arr, "1", i + 1);
		bson_append_array_end(&sub, &arr);
		bson_append_document_end(docs[i], &sub);
		BSON_APPEND_UTF8(docs[i], "pad", pad);
	}
	ok = mongoc_collection_insert_many(col, (const bson_t **)docs, (size_t)ds->stored.n, NULL,
					   NULL, &err);
	for (int i = 0; i < ds->stored.n; i++)
		bson_destroy(docs[i]);
	free(docs);
	mongoc_collection_destroy(col);
	cr_assert(ok, "loading %d documents: %s", ds->stored.n, err.message);
}

static void dataset_free(struct dataset *ds)
{
	vals_free(&ds->stored);
	vals_free(&ds->variants);
	vals_free(&ds->missing);
}

/* ================================================================ queries */

enum qkind {
	Q_ID,	    /* {_id: v} */
	Q_FIND_ONE, /* {_id: v}, limit 1, singleBatch */
	Q_EQ,	    /* {_id: {$eq: v}} */
	Q_IN,	    /* {_id: {$in: [...]}} */
	Q_RANGE,    /* {_id: {$gte, $lt}} sorted: not batchable */
	Q_OTHER,    /* {n: ...}: not batchable */
	Q_NO_ID,    /* {_id: v}, projection {_id: 0}: not batchable */
	Q_IN_CUT,   /* $in with limit < ids, sorted: not batchable */
	Q_NKINDS
};

static const char *const qkind_names[] = {"id",	   "find_one", "eq",	"in",
					  "range", "other",    "no_id", "in_cut"};

struct query {
	enum qkind kind;
	bson_t filter, opts;
};

static const bson_value_t *pick_id(const struct dataset *ds, uint64_t *s)
{
	int r = rnd_int(s, 100);

	if (r < 70)
		return &ds->stored.v[rnd_int(s, ds->stored.n)];
	if (r < 85)
		return &ds->variants.v[rnd_int(s, ds->variants.n)];
	return &ds->missing.v[rnd_int(s, ds->missing.n)];
}

static void add_projection(bson_t *opts, uint64_t *s)
{
	bson_t p;
	int r = rnd_int(s, 100);

	if (r < 60)
		return;
	BSON_APPEND_DOCUMENT_BEGIN(opts, "projection", &p);
	if (r < 75) {
		BSON_APPEND_INT32(&p, "n", 1);
	} else if (r < 85) {
		BSON_APPEND_INT32(&p, "s", 1);
		BSON_APPEND_INT32(&p, "sub.x", 1);
	} else if (r < 95) {
		BSON_APPEND_INT32(&p, "pad", 0);
	} else {
		BSON_APPEND_INT32(&p, "_id", 1);
		BSON_APPEND_INT32(&p, "n", 1);
	}
	bson_append_document_end(opts, &p);
}

static void add_in_list(bson_t *cond, const struct dataset *ds, uint64_t *s, int n)
{
	bson_t arr;
	char key[16];
	const char *k;
	const bson_value_t *prev = NULL;

	BSON_APPEND_ARRAY_BEGIN(cond, "$in", &arr);
	for (int i = 0; i < n; i++) {
		const bson_value_t *v = prev != NULL && rnd_int(s, 8) == 0 ? prev : pick_id(ds, s);

		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_value(&arr, k, -1, v); /* duplicates on purpose */
		prev = v;
	}
	bson_append_array_end(cond, &arr);
}

static int in_length(uint64_t *s)
{
	int r = rnd_int(s, 100);

	if (r < 60)
		return 1 + rnd_int(s, 8);
	if (r < 90)
		return 1 + rnd_int(s, 20);
	return 1 + rnd_int(s, 50);
}

static void make_query(struct query *q, const struct dataset *ds, uint64_t *s)
{
	int r = rnd_int(s, 100);
	bson_t cond, sort;

	bson_init(&q->filter);
	bson_init(&q->opts);
	if (r < 28) {
		q->kind = Q_ID;
		bson_append_value(&q->filter, "_id", 3, pick_id(ds, s));
		add_projection(&q->opts, s);
	} else if (r < 42) {
		q->kind = Q_FIND_ONE;
		bson_append_value(&q->filter, "_id", 3, pick_id(ds, s));
		BSON_APPEND_INT64(&q->opts, "limit", 1);
		BSON_APPEND_BOOL(&q->opts, "singleBatch", true);
		add_projection(&q->opts, s);
	} else if (r < 47) {
		q->kind = Q_EQ;
		BSON_APPEND_DOCUMENT_BEGIN(&q->filter, "_id", &cond);
		bson_append_value(&cond, "$eq", 3, pick_id(ds, s));
		bson_append_document_end(&q->filter, &cond);
		add_projection(&q->opts, s);
	} else if (r < 85) {
		int n = in_length(s), extra = rnd_int(s, 100);

		q->kind = Q_IN;
		BSON_APPEND_DOCUMENT_BEGIN(&q->filter, "_id", &cond);
		add_in_list(&cond, ds, s, n);
		bson_append_document_end(&q->filter, &cond);
		add_projection(&q->opts, s);
		if (extra < 10)
			BSON_APPEND_INT64(&q->opts, "limit", n + rnd_int(s, 3)); /* cannot cut */
		else if (extra < 20)
			BSON_APPEND_INT64(&q->opts, "batchSize", 1 + rnd_int(s, 4)); /* getMores */
		else if (extra < 25)
			BSON_APPEND_INT64(&q->opts, "maxTimeMS", 60000);
	} else if (r < 89) {
		int a = -25 + rnd_int(s, 230);

		q->kind = Q_RANGE;
		BSON_APPEND_DOCUMENT_BEGIN(&q->filter, "_id", &cond);
		BSON_APPEND_INT32(&cond, "$gte", a);
		BSON_APPEND_INT32(&cond, "$lt", a + 1 + rnd_int(s, 30));
		bson_append_document_end(&q->filter, &cond);
		BSON_APPEND_DOCUMENT_BEGIN(&q->opts, "sort", &sort);
		BSON_APPEND_INT32(&sort, "_id", rnd_int(s, 2) ? 1 : -1);
		bson_append_document_end(&q->opts, &sort);
		add_projection(&q->opts, s);
	} else if (r < 93) {
		q->kind = Q_OTHER;
		if (rnd_int(s, 2)) {
			BSON_APPEND_INT32(&q->filter, "n", rnd_int(s, ds->stored.n + 5));
		} else {
			BSON_APPEND_DOCUMENT_BEGIN(&q->filter, "sub.x", &cond);
			BSON_APPEND_INT32(&cond, "$eq", rnd_int(s, 10));
			bson_append_document_end(&q->filter, &cond);
			BSON_APPEND_DOCUMENT_BEGIN(&q->opts, "sort", &sort);
			BSON_APPEND_INT32(&sort, "n", 1);
			bson_append_document_end(&q->opts, &sort);
			BSON_APPEND_INT64(&q->opts, "limit", 5);
		}
	} else if (r < 97) {
		bson_t p;

		q->kind = Q_NO_ID;
		bson_append_value(&q->filter, "_id", 3, pick_id(ds, s));
		BSON_APPEND_DOCUMENT_BEGIN(&q->opts, "projection", &p);
		BSON_APPEND_INT32(&p, "_id", 0);
		BSON_APPEND_INT32(&p, "n", 1);
		bson_append_document_end(&q->opts, &p);
	} else {
		int n = 3 + rnd_int(s, 10);

		q->kind = Q_IN_CUT;
		BSON_APPEND_DOCUMENT_BEGIN(&q->filter, "_id", &cond);
		add_in_list(&cond, ds, s, n);
		bson_append_document_end(&q->filter, &cond);
		BSON_APPEND_INT64(&q->opts, "limit", 1 + rnd_int(s, 2));
		BSON_APPEND_DOCUMENT_BEGIN(&q->opts, "sort", &sort);
		BSON_APPEND_INT32(&sort, "_id", 1);
		bson_append_document_end(&q->opts, &sort);
	}
}

static bool qkind_batchable(enum qkind k)
{
	return k == Q_ID || k == Q_FIND_ONE || k == Q_EQ || k == Q_IN;
}

static char *query_json(const struct query *q)
{
	char *f = bson_as_relaxed_extended_json(&q->filter, NULL);
	char *o = bson_as_relaxed_extended_json(&q->opts, NULL);
	char *s = bson_strdup_printf("%s find filter %s opts %s", qkind_names[q->kind], f, o);

	bson_free(f);
	bson_free(o);
	return s;
}

/* ================================================================ workers */

#define MAX_DIFFS 5

struct shared {
	const struct dataset *ds;
	const char *coll;
	bool ordered;
	int queries_per_thread;
	pthread_barrier_t start;
	pthread_mutex_t mu;
	int64_t compared, batchable, diffs, docs;
	int64_t by_kind[Q_NKINDS];
	char *diff_text[MAX_DIFFS];
};

struct worker {
	struct shared *sh;
	int idx;
	mongoc_client_t *px, *dr;
};

static void record_diff(struct shared *sh, const char *what, char *why)
{
	pthread_mutex_lock(&sh->mu);
	if (sh->diffs < MAX_DIFFS)
		sh->diff_text[sh->diffs] = bson_strdup_printf("%s\n    %s", what, why);
	sh->diffs++;
	pthread_mutex_unlock(&sh->mu);
}

static void *diff_worker(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->idx + 1);
	int64_t compared = 0, batchable = 0, docs = 0, by_kind[Q_NKINDS] = {0};

	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < sh->queries_per_thread; i++) {
		struct query q;
		struct result px, dr;
		char *why;

		make_query(&q, sh->ds, &seed);
		/* Alternate which side goes first; the data does not change. */
		if (i % 2 == 0) {
			run_find(w->px, sh->ds->db, sh->coll, &q.filter, &q.opts, &px);
			run_find(w->dr, sh->ds->db, sh->coll, &q.filter, &q.opts, &dr);
		} else {
			run_find(w->dr, sh->ds->db, sh->coll, &q.filter, &q.opts, &dr);
			run_find(w->px, sh->ds->db, sh->coll, &q.filter, &q.opts, &px);
		}
		/* An $in through the batcher comes back in _id order, as from mongod;
		 * a backend that does not order it is compared as a multiset. */
		if (!same_result(&px, &dr, sh->ordered || !qkind_batchable(q.kind), &why)) {
			char *qj = query_json(&q);

			record_diff(sh, qj, why);
			bson_free(qj);
			bson_free(why);
		}
		compared++;
		batchable += qkind_batchable(q.kind);
		by_kind[q.kind]++;
		docs += dr.ndocs;
		result_clear(&px);
		result_clear(&dr);
		bson_destroy(&q.filter);
		bson_destroy(&q.opts);
	}
	pthread_mutex_lock(&sh->mu);
	sh->compared += compared;
	sh->batchable += batchable;
	sh->docs += docs;
	for (int k = 0; k < Q_NKINDS; k++)
		sh->by_kind[k] += by_kind[k];
	pthread_mutex_unlock(&sh->mu);
	return NULL;
}

/* Run `nthreads` differential workers against proxy p; asserts no diffs. */
static void run_differential(struct proxy *p, const struct dataset *ds, const char *coll,
			     int nthreads, int per_thread, struct shared *sh)
{
	pthread_t *th = calloc((size_t)nthreads, sizeof(*th));
	struct worker *ws = calloc((size_t)nthreads, sizeof(*ws));
	int64_t t0;

	memset(sh, 0, sizeof(*sh));
	sh->ds = ds;
	sh->coll = coll;
	sh->ordered = backend_orders_in_by_id();
	sh->queries_per_thread = per_thread;
	pthread_mutex_init(&sh->mu, NULL);
	pthread_barrier_init(&sh->start, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nthreads; i++) {
		char app[32];

		snprintf(app, sizeof(app), "batching-%d", i);
		ws[i].sh = sh;
		ws[i].idx = i;
		ws[i].px = h_proxy_client(p, app);
		ws[i].dr = h_backend_client(app);
		cr_assert_eq(pthread_create(&th[i], NULL, diff_worker, &ws[i]), 0);
	}
	t0 = h_now_ms();
	pthread_barrier_wait(&sh->start);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	cr_log_info("differential: %d threads x %d queries = %lld compared (%lld batchable "
		    "shapes, %lld documents) in %lld ms; kinds: id %lld, find_one %lld, eq %lld, "
		    "in %lld, range %lld, other %lld, no_id %lld, in_cut %lld%s",
		    nthreads, per_thread, (long long)sh->compared, (long long)sh->batchable,
		    (long long)sh->docs, (long long)(h_now_ms() - t0), (long long)sh->by_kind[Q_ID],
		    (long long)sh->by_kind[Q_FIND_ONE], (long long)sh->by_kind[Q_EQ],
		    (long long)sh->by_kind[Q_IN], (long long)sh->by_kind[Q_RANGE],
		    (long long)sh->by_kind[Q_OTHER], (long long)sh->by_kind[Q_NO_ID],
		    (long long)sh->by_kind[Q_IN_CUT],
		    sh->ordered ? ""
				: " (batchable finds compared as multisets: "
				  "this backend does not return an $in in _id order)");
	for (int i = 0; i < nthreads; i++) {
		mongoc_client_destroy(ws[i].px);
		mongoc_client_destroy(ws[i].dr);
	}
	for (int i = 0; i < MAX_DIFFS && i < sh->diffs; i++)
		cr_log_error("difference %d of %lld: %s", i + 1, (long long)sh->diffs,
			     sh->diff_text[i]);
	for (int i = 0; i < MAX_DIFFS; i++)
		bson_free(sh->diff_text[i]);
	pthread_barrier_destroy(&sh->start);
	pthread_mutex_destroy(&sh->mu);
	free(th);
	free(ws);
	proxy_assert_alive(p, "during the differential run");
	cr_expect_eq(sh->diffs, 0, "%lld of %lld queries answered differently through the proxy",
		     (long long)sh->diffs, (long long)sh->compared);
}

/* FerretDB (SQLite) spends several ms of CPU on a find: fewer queries there. */
static int per_backend(int n, int ferretdb_divisor)
{
	return backend_is_ferretdb() ? (n + ferretdb_divisor - 1) / ferretdb_divisor : n;
}

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

static void setup_dataset(struct dataset *ds, mongoc_client_t **direct)
{
	memset(ds, 0, sizeof(*ds));
	h_unique(ds->db, sizeof(ds->db), "batching");
	build_ids(ds);
	*direct = h_backend_client("batching-setup");
	load_dataset(ds, *direct, "c");
}

static void teardown_dataset(struct dataset *ds, mongoc_client_t *direct)
{
	if (!getenv("BT_KEEP"))
		h_drop_db(direct, ds->db);
	mongoc_client_destroy(direct);
	dataset_free(ds);
}

/* ================================================================ the tests */

/* A hang guard only: FerretDB on a machine with load 15 on 2 cores took 300 s. */
TestSuite(batching, .timeout = 900);

Test(batching, differential_32_clients)
{
	struct dataset ds;
	mongoc_client_t *direct;
	struct proxy *p;
	struct shared sh;
	struct batch_stats bs;
	int nthreads = env_int("MONGOPLEX_BATCH_THREADS", 32);
	int per_thread = env_int("MONGOPLEX_BATCH_QUERIES", per_backend(400, 5));
	int64_t multi = 0;

	setup_dataset(&ds, &direct);
	if (!backend_has_decimal())
		cr_log_info(
		    "differential: no Decimal128 ids or queries: %s drops the connection on "
		    "Decimal128",
		    h_backend_name());
	if (backend_is_java())
		cr_log_info(
		    "differential: leaving out BinData of another subtype and a double "
		    "beyond the int64 range: mongo-java-server compares those unlike MongoDB");
	p = proxy_start("pool_size = 2\nbatching = on\n");
	run_differential(p, &ds, "c", nthreads, per_thread, &sh);
	read_batch_stats(p, &bs);
	log_batch_stats("differential", &bs);
	for (int i = 1; i < 11; i++)
		multi += bs.ids_le[i];
	cr_log_info("differential: %lld merged queries sent for %lld lookups (%.1f lookups per "
		    "merged query); %lld of them with more than one distinct id",
		    (long long)bs.batches_sent, (long long)bs.lookups,
		    bs.batches_sent ? (double)bs.lookups / (double)bs.batches_sent : 0.0,
		    (long long)multi);
	cr_expect_gt(bs.merged, 0, "no lookup shared a merged query: batching did not happen");
	cr_expect_gt(bs.batches_sent, 0);
	cr_expect_eq(bs.ids_count, bs.batches_sent, "batch_ids count != batches_sent");
	cr_expect_gt(multi, 0, "no merged query had more than one distinct id");
	cr_expect_lt(bs.lookups, sh.batchable + 1,
		     "more lookups batched than batchable finds sent");
	cr_expect_eq(bs.fallbacks, 0, "batch_fallbacks %lld in the normal case",
		     (long long)bs.fallbacks);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

Test(batching, batching_off)
{
	struct dataset ds;
	mongoc_client_t *direct;
	struct proxy *p;
	struct shared sh;
	struct batch_stats bs;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 2\nbatching = off\n");
	run_differential(p, &ds, "c", 16, env_int("MONGOPLEX_BATCH_QUERIES", per_backend(200, 10)),
			 &sh);
	read_batch_stats(p, &bs);
	log_batch_stats("batching off", &bs);
	cr_expect_eq(bs.batches_sent, 0, "batching = off, yet %lld merged queries were sent",
		     (long long)bs.batches_sent);
	cr_expect_eq(bs.lookups, 0);
	cr_expect_eq(bs.ids_count, 0);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* batch_max_wait_us with one client: every lookup waits for company that
 * never comes, and is then sent alone — still answered correctly. */
Test(batching, max_wait_single_client)
{
	struct dataset ds;
	mongoc_client_t *direct, *px;
	struct proxy *p;
	struct batch_stats bs;
	uint64_t seed = 12345;
	int n = backend_is_ferretdb() ? 60 : 200, sent_batchable = 0, diffs = 0, single_ids = 0;
	int64_t t0;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 2\nbatching = on\nbatch_max_wait_us = 2000\n");
	px = h_proxy_client(p, "batching-single");
	t0 = h_now_ms();
	for (int i = 0; i < n; i++) {
		struct query q;
		struct result a, b;
		char *why;

		make_query(&q, &ds, &seed);
		run_find(px, ds.db, "c", &q.filter, &q.opts, &a);
		run_find(direct, ds.db, "c", &q.filter, &q.opts, &b);
		if (!same_result(&a, &b, backend_orders_in_by_id() || !qkind_batchable(q.kind),
				 &why)) {
			char *qj = query_json(&q);

			if (diffs++ < MAX_DIFFS)
				cr_log_error("%s\n    %s", qj, why);
			bson_free(qj);
			bson_free(why);
		}
		sent_batchable += qkind_batchable(q.kind);
		single_ids += q.kind == Q_ID || q.kind == Q_FIND_ONE || q.kind == Q_EQ;
		result_clear(&a);
		result_clear(&b);
		bson_destroy(&q.filter);
		bson_destroy(&q.opts);
	}
	read_batch_stats(p, &bs);
	log_batch_stats("batch_max_wait_us = 2000, one client", &bs);
	cr_log_info("max_wait_single_client: %d finds (%d batchable) in %lld ms", n, sent_batchable,
		    (long long)(h_now_ms() - t0));
	cr_expect_eq(diffs, 0, "%d of %d finds answered differently", diffs, n);
	cr_expect_eq(bs.lookups, sent_batchable,
		     "with batch_max_wait_us every batchable find goes through the batcher");
	cr_expect_eq(bs.batches_sent, sent_batchable, "one client: batches of one lookup");
	cr_expect_eq(bs.merged, 0);
	cr_expect_eq(bs.fallbacks, 0);
	cr_expect_geq(bs.ids_le[0], single_ids, "single-id lookups are batches of 1 id");
	mongoc_client_destroy(px);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- lookups started together, so they share a batch ------------------- */

struct together {
	pthread_barrier_t *start;
	mongoc_client_t *c;
	const char *db, *coll;
	bson_t filter, opts;
	bson_t cmd; /* if non-empty: run as a raw command instead */
	struct result res;
	bson_t reply;
};

static void *together_main(void *arg)
{
	struct together *t = arg;

	pthread_barrier_wait(t->start);
	if (!bson_empty(&t->cmd))
		run_cmd(t->c, t->db, &t->cmd, &t->res, &t->reply);
	else
		run_find(t->c, t->db, t->coll, &t->filter, &t->opts, &t->res);
	return NULL;
}

/* Run the n prepared lookups at once through `clients` (one per lookup). */
static void run_together(struct together *ts, int n)
{
	pthread_t th[64];
	pthread_barrier_t start;

	cr_assert_leq(n, 64);
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		ts[i].start = &start;
		cr_assert_eq(pthread_create(&th[i], NULL, together_main, &ts[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
}

/* The equality traps merged into one batch for sure: a 50 ms batch window
 * and one backend connection. */
Test(batching, equality_traps_merged)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[16];
	struct proxy *p;
	struct batch_stats bs;
	struct together ts[16];
	int n = 0, diffs = 0;
	struct vals probes = {0};

	setup_dataset(&ds, &direct);
	/* int32 5 is stored; 5.0 and NumberLong(5) find it. int64 2^53 and 2^53+1
	 * are stored; the double 2^53 finds only the first. 300.0 is stored as a
	 * double; int32/int64 300 find it. 0.5 stored; 0.25 missing. */
	push_i32(&probes, 5);
	push_dbl(&probes, 5.0);
	push_i64(&probes, 5);
	push_dbl(&probes, 9007199254740992.0);
	push_i64(&probes, (INT64_C(1) << 53) + 1);
	push_i64(&probes, INT64_C(1) << 53);
	push_i32(&probes, 300);
	push_i64(&probes, 300);
	push_dbl(&probes, 0.5);
	push_dbl(&probes, -0.0);
	push_str(&probes, "ab");
	if (backend_has_decimal()) {
		push_dec(&probes, "5");
		push_dec(&probes, "5.0");
		push_dec(&probes, "0.50");
	}
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 50000\n");
	for (int round = 0; round < 3; round++) {
		n = 0;
		for (int i = 0; i < probes.n && n < 15; i++, n++) {
			memset(&ts[n], 0, sizeof(ts[n]));
			bson_init(&ts[n].filter);
			bson_init(&ts[n].opts);
			bson_init(&ts[n].cmd);
			bson_append_value(&ts[n].filter, "_id", 3, &probes.v[i]);
			if (round == 1) {
				BSON_APPEND_INT64(&ts[n].opts, "limit", 1);
				BSON_APPEND_BOOL(&ts[n].opts, "singleBatch", true);
			}
		}
		/* one $in with several representations of the same values */
		memset(&ts[n], 0, sizeof(ts[n]));
		bson_init(&ts[n].opts);
		bson_init(&ts[n].cmd);
		{
			bson_t cond, arr;
			char key[16];
			const char *k;

			bson_init(&ts[n].filter);
			BSON_APPEND_DOCUMENT_BEGIN(&ts[n].filter, "_id", &cond);
			BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
			for (int i = 0; i < probes.n; i++) {
				bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
				bson_append_value(&arr, k, -1, &probes.v[probes.n - 1 - i]);
			}
			bson_append_array_end(&cond, &arr);
			bson_append_document_end(&ts[n].filter, &cond);
		}
		n++;
		for (int i = 0; i < n; i++) {
			char app[32];

			snprintf(app, sizeof(app), "traps-%d", i);
			cl[i] = h_proxy_client(p, app);
			ts[i].c = cl[i];
			ts[i].db = ds.db;
			ts[i].coll = "c";
		}
		run_together(ts, n);
		for (int i = 0; i < n; i++) {
			struct result dr;
			char *why;

			run_find(direct, ds.db, "c", &ts[i].filter, &ts[i].opts, &dr);
			if (!same_result(&ts[i].res, &dr, backend_orders_in_by_id(), &why)) {
				char *f = bson_as_relaxed_extended_json(&ts[i].filter, NULL);

				cr_log_error("round %d filter %s:\n    %s", round, f, why);
				diffs++;
				bson_free(f);
				bson_free(why);
			}
			cr_expect(dr.ok && dr.ndocs >= 1, "the direct lookup finds a document");
			result_clear(&dr);
			result_clear(&ts[i].res);
			bson_destroy(&ts[i].filter);
			bson_destroy(&ts[i].opts);
			bson_destroy(&ts[i].cmd);
			mongoc_client_destroy(cl[i]);
		}
	}
	read_batch_stats(p, &bs);
	log_batch_stats("equality traps", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_geq(bs.merged, 2 * 3, "the traps were not merged (lookups merged %lld)",
		      (long long)bs.merged);
	cr_expect_eq(bs.fallbacks, 0);
	vals_free(&probes);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- (a) a merged query that fails ------------------------------------- */

/* {find: coll, filter: {_id: id}} plus, by kind: 1 an impossible projection,
 * 2 maxTimeMS -1, 3 an unknown read concern level; else nothing. */
static void bad_find_cmd(bson_t *cmd, const char *coll, int id, int kind)
{
	bson_t f, p;

	bson_init(cmd);
	BSON_APPEND_UTF8(cmd, "find", coll);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &f);
	BSON_APPEND_INT32(&f, "_id", id);
	bson_append_document_end(cmd, &f);
	switch (kind) {
	case 1: /* an impossible projection */
		BSON_APPEND_DOCUMENT_BEGIN(cmd, "projection", &p);
		BSON_APPEND_INT32(&p, "n", 1);
		BSON_APPEND_INT32(&p, "pad", 0);
		bson_append_document_end(cmd, &p);
		break;
	case 2:
		BSON_APPEND_INT32(cmd, "maxTimeMS", -1);
		break;
	case 3: {
		bson_t rc;

		BSON_APPEND_DOCUMENT_BEGIN(cmd, "readConcern", &rc);
		BSON_APPEND_UTF8(&rc, "level", "no-such-level");
		bson_append_document_end(cmd, &rc);
		break;
	}
	default:
		break;
	}
}

Test(batching, merged_failure_rerun_alone)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[24];
	struct proxy *p;
	struct batch_stats bs;
	static const char *const kinds[] = {"collection \"\"", "projection {n: 1, pad: 0}",
					    "maxTimeMS -1", "readConcern level no-such-level"};
	bool use[4] = {false};
	int nuse = 0, diffs = 0, errors_seen = 0, docs_seen = 0;
	struct together ts[24];

	setup_dataset(&ds, &direct);
	/* Which of these does this backend actually reject? */
	for (int k = 0; k < 4; k++) {
		struct result r;
		bson_t cmd;

		bad_find_cmd(&cmd, k == 0 ? "" : "c", 5, k);
		run_cmd(direct, ds.db, &cmd, &r, NULL);
		use[k] = !r.ok && r.domain == MONGOC_ERROR_SERVER;
		cr_log_info("merged_failure: %s: direct %s%s (code %u)", kinds[k],
			    r.ok ? "accepted" : "rejected: ", r.ok ? "" : r.msg, r.code);
		nuse += use[k];
		result_clear(&r);
		bson_destroy(&cmd);
	}
	cr_assert_gt(nuse, 0, "the backend rejects none of the failing finds");
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	for (int i = 0; i < 24; i++) {
		char app[32];

		snprintf(app, sizeof(app), "fail-%d", i);
		cl[i] = h_proxy_client(p, app);
	}
	for (int round = 0; round < 4; round++) {
		/* Each round: the same failing shape from several clients (one merged
		 * query that fails), and good lookups next to them. */
		for (int i = 0; i < 24; i++) {
			int k = (i + round) % 6; /* 4, 5: good lookups */

			memset(&ts[i], 0, sizeof(ts[i]));
			bson_init(&ts[i].filter);
			bson_init(&ts[i].opts);
			if (k < 4 && use[k])
				bad_find_cmd(&ts[i].cmd, k == 0 ? "" : "c", i, k);
			else
				bad_find_cmd(&ts[i].cmd, "c", i - 20 + round, 9);
			ts[i].c = cl[i];
			ts[i].db = ds.db;
		}
		run_together(ts, 24);
		for (int i = 0; i < 24; i++) {
			struct result dr;
			char *why;

			run_cmd(direct, ds.db, &ts[i].cmd, &dr, NULL);
			if (!same_result(&ts[i].res, &dr, true, &why)) {
				char *cj = bson_as_relaxed_extended_json(&ts[i].cmd, NULL);

				cr_log_error("%s:\n    %s", cj, why);
				diffs++;
				bson_free(cj);
				bson_free(why);
			}
			errors_seen += !ts[i].res.ok;
			docs_seen += ts[i].res.ndocs;
			result_clear(&dr);
			result_clear(&ts[i].res);
			bson_destroy(&ts[i].filter);
			bson_destroy(&ts[i].opts);
			bson_destroy(&ts[i].cmd);
			bson_destroy(&ts[i].reply);
		}
	}
	for (int i = 0; i < 24; i++)
		mongoc_client_destroy(cl[i]);
	read_batch_stats(p, &bs);
	log_batch_stats("merged failures", &bs);
	cr_log_info("merged_failure: %d errors and %d documents delivered, each as directly",
		    errors_seen, docs_seen);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(errors_seen, 0);
	cr_expect_gt(docs_seen, 0);
	cr_expect_gt(bs.merged, 0, "nothing was merged");
	cr_expect_gt(bs.fallbacks, 0, "no failed merged query was re-run alone");
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- (b) $clusterTime / operationTime ---------------------------------- */

Test(batching, cluster_time)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[8];
	struct proxy *p;
	struct together ts[8];
	struct result r;
	bson_t cmd, reply;
	bson_iter_t it;
	bool has_ct, has_ot;
	struct batch_stats bs;

	setup_dataset(&ds, &direct);
	bad_find_cmd(&cmd, "c", 5, 9);
	run_cmd(direct, ds.db, &cmd, &r, &reply);
	cr_assert(r.ok, "direct find failed: %s", r.msg);
	has_ct = bson_iter_init_find(&it, &reply, "$clusterTime");
	has_ot = bson_iter_init_find(&it, &reply, "operationTime");
	result_clear(&r);
	bson_destroy(&reply);
	bson_destroy(&cmd);
	if (!has_ct && !has_ot)
		cr_log_info("cluster_time: this backend (%s) sends neither $clusterTime nor "
			    "operationTime; checking only that the batcher does not invent them",
			    h_backend_name());

	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	for (int i = 0; i < 8; i++) {
		cl[i] = h_proxy_client(p, "cluster-time");
		memset(&ts[i], 0, sizeof(ts[i]));
		bson_init(&ts[i].filter);
		bson_init(&ts[i].opts);
		bad_find_cmd(&ts[i].cmd, "c", i, 9);
		ts[i].c = cl[i];
		ts[i].db = ds.db;
	}
	run_together(ts, 8);
	for (int i = 0; i < 8; i++) {
		cr_expect(ts[i].res.ok, "lookup %d failed: %s", i, ts[i].res.msg);
		cr_expect_eq(bson_iter_init_find(&it, &ts[i].reply, "$clusterTime"), has_ct,
			     "lookup %d: $clusterTime %s", i,
			     has_ct ? "not passed back" : "invented");
		cr_expect_eq(bson_iter_init_find(&it, &ts[i].reply, "operationTime"), has_ot,
			     "lookup %d: operationTime %s", i,
			     has_ot ? "not passed back" : "invented");
		if (has_ot && bson_iter_init_find(&it, &ts[i].reply, "operationTime"))
			cr_expect(BSON_ITER_HOLDS_TIMESTAMP(&it));
		result_clear(&ts[i].res);
		bson_destroy(&ts[i].reply);
		bson_destroy(&ts[i].filter);
		bson_destroy(&ts[i].opts);
		bson_destroy(&ts[i].cmd);
		mongoc_client_destroy(cl[i]);
	}
	read_batch_stats(p, &bs);
	cr_expect_gt(bs.merged, 0, "the lookups were not merged");
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- (c) a requester whose documents exceed 16 MB ---------------------- */

#define MB (1024 * 1024)

/* db.big: _id 1, 2 of ~9 MB, 3, 4 small, 5, 6 of 8 MB - 4 KB (together just
 * under 16 MB, but over what the batcher puts in one reply). */
static void load_big(mongoc_client_t *direct, const char *db)
{
	static const struct {
		int id;
		size_t len;
	} docs[] = {{1, 9 * MB}, {2, 9 * MB},	     {3, 100},
		    {4, 200},	 {5, 8 * MB - 4096}, {6, 8 * MB - 4096}};
	mongoc_collection_t *col = mongoc_client_get_collection(direct, db, "big");
	char *pad = malloc(9 * MB + 1);
	bson_error_t err;

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		bson_t *doc = bson_new();

		memset(pad, 'a' + docs[i].id, docs[i].len);
		BSON_APPEND_INT32(doc, "_id", docs[i].id);
		bson_append_utf8(doc, "pad", 3, pad, (int)docs[i].len);
		cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "insert %d: %s",
			  docs[i].id, err.message);
		bson_destroy(doc);
	}
	free(pad);
	mongoc_collection_destroy(col);
}

/* Twelve clients at once, client i asking for sets[i % 6]; compared with
 * the same finds sent directly (documents by iterating the cursor). Returns
 * the number of differences. */
static int big_round(struct proxy *p, mongoc_client_t *direct, const char *db, const int sets[6][3])
{
	mongoc_client_t *cl[12];
	struct together ts[12];
	int diffs = 0;

	for (int i = 0; i < 12; i++) {
		const int *set = sets[i % 6];
		bson_t cond, arr;

		cl[i] = h_proxy_client(p, "big");
		memset(&ts[i], 0, sizeof(ts[i]));
		bson_init(&ts[i].filter);
		bson_init(&ts[i].opts);
		bson_init(&ts[i].cmd);
		BSON_APPEND_DOCUMENT_BEGIN(&ts[i].filter, "_id", &cond);
		BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
		for (int j = 0; j < 3 && set[j]; j++) {
			char key[4] = {(char)('0' + j), 0};

			BSON_APPEND_INT32(&arr, key, set[j]);
		}
		bson_append_array_end(&cond, &arr);
		bson_append_document_end(&ts[i].filter, &cond);
		ts[i].c = cl[i];
		ts[i].db = db;
		ts[i].coll = "big";
	}
	run_together(ts, 12);
	for (int i = 0; i < 12; i++) {
		struct result dr;
		char *why;

		run_find(direct, db, "big", &ts[i].filter, &ts[i].opts, &dr);
		if (!same_result(&ts[i].res, &dr, backend_orders_in_by_id(), &why)) {
			char *f = bson_as_relaxed_extended_json(&ts[i].filter, NULL);

			/* the documents are huge: counts only */
			cr_log_error("filter %s: proxy %s, %d docs; direct %s, %d docs (%s)", f,
				     ts[i].res.ok ? "ok" : "error", ts[i].res.ndocs,
				     dr.ok ? "ok" : "error", dr.ndocs,
				     ts[i].res.ok ? dr.msg : ts[i].res.msg);
			diffs++;
			bson_free(f);
		}
		bson_free(why);
		result_clear(&dr);
		result_clear(&ts[i].res);
		bson_destroy(&ts[i].filter);
		bson_destroy(&ts[i].opts);
		bson_destroy(&ts[i].cmd);
		mongoc_client_destroy(cl[i]);
	}
	return diffs;
}

/* Load the big documents, run two rounds of `sets` through a one-connection
 * proxy that lets batches form, and return the batch figures. */
static void run_big(const int sets[6][3], const char *label, struct batch_stats *bs)
{
	char db[64];
	mongoc_client_t *direct;
	struct proxy *p;
	int diffs = 0;

	h_unique(db, sizeof(db), "batching_big");
	direct = h_backend_client("batching-big");
	load_big(direct, db);
	/* queue_timeout_ms: how long a lookup queues behind 5 MB replies on one
	 * connection is load, not what is tested (a loaded machine hit 30 s). */
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n"
			"queue_timeout_ms = 600000\n");
	for (int round = 0; round < 2; round++)
		diffs += big_round(p, direct, db, sets);
	read_batch_stats(p, bs);
	log_batch_stats(label, bs);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(bs->merged, 0);
	proxy_stop(p);
	h_drop_db(direct, db);
	mongoc_client_destroy(direct);
}

/* Two documents of ~9 MB: no single reply holds both. mongod returns them
 * over a getMore; through the batcher the requester of both is run alone.
 * (mongo-java-server sends the merged documents in one reply of ~18 MB; the
 * batcher accepts it, and each requester whose share exceeds 16 MB is
 * re-run alone.) */
Test(batching, oversized_member)
{
	static const int sets[6][3] = {{1, 2, 0}, {1, 2, 3}, {1, 0, 0},
				       {2, 0, 0}, {3, 4, 0}, {2, 1, 4}};
	struct batch_stats bs;

	run_big(sets, "oversized member (2 x 9 MB)", &bs);
	cr_expect_geq(bs.fallbacks, 6, "the 6 lookups of both 9 MB documents were not run alone");
}

/* Two documents of 8 MB - 4 KB: the merged reply fits in 16 MB, but a
 * requester of both would get more than the batcher puts in one reply: that
 * requester alone is re-run, the others are answered from the batch. */
Test(batching, oversized_member_near_16mb)
{
	static const int sets[6][3] = {{5, 6, 0}, {5, 6, 3}, {5, 0, 0},
				       {6, 0, 0}, {3, 4, 0}, {6, 5, 4}};
	struct batch_stats bs;

	run_big(sets, "oversized member (2 x 8 MB - 4 KB)", &bs);
	/* 3 of the 6 sets ask for both 5 and 6, x 2 clients, in the first round;
	 * in the second the batcher knows the documents' size and forwards such
	 * lookups unmerged (their share would exceed 16 MB). */
	cr_expect_eq(bs.fallbacks, 6,
		     "exactly the 6 first-round lookups of both documents are re-run alone "
		     "(got %lld)",
		     (long long)bs.fallbacks);
}

/* ---- merged queries that find nothing --------------------------------- */

/* Every id missing (so the merged reply has no document). Found under the
 * Asan build: split_and_answer called qsort(NULL, 0, ...) when the merged
 * query found nothing, which -fno-sanitize-recover=undefined turns into an
 * abort of the proxy (fixed in 9102de1). */
Test(batching, lookups_that_find_nothing)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[6];
	struct proxy *p;
	struct together ts[6];
	struct batch_stats bs;
	int diffs = 0;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	for (int i = 0; i < 6; i++) {
		cl[i] = h_proxy_client(p, "nothing");
		memset(&ts[i], 0, sizeof(ts[i]));
		bson_init(&ts[i].filter);
		bson_init(&ts[i].opts);
		bson_init(&ts[i].cmd);
		if (i < 4) {
			BSON_APPEND_INT32(&ts[i].filter, "_id", 100000 + i); /* missing */
		} else {
			bson_t cond, arr;

			BSON_APPEND_DOCUMENT_BEGIN(&ts[i].filter, "_id", &cond);
			BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
			BSON_APPEND_UTF8(&arr, "0", "missing");
			BSON_APPEND_INT32(&arr, "1", -1000);
			bson_append_array_end(&cond, &arr);
			bson_append_document_end(&ts[i].filter, &cond);
		}
		ts[i].c = cl[i];
		ts[i].db = ds.db;
		ts[i].coll = "c";
	}
	run_together(ts, 6);
	for (int i = 0; i < 6; i++) {
		struct result dr;
		char *why;

		run_find(direct, ds.db, "c", &ts[i].filter, &ts[i].opts, &dr);
		if (!same_result(&ts[i].res, &dr, true, &why)) {
			cr_log_error("lookup %d: %s", i, why);
			diffs++;
		}
		bson_free(why);
		result_clear(&dr);
		result_clear(&ts[i].res);
		bson_destroy(&ts[i].filter);
		bson_destroy(&ts[i].opts);
		bson_destroy(&ts[i].cmd);
		mongoc_client_destroy(cl[i]);
	}
	proxy_assert_alive(p, "after merged queries that found nothing");
	read_batch_stats(p, &bs);
	log_batch_stats("lookups that find nothing", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(bs.merged, 0);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* Regression (was UB that aborted the Asan build): an empty BinData _id. lookup_new copies
 * the ids with bson_value_copy, which leaves data == NULL for length 0, and
 * cmp_bytes hands that to memcmp (memcmp(NULL, p, 0) is undefined; UBSan
 * with -fno-sanitize-recover=undefined aborts the proxy). */
Test(batching, empty_bindata_id)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[4];
	struct proxy *p;
	struct together ts[4];
	mongoc_collection_t *col;
	bson_t *doc;
	bson_error_t err;
	int diffs = 0;

	setup_dataset(&ds, &direct);
	col = mongoc_client_get_collection(direct, ds.db, "c");
	doc = bson_new();
	bson_append_binary(doc, "_id", 3, BSON_SUBTYPE_BINARY, (const uint8_t *)"", 0);
	BSON_APPEND_UTF8(doc, "what", "empty bindata");
	/* (lookups 2 and 3 carry two empty BinData ids: compared even if absent) */
	if (!mongoc_collection_insert_one(col, doc, NULL, NULL, &err))
		cr_log_info("empty_bindata_id: %s does not store an empty BinData _id (%s); "
			    "looking it up all the same",
			    h_backend_name(), err.message);
	bson_destroy(doc);
	mongoc_collection_destroy(col);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	for (int i = 0; i < 4; i++) {
		bson_t cond, arr;

		cl[i] = h_proxy_client(p, "empty-bindata");
		memset(&ts[i], 0, sizeof(ts[i]));
		bson_init(&ts[i].filter);
		bson_init(&ts[i].opts);
		bson_init(&ts[i].cmd);
		BSON_APPEND_DOCUMENT_BEGIN(&ts[i].filter, "_id", &cond);
		BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
		bson_append_binary(&arr, "0", 1, BSON_SUBTYPE_BINARY, (const uint8_t *)"", 0);
		bson_append_binary(&arr, "1", 1, BSON_SUBTYPE_BINARY,
				   (const uint8_t *)"\x01\x02\x03", i < 2 ? 3 : 0);
		BSON_APPEND_INT32(&arr, "2", i);
		bson_append_array_end(&cond, &arr);
		bson_append_document_end(&ts[i].filter, &cond);
		ts[i].c = cl[i];
		ts[i].db = ds.db;
		ts[i].coll = "c";
	}
	run_together(ts, 4);
	for (int i = 0; i < 4; i++) {
		struct result dr;
		char *why;

		run_find(direct, ds.db, "c", &ts[i].filter, &ts[i].opts, &dr);
		if (!same_result(&ts[i].res, &dr, backend_orders_in_by_id(), &why)) {
			cr_log_error("lookup %d: %s", i, why);
			diffs++;
		}
		bson_free(why);
		result_clear(&dr);
		result_clear(&ts[i].res);
		bson_destroy(&ts[i].filter);
		bson_destroy(&ts[i].opts);
		bson_destroy(&ts[i].cmd);
		mongoc_client_destroy(cl[i]);
	}
	proxy_assert_alive(p, "after lookups of an empty BinData _id");
	cr_expect_eq(diffs, 0);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- namespaces and keys kept apart ------------------------------------ */

/* Same _id values in db1.c, db1.d and db2.c, with different contents:
 * lookups merged only per namespace (and projection), each answered from its
 * own namespace. */
struct ns_worker {
	pthread_barrier_t *start;
	mongoc_client_t *px, *dr;
	const char *dbs[3], *colls[3];
	int idx, diffs;
	char first_diff[2000];
};

static void *ns_worker_main(void *arg)
{
	struct ns_worker *w = arg;
	uint64_t seed = 0x51ed27a3ULL * (uint64_t)(w->idx + 7);

	pthread_barrier_wait(w->start);
	for (int i = 0; i < 40; i++) {
		int ns = rnd_int(&seed, 3), n = 1 + rnd_int(&seed, 6);
		bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, cond, arr, proj;
		struct result a, b;
		char *why;

		BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &cond);
		BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
		for (int j = 0; j < n; j++) {
			char key[8];

			snprintf(key, sizeof(key), "%d", j);
			BSON_APPEND_INT32(&arr, key, rnd_int(&seed, 60)); /* 50..59 missing */
		}
		bson_append_array_end(&cond, &arr);
		bson_append_document_end(&filter, &cond);
		if (rnd_int(&seed, 2)) {
			BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
			BSON_APPEND_INT32(&proj, "where", 1);
			bson_append_document_end(&opts, &proj);
		}
		run_find(w->px, w->dbs[ns], w->colls[ns], &filter, &opts, &a);
		run_find(w->dr, w->dbs[ns], w->colls[ns], &filter, &opts, &b);
		if (!same_result(&a, &b, backend_orders_in_by_id(), &why)) {
			if (w->diffs++ == 0) {
				char *f = bson_as_relaxed_extended_json(&filter, NULL);

				snprintf(w->first_diff, sizeof(w->first_diff), "%s.%s %s: %s",
					 w->dbs[ns], w->colls[ns], f, why);
				bson_free(f);
			}
			bson_free(why);
		}
		result_clear(&a);
		result_clear(&b);
		bson_destroy(&filter);
		bson_destroy(&opts);
	}
	return NULL;
}

Test(batching, namespaces_kept_apart)
{
	char db1[64], db2[64];
	mongoc_client_t *direct = h_backend_client("batching-ns");
	struct proxy *p;
	struct ns_worker ws[24];
	pthread_t th[24];
	pthread_barrier_t start;
	struct batch_stats bs;
	int diffs = 0;

	h_unique(db1, sizeof(db1), "batching_ns");
	h_unique(db2, sizeof(db2), "batching_ns");
	for (int k = 0; k < 3; k++) {
		const char *db = k == 2 ? db2 : db1, *coll = k == 1 ? "d" : "c";
		mongoc_collection_t *col = mongoc_client_get_collection(direct, db, coll);
		bson_error_t err;

		for (int i = 0; i < 50; i++) {
			bson_t *doc = bson_new();
			char where[160];

			snprintf(where, sizeof(where), "%s.%s #%d", db, coll, i);
			BSON_APPEND_INT32(doc, "_id", i);
			BSON_APPEND_UTF8(doc, "where", where);
			BSON_APPEND_INT32(doc, "k", k);
			cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "%s",
				  err.message);
			bson_destroy(doc);
		}
		mongoc_collection_destroy(col);
	}
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 3000\n");
	pthread_barrier_init(&start, NULL, 24);
	for (int i = 0; i < 24; i++) {
		memset(&ws[i], 0, sizeof(ws[i]));
		ws[i].start = &start;
		ws[i].idx = i;
		ws[i].px = h_proxy_client(p, "batching-ns");
		ws[i].dr = h_backend_client("batching-ns");
		ws[i].dbs[0] = ws[i].dbs[1] = db1;
		ws[i].dbs[2] = db2;
		ws[i].colls[0] = ws[i].colls[2] = "c";
		ws[i].colls[1] = "d";
		cr_assert_eq(pthread_create(&th[i], NULL, ns_worker_main, &ws[i]), 0);
	}
	for (int i = 0; i < 24; i++) {
		pthread_join(th[i], NULL);
		if (ws[i].diffs > 0)
			cr_log_error("worker %d: %d differences, first: %s", i, ws[i].diffs,
				     ws[i].first_diff);
		diffs += ws[i].diffs;
		mongoc_client_destroy(ws[i].px);
		mongoc_client_destroy(ws[i].dr);
	}
	pthread_barrier_destroy(&start);
	read_batch_stats(p, &bs);
	log_batch_stats("namespaces kept apart", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(bs.merged, 0);
	cr_expect_eq(bs.fallbacks, 0);
	proxy_stop(p);
	h_drop_db(direct, db1);
	h_drop_db(direct, db2);
	mongoc_client_destroy(direct);
}

/* ---- pipelined and abandoned lookups (raw sockets) --------------------- */

static bson_t *raw_find_in(const char *db, const int *ids, int n)
{
	bson_t *cmd = bson_new(), f, cond, arr;

	BSON_APPEND_UTF8(cmd, "find", "c");
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &f);
	BSON_APPEND_DOCUMENT_BEGIN(&f, "_id", &cond);
	BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
	for (int j = 0; j < n; j++) {
		char key[8];

		snprintf(key, sizeof(key), "%d", j);
		BSON_APPEND_INT32(&arr, key, ids[j]);
	}
	bson_append_array_end(&cond, &arr);
	bson_append_document_end(&f, &cond);
	bson_append_document_end(cmd, &f);
	BSON_APPEND_UTF8(cmd, "$db", db);
	return cmd;
}

/* The _id values of reply.cursor.firstBatch as int32s; -1 on error. */
static int reply_ids(const bson_t *reply, int *out, int max)
{
	bson_iter_t it, arr, id;
	int n = 0;

	if (!bson_iter_init(&it, reply) ||
	    !bson_iter_find_descendant(&it, "cursor.firstBatch", &arr) ||
	    !bson_iter_recurse(&arr, &it))
		return -1;
	while (bson_iter_next(&it) && n < max) {
		bson_t d;
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&it, &len, &data);
		if (!bson_init_static(&d, data, len) || !bson_iter_init_find(&id, &d, "_id"))
			return -1;
		out[n++] = bson_iter_as_int64(&id) > INT32_MAX ? -1 : (int)bson_iter_as_int64(&id);
	}
	return n;
}

/* One connection sends 16 lookups without waiting; they join one batch and
 * the replies (matched by responseTo) carry each its own documents. */
Test(batching, pipelined_lookups_one_connection)
{
	struct dataset ds;
	mongoc_client_t *direct;
	struct proxy *p;
	struct batch_stats bs;
	int fd, diffs = 0;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	fd = raw_connect(p);
	cr_assert_geq(fd, 0);
	for (int round = 0; round < 3; round++) {
		struct h_buf b;
		int ids[16][4], got[16] = {0};

		hb_init(&b);
		for (int i = 0; i < 16; i++) {
			bson_t *cmd;
			struct h_buf one;

			for (int j = 0; j < 4; j++)
				ids[i][j] =
				    (i * 7 + j * 13 + round * 5) % 230 - 20; /* some missing */
			cmd = raw_find_in(ds.db, ids[i], 1 + i % 4);
			hb_init(&one);
			h_build_msg(&one, 1000 * round + i + 1, 0, cmd);
			hb_add(&b, one.data, one.len);
			hb_free(&one);
			bson_destroy(cmd);
		}
		cr_assert(raw_send(fd, b.data, b.len));
		hb_free(&b);
		for (int k = 0; k < 16; k++) {
			uint8_t *msg;
			size_t len;
			struct raw_reply r;
			enum raw_status st = raw_recv_msg(fd, &msg, &len, 10000);
			int i, pids[8], dids[8], np, nd;
			bson_t *cmd, dreply;
			bson_error_t err;

			cr_assert_eq(st, RAW_OK, "reply %d: %s", k, raw_status_name(st));
			cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
			i = r.response_to - 1000 * round - 1;
			cr_assert(i >= 0 && i < 16 && !got[i], "unexpected responseTo %d",
				  r.response_to);
			got[i] = 1;
			cmd = raw_find_in(ds.db, ids[i], 1 + i % 4);
			cr_assert(h_cmd(direct, ds.db, cmd, &dreply, &err), "%s", err.message);
			np = reply_ids(&r.doc, pids, 8);
			nd = reply_ids(&dreply, dids, 8);
			if (np != nd ||
			    memcmp(pids, dids, sizeof(int) * (size_t)(np > 0 ? np : 0))) {
				char *j = bson_as_relaxed_extended_json(cmd, NULL);

				cr_log_error("pipelined %s: proxy %d docs, direct %d docs", j, np,
					     nd);
				bson_free(j);
				diffs++;
			}
			bson_destroy(&dreply);
			bson_destroy(cmd);
			free(msg);
		}
	}
	close(fd);
	read_batch_stats(p, &bs);
	log_batch_stats("pipelined lookups", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(bs.merged, 0, "pipelined lookups were not merged");
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* Clients that send lookups and go away while their batch waits: the batch
 * still runs for the others, the abandoned shares are dropped, the proxy
 * stays up (and, under ASan, clean). */
Test(batching, abandoned_lookups)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[8];
	struct proxy *p;
	struct batch_stats bs;
	struct together ts[8];
	int diffs = 0;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 30000\n");
	for (int round = 0; round < 5; round++) {
		int fds[8];

		/* 8 lookups that nobody will read, pipelined on 8 connections... */
		for (int i = 0; i < 8; i++) {
			int ids[3] = {i, i + 1, 100 + round};
			bson_t *cmd = raw_find_in(ds.db, ids, 3);
			struct h_buf b;

			fds[i] = raw_connect(p);
			cr_assert_geq(fds[i], 0);
			hb_init(&b);
			for (int k = 0; k < 4; k++) {
				struct h_buf one;

				hb_init(&one);
				h_build_msg(&one, k + 1, 0, cmd);
				hb_add(&b, one.data, one.len);
				hb_free(&one);
			}
			cr_assert(raw_send(fds[i], b.data, b.len));
			hb_free(&b);
			bson_destroy(cmd);
		}
		/* ...their clients gone before the batch is sent... */
		for (int i = 0; i < 8; i += 2)
			close(fds[i]);
		/* ...while 8 others join it. */
		for (int i = 0; i < 8; i++) {
			cl[i] = h_proxy_client(p, "abandon");
			memset(&ts[i], 0, sizeof(ts[i]));
			bson_init(&ts[i].filter);
			bson_init(&ts[i].opts);
			bson_init(&ts[i].cmd);
			BSON_APPEND_INT32(&ts[i].filter, "_id", i * 3 + round);
			ts[i].c = cl[i];
			ts[i].db = ds.db;
			ts[i].coll = "c";
		}
		run_together(ts, 8);
		for (int i = 1; i < 8; i += 2)
			close(fds[i]);
		for (int i = 0; i < 8; i++) {
			struct result dr;
			char *why;

			run_find(direct, ds.db, "c", &ts[i].filter, &ts[i].opts, &dr);
			if (!same_result(&ts[i].res, &dr, true, &why)) {
				cr_log_error("round %d lookup %d: %s", round, i, why);
				diffs++;
			}
			bson_free(why);
			result_clear(&dr);
			result_clear(&ts[i].res);
			bson_destroy(&ts[i].filter);
			bson_destroy(&ts[i].opts);
			bson_destroy(&ts[i].cmd);
			mongoc_client_destroy(cl[i]);
		}
		proxy_assert_alive(p, "after clients abandoned their lookups");
	}
	h_sleep_ms(100);
	read_batch_stats(p, &bs);
	log_batch_stats("abandoned lookups", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_gt(bs.merged, 0);
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ---- $in lists longer than batch_max_ids -------------------------------- */

Test(batching, long_in_lists_and_small_batch_max_ids)
{
	struct dataset ds;
	mongoc_client_t *direct, *cl[8];
	struct proxy *p;
	struct batch_stats bs;
	struct together ts[8];
	int diffs = 0;

	setup_dataset(&ds, &direct);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 10000\n"
			"batch_max_ids = 100\n");
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 8; i++) {
			bson_t cond, arr;
			uint64_t seed = (uint64_t)(round * 8 + i + 1) * 0x2545F4914F6CDD1DULL;
			int n = i % 2 ? 150 + rnd_int(&seed, 200) : 1 + rnd_int(&seed, 60);

			cl[i] = h_proxy_client(p, "long-in");
			memset(&ts[i], 0, sizeof(ts[i]));
			bson_init(&ts[i].filter);
			bson_init(&ts[i].opts);
			bson_init(&ts[i].cmd);
			BSON_APPEND_DOCUMENT_BEGIN(&ts[i].filter, "_id", &cond);
			BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
			for (int j = 0; j < n; j++) {
				char key[8];

				snprintf(key, sizeof(key), "%d", j);
				bson_append_value(&arr, key, -1, pick_id(&ds, &seed));
			}
			bson_append_array_end(&cond, &arr);
			bson_append_document_end(&ts[i].filter, &cond);
			ts[i].c = cl[i];
			ts[i].db = ds.db;
			ts[i].coll = "c";
		}
		run_together(ts, 8);
		for (int i = 0; i < 8; i++) {
			struct result dr;
			char *why;

			run_find(direct, ds.db, "c", &ts[i].filter, &ts[i].opts, &dr);
			if (!same_result(&ts[i].res, &dr, backend_orders_in_by_id(), &why)) {
				cr_log_error("round %d lookup %d: %s", round, i, why);
				diffs++;
			}
			bson_free(why);
			result_clear(&dr);
			result_clear(&ts[i].res);
			bson_destroy(&ts[i].filter);
			bson_destroy(&ts[i].opts);
			bson_destroy(&ts[i].cmd);
			mongoc_client_destroy(cl[i]);
		}
	}
	read_batch_stats(p, &bs);
	log_batch_stats("long $in lists, batch_max_ids 100", &bs);
	cr_expect_eq(diffs, 0);
	cr_expect_eq(bs.fallbacks, 0);
	cr_expect_gt(bs.ids_le[8] + bs.ids_le[9] + bs.ids_le[10], 0,
		     "no merged query above 128 ids: the long lists did not go through");
	proxy_stop(p);
	teardown_dataset(&ds, direct);
}

/* ================================================================ bug repros */

/* Two lookups sent together through the batcher (batch_max_wait_us, one
 * connection) and compared with the same commands sent directly. */
static int compare_pair_through_batcher(const char *db, const bson_t *cmd_a, const bson_t *cmd_b,
					const char *what)
{
	mongoc_client_t *direct = h_backend_client("batching-bug");
	mongoc_client_t *cl[2];
	struct proxy *p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	struct together ts[2];
	struct batch_stats bs;
	const bson_t *cmds[2] = {cmd_a, cmd_b};
	int diffs = 0;

	for (int i = 0; i < 2; i++) {
		cl[i] = h_proxy_client(p, "batching-bug");
		memset(&ts[i], 0, sizeof(ts[i]));
		bson_init(&ts[i].filter);
		bson_init(&ts[i].opts);
		bson_copy_to(cmds[i], &ts[i].cmd);
		ts[i].c = cl[i];
		ts[i].db = db;
	}
	run_together(ts, 2);
	for (int i = 0; i < 2; i++) {
		struct result dr;
		char *why, *cj = bson_as_relaxed_extended_json(cmds[i], NULL);

		run_cmd(direct, db, cmds[i], &dr, NULL);
		if (!same_result(&ts[i].res, &dr, true, &why)) {
			cr_log_error("%s: %s\n    %s", what, cj, why);
			diffs++;
			bson_free(why);
		}
		bson_free(cj);
		result_clear(&dr);
		result_clear(&ts[i].res);
		bson_destroy(&ts[i].filter);
		bson_destroy(&ts[i].opts);
		bson_destroy(&ts[i].cmd);
		bson_destroy(&ts[i].reply);
		mongoc_client_destroy(cl[i]);
	}
	read_batch_stats(p, &bs);
	log_batch_stats(what, &bs);
	proxy_stop(p);
	mongoc_client_destroy(direct);
	return diffs;
}

/* Regression (bug fixed in 9102de1): singleBatch: true with batchSize smaller
 * than the number of ids.
 * The backend returns batchSize documents and closes the cursor (mongod,
 * FerretDB; mongo-java-server ignores singleBatch and leaves a cursor open,
 * but its first batch still holds batchSize documents): the first batch is
 * the whole answer. The batcher answers with every document. */
Test(batching, single_batch_with_batch_size)
{
	struct dataset ds;
	mongoc_client_t *direct;
	bson_t *a, *b;

	setup_dataset(&ds, &direct);
	a = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", "{", "$in", "[", BCON_INT32(1),
		     BCON_INT32(2), BCON_INT32(3), "]", "}", "}", "batchSize", BCON_INT32(1),
		     "singleBatch", BCON_BOOL(true));
	b = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(7), "}");
	cr_expect_eq(compare_pair_through_batcher(ds.db, a, b, "singleBatch + batchSize"), 0,
		     "singleBatch: true, batchSize: 1 answered differently through the batcher");
	bson_destroy(a);
	bson_destroy(b);
	teardown_dataset(&ds, direct);
}

/* A find with two `filter` keys is not batched (it used to be answered from
 * the first filter's ids while classified on the last one); it goes to the
 * backend, which rejects it (mongod) or hangs up (mongo-java-server). */
Test(batching, duplicate_filter_key)
{
	struct dataset ds;
	mongoc_client_t *direct;
	bson_t *a, *b;

	setup_dataset(&ds, &direct);
	a = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", "{", "$gt", BCON_INT32(0), "}",
		     "}", "filter", "{", "_id", BCON_INT32(5), "}");
	b = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(7), "}");
	cr_expect_eq(compare_pair_through_batcher(ds.db, a, b, "duplicate filter key"), 0,
		     "a find with two filter keys answered differently through the batcher");
	bson_destroy(a);
	bson_destroy(b);
	teardown_dataset(&ds, direct);
}

/* Regression: batch_try_submit used to copy the collection name with snprintf("%s"), so
 * "c\0x" (a name mongod and FerretDB reject, and mongo-java-server treats as
 * a collection of its own) becomes "c": the lookup is answered from
 * collection c. (Names longer than the 256/128-byte buffers are truncated
 * the same way; the backends here reject those names both before and after
 * truncation, so that only shows as a re-run.) */
Test(batching, nul_in_collection_name)
{
	struct dataset ds;
	mongoc_client_t *direct;
	bson_t a = BSON_INITIALIZER, *b, f;

	setup_dataset(&ds, &direct);
	bson_append_utf8(&a, "find", 4, "c\0x", 3);
	BSON_APPEND_DOCUMENT_BEGIN(&a, "filter", &f);
	BSON_APPEND_INT32(&f, "_id", 5);
	bson_append_document_end(&a, &f);
	b = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(7), "}");
	cr_expect_eq(compare_pair_through_batcher(ds.db, &a, b, "NUL in the collection name"), 0,
		     "find on \"c\\0x\" answered differently through the batcher");
	bson_destroy(&a);
	bson_destroy(b);
	teardown_dataset(&ds, direct);
}
