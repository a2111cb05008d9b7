/*
 * batch.c — the _id batcher.
 *
 *   find {_id: v | {$eq: v} | {$in: [...]}} ──▶ batch_try_submit
 *        idle backend and no wait configured ──▶ forwarded as is (false)
 *        else ──▶ joins an open batch with the same key, or opens one
 *                 (REQ_BATCH queued in the pool like any request)
 *   pool dispatches the batch ──▶ batch_seal: {find, filter: {_id: {$in: union}}}
 *   reply ──▶ collect documents; cursor open? getMore on the same connection
 *   drained ──▶ sort by _id, hand each lookup the documents equal to its ids
 *   merged query failed ──▶ every lookup re-run alone (its own error reaches it)
 *
 * Rules: a batch accepts members only while it is open (queued or waiting
 * for its timer); once sealed its id list is fixed. Lookups are owned by
 * their batch (members list, through queue_link) until answered. Every id
 * is a scalar accepted by classify_value, so batch_compare_ids is total.
 */
#include "pool/batch.h"

#include <event2/event.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"
#include "pool/server.h"
#include "proxy/client.h"
#include "proxy/proxy.h"
#include "proxy/stats.h"
#include "proxy/wire.h"

/* Room left under 16 MB for a reply's envelope. */
#define REPLY_DOCS_MAX (WIRE_MAX_BSON - 16 * 1024)

/* One requester's ids (copies), sorted and deduplicated. */
struct lookup {
	bson_value_t *ids;
	int nids;
};

/* A document of a merged reply and its _id (a view into the document). */
struct found {
	bson_t *doc;
	bson_value_t id;
};

#define DB_NAME_MAX   128
#define COLL_NAME_MAX 256

struct batch {
	struct request *req; /* the REQ_BATCH request that runs it */
	char *key;	     /* db, coll, projection, readConcern, readPreference, maxTimeMS */
	size_t keylen;
	char db[DB_NAME_MAX];
	char coll[COLL_NAME_MAX];
	bson_t extra; /* projection/readConcern/$readPreference/maxTimeMS to copy */
	struct request_list members;
	int nmembers;
	int nids;  /* sum over members (before union dedup) */
	bool open; /* accepting members */
	TAILQ_ENTRY(batch) open_link;
	struct event *timer; /* batch_max_wait_us with an idle backend */
	int64_t cursor_id;
	struct found *found;
	int nfound, capfound;
	bson_value_t cluster_time; /* $clusterTime of the last reply (document) */
	bson_value_t operation_time;
	bool have_ct, have_ot;
};

static TAILQ_HEAD(, batch) open_batches = TAILQ_HEAD_INITIALIZER(open_batches);
static int open_lookups;

int batch_open_lookups(void)
{
	return open_lookups;
}

/* ---- classification ------------------------------------------------- */

/* A Decimal128 _id is batched only when it is an integer of at most 18
 * digits: then it is exactly an int64 (and a long double), so comparing it
 * with int32/int64/double values through long double is exact. Others
 * (fractions, huge or tiny exponents, NaN, Infinity) are forwarded as is. */
static bool decimal_as_int64(const bson_decimal128_t *d, int64_t *out)
{
	char str[BSON_DECIMAL128_STRING], digits[64];
	const char *p = str;
	int nd = 0, exp = 0, start = 0;
	bool neg = false;
	int64_t v = 0;

	bson_decimal128_to_string(d, str);
	if (*p == '-') {
		neg = true;
		p++;
	}
	for (; *p && *p != 'E'; p++) {
		if (*p == '.') {
			for (const char *q = p + 1; *q >= '0' && *q <= '9'; q++)
				exp--;
			continue;
		}
		if (*p < '0' || *p > '9' || nd >= (int)sizeof(digits))
			return false; /* NaN, Infinity */
		digits[nd++] = *p;
	}
	if (*p == 'E')
		exp += atoi(p + 1);
	while (nd > 0 && digits[nd - 1] == '0' && exp < 0) { /* 1.50 -> 15E-1 */
		nd--;
		exp++;
	}
	while (start < nd && digits[start] == '0')
		start++;
	if (start == nd) { /* zero, whatever its exponent */
		*out = 0;
		return true;
	}
	if (exp < 0 || nd - start + exp > 18)
		return false;
	for (int i = start; i < nd; i++)
		v = v * 10 + (digits[i] - '0');
	for (int i = 0; i < exp; i++)
		v *= 10;
	*out = neg ? -v : v;
	return true;
}

