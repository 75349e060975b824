/* SPDX-License-Identifier: MIT */
#include "common/mp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
