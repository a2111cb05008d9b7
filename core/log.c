/*
 * log.c — leveled logging to stderr, one line per call.
 */
#include "core/log.h"

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