static bool scalar_ok(const bson_iter_t *it)
{
	bson_decimal128_t d;
	int64_t unused;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_UTF8:
	case BSON_TYPE_OID:
	case BSON_TYPE_BOOL:
	case BSON_TYPE_DATE_TIME:
	case BSON_TYPE_TIMESTAMP:
	case BSON_TYPE_BINARY:
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
		return true;
	case BSON_TYPE_DOUBLE:
		return !isnan(bson_iter_double(it));
	case BSON_TYPE_DECIMAL128:
		return bson_iter_decimal128(it, &d) && decimal_as_int64(&d, &unused);
	default:
		return false;
	}
}

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

/* Type checks for the keys mongod would reject: forward those, don't answer. */
static const char *classify_types(const char *k, const bson_iter_t *it)
{
	if ((strcmp(k, "batchSize") == 0 || strcmp(k, "maxTimeMS") == 0) &&
	    (!BSON_ITER_HOLDS_NUMBER(it) || bson_iter_as_int64(it) < 0))
		return "batchSize/maxTimeMS is not a non-negative number";
	if ((strcmp(k, "lsid") == 0 || strcmp(k, "$readPreference") == 0) &&
	    !BSON_ITER_HOLDS_DOCUMENT(it))
		return "lsid/$readPreference is not a document";
	if (strcmp(k, "$db") == 0 && !(BSON_ITER_HOLDS_UTF8(it) && plain_name(it, DB_NAME_MAX)))
		return "$db is not a plain name";
	if (strcmp(k, "singleBatch") == 0 && !BSON_ITER_HOLDS_BOOL(it))
		return "singleBatch is not a bool";
	return NULL;
}

/* Keys a batchable find may carry; everything else disqualifies it. */
static const char *const allowed_keys[] = {
    "find", "filter",	    "projection",      "limit",	      "singleBatch", "batchSize", "$db",
    "lsid", "$clusterTime", "$readPreference", "readConcern", "maxTimeMS",   NULL};

/* Index of k in allowed_keys, -1 if absent. */
static int allowed(const char *k)
{
	for (int i = 0; allowed_keys[i]; i++)
		if (strcmp(allowed_keys[i], k) == 0)
			return i;
	return -1;
}

const char *batch_classify(const bson_t *cmd)
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
		if ((why = classify_types(k, &it)))
			return why;
		if (strcmp(k, "filter") == 0) {
			filter = it;
			have_filter = true;
		} else if (strcmp(k, "limit") == 0) {
			limit = it;
			have_limit = true;
		} else if (strcmp(k, "projection") == 0 && (why = classify_projection(&it))) {
			return why;
		} else if (strcmp(k, "readConcern") == 0 && (why = classify_read_concern(&it))) {
			return why;
		} else if (strcmp(k, "batchSize") == 0) {
			batch_size = it;
			have_batch_size = true;
		} else if (strcmp(k, "singleBatch") == 0) {
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

/* ---- comparison ----------------------------------------------------- */

static int type_rank(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_MINKEY:
		return 1;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return 10;
	case BSON_TYPE_UTF8:
		return 15;
	case BSON_TYPE_BINARY:
		return 30;
	case BSON_TYPE_OID:
		return 35;
	case BSON_TYPE_BOOL:
		return 40;
	case BSON_TYPE_DATE_TIME:
		return 45;
	case BSON_TYPE_TIMESTAMP:
		return 47;
	case BSON_TYPE_MAXKEY:
		return 100;
	default:
		return 1000;
	}
}

/* Exact for every value batch_classify accepts (long double has a 64-bit
 * mantissa: every int64 and every double fits). */
static long double as_long_double(const bson_value_t *v)
{
	int64_t i = 0;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		return v->value.v_int32;
	case BSON_TYPE_INT64:
		return (long double)v->value.v_int64;
	case BSON_TYPE_DOUBLE:
		return v->value.v_double;
	default:
		decimal_as_int64(&v->value.v_decimal128, &i);
		return (long double)i;
	}
}

