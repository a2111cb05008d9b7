/*
 * harness_ferret.c — FerretDB for the tests that need one besides the
 * suite's backend: the suite run's shared server of a kind (h_ferret_shared;
 * tests/scripts/run-integration.py owns its directory and stops it), or one
 * of a test's own (scripts/backend.sh start KIND DIR), and the shell-command
 * runner they share. See harness.h.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

#define FERRET_START_MS 180000
#define FERRET_STOP_MS	60000
#define FERRET_ENV_MAX	8

int h_mock_backend_start(char *dir, FILE **mock)
{
	char cmd[1024], path[300], line[64] = "";
	int port = 0;
	FILE *f;

	cr_assert(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
	snprintf(cmd, sizeof(cmd),
		 "exec /usr/bin/python3 %s/tests/integration/mock_backend.py >%s/port",
		 MP_SOURCE_DIR, dir);
	*mock = popen(cmd, "w"); /* its stdin is our pipe: it exits when we close it */
	cr_assert(*mock != NULL);
	snprintf(path, sizeof(path), "%s/port", dir);
	for (int i = 0; i < 400 && port == 0; i++) { /* hang guard: 20 s */
		if ((f = fopen(path, "r")) != NULL) {
			if (fgets(line, sizeof(line), f) == NULL ||
			    sscanf(line, "port %d", &port) != 1)
				port = 0;
			fclose(f);
		}
		if (port == 0)
			h_sleep_ms(50);
	}
	cr_assert(port > 0, "mock_backend.py did not start (python3-mockupdb?)");
	return port;
}

int h_sh_capture(const char *cmd, char *out, size_t outlen, int timeout_ms)
{
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};

	return h_run_capture(argv, out, outlen, timeout_ms);
}

/* host and port of the URI's first host (after the credentials). */
static bool uri_hostport(const char *uri, char *host, size_t hostlen, int *port)
{
	const char *at = strchr(uri, '@'), *h = at ? at + 1 : strstr(uri, "://");
	size_t n;

	if (h == NULL)
		return false;
	if (at == NULL)
		h += 3;
	n = strcspn(h, ":/?,");
	if (n == 0 || n >= hostlen || h[n] != ':')
		return false;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = atoi(h + n + 1);
	return *port > 0;
}

/* The last line of out starting with mongodb:// (backend.sh's stdout;
 * its stderr lines come before). */
static bool last_uri(char *out, char *uri, size_t len)
{
	char *nl, *line;

	uri[0] = '\0';
	for (line = strtok_r(out, "\n", &nl); line != NULL; line = strtok_r(NULL, "\n", &nl))
		if (strncmp(line, "mongodb://", 10) == 0)
			snprintf(uri, len, "%s", line);
	return uri[0] != '\0';
}

static void read_plain_uri(struct h_ferret *f)
{
	char path[300];
	FILE *in;

	f->plain_uri[0] = '\0';
	snprintf(path, sizeof(path), "%s/plain_uri", f->dir);
	in = fopen(path, "r");
	if (in == NULL)
		return;
	if (fgets(f->plain_uri, sizeof(f->plain_uri), in) != NULL)
		f->plain_uri[strcspn(f->plain_uri, "\n")] = '\0';
	fclose(in);
}

/* user and password of "mongodb://user:password@host..." ("" when absent). */
static void uri_userpass(const char *uri, char *user, size_t ulen, char *pw, size_t plen)
{
	const char *u = strstr(uri, "://"), *at = strchr(uri, '@'), *colon;

	user[0] = pw[0] = '\0';
	if (u == NULL || at == NULL)
		return;
	u += 3;
	colon = memchr(u, ':', (size_t)(at - u));
	snprintf(user, ulen, "%.*s", (int)((colon ? colon : at) - u), u);
	if (colon != NULL)
		snprintf(pw, plen, "%.*s", (int)(at - colon - 1), colon + 1);
}

/* Fill f's fields from its URI (f->uri set) and its directory's plain_uri. */
static void ferret_fields(struct h_ferret *f)
{
	cr_assert(uri_hostport(f->uri, f->host, sizeof(f->host), &f->port), "bad URI: %s", f->uri);
	uri_userpass(f->uri, f->user, sizeof(f->user), f->password, sizeof(f->password));
	read_plain_uri(f);
}

/* backend.sh start kind f->dir with env; sets f->uri. */
static void ferret_launch(struct h_ferret *f, const char *kind, const char *const env[])
{
	const char *argv[FERRET_ENV_MAX + 6];
	char out[4096];
	int argc = 0, st;

	argv[argc++] = "/usr/bin/env";
	for (int i = 0; env != NULL && env[i] != NULL; i++) {
		cr_assert(i < FERRET_ENV_MAX, "h_ferret_start: too many environment entries");
		argv[argc++] = env[i];
	}
	argv[argc++] = MP_SOURCE_DIR "/scripts/backend.sh";
	argv[argc++] = "start";
	argv[argc++] = kind;
	argv[argc++] = f->dir;
	argv[argc] = NULL;
	st = h_run_capture(argv, out, sizeof(out), FERRET_START_MS);
	cr_assert(st == 0,
		  "FerretDB (%s) did not start (build it with scripts/backend.sh build ferretdb): "
		  "%.1500s",
		  kind, out);
	cr_assert(last_uri(out, f->uri, sizeof(f->uri)), "no URI from backend.sh start %s", kind);
}

