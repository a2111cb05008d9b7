// FUZZ_SOURCES: pool/batch_ids.c pool/batch_values.c pool/batch_split.c core/xalloc.c core/log.c
/*
 * fuzz_batch.c — libFuzzer target for the batcher's pure path
 * (pool/batch_ids.c): classify → id lists → union ($in) → split of a
 * scripted reply.
 *
 * The input decodes into up to 6 members' find commands, each with 1-5 ids
 * of random BSON types and values (numbers near every edge: ±0, ±inf, NaN,
 * subnormals, 2^53±k, ±2^63, raw double and decimal bits, decimals with any
 * exponent; strings, binary, ObjectId, dates, ...; and values re-used or
 * re-typed from earlier ones so that equalities happen), and a reply of up
 * to 12 documents with such _id values. Every step is checked against an
 * independent reference written here:
 *  - ref_ok (what may be batched) and ref_cmp (MongoDB order), exact:
 *    numbers as mantissa × 2^exp compared with 128-bit integers, decimals
 *    read from their bits;
 *  - batch_ids_value_ok == ref_ok, sign(batch_ids_compare) == sign(ref_cmp);
 *  - batch_ids_classify accepts the find iff every id is ref_ok;
 *  - the list is the ids sorted, strictly ascending, none lost;
 *  - the union covers every member id, without same-type duplicates;
 *  - batch_ids_split_ok is true iff every _id is ref_ok, no two _id are
 *    equal and each equals some member's id; then each member receives
 *    exactly the documents equal to one of its ids, ascending, once.
 * Any failed check aborts. Build and run: tests/fuzz/README.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/batch_ids.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MEMBERS 6
#define MAX_IDS	    5
#define MAX_DOCS    12
#define MAX_POOL    64

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* ---- input ---------------------------------------------------------------- */

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t take_u8(struct input *in)
{
	if (in->left == 0)
		return 0;
	in->left--;
	return *in->p++;
}

static uint64_t take_bytes(struct input *in, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | take_u8(in);
	return v;
}

/* ---- the reference ------------------------------------------------------------- */

/* A batchable number exactly: (-1)^neg × mag × 2^exp, mag < 2^64. */
struct rnum {
	bool neg;
	uint64_t mag;
	int exp;
};

static const uint64_t P53 = UINT64_C(1) << 53;

/* Decimal128 from its bits: canonical integers of magnitude <= 2^53 only
 * (non-canonical encodings, which MongoDB reads as 0, are refused too). */
static bool ref_decimal(const bson_decimal128_t *d, struct rnum *out)
{
	uint64_t hi = d->high, lo = d->low;
	unsigned __int128 coef, p10 = 1, max_coef = 1;
	int exp;

	if (((hi >> 61) & 3) == 3)
		return false; /* NaN, Infinity, or the non-canonical 11 form */
	coef = ((unsigned __int128)(hi & 0x1FFFFFFFFFFFFULL) << 64) | lo;
	exp = (int)((hi >> 49) & 0x3FFF) - 6176;
	for (int i = 0; i < 34; i++)
		max_coef *= 10;
	if (coef >= max_coef)
		return false;
	out->neg = hi >> 63;
	out->exp = 0;
	if (coef == 0) {
		out->mag = 0;
		out->neg = false;
		return true;
	}
	if (exp < 0) {
		if (exp < -34)
			return false; /* 0 < coef < 10^34 <= 10^-exp: a fraction */
		for (int i = 0; i < -exp; i++)
			p10 *= 10;
		if (coef % p10 != 0)
			return false;
		coef /= p10;
	} else {
		for (int i = 0; i < exp; i++) {
			coef *= 10;
			if (coef > P53)
				return false;
		}
	}
	if (coef > P53)
		return false;
	out->mag = (uint64_t)coef;
	return true;
}

