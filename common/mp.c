/* SPDX-License-Identifier: MIT */
/* msgpack bytes checked before msgpack-c reads them (mp_validate: bounded depth and
 * sizes), typed accessors over map fields and packing shorthands (mp.h). */
#include "common/mp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int be(const uint8_t *p, size_t n, size_t avail, uint64_t *ret) {
        uint64_t v = 0;
        if (avail < n)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                v = v << 8 | p[i];
        *ret = v;
        return 0;
}

/* The formats 0xc0-0xdf: what follows the type byte. MP_SCALAR: `size` bytes of data;
 * MP_BYTES and MP_EXT: a `size`-byte length, then that many bytes (and an ext's type
 * byte); MP_ARRAY and MP_MAP: a `size`-byte element count. In order: nil, (0xc1 is never
 * used), bool, bin, ext, float, uint, int, fixext, str, array, map. */
enum { MP_INVALID, MP_SCALAR, MP_BYTES, MP_EXT, MP_ARRAY, MP_MAP };
static const struct {
        uint8_t kind, size;
} mp_formats[0x20] = {
        [0x00] = { MP_SCALAR, 0 }, [0x02] = { MP_SCALAR, 0 }, [0x03] = { MP_SCALAR, 0 }, [0x04] = { MP_BYTES, 1 },
        [0x05] = { MP_BYTES, 2 },  [0x06] = { MP_BYTES, 4 },  [0x07] = { MP_EXT, 1 },    [0x08] = { MP_EXT, 2 },
        [0x09] = { MP_EXT, 4 },    [0x0a] = { MP_SCALAR, 4 }, [0x0b] = { MP_SCALAR, 8 }, [0x0c] = { MP_SCALAR, 1 },
        [0x0d] = { MP_SCALAR, 2 }, [0x0e] = { MP_SCALAR, 4 }, [0x0f] = { MP_SCALAR, 8 }, [0x10] = { MP_SCALAR, 1 },
        [0x11] = { MP_SCALAR, 2 }, [0x12] = { MP_SCALAR, 4 }, [0x13] = { MP_SCALAR, 8 }, [0x14] = { MP_SCALAR, 2 },
        [0x15] = { MP_SCALAR, 3 }, [0x16] = { MP_SCALAR, 5 }, [0x17] = { MP_SCALAR, 9 }, [0x18] = { MP_SCALAR, 17 },
        [0x19] = { MP_BYTES, 1 },  [0x1a] = { MP_BYTES, 2 },  [0x1b] = { MP_BYTES, 4 },  [0x1c] = { MP_ARRAY, 2 },
        [0x1d] = { MP_ARRAY, 4 },  [0x1e] = { MP_MAP, 2 },    [0x1f] = { MP_MAP, 4 },
};

/* One object's header at *off: moves *off past it and its scalar or byte data; a
 * container's element count (a map's keys and values) in *ret_count, -1 for others. */
static int mp_header(const uint8_t *p, size_t len, size_t *off, int64_t *ret_count) {
        uint64_t n = 0, skip = 0;
        uint8_t c;

        *ret_count = -1;
        if (*off >= len)
                return -EBADMSG;
        c = p[(*off)++];
        if (c <= 0x7f || c >= 0xe0)
                return 0; /* fixint */
        if ((c & 0xe0) == 0xa0)
                skip = c & 0x1f; /* fixstr */
        else if ((c & 0xf0) == 0x90)
                *ret_count = c & 0x0f; /* fixarray */
        else if ((c & 0xf0) == 0x80)
                *ret_count = (c & 0x0f) * 2; /* fixmap */
        else {
                unsigned kind = mp_formats[c - 0xc0].kind, size = mp_formats[c - 0xc0].size;
                if (kind == MP_INVALID)
                        return -EBADMSG;
                if (kind == MP_SCALAR)
                        skip = size;
                else if (be(p + *off, size, len - *off, &n) < 0)
                        return -EBADMSG;
                else {
                        *off += size;
                        if (kind == MP_BYTES || kind == MP_EXT)
                                skip = kind == MP_EXT ? n + 1 : n;
                        else /* counts above the bytes left are refused by the caller */
                                *ret_count = (int64_t) (kind == MP_MAP ? n * 2 : n);
                }
        }
        if (skip > len - *off)
                return -EBADMSG;
        *off += skip;
        return 0;
}

int mp_validate(const void *buf, size_t len, unsigned max_depth, size_t *ret_end) {
        const uint8_t *p = buf;
        size_t off = 0;
        /* Pending element counts per open container; a map counts keys and values. */
        uint64_t stack[64];
        unsigned depth = 0;

        if (max_depth > 64)
                max_depth = 64;
        do {
                int64_t count;

                if (mp_header(p, len, &off, &count) < 0)
                        return -EBADMSG;
                /* This object fills one slot of the enclosing container. */
                if (depth > 0)
                        stack[depth - 1]--;
                if (count > 0) {
                        /* Every element takes a byte at least. */
                        if ((uint64_t) count > len - off || depth >= max_depth)
                                return -EBADMSG;
                        stack[depth++] = (uint64_t) count;
                }
                while (depth > 0 && stack[depth - 1] == 0)
                        depth--;
        } while (depth > 0);

        if (ret_end)
                *ret_end = off;
        return 0;
}

