/*
 * batch_values.c — the batcher's order and range of _id values, as MongoDB
 * compares them (docs/batching.md): which values may be batched at all
 * (batch_ids_value_ok) and their total order (batch_ids_compare: BSON type
 * rank, then exact numeric comparison across int32/int64/double/decimal).
 * Pure functions; batch_ids.c classifies finds and builds the id lists
 * with them. The exactness rules are in batch_ids.c's header.
 */
#include "pool/batch_ids.h"

#include <math.h>
#include <string.h>

#define TWO_POW_53 9007199254740992LL

/* ---- numbers ---------------------------------------------------------- */

/* A non-canonical Decimal128: a coefficient above 10^34 - 1 (MongoDB reads
 * it as 0, libbson prints its digits), or the 11 combination form (NaN,
 * Infinity, or such a coefficient). Never batched. */
static bool decimal_non_canonical(const bson_decimal128_t *d)
{
	/* 10^34 = 0x1ED09BEAD87C0_378D8E6400000000 (high 49 bits, low 64 bits) */
	const uint64_t p34_hi = 0x1ED09BEAD87C0ULL, p34_lo = 0x378D8E6400000000ULL;
	uint64_t chi = d->high & 0x1FFFFFFFFFFFFULL;

	if (((d->high >> 61) & 3) == 3)
		return true;
	return chi > p34_hi || (chi == p34_hi && d->low >= p34_lo);
}

/* A Decimal128 that is an integer of magnitude <= 2^53, as an int64. Others
 * (fractions, more digits, NaN, Infinity, non-canonical) are refused. */
static bool decimal_as_int64(const bson_decimal128_t *d, int64_t *out)
{
	char str[BSON_DECIMAL128_STRING], digits[64];
	const char *p = str;
	int nd = 0, exp = 0, start = 0;
	bool neg = false;
	int64_t v = 0;

	if (decimal_non_canonical(d))
		return false;
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
	if (start == nd) { /* zero, whatever its exponent or sign */
		*out = 0;
		return true;
	}
	if (exp < 0 || nd - start + exp > 16) /* 16 digits: below 10^16, fits */
		return false;
	for (int i = start; i < nd; i++)
		v = v * 10 + (digits[i] - '0');
	for (int i = 0; i < exp; i++)
		v *= 10;
	if (v > TWO_POW_53)
		return false;
	*out = neg ? -v : v;
	return true;
}

/* A number as an exact int64 or a double. */
struct num {
	bool is_int;
	int64_t i;
	double d;
};

static struct num to_num(const bson_value_t *v)
{
	struct num n = {true, 0, 0.0};

	switch (v->value_type) {
	case BSON_TYPE_INT32:
		n.i = v->value.v_int32;
		break;
	case BSON_TYPE_INT64:
		n.i = v->value.v_int64;
		break;
	case BSON_TYPE_DOUBLE:
		n.is_int = false;
		n.d = v->value.v_double;
		break;
	default:
		if (!decimal_as_int64(&v->value.v_decimal128, &n.i))
			n.i = 0; /* not batchable: never compared (batch_ids_value_ok) */
		break;
	}
	return n;
}

/* Exact int64 <=> double for a double that is not NaN: no long double. */
static int cmp_int_double(int64_t i, double d)
{
	int64_t t;
	double frac;

	if (d >= 9223372036854775808.0) /* 2^63 and above, +inf */
		return -1;
	if (d < -9223372036854775808.0) /* below -2^63, -inf */
		return 1;
	t = (int64_t)d; /* truncation, in range: exact */
	if (i != t)
		return i < t ? -1 : 1;
	frac = d - (double)t; /* exact: t is d without its fraction bits */
	return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int cmp_num(const bson_value_t *a, const bson_value_t *b)
{
	struct num x = to_num(a), y = to_num(b);

	if (x.is_int && y.is_int)
		return x.i < y.i ? -1 : x.i > y.i;
	if (!x.is_int && !y.is_int) /* -0.0 == 0.0, infinities order naturally */
		return x.d < y.d ? -1 : x.d > y.d;
	if (x.is_int)
		return cmp_int_double(x.i, y.d);
	return -cmp_int_double(y.i, x.d);
}

bool batch_ids_value_ok(const bson_value_t *v)
{
	int64_t unused;

	switch (v->value_type) {
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
	case BSON_TYPE_DOUBLE: /* not NaN, within the int64 range */
		return v->value.v_double >= -9223372036854775808.0 &&
		       v->value.v_double < 9223372036854775808.0;
	case BSON_TYPE_DECIMAL128:
		return decimal_as_int64(&v->value.v_decimal128, &unused);
	default:
		return false;
	}
}

/* ---- comparison ------------------------------------------------------- */

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

static int cmp_bytes(const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	uint32_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0; /* empty BinData has no data pointer */

	if (c != 0)
		return c < 0 ? -1 : 1;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int cmp_u32(uint32_t a, uint32_t b)
{
	return a < b ? -1 : a > b;
}

int batch_ids_compare(const bson_value_t *a, const bson_value_t *b)
{
	int ra, rb;

	/* Fast paths for the usual ids: two integers of the same width. */
	if (a->value_type == b->value_type && a->value_type == BSON_TYPE_INT32)
		return a->value.v_int32 < b->value.v_int32 ? -1
							   : a->value.v_int32 > b->value.v_int32;
	if (a->value_type == b->value_type && a->value_type == BSON_TYPE_INT64)
		return a->value.v_int64 < b->value.v_int64 ? -1
							   : a->value.v_int64 > b->value.v_int64;
	ra = type_rank(a->value_type);
	rb = type_rank(b->value_type);
	if (ra != rb)
		return ra < rb ? -1 : 1;
	switch (a->value_type) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DECIMAL128:
		return cmp_num(a, b);
	case BSON_TYPE_UTF8:
		return cmp_bytes(a->value.v_utf8.str, a->value.v_utf8.len, b->value.v_utf8.str,
				 b->value.v_utf8.len);
	case BSON_TYPE_BINARY: /* length, then subtype, then bytes */
		if (a->value.v_binary.data_len != b->value.v_binary.data_len)
			return cmp_u32(a->value.v_binary.data_len, b->value.v_binary.data_len);
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
			return cmp_u32(a->value.v_timestamp.timestamp,
				       b->value.v_timestamp.timestamp);
		return cmp_u32(a->value.v_timestamp.increment, b->value.v_timestamp.increment);
	default: /* minKey, maxKey: one value each */
		return 0;
	}
}
