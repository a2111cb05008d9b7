/*
 * log.h — leveled logging to stderr.
 *
 * Every line carries a timestamp, the level and, for connection-scoped
 * messages, the connection id and peer (see client_log/server_log macros in
 * client.h and server.h). The level is a runtime setting (reloadable).
 * Lines an attacker can repeat at will go through a struct log_rl: a burst
 * per window, then counted and summed up by the next line that passes.
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

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

/* One kind of repeatable log line: one per call site, static (it may stay
 * on log_rl_tick's list), zeroed but for `what`, which names the lines in
 * the count log_rl_tick reports ("failed logins"). Rules: at most LOG_RL_BURST lines pass per
 * LOG_RL_WINDOW_MS window (monotonic clock); the ones dropped are counted in `dropped` and reported
 * by the next line that passes, or by log_rl_tick once the window is over (whichever comes first).
 * A struct that dropped a line is on the list log_rl_tick walks (`next`, `listed`) until its count
 * is reported; `lvl` is that of its last dropped line. */
#define LOG_RL_BURST	 10
#define LOG_RL_WINDOW_MS 10000
struct log_rl {
	const char *what;
	uint64_t window_start_ms; /* 0: no window yet */
	unsigned passed;	  /* lines logged in this window */
	uint64_t dropped;	  /* lines dropped since the last one logged */
	enum log_level lvl;
	bool listed;
	struct log_rl *next;
};

/* log_msg through rl: dropped (and counted) past the burst. */
void log_rl_msg(struct log_rl *rl, enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report the counts of windows that are over (the janitor calls it). */
void log_rl_tick(void);
