/*
 * readpref.h — the $readPreference document of a command, parsed and
 * checked (pure: libbson only, no loop state; fuzzed by
 * tests/fuzz/fuzz_readpref.c).
 *
 * Rules:
 *  - Valid: mode is one of the five names (absent: primary); tags an array
 *    of documents; maxStalenessSeconds a finite number, 0/absent (none) or
 *    >= 90 (READPREF_MIN_STALENESS_S, as mongos), -1 also meaning none;
 *    hedge a document (accepted and ignored: the proxy does not hedge).
 *    primary with tags or maxStalenessSeconds is invalid. Unknown fields
 *    are ignored.
 *  - An invalid document parses as primary (the caller sends the command to
 *    the primary, which answers the error itself); `why` says what was wrong.
 *  - `tags` points into the parsed document, which must outlive it.
 *  - Arithmetic on member figures (lastWriteDate, heartbeat) never
 *    overflows: it is done in 128 bits.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#define READPREF_MIN_STALENESS_S 90

enum readpref_mode {
	READPREF_PRIMARY,
	READPREF_PRIMARY_PREFERRED,
	READPREF_SECONDARY,
	READPREF_SECONDARY_PREFERRED,
	READPREF_NEAREST,
};

/* One parsed $readPreference. */
struct readpref {
	enum readpref_mode mode;
	bool has_tags;
	bson_iter_t tags;	 /* when has_tags: at the tags array */
	int64_t max_staleness_s; /* 0: none */
	bool hedge;		 /* a hedge document was given (ignored) */
};

/* Parse `doc` (NULL: primary). False: invalid, *rp is primary and *why
 * (static text) says why; *rp is usable either way. */
bool readpref_parse(const bson_t *doc, struct readpref *rp, const char **why);

/* Step to the next tag set of rp's tags array (`sets` starts from
 * readpref_tag_sets). False when there is none left. */
bool readpref_tag_sets(const struct readpref *rp, bson_iter_t *sets)
    __attribute__((warn_unused_result));
bool readpref_next_tag_set(bson_iter_t *sets) __attribute__((warn_unused_result));

/* Does the member's tags document (BSON bytes, len 0: no tags) hold every
 * key: value (strings) of the tag set at `set`? {} matches every member. */
bool readpref_tags_match(const uint8_t *tags, uint32_t tags_len, const bson_iter_t *set);

/* Is a secondary whose lastWriteDate is last_write_ms fresh enough, the
 * reference (primary's or newest secondary's lastWriteDate) being ref_ms? */
bool readpref_fresh_enough(const struct readpref *rp, int64_t last_write_ms, int64_t ref_ms,
			   int64_t heartbeat_ms);

const char *readpref_mode_name(enum readpref_mode m);