static bool ref_double(double d, struct rnum *out)
{
	int e;
	double f;

	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return false; /* NaN, infinities, beyond the int64 range */
	out->neg = d < 0;
	if (d == 0) {
		out->neg = false;
		out->mag = 0;
		out->exp = 0;
		return true;
	}
	f = frexp(fabs(d), &e); /* |d| = f × 2^e, f in [0.5, 1) */
	out->mag = (uint64_t)ldexp(f, 53);
	out->exp = e - 53;
	return true;
}

static bool ref_num(const bson_value_t *v, struct rnum *out)
{
	int64_t i;

	switch (v->value_type) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		i = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
		out->neg = i < 0;
		out->mag = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
		out->exp = 0;
		return true;
	case BSON_TYPE_DOUBLE:
		return ref_double(v->value.v_double, out);
	case BSON_TYPE_DECIMAL128:
		return ref_decimal(&v->value.v_decimal128, out);
	default:
		return false;
	}
}

static int bitlen(uint64_t x)
{
	int n = 0;

	while (x) {
		n++;
		x >>= 1;
	}
	return n;
}

static int cmp_mag(const struct rnum *a, const struct rnum *b)
{
	int la, lb;
	unsigned __int128 x, y;

	if (a->mag == 0 || b->mag == 0)
		return (a->mag != 0) - (b->mag != 0);
	la = bitlen(a->mag) + a->exp;
	lb = bitlen(b->mag) + b->exp;
	if (la != lb)
		return la < lb ? -1 : 1;
	x = a->mag;
	y = b->mag;
	if (a->exp > b->exp)
		x <<= (a->exp - b->exp); /* <= 64: the leading bits line up */
	else
		y <<= (b->exp - a->exp);
	return x < y ? -1 : x > y;
}

static int ref_num_cmp(const struct rnum *a, const struct rnum *b)
{
	bool an = a->neg && a->mag, bn = b->neg && b->mag;

	if (an != bn)
		return an ? -1 : 1;
	return an ? -cmp_mag(a, b) : cmp_mag(a, b);
}

static int ref_rank(bson_type_t t)
{
	static const struct {
		bson_type_t t;
		int rank;
	} order[] = {
	    {BSON_TYPE_MINKEY, 0},    {BSON_TYPE_INT32, 1},	 {BSON_TYPE_INT64, 1},
	    {BSON_TYPE_DOUBLE, 1},    {BSON_TYPE_DECIMAL128, 1}, {BSON_TYPE_UTF8, 2},
	    {BSON_TYPE_BINARY, 3},    {BSON_TYPE_OID, 4},	 {BSON_TYPE_BOOL, 5},
	    {BSON_TYPE_DATE_TIME, 6}, {BSON_TYPE_TIMESTAMP, 7},	 {BSON_TYPE_MAXKEY, 8},
	};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (order[i].t == t)
			return order[i].rank;
	return -1;
}

static bool ref_ok(const bson_value_t *v)
{
	struct rnum n;

	if (ref_rank(v->value_type) != 1)
		return ref_rank(v->value_type) >= 0;
	return ref_num(v, &n);
}

