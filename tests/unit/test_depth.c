/*
 * test_depth.c — nesting depth and the iterative BSON validator
 * (core/bsonval.h) as wire_parse_msg / wire_parse_reply use it.
 *
 * Depth is counted as in wire.h: a section document is depth 0. Messages are
 * built with the chain builder below, so "depth D" means the deepest
 * document of the message sits at level D: a find filter chain, an insert
 * document in the body's `documents` array, and one in a kind-1 `documents`
 * sequence. Up to 200 levels are accepted, 201 and more refused with code 15
 * Overflow; 10,000 and 200,000 levels overflowed libbson's recursive
 * bson_validate (old main crashes here). Malformed nested lengths are refused
 * as InvalidBSON; a differential run against libbson's bson_validate on
 * mutated documents checks the validator is never laxer. With --verbose a
 * small bench prints ns per message against bson_validate.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bsonval.h"
#include "core/wire.h"

/* ---- builders ------------------------------------------------------------ */

/* {a: {a: ... {a: 1} ...}} with `levels` documents inside the outer one
 * (its deepest document is at depth `levels` relative to itself). Built
 * without recursion: each level is 7 bytes of prefix and 1 byte of EOO. */
static bson_t *chain(int levels)
{
	size_t total = 12 + 8 * (size_t)levels;
	uint8_t *p = malloc(total);
	bson_t *b;

	cr_assert_not_null(p);
	for (int i = 0; i <= levels; i++) {
		uint8_t *d = p + 7 * (size_t)i;
		size_t len = 12 + 8 * (size_t)(levels - i);

		wire_write_i32(d, (int32_t)len);
		if (i < levels)
			memcpy(d + 4,
			       "\x03"
			       "a",
			       3);
		else
			memcpy(d + 4,
			       "\x10"
			       "a\0\x01\0\0\0",
			       8);
		d[len - 1] = 0;
	}
	b = bson_new_from_data(p, total);
	cr_assert_not_null(b, "chain of %d levels", levels);
	free(p);
	return b;
}

/* A growable message buffer. */
struct mbuf {
	uint8_t *p;
	size_t len, cap;
};

static void mput(struct mbuf *m, const void *d, size_t n)
{
	if (m->len + n > m->cap) {
		m->cap = (m->len + n) * 2;
		m->p = realloc(m->p, m->cap);
		cr_assert_not_null(m->p);
	}
	memcpy(m->p + m->len, d, n);
	m->len += n;
}

static void mput_i32(struct mbuf *m, int32_t v)
{
	uint8_t le[4];

	wire_write_i32(le, v);
	mput(m, le, 4);
}

static void msg_start(struct mbuf *m)
{
	memset(m, 0, sizeof(*m));
	mput_i32(m, 0);
	mput_i32(m, 7);
	mput_i32(m, 0);
	mput_i32(m, OP_MSG);
	mput_i32(m, 0);
}

static void msg_body(struct mbuf *m, const bson_t *doc)
{
	mput(m, "", 1);
	mput(m, bson_get_data(doc), doc->len);
}

static void msg_seq(struct mbuf *m, const char *ident, const bson_t *doc, int ndocs)
{
	mput(m, "\x01", 1);
	mput_i32(m, (int32_t)(4 + strlen(ident) + 1 + (size_t)ndocs * doc->len));
	mput(m, ident, strlen(ident) + 1);
	for (int i = 0; i < ndocs; i++)
		mput(m, bson_get_data(doc), doc->len);
}

/* Patches messageLength; returns a heap copy of exactly the message. */
static uint8_t *msg_end(struct mbuf *m)
{
	wire_write_i32(m->p, (int32_t)m->len);
	return m->p;
}

enum shape { FIND_FILTER, INSERT_BODY, INSERT_SEQUENCE };
static const char *const shape_name[] = {"find filter", "insert body array",
					 "insert kind-1 sequence"};