static int cmp_num(long double a, long double b)
{
	return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_bytes(const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	uint32_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0; /* empty BinData has no data pointer */

	if (c != 0)
		return c < 0 ? -1 : 1;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

int batch_compare_ids(const bson_value_t *a, const bson_value_t *b)
{
	int ra = type_rank(a->value_type), rb = type_rank(b->value_type);

	if (ra != rb)
		return ra < rb ? -1 : 1;
	switch (a->value_type) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return cmp_num(as_long_double(a), as_long_double(b));
	case BSON_TYPE_UTF8:
		return cmp_bytes(a->value.v_utf8.str, a->value.v_utf8.len, b->value.v_utf8.str,
				 b->value.v_utf8.len);
	case BSON_TYPE_BINARY: /* length, then subtype, then bytes */
		if (a->value.v_binary.data_len != b->value.v_binary.data_len)
			return a->value.v_binary.data_len < b->value.v_binary.data_len ? -1 : 1;
		if (a->value.v_binary.subtype != b->value.v_binary.subtype)
			return a->value.v_binary.subtype < b->value.v_binary.subtype ? -1 : 1;
		return cmp_bytes(a->value.v_binary.data, a->value.v_binary.data_len,
				 b->value.v_binary.data, b->value.v_binary.data_len);
	case BSON_TYPE_OID:
		return cmp_bytes(a->value.v_oid.bytes, 12, b->value.v_oid.bytes, 12);
	case BSON_TYPE_BOOL:
		return (int)a->value.v_bool - (int)b->value.v_bool;
	case BSON_TYPE_DATE_TIME:
		return a->value.v_datetime < b->value.v_datetime
			   ? -1
			   : a->value.v_datetime > b->value.v_datetime;
	case BSON_TYPE_TIMESTAMP:
		if (a->value.v_timestamp.timestamp != b->value.v_timestamp.timestamp)
			return a->value.v_timestamp.timestamp < b->value.v_timestamp.timestamp ? -1
											       : 1;
		return a->value.v_timestamp.increment < b->value.v_timestamp.increment
			   ? -1
			   : a->value.v_timestamp.increment > b->value.v_timestamp.increment;
	default: /* minKey, maxKey: one value each */
		return 0;
	}
}

static int cmp_values_qsort(const void *a, const void *b)
{
	return batch_compare_ids(a, b);
}

static int cmp_found_qsort(const void *a, const void *b)
{
	return batch_compare_ids(&((const struct found *)a)->id, &((const struct found *)b)->id);
}

/* Sort and drop duplicates (MongoDB equality); values are shallow entries. */
static int sort_unique(bson_value_t *v, int n, bool destroy_dups)
{
	int out = 0;

	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_values_qsort);
	for (int i = 0; i < n; i++) {
		if (out > 0 && batch_compare_ids(&v[out - 1], &v[i]) == 0) {
			if (destroy_dups)
				bson_value_destroy(&v[i]);
			continue;
		}
		v[out++] = v[i];
	}
	return out;
}

/* ---- batch lifetime --------------------------------------------------- */

struct collect {
	struct lookup *lk;
	int cap;
};

static void collect_cb(const bson_iter_t *it, void *arg)
{
	struct collect *c = arg;

	if (c->lk->nids == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 4;
		c->lk->ids = realloc(c->lk->ids, (size_t)c->cap * sizeof(bson_value_t));
	}
	bson_value_copy(bson_iter_value((bson_iter_t *)it), &c->lk->ids[c->lk->nids++]);
}

static struct lookup *lookup_new(const bson_t *body)
{
	struct lookup *lk = calloc(1, sizeof(*lk));
	struct collect c = {lk, 0};
	bson_iter_t it, sub;

	if (bson_iter_init_find(&it, body, "filter") && bson_iter_recurse(&it, &sub) &&
	    bson_iter_next(&sub))
		classify_id_cond(&sub, collect_cb, &c);
	lk->nids = sort_unique(lk->ids, lk->nids, true);
	return lk;
}

