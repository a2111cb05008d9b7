/*
 * sessionwide.h — commands that see or end the sessions and operations of
 * every client of the backend identity: killAllSessions,
 * killAllSessionsByPattern, killSessions, currentOp, and aggregations with a
 * $currentOp, $listSessions or $listLocalSessions stage (anywhere in the
 * pipeline, sub-pipelines included). Through a shared backend identity
 * (auth_mode = none, or scram with auth_pool_mode = shared) the backend
 * sees every client as the same user, so these would reach other clients'
 * sessions: they are refused with code 13 Unauthorized. With per_user pools
 * they pass: the backend judges them with the client's own user's rights.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "proxy/router.h"

struct request;

/* The session-wide part of the command `cmd` whose body is `body` (bytes
 * that bsonval_check accepted): a command or stage name, a phrase for a
 * pipeline nested too deep to inspect, or NULL. (sessionwide_scan.c) */
const char *sessionwide_find(const uint8_t *body, const char *cmd);

/* Gate one command about to be forwarded; identity_shared: every client
 * reaches the backend as one identity (auth_mode = none, or auth_pool_mode
 * = shared; the caller asks cauth and pool_users, so that this file calls
 * no other proxy/ module). True: go on. False: it was refused here
 * (answered with code 13). */
bool sessionwide_admit(struct request *req, const bson_t *body, const struct route_info *ri,
		       bool identity_shared) __attribute__((warn_unused_result));
