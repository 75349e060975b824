/* SPDX-License-Identifier: MIT */
/* The log: journald's native fields when stderr is the journal, plain lines on stderr
 * otherwise, with a level filter and a prefix (log.h). The journal is written without
 * blocking: a journald that does not read costs entries (counted, and said in the next
 * entry that goes through), never the supervisor's loop. */
#include "common/log.h"

#include <endian.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
/* How long one entry may wait for room in journald's queue before it is dropped. */
#define JOURNAL_WAIT_MS 5

static int max_level = LOG_INFO;
static const char *prefix = "codeinterp";
static int use_journal = -1;
static int journal_fd = -1;
static unsigned long long journal_dropped;

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

size_t log_journal_datagram(const struct iovec *iov, size_t n, char *buf, size_t buflen) {
        size_t used = 0;

        for (size_t i = 0; i < n; i++) {
                const char *item = iov[i].iov_base, *eq = memchr(item, '=', iov[i].iov_len);
                size_t len = iov[i].iov_len;

                if (!eq)
                        return 0;
                if (!memchr(item, '\n', len)) {
                        /* KEY=value\n */
                        if (buflen - used < len + 1)
                                return 0;
                        memcpy(buf + used, item, len);
                        buf[used + len] = '\n';
                        used += len + 1;
                } else {
                        /* A value with a newline: KEY\n, its length (64-bit little endian), value\n. */
                        size_t key = (size_t) (eq - item), vlen = len - key - 1;
                        uint64_t le = htole64(vlen);

                        if (memchr(item, '\n', key) || buflen - used < key + 1 + sizeof le + vlen + 1)
                                return 0;
                        memcpy(buf + used, item, key);
                        buf[used + key] = '\n';
                        memcpy(buf + used + key + 1, &le, sizeof le);
                        memcpy(buf + used + key + 1 + sizeof le, eq + 1, vlen);
                        buf[used + key + 1 + sizeof le + vlen] = '\n';
                        used += key + 1 + sizeof le + vlen + 1;
                }
        }
        return used;
}

static int journal_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = JOURNAL_SOCKET };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
                return -errno;
        /* Connected, so that poll() waits for room in journald's queue. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                int k = -errno;
                close(fd);
                return k;
        }
        return fd;
}

/* One datagram to journald without blocking: room in its queue is waited for
 * JOURNAL_WAIT_MS at most, and not at all while entries are being dropped (a stuck
 * journald costs the loop one wait, not one per entry). 0, or -errno (-EAGAIN:
 * journald is not reading). */
static int journal_send(const char *data, size_t len) {
        for (int attempt = 0; attempt < 2; attempt++) {
                if (journal_fd < 0 && (journal_fd = journal_connect()) < 0)
                        return journal_fd;
                if (send(journal_fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
                        return 0;
                if (errno == EAGAIN) {
                        struct pollfd p = { .fd = journal_fd, .events = POLLOUT };
                        if (journal_dropped == 0 && poll(&p, 1, JOURNAL_WAIT_MS) > 0 &&
                            send(journal_fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
                                return 0;
                        return -EAGAIN;
                }
                if (errno != ECONNREFUSED && errno != ENOTCONN)
                        return -errno;
                /* journald restarted (its socket is a new one): connect again, once. */
                close(journal_fd);
                journal_fd = -1;
        }
        return -ECONNREFUSED;
}

/* One entry to journald: 0, or -errno (-EAGAIN: dropped, journald is not reading). */
static int journal_entry(int level, const char *file, int line, const char *const *fields, const char *message) {
        char buf[2048 + 512]; /* the message and the four fixed fields */
        char dgram[sizeof buf + LOG_MAX_FIELDS * 256 + 64];
        struct iovec iov[5 + LOG_MAX_FIELDS];
        int n = log_journal_fields(level, file, line, message, fields, buf, sizeof buf, iov, 5 + LOG_MAX_FIELDS);
        size_t len = n > 0 ? log_journal_datagram(iov, (size_t) n, dgram, sizeof dgram) : 0;

        return len > 0 ? journal_send(dgram, len) : -ENOBUFS;
}

/* Whether the entry went to the journal (or was dropped there); false: write it to stderr. */
static bool journal_emit(int level, const char *file, int line, const char *const *fields, const char *message) {
        int k;

        if (journal_dropped > 0) {
                char note[128];

                snprintf(note, sizeof note, "%llu log entries were dropped: the journal was not reading",
                         journal_dropped);
                k = journal_entry(LOG_WARNING, __FILE__, __LINE__, NULL, note);
                if (k == -EAGAIN) {
                        /* Still no room: this one goes too, so that none goes through
                         * before the count of those lost before it. */
                        journal_dropped++;
                        return true;
                }
                if (k == 0)
                        journal_dropped = 0;
        }
        k = journal_entry(level, file, line, fields, message);
        if (k == -EAGAIN) {
                journal_dropped++;
                return true; /* not to stderr either: that is journald's too */
        }
        return k == 0;
}

static void log_emit(int level, const char *file, int line, const char *const *fields, const char *message) {
        if (use_journal < 0)
                use_journal = detect_journal();
        if (use_journal && journal_emit(level, file, line, fields, message))
                return;
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
