/*
 * secret.c — the backend password file, file-mode checks for secrets, and
 * URI redaction for log lines.
 */
#include "config/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfg.h"

static bool read_all(int fd, char *out, size_t outlen, size_t *n)
{
	*n = 0;
	for (;;) {
		ssize_t r = read(fd, out + *n, outlen - *n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return false;
		if (r == 0)
			return true;
		*n += (size_t)r;
		if (*n == outlen)
			return true;
	}
}

static bool check_mode(const char *path, const struct stat *st, char *warn, size_t warnlen,
		       char *err, size_t errlen)
{
	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "backend_password_file %s: not a regular file", path);
		return false;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, errlen,
			 "backend_password_file %s: writable by group or others (mode %03o); "
			 "refusing it (chmod 0600 or 0640)",
			 path, (unsigned)(st->st_mode & 0777));
		return false;
	}
	if (st->st_mode & S_IROTH)
		snprintf(warn, warnlen,
			 "backend_password_file %s is readable by every user (mode %03o); "
			 "chmod o-r it",
			 path, (unsigned)(st->st_mode & 0777));
	return true;
}

bool secret_read_file(const char *path, char *out, size_t outlen, char *warn, size_t warnlen,
		      char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	size_t n = 0;
	bool ok = false;

	warn[0] = '\0';
	if (fd < 0) {
		snprintf(err, errlen, "backend_password_file %s: %s", path, strerror(errno));
		return false;
	}
	if (fstat(fd, &st) != 0 || !check_mode(path, &st, warn, warnlen, err, errlen))
		goto out;
	if (!read_all(fd, out, outlen, &n)) {
		snprintf(err, errlen, "backend_password_file %s: %s", path, strerror(errno));
		goto out;
	}
	if (n == outlen) {
		snprintf(err, errlen, "backend_password_file %s: longer than %zu bytes", path,
			 outlen - 1);
		goto out;
	}
	out[n] = '\0';
	if (n > 0 && out[n - 1] == '\n')
		out[--n] = '\0';
	if (n > 0 && out[n - 1] == '\r')
		out[--n] = '\0';
	if (n == 0 || memchr(out, '\n', n) != NULL || strlen(out) != n) {
		snprintf(err, errlen, "backend_password_file %s: must hold one non-empty line",
			 path);
		goto out;
	}
	ok = true;
out:
	if (!ok)
		memset(out, 0, outlen);
	close(fd);
	return ok;
}

void secret_redact_uri(const char *uri, char *out, size_t outlen)
{
	const char *scheme = strstr(uri, "://");
	const char *start = scheme ? scheme + 3 : uri;
	const char *end = start + strcspn(start, "/?");
	const char *at = NULL, *colon;

	if (scheme == NULL) {
		snprintf(out, outlen, "%s", uri);
		return;
	}
	for (const char *p = start; p < end; p++)
		if (*p == '@')
			at = p;
	colon = at ? memchr(start, ':', (size_t)(at - start)) : NULL;
	if (colon == NULL) {
		snprintf(out, outlen, "%s", uri);
		return;
	}
	snprintf(out, outlen, "%.*s***%s", (int)(colon + 1 - uri), uri, at);
}
