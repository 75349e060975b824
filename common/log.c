/* SPDX-License-Identifier: MIT */
/* The log: journald's native fields when stderr is the journal, plain lines on stderr
 * otherwise, with a level filter and a prefix (log.h). */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* The entry names the caller's file and line itself (CODE_FILE, CODE_LINE): without this,
 * sd-journal adds this file's as a second value of each. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

static int max_level = LOG_INFO;
static const char *prefix = "codeinterp";
static int use_journal = -1;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(const char *p) {
        prefix = p;
}

/* systemd sets JOURNAL_STREAM=dev:ino when stderr is a journal stream. */
static int detect_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        struct stat st;
        unsigned long long dev, ino;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return 0;
        if (fstat(STDERR_FILENO, &st) < 0)
                return 0;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

int log_journal_fields(int level, const char *file, int line, const char *message, const char *const *fields, char *buf,
                       size_t buflen, struct iovec *iov, size_t n_iov) {
        size_t n = 0, used = 0;
        int k;

        /* The fixed items, each NUL-terminated in buf; the journal takes them without the NUL. */
#define ADD(...)                                                                                                       \
        do {                                                                                                           \
                if (n >= n_iov || used >= buflen)                                                                      \
                        return -ENOBUFS;                                                                               \
                k = snprintf(buf + used, buflen - used, __VA_ARGS__);                                                  \
                if (k < 0 || (size_t) k >= buflen - used)                                                              \
                        return -ENOBUFS;                                                                               \
                iov[n++] = (struct iovec){ .iov_base = buf + used, .iov_len = (size_t) k };                            \
                used += (size_t) k + 1;                                                                                \
        } while (0)
        ADD("MESSAGE=%s", message);
        ADD("PRIORITY=%i", level);
        ADD("CODE_FILE=%s", file);
        ADD("CODE_LINE=%i", line);
        ADD("SYSLOG_IDENTIFIER=%s", prefix);
#undef ADD
        for (size_t i = 0; fields && fields[i]; i++) {
                if (n >= n_iov || i >= LOG_MAX_FIELDS)
                        return -ENOBUFS;
                iov[n++] = (struct iovec){ .iov_base = (void *) fields[i], .iov_len = strlen(fields[i]) };
        }
        return (int) n;
}

static void log_emit(int level, const char *file, int line, const char *const *fields, const char *message) {
        if (use_journal < 0)
                use_journal = detect_journal();
        if (use_journal) {
                char buf[2048 + 512]; /* the message and the four fixed fields */
                struct iovec iov[5 + LOG_MAX_FIELDS];
                int n = log_journal_fields(level, file, line, message, fields, buf, sizeof buf, iov,
                                           5 + LOG_MAX_FIELDS);
                if (n > 0 && sd_journal_sendv(iov, n) >= 0)
                        return;
        }
        fprintf(stderr, "%s[%d]: %s\n", prefix, (int) getpid(), message);
}

int log_struct_internal(int level, const char *file, int line, const char *const *fields, const char *fmt, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        if (level > max_level)
                return 0;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        log_emit(level, file, line, fields, buf);
        errno = saved;
        return 0;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);

        log_emit(level, file, line, NULL, buf);
        errno = saved;
        return -error;
}
