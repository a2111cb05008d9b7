/*
 * sessionwide.c — the refusal of session-wide commands through a shared
 * backend identity (see sessionwide.h); what counts as session-wide is
 * sessionwide_scan.c's.
 */
#include "proxy/sessionwide.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/errors.h"
#include "core/request.h"
#include "core/stats.h"

/* What in this command is session-wide (a command or stage name), or NULL. */
static const char *sessionwide_part(const bson_t *body, const struct route_info *ri)
{
	return sessionwide_find(bson_get_data(body), ri->cmd);
}

bool sessionwide_admit(struct request *req, const bson_t *body, const struct route_info *ri,
		       bool identity_shared)
{
	const char *part;
	char msg[400];

	if (!identity_shared || (part = sessionwide_part(body, ri)) == NULL)
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
