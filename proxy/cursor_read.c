/*
 * cursor_read.c — reading cursor ids, ok and code from backend replies and
 * merging a killCursors reply (see cursor_read.h for the rules).
 */
#include "proxy/cursor_read.h"

#include <string.h>

/* A cursor id: int64, int32 or an integral double (what backends accept). */
bool cursor_id_value(const bson_iter_t *it, int64_t *id)
{
	double d;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT64:
		*id = bson_iter_int64(it);
		return true;
	case BSON_TYPE_INT32:
		*id = bson_iter_int32(it);
		return true;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(it);
		if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) ||
		    (double)(int64_t)d != d)
			return false;
		*id = (int64_t)d;
		return true;
	default:
		return false;
	}
}

bool cursor_reply_cursor(const bson_t *body, int64_t *id, const char **ns)
{
	bson_iter_t it, sub;
	bool seen_id = false, seen_ns = false, have_id = false;

	*ns = NULL;
	if (!bson_iter_init_find(&it, body, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &sub))
		return false;
	/* The first "id" and "ns" decide, usable or not (a later duplicate is
	 * not what a driver reading the first one would use). */
	while ((!seen_id || !seen_ns) && bson_iter_next(&sub)) {
		const char *k = bson_iter_key(&sub);

		if (!seen_id && strcmp(k, "id") == 0) {
			seen_id = true;
			have_id = cursor_id_value(&sub, id);
		} else if (!seen_ns && strcmp(k, "ns") == 0) {
			seen_ns = true;
			if (BSON_ITER_HOLDS_UTF8(&sub))
				*ns = bson_iter_utf8(&sub, NULL);
		}
	}
	return have_id;
}

bool cursor_reply_ok(const bson_t *body, int32_t *code)
{
	bson_iter_t it;
	bool ok = false, have_ok = false, have_code = false;

	*code = 0;
	if (!bson_iter_init(&it, body))
		return false;
	/* One pass (this runs on every reply); the first "ok" and "code" count. */
	while ((!have_ok || !have_code) && bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);

		if (!have_ok && strcmp(k, "ok") == 0) {
			ok = bson_iter_as_bool(&it);
			have_ok = true;
		} else if (!have_code && strcmp(k, "code") == 0) {
			if (BSON_ITER_HOLDS_INT32(&it))
				*code = bson_iter_int32(&it);
			have_code = true;
		}
	}
	return ok;
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
