/*
 * test_readpref.c — $readPreference parsing (pool/readpref.h): valid
 * documents, every invalid shape parsing as primary with a reason, tag
 * sets, and the staleness check on extreme figures (maxStalenessSeconds
 * 2^62 overflowed `max_staleness_s * 1000` in the parser this replaced;
 * NaN, a misspelt mode, primary with tags were silently primary).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "pool/readpref.h"

static bool parse(bson_t *doc, struct readpref *rp)
{
	const char *why = NULL;
	bool ok = readpref_parse(doc, rp, &why);

	cr_assert(ok == (why == NULL), "why is set exactly when invalid");
	bson_destroy(doc);
	return ok;
}

Test(readpref, valid)
{
	struct readpref rp;

	cr_assert(parse(BCON_NEW("mode", "secondary", "tags", "[", "{", "dc", "east", "}", "{", "}",
				 "]", "maxStalenessSeconds", BCON_INT32(90), "hedge", "{",
				 "enabled", BCON_BOOL(true), "}"),
			&rp));
	cr_assert_eq(rp.mode, READPREF_SECONDARY);
	cr_assert(rp.has_tags && rp.hedge);
	cr_assert_eq(rp.max_staleness_s, 90);
	cr_assert(parse(BCON_NEW("mode", "nearest", "maxStalenessSeconds", BCON_DOUBLE(-1)), &rp));
	cr_assert_eq(rp.max_staleness_s, 0, "-1: none");
	cr_assert(parse(BCON_NEW("mode", "primary"), &rp));
	cr_assert(parse(bson_new(), &rp));
	cr_assert_eq(rp.mode, READPREF_PRIMARY);
}

Test(readpref, invalid_parses_as_primary)
{
	bson_t *bad[] = {
	    BCON_NEW("mode", "Secondary"),
	    BCON_NEW("mode", BCON_INT32(2)),
	    BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_DOUBLE(NAN)),
	    BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_DOUBLE(INFINITY)),
	    BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_INT32(89)),
	    BCON_NEW("mode", "secondary", "maxStalenessSeconds", "90"),
	    BCON_NEW("mode", "secondary", "tags", "{", "dc", "east", "}"),
	    BCON_NEW("mode", "secondary", "tags", "[", "east", "]"),
	    BCON_NEW("mode", "primary", "tags", "[", "{", "}", "]"),
	    BCON_NEW("mode", "primary", "maxStalenessSeconds", BCON_INT32(120)),
	    BCON_NEW("mode", "nearest", "hedge", BCON_BOOL(true)),
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct readpref rp;

		cr_assert(!parse(bad[i], &rp), "case %zu is invalid", i);
		cr_assert(rp.mode == READPREF_PRIMARY && !rp.has_tags && rp.max_staleness_s == 0);
	}
}

Test(readpref, embedded_nul_in_mode)
{
	struct readpref rp;
	bson_t *doc = bson_new();

	BSON_APPEND_UTF8(doc, "x", "y");
	bson_append_utf8(doc, "mode", -1, "secondary\0x", 11);
	cr_assert(!parse(doc, &rp));
}

Test(readpref, tags_match)
{
	struct readpref rp;
	bson_t *member = BCON_NEW("dc", "east", "rack", "1");
	bson_t *doc = BCON_NEW("mode", "secondary", "tags", "[", "{", "dc", "west", "}", "{", "dc",
			       "east", "}", "{", "}", "]");
	bson_iter_t sets;
	bool want[] = {false, true, true};
	int i = 0;
	const char *why;

	cr_assert(readpref_parse(doc, &rp, &why));
	cr_assert(readpref_tag_sets(&rp, &sets));
	while (readpref_next_tag_set(&sets)) {
		cr_assert_eq(readpref_tags_match(bson_get_data(member), member->len, &sets),
			     want[i], "set %d", i);
		i++;
	}
	cr_assert_eq(i, 3);
	cr_assert(readpref_tag_sets(&rp, &sets) && readpref_next_tag_set(&sets));
	cr_assert(!readpref_tags_match(NULL, 0, &sets), "a member without tags matches only {}");
	bson_destroy(doc);
	bson_destroy(member);
}

Test(readpref, staleness_extremes_do_not_overflow)
{
	struct readpref rp;

	cr_assert(parse(
	    BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_INT64(INT64_C(1) << 62)),
	    &rp));
	cr_assert(readpref_fresh_enough(&rp, INT64_MIN, INT64_MAX, INT64_MAX),
		  "2^62 s (as ms: beyond int64) allows 2^64 ms of lag");
	cr_assert(
	    parse(BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_DOUBLE(1e300)), &rp));
	cr_assert_eq(rp.max_staleness_s, INT64_MAX);
	cr_assert(readpref_fresh_enough(&rp, 0, INT64_MAX, INT64_MAX));
	cr_assert(parse(BCON_NEW("mode", "secondary", "maxStalenessSeconds", BCON_INT32(90)), &rp));
	cr_assert(readpref_fresh_enough(&rp, 1000, 1000 + 80000, 10000), "90 s: 80 s + 10 s ok");
	cr_assert(!readpref_fresh_enough(&rp, 1000, 1000 + 80001, 10000), "one ms more is stale");
	cr_assert(!readpref_fresh_enough(&rp, INT64_MIN, INT64_MAX, 0));
}