void h_ferret_start(struct h_ferret *f, const char *kind, const char *dir, const char *const env[])
{
	const char *tmp = getenv("TMPDIR");

	memset(f, 0, sizeof(*f));
	if (dir != NULL) {
		snprintf(f->dir, sizeof(f->dir), "%s", dir);
	} else {
		snprintf(f->dir, sizeof(f->dir), "%s/mongoplex-%s-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp", kind);
		cr_assert(mkdtemp(f->dir) != NULL, "mkdtemp %s failed", f->dir);
	}
	ferret_launch(f, kind, env);
	ferret_fields(f);
	snprintf(f->scratch, sizeof(f->scratch), "%s", f->dir);
}

/* The first line of path into buf (newline stripped); false if none. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *in = fopen(path, "r");
	bool ok;

	if (in == NULL)
		return false;
	ok = fgets(buf, (int)len, in) != NULL;
	fclose(in);
	buf[strcspn(buf, "\n")] = '\0';
	return ok && buf[0] != '\0';
}

void h_ferret_shared(struct h_ferret *f, const char *kind)
{
	const char *root = getenv("MONGOPLEX_SHARED_FERRETDB_DIR");
	const char *user = getenv("MONGOPLEX_SHARED_FERRETDB_USER");
	const char *pw = getenv("MONGOPLEX_SHARED_FERRETDB_PASSWORD");
	char lock[300], uri_path[300], e_user[128], e_pw[200];
	const char *const env[] = {e_user, e_pw, NULL};
	int fd;

	if (root == NULL || *root == '\0') {
		h_ferret_start(f, kind, NULL, NULL);
		return;
	}
	cr_assert(strcmp(kind, "ferretdb") == 0 || strcmp(kind, "ferretdb-auth") == 0 ||
		      strcmp(kind, "ferretdb-rs") == 0,
		  "h_ferret_shared: no shared server of kind %s", kind);
	memset(f, 0, sizeof(*f));
	f->shared = true;
	snprintf(f->dir, sizeof(f->dir), "%s/%s", root, kind);
	snprintf(lock, sizeof(lock), "%s/%s.lock", root, kind);
	snprintf(uri_path, sizeof(uri_path), "%s/uri", f->dir);
	snprintf(e_user, sizeof(e_user), "MONGOPLEX_FERRETDB_USER=%s",
		 user && *user ? user : "mongoplex");
	snprintf(e_pw, sizeof(e_pw), "MONGOPLEX_FERRETDB_PASSWORD=%s",
		 pw && *pw ? pw : "mongoplex-pw");
	/* One start per kind however many tests ask at once: the first holds
	 * the lock while the server starts, the others then read its URI. */
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert(fd >= 0, "%s: %s", lock, strerror(errno));
	cr_assert(flock(fd, LOCK_EX) == 0, "flock %s: %s", lock, strerror(errno));
	if (!read_line(uri_path, f->uri, sizeof(f->uri)))
		ferret_launch(f, kind, env);
	flock(fd, LOCK_UN);
	close(fd);
	ferret_fields(f);
	/* The test's own files: under the shared directory, which the runner removes. */
	snprintf(f->scratch, sizeof(f->scratch), "%s/t-XXXXXX", root);
	cr_assert(mkdtemp(f->scratch) != NULL, "mkdtemp %s: %s", f->scratch, strerror(errno));
}

void h_ferret_halt(struct h_ferret *f)
{
	const char *argv[] = {MP_SOURCE_DIR "/scripts/backend.sh", "stop", f->dir, NULL};
	char out[4096];

	cr_assert(!f->shared, "h_ferret_halt: not the shared server");
	cr_assert(h_run_capture(argv, out, sizeof(out), FERRET_STOP_MS) == 0,
		  "FerretDB did not stop: %.1500s", out);
}

void h_ferret_restart(struct h_ferret *f)
{
	const char *argv[] = {MP_SOURCE_DIR "/scripts/backend.sh", "restart", f->dir, NULL};
	char out[4096], uri[900];
	int st;

	cr_assert(!f->shared, "h_ferret_restart: not the shared server");
	st = h_run_capture(argv, out, sizeof(out), FERRET_START_MS);
	cr_assert(st == 0, "FerretDB did not restart: %.1500s", out);
	cr_assert(last_uri(out, uri, sizeof(uri)) && strcmp(uri, f->uri) == 0,
		  "FerretDB restarted as %s, not %s", uri, f->uri);
}

void h_ferret_stop(struct h_ferret *f)
{
	char cmd[800], out[1024];

	if (f->shared) {
		if (f->scratch[0] != '\0') {
			snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->scratch);
			(void)h_sh_capture(cmd, out, sizeof(out), FERRET_STOP_MS);
		}
		memset(f, 0, sizeof(*f));
		return;
	}
	if (f->dir[0] == '\0')
		return;
	snprintf(cmd, sizeof(cmd), "%s/scripts/backend.sh stop '%s'; rm -rf '%s'", MP_SOURCE_DIR,
		 f->dir, f->dir);
	(void)h_sh_capture(cmd, out, sizeof(out), FERRET_STOP_MS);
	f->dir[0] = '\0';
}
