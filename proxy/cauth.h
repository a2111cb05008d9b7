/*
 * cauth.h — client authentication: the proxy is the SCRAM server for its
 * clients (auth_mode = scram), against the verifiers of auth_users_file.
 *
 *   hello {saslSupportedMechs: "db.user"}      ─▶ mechanisms of that user
 *   hello {speculativeAuthenticate: saslStart} ─▶ server-first rides in the reply
 *   saslStart ─▶ server-first │ saslContinue ─▶ proof checked, server-final
 *   [saslContinue ""] ─▶ done: the connection is authenticated as db.user
 *   logout ─▶ not authenticated again
 *
 * Before a connection is authenticated only hello/isMaster, ping, buildInfo,
 * connectionStatus, the SASL commands (and mongoplexStats with
 * auth_stats_unauthenticated) run; anything else gets code 13 Unauthorized.
 * A failed login gets code 18, is logged with the peer and user and
 * counted; auth_max_failures in a row close the connection. A login must
 * finish within auth_timeout_ms of its first SASL step, and a connection
 * must send a hello or a login within it of connecting (the janitor asks
 * cauth_login_expired); connections that only send hellos (drivers'
 * monitors) are not timed out. Logged-in or not is reported to client.c
 * (client_set_authenticated), which caps the others (max_unauth_conn). With
 * auth_pool_mode = per_user a login hands its recovered keys to
 * pool/pool_users.h and the client's requests carry its user (req->user);
 * connectionStatus of a logged-in client is then forwarded. With shared,
 * authenticated clients share the proxy's own backend identity.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proxy/router.h"

struct client;
struct request;
struct cfg;
struct users_table;

/* Startup: load auth_users_file when auth_mode = scram. */
bool cauth_start(char *err, size_t errlen) __attribute__((warn_unused_result));

/* Reload, prepare: read the next config's users file into *out (empty when
 * auth is off or no file is named); false + err when it cannot be used.
 * Nothing changes until cauth_commit. */
bool cauth_prepare(const struct cfg *next, struct users_table *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Reload, commit: the prepared table (read from `path`) replaces the current
 * one; *t is left empty. */
void cauth_commit(struct users_table *t, const char *path);

/* Is client authentication on? */
bool cauth_enabled(void);

/* The user `c` is logged in as ("db.user"); false: not logged in. */
bool cauth_user_name(const struct client *c, char *out, size_t len);

/* Gate one parsed command. True: go on as usual. False: it was answered
 * here (code 13 before login, connectionStatus, the SASL commands). */
bool cauth_admit(struct client *c, struct request *req, const bson_t *body,
		 const struct route_info *ri) __attribute__((warn_unused_result));

/* A SASL-family command (ROUTE_AUTH): saslStart, saslContinue, logout,
 * authenticate, getnonce. */
void cauth_command(struct client *c, struct request *req, const bson_t *body);

/* Add saslSupportedMechs / speculativeAuthenticate answers to a hello reply. */
void cauth_extend_hello(struct client *c, const bson_t *hello, bson_t *reply);

/* Janitor: has c, not logged in, run out of auth_timeout_ms (why: the
 * reason for its close)? */
bool cauth_login_expired(const struct client *c, uint64_t now, char *why, size_t whylen);

/* The client is freed: wipe its conversation (client_free_deferred,
 * through client_hooks.h). */
void cauth_client_free(struct client *c);

/* --test-config: the warning about auth_mode = none on a non-loopback
 * listen_addr, and the users file's errors. False if it cannot be used. */
bool cauth_check_config(const struct cfg *c, FILE *out) __attribute__((warn_unused_result));

/* --scram-secret USER: read the password from stdin, print the users-file
 * line. Returns the exit code. */
int cauth_secret_main(const char *dbuser);