/* An OP_MSG whose deepest document is at `depth` (>= 3). */
static uint8_t *deep_msg(enum shape s, int depth, size_t *len)
{
	struct mbuf m;
	bson_t body = BSON_INITIALIZER, doc = BSON_INITIALIZER, arr;
	bson_t *c;

	msg_start(&m);
	if (s == FIND_FILTER) {
		c = chain(depth - 1); /* body 0, filter 1 */
		BSON_APPEND_UTF8(&body, "find", "c");
		BSON_APPEND_DOCUMENT(&body, "filter", c);
	} else {
		/* body 0, documents 1, doc 2, x 3 / sequence doc 0, x 1 */
		c = chain(s == INSERT_BODY ? depth - 3 : depth - 1);
		BSON_APPEND_INT32(&doc, "_id", 1);
		BSON_APPEND_DOCUMENT(&doc, "x", c);
		BSON_APPEND_UTF8(&body, "insert", "c");
		if (s == INSERT_BODY) {
			BSON_APPEND_ARRAY_BEGIN(&body, "documents", &arr);
			BSON_APPEND_DOCUMENT(&arr, "0", &doc);
			bson_append_array_end(&body, &arr);
		}
	}
	BSON_APPEND_UTF8(&body, "$db", "test");
	msg_body(&m, &body);
	if (s == INSERT_SEQUENCE)
		msg_seq(&m, "documents", &doc, 1);
	bson_destroy(&body);
	bson_destroy(&doc);
	bson_destroy(c);
	*len = m.len;
	return msg_end(&m);
}

/* ---- wire_parse_msg at the depths of issue 8 ----------------------------- */

static void expect_depth(enum shape s, int depth, bool accepted)
{
	size_t len;
	uint8_t *msg = deep_msg(s, depth, &len);
	struct wire_msg m;
	struct wire_error e;
	bool ok;

	memset(&e, 0, sizeof(e));
	ok = wire_parse_msg(msg, len, &m, &e);
	if (accepted) {
		cr_assert(ok, "%s at depth %d refused: %s", shape_name[s], depth, e.msg);
	} else {
		cr_assert_not(ok, "%s at depth %d accepted", shape_name[s], depth);
		cr_assert_eq(e.code, 15, "%s at depth %d: code %d (%s)", shape_name[s], depth,
			     e.code, e.msg);
		cr_assert_str_eq(e.codename, "Overflow");
		cr_assert_not_null(strstr(e.msg, "exceeds maximum nested object depth"), "%s",
				   e.msg);
		cr_assert_not_null(strstr(e.msg, "mongoplex: "), "%s", e.msg);
	}
	free(msg);
}

static const int depths[] = {100, 200, 201, 10000, 200000};

static void all_depths(enum shape s)
{
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		expect_depth(s, depths[i], depths[i] <= WIRE_MAX_DEPTH);
}

Test(depth, find_filter)
{
	all_depths(FIND_FILTER);
}

Test(depth, insert_body_array)
{
	all_depths(INSERT_BODY);
}

Test(depth, insert_sequence)
{
	all_depths(INSERT_SEQUENCE);
}

/* The limit is exactly mongod's: 200 allowed, 201 refused, in each shape. */
Test(depth, boundary_each_shape)
{
	for (int s = FIND_FILTER; s <= INSERT_SEQUENCE; s++) {
		expect_depth((enum shape)s, WIRE_MAX_DEPTH - 1, true);
		expect_depth((enum shape)s, WIRE_MAX_DEPTH, true);
		expect_depth((enum shape)s, WIRE_MAX_DEPTH + 1, false);
	}
}

/* Legacy OP_QUERY goes through the same limit. */
Test(depth, op_query)
{
	bson_t *c = chain(WIRE_MAX_DEPTH + 1);
	struct mbuf m;
	struct wire_query q;
	struct wire_error e;

	memset(&m, 0, sizeof(m));
	mput_i32(&m, 0);
	mput_i32(&m, 9);
	mput_i32(&m, 0);
	mput_i32(&m, OP_QUERY);
	mput_i32(&m, 0);
	mput(&m, "admin.$cmd", 11);
	mput_i32(&m, 0);
	mput_i32(&m, -1);
	mput(&m, bson_get_data(c), c->len);
	msg_end(&m);
	cr_assert_not(wire_parse_query(m.p, m.len, &q, &e));
	cr_assert_eq(e.code, 15, "%s", e.msg);
	free(m.p);
	bson_destroy(c);
}

/* Replies may nest 20 levels more; deeper is refused (the proxy then drops
 * the backend connection) rather than walked. */
