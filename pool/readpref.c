/*
 * readpref.c — parsing and checking $readPreference documents, tag sets and
 * staleness (see readpref.h for the rules).
 */
#include "pool/readpref.h"

#include <math.h>
#include <string.h>

static const char *const mode_names[] = {"primary", "primaryPreferred", "secondary",
					 "secondaryPreferred", "nearest"};

const char *readpref_mode_name(enum readpref_mode m)
{
	return mode_names[m];
}

static bool parse_mode(const bson_iter_t *it, struct readpref *rp)
{
	uint32_t len;
	const char *s;

	if (!BSON_ITER_HOLDS_UTF8(it))
		return false;
	s = bson_iter_utf8(it, &len);
	for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
		if (strlen(mode_names[i]) == len && memcmp(mode_names[i], s, len) == 0) {
			rp->mode = (enum readpref_mode)i;
			return true;
		}
	return false;
}

/* An array whose every element is a document. */
static bool parse_tags(const bson_iter_t *it, struct readpref *rp)
{
	bson_iter_t sub;

	if (!BSON_ITER_HOLDS_ARRAY(it) || !bson_iter_recurse(it, &sub))
		return false;
	while (bson_iter_next(&sub))
		if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
			return false;
	rp->tags = *it;
	rp->has_tags = true;
	return true;
}

/* A finite number: 0 or -1 (none) or >= READPREF_MIN_STALENESS_S. */
static bool parse_staleness(const bson_iter_t *it, struct readpref *rp)
{
	double d;

	if (BSON_ITER_HOLDS_DOUBLE(it))
		d = bson_iter_double(it);
	else if (BSON_ITER_HOLDS_INT32(it))
		d = bson_iter_int32(it);
	else if (BSON_ITER_HOLDS_INT64(it))
		d = (double)bson_iter_int64(it);
	else
		return false;
	if (!isfinite(d) || (d < READPREF_MIN_STALENESS_S && d != 0 && d != -1))
		return false;
	if (d <= 0)
		rp->max_staleness_s = 0;
	else if (d >= 9.2e18)
		rp->max_staleness_s = INT64_MAX;
	else
		rp->max_staleness_s = (int64_t)d;
	return true;
}

static bool parse_field(const bson_iter_t *it, struct readpref *rp, const char **why)
{
	const char *k = bson_iter_key(it);

	if (strcmp(k, "mode") == 0) {
		*why = "mode is not one of primary, primaryPreferred, secondary, "
		       "secondaryPreferred, nearest";
		return parse_mode(it, rp);
	}
	if (strcmp(k, "tags") == 0) {
		*why = "tags is not an array of documents";
		return parse_tags(it, rp);
	}
	if (strcmp(k, "maxStalenessSeconds") == 0) {
		*why = "maxStalenessSeconds is not 0, -1 or a finite number of at least 90";
		return parse_staleness(it, rp);
	}
	if (strcmp(k, "hedge") == 0) {
		*why = "hedge is not a document";
		rp->hedge = true;
		return BSON_ITER_HOLDS_DOCUMENT(it);
	}
	return true;
}

bool readpref_parse(const bson_t *doc, struct readpref *rp, const char **why)
{
	bson_iter_t it;

	memset(rp, 0, sizeof(*rp));
	*why = NULL;
	if (doc == NULL)
		return true;
	if (!bson_iter_init(&it, doc)) {
		*why = "not a BSON document";
		return false;
	}
	while (bson_iter_next(&it))
		if (!parse_field(&it, rp, why))
			goto invalid;
	*why = NULL;
	if (it.err_off != 0) {
		*why = "corrupt BSON";
		goto invalid;
	}
	if (rp->mode == READPREF_PRIMARY && (rp->has_tags || rp->max_staleness_s > 0)) {
		*why = "primary with tags or maxStalenessSeconds";
		goto invalid;
	}
	return true;
invalid:
	memset(rp, 0, sizeof(*rp));
	return false;
}

bool readpref_tag_sets(const struct readpref *rp, bson_iter_t *sets)
{
	return rp->has_tags && bson_iter_recurse(&rp->tags, sets);
}

bool readpref_next_tag_set(bson_iter_t *sets)
{
	while (bson_iter_next(sets))
		if (BSON_ITER_HOLDS_DOCUMENT(sets))
			return true;
	return false;
}

/* The UTF-8 value of `key` in the member's tags, compared with want. */
static bool member_has(const bson_t *tags, const char *key, const char *want, uint32_t wlen)
{
	bson_iter_t have;
	const char *v;
	uint32_t vlen;

	if (!bson_iter_init_find(&have, tags, key) || !BSON_ITER_HOLDS_UTF8(&have))
		return false;
	v = bson_iter_utf8(&have, &vlen);
	return vlen == wlen && memcmp(v, want, wlen) == 0;
}

bool readpref_tags_match(const uint8_t *tags, uint32_t tags_len, const bson_iter_t *set)
{
	bson_iter_t want;
	bson_t member;
	bool have_tags = tags_len > 0 && bson_init_static(&member, tags, tags_len);

	if (!BSON_ITER_HOLDS_DOCUMENT(set) || !bson_iter_recurse(set, &want))
		return false;
	while (bson_iter_next(&want)) {
		const char *w;
		uint32_t wlen;

		if (!have_tags || !BSON_ITER_HOLDS_UTF8(&want))
			return false;
		w = bson_iter_utf8(&want, &wlen);
		if (!member_has(&member, bson_iter_key(&want), w, wlen))
			return false;
	}
	return want.err_off == 0;
}

bool readpref_fresh_enough(const struct readpref *rp, int64_t last_write_ms, int64_t ref_ms,
			   int64_t heartbeat_ms)
{
	__int128 staleness;

	if (rp->max_staleness_s <= 0)
		return true;
	staleness = (__int128)ref_ms - last_write_ms + heartbeat_ms;
	return staleness <= (__int128)rp->max_staleness_s * 1000;
}
