/*
 * cursor_read.c — reading cursor ids, ok and code from backend replies and
 * merging a killCursors reply (see cursor_read.h for the rules).
 */
#include "proxy/cursor_read.h"
#include "core/bsonval.h"

#include <string.h>

/* A cursor id: int64, int32 or an integral double (what backends accept). */
bool cursor_id_value(const bson_iter_t *it, int64_t *id)
{
	bool integral;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT64:
		*id = bson_iter_int64(it);
		return true;
	case BSON_TYPE_INT32:
		*id = bson_iter_int32(it);
		return true;
	case BSON_TYPE_DOUBLE:
		return bsonval_double_int64(bson_iter_double(it), id, &integral) && integral;
	default:
		return false;
	}
}

/* The cursor document's first "id" and first "ns" decide, usable or not (a
 * later duplicate is not what a driver reading the first one would use). */
static bool cursor_fields(const uint8_t *cur, int64_t *id, const char **ns)
{
	struct bsonval_it e;
	bool seen_id = false, seen_ns = false, have_id = false, integral;

	bsonval_it_init(&e, cur);
	while ((!seen_id || !seen_ns) && bsonval_it_next(&e)) {
		if (!seen_id && BSONVAL_KEY_IS(&e, "id")) {
			seen_id = true;
			/* as cursor_id_value: int64, int32 or an integral double */
			have_id = bsonval_int64(&e, id, &integral) && integral;
		} else if (!seen_ns && BSONVAL_KEY_IS(&e, "ns")) {
			seen_ns = true;
			if (e.type == BSON_TYPE_UTF8)
				*ns = (const char *)e.value + 4;
		}
	}
	return have_id;
}

void cursor_reply_read(const bson_t *body, struct cursor_reply *r)
{
	const uint8_t *d = bson_get_data(body);
	const uint8_t *cur = NULL;
	bool have_ok = false, have_code = false, have_cursor_key = false;
	struct bsonval_it e;

	memset(r, 0, sizeof(*r));
	/* One pass over the top level (this runs on every reply). */
	bsonval_it_init(&e, d);
	while ((!have_ok || !have_code || !have_cursor_key) && bsonval_it_next(&e)) {
		if (!have_ok && BSONVAL_KEY_IS(&e, "ok")) {
			have_ok = true;
			r->ok = bsonval_truthy(&e);
		} else if (!have_code && BSONVAL_KEY_IS(&e, "code")) {
			have_code = true;
			if (e.type == BSON_TYPE_INT32) {
				uint32_t v;

				memcpy(&v, e.value, 4);
				r->code = (int32_t)BSON_UINT32_FROM_LE(v);
			}
		} else if (!have_cursor_key && BSONVAL_KEY_IS(&e, "cursor")) {
			have_cursor_key = true;
			if (e.type == BSON_TYPE_DOCUMENT)
				cur = e.value;
		}
	}
	if (cur != NULL)
		r->have_cursor = cursor_fields(cur, &r->id, &r->ns);
	if (!r->have_cursor)
		r->id = 0;
}

bool cursor_reply_cursor(const bson_t *body, int64_t *id, const char **ns)
{
	struct cursor_reply r;

	cursor_reply_read(body, &r);
	*ns = r.ns;
	if (r.have_cursor)
		*id = r.id;
	return r.have_cursor;
}

bool cursor_reply_ok(const bson_t *body, int32_t *code)
{
	struct cursor_reply r;

	cursor_reply_read(body, &r);
	*code = r.code;
	return r.ok;
}

/* The array of cursorsNotFound: `orig`'s elements (renumbered), then ids. */
static void append_not_found(bson_t *doc, const bson_iter_t *orig, const int64_t *foreign,
			     int nforeign)
{
	bson_iter_t sub;
	bson_t arr;
	char kbuf[16];
	const char *k;
	uint32_t i = 0;

	BSON_APPEND_ARRAY_BEGIN(doc, "cursorsNotFound", &arr);
	if (orig != NULL && bson_iter_recurse(orig, &sub))
		while (bson_iter_next(&sub)) {
			bson_uint32_to_string(i++, &k, kbuf, sizeof(kbuf));
			bson_append_value(&arr, k, -1, bson_iter_value(&sub));
		}
	for (int x = 0; x < nforeign; x++) {
		bson_uint32_to_string(i++, &k, kbuf, sizeof(kbuf));
		bson_append_int64(&arr, k, -1, foreign[x]);
	}
	bson_append_array_end(doc, &arr);
}

void cursor_merge_not_found(const bson_t *body, const int64_t *foreign, int nforeign, bson_t *out)
{
	bson_iter_t it;
	bool seen = false;

	bson_init(out);
	if (bson_iter_init(&it, body))
		while (bson_iter_next(&it)) {
			if (strcmp(bson_iter_key(&it), "cursorsNotFound") != 0) {
				bson_append_iter(out, NULL, 0, &it);
			} else if (!seen && BSON_ITER_HOLDS_ARRAY(&it)) {
				append_not_found(out, &it, foreign, nforeign);
				seen = true;
			} /* else dropped: a second cursorsNotFound would contradict ours */
		}
	if (!seen)
		append_not_found(out, NULL, foreign, nforeign);
}
