/* SPDX-License-Identifier: MIT */
#include "supervisor/protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

static const char *const outcome_names[_OUTCOME_MAX] = {
        [OUTCOME_OK] = "ok",
        [OUTCOME_PYTHON_EXCEPTION] = "python_exception",
        [OUTCOME_TIMEOUT] = "timeout",
        [OUTCOME_CANCELLED] = "cancelled",
        [OUTCOME_INVALID_INPUT] = "invalid_input",
        [OUTCOME_UNAVAILABLE_SOURCE] = "unavailable_source",
        [OUTCOME_QUOTA_EXHAUSTED] = "quota_exhausted",
        [OUTCOME_RESOURCE_LIMIT] = "resource_limit",
        [OUTCOME_WORKER_ERROR] = "worker_error",
        [OUTCOME_OVERLOADED] = "overloaded",
        [OUTCOME_NOT_FOUND] = "not_found",
        [OUTCOME_PERMISSION_DENIED] = "permission_denied",
};

const char *outcome_to_string(Outcome o) {
        if (o < 0 || o >= _OUTCOME_MAX)
                return "worker_error";
        return outcome_names[o];
}

static const char *const op_names[_PROTO_OP_MAX] = {
        [PROTO_OP_HELLO] = "hello",
        [PROTO_OP_EXECUTE] = "execute",
        [PROTO_OP_CANCEL] = "cancel",
        [PROTO_OP_STATUS] = "status",
        [PROTO_OP_INVOCATION_OPEN] = "invocation.open",
        [PROTO_OP_INVOCATION_CLOSE] = "invocation.close",
        [PROTO_OP_SOURCE_PUT] = "source.put",
};

const char *proto_op_to_string(ProtoOp op) {
        if (op < 0 || op >= _PROTO_OP_MAX)
                return "unknown";
        return op_names[op];
}

/* Which fields each op accepts besides "op" and "id". Anything else is invalid_input:
 * packages, paths, network settings, environment... are simply not in these lists. */
static const char *const allowed_fields[_PROTO_OP_MAX][9] = {
        [PROTO_OP_HELLO] = { NULL },
        [PROTO_OP_EXECUTE] = { "summary", "code", "sourceIds", "invocation", NULL },
        [PROTO_OP_CANCEL] = { "callId", NULL },
        [PROTO_OP_STATUS] = { NULL },
        [PROTO_OP_INVOCATION_OPEN] = { NULL },
        [PROTO_OP_INVOCATION_CLOSE] = { "invocation", NULL },
        [PROTO_OP_SOURCE_PUT] = { "invocation", "sourceId", "kind", "text", "original", "mediaType", "fileName",
                                  "origin", NULL },
};