void batch_lookup_free(struct lookup *lk)
{
	if (lk == NULL)
		return;
	for (int i = 0; i < lk->nids; i++)
		bson_value_destroy(&lk->ids[i]);
	free(lk->ids);
	free(lk);
}

/* The key: everything that must agree, and the pieces copied into the query. */
static void build_key(const bson_t *body, struct batch *b)
{
	static const char *const key_fields[] = {"projection", "readConcern", "$readPreference",
						 "maxTimeMS", NULL};
	bson_iter_t it;
	size_t dl = strlen(b->db) + 1, cl = strlen(b->coll) + 1;

	bson_init(&b->extra);
	for (int i = 0; key_fields[i]; i++)
		if (bson_iter_init_find(&it, body, key_fields[i]))
			bson_append_iter(&b->extra, key_fields[i], -1, &it);
	b->keylen = dl + cl + b->extra.len;
	b->key = malloc(b->keylen);
	memcpy(b->key, b->db, dl);
	memcpy(b->key + dl, b->coll, cl);
	memcpy(b->key + dl + cl, bson_get_data(&b->extra), b->extra.len);
}

static void free_found(struct batch *b)
{
	for (int i = 0; i < b->nfound; i++)
		bson_destroy(b->found[i].doc);
	free(b->found);
	b->found = NULL;
	b->nfound = b->capfound = 0;
}

static void close_batch(struct batch *b)
{
	if (!b->open)
		return;
	b->open = false;
	TAILQ_REMOVE(&open_batches, b, open_link);
	open_lookups -= b->nmembers;
}

/* Free the batch and its request; members must already be gone. */
static void batch_free(struct batch *b)
{
	struct request *req = b->req;

	close_batch(b);
	if (b->timer)
		event_free(b->timer);
	free_found(b);
	if (b->have_ct)
		bson_value_destroy(&b->cluster_time);
	if (b->have_ot)
		bson_value_destroy(&b->operation_time);
	bson_destroy(&b->extra);
	free(b->key);
	free(b);
	req->batch = NULL;
	request_free(req);
}

static struct batch *find_open(const char *key, size_t keylen, int nids)
{
	struct batch *b;

	TAILQ_FOREACH(b, &open_batches, open_link)
	if (b->keylen == keylen && memcmp(b->key, key, keylen) == 0 &&
	    b->nids + nids <= g.cfg.batch_max_ids)
		return b;
	return NULL;
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct batch *b = arg;

	(void)fd;
	(void)what;
	proxy_tick();
	pool_submit(b->req);
}

static struct batch *batch_open(const bson_t *body, const char *db, const char *coll)
{
	struct batch *b = calloc(1, sizeof(*b));

	snprintf(b->db, sizeof(b->db), "%s", db);
	snprintf(b->coll, sizeof(b->coll), "%s", coll);
	build_key(body, b);
	TAILQ_INIT(&b->members);
	b->open = true;
	TAILQ_INSERT_TAIL(&open_batches, b, open_link);
	b->req = request_new(NULL, REQ_BATCH);
	b->req->batch = b;
	snprintf(b->req->cmd, sizeof(b->req->cmd), "find");
	return b;
}

static void add_member(struct batch *b, struct request *req)
{
	req->kind = REQ_LOOKUP;
	req->batch = b;
	req->enqueued_usec = g.now_usec;
	TAILQ_INSERT_TAIL(&b->members, req, queue_link);
	b->nmembers++;
	b->nids += req->lookup->nids;
	open_lookups++;
	if (b->nids >= g.cfg.batch_max_ids)
		close_batch(b); /* full: it runs as soon as a connection frees up */
}

