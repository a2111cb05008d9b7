/*
 * cursor_read.h — the pure readers of backend replies that the cursor table
 * (proxy/cursor.c) acts on, and the merged killCursors reply (libbson only:
 * fuzzed by tests/fuzz/fuzz_cursor_reply.c).
 *
 * Rules: only top-level fields of the reply and of its `cursor`
 * subdocument are read; for each field the first occurrence counts (a
 * later duplicate is never read instead of an unusable first one).
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* A cursor id: int64, int32 or an integral double (what backends accept). */
bool cursor_id_value(const bson_iter_t *it, int64_t *id) __attribute__((warn_unused_result));

/* What the cursor table reads from every reply, in one pass: the first
 * "ok" (as a boolean), the first "code" (int32; 0 when absent or of another
 * type), and the first "cursor" document's first "id" (have_cursor false
 * when there is none or it is not an integer; id then 0) and first "ns"
 * (NULL when not a string). `body` must have passed core/bsonval.c's
 * validation (wire_parse_reply does it for every backend reply). */
struct cursor_reply {
	bool ok, have_cursor;
	int32_t code;
	int64_t id;
	const char *ns; /* inside body */
};

void cursor_reply_read(const bson_t *body, struct cursor_reply *r);

/* The same, for callers that want one part (body validated as above).
 * The top-level cursor {id, ns} of a reply body: false when there is none
 * or its (first) id is not an integer (int64, int32 or an integral
 * double); *ns is NULL when its first ns is not a string. */
bool cursor_reply_cursor(const bson_t *body, int64_t *id, const char **ns)
    __attribute__((warn_unused_result));

/* The reply's first "ok" as a boolean; *code its first "code" (int32; 0
 * when absent or of another type). */
bool cursor_reply_ok(const bson_t *body, int32_t *code);

/* `body` (a killCursors reply) with `foreign` appended to cursorsNotFound:
 * the first cursorsNotFound array keeps its place and elements, the ids
 * follow them; other cursorsNotFound fields are dropped (exactly one in
 * *out). Every other field is copied in order. *out is initialised here. */
void cursor_merge_not_found(const bson_t *body, const int64_t *foreign, int nforeign, bson_t *out);
