/*
 * reload.h — one reload in two phases: prepare every part of the new
 * configuration into new objects (the config file, the users file, the
 * backend credentials and password file, the client TLS context), then
 * commit all of them at once, or discard them all and keep what runs.
 * Nothing of a rejected reload applies.
 *
 *   reload_prepare ─ ok ─▶ reload_commit   (swap every part)
 *         └────── fail ─▶ reload_discard  (free the new parts, err says why)
 */
#pragma once

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>

#include "config/cfg.h"
#include "config/users.h"
#include "pool/auth.h"

/* The new parts of one reload. Rules: owned here until reload_commit moves
 * them into the running modules or reload_discard frees them; each part is
 * empty (zero) until its prepare step succeeded. */
struct reload_parts {
	struct cfg cfg;		  /* the file, non-reloadable settings restored */
	struct users_table users; /* auth_users_file (empty with auth_mode = none) */
	struct auth_cred cred;	  /* backend_uri's user and backend_password_file */
	SSL_CTX *tls;		  /* client TLS context (NULL: client TLS is off) */
};

/* Load and check every part of the file at `path`; false + err names the
 * first part that failed (the caller then calls reload_discard). */
bool reload_prepare(const char *path, struct reload_parts *rp, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Swap every prepared part in (g.cfg included); rp is left empty. */
void reload_commit(struct reload_parts *rp);

/* Free every prepared part; what runs stays as it was. */
void reload_discard(struct reload_parts *rp);
