/*
 * secret.h — where the backend password lives: reading
 * backend_password_file, checking who can read the files that hold a
 * secret, and redacting passwords from URIs before they are logged.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Read a password file: a regular file, not writable by group or others
 * (refused), one line (a trailing newline is stripped), not empty. A
 * world-readable file is accepted with a warning in `warn` (else ""). */
bool secret_read_file(const char *path, char *out, size_t outlen, char *warn, size_t warnlen,
		      char *err, size_t errlen) __attribute__((warn_unused_result));

/* `uri` with the password part of its userinfo replaced by "***". */
void secret_redact_uri(const char *uri, char *out, size_t outlen);
