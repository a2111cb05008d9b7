/*
 * bsonval.c — iterative BSON validation with a depth limit (see bsonval.h).
 *
 * One tight loop over the bytes: an element's type byte, its key (scanned up
 * to the NUL, which is guaranteed to exist because every open document's
 * last byte was checked to be 0 when it was opened; non-ASCII keys must be
 * valid UTF-8), then its value. Scalars
 * are skipped after their bounds are checked; an embedded document, array or
 * code-with-scope pushes the offset of its end on a fixed-size stack, and its
 * EOO pops it. Stack use is constant: BSONVAL_STACK_DEPTH * 4 bytes.
 */
#include "core/bsonval.h"

#include <bson/bson.h>
#include <string.h>

/* Marks the outer of the two frames a code-with-scope pushes (offsets are
 * below 2^31: documents are at most INT32_MAX bytes). */
#define CWS_OUTER 0x80000000u

/* value_len results that are not a length. */
#define V_BAD	   (-1)
#define V_NEST_DOC (-2)
#define V_NEST_CWS (-3)

/* The walk's state. ends[] rules: ends[0] is the whole document's length;
 * ends[i] is one past the EOO of the document open at depth i; entries above
 * `top` are garbage. A code-with-scope opens two entries with the same end
 * (the outer one flagged CWS_OUTER, never the current frame), so its scope
 * counts two levels, as in mongod. */
struct walk {
	const uint8_t *d;
	size_t pos;   /* the element being read: always < end */
	size_t end;   /* ends[top] without the flag */
	unsigned top; /* depth of the current document */
	unsigned max; /* deepest depth allowed */
	uint32_t ends[BSONVAL_STACK_DEPTH];
};

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return BSON_UINT32_FROM_LE(v);
}

/* int32 length, then that many bytes ending in NUL, then `extra` bytes
 * (DBPointer's ObjectId). The value must leave room for the EOO. */
static inline int64_t string_len(const uint8_t *d, size_t v, size_t room, size_t extra)
{
	uint32_t l;

	if (room < 5 + extra)
		return V_BAD;
	l = rd32(d + v);
	if (l == 0 || l > room - 5 - extra || d[v + 4 + l - 1] != 0)
		return V_BAD;
	return 4 + (int64_t)l + (int64_t)extra;
}

static inline int64_t binary_len(const uint8_t *d, size_t v, size_t room)
{
	uint32_t l;

	if (room < 6)
		return V_BAD;
	l = rd32(d + v);
	if (l > room - 6)
		return V_BAD;
	/* subtype 2 repeats the length inside the data */
	if (d[v + 4] == BSON_SUBTYPE_BINARY_DEPRECATED && (l < 4 || rd32(d + v + 5) != l - 4))
		return V_BAD;
	return 5 + (int64_t)l;
}

/* Two C strings; both scans stop at the frame's last byte (0) at the latest. */
static inline int64_t regex_len(const uint8_t *d, size_t v, size_t end)
{
	size_t q = v;

	if (end - v < 3) /* two NULs and the EOO */
		return V_BAD;
	while (d[q])
		q++;
	if (++q >= end)
		return V_BAD;
	while (d[q])
		q++;
	if (++q >= end)
		return V_BAD;
	return (int64_t)(q - v);
}

/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF), as libbson's bson_utf8_validate without allow_null, which
 * bson_validate applies to every key even under BSON_VALIDATE_NONE. Only
 * called for keys with a byte >= 0x80; ASCII keys skip it. */