static int three(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

static int ref_bytes(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb)
{
	for (uint32_t i = 0; i < la && i < lb; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return three(la, lb);
}

/* MongoDB order of two ref_ok values. */
static int ref_cmp(const bson_value_t *a, const bson_value_t *b)
{
	int ra = ref_rank(a->value_type), rb = ref_rank(b->value_type);
	struct rnum x, y;

	if (ra != rb)
		return three(ra, rb);
	switch (a->value_type) {
	case BSON_TYPE_UTF8:
		return ref_bytes((const uint8_t *)a->value.v_utf8.str, a->value.v_utf8.len,
				 (const uint8_t *)b->value.v_utf8.str, b->value.v_utf8.len);
	case BSON_TYPE_BINARY:
		if (a->value.v_binary.data_len != b->value.v_binary.data_len)
			return three(a->value.v_binary.data_len, b->value.v_binary.data_len);
		if (a->value.v_binary.subtype != b->value.v_binary.subtype)
			return three(a->value.v_binary.subtype, b->value.v_binary.subtype);
		return ref_bytes(a->value.v_binary.data, a->value.v_binary.data_len,
				 b->value.v_binary.data, b->value.v_binary.data_len);
	case BSON_TYPE_OID:
		return ref_bytes(a->value.v_oid.bytes, 12, b->value.v_oid.bytes, 12);
	case BSON_TYPE_BOOL:
		return three(a->value.v_bool, b->value.v_bool);
	case BSON_TYPE_DATE_TIME:
		return three(a->value.v_datetime, b->value.v_datetime);
	case BSON_TYPE_TIMESTAMP:
		if (a->value.v_timestamp.timestamp != b->value.v_timestamp.timestamp)
			return three(a->value.v_timestamp.timestamp,
				     b->value.v_timestamp.timestamp);
		return three(a->value.v_timestamp.increment, b->value.v_timestamp.increment);
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
		return 0;
	default:
		CHECK(ref_num(a, &x) && ref_num(b, &y));
		return ref_num_cmp(&x, &y);
	}
}

static int sign(int c)
{
	return c < 0 ? -1 : c > 0;
}

/* ---- decoding values -------------------------------------------------------------- */

static const double special_doubles[] = {
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.0,
    INFINITY,
    -INFINITY,
    NAN,
    5e-324,
    2.2250738585072009e-308,
    9007199254740991.0,
    9007199254740992.0,
    9007199254740994.0,
    -9007199254740992.0,
    9223372036854774784.0,
    9223372036854775808.0,
    -9223372036854775808.0,
    1e300,
};

static const char *const special_decimals[] = {
    "0",
    "-0",
    "0E-6176",
    "0.5",
    "1",
    "1.0",
    "1E+3",
    "10E-1",
    "-5",
    "9007199254740992",
    "9007199254740993",
    "-9007199254740992",
    "1234567890123456789",
    "9.999999999999999999999999999999999E+6144",
    "1E-6176",
    "NaN",
    "Infinity",
    "-Infinity",
    "5.000",
    "100E-2",
};

struct arena {
	uint8_t bytes[4096];
	size_t used;
};

/* n bytes of input copied into the arena, NUL-terminated; *n becomes 0 when
 * the arena is full. */
static uint8_t *arena_take(struct arena *a, struct input *in, uint32_t *n)
{
	static uint8_t empty[1];
	uint8_t *p;

	if (a->used + *n + 1 > sizeof(a->bytes)) {
		*n = 0;
		return empty;
	}
	p = a->bytes + a->used;
	for (uint32_t i = 0; i < *n; i++)
		p[i] = take_u8(in);
	p[*n] = '\0';
	a->used += *n + 1;
	return p;
}

struct pool {
	bson_value_t v[MAX_POOL];
	int n;
};

static void decode_number(struct input *in, uint8_t t, bson_value_t *v)
{
	int8_t off = (int8_t)take_u8(in);

	switch (t) {
	case 0:
		v->value_type = BSON_TYPE_INT32;
		v->value.v_int32 = (int32_t)take_bytes(in, 4);
		break;
	case 1:
		v->value_type = BSON_TYPE_INT64;
		v->value.v_int64 = (int64_t)take_bytes(in, 8);
		break;
	case 2:
		v->value_type = BSON_TYPE_INT64;
		v->value.v_int64 = (off & 1 ? -1 : 1) * ((int64_t)P53 + off / 2);
		break;
	case 3:
		v->value_type = BSON_TYPE_INT64;
		v->value.v_int64 = off < 0 ? INT64_MIN - off : INT64_MAX - off;
		break;
	case 4: {
		uint64_t bits = take_bytes(in, 8);

		v->value_type = BSON_TYPE_DOUBLE;
		memcpy(&v->value.v_double, &bits, 8);
		break;
	}
	case 5:
		v->value_type = BSON_TYPE_DOUBLE;
		v->value.v_double =
		    special_doubles[(uint8_t)off % (sizeof(special_doubles) / sizeof(double))];
		break;
	case 6:
		v->value_type = BSON_TYPE_DECIMAL128;
		v->value.v_decimal128.high = take_bytes(in, 8);
		v->value.v_decimal128.low = take_bytes(in, 8);
		break;
	default: {
		char s[64];

		v->value_type = BSON_TYPE_DECIMAL128;
		if (off & 1)
			snprintf(s, sizeof(s), "%dE%d", off / 2, (int8_t)take_u8(in) % 20);
		else
			snprintf(s, sizeof(s), "%s",
				 special_decimals[(uint8_t)off / 2 %
						  (sizeof(special_decimals) /
						   sizeof(*special_decimals))]);
		if (!bson_decimal128_from_string(s, &v->value.v_decimal128))
			abort();
		break;
	}
	}
}

/* The same number in another type (when it fits), to make equalities. */
static void retype(const bson_value_t *src, uint8_t how, bson_value_t *v)
{
	double d;
	char s[64];

	*v = *src;
	if (src->value_type == BSON_TYPE_INT32 || src->value_type == BSON_TYPE_INT64) {
		int64_t i =
		    src->value_type == BSON_TYPE_INT32 ? src->value.v_int32 : src->value.v_int64;

		if (how % 3 == 0) {
			v->value_type = BSON_TYPE_DOUBLE;
			v->value.v_double = (double)i;
		} else if (how % 3 == 1) {
			v->value_type = BSON_TYPE_DECIMAL128;
			snprintf(s, sizeof(s), "%lld", (long long)i);
			if (!bson_decimal128_from_string(s, &v->value.v_decimal128))
				abort();
		} else {
			v->value_type = BSON_TYPE_INT64;
			v->value.v_int64 = i;
		}
	} else if (src->value_type == BSON_TYPE_DOUBLE) {
		d = src->value.v_double;
		if (d >= -9.2e18 && d <= 9.2e18 && d == (double)(int64_t)d) {
			v->value_type = BSON_TYPE_INT64;
			v->value.v_int64 = (int64_t)d;
		}
	}
}

static void decode_value(struct input *in, struct arena *ar, struct pool *pl, bson_value_t *v)
{
	uint8_t t = take_u8(in) % 20;

	memset(v, 0, sizeof(*v));
	if (t < 8) {
		decode_number(in, t, v);
	} else if (t == 8) {
		uint32_t n = take_u8(in) % 9;

		v->value_type = BSON_TYPE_UTF8;
		v->value.v_utf8.str = (char *)arena_take(ar, in, &n);
		v->value.v_utf8.len = (uint32_t)strlen(v->value.v_utf8.str); /* no NUL inside */
	} else if (t == 9) {
		uint32_t n = take_u8(in) % 6;

		v->value_type = BSON_TYPE_BINARY;
		v->value.v_binary.subtype = (bson_subtype_t)(take_u8(in) % 2 ? 0 : 0x80);
		v->value.v_binary.data = arena_take(ar, in, &n);
		v->value.v_binary.data_len = n;
	} else if (t == 10) {
		v->value_type = BSON_TYPE_OID;
		for (int i = 0; i < 12; i++)
			v->value.v_oid.bytes[i] = take_u8(in) & 3;
	} else if (t == 11) {
		v->value_type = BSON_TYPE_BOOL;
		v->value.v_bool = take_u8(in) & 1;
	} else if (t == 12) {
		v->value_type = BSON_TYPE_DATE_TIME;
		v->value.v_datetime = (int8_t)take_u8(in);
	} else if (t == 13) {
		v->value_type = BSON_TYPE_TIMESTAMP;
		v->value.v_timestamp.timestamp = take_u8(in) & 3;
		v->value.v_timestamp.increment = take_u8(in) & 3;
	} else if (t == 14) {
		v->value_type = take_u8(in) & 1 ? BSON_TYPE_MINKEY : BSON_TYPE_MAXKEY;
	} else if (t == 15) {
		v->value_type = BSON_TYPE_NULL; /* never batchable */
	} else if (pl->n > 0 && t < 18) {
		*v = pl->v[take_u8(in) % pl->n];
	} else if (pl->n > 0) {
		uint8_t k = take_u8(in);

		retype(&pl->v[k % pl->n], k / 64, v);
	} else {
		v->value_type = BSON_TYPE_INT32;
	}
	if (pl->n < MAX_POOL)
		pl->v[pl->n++] = *v;
}

/* ---- the checks ------------------------------------------------------------------ */

static void check_values(const struct pool *pl)
{
	for (int i = 0; i < pl->n; i++) {
		CHECK(batch_ids_value_ok(&pl->v[i]) == ref_ok(&pl->v[i]));
		for (int j = 0; j < pl->n; j++)
			if (ref_ok(&pl->v[i]) && ref_ok(&pl->v[j]))
				CHECK(sign(batch_ids_compare(&pl->v[i], &pl->v[j])) ==
				      sign(ref_cmp(&pl->v[i], &pl->v[j])));
	}
}

static void build_find(const bson_value_t *ids, int n, bool plain, bson_t *cmd)
{
	bson_t filter, cond, arr;
	char key[8];

	bson_init(cmd);
	BSON_APPEND_UTF8(cmd, "find", "c");
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &filter);
	if (plain && n == 1) {
		bson_append_value(&filter, "_id", 3, &ids[0]);
	} else {
		BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &cond);
		BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
		for (int i = 0; i < n; i++) {
			key[0] = (char)('0' + i);
			key[1] = '\0';
			bson_append_value(&arr, key, 1, &ids[i]);
		}
		bson_append_array_end(&cond, &arr);
		bson_append_document_end(&filter, &cond);
	}
	bson_append_document_end(cmd, &filter);
	BSON_APPEND_UTF8(cmd, "$db", "d");
}

