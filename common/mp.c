/* SPDX-License-Identifier: MIT */
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

int mp_validate(const void *buf, size_t len, unsigned max_depth, size_t *ret_end) {
        const uint8_t *p = buf;
        size_t off = 0;
        /* Pending element counts per open container; a map counts keys and values. */
        uint64_t stack[64];
        unsigned depth = 0;

        if (max_depth > 64)
                max_depth = 64;
        do {
                uint64_t n = 0, skip = 0, count = 0;
                bool container = false;
                uint8_t c;

                if (off >= len)
                        return -EBADMSG;
                c = p[off++];
                if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
                        ; /* fixint, nil, bool */
                else if ((c & 0xe0) == 0xa0)
                        skip = c & 0x1f; /* fixstr */
                else if ((c & 0xf0) == 0x90)
                        count = c & 0x0f, container = true; /* fixarray */
                else if ((c & 0xf0) == 0x80)
                        count = (uint64_t) (c & 0x0f) * 2, container = true; /* fixmap */
                else
                        switch (c) {
                        case 0xcc:
                        case 0xd0:
                                skip = 1;
                                break;
                        case 0xcd:
                        case 0xd1:
                                skip = 2;
                                break;
                        case 0xca:
                        case 0xce:
                        case 0xd2:
                                skip = 4;
                                break;
                        case 0xcb:
                        case 0xcf:
                        case 0xd3:
                                skip = 8;
                                break;
                        case 0xd4:
                                skip = 2;
                                break; /* fixext 1 */
                        case 0xd5:
                                skip = 3;
                                break;
                        case 0xd6:
                                skip = 5;
                                break;
                        case 0xd7:
                                skip = 9;
                                break;
                        case 0xd8:
                                skip = 17;
                                break;
                        case 0xc4:
                        case 0xd9: /* bin8, str8 */
                                if (be(p + off, 1, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += 1, skip = n;
                                break;
                        case 0xc5:
                        case 0xda:
                                if (be(p + off, 2, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += 2, skip = n;
                                break;
                        case 0xc6:
                        case 0xdb:
                                if (be(p + off, 4, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += 4, skip = n;
                                break;
                        case 0xc7:
                        case 0xc8:
                        case 0xc9: { /* ext 8/16/32: size, type, data */
                                size_t w = c == 0xc7 ? 1 : c == 0xc8 ? 2 : 4;
                                if (be(p + off, w, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += w, skip = n + 1;
                                break;
                        }
                        case 0xdc:
                        case 0xde:
                                if (be(p + off, 2, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += 2, count = c == 0xde ? n * 2 : n, container = true;
                                break;
                        case 0xdd:
                        case 0xdf:
                                if (be(p + off, 4, len - off, &n) < 0)
                                        return -EBADMSG;
                                off += 4, count = c == 0xdf ? n * 2 : n, container = true;
                                break;
                        default: /* 0xc1: never used */
                                return -EBADMSG;
                        }
                if (skip > len - off)
                        return -EBADMSG;
                off += skip;

                /* This object fills one slot of the enclosing container. */
                if (depth > 0)
                        stack[depth - 1]--;
                if (container) {
                        if (count > len - off)
                                return -EBADMSG;
                        if (count > 0) {
                                if (depth >= max_depth)
                                        return -EBADMSG;
                                stack[depth++] = count;
                        }
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