Test(depth, replies)
{
	int ok_depths[] = {WIRE_MAX_DEPTH + 1, WIRE_MAX_REPLY_DEPTH};
	int bad_depths[] = {WIRE_MAX_REPLY_DEPTH + 1, 10000, 200000};
	struct wire_msg m;
	struct wire_error e;
	size_t len;
	uint8_t *msg;

	for (int i = 0; i < 2; i++) {
		msg = deep_msg(FIND_FILTER, ok_depths[i], &len);
		cr_assert(wire_parse_reply(msg, len, &m, &e), "reply depth %d: %s", ok_depths[i],
			  e.msg);
		free(msg);
	}
	for (int i = 0; i < 3; i++) {
		msg = deep_msg(FIND_FILTER, bad_depths[i], &len);
		cr_assert_not(wire_parse_reply(msg, len, &m, &e), "reply depth %d", bad_depths[i]);
		cr_assert_eq(e.code, 15);
		free(msg);
	}
}

/* ---- bsonval_check directly ----------------------------------------------- */

static enum bsonval_status check(const bson_t *b, unsigned max_depth)
{
	size_t off;

	return bsonval_check(bson_get_data(b), b->len, max_depth, &off);
}

/* Offset of the document at level i of chain(): 7 * i. */
static uint8_t *chain_bytes(int levels, size_t *len)
{
	bson_t *c = chain(levels);
	uint8_t *p = malloc(c->len);

	memcpy(p, bson_get_data(c), c->len);
	*len = c->len;
	bson_destroy(c);
	return p;
}

static enum bsonval_status check_raw(uint8_t *p, size_t len, unsigned max_depth, size_t *off)
{
	/* exact-length heap copy so ASan sees any overread */
	uint8_t *copy = malloc(len);
	enum bsonval_status st;

	memcpy(copy, p, len);
	st = bsonval_check(copy, len, max_depth, off);
	free(copy);
	return st;
}

Test(bsonval, depth_counting)
{
	bson_t *c = chain(10);

	cr_assert_eq(check(c, 10), BSONVAL_OK);
	cr_assert_eq(check(c, 9), BSONVAL_TOO_DEEP);
	cr_assert_eq(check(c, 0), BSONVAL_TOO_DEEP);
	bson_destroy(c);
	c = chain(0);
	cr_assert_eq(check(c, 0), BSONVAL_OK);
	bson_destroy(c);
}

/* Code-with-scope's scope counts two levels, as in mongod. */
Test(bsonval, code_with_scope_depth)
{
	bson_t scope = BSON_INITIALIZER, b = BSON_INITIALIZER;

	BSON_APPEND_INT32(&scope, "x", 1);
	BSON_APPEND_CODE_WITH_SCOPE(&b, "f", "return x;", &scope);
	cr_assert_eq(check(&b, 2), BSONVAL_OK);
	cr_assert_eq(check(&b, 1), BSONVAL_TOO_DEEP);
	bson_destroy(&b);
	bson_destroy(&scope);
}

/* Lengths that lie, at depth, each refused as malformed (not as too deep,
 * and without reading outside the buffer). */
Test(bsonval, malformed_nested_lengths)
{
	const int levels = 240, at = 230; /* corrupt the document at level `at` */
	struct {
		const char *what;
		size_t rel; /* offset inside the level-`at` document */
		int32_t delta;
		int set_byte;
	} cases[] = {
	    {"length past its parent's end", 0, +1, -1},
	    {"length one short (EOO misplaced)", 0, -1, -1},
	    {"length below 5", 0, 0, 4},
	    {"huge length", 0, 0, 0x7fffffff},
	    {"negative length", 0, 0, -6},
	    {"unknown type byte inside", 4, 0, 0x55},
	    {"EOO byte not zero", 0, 0, -2},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len, off;
		uint8_t *p = chain_bytes(levels, &len);
		uint8_t *d = p + 7 * at;
		int32_t dl = wire_read_i32(d);

		if (cases[i].rel == 4)
			d[4] = (uint8_t)cases[i].set_byte;
		else if (cases[i].set_byte == -2)
			d[dl - 1] = 1;
		else if (cases[i].set_byte != -1)
			wire_write_i32(d, cases[i].set_byte);
		else
			wire_write_i32(d, dl + cases[i].delta);
		cr_assert_eq(check_raw(p, len, BSONVAL_STACK_DEPTH - 1, &off), BSONVAL_INVALID,
			     "%s", cases[i].what);
		cr_assert_leq(off, len);
		/* and at mongod's limit, a 240-level document is too deep before
		 * the corruption at level 230 is reached */
		cr_assert_eq(check_raw(p, len, WIRE_MAX_DEPTH, &off), BSONVAL_TOO_DEEP, "%s",
			     cases[i].what);
		free(p);
	}
}

