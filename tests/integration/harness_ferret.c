/*
 * harness_ferret.c — a FerretDB of a test's own (scripts/backend.sh start
 * KIND DIR), for the tests that need a server set up differently from the
 * suite's (auth with their own user, a replica set, TLS, no auth), and the
 * shell-command runner they share. See harness.h.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

#define FERRET_START_MS 180000
#define FERRET_STOP_MS	60000
#define FERRET_ENV_MAX	8

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

void h_ferret_start(struct h_ferret *f, const char *kind, const char *dir, const char *const env[])
{
	const char *argv[FERRET_ENV_MAX + 6];
	const char *tmp = getenv("TMPDIR");
	char out[4096];
	int argc = 0, st;

	memset(f, 0, sizeof(*f));
	if (dir != NULL) {
		snprintf(f->dir, sizeof(f->dir), "%s", dir);
	} else {
		snprintf(f->dir, sizeof(f->dir), "%s/mongoplex-%s-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp", kind);
		cr_assert(mkdtemp(f->dir) != NULL, "mkdtemp %s failed", f->dir);
	}
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
	cr_assert(uri_hostport(f->uri, f->host, sizeof(f->host), &f->port), "bad URI: %s", f->uri);
	read_plain_uri(f);
}

void h_ferret_stop(struct h_ferret *f)
{
	char cmd[800], out[1024];

	if (f->dir[0] == '\0')
		return;
	snprintf(cmd, sizeof(cmd), "%s/scripts/backend.sh stop '%s'; rm -rf '%s'", MP_SOURCE_DIR,
		 f->dir, f->dir);
	(void)h_sh_capture(cmd, out, sizeof(out), FERRET_STOP_MS);
	f->dir[0] = '\0';
}
