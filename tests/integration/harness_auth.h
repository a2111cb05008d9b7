/*
 * harness_auth.h — for the client_auth and per_user suites: a client's SCRAM
 * login on a raw socket to the proxy and who a libmongoc client is logged in
 * as (harness_auth.c); raw_connect_backend, the backend side, is in harness.h.
 */
#pragma once

#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>

#include "pool/scram.h"

/* A hand-driven SCRAM conversation with mechanism m on a raw socket to the
 * proxy: saslStart (not speculative), saslContinue and, without
 * skipEmptyExchange, the server signature checked and the empty last step.
 * Returns the code of the refusal (0: logged in); asserts on a malformed
 * conversation. */
int h_raw_scram_login(int fd, enum scram_mech m, const char *user, const char *pw, const char *db,
		      bool skip_empty);

/* The client's own user as connectionStatus reports it: "db.user" of the
 * first authenticated user ("" if none); asserts the command succeeds. */
void h_status_user(mongoc_client_t *c, char *out, size_t outlen);
