/*
 * harness_model.h — starting the benchmark's curve model
 * (bench/mongoplex-curvemodel: a model of the user's server, never MongoDB)
 * from a test: on a free port with its own curve file, its status, a
 * SIGHUP with a new curve, and a clean stop. For tests of the model itself
 * (test_curvemodel.c) and of what the proxy does in front of a backend
 * that collapses (test_adaptive.c); never a correctness backend.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* One model a test started: its pid, URI, directory, curve file and log. */
struct h_model {
	pid_t pid;
	char uri[128];
	char dir[128];
	char curve[160];
	char log[160];
};

/* Writes `text` to `path` (asserts). */
void h_write_file(const char *path, const char *text);
/* The whole file (malloc'd; asserts it exists). */
char *h_read_file(const char *path);

/* Starts the model with a curve file holding `curve_text`; `docs` and
 * `rtt_us` as its --docs and --rtt-us. A build without bench/ cannot run. */
void h_model_start(struct h_model *m, const char *curve_text, const char *docs, const char *rtt_us);
/* The same with more flags (`extra`, NULL-terminated; NULL: none). */
void h_model_start_args(struct h_model *m, const char *curve_text, const char *docs,
			const char *rtt_us, const char *const *extra);
/* Its log so far (static buffer, the first 16 KB). */
char *h_model_log(struct h_model *m);
/* SIGTERM, exit status 0, directory removed. */
void h_model_stop(struct h_model *m);
/* A field of curveModelStatus (through a fresh client), -1: absent. */
int64_t h_model_status(struct h_model *m, const char *field);
/* Waits up to 5 s for the status field to reach want. */
bool h_model_status_wait(struct h_model *m, const char *field, int64_t want);
