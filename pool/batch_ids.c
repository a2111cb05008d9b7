/*
 * batch_ids.c — classify, compare, merge and split for the _id batcher
 * (docs/batching.md). Pure functions over libbson values: no event loop,
 * no pool, no globals.
 *
 *   find ──▶ batch_ids_classify ──▶ batch_ids_list_from_find (sorted, unique)
 *   members' lists ──▶ batch_ids_union ──▶ the merged $in
 *   reply documents ──▶ batch_ids_split_ok ──▶ batch_ids_docs_for (per member)
 *     (the split and the reply encoder live in batch_split.c; the values'
 *     range and order, batch_ids_value_ok / batch_ids_compare, in
 *     batch_values.c)
 *
 * Exactness: numbers are compared as exact values, int64 against double
 * without going through a wider float (an int64 and the truncated double
 * are compared as integers, then the double's fraction decides). Decimal128
 * values are batched only when they are integers of magnitude <= 2^53 (so
 * exactly an int64 and a double: every backend that compares through
 * double, long or exact decimal agrees). Doubles are batched only within
 * the int64 range [-2^63, 2^63): mongo-java-server converts integral
 * doubles to int64 saturating (it finds the int64 2^63-1 for the double
 * 2^63, and its $in [-2^63, -1e300] finds only the first), so beyond it
 * the merged $in is not the union of the lookups.
 */
#include "pool/batch_ids.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

#define DB_NAME_MAX   128
#define COLL_NAME_MAX 256

static bool scalar_ok(const bson_iter_t *it)
{
	return batch_ids_value_ok(bson_iter_value((bson_iter_t *)it));
}

/* ---- classification --------------------------------------------------- */

/* The _id condition: v, {$eq: v} or {$in: [v...]} (non-empty). Calls `cb`
 * on each value when given. */
static const char *classify_id_cond(const bson_iter_t *cond,
				    void (*cb)(const bson_iter_t *, void *), void *arg)
{
	bson_iter_t sub, val;
	const char *op;

	if (scalar_ok(cond)) {
		if (cb)
			cb(cond, arg);
		return NULL;
	}
	if (!BSON_ITER_HOLDS_DOCUMENT(cond) || !bson_iter_recurse(cond, &sub) ||
	    !bson_iter_next(&sub))
		return "_id is not a scalar, {$eq} or {$in}";
	op = bson_iter_key(&sub);
	val = sub;
	if (bson_iter_next(&sub))
		return "_id condition has more than one operator";
	if (strcmp(op, "$eq") == 0) {
		if (!scalar_ok(&val))
			return "$eq value is not a batchable scalar";
		if (cb)
			cb(&val, arg);
		return NULL;
	}
	if (strcmp(op, "$in") != 0 || !BSON_ITER_HOLDS_ARRAY(&val) ||
	    !bson_iter_recurse(&val, &sub))
		return "_id operator is not $eq or $in";
	if (!bson_iter_next(&sub))
		return "empty $in";
	do {
		if (!scalar_ok(&sub))
			return "$in holds a value that is not a batchable scalar";
		if (cb)
			cb(&sub, arg);
	} while (bson_iter_next(&sub));
	return NULL;
}

static const char *classify_filter(const bson_iter_t *f)
{
	bson_iter_t sub;

	if (!BSON_ITER_HOLDS_DOCUMENT(f) || !bson_iter_recurse(f, &sub) || !bson_iter_next(&sub))
		return "filter is not a document with _id";
	if (strcmp(bson_iter_key(&sub), "_id") != 0)
		return "filter is not on _id alone";
	{
		bson_iter_t cond = sub;

		if (bson_iter_next(&sub))
			return "filter has more than _id";
		return classify_id_cond(&cond, NULL, NULL);
	}
}

/* The projection must keep _id (absent, or _id: 1/true). */
static const char *classify_projection(const bson_iter_t *p)
{
	bson_iter_t sub;

	if (!BSON_ITER_HOLDS_DOCUMENT(p) || !bson_iter_recurse(p, &sub))
		return "projection is not a document";
	while (bson_iter_next(&sub)) {
		const char *k = bson_iter_key(&sub);

		if (strncmp(k, "_id", 3) != 0)
			continue;
		if (strcmp(k, "_id") != 0 ||
		    !(BSON_ITER_HOLDS_NUMBER(&sub) || BSON_ITER_HOLDS_BOOL(&sub)) ||
		    !bson_iter_as_bool(&sub))
			return "projection does not keep _id as is";
	}
	return NULL;
}