static int fail(ProtoError *err, Outcome code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(ProtoError *err, Outcome code, const char *fmt, ...) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

bool proto_source_id_valid(const char *s, size_t len) {
        if (len == 0 || len > PROTO_SOURCE_ID_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.'))
                        return false;
        }
        return true;
}

/* A required or optional UTF-8 string field with a character bound. */
static int get_text(const msgpack_object *root, const char *key, bool required, uint64_t max_chars, ProtoBytes *ret,
                    uint64_t *ret_chars, ProtoError *err) {
        const msgpack_object *o = mp_map_get(root, key);
        uint64_t chars;

        if (!o) {
                if (required)
                        return fail(err, OUTCOME_INVALID_INPUT, "missing field \"%s\"", key);
                *ret = (ProtoBytes){};
                return 0;
        }
        if (o->type != MSGPACK_OBJECT_STR)
                return fail(err, OUTCOME_INVALID_INPUT, "field \"%s\" must be a string", key);
        if (utf8_count(o->via.str.ptr, o->via.str.size, &chars) < 0)
                return fail(err, OUTCOME_INVALID_INPUT, "field \"%s\" is not valid UTF-8", key);
        if (chars > max_chars)
                return fail(err, OUTCOME_INVALID_INPUT, "field \"%s\" has %llu characters, more than %llu", key,
                            (unsigned long long) chars, (unsigned long long) max_chars);
        *ret = (ProtoBytes){ o->via.str.ptr, o->via.str.size };
        if (ret_chars)
                *ret_chars = chars;
        return 0;
}

static int get_bytes(const msgpack_object *root, const char *key, bool required, ProtoBytes *ret, ProtoError *err) {
        const msgpack_object *o = mp_map_get(root, key);

        if (!o) {
                if (required)
                        return fail(err, OUTCOME_INVALID_INPUT, "missing field \"%s\"", key);
                *ret = (ProtoBytes){};
                return 0;
        }
        if (o->type == MSGPACK_OBJECT_BIN)
                *ret = (ProtoBytes){ o->via.bin.ptr, o->via.bin.size };
        else if (o->type == MSGPACK_OBJECT_STR)
                *ret = (ProtoBytes){ o->via.str.ptr, o->via.str.size };
        else
                return fail(err, OUTCOME_INVALID_INPUT, "field \"%s\" must be bytes or a string", key);
        return 0;
}

static bool only_whitespace(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r\n\f\v", s[i]))
                        return false;
        return true;
}

static int decode_invocation(const msgpack_object *root, bool required, ProtoRequest *r, ProtoError *err) {
        int k = get_text(root, "invocation", required, PROTO_INVOCATION_ID_LEN * 2, &r->invocation, NULL, err);
        if (k < 0)
                return k;
        if (r->invocation.ptr && r->invocation.len == 0)
                return fail(err, OUTCOME_INVALID_INPUT, "field \"invocation\" is empty");
        return 0;
}

static int decode_execute(const msgpack_object *root, const Policy *p, ProtoRequest *r, ProtoError *err) {
        const msgpack_object *ids;
        int k;

        if ((k = get_text(root, "summary", true, PROTO_SUMMARY_MAX_CHARS, &r->summary, NULL, err)) < 0)
                return k;
        if ((k = get_text(root, "code", true, UINT64_MAX, &r->code, &r->code_chars, err)) < 0)
                return k;
        if (r->code_chars > p->max_code_characters)
                return fail(err, OUTCOME_INVALID_INPUT, "code has %llu characters, more than maxCodeCharacters (%u)",
                            (unsigned long long) r->code_chars, p->max_code_characters);
        if (only_whitespace(r->code.ptr, r->code.len))
                return fail(err, OUTCOME_INVALID_INPUT, "code is empty");
        if ((k = decode_invocation(root, false, r, err)) < 0)
                return k;

        ids = mp_map_get(root, "sourceIds");
        if (!ids)
                return fail(err, OUTCOME_INVALID_INPUT, "missing field \"sourceIds\" (use an empty array)");
        if (ids->type != MSGPACK_OBJECT_ARRAY)
                return fail(err, OUTCOME_INVALID_INPUT, "field \"sourceIds\" must be an array");
        if (ids->via.array.size > PROTO_MAX_SOURCE_IDS)
                return fail(err, OUTCOME_INVALID_INPUT, "%u source IDs, at most %d are allowed", ids->via.array.size,
                            PROTO_MAX_SOURCE_IDS);
        for (uint32_t i = 0; i < ids->via.array.size; i++) {
                const msgpack_object *o = &ids->via.array.ptr[i];
                if (o->type != MSGPACK_OBJECT_STR || !proto_source_id_valid(o->via.str.ptr, o->via.str.size))
                        return fail(err, OUTCOME_INVALID_INPUT,
                                    "sourceIds[%u] is not a valid source ID (1-64 of A-Z a-z 0-9 _ - ., "
                                    "not starting with . or -)",
                                    i);
                for (uint32_t j = 0; j < i; j++)
                        if (r->source_ids[j].len == o->via.str.size &&
                            memcmp(r->source_ids[j].ptr, o->via.str.ptr, o->via.str.size) == 0)
                                return fail(err, OUTCOME_INVALID_INPUT, "sourceIds[%u] repeats sourceIds[%u]", i, j);
                r->source_ids[i] = (ProtoBytes){ o->via.str.ptr, o->via.str.size };
        }
        r->n_source_ids = ids->via.array.size;
        return 0;
}

static int decode_source_put(const msgpack_object *root, const Policy *p, ProtoRequest *r, ProtoError *err) {
        const msgpack_object *kind;
        int k;

        if ((k = decode_invocation(root, true, r, err)) < 0)
                return k;
        if ((k = get_text(root, "sourceId", true, PROTO_SOURCE_ID_MAX, &r->source_id, NULL, err)) < 0)
                return k;
        if (!proto_source_id_valid(r->source_id.ptr, r->source_id.len))
                return fail(err, OUTCOME_INVALID_INPUT,
                            "sourceId is not a valid source ID (1-64 of A-Z a-z 0-9 _ - ., not starting with . or -)");
        kind = mp_map_get(root, "kind");
        if (mp_str_eq(kind, "attachment"))
                r->attachment = true;
        else if (mp_str_eq(kind, "read_source"))
                r->attachment = false;
        else
                return fail(err, OUTCOME_INVALID_INPUT, "field \"kind\" must be \"attachment\" or \"read_source\"");
        /* The canonical text must be text: valid UTF-8. */
        if ((k = get_text(root, "text", true, UINT64_MAX, &r->text, NULL, err)) < 0)
                return k;
        if (r->attachment) {
                if ((k = get_bytes(root, "original", true, &r->original, err)) < 0 ||
                    (k = get_text(root, "mediaType", true, PROTO_MEDIA_TYPE_MAX, &r->media_type, NULL, err)) < 0 ||
                    (k = get_text(root, "fileName", true, 255, &r->file_name, NULL, err)) < 0)
                        return k;
                if (mp_map_get(root, "origin"))
                        return fail(err, OUTCOME_INVALID_INPUT, "field \"origin\" is for read_source only");
        } else {
                if (mp_map_get(root, "original") || mp_map_get(root, "mediaType") || mp_map_get(root, "fileName"))
                        return fail(err, OUTCOME_INVALID_INPUT,
                                    "fields \"original\", \"mediaType\", \"fileName\" are for attachments only");
                if ((k = get_text(root, "origin", false, PROTO_META_MAX_CHARS, &r->origin, NULL, err)) < 0)
                        return k;
        }
        if ((uint64_t) r->text.len + r->original.len > p->max_source_bytes)
                return fail(err, OUTCOME_INVALID_INPUT, "source is %zu bytes, more than maxSourceBytes (%llu)",
                            r->text.len + r->original.len, (unsigned long long) p->max_source_bytes);
        return 0;
}

int proto_decode_request(const void *buf, size_t len, const Policy *p, ProtoRequest *ret, ProtoError *err) {
        ProtoRequest r = {};
        const msgpack_object *root, *op, *id;
        size_t off = 0;
        int k;

        *err = (ProtoError){};
        msgpack_unpacked_init(&r.unpacked);
        if (mp_validate(buf, len, PROTO_MAX_DEPTH, NULL) < 0 ||
            msgpack_unpack_next(&r.unpacked, buf, len, &off) != MSGPACK_UNPACK_SUCCESS) {
                k = fail(err, OUTCOME_INVALID_INPUT,
                         "frame is not one well-formed msgpack object (nested at most %d deep)", PROTO_MAX_DEPTH);
                goto out;
        }
        if (off != len) {
                k = fail(err, OUTCOME_INVALID_INPUT, "frame has %zu trailing bytes after the msgpack map", len - off);
                goto out;
        }
        root = &r.unpacked.data;
        if (root->type != MSGPACK_OBJECT_MAP) {
                k = fail(err, OUTCOME_INVALID_INPUT, "request must be a msgpack map");
                goto out;
        }
        id = mp_map_get(root, "id");
        if (!mp_is_uint(id)) {
                k = fail(err, OUTCOME_INVALID_INPUT, "field \"id\" must be an unsigned integer");
                goto out;
        }
        r.id = id->via.u64;
        err->has_id = true;
        err->id = r.id;

        /* Keys must be unique strings. */
        for (uint32_t i = 0; i < root->via.map.size; i++) {
                const msgpack_object *key = &root->via.map.ptr[i].key;
                if (key->type != MSGPACK_OBJECT_STR) {
                        k = fail(err, OUTCOME_INVALID_INPUT, "request keys must be strings");
                        goto out;
                }
                for (uint32_t j = 0; j < i; j++) {
                        const msgpack_object *o = &root->via.map.ptr[j].key;
                        if (o->via.str.size == key->via.str.size &&
                            memcmp(o->via.str.ptr, key->via.str.ptr, key->via.str.size) == 0) {
                                k = fail(err, OUTCOME_INVALID_INPUT, "duplicate field \"%.*s\"",
                                         (int) MIN(key->via.str.size, 64u), key->via.str.ptr);
                                goto out;
                        }
                }
        }

        op = mp_map_get(root, "op");
        if (!mp_is_str(op)) {
                k = fail(err, OUTCOME_INVALID_INPUT, "field \"op\" must be a string");
                goto out;
        }
        r.op = _PROTO_OP_MAX;
        for (int i = 0; i < _PROTO_OP_MAX; i++)
                if (mp_str_eq(op, op_names[i]))
                        r.op = (ProtoOp) i;
        if (r.op == _PROTO_OP_MAX) {
                k = fail(err, OUTCOME_INVALID_INPUT, "unknown op \"%.*s\"", (int) MIN(op->via.str.size, 64u),
                         op->via.str.ptr);
                goto out;
        }

        for (uint32_t i = 0; i < root->via.map.size; i++) {
                const msgpack_object *key = &root->via.map.ptr[i].key;
                bool ok = mp_str_eq(key, "op") || mp_str_eq(key, "id");
                for (size_t j = 0; !ok && allowed_fields[r.op][j]; j++)
                        ok = mp_str_eq(key, allowed_fields[r.op][j]);
                if (!ok) {
                        k = fail(err, OUTCOME_INVALID_INPUT, "field \"%.*s\" is not accepted by %s",
                                 (int) MIN(key->via.str.size, 64u), key->via.str.ptr, op_names[r.op]);
                        goto out;
                }
        }

        switch (r.op) {
        case PROTO_OP_EXECUTE:
                k = decode_execute(root, p, &r, err);
                break;
        case PROTO_OP_CANCEL: {
                const msgpack_object *c = mp_map_get(root, "callId");
                if (!mp_is_uint(c))
                        k = fail(err, OUTCOME_INVALID_INPUT, "field \"callId\" must be an unsigned integer");
                else {
                        r.call_id = c->via.u64;
                        k = 0;
                }
                break;
        }
        case PROTO_OP_INVOCATION_CLOSE:
                k = decode_invocation(root, true, &r, err);
                break;
        case PROTO_OP_SOURCE_PUT:
                k = decode_source_put(root, p, &r, err);
                break;
        default:
                k = 0;
        }
out:
        if (k < 0) {
                msgpack_unpacked_destroy(&r.unpacked);
                return k;
        }
        *ret = r;
        return 0;
}

void proto_request_done(ProtoRequest *r) {
        msgpack_unpacked_destroy(&r->unpacked);
}

void proto_pack_error(msgpack_sbuffer *sb, bool has_id, uint64_t id, Outcome code, const char *message) {
        msgpack_packer pk;

        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 4);
        mp_pack_cstr(&pk, "id");
        if (has_id)
                msgpack_pack_uint64(&pk, id);
        else
                msgpack_pack_nil(&pk);
        mp_pack_kv_str(&pk, "type", "error");
        mp_pack_kv_str(&pk, "code", outcome_to_string(code));
        mp_pack_kv_str(&pk, "message", message);
}

void proto_pack_reply_head(msgpack_packer *pk, uint64_t id, ProtoOp op, size_t n_extra) {
        msgpack_pack_map(pk, 3 + n_extra);
        mp_pack_kv_uint(pk, "id", id);
        mp_pack_kv_str(pk, "type", "reply");
        mp_pack_kv_str(pk, "op", proto_op_to_string(op));
}
