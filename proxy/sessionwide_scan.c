/*
 * sessionwide_scan.c — what in a command is session-wide (see
 * sessionwide.h): the command's name, or a stage anywhere in an aggregate's
 * pipeline. Reads only the validated body (core/bsonval.c's iterator); the
 * pipeline walk is iterative (an explicit stack), so nesting cannot exhaust
 * the process stack. Fuzzed by tests/fuzz/fuzz_sessionwide.c.
 */
#include "proxy/sessionwide.h"

#include <string.h>
#include <strings.h>

#include "core/bsonval.h"

/* Command names (matched in any case: some servers do). */
static const char *const commands[] = {"killAllSessions", "killAllSessionsByPattern",
				       "killSessions", "currentOp", NULL};

/* Aggregation stages. */
static const char *const stages[] = {"$currentOp", "$listSessions", "$listLocalSessions", NULL};

static const char *in_list(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcasecmp(list[i], name) == 0)
			return list[i];
	return NULL;
}

/* The first key anywhere inside the array `pipeline` (validated bytes) that
 * names one of the stages; NULL if none. No stage or operator spells a field
 * name with a leading '$', so a key match is a stage. A pipeline nested
 * deeper than the stack (the body's depth was bounded by wire.c) is treated
 * as a match. */
static const char *find_stage(const uint8_t *pipeline)
{
	struct bsonval_it stack[BSONVAL_STACK_DEPTH]; /* 14 KB */
	const char *hit;
	int top = 0;

	bsonval_it_init(&stack[0], pipeline);
	while (top >= 0) {
		struct bsonval_it *it = &stack[top];

		if (!bsonval_it_next(it)) {
			top--;
			continue;
		}
		if (it->key[0] == '$' && (hit = in_list(stages, it->key)) != NULL)
			return hit;
		if (it->type != BSON_TYPE_DOCUMENT && it->type != BSON_TYPE_ARRAY)
			continue;
		if (top + 1 == BSONVAL_STACK_DEPTH)
			return "a pipeline nested too deep to inspect";
		bsonval_it_init(&stack[++top], it->value);
	}
	return NULL;
}

const char *sessionwide_find(const uint8_t *body, const char *cmd)
{
	struct bsonval_it it;
	const char *name;

	/* Every name above starts with a, c or k (any case): this runs on every
	 * command, and a find need not meet five compares. */
	switch (cmd[0] | 0x20) {
	case 'a':
	case 'c':
	case 'k':
		break;
	default:
		return NULL;
	}
	name = in_list(commands, cmd);
	if (name != NULL || strcasecmp(cmd, "aggregate") != 0)
		return name;
	bsonval_it_init(&it, body);
	while (bsonval_it_next(&it))
		if (strcmp(it.key, "pipeline") == 0 && it.type == BSON_TYPE_ARRAY)
			return find_stage(it.value);
	return NULL;
}