static const char *classify_read_concern(const bson_iter_t *rc)
{
	bson_iter_t sub;

	if (!BSON_ITER_HOLDS_DOCUMENT(rc) || !bson_iter_recurse(rc, &sub))
		return "readConcern is not a document";
	while (bson_iter_next(&sub)) {
		const char *k = bson_iter_key(&sub);

		if (strcmp(k, "afterClusterTime") == 0 || strcmp(k, "atClusterTime") == 0)
			return "causally consistent or point-in-time read";
		if (strcmp(k, "level") == 0 && BSON_ITER_HOLDS_UTF8(&sub) &&
		    strcmp(bson_iter_utf8(&sub, NULL), "snapshot") == 0)
			return "snapshot read concern";
	}
	return NULL;
}

/* Number of distinct ids the filter names (after classify accepted it). */
static void count_cb(const bson_iter_t *it, void *arg)
{
	(void)it;
	(*(int *)arg)++;
}

static int count_ids(const bson_iter_t *filter)
{
	bson_iter_t sub;
	int nids = 0;

	if (bson_iter_recurse(filter, &sub) && bson_iter_next(&sub))
		classify_id_cond(&sub, count_cb, &nids); /* counts duplicates too: conservative */
	return nids;
}

static const char *classify_limit(const bson_iter_t *limit, const bson_iter_t *filter)
{
	int64_t n;

	if (!BSON_ITER_HOLDS_NUMBER(limit))
		return "limit is not a number";
	n = bson_iter_as_int64(limit);
	if (n == 0)
		return NULL;
	if (n < 0)
		return "negative limit";
	return n >= count_ids(filter) ? NULL : "limit could cut the result";
}

/* mongod's first batch holds 101 documents unless batchSize says otherwise. */
#define DEFAULT_FIRST_BATCH 101

/* singleBatch returns one batch only: its size then acts as a limit. */
static const char *classify_single_batch(const bson_iter_t *batch_size, bool have_batch_size,
					 const bson_iter_t *filter)
{
	int64_t n = have_batch_size ? bson_iter_as_int64(batch_size) : DEFAULT_FIRST_BATCH;

	return n >= count_ids(filter) ? NULL
				      : "singleBatch with a batch size that could cut the result";
}

/* A collection or database name the batcher can carry as a C string. */
static bool plain_name(const bson_iter_t *it, size_t room)
{
	uint32_t len;
	const char *str = bson_iter_utf8(it, &len);

	return str != NULL && len > 0 && len < room && strlen(str) == len;
}

/* Keys a batchable find may carry; everything else disqualifies it. The
 * enum names allowed_keys' indices, so that a key is compared as a string
 * once (allowed) and dispatched on its index after that. */
enum find_key {
	K_FIND,
	K_FILTER,
	K_PROJECTION,
	K_LIMIT,
	K_SINGLE_BATCH,
	K_BATCH_SIZE,
	K_DB,
	K_LSID,
	K_CLUSTER_TIME,
	K_READ_PREFERENCE,
	K_READ_CONCERN,
	K_MAX_TIME_MS,
	K_COUNT
};

#define KEY(s)                                                                                     \
	{                                                                                          \
		s, sizeof(s) - 1                                                                   \
	}
static const struct {
	const char *name;
	size_t len;
} allowed_keys[K_COUNT] = {
    KEY("find"),	 KEY("filter"),		 KEY("projection"),  KEY("limit"),
    KEY("singleBatch"),	 KEY("batchSize"),	 KEY("$db"),	     KEY("lsid"),
    KEY("$clusterTime"), KEY("$readPreference"), KEY("readConcern"), KEY("maxTimeMS")};
#undef KEY

/* Index of k in allowed_keys, -1 if absent (lengths first: one memcmp at most). */
static int allowed(const char *k)
{
	size_t len = strlen(k);

	for (int i = 0; i < K_COUNT; i++)
		if (allowed_keys[i].len == len && memcmp(allowed_keys[i].name, k, len) == 0)
			return i;
	return -1;
}

/* Type checks for the keys mongod would reject: forward those, don't answer. */
static const char *classify_types(int idx, const bson_iter_t *it)
{
	switch (idx) {
	case K_BATCH_SIZE:
	case K_MAX_TIME_MS:
		if (!BSON_ITER_HOLDS_NUMBER(it) || bson_iter_as_int64(it) < 0)
			return "batchSize/maxTimeMS is not a non-negative number";
		break;
	case K_LSID:
	case K_READ_PREFERENCE:
		if (!BSON_ITER_HOLDS_DOCUMENT(it))
			return "lsid/$readPreference is not a document";
		break;
	case K_DB:
		if (!(BSON_ITER_HOLDS_UTF8(it) && plain_name(it, DB_NAME_MAX)))
			return "$db is not a plain name";
		break;
	case K_SINGLE_BATCH:
		if (!BSON_ITER_HOLDS_BOOL(it))
			return "singleBatch is not a bool";
		break;
	default:
		break;
	}
	return NULL;
}