static bool utf8_ok(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		uint32_t cp, min;
		size_t len;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			len = 2, cp = c & 0x1F, min = 0x80;
		else if ((c & 0xF0) == 0xE0)
			len = 3, cp = c & 0x0F, min = 0x800;
		else if ((c & 0xF8) == 0xF0)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return false;
		if (n - i < len)
			return false;
		for (size_t j = 1; j < len; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

/* Length of the value at v for a scalar type (< room, so an EOO still
 * fits), V_NEST_* for containers, V_BAD when malformed or unknown. */
static inline __attribute__((always_inline)) int64_t value_len(const uint8_t *d, size_t v,
							       size_t end, uint8_t type)
{
	size_t room = end - v;
	size_t n;

	switch (type) {
	case BSON_TYPE_DOUBLE:
	case BSON_TYPE_DATE_TIME:
	case BSON_TYPE_TIMESTAMP:
	case BSON_TYPE_INT64:
		n = 8;
		break;
	case BSON_TYPE_INT32:
		n = 4;
		break;
	case BSON_TYPE_OID:
		n = 12;
		break;
	case BSON_TYPE_DECIMAL128:
		n = 16;
		break;
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
	case BSON_TYPE_MINKEY:
	case BSON_TYPE_MAXKEY:
		n = 0;
		break;
	case BSON_TYPE_BOOL:
		if (room < 2 || d[v] > 1)
			return V_BAD;
		return 1;
	case BSON_TYPE_UTF8:
	case BSON_TYPE_CODE:
	case BSON_TYPE_SYMBOL:
		return string_len(d, v, room, 0);
	case BSON_TYPE_DBPOINTER:
		return string_len(d, v, room, 12);
	case BSON_TYPE_BINARY:
		return binary_len(d, v, room);
	case BSON_TYPE_REGEX:
		return regex_len(d, v, end);
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		return V_NEST_DOC;
	case BSON_TYPE_CODEWSCOPE:
		return V_NEST_CWS;
	default:
		return V_BAD;
	}
	return n < room ? (int64_t)n : V_BAD;
}

/* Open the document or array at v. */
static inline enum bsonval_status push_doc(struct walk *w, size_t v)
{
	size_t room = w->end - v;
	uint32_t l;

	if (room < 6)
		return BSONVAL_INVALID;
	l = rd32(w->d + v);
	if (l < 5 || l >= room || w->d[v + l - 1] != 0)
		return BSONVAL_INVALID;
	if (w->top + 1 > w->max)
		return BSONVAL_TOO_DEEP;
	w->end = v + l;
	w->ends[++w->top] = (uint32_t)w->end;
	w->pos = v + 4;
	return BSONVAL_OK;
}

/* Open a code-with-scope: int32 total, string, scope document, adding up. */
static inline enum bsonval_status push_cws(struct walk *w, size_t v)
{
	const uint8_t *d = w->d;
	size_t room = w->end - v;
	uint32_t t, l;

	if (room < 15)
		return BSONVAL_INVALID;
	t = rd32(d + v);
	if (t < 14 || t >= room)
		return BSONVAL_INVALID;
	l = rd32(d + v + 4);
	if (l == 0 || l > t - 13 || d[v + 8 + l - 1] != 0)
		return BSONVAL_INVALID;
	if (rd32(d + v + 8 + l) != t - 8 - l || d[v + t - 1] != 0)
		return BSONVAL_INVALID;
	if (w->top + 2 > w->max)
		return BSONVAL_TOO_DEEP;
	w->end = v + t;
	w->ends[++w->top] = (uint32_t)w->end | CWS_OUTER;
	w->ends[++w->top] = (uint32_t)w->end;
	w->pos = v + 8 + l + 4;
	return BSONVAL_OK;
}

/* At an EOO: it must be the current document's last byte; close it (and
 * the outer frame of a code-with-scope). False when the root is closed. */
static inline bool pop(struct walk *w, enum bsonval_status *st)
{
	if (w->pos + 1 != w->end) {
		*st = BSONVAL_INVALID;
		return false;
	}
	if (w->top == 0) {
		*st = BSONVAL_OK;
		return false;
	}
	w->pos = w->end;
	w->top -= (w->ends[w->top - 1] & CWS_OUTER) ? 2 : 1;
	w->end = w->ends[w->top] & ~CWS_OUTER;
	return true;
}

/* Scan the key starting at v to its NUL (which exists before `end`: the
 * frame's last byte is 0); returns the NUL's offset and ORs every key byte
 * into *high. Eight bytes at a time while they lie inside the frame (on a
 * little-endian host), then byte by byte: this loop is half of the cost. */
static inline size_t scan_key(const uint8_t *d, size_t v, size_t end, uint8_t *high)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t acc = 0;

	while (v + 8 <= end) {
		uint64_t x, zero;

		memcpy(&x, d + v, 8);
		zero = (x - ones) & ~x & highs; /* lowest set bit: the first NUL byte */
		if (zero) {
			/* the bytes below the first NUL: every bit under its 0x80 */
			acc |= x & ((zero & (0 - zero)) - 1);
			*high |= (acc & highs) ? 0x80 : 0;
			return v + ((unsigned)__builtin_ctzll(zero) >> 3);
		}
		acc |= x;
		v += 8;
	}
	*high |= (acc & highs) ? 0x80 : 0;
#else
	(void)end;
#endif
	while (d[v])
		*high |= d[v++];
	return v;
}

static enum bsonval_status walk_all(struct walk *w)
{
	const uint8_t *d = w->d;
	enum bsonval_status st;

	for (;;) {
		uint8_t type = d[w->pos], high;
		size_t v;
		int64_t n;

		if (type == 0) {
			if (!pop(w, &st))
				return st;
			continue;
		}
		high = 0;
		v = scan_key(d, w->pos + 1, w->end, &high); /* the key */
		if ((high & 0x80) && !utf8_ok(d + w->pos + 1, v - w->pos - 1))
			return BSONVAL_INVALID;
		v++;
		n = value_len(d, v, w->end, type);
		if (n >= 0) {
			w->pos = v + (size_t)n;
			continue;
		}
		if (n == V_BAD)
			return BSONVAL_INVALID;
		st = n == V_NEST_DOC ? push_doc(w, v) : push_cws(w, v);
		if (st != BSONVAL_OK)
			return st;
	}
}

enum bsonval_status bsonval_check(const uint8_t *doc, size_t len, unsigned max_depth,
				  size_t *err_off)
{
	struct walk w;
	enum bsonval_status st;

	*err_off = 0;
	if (len < 5 || len > INT32_MAX || rd32(doc) != len || doc[len - 1] != 0)
		return BSONVAL_INVALID;
	w.d = doc;
	w.pos = 4;
	w.end = len;
	w.top = 0;
	w.max = max_depth < BSONVAL_STACK_DEPTH - 2 ? max_depth : BSONVAL_STACK_DEPTH - 2;
	w.ends[0] = (uint32_t)len;
	st = walk_all(&w);
	if (st != BSONVAL_OK)
		*err_off = w.pos;
	return st;
}

void bsonval_it_init(struct bsonval_it *it, const uint8_t *doc)
{
	it->d = doc;
	it->pos = 4;
	it->end = rd32(doc);
}

bool bsonval_it_next(struct bsonval_it *it)
{
	const uint8_t *d = it->d;
	size_t v, room;
	int64_t n;
	uint8_t high = 0; /* unused: the key was checked when validated */

	if (it->pos + 1 >= it->end || d[it->pos] == 0)
		return false;
	it->type = d[it->pos];
	it->key = (const char *)d + it->pos + 1;
	v = scan_key(d, it->pos + 1, it->end, &high) + 1; /* validated: the NUL is inside */
	if (v >= it->end)
		return false;
	n = value_len(d, v, it->end, it->type);
	room = it->end - v;
	if (n == V_NEST_DOC || n == V_NEST_CWS)
		n = room >= 4 ? (int64_t)rd32(d + v) : V_BAD;
	if (n < 0 || (size_t)n >= room)
		return false;
	it->value = d + v;
	it->vlen = (size_t)n;
	it->pos = v + (size_t)n;
	return true;
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return BSON_UINT64_FROM_LE(v);
}

static inline double rd_double(const uint8_t *p)
{
	uint64_t bits = rd64(p);
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

bool bsonval_truthy(const struct bsonval_it *it)
{
	switch (it->type) {
	case BSON_TYPE_BOOL:
		return it->value[0] != 0;
	case BSON_TYPE_INT32:
		return rd32(it->value) != 0;
	case BSON_TYPE_INT64:
		return rd64(it->value) != 0;
	case BSON_TYPE_DOUBLE:
		return rd_double(it->value) != 0.0;
	case BSON_TYPE_NULL:
	case BSON_TYPE_UNDEFINED:
		return false;
	default:
		return true;
	}
}

bool bsonval_double_int64(double d, int64_t *out, bool *integral)
{
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return false; /* NaN, infinite or out of range */
	*out = (int64_t)d;
	*integral = (double)*out == d;
	return true;
}

bool bsonval_int64(const struct bsonval_it *it, int64_t *out, bool *integral)
{
	*integral = true;
	switch (it->type) {
	case BSON_TYPE_INT32:
		*out = (int32_t)rd32(it->value);
		return true;
	case BSON_TYPE_INT64:
		*out = (int64_t)rd64(it->value);
		return true;
	case BSON_TYPE_DOUBLE:
		return bsonval_double_int64(rd_double(it->value), out, integral);
	default:
		return false;
	}
}
