/*
 * log.c — leveled logging to stderr, one line per call; rate-limited lines
 * (struct log_rl).
 */
#include "core/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum log_level log_current_level = LOG_LVL_INFO;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

bool log_parse_level(const char *name, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcasecmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return true;
		}
	}
	if (strcasecmp(name, "warn") == 0) {
		*out = LOG_LVL_WARNING;
		return true;
	}
	return false;
}

const char *log_level_name(enum log_level lvl)
{
	return level_names[lvl];
}

static void log_vwrite(const char *lvl, const char *fmt, va_list ap)
{
	char line[2048];
	struct timeval tv;
	struct tm tm;
	size_t n;

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03dZ [%d] %s ",
			      (int)(tv.tv_usec / 1000), (int)getpid(), lvl);
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	fprintf(stderr, "%s\n", line);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(lvl))
		return;
	va_start(ap, fmt);
	log_vwrite(level_names[lvl], fmt, ap);
	va_end(ap);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + 1; /* never 0 */
}

static struct log_rl *rl_listed; /* structs with dropped lines to report */

/* May one more line pass? A new window starts LOG_RL_WINDOW_MS after the last. */
static bool rl_pass(struct log_rl *rl, uint64_t now)
{
	if (rl->window_start_ms == 0 || now - rl->window_start_ms >= LOG_RL_WINDOW_MS) {
		rl->window_start_ms = now;
		rl->passed = 0;
	}
	if (rl->passed >= LOG_RL_BURST) {
		rl->dropped++;
		if (!rl->listed) {
			rl->listed = true;
			rl->next = rl_listed;
			rl_listed = rl;
		}
		return false;
	}
	rl->passed++;
	return true;
}

void log_rl_msg(struct log_rl *rl, enum log_level lvl, const char *fmt, ...)
{
	char line[1800];
	va_list ap;

	if (!log_enabled(lvl))
		return;
	if (!rl_pass(rl, mono_ms())) {
		rl->lvl = lvl;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (rl->dropped == 0) {
		log_msg(lvl, "%s", line);
		return;
	}
	log_msg(lvl, "%s [and %" PRIu64 " more such lines not logged (at most %d per %d s)]", line,
		rl->dropped, LOG_RL_BURST, LOG_RL_WINDOW_MS / 1000);
	rl->dropped = 0;
}

void log_rl_tick(void)
{
	uint64_t now = mono_ms();
	struct log_rl **pp = &rl_listed, *rl;

	while ((rl = *pp) != NULL) {
		if (rl->dropped > 0 && now - rl->window_start_ms < LOG_RL_WINDOW_MS) {
			pp = &rl->next; /* its window is still on */
			continue;
		}
		*pp = rl->next;
		rl->listed = false;
		if (rl->dropped == 0)
			continue;
		log_msg(rl->lvl,
			"%" PRIu64 " more log lines about %s not logged (at most %d per %d s)",
			rl->dropped, rl->what ? rl->what : "the same thing", LOG_RL_BURST,
			LOG_RL_WINDOW_MS / 1000);
		rl->dropped = 0;
	}
}

void log_notice(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite("notice", fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vwrite("fatal", fmt, ap);
	va_end(ap);
	exit(1);
}