const char *batch_ids_classify(const bson_t *cmd)
{
	bson_iter_t it, filter = {0}, limit = {0}, batch_size = {0};
	bool have_filter = false, have_limit = false, have_batch_size = false, single = false;
	unsigned seen = 1; /* bit i: allowed_keys[i] met ("find" is first) */
	const char *why;

	if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) ||
	    strcmp(bson_iter_key(&it), "find") != 0 || !BSON_ITER_HOLDS_UTF8(&it) ||
	    !plain_name(&it, COLL_NAME_MAX))
		return "not a find on a plainly named collection";
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		int idx = allowed(k);

		if (idx < 0)
			return k; /* sort, skip, hint, collation, txnNumber, ... */
		if (seen & (1u << idx))
			return "a key appears twice"; /* mongod refuses such commands */
		seen |= 1u << idx;
		if ((why = classify_types(idx, &it)))
			return why;
		if (idx == K_FILTER) {
			filter = it;
			have_filter = true;
		} else if (idx == K_LIMIT) {
			limit = it;
			have_limit = true;
		} else if (idx == K_PROJECTION && (why = classify_projection(&it))) {
			return why;
		} else if (idx == K_READ_CONCERN && (why = classify_read_concern(&it))) {
			return why;
		} else if (idx == K_BATCH_SIZE) {
			batch_size = it;
			have_batch_size = true;
		} else if (idx == K_SINGLE_BATCH) {
			single = bson_iter_bool(&it);
		}
	}
	if (!have_filter)
		return "no filter";
	if ((why = classify_filter(&filter)))
		return why;
	if (have_limit && (why = classify_limit(&limit, &filter)))
		return why;
	if (single && (why = classify_single_batch(&batch_size, have_batch_size, &filter)))
		return why;
	return NULL;
}

/* ---- id lists and the union -------------------------------------------- */

static int cmp_values_qsort(const void *a, const void *b)
{
	return batch_ids_compare(a, b);
}

/* By value, then by type: the same value in the same type ends up adjacent. */
static int cmp_values_typed_qsort(const void *a, const void *b)
{
	const bson_value_t *x = a, *y = b;
	int c = batch_ids_compare(x, y);

	if (c != 0)
		return c;
	return x->value_type < y->value_type ? -1 : x->value_type > y->value_type;
}

struct collect {
	struct batch_id_list *l;
	int cap;
};

static void collect_cb(const bson_iter_t *it, void *arg)
{
	struct collect *c = arg;

	if (c->l->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4;
		c->l->ids = xrealloc(c->l->ids, (size_t)c->cap * sizeof(bson_value_t));
	}
	bson_value_copy(bson_iter_value((bson_iter_t *)it), &c->l->ids[c->l->n++]);
}

void batch_ids_list_from_find(const bson_t *cmd, struct batch_id_list *out)
{
	struct collect c = {out, 0};
	bson_iter_t it, sub;
	int n = 0;

	out->ids = NULL;
	out->n = 0;
	if (bson_iter_init_find(&it, cmd, "filter") && bson_iter_recurse(&it, &sub) &&
	    bson_iter_next(&sub))
		(void)classify_id_cond(&sub, collect_cb, &c);
	if (out->n > 1)
		qsort(out->ids, (size_t)out->n, sizeof(*out->ids), cmp_values_qsort);
	for (int i = 0; i < out->n; i++) { /* drop duplicates under MongoDB equality */
		if (n > 0 && batch_ids_compare(&out->ids[n - 1], &out->ids[i]) == 0) {
			bson_value_destroy(&out->ids[i]);
			continue;
		}
		out->ids[n++] = out->ids[i];
	}
	out->n = n;
}

void batch_ids_list_free(struct batch_id_list *l)
{
	for (int i = 0; i < l->n; i++)
		bson_value_destroy(&l->ids[i]);
	free(l->ids);
	l->ids = NULL;
	l->n = 0;
}

int batch_ids_union(const struct batch_id_list *const *lists, int nlists, bson_value_t *out)
{
	int n = 0, u = 0;

	for (int k = 0; k < nlists; k++)
		for (int i = 0; i < lists[k]->n; i++)
			out[n++] = lists[k]->ids[i];
	if (n > 1)
		qsort(out, (size_t)n, sizeof(*out), cmp_values_typed_qsort);
	for (int i = 0; i < n; i++) {
		if (u > 0 && out[u - 1].value_type == out[i].value_type &&
		    batch_ids_compare(&out[u - 1], &out[i]) == 0)
			continue;
		out[u++] = out[i];
	}
	return u;
}