bool batch_try_submit(struct request *req, const bson_t *body)
{
	struct pool *p = pool_target();
	bool idle = !TAILQ_EMPTY(&p->idle);
	const char *why = batch_classify(body);
	bson_iter_t it;
	struct batch *b, probe = {0};
	bool fresh = false;

	if (why != NULL) {
		log_debug("find not batchable: %s", why);
		return false;
	}
	if (idle && g.cfg.batch_max_wait_us == 0 && TAILQ_EMPTY(&open_batches))
		return false; /* nothing to wait for: forward as is */
	if (!bson_iter_init_find(&it, body, "$db"))
		return false;
	snprintf(probe.db, sizeof(probe.db), "%s", bson_iter_utf8(&it, NULL));
	bson_iter_init(&it, body);
	bson_iter_next(&it);
	snprintf(probe.coll, sizeof(probe.coll), "%s", bson_iter_utf8(&it, NULL));
	req->lookup = lookup_new(body);
	build_key(body, &probe);
	b = find_open(probe.key, probe.keylen, req->lookup->nids);
	bson_destroy(&probe.extra);
	free(probe.key);
	if (b == NULL) {
		if (idle && g.cfg.batch_max_wait_us == 0) {
			batch_lookup_free(req->lookup);
			req->lookup = NULL;
			return false;
		}
		b = batch_open(body, probe.db, probe.coll);
		fresh = true;
	}
	add_member(b, req);
	if (fresh && idle && b->open) {
		/* A connection is free but batch_max_wait_us asks us to wait. */
		struct timeval tv = {0, (suseconds_t)g.cfg.batch_max_wait_us};

		b->timer = evtimer_new(g.base, timer_cb, b);
		evtimer_add(b->timer, &tv);
	} else if (fresh) {
		pool_submit(b->req); /* queued: accumulates until a connection frees up */
	} else if (!b->open && b->timer != NULL && evtimer_pending(b->timer, NULL)) {
		evtimer_del(b->timer); /* filled up while waiting: go now */
		pool_submit(b->req);
	}
	return true;
}

/* ---- running a batch ------------------------------------------------ */

static struct evbuffer *command_message(const bson_t *cmd, int32_t *id_out)
{
	struct evbuffer *msg = evbuffer_new();

	*id_out = wire_next_request_id();
	wire_append_msg(msg, *id_out, 0, 0, cmd);
	return msg;
}

void batch_seal(struct request *req)
{
	struct batch *b = req->batch;
	struct request *m;
	bson_value_t *all;
	bson_t cmd, filter, in, arr;
	int n = 0, nuniq;
	int32_t unused;
	char key[16];
	const char *k;

	close_batch(b);
	if (b->timer)
		evtimer_del(b->timer);
	all = malloc(sizeof(*all) * (size_t)(b->nids ? b->nids : 1));
	TAILQ_FOREACH(m, &b->members, queue_link)
	{
		for (int i = 0; i < m->lookup->nids; i++)
			all[n++] = m->lookup->ids[i]; /* shallow: the lookups own them */
		hist_observe(&hist_batch_wait_ms, (double)(g.now_usec - m->enqueued_usec) / 1000.0);
	}
	nuniq = sort_unique(all, n, false);
	bson_init(&cmd);
	BSON_APPEND_UTF8(&cmd, "find", b->coll);
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "filter", &filter);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (int i = 0; i < nuniq; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_value(&arr, k, -1, &all[i]);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	bson_append_document_end(&cmd, &filter);
	bson_concat(&cmd, &b->extra);
	BSON_APPEND_INT32(&cmd, "batchSize", nuniq);
	BSON_APPEND_UTF8(&cmd, "$db", b->db);
	if (req->msg)
		evbuffer_free(req->msg);
	req->msg = command_message(&cmd, &unused);
	bson_destroy(&cmd);
	free(all);
	STAT_INC(batches_sent);
	STAT_ADD(batch_lookups, (uint64_t)b->nmembers);
	if (b->nmembers > 1)
		STAT_ADD(batch_lookups_merged, (uint64_t)b->nmembers);
	hist_observe(&hist_batch_ids, nuniq);
}

/* Turn a member back into a plain forwarded request. */
static void run_alone(struct request *m)
{
	m->kind = REQ_FORWARD;
	m->batch = NULL;
	batch_lookup_free(m->lookup);
	m->lookup = NULL;
	STAT_INC(batch_fallbacks);
	if (m->client == NULL) {
		request_done(m);
		return;
	}
	pool_submit(m);
}

