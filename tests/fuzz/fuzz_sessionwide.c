// FUZZ_SOURCES: proxy/sessionwide_scan.c core/bsonval.c
// FUZZ_SEEDS: tests/fuzz/seeds_sessionwide.py
/*
 * fuzz_sessionwide.c — libFuzzer target for the session-wide command scan
 * (proxy/sessionwide_scan.c): which commands and aggregation stages the
 * proxy refuses through a shared backend identity.
 *
 * Input: one byte choosing the command name (aggregate most of the time,
 * else one of the refused commands or another command, in varying case),
 * then the body's bytes; the body gets its length header and final NUL
 * fixed up and must pass bsonval_check at the framer's depth limit (200),
 * as every body the scan sees has. Checked:
 *  - the result equals a reference written here with libbson's own
 *    iterator, recursively (depth is bounded by the check): the command's
 *    name if it is one of the four, else for aggregate the first stage name
 *    of the list found in pre-order inside the first array-valued
 *    "pipeline" field, else NULL;
 *  - "nested too deep" never comes back for a body within the limit;
 *  - no sanitizer report.
 */
#include <bson/bson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/bsonval.h"
#include "proxy/sessionwide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static const char *const cmds[] = {
    "aggregate", "AGGREGATE", "killAllSessions", "killallsessionsbypattern", "killSessions",
    "currentOp", "find",      "endSessions"};
static const char *const ref_cmds[] = {"killAllSessions", "killAllSessionsByPattern",
				       "killSessions", "currentOp"};
static const char *const ref_stages[] = {"$currentOp", "$listSessions", "$listLocalSessions"};

static const char *ref_in(const char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcasecmp(list[i], name) == 0)
			return list[i];
	return NULL;
}

static const char *ref_stage(bson_iter_t *it)
{
	while (bson_iter_next(it)) {
		const char *key = bson_iter_key(it), *hit;
		bson_iter_t child;

		if (key[0] == '$' && (hit = ref_in(ref_stages, 3, key)) != NULL)
			return hit;
		if ((BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) &&
		    bson_iter_recurse(it, &child) && (hit = ref_stage(&child)) != NULL)
			return hit;
	}
	return NULL;
}

static const char *reference(const bson_t *body, const char *cmd)
{
	const char *name = ref_in(ref_cmds, 4, cmd);
	bson_iter_t it, child;

	if (name != NULL || strcasecmp(cmd, "aggregate") != 0)
		return name;
	if (!bson_iter_init(&it, body))
		return NULL;
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), "pipeline") == 0 && BSON_ITER_HOLDS_ARRAY(&it))
			return bson_iter_recurse(&it, &child) ? ref_stage(&child) : NULL;
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *cmd, *got, *want;
	uint8_t *doc;
	size_t n, off;
	bson_t body;

	if (size < 1)
		return 0;
	cmd = data[0] < 160 ? cmds[0] : cmds[data[0] % (sizeof(cmds) / sizeof(cmds[0]))];
	n = size - 1 < 5 ? 5 : size - 1;
	if (n > (1u << 20))
		return 0;
	doc = calloc(1, n);
	if (size > 1)
		memcpy(doc, data + 1, size - 1);
	doc[0] = (uint8_t)n;
	doc[1] = (uint8_t)(n >> 8);
	doc[2] = (uint8_t)(n >> 16);
	doc[3] = 0;
	doc[n - 1] = 0;
	if (bsonval_check(doc, n, 200, &off) == BSONVAL_OK && bson_init_static(&body, doc, n)) {
		got = sessionwide_find(doc, cmd);
		want = reference(&body, cmd);
		CHECK((got == NULL) == (want == NULL));
		CHECK(got == NULL || strcmp(got, want) == 0);
	}
	free(doc);
	return 0;
}
