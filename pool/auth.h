/*
 * auth.h — backend authentication: the credentials of backend_uri (and
 * backend_password_file) and the login conversation each pooled backend
 * connection runs while SV_CONNECTING.
 *
 *   hello (+ saslSupportedMechs, + speculativeAuthenticate saslStart)
 *     ─ reply carries speculativeAuthenticate ─▶ saslContinue ─▶ [saslContinue ""] ─▶ ready
 *     ─ reply without it ─▶ saslStart ─▶ saslContinue ─▶ [saslContinue ""] ─▶ ready
 *   any ok:0, a bad nonce/iteration count, a wrong server signature ─▶ failed (code 18)
 *
 * Mechanisms: SCRAM-SHA-256 and SCRAM-SHA-1 (pool/scram.c); with no
 * authMechanism the proxy asks saslSupportedMechs and prefers SCRAM-SHA-256.
 * The password never reaches a log line, stats or /metrics.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pool/scram.h"
#include "core/handshake.h"

struct cfg;

struct server;

/* The credentials every backend connection uses. Rules: enabled == a
 * username was given; mech_given false means negotiate. password is the
 * plain text (from the URI or the password file), wiped when replaced. */
struct auth_cred {
	bool enabled;
	char user[256];
	char source[256]; /* authSource (default: the URI's database, else "admin") */
	bool mech_given;
	enum scram_mech mech;
	char password[256];
	bool from_file; /* password read from backend_password_file */
};

/* Parse the URI's credentials (and read password_file, if not empty) into
 * `out`. Refuses unsupported mechanisms. `warn` (may be empty) is a warning
 * to log, e.g. a world-readable password file. */
bool auth_load(const char *uri, const char *password_file, struct auth_cred *out, char *warn,
	       size_t warnlen, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Startup: load the credentials of `uri` and g.cfg.backend_password_file
 * and install them (warnings are logged). */
bool auth_start(const char *uri, char *err, size_t errlen) __attribute__((warn_unused_result));

/* Install credentials. Returns true if they differ from the
 * previous ones; the pools' connect backoff is then reset. */
bool auth_install(struct auth_cred *c);

/* mongodb+srv://: the authSource of the resolved URI (its TXT record's
 * authSource= unless the URI gave one); kept across reloads. */
void auth_set_dns_source(const char *source);

/* Reload, commit: auth_install of credentials auth_load prepared, logging
 * what changed (never the password); *next is wiped. */
void auth_commit(struct auth_cred *next);

/* Wipe a credentials struct. */
void auth_cred_clear(struct auth_cred *c);

/* The proxy's hello on a new connection: add saslSupportedMechs and
 * speculativeAuthenticate when credentials are configured. */
void auth_extend_hello(struct server *s, bson_t *cmd);

enum auth_result {
	AUTH_DONE,	/* logged in (or no credentials): *bi holds the hello */
	AUTH_MORE,	/* the next SASL command was sent */
	AUTH_FAILED,	/* authentication refused: code 18, err names user and host */
	AUTH_BAD_HELLO, /* the hello reply is unusable: err says why */
};

/* A reply on a connecting server: first the hello, then each SASL reply. */
enum auth_result auth_on_reply(struct server *s, const bson_t *reply, struct backend_info *bi,
			       char *err, size_t errlen) __attribute__((warn_unused_result));

/* Release a connection's conversation (server freed). */
void auth_conv_free(struct server *s);

/* --test-config: warnings about secrets in `cfg_path` (password in
 * backend_uri while the file is readable by others, password file modes),
 * printed to `out`. False if the password file cannot be used. */
bool auth_check_config(const char *cfg_path, const struct cfg *c, FILE *out)
    __attribute__((warn_unused_result));
