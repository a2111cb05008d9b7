/*
 * test_cursor_read.c — the cursor reply readers (proxy/cursor_read.h), one
 * test per finding of tests/fuzz/fuzz_cursor_reply.c:
 *  - a killCursors reply whose cursorsNotFound is not an array (or that has
 *    two) got a second cursorsNotFound beside the proxy's merged one;
 *  - a cursor {id: <not an integer>, id: 5} was read as cursor 5 (a later
 *    duplicate read in place of the unusable first one), likewise ns.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/cursor_read.h"

/* How many top-level fields named `key`; *arr_len the elements of the last. */
static int count_key(const bson_t *doc, const char *key, int *arr_len)
{
	bson_iter_t it, sub;
	int n = 0;

	cr_assert(bson_iter_init(&it, doc));
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), key) == 0) {
			n++;
			*arr_len = -1;
			if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &sub))
				for (*arr_len = 0; bson_iter_next(&sub);)
					(*arr_len)++;
		}
	return n;
}

Test(cursor_read, merge_drops_a_non_array_cursors_not_found)
{
	bson_t *body = BCON_NEW("cursorsNotFound", "x", "ok", BCON_DOUBLE(1));
	int64_t foreign[] = {5, 6};
	bson_t out;
	int len = 0;

	cursor_merge_not_found(body, foreign, 2, &out);
	cr_assert_eq(count_key(&out, "cursorsNotFound", &len), 1, "exactly one cursorsNotFound");
	cr_assert_eq(len, 2, "the two foreign ids");
	bson_destroy(&out);
	bson_destroy(body);
}

Test(cursor_read, merge_keeps_the_first_array_only)
{
	bson_t *body = BCON_NEW("cursorsNotFound", "[", BCON_INT64(1), "]", "cursorsNotFound", "[",
				BCON_INT64(2), BCON_INT64(3), "]", "ok", BCON_INT32(1));
	int64_t foreign[] = {9};
	bson_t out;
	int len = 0;

	cursor_merge_not_found(body, foreign, 1, &out);
	cr_assert_eq(count_key(&out, "cursorsNotFound", &len), 1);
	cr_assert_eq(len, 2, "[1, 9]");
	bson_destroy(&out);
	bson_destroy(body);
}

Test(cursor_read, first_id_decides)
{
	bson_t *dup = BCON_NEW("cursor", "{", "id", BCON_NULL, "id", BCON_INT32(5), "}");
	bson_t *ns2 =
	    BCON_NEW("cursor", "{", "id", BCON_INT64(7), "ns", BCON_INT32(1), "ns", "db.c", "}");
	bson_t *good = BCON_NEW("cursor", "{", "nextBatch", "[", "]", "id", BCON_DOUBLE(8.0), "ns",
				"db.c", "}");
	const char *ns = NULL;
	int64_t id = 0;

	cr_assert(!cursor_reply_cursor(dup, &id, &ns), "a second id is not read");
	cr_assert(cursor_reply_cursor(ns2, &id, &ns));
	cr_assert_eq(id, 7);
	cr_assert_null(ns, "the first ns is not a string: no namespace");
	cr_assert(cursor_reply_cursor(good, &id, &ns));
	cr_assert_eq(id, 8);
	cr_assert_str_eq(ns, "db.c");
	bson_destroy(dup);
	bson_destroy(ns2);
	bson_destroy(good);
}