void batch_rerun_alone(struct request *req)
{
	struct batch *b = req->batch;
	struct request *m;

	close_batch(b);
	while ((m = TAILQ_FIRST(&b->members)) != NULL) {
		TAILQ_REMOVE(&b->members, m, queue_link);
		run_alone(m);
	}
	batch_free(b);
}

void batch_fail(struct request *req, int code, const char *codename, const char *msg,
		const char *const *labels)
{
	struct batch *b = req->batch;
	struct request *m;

	close_batch(b);
	while ((m = TAILQ_FIRST(&b->members)) != NULL) {
		TAILQ_REMOVE(&b->members, m, queue_link);
		request_fail(m, code, codename, msg, labels);
	}
	batch_free(b);
}

void batch_abandon(struct request *m)
{
	/* Its client is gone; the lookup stays a member (its ids may already be
	 * in the merged query) and is dropped when the batch is answered. */
	m->client = NULL;
}

static void keep_time(bson_value_t *dst, bool *have, const bson_t *body, const char *key)
{
	bson_iter_t it;

	if (!bson_iter_init_find(&it, body, key))
		return;
	if (*have)
		bson_value_destroy(dst);
	bson_value_copy(bson_iter_value(&it), dst);
	*have = true;
}

static bool add_found(struct batch *b, const uint8_t *data, uint32_t len)
{
	bson_t view;
	bson_iter_t it;
	struct found *f;

	if (!bson_init_static(&view, data, len) || !bson_iter_init_find(&it, &view, "_id"))
		return false;
	if (b->nfound == b->capfound) {
		b->capfound = b->capfound ? b->capfound * 2 : 64;
		b->found = realloc(b->found, (size_t)b->capfound * sizeof(*b->found));
	}
	f = &b->found[b->nfound++];
	f->doc = bson_new_from_data(data, len);
	bson_iter_init_find(&it, f->doc, "_id");
	f->id = *bson_iter_value(&it); /* view into f->doc */
	return true;
}

/* Read {ok:1, cursor: {id, firstBatch|nextBatch}}; false if the query failed. */
static bool collect_reply(struct batch *b, const bson_t *body)
{
	bson_iter_t it, cur, docs;
	const uint8_t *d;
	uint32_t dl;

	if (!bson_iter_init_find(&it, body, "ok") || bson_iter_as_double(&it) != 1.0)
		return false;
	if (!bson_iter_init_find(&it, body, "cursor") || !bson_iter_recurse(&it, &cur))
		return false;
	b->cursor_id = -1;
	while (bson_iter_next(&cur)) {
		const char *k = bson_iter_key(&cur);

		if (strcmp(k, "id") == 0) {
			b->cursor_id = bson_iter_as_int64(&cur);
		} else if ((strcmp(k, "firstBatch") == 0 || strcmp(k, "nextBatch") == 0) &&
			   bson_iter_recurse(&cur, &docs)) {
			while (bson_iter_next(&docs)) {
				if (!BSON_ITER_HOLDS_DOCUMENT(&docs))
					return false;
				bson_iter_document(&docs, &dl, &d);
				if (!add_found(b, d, dl))
					return false;
			}
		}
	}
	keep_time(&b->cluster_time, &b->have_ct, body, "$clusterTime");
	keep_time(&b->operation_time, &b->have_ot, body, "operationTime");
	return b->cursor_id >= 0;
}

static void send_get_more(struct server *s, struct batch *b)
{
	bson_t cmd;
	int32_t id;
	struct evbuffer *msg;

	bson_init(&cmd);
	BSON_APPEND_INT64(&cmd, "getMore", b->cursor_id);
	BSON_APPEND_UTF8(&cmd, "collection", b->coll);
	BSON_APPEND_INT32(&cmd, "batchSize", b->nids > 0 ? b->nids : 1);
	BSON_APPEND_UTF8(&cmd, "$db", b->db);
	msg = command_message(&cmd, &id);
	bson_destroy(&cmd);
	STAT_INC(batch_getmores);
	server_send_more(s, msg, id);
	evbuffer_free(msg);
}

