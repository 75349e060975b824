/* SPDX-License-Identifier: MIT */
/* I/O, buffer and framing helpers that every room uses. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all of buf (retrying on EINTR and short writes, waiting if the fd is
 * non-blocking and full). 0 or -errno. */
int write_full(int fd, const void *buf, size_t len);
/* The same over a connected socket, with MSG_NOSIGNAL: a peer that went away is -EPIPE,
 * never SIGPIPE, whatever the program's disposition of that signal. */
int send_full(int fd, const void *buf, size_t len);
/* Read exactly len bytes; -EPIPE on early EOF. */
int read_full(int fd, void *buf, size_t len);
/* Read a whole fd, up to max bytes (-EFBIG beyond): a regular file or memfd from offset
 * 0, a pipe or socket from where it is. The buffer has a NUL after the last byte, not
 * counted in *ret_len. */
int read_fd_all(int fd, size_t max, void **ret_buf, size_t *ret_len);
/* The whole file at path ("-": standard input), up to max bytes (-EFBIG beyond),
 * NUL-terminated (the NUL is not counted in *ret_len). */
int read_file_all(const char *path, size_t max, char **ret, size_t *ret_len);
/* A sealed, close-on-exec memfd holding data. */
int memfd_from_buffer(const char *name, const void *data, size_t len, int *ret_fd);
/* A name that is safe as one file in a directory: 1..NAME_MAX bytes of valid UTF-8, not
 * "." or "..", no '/', no C0 control character and no DEL. The rule for artifact names,
 * held once for the supervisor that reads /outputs and the client that saves them. */
bool file_name_safe(const char *name, size_t len);
/* Frame helpers: 4-byte big-endian length prefix. */
static inline void frame_put_len(uint8_t out[4], uint32_t n) {
        out[0] = (uint8_t) (n >> 24);
        out[1] = (uint8_t) (n >> 16);
        out[2] = (uint8_t) (n >> 8);
        out[3] = (uint8_t) n;
}
static inline uint32_t frame_get_len(const uint8_t in[4]) {
        return (uint32_t) in[0] << 24 | (uint32_t) in[1] << 16 | (uint32_t) in[2] << 8 | (uint32_t) in[3];
}
/* Format a reason into why (why_len bytes, truncated to fit, always NUL-terminated):
 * the "char *why, size_t why_len" out-parameter of the supervisor's setup steps. */
void set_why(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A name and the (non-negative) value it stands for: an entry of a table that
 * name_to_value() searches, such as a command line's words for an enum. */
typedef struct NameValue {
        const char *name;
        int value;
} NameValue;
/* The value of the first entry of table[0..n) named name; -EINVAL if none is. */
int name_to_value(const NameValue *table, size_t n, const char *name);
/* Monotonic clock in microseconds. */
uint64_t now_usec(void);
/* Count Unicode code points in valid UTF-8; -EILSEQ if invalid. */
int utf8_count(const char *s, size_t len, uint64_t *ret_chars);
