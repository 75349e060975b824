/* SPDX-License-Identifier: MIT */
/* The project's one log: levels, errno-returning helpers and journal fields. */
#pragma once

#include <errno.h>
#include <stddef.h>
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

/* The same, with extra journal fields: fields is a NULL-terminated list of "KEY=value"
 * strings (KEY in [A-Z0-9_], not starting with _), sent along with MESSAGE when logging
 * to the journal; on stderr only the message is written. Metadata only, like every
 * message. At most LOG_MAX_FIELDS fields are sent. */
#define LOG_MAX_FIELDS 16
int log_struct_internal(int level, const char *file, int line, const char *const *fields, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
#define log_struct(level, fields, ...) log_struct_internal(level, __FILE__, __LINE__, fields, __VA_ARGS__)

/* The journal entry a message becomes: "KEY=value" items (MESSAGE, PRIORITY, CODE_FILE,
 * CODE_LINE, SYSLOG_IDENTIFIER, then the extra fields) as iovecs pointing into buf and
 * fields. Returns the number of items, or -ENOBUFS. Exposed for the unit test. */
struct iovec;
int log_journal_fields(int level, const char *file, int line, const char *message, const char *const *fields, char *buf,
                       size_t buflen, struct iovec *iov, size_t n_iov);

/* Those items in journald's native protocol (KEY=value lines; a value holding a newline
 * as KEY, newline, its 64-bit little-endian length, the value, newline), in buf. Returns
 * the length, or 0 if buf is too small or an item has no '='. Exposed for the unit test. */
size_t log_journal_datagram(const struct iovec *iov, size_t n, char *buf, size_t buflen);

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
