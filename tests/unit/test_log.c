/*
 * test_log.c — core/log's rate-limited lines (struct log_rl): a burst of
 * LOG_RL_BURST lines passes, the rest of the window is dropped and counted,
 * and the first line of a later window says how many were dropped, or
 * log_rl_tick does once the window is over; lines below the log level are
 * neither logged nor counted.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

/* Run fn with stderr going to a temporary file; its content, malloc'd. */
static char *capture(void (*fn)(struct log_rl *), struct log_rl *rl)
{
	char path[] = "/tmp/mp-test-log-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	char *buf = calloc(1, 65536);
	FILE *f;

	cr_assert(fd >= 0 && saved >= 0 && buf != NULL);
	fflush(stderr);
	dup2(fd, 2);
	fn(rl);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	f = fdopen(fd, "r");
	rewind(f);
	cr_assert(fread(buf, 1, 65535, f) < 65535);
	fclose(f);
	unlink(path);
	return buf;
}

static int count(const char *s, const char *needle)
{
	int n = 0;

	for (; (s = strstr(s, needle)) != NULL; s++)
		n++;
	return n;
}

static void fifty(struct log_rl *rl)
{
	for (int i = 0; i < 50; i++)
		log_rl_msg(rl, LOG_LVL_WARNING, "repeated line %d", i);
}

static void one_more(struct log_rl *rl)
{
	log_rl_msg(rl, LOG_LVL_WARNING, "a later line");
}

static void debug_lines(struct log_rl *rl)
{
	for (int i = 0; i < 50; i++)
		log_rl_msg(rl, LOG_LVL_DEBUG, "debug line %d", i);
}

Test(log, rate_limited_lines_pass_a_burst_then_say_how_many_were_dropped)
{
	static struct log_rl rl = {.what = "tests"};
	char *out;

	log_current_level = LOG_LVL_INFO;
	out = capture(fifty, &rl);
	cr_assert_eq(count(out, "repeated line"), LOG_RL_BURST, "%s", out);
	cr_assert_eq(rl.dropped, 50 - LOG_RL_BURST);
	free(out);
	out = capture(one_more, &rl);
	cr_assert_eq(count(out, "a later line"), 0, "still the same window: %s", out);
	free(out);
	rl.window_start_ms -= LOG_RL_WINDOW_MS; /* the window is over */
	out = capture(one_more, &rl);
	cr_assert(strstr(out, "a later line [and 41 more such lines not logged") != NULL, "%s",
		  out);
	cr_assert_eq(rl.dropped, 0);
	free(out);
}

static void tick(struct log_rl *rl)
{
	(void)rl;
	log_rl_tick();
}

Test(log, the_janitor_tick_reports_a_window_that_is_over)
{
	static struct log_rl rl = {.what = "tests"};
	char *out;

	log_current_level = LOG_LVL_INFO;
	free(capture(fifty, &rl));
	out = capture(tick, &rl);
	cr_assert_eq(out[0], '\0', "reported while the window is on: %s", out);
	free(out);
	rl.window_start_ms -= LOG_RL_WINDOW_MS;
	out = capture(tick, &rl);
	cr_assert(strstr(out, "40 more log lines about tests not logged") != NULL, "%s", out);
	free(out);
	cr_assert_eq(rl.dropped, 0);
	out = capture(tick, &rl);
	cr_assert_eq(out[0], '\0', "reported twice: %s", out);
	free(out);
}

Test(log, lines_below_the_level_are_not_counted)
{
	static struct log_rl rl = {.what = "tests"};
	char *out;

	log_current_level = LOG_LVL_INFO;
	out = capture(debug_lines, &rl);
	cr_assert_eq(out[0], '\0', "%s", out);
	cr_assert_eq(rl.dropped, 0);
	cr_assert_eq(rl.passed, 0);
	free(out);
}