/* A corrupt length at level 100 of a 10,000-level document: invalid. */
Test(bsonval, malformed_inside_very_deep)
{
	size_t len, off;
	uint8_t *p = chain_bytes(10000, &len);

	wire_write_i32(p + 7 * 100, 3);
	cr_assert_eq(check_raw(p, len, WIRE_MAX_DEPTH, &off), BSONVAL_INVALID);
	cr_assert_eq(off, 7 * 99 + 4, "reported at the element holding it: %zu", off);
	free(p);
}

/* Every type, nested: what the proxy must accept. Without code-with-scope
 * on request: libbson 1.23's bson_validate stops at the first valid
 * code-with-scope (its visitor returns "stop" on success) and checks
 * nothing after it, which would make the differential below meaningless. */
static void all_types(bson_t *b, int nest, bool cws)
{
	bson_t sub, scope = BSON_INITIALIZER;
	bson_oid_t oid;
	bson_decimal128_t dec;
	static const uint8_t bin[] = {1, 2, 3, 4, 5};

	bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
	bson_decimal128_from_string("1.5", &dec);
	BSON_APPEND_INT32(&scope, "s", 1);
	BSON_APPEND_DOUBLE(b, "d", 1.5);
	BSON_APPEND_UTF8(b, "s", "str");
	BSON_APPEND_BINARY(b, "b0", BSON_SUBTYPE_BINARY, bin, sizeof(bin));
	BSON_APPEND_BINARY(b, "b2", BSON_SUBTYPE_BINARY_DEPRECATED, bin, sizeof(bin));
	BSON_APPEND_UNDEFINED(b, "u");
	BSON_APPEND_OID(b, "o", &oid);
	BSON_APPEND_BOOL(b, "t", true);
	BSON_APPEND_DATE_TIME(b, "dt", 12345);
	BSON_APPEND_NULL(b, "n");
	BSON_APPEND_REGEX(b, "re", "^a.*", "im");
	BSON_APPEND_DBPOINTER(b, "dbp", "db.c", &oid);
	BSON_APPEND_CODE(b, "c", "x");
	BSON_APPEND_SYMBOL(b, "sym", "y");
	if (cws)
		BSON_APPEND_CODE_WITH_SCOPE(b, "cws", "z", &scope);
	BSON_APPEND_TIMESTAMP(b, "ts", 1, 2);
	BSON_APPEND_INT64(b, "l", 1);
	BSON_APPEND_DECIMAL128(b, "dec", &dec);
	BSON_APPEND_MINKEY(b, "min");
	BSON_APPEND_MAXKEY(b, "max");
	if (nest > 0) {
		BSON_APPEND_DOCUMENT_BEGIN(b, "doc", &sub);
		all_types(&sub, nest - 1, cws);
		bson_append_document_end(b, &sub);
		BSON_APPEND_ARRAY_BEGIN(b, "arr", &sub);
		BSON_APPEND_INT32(&sub, "0", 1);
		BSON_APPEND_DOCUMENT_BEGIN(&sub, "1", &scope);
		bson_append_document_end(&sub, &scope);
		bson_append_array_end(b, &sub);
	}
	bson_destroy(&scope);
}

Test(bsonval, every_type_accepted)
{
	bson_t b = BSON_INITIALIZER;
	size_t off;

	all_types(&b, 3, true);
	cr_assert(bson_validate(&b, BSON_VALIDATE_NONE, &off), "libbson agrees it is valid");
	cr_assert_eq(check(&b, WIRE_MAX_DEPTH), BSONVAL_OK);
	bson_destroy(&b);
}

/* Fails the test naming the mutated bytes and where libbson stopped. */
static void report_laxer(int i, const uint8_t *orig, const uint8_t *copy, uint32_t len,
			 const bson_t *view)
{
	char diff[256] = "";
	size_t off = 0, used = 0;

	for (uint32_t j = 0; j < len && used < sizeof(diff) - 24; j++)
		if (orig[j] != copy[j])
			used += (size_t)snprintf(diff + used, sizeof(diff) - used,
						 " @%u %02x->%02x", j, orig[j], copy[j]);
	if (bson_init_static((bson_t *)view, copy, len))
		(void)bson_validate(view, BSON_VALIDATE_NONE, &off);
	cr_assert_fail("mutation %d: libbson refuses (at %zu), bsonval accepts:%s", i, off, diff);
}