bool mp_is_str(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_STR;
}

bool mp_is_uint(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
}

bool mp_str_eq(const msgpack_object *o, const char *s) {
        size_t n = strlen(s);
        return mp_is_str(o) && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

const msgpack_object *mp_map_get(const msgpack_object *obj, const char *key) {
        if (!obj || obj->type != MSGPACK_OBJECT_MAP)
                return NULL;
        for (uint32_t i = 0; i < obj->via.map.size; i++)
                if (mp_str_eq(&obj->via.map.ptr[i].key, key))
                        return &obj->via.map.ptr[i].val;
        return NULL;
}

int mp_get_str(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len) {
        const msgpack_object *o = mp_map_get(map, key);
        if (!o)
                return -ENOENT;
        if (o->type != MSGPACK_OBJECT_STR)
                return -EINVAL;
        *ret = o->via.str.ptr;
        *ret_len = o->via.str.size;
        return 0;
}

int mp_get_bin(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len) {
        const msgpack_object *o = mp_map_get(map, key);
        if (!o)
                return -ENOENT;
        if (o->type != MSGPACK_OBJECT_BIN)
                return -EINVAL;
        *ret = o->via.bin.ptr;
        *ret_len = o->via.bin.size;
        return 0;
}

int mp_get_uint(const msgpack_object *map, const char *key, uint64_t *ret) {
        const msgpack_object *o = mp_map_get(map, key);
        if (!o)
                return -ENOENT;
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return -EINVAL;
        *ret = o->via.u64;
        return 0;
}

int mp_get_bool(const msgpack_object *map, const char *key, bool *ret) {
        const msgpack_object *o = mp_map_get(map, key);
        if (!o)
                return -ENOENT;
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
                return -EINVAL;
        *ret = o->via.boolean;
        return 0;
}

char *mp_strdup(const msgpack_object *o) {
        if (!mp_is_str(o))
                return NULL;
        return strndup(o->via.str.ptr, o->via.str.size);
}

void mp_pack_strn(msgpack_packer *pk, const char *s, size_t n) {
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
}

static int mp_writer_write(void *data, const char *buf, size_t len) {
        MpWriter *w = data;

        if (w->error)
                return -1;
        if (w->limit > 0 && (len > w->limit || w->sb.size > w->limit - len)) {
                w->error = -E2BIG;
                return -1;
        }
        if (msgpack_sbuffer_write(&w->sb, buf, len) != 0) {
                w->error = -ENOMEM;
                return -1;
        }
        return 0;
}

void mp_writer_init(MpWriter *w, size_t limit) {
        msgpack_sbuffer_init(&w->sb);
        msgpack_packer_init(&w->pk, w, mp_writer_write);
        w->limit = limit;
        w->error = 0;
}

void mp_writer_reset(MpWriter *w) {
        msgpack_sbuffer_clear(&w->sb);
        w->error = 0;
}

void mp_writer_done(MpWriter *w) {
        msgpack_sbuffer_destroy(&w->sb);
        w->sb = (msgpack_sbuffer){};
}

void mp_pack_cstr(msgpack_packer *pk, const char *s) {
        mp_pack_strn(pk, s, strlen(s));
}

void mp_pack_kv_str(msgpack_packer *pk, const char *key, const char *val) {
        mp_pack_cstr(pk, key);
        if (val)
                mp_pack_cstr(pk, val);
        else
                msgpack_pack_nil(pk);
}

void mp_pack_kv_uint(msgpack_packer *pk, const char *key, uint64_t v) {
        mp_pack_cstr(pk, key);
        msgpack_pack_uint64(pk, v);
}

void mp_pack_kv_int(msgpack_packer *pk, const char *key, int64_t v) {
        mp_pack_cstr(pk, key);
        msgpack_pack_int64(pk, v);
}

void mp_pack_kv_bool(msgpack_packer *pk, const char *key, bool v) {
        mp_pack_cstr(pk, key);
        if (v)
                msgpack_pack_true(pk);
        else
                msgpack_pack_false(pk);
}

void mp_pack_kv_nil(msgpack_packer *pk, const char *key) {
        mp_pack_cstr(pk, key);
        msgpack_pack_nil(pk);
}

void mp_pack_kv_uint_or_nil(msgpack_packer *pk, const char *key, bool has, uint64_t v) {
        mp_pack_cstr(pk, key);
        if (has)
                msgpack_pack_uint64(pk, v);
        else
                msgpack_pack_nil(pk);
}

void mp_pack_kv_int_or_nil(msgpack_packer *pk, const char *key, bool has, int64_t v) {
        mp_pack_cstr(pk, key);
        if (has)
                msgpack_pack_int64(pk, v);
        else
                msgpack_pack_nil(pk);
}
