/*
 * log.h — leveled logging to stderr.
 *
 * Every line carries a timestamp, the level and, for connection-scoped
 * messages, the connection id and peer (see client_log/server_log macros in
 * client.h and server.h). The level is a runtime setting (reloadable).
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>

enum log_level {
	LOG_LVL_ERROR = 0,
	LOG_LVL_WARNING,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG,
};

extern enum log_level log_current_level;

bool log_parse_level(const char *name, enum log_level *out) __attribute__((warn_unused_result));
const char *log_level_name(enum log_level lvl);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Lifecycle lines (listening, started, reloaded, exiting): printed at every level. */
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_enabled(lvl) ((lvl) <= log_current_level)
#define log_error(...)	 log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warning(...)                                                                           \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_WARNING))                                                  \
			log_msg(LOG_LVL_WARNING, __VA_ARGS__);                                     \
	} while (0)
#define log_info(...)                                                                              \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_INFO))                                                     \
			log_msg(LOG_LVL_INFO, __VA_ARGS__);                                        \
	} while (0)
#define log_debug(...)                                                                             \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_DEBUG))                                                    \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__);                                       \
	} while (0)
