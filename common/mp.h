/* SPDX-License-Identifier: MIT */
/* Small typed accessors over msgpack-c objects, and packing shorthands. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

/* Walk one msgpack object in buf[0..len) without allocating: checks that it is
 * well-formed, nests at most max_depth deep, and that every array/map count could
 * actually be backed by the remaining bytes (each element takes at least one).
 * Run before msgpack_unpack_next(), which allocates for declared counts up front:
 * a 5-byte frame must not be able to ask for gigabytes. On success *ret_end is the
 * offset just past the object. -EBADMSG otherwise. */
int mp_validate(const void *buf, size_t len, unsigned max_depth, size_t *ret_end);

/* Look up key in a map object; NULL if obj is not a map or the key is absent. */
const msgpack_object *mp_map_get(const msgpack_object *obj, const char *key);
bool mp_is_str(const msgpack_object *o);
bool mp_is_uint(const msgpack_object *o); /* non-negative integer */
bool mp_str_eq(const msgpack_object *o, const char *s);
/* Typed getters: -ENOENT when absent, -EINVAL when of the wrong type. */
int mp_get_str(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len);
int mp_get_uint(const msgpack_object *map, const char *key, uint64_t *ret);
int mp_get_bool(const msgpack_object *map, const char *key, bool *ret);
int mp_get_bin(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len);
/* malloc'd NUL-terminated copy of a str object. */
char *mp_strdup(const msgpack_object *o);

/* A packer over a growing buffer that remembers its first failed write (out of memory,
 * or past `limit`): pack the whole message, then check mp_writer_error() once. A
 * failed writer writes nothing more, so a message is either complete or refused,
 * never a truncated frame. */
typedef struct MpWriter {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        size_t limit; /* 0: no limit but memory */
        int error;    /* 0, -ENOMEM (allocation failed) or -E2BIG (past limit) */
} MpWriter;

void mp_writer_init(MpWriter *w, size_t limit);
/* Empty it (and forget an error) to pack a new message. */
void mp_writer_reset(MpWriter *w);
static inline int mp_writer_error(const MpWriter *w) {
        return w->error;
}
void mp_writer_done(MpWriter *w);

/* Packing shorthands. */
void mp_pack_cstr(msgpack_packer *pk, const char *s);
void mp_pack_strn(msgpack_packer *pk, const char *s, size_t n);
void mp_pack_kv_str(msgpack_packer *pk, const char *key, const char *val); /* val NULL -> nil */
void mp_pack_kv_uint(msgpack_packer *pk, const char *key, uint64_t v);
void mp_pack_kv_int(msgpack_packer *pk, const char *key, int64_t v);
void mp_pack_kv_bool(msgpack_packer *pk, const char *key, bool v);
void mp_pack_kv_nil(msgpack_packer *pk, const char *key);
/* key and v when has, else key and nil (a value that may be unknown). */
void mp_pack_kv_uint_or_nil(msgpack_packer *pk, const char *key, bool has, uint64_t v);
void mp_pack_kv_int_or_nil(msgpack_packer *pk, const char *key, bool has, int64_t v);
