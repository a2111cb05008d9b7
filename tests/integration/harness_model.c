/*
 * harness_model.c — the curve model for tests (harness_model.h).
 */
#define _GNU_SOURCE
#include "harness_model.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

void h_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

char *h_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long len;

	cr_assert(f != NULL, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len + 1);
	cr_assert(buf != NULL);
	cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
	buf[len] = '\0';
	fclose(f);
	return buf;
}

/* Reads the first stdout line (the URI) within 10 s. */
static void read_uri(struct h_model *m, int fd)
{
	size_t got = 0;
	int64_t deadline = h_now_ms() + 10000;

	while (got < sizeof m->uri - 1 && !memchr(m->uri, '\n', got)) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		cr_assert(h_now_ms() < deadline, "the model printed no URI in 10 s");
		if (poll(&pfd, 1, 200) <= 0)
			continue;
		n = read(fd, m->uri + got, sizeof m->uri - 1 - got);
		cr_assert(n > 0, "the model exited before printing its URI (log %s)", m->log);
		got += (size_t)n;
	}
	m->uri[got] = '\0';
	*strchr(m->uri, '\n') = '\0';
}

void h_model_start(struct h_model *m, const char *curve_text, const char *docs, const char *rtt_us)
{
	h_model_start_args(m, curve_text, docs, rtt_us, NULL);
}

void h_model_start_args(struct h_model *m, const char *curve_text, const char *docs,
			const char *rtt_us, const char *const *extra)
{
	int out[2];

#ifndef MP_CURVEMODEL
	(void)extra;
	(void)m;
	(void)curve_text;
	(void)docs;
	(void)rtt_us;
	(void)out;
	(void)read_uri;
	h_cannot_run("built without bench/ (MP_BUILD_BENCH=OFF): no mongoplex-curvemodel");
#else
	snprintf(m->dir, sizeof m->dir, "/tmp/mp_curvemodel_XXXXXX");
	cr_assert(mkdtemp(m->dir) != NULL);
	snprintf(m->curve, sizeof m->curve, "%s/curve.csv", m->dir);
	snprintf(m->log, sizeof m->log, "%s/log", m->dir);
	h_write_file(m->curve, curve_text);
	cr_assert(pipe2(out, O_CLOEXEC) == 0);
	fflush(NULL);
	m->pid = fork();
	cr_assert(m->pid >= 0);
	if (m->pid == 0) {
		int lg = open(m->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], 1);
		dup2(lg, 2);
		h_close_fds_above(3);
		const char *argv[32] = {MP_CURVEMODEL, "--curve",     m->curve, "--port",
					"0",	       "--docs",      docs,	"--rtt-us",
					rtt_us,	       "--log-level", "info"};
		int n = 11;

		for (int i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
			argv[n++] = extra[i];
		argv[n] = NULL;
		execv(MP_CURVEMODEL, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	read_uri(m, out[0]);
	close(out[0]);
	cr_assert(strncmp(m->uri, "mongodb://127.0.0.1:", 20) == 0, "first line: %s", m->uri);
#endif
}

char *h_model_log(struct h_model *m)
{
	static char buf[16384];
	FILE *f = fopen(m->log, "r");
	size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

void h_model_stop(struct h_model *m)
{
	int st;
	char cmd[200];

	kill(m->pid, SIGTERM);
	cr_assert(waitpid(m->pid, &st, 0) == m->pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "model exit status %d; log:\n%s", st,
		  h_model_log(m));
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", m->dir);
	cr_assert(system(cmd) == 0);
}

int64_t h_model_status(struct h_model *m, const char *field)
{
	mongoc_client_t *c = h_client_uri(m->uri, "harness_model");
	bson_error_t err;
	bson_t reply;
	int64_t v;

	cr_assert(c != NULL);
	cr_assert(h_cmd_json(c, "admin", "{\"curveModelStatus\": 1}", &reply, &err), "%s",
		  err.message);
	v = h_get_int(&reply, field, -1);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	return v;
}

bool h_model_status_wait(struct h_model *m, const char *field, int64_t want)
{
	for (int i = 0; i < 50; i++) {
		if (h_model_status(m, field) == want)
			return true;
		h_sleep_ms(100);
	}
	return false;
}