/* Differential: random byte mutations of a shallow all-types document (libbson
 * recursion is harmless at this depth). Whatever bson_validate(NONE) refuses,
 * bsonval refuses too; refusals bsonval adds are counted and printed. */
static void differential(bool cws)
{
	bson_t b = BSON_INITIALIZER;
	const uint8_t *orig;
	uint8_t *copy;
	unsigned seed = 12345;
	int both_ok = 0, both_bad = 0, stricter = 0, n = 200000;

	all_types(&b, 2, cws);
	orig = bson_get_data(&b);
	copy = malloc(b.len);
	for (int i = 0; i < n; i++) {
		bson_t view;
		size_t off;
		bool lib, ours;
		int k = 1 + rand_r(&seed) % 3;

		memcpy(copy, orig, b.len);
		while (k-- > 0) {
			size_t at = 4 + (size_t)rand_r(&seed) % (b.len - 4);
			int r = rand_r(&seed) % 4;

			copy[at] = r == 0 ? 0 : r == 1 ? 0xff : (uint8_t)rand_r(&seed);
		}
		lib = bson_init_static(&view, copy, b.len) &&
		      bson_validate(&view, BSON_VALIDATE_NONE, &off);
		ours = bsonval_check(copy, b.len, WIRE_MAX_DEPTH, &off) == BSONVAL_OK;
		if (!lib && ours)
			report_laxer(i, orig, copy, b.len, &view);
		both_ok += lib && ours;
		both_bad += !lib && !ours;
		stricter += lib && !ours;
	}
	cr_log_info("bsonval vs bson_validate(NONE), %d mutations of a %u-byte document %s "
		    "code-with-scope: both accept %d, both refuse %d, only bsonval refuses %d",
		    n, b.len, cws ? "with" : "without", both_ok, both_bad, stricter);
	free(copy);
	bson_destroy(&b);
}

Test(bsonval, never_laxer_than_libbson)
{
	differential(false);
	differential(true);
}

/* Keys of every length to 20 with one non-ASCII byte (an invalid 0xff, or
 * the first byte of a valid "\xc3\xa9") at every position: the key scan
 * reads eight bytes at a time, so each place in and across its words is
 * tried; bsonval and bson_validate(NONE) must agree on each. */
Test(bsonval, key_utf8_at_every_position)
{
	int agreed = 0;

	for (int len = 1; len <= 20; len++)
		for (int at = 0; at < len; at++)
			for (int valid = 0; valid < 2; valid++) {
				char key[24];
				bson_t b = BSON_INITIALIZER;
				size_t off;
				bool lib, ours;

				if (valid && at + 1 >= len)
					continue;
				memset(key, 'k', (size_t)len);
				key[len] = 0;
				if (valid) {
					key[at] = (char)0xc3;
					key[at + 1] = (char)0xa9;
				} else {
					key[at] = (char)0xff;
				}
				/* libbson's appends do not check keys */
				cr_assert(bson_append_int32(&b, key, len, 1));
				cr_assert(bson_append_int32(&b, "after", -1, 2));
				lib = bson_validate(&b, BSON_VALIDATE_NONE, &off);
				ours = bsonval_check(bson_get_data(&b), b.len, WIRE_MAX_DEPTH,
						     &off) == BSONVAL_OK;
				cr_assert_eq(
				    ours, lib,
				    "key length %d, byte at %d, %s: bsonval %d, libbson %d", len,
				    at, valid ? "valid" : "invalid", ours, lib);
				cr_assert_eq(lib, (bool)valid);
				agreed++;
				bson_destroy(&b);
			}
	cr_assert_eq(agreed, 20 * 21 / 2 + 19 * 20 / 2);
}

