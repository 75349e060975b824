/* SPDX-License-Identifier: MIT */
/* Whole reads and writes over descriptors and files, sealed memfds, the clock, UTF-8
 * counting and formatting into buffers (util.h). */
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

/* write(2), or send(2) with MSG_NOSIGNAL on a socket, until all of buf is out. */
static int out_full(int fd, const void *buf, size_t len, bool socket) {
        const uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = socket ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                /* Someone made the fd non-blocking (in a worker, user code can;
                                 * a client library's caller can). */
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                                        return -errno;
                                continue;
                        }
                        return -errno;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int write_full(int fd, const void *buf, size_t len) {
        return out_full(fd, buf, len, false);
}

int send_full(int fd, const void *buf, size_t len) {
        return out_full(fd, buf, len, true);
}

int read_full(int fd, void *buf, size_t len) {
        uint8_t *p = buf;

        while (len > 0) {
                ssize_t n = read(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EPIPE;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int read_fd_all(int fd, size_t max, void **ret_buf, size_t *ret_len) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        bool seekable = true;

        for (;;) {
                if (len == cap) {
                        if (cap > max)
                                return -EFBIG;
                        size_t ncap = cap ? cap * 2 : 4096;
                        uint8_t *nb = realloc(buf, ncap + 1);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = seekable ? pread(fd, buf + len, cap - len, (off_t) len) : read(fd, buf + len, cap - len);
                if (n < 0 && errno == ESPIPE && seekable) {
                        seekable = false; /* a pipe or socket: read it from where it is */
                        continue;
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > max)
                        return -EFBIG;
        }
        if (!buf && !(buf = malloc(1)))
                return -ENOMEM;
        buf[len] = 0;
        *ret_buf = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int read_file_all(const char *path, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = -1;
        void *buf;
        int k;

        fd = strcmp(path, "-") == 0 ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3) : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        k = read_fd_all(fd, max, &buf, ret_len);
        if (k < 0)
                return k;
        *ret = buf;
        return 0;
}

int memfd_from_buffer(const char *name, const void *data, size_t len, int *ret_fd) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        int r;

        if (fd < 0)
                return -errno;
        r = write_full(fd, data, len);
        if (r < 0)
                return r;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void set_why(char *why, size_t why_len, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
}

uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

int utf8_count(const char *s, size_t len, uint64_t *ret_chars) {
        const uint8_t *p = (const uint8_t *) s, *end = p + len;
        uint64_t n = 0;

        while (p < end) {
                uint8_t c = *p;
                size_t need;
                uint32_t cp;

                if (c < 0x80) {
                        p++;
                        n++;
                        continue;
                } else if (c >= 0xC2 && c <= 0xDF) {
                        need = 1;
                        cp = c & 0x1F;
                } else if (c >= 0xE0 && c <= 0xEF) {
                        need = 2;
                        cp = c & 0x0F;
                } else if (c >= 0xF0 && c <= 0xF4) {
                        need = 3;
                        cp = c & 0x07;
                } else
                        return -EILSEQ;
                if ((size_t) (end - p) < need + 1)
                        return -EILSEQ;
                for (size_t i = 1; i <= need; i++) {
                        if ((p[i] & 0xC0) != 0x80)
                                return -EILSEQ;
                        cp = cp << 6 | (p[i] & 0x3F);
                }
                if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                    (cp >= 0xD800 && cp <= 0xDFFF))
                        return -EILSEQ;
                p += need + 1;
                n++;
        }
        *ret_chars = n;
        return 0;
}

bool file_name_safe(const char *name, size_t len) {
        uint64_t chars;

        if (len == 0 || len > NAME_MAX || (len == 1 && name[0] == '.') ||
            (len == 2 && name[0] == '.' && name[1] == '.'))
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) name[i];
                if (c < 0x20 || c == 0x7f || c == '/')
                        return false;
        }
        return utf8_count(name, len, &chars) >= 0;
}

int name_to_value(const NameValue *table, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (!strcmp(table[i].name, name))
                        return table[i].value;
        return -EINVAL;
}