/* First document whose _id is not below `id` (documents are sorted). */
static int lower_bound(const struct batch *b, const bson_value_t *id)
{
	int lo = 0, hi = b->nfound;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (batch_compare_ids(&b->found[mid].id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Answer one member with its documents, in _id order; false if too big. */
static bool answer_member(struct batch *b, struct request *m)
{
	bson_t reply, cursor, arr;
	char key[16], ns[400];
	const char *k;
	uint32_t n = 0;
	size_t bytes = 0;

	bson_init(&reply);
	BSON_APPEND_DOCUMENT_BEGIN(&reply, "cursor", &cursor);
	BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
	for (int i = 0; i < m->lookup->nids; i++) {
		/* ids are sorted and unique under MongoDB equality, and documents
		 * have unique _id values, so each id matches at most one run. */
		for (int j = lower_bound(b, &m->lookup->ids[i]);
		     j < b->nfound && batch_compare_ids(&b->found[j].id, &m->lookup->ids[i]) == 0;
		     j++) {
			bytes += b->found[j].doc->len;
			if (bytes > REPLY_DOCS_MAX) {
				bson_destroy(&reply);
				return false;
			}
			bson_uint32_to_string(n++, &k, key, sizeof(key));
			bson_append_document(&arr, k, -1, b->found[j].doc);
		}
	}
	bson_append_array_end(&cursor, &arr);
	BSON_APPEND_INT64(&cursor, "id", 0);
	snprintf(ns, sizeof(ns), "%s.%s", b->db, b->coll);
	BSON_APPEND_UTF8(&cursor, "ns", ns);
	bson_append_document_end(&reply, &cursor);
	BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
	if (b->have_ct)
		bson_append_value(&reply, "$clusterTime", -1, &b->cluster_time);
	if (b->have_ot)
		bson_append_value(&reply, "operationTime", -1, &b->operation_time);
	request_reply_doc(m, &reply);
	bson_destroy(&reply);
	return true;
}

/* Every document must belong to some lookup and every _id must be unique;
 * otherwise the backend's equality differs from ours (a collation, a view,
 * a backend quirk) and splitting could hand out wrong documents. */
static bool split_is_safe(const struct batch *b)
{
	bool *claimed = calloc((size_t)b->nfound + 1, sizeof(bool));
	const struct request *m;
	bool safe = true;

	for (int j = 1; j < b->nfound; j++)
		if (batch_compare_ids(&b->found[j - 1].id, &b->found[j].id) == 0)
			safe = false;
	TAILQ_FOREACH(m, &b->members, queue_link)
	for (int i = 0; i < m->lookup->nids; i++)
		for (int j = lower_bound(b, &m->lookup->ids[i]);
		     j < b->nfound && batch_compare_ids(&b->found[j].id, &m->lookup->ids[i]) == 0;
		     j++)
			claimed[j] = true;
	for (int j = 0; j < b->nfound; j++)
		if (!claimed[j])
			safe = false;
	free(claimed);
	return safe;
}

static void split_and_answer(struct batch *b)
{
	struct request *m;

	while ((m = TAILQ_FIRST(&b->members)) != NULL) {
		TAILQ_REMOVE(&b->members, m, queue_link);
		if (m->client == NULL) {
			request_done(m);
			continue;
		}
		if (!answer_member(b, m)) /* answered and freed, unless: */
			run_alone(m);	  /* its documents exceed 16 MB together */
	}
}

void batch_on_reply(struct server *s, struct request *req, const struct wire_msg *m)
{
	struct batch *b = req->batch;

	if (!collect_reply(b, &m->body)) {
		/* Each lookup re-runs alone so its own error reaches it. */
		s->req = NULL;
		req->server = NULL;
		batch_rerun_alone(req);
		server_release(s);
		return;
	}
	if (b->cursor_id != 0) {
		send_get_more(s, b);
		return;
	}
	s->req = NULL;
	req->server = NULL;
	if (b->nfound > 1)
		qsort(b->found, (size_t)b->nfound, sizeof(*b->found), cmp_found_qsort);
	if (split_is_safe(b)) {
		split_and_answer(b);
		batch_free(b);
	} else {
		log_warning("merged query on %s.%s returned documents that match no lookup by "
			    "MongoDB equality (collation? view?); re-running each lookup alone",
			    b->db, b->coll);
		batch_rerun_alone(req);
	}
	server_release(s);
}