static void check_list(const struct batch_id_list *l, const bson_value_t *ids, int n)
{
	for (int i = 1; i < l->n; i++)
		CHECK(ref_cmp(&l->ids[i - 1], &l->ids[i]) < 0);
	for (int i = 0; i < n; i++) {
		bool found = false;

		for (int j = 0; j < l->n; j++)
			found |= ref_cmp(&ids[i], &l->ids[j]) == 0;
		CHECK(found);
	}
	for (int j = 0; j < l->n; j++) {
		bool found = false;

		for (int i = 0; i < n; i++)
			found |= ref_cmp(&ids[i], &l->ids[j]) == 0;
		CHECK(found);
	}
}

static void check_union(const struct batch_id_list *const *lists, int nl)
{
	bson_value_t u[MAX_MEMBERS * MAX_IDS];
	int n = batch_ids_union(lists, nl, u);

	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			CHECK(u[i].value_type != u[j].value_type || ref_cmp(&u[i], &u[j]) != 0);
	for (int k = 0; k < nl; k++)
		for (int i = 0; i < lists[k]->n; i++) {
			bool found = false;

			for (int j = 0; j < n; j++)
				found |= ref_cmp(&lists[k]->ids[i], &u[j]) == 0;
			CHECK(found);
		}
}

/* Does doc j equal one of l's ids? */
static bool wanted(const struct batch_ids_doc *d, const struct batch_id_list *l)
{
	for (int i = 0; i < l->n; i++)
		if (ref_cmp(&d->id, &l->ids[i]) == 0)
			return true;
	return false;
}

