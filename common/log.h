/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <syslog.h>

/* Logging: to journald when stderr is connected to the journal (JOURNAL_STREAM),
 * to stderr otherwise. Never pass code, output or source text at LOG_INFO or above. */
void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_prefix(const char *prefix);

/* Logs and returns -abs(error) so callers can `return log_error_errno(r, "...: %m");`.
 * %m expands to strerror(abs(error)). */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

#define log_full_errno(level, error, ...) log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)
