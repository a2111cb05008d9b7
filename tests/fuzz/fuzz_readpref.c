// FUZZ_SOURCES: pool/readpref.c
// FUZZ_SEEDS: tests/fuzz/seeds_readpref.py
/*
 * fuzz_readpref.c — libFuzzer target for $readPreference parsing
 * (pool/readpref.c): mode, tags, maxStalenessSeconds, hedge and garbage of
 * every type, then tag-set matching against a member's tags document and
 * the staleness check.
 *
 * Input: u16 n, n bytes of the $readPreference document, three int64
 * (member lastWriteDate, reference lastWriteDate, heartbeat ms), then the
 * member's tags document. Both documents get their length header and final
 * NUL fixed up so that libbson accepts them and the fuzzer explores their
 * contents. Checked:
 *  - readpref_parse: valid => mode in range, primary has neither tags nor
 *    staleness, staleness is 0 or >= 90, tags is an array whose every
 *    element is a document, mode is the last "mode" field's value; invalid
 *    => a `why` and the primary default;
 *  - readpref_tags_match of every tag set == a reference written here
 *    (every key a string equal to the member's first value of that key);
 *  - readpref_fresh_enough == the formula in exact (128-bit) arithmetic;
 *  - no sanitizer report (ASan, UBSan: e.g. overflow on huge figures).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/readpref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* A copy of `len` bytes made into a document libbson's header checks pass. */
static uint8_t *fix_doc(const uint8_t *p, size_t len, size_t *outlen)
{
	size_t n = len < 5 ? 5 : len;
	uint8_t *d = calloc(1, n);

	if (len > 0)
		memcpy(d, p, len);
	d[0] = (uint8_t)n;
	d[1] = (uint8_t)(n >> 8);
	d[2] = (uint8_t)(n >> 16);
	d[3] = 0;
	d[n - 1] = 0;
	*outlen = n;
	return d;
}

static const char *const names[] = {"primary", "primaryPreferred", "secondary",
				    "secondaryPreferred", "nearest"};

/* The last "mode" field's value as a mode index; -1: none or not a name. */
static int last_mode(const bson_t *doc)
{
	bson_iter_t it;
	int mode = 0;

	if (!bson_iter_init(&it, doc))
		return -1;
	while (bson_iter_next(&it)) {
		uint32_t len;
		const char *s;

		if (strcmp(bson_iter_key(&it), "mode") != 0)
			continue;
		if (!BSON_ITER_HOLDS_UTF8(&it))
			return -1;
		s = bson_iter_utf8(&it, &len);
		mode = -1;
		for (int i = 0; i < 5; i++)
			if (strlen(names[i]) == len && memcmp(s, names[i], len) == 0)
				mode = i;
		if (mode < 0)
			return -1;
	}
	return mode;
}

static bool ref_match(const bson_t *member, bool have, const bson_iter_t *set)
{
	bson_iter_t want, got;

	if (!bson_iter_recurse(set, &want))
		return false;
	while (bson_iter_next(&want)) {
		uint32_t wl, gl;
		const char *w, *g;

		if (!BSON_ITER_HOLDS_UTF8(&want) || !have)
			return false;
		w = bson_iter_utf8(&want, &wl);
		bool found = false;

		if (!bson_iter_init(&got, member))
			return false;
		while (!found && bson_iter_next(&got))
			found = strcmp(bson_iter_key(&got), bson_iter_key(&want)) == 0;
		if (!found || !BSON_ITER_HOLDS_UTF8(&got))
			return false;
		g = bson_iter_utf8(&got, &gl);
		if (gl != wl || memcmp(g, w, wl) != 0)
			return false;
	}
	return want.err_off == 0;
}

static void check_valid(const bson_t *doc, const struct readpref *rp)
{
	bson_iter_t sets;

	CHECK(rp->mode <= READPREF_NEAREST);
	CHECK(rp->max_staleness_s == 0 || rp->max_staleness_s >= READPREF_MIN_STALENESS_S);
	if (rp->mode == READPREF_PRIMARY)
		CHECK(!rp->has_tags && rp->max_staleness_s == 0);
	CHECK((int)rp->mode == last_mode(doc));
	if (!rp->has_tags)
		return;
	CHECK(BSON_ITER_HOLDS_ARRAY(&rp->tags) && bson_iter_recurse(&rp->tags, &sets));
	while (bson_iter_next(&sets))
		CHECK(BSON_ITER_HOLDS_DOCUMENT(&sets));
}

static void check_tags(const struct readpref *rp, const uint8_t *mt, size_t mlen)
{
	bson_iter_t sets;
	bson_t member;
	bool have = mlen > 0 && bson_init_static(&member, mt, mlen);

	if (!readpref_tag_sets(rp, &sets))
		return;
	while (readpref_next_tag_set(&sets))
		CHECK(readpref_tags_match(mt, (uint32_t)mlen, &sets) ==
		      ref_match(have ? &member : NULL, have, &sets));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n, rlen, mlen = 0;
	int64_t fig[3] = {0, 0, 0};
	uint8_t *rd, *md = NULL;
	struct readpref rp;
	const char *why;
	bson_t doc;

	if (size < 2)
		return 0;
	n = (size_t)data[0] | (size_t)data[1] << 8;
	data += 2;
	size -= 2;
	if (n > size)
		n = size;
	rd = fix_doc(data, n, &rlen);
	data += n;
	size -= n;
	if (size >= sizeof(fig)) {
		memcpy(fig, data, sizeof(fig));
		data += sizeof(fig);
		size -= sizeof(fig);
		if (size > 0)
			md = fix_doc(data, size, &mlen);
	}
	CHECK(bson_init_static(&doc, rd, rlen));
	if (readpref_parse(&doc, &rp, &why)) {
		check_valid(&doc, &rp);
		check_tags(&rp, md, mlen);
		__int128 st = (__int128)fig[1] - fig[0] + fig[2];
		CHECK(readpref_fresh_enough(&rp, fig[0], fig[1], fig[2]) ==
		      (rp.max_staleness_s <= 0 || st <= (__int128)rp.max_staleness_s * 1000));
	} else {
		CHECK(why != NULL && rp.mode == READPREF_PRIMARY && !rp.has_tags &&
		      rp.max_staleness_s == 0);
	}
	CHECK(readpref_parse(NULL, &rp, &why) && rp.mode == READPREF_PRIMARY);
	free(rd);
	free(md);
	return 0;
}