static bool ref_split_ok(const struct batch_ids_doc *docs, int nd,
			 const struct batch_id_list *const *lists, int nl)
{
	for (int j = 0; j < nd; j++)
		if (!ref_ok(&docs[j].id))
			return false;
	for (int j = 0; j < nd; j++) {
		bool claimed = false;

		for (int k = j + 1; k < nd; k++)
			if (ref_cmp(&docs[j].id, &docs[k].id) == 0)
				return false;
		for (int k = 0; k < nl; k++)
			claimed |= wanted(&docs[j], lists[k]);
		if (!claimed)
			return false;
	}
	return true;
}

static void check_split(struct batch_ids_doc *docs, int nd,
			const struct batch_id_list *const *lists, int nl)
{
	bool want = ref_split_ok(docs, nd, lists, nl);
	bool got = batch_ids_split_ok(docs, nd, lists, nl);
	int idx[MAX_IDS + 1];

	CHECK(want == got);
	if (!got)
		return;
	for (int k = 0; k < nl; k++) {
		int n = batch_ids_docs_for(docs, nd, lists[k], idx), m = 0;

		CHECK(n <= lists[k]->n);
		for (int i = 0; i < n; i++) {
			CHECK(idx[i] >= 0 && idx[i] < nd && wanted(&docs[idx[i]], lists[k]));
			if (i > 0)
				CHECK(ref_cmp(&docs[idx[i - 1]].id, &docs[idx[i]].id) < 0);
		}
		for (int j = 0; j < nd; j++)
			m += wanted(&docs[j], lists[k]);
		CHECK(m == n); /* every wanted document, each once */
	}
}

