/*
 * sessionwide.c — the refusal of session-wide commands through a shared
 * backend identity (see sessionwide.h). The pipeline walk is iterative (an
 * explicit stack over the validated body), so nesting cannot exhaust the
 * process stack.
 */
#include "proxy/sessionwide.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/bsonval.h"
#include "core/errors.h"
#include "core/request.h"
#include "core/stats.h"
#include "pool/pool_users.h"
#include "proxy/cauth.h"

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

/* What in this command is session-wide (a command or stage name), or NULL. */
static const char *sessionwide_part(const bson_t *body, const struct route_info *ri)
{
	struct bsonval_it it;
	const char *name = in_list(commands, ri->cmd);

	if (name != NULL || strcasecmp(ri->cmd, "aggregate") != 0)
		return name;
	bsonval_it_init(&it, bson_get_data(body));
	while (bsonval_it_next(&it))
		if (strcmp(it.key, "pipeline") == 0 && it.type == BSON_TYPE_ARRAY)
			return find_stage(it.value);
	return NULL;
}

static bool identity_shared(void)
{
	return !cauth_enabled() || !pool_users_enabled();
}

bool sessionwide_admit(struct request *req, const bson_t *body, const struct route_info *ri)
{
	const char *part;
	char msg[400];

	if (!identity_shared() || (part = sessionwide_part(body, ri)) == NULL)
		return true;
	STAT_INC(refused_sessionwide);
	snprintf(msg, sizeof(msg),
		 "mongoplex: %s is not allowed: every client of this proxy reaches the backend as "
		 "one shared identity (auth_mode = none, or auth_pool_mode = shared), so it would "
		 "see or end other clients' sessions and operations; with auth_mode = scram and "
		 "auth_pool_mode = per_user the backend judges it by the client's own user",
		 part);
	request_fail(req, MP_ERR(UNAUTHORIZED), msg, NULL);
	return false;
}