/* ---- bench (figures with --verbose, no thresholds) ------------------------ */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void find_body(bson_t *b)
{
	uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	uint8_t hash[20] = {0};
	bson_t sub, sig;

	BSON_APPEND_UTF8(b, "find", "users");
	BSON_APPEND_DOCUMENT_BEGIN(b, "filter", &sub);
	BSON_APPEND_INT64(&sub, "_id", 123456);
	bson_append_document_end(b, &sub);
	BSON_APPEND_INT32(b, "limit", 1);
	BSON_APPEND_BOOL(b, "singleBatch", true);
	BSON_APPEND_DOCUMENT_BEGIN(b, "lsid", &sub);
	BSON_APPEND_BINARY(&sub, "id", BSON_SUBTYPE_UUID, uuid, 16);
	bson_append_document_end(b, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(b, "$clusterTime", &sub);
	BSON_APPEND_TIMESTAMP(&sub, "clusterTime", 1700000000, 1);
	BSON_APPEND_DOCUMENT_BEGIN(&sub, "signature", &sig);
	BSON_APPEND_BINARY(&sig, "hash", BSON_SUBTYPE_BINARY, hash, 20);
	BSON_APPEND_INT64(&sig, "keyId", 0);
	bson_append_document_end(&sub, &sig);
	bson_append_document_end(b, &sub);
	BSON_APPEND_UTF8(b, "$db", "test");
}

static void user_doc(bson_t *d, int i)
{
	bson_t sub;
	char name[32];

	snprintf(name, sizeof(name), "user %d", i);
	BSON_APPEND_INT32(d, "_id", i);
	BSON_APPEND_UTF8(d, "name", name);
	BSON_APPEND_INT32(d, "age", 20 + i % 50);
	BSON_APPEND_DOUBLE(d, "score", i * 1.5);
	BSON_APPEND_ARRAY_BEGIN(d, "tags", &sub);
	BSON_APPEND_UTF8(&sub, "0", "a");
	BSON_APPEND_UTF8(&sub, "1", "bb");
	bson_append_array_end(d, &sub);
	BSON_APPEND_DOCUMENT_BEGIN(d, "addr", &sub);
	BSON_APPEND_UTF8(&sub, "city", "Springfield");
	BSON_APPEND_INT32(&sub, "zip", 12345);
	bson_append_document_end(d, &sub);
}

/* {cursor: {firstBatch: [100 docs], id: 0, ns}, ok: 1} */
static void find_reply_100(bson_t *b)
{
	bson_t cur, arr, d;
	char k[16];
	const char *key;

	BSON_APPEND_DOCUMENT_BEGIN(b, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &arr);
	for (uint32_t i = 0; i < 100; i++) {
		bson_uint32_to_string(i, &key, k, sizeof(k));
		bson_append_document_begin(&arr, key, -1, &d);
		user_doc(&d, (int)i);
		bson_append_document_end(&arr, &d);
	}
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", 0);
	BSON_APPEND_UTF8(&cur, "ns", "test.users");
	bson_append_document_end(b, &cur);
	BSON_APPEND_DOUBLE(b, "ok", 1.0);
}

static void bench_one(const char *what, const bson_t *b, int iters)
{
	double t0, t1, t2;
	size_t off;
	int ok = 0;

	t0 = now_ns();
	for (int i = 0; i < iters; i++)
		ok += bsonval_check(bson_get_data(b), b->len, WIRE_MAX_DEPTH, &off) == BSONVAL_OK;
	t1 = now_ns();
	for (int i = 0; i < iters; i++)
		ok += bson_validate(b, BSON_VALIDATE_NONE, &off);
	t2 = now_ns();
	cr_assert_eq(ok, 2 * iters);
	cr_log_info("%s (%u bytes): bsonval %.0f ns, libbson bson_validate %.0f ns (ratio %.2f)",
		    what, b->len, (t1 - t0) / iters, (t2 - t1) / iters, (t2 - t1) / (t1 - t0));
}

Test(bsonval, bench)
{
	bson_t find = BSON_INITIALIZER, reply = BSON_INITIALIZER, doc = BSON_INITIALIZER;
	struct mbuf m;
	struct wire_msg wm;
	struct wire_error e;
	double t0;
	const int iters = 200000;

	find_body(&find);
	find_reply_100(&reply);
	user_doc(&doc, 7);
	bench_one("1-id find body", &find, iters);
	bench_one("100-doc find reply body", &reply, iters / 50);
	/* whole wire_parse_msg of a 100-document insert (kind-1 sequence) */
	msg_start(&m);
	msg_body(&m, &find);
	msg_seq(&m, "documents", &doc, 100);
	msg_end(&m);
	t0 = now_ns();
	for (int i = 0; i < iters / 50; i++)
		cr_assert(wire_parse_msg(m.p, m.len, &wm, &e), "%s", e.msg);
	cr_log_info("wire_parse_msg of a 100-document insert (%zu bytes): %.0f ns", m.len,
		    (now_ns() - t0) / (iters / 50));
	free(m.p);
	bson_destroy(&find);
	bson_destroy(&reply);
	bson_destroy(&doc);
}
