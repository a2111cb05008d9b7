/*
 * bsonval.h — the proxy's own BSON validator for untrusted documents:
 * iterative (an explicit fixed-size stack, no recursion), so neither a client
 * nor a backend can exhaust the proxy's stack with deep nesting.
 *
 * Depth is counted as mongod counts it (BSONDepth, bson_validate.cpp): the
 * document handed in (an OP_MSG body or one kind-1 sequence document) is at
 * depth 0; each embedded document or array is one level deeper; a
 * code-with-scope's scope counts two levels, as in mongod. A document whose
 * deepest level is <= max_depth is accepted. So with max_depth 200 (mongod's
 * kDefaultMaxAllowableDepth) a find whose filter chain {a: {a: ... }} holds
 * 200 documents counting the filter itself is accepted, 201 is refused.
 *
 * Audit of the other walks over untrusted BSON (issue 8): every message
 * (client request, backend reply, hello reply) is validated by wire.c with
 * this before anything reads it. After that nothing in proxy/, pool/ or
 * config/ recurses on document depth: no function calls itself; the batcher
 * (pool/batch.c) descends a fixed number of levels (filter -> _id -> $in,
 * cursor -> firstBatch -> document); handshake.c, router.c and admin.c read
 * top-level fields only; the libbson calls used (bson_iter_*, bson_copy,
 * bson_new_from_data, bson_concat) are iterative or memcpy; no
 * bson_as_json, bson_iter_visit_all, bson_equal/bson_compare or
 * bson_validate remains. A future recursive helper is bounded by the
 * limits here (<= 220 levels): keep its frame small (220 x 256 bytes is
 * 56 KB of the 8 MB main-thread stack).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <stdint.h>

/* Capacity of the validator's stack: the largest max_depth accepted. */
#define BSONVAL_STACK_DEPTH 256

enum bsonval_status {
	BSONVAL_OK,	  /* well-formed and within the depth limit */
	BSONVAL_INVALID,  /* malformed: *err_off is the offending element's offset */
	BSONVAL_TOO_DEEP, /* well-formed up to the level that exceeds max_depth */
};

/*
 * Validate the document of exactly `len` bytes at `doc` (its length field
 * must equal `len`). Checks what libbson 1.23's bson_validate with
 * BSON_VALIDATE_NONE checks, and a little more: every type byte is a known
 * type; keys are NUL-terminated inside their document and valid UTF-8
 * (libbson checks keys even under BSON_VALIDATE_NONE); every value lies
 * inside its document; strings (UTF-8, code, symbol, DBPointer's name) have
 * length >= 1 and end in NUL (their content is not checked as UTF-8, like
 * BSON_VALIDATE_NONE); booleans are 0 or 1; binary subtype 2 carries its
 * redundant inner length; code-with-scope lengths add up exactly; every
 * nested document's length field is >= 5, fits its parent, and its EOO is
 * exactly its last byte (libbson 1.23 does not insist on the last point).
 * max_depth must be < BSONVAL_STACK_DEPTH (larger values are clamped).
 */
enum bsonval_status bsonval_check(const uint8_t *doc, size_t len, unsigned max_depth,
				  size_t *err_off) __attribute__((warn_unused_result));

/*
 * A cheap walk over the top-level elements of a document that bsonval_check
 * accepted (or that libbson built): no checks beyond staying inside the
 * document, so never use it on bytes that were not validated. Rules: `key`
 * points at the element's NUL-terminated key, `value` at its value bytes,
 * `vlen` is their count; all three are valid after bsonval_it_next returned
 * true, until the document's memory goes away.
 */
struct bsonval_it {
	const uint8_t *d;
	size_t pos, end;
	uint8_t type;
	const char *key;
	const uint8_t *value;
	size_t vlen;
};

/* Is the element's key `lit` (a string literal)? The key's length is known
 * from the iterator (the value follows its NUL), so this is a length test
 * and one short memcmp, with no scan of the key. */
#define BSONVAL_KEY_IS(it, lit) bsonval_key_is((it), (lit), sizeof(lit))

/* The element's key length (strlen of it->key), from where its value starts. */
static inline size_t bsonval_key_len(const struct bsonval_it *it)
{
	return (size_t)((const char *)it->value - it->key) - 1;
}

static inline bool bsonval_key_is(const struct bsonval_it *it, const char *name, size_t size)
{
	return bsonval_key_len(it) + 1 == size && memcmp(it->key, name, size) == 0;
}

/* Start at the first element of the validated document `doc`. */
void bsonval_it_init(struct bsonval_it *it, const uint8_t *doc);

/* The next element; false at the end (or on bytes that do not parse). */
bool bsonval_it_next(struct bsonval_it *it) __attribute__((warn_unused_result));

/* The current element's truth as bson_iter_as_bool has it: numbers are
 * != 0, null/undefined false, every other type true. */
bool bsonval_truthy(const struct bsonval_it *it);

/* The current element as an integer: int32, int64, or a double inside
 * int64's range (truncated; *integral says whether it had no fraction).
 * False for other types, NaN and infinities. */
bool bsonval_int64(const struct bsonval_it *it, int64_t *out, bool *integral);

/* The double rule of bsonval_int64 alone, for values read another way
 * (libbson's iterator): inside int64's range, truncated, *integral when it
 * had no fraction; false for NaN, infinities and out of range. */
bool bsonval_double_int64(double d, int64_t *out, bool *integral);
