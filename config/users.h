/*
 * users.h — auth_users_file: the clients' SCRAM verifiers, one line per
 * user, never a password:
 *
 *   # comment
 *   admin.alice SCRAM-SHA-256$15000:<salt b64>$<StoredKey b64>:<ServerKey b64>
 * SCRAM-SHA-1$10000:...
 *
 * The first field is db.user (the database is the authSource, up to the
 * first '.'); then one secret per mechanism, in the form PostgreSQL and
 * PgBouncer use (mechanism$iterations:salt$StoredKey:ServerKey), the values
 * mongod's usersInfo {showCredentials: true} shows. `mongoplex
 * --scram-secret db.user` writes a line from a password read on stdin.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/scram_prim.h"

#define USERS_DB_MAX   64
#define USERS_NAME_MAX 256

/* One user. Rules: at least one secret present; db and user not empty. */
struct users_entry {
	char db[USERS_DB_MAX];
	char user[USERS_NAME_MAX];
	struct scram_secret sha1, sha256;
};

/* A loaded file. Rules: owned array, entries unique by (db, user). */
struct users_table {
	struct users_entry *v;
	size_t n;
};

/* Load `path` (refused if writable by group or others: it decides who gets
 * in). On failure err is "path:line: message" and *out is empty. */
bool users_load(const char *path, struct users_table *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse one line (no newline) into e; false + err if malformed. Blank and
 * comment lines: true with *empty set. */
bool users_parse_line(const char *line, struct users_entry *e, bool *empty, char *err,
		      size_t errlen) __attribute__((warn_unused_result));

const struct users_entry *users_find(const struct users_table *t, const char *db, const char *user);
/* The secret of `e` for `m`, or NULL. */
const struct scram_secret *users_secret(const struct users_entry *e, enum scram_mech m);

void users_free(struct users_table *t);

/* --scram-secret: the users-file line for `dbuser` ("db.user", or "user"
 * meaning admin.user) and `password`, both mechanisms, mongod's default
 * iteration counts (15000 SHA-256, 10000 SHA-1). */
bool users_format_line(const char *dbuser, const char *password, char *out, size_t outlen,
		       char *err, size_t errlen) __attribute__((warn_unused_result));
