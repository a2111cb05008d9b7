// FUZZ_SOURCES: proxy/cursor_read.c core/bsonval.c
// FUZZ_SEEDS: tests/fuzz/seeds_cursor_reply.py
/*
 * fuzz_cursor_reply.c — libFuzzer target for the cursor reply reader
 * (proxy/cursor_read.c): the cursor {id, ns} of a backend reply (find,
 * aggregate, getMore: firstBatch/nextBatch beside them), its ok and code,
 * and the killCursors reply merged with the ids the proxy answered itself.
 *
 * Input: u8 k, k little-endian int64 "foreign" ids (k <= 8), then the reply
 * body, its length header and final NUL fixed up; bodies that
 * core/bsonval.c refuses are skipped (the proxy parses backend replies with
 * it before these readers run). Checked against references written here,
 * where the first occurrence of every field counts:
 *  - cursor_reply_cursor: the first top-level "cursor" must be a document;
 *    its first "id" decides (int64, int32, integral double in range), its
 *    first "ns" is the namespace when a string;
 *  - cursor_reply_ok: the first "ok" (bson_iter_as_bool) and first int32
 *    "code";
 *  - cursor_merge_not_found: valid BSON; exactly one cursorsNotFound, an
 *    array: the first cursorsNotFound array's elements then the foreign ids,
 *    at its place (at the end when there is none); every other field
 *    unchanged, in order;
 *  - no sanitizer report.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bsonval.h"
#include "proxy/cursor_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* The first top-level field named `key` (false: none). */
static bool first(const bson_t *doc, const char *key, bson_iter_t *out)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, doc))
		return false;
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), key) == 0) {
			*out = it;
			return true;
		}
	return false;
}

static bool ref_id(const bson_iter_t *it, int64_t *id)
{
	double d;

	if (BSON_ITER_HOLDS_INT64(it)) {
		*id = bson_iter_int64(it);
		return true;
	}
	if (BSON_ITER_HOLDS_INT32(it)) {
		*id = bson_iter_int32(it);
		return true;
	}
	if (!BSON_ITER_HOLDS_DOUBLE(it))
		return false;
	d = bson_iter_double(it);
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != (double)(int64_t)d)
		return false;
	*id = (int64_t)d;
	return true;
}

static void check_cursor(const bson_t *body)
{
	bson_iter_t cur, f;
	bson_t sub;
	const uint8_t *data;
	uint32_t len;
	int64_t id = 0, want_id = 0;
	const char *ns = NULL, *want_ns = NULL;
	bool got = cursor_reply_cursor(body, &id, &ns), want = false;

	if (first(body, "cursor", &cur) && BSON_ITER_HOLDS_DOCUMENT(&cur)) {
		bson_iter_document(&cur, &len, &data);
		CHECK(bson_init_static(&sub, data, len));
		want = first(&sub, "id", &f) && ref_id(&f, &want_id);
		if (first(&sub, "ns", &f) && BSON_ITER_HOLDS_UTF8(&f))
			want_ns = bson_iter_utf8(&f, NULL);
	}
	CHECK(got == want);
	if (!got)
		return;
	CHECK(id == want_id);
	CHECK((ns == NULL) == (want_ns == NULL));
	CHECK(ns == NULL || strcmp(ns, want_ns) == 0);
}

static void check_ok(const bson_t *body)
{
	bson_iter_t f;
	int32_t code = -7;
	bool ok = cursor_reply_ok(body, &code);

	CHECK(ok == (first(body, "ok", &f) && bson_iter_as_bool(&f)));
	CHECK(code ==
	      (first(body, "code", &f) && BSON_ITER_HOLDS_INT32(&f) ? bson_iter_int32(&f) : 0));
}

/* Are two elements' values the same bytes? libbson re-encodes four types
 * when it appends them (bson_append_iter): regex options sorted and
 * filtered; code, code with scope and DBPointer strings cut at an embedded
 * NUL. For those only the type must stay (no backend sends them in a
 * killCursors reply). */
static bool same_value(const bson_iter_t *a, const bson_iter_t *b)
{
	switch (bson_iter_type(a)) {
	case BSON_TYPE_REGEX:
	case BSON_TYPE_CODE:
	case BSON_TYPE_CODEWSCOPE:
	case BSON_TYPE_DBPOINTER:
		return bson_iter_type(a) == bson_iter_type(b);
	default:
		break;
	}
	return bson_iter_type(a) == bson_iter_type(b) &&
	       a->next_off - a->d1 == b->next_off - b->d1 &&
	       memcmp(a->raw + a->d1, b->raw + b->d1, a->next_off - a->d1) == 0;
}

/* The merged array: orig's elements (may be NULL), then the foreign ids. */
static void check_array(const bson_iter_t *arr, const bson_iter_t *orig, const int64_t *ids, int n)
{
	bson_iter_t got, want;
	bool more_orig = orig != NULL && bson_iter_recurse(orig, &want);

	CHECK(BSON_ITER_HOLDS_ARRAY(arr) && bson_iter_recurse(arr, &got));
	while (more_orig && bson_iter_next(&want)) {
		CHECK(bson_iter_next(&got) && same_value(&got, &want));
	}
	for (int i = 0; i < n; i++)
		CHECK(bson_iter_next(&got) && BSON_ITER_HOLDS_INT64(&got) &&
		      bson_iter_int64(&got) == ids[i]);
	CHECK(!bson_iter_next(&got));
}

static void check_merge(const bson_t *body, const int64_t *ids, int n)
{
	bson_iter_t in, out;
	bson_t merged;
	bool placed = false;

	cursor_merge_not_found(body, ids, n, &merged);
	CHECK(bson_validate(&merged, BSON_VALIDATE_NONE, NULL));
	CHECK(bson_iter_init(&in, body) && bson_iter_init(&out, &merged));
	while (bson_iter_next(&in)) {
		bool cnf = strcmp(bson_iter_key(&in), "cursorsNotFound") == 0;

		if (cnf && (placed || !BSON_ITER_HOLDS_ARRAY(&in)))
			continue; /* dropped */
		CHECK(bson_iter_next(&out));
		CHECK(strcmp(bson_iter_key(&in), bson_iter_key(&out)) == 0);
		if (cnf) {
			check_array(&out, &in, ids, n);
			placed = true;
		} else {
			CHECK(same_value(&in, &out));
		}
	}
	if (!placed) {
		CHECK(bson_iter_next(&out) && strcmp(bson_iter_key(&out), "cursorsNotFound") == 0);
		check_array(&out, NULL, ids, n);
	}
	CHECK(!bson_iter_next(&out));
	bson_destroy(&merged);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t ids[8];
	size_t k, n, err_off;
	uint8_t *d;
	bson_t body;

	if (size < 1)
		return 0;
	k = data[0] % 9;
	if (size < 1 + k * 8)
		return 0;
	memcpy(ids, data + 1, k * 8);
	data += 1 + k * 8;
	size -= 1 + k * 8;
	n = size < 5 ? 5 : size;
	d = calloc(1, n);
	if (size > 0)
		memcpy(d, data, size);
	d[0] = (uint8_t)n;
	d[1] = (uint8_t)(n >> 8);
	d[2] = (uint8_t)(n >> 16);
	d[3] = 0;
	d[n - 1] = 0;
	if (bsonval_check(d, n, 100, &err_off) == BSONVAL_OK && bson_init_static(&body, d, n)) {
		check_cursor(&body);
		check_ok(&body);
		check_merge(&body, ids, (int)k);
	}
	free(d);
	return 0;
}
