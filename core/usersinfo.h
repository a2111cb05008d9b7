/*
 * usersinfo.h — the reply of {usersInfo: {user, db}, showCredentials: true}
 * (auth_query, proxy/cauth_query.c) read into SCRAM verifiers. The reply
 * comes from the backend and is checked, not trusted: every field bounded
 * and validated as the users file's are.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>

#include "core/scram_prim.h"

/* What one usersInfo reply says about one user. Rules: found is false when
 * the backend lists no such user (then no secret is present); when found,
 * at least one of sha1 / sha256 is present. */
struct usersinfo_result {
	bool found;
	struct scram_secret sha1, sha256;
};

/* Read `reply` for db.user. False + err (and *code, 0 if none) when the
 * backend refused (ok: 0) or the reply is malformed; a user found without a
 * usable SCRAM credential is an error too. */
bool usersinfo_parse(const bson_t *reply, const char *db, const char *user,
		     struct usersinfo_result *out, int32_t *code, char *err, size_t errlen)
    __attribute__((warn_unused_result));