/* FUZZ_BATCH_DEBUG=1: print each member's find and both verdicts. */
static void debug_cmd(const bson_t *cmd, bool ref)
{
	const char *why;
	char *json;

	if (!getenv("FUZZ_BATCH_DEBUG"))
		return;
	why = batch_ids_classify(cmd);
	json = bson_as_canonical_extended_json(cmd, NULL);
	fprintf(stderr, "member %s: classify %s, reference %s\n", json, why ? why : "batchable",
		ref ? "batchable" : "refused");
	bson_free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	static struct arena ar;
	struct pool pl = {.n = 0};
	struct batch_id_list lists[MAX_MEMBERS];
	const struct batch_id_list *lp[MAX_MEMBERS];
	bson_t *docs_bson[MAX_DOCS];
	struct batch_ids_doc docs[MAX_DOCS];
	int nm = 1 + take_u8(&in) % MAX_MEMBERS, nl = 0, nd;

	ar.used = 0;
	for (int m = 0; m < nm; m++) {
		bson_value_t ids[MAX_IDS];
		uint8_t shape = take_u8(&in);
		int n = 1 + shape % MAX_IDS;
		bool all_ok = true;
		bson_t cmd;

		for (int i = 0; i < n; i++) {
			decode_value(&in, &ar, &pl, &ids[i]);
			all_ok &= ref_ok(&ids[i]);
		}
		build_find(ids, n, shape & 0x80, &cmd);
		debug_cmd(&cmd, all_ok);
		CHECK((batch_ids_classify(&cmd) == NULL) == all_ok);
		if (all_ok) {
			batch_ids_list_from_find(&cmd, &lists[nl]);
			check_list(&lists[nl], ids, n);
			lp[nl] = &lists[nl];
			nl++;
		}
		bson_destroy(&cmd);
	}
	check_values(&pl);
	check_union(lp, nl);
	nd = take_u8(&in) % (MAX_DOCS + 1);
	for (int j = 0; j < nd; j++) {
		bson_value_t id;

		decode_value(&in, &ar, &pl, &id);
		docs_bson[j] = bson_new();
		bson_append_value(docs_bson[j], "_id", 3, &id);
		BSON_APPEND_INT32(docs_bson[j], "k", j);
		CHECK(batch_ids_doc_init(&docs[j], bson_get_data(docs_bson[j]), docs_bson[j]->len));
	}
	check_values(&pl);
	check_split(docs, nd, lp, nl);
	for (int j = 0; j < nd; j++)
		bson_destroy(docs_bson[j]);
	for (int k = 0; k < nl; k++)
		batch_ids_list_free(&lists[k]);
	return 0;
}
