/* SPDX-License-Identifier: MIT */
/* Request decoding and validation (protocol.h): one length-delimited frame in, a
 * ProtoRequest out, or an invalid_input error naming the first fault; which fields each
 * op accepts, and the bounds of each field. */
#include "supervisor/protocol.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

/* Which fields each op accepts besides "op" and "id". Anything else is invalid_input:
 * packages, paths, network settings, environment... are simply not in these lists. */
static const char *const allowed_fields[_PROTO_OP_MAX][9] = {
        [PROTO_OP_HELLO] = { NULL },
        [PROTO_OP_EXECUTE] = { "summary", "code", "sourceIds", "invocation", "keepOutputs", NULL },
        [PROTO_OP_CANCEL] = { "callId", NULL },
        [PROTO_OP_STATUS] = { NULL },
        [PROTO_OP_INVOCATION_OPEN] = { NULL },
        [PROTO_OP_INVOCATION_CLOSE] = { "invocation", NULL },
        [PROTO_OP_SOURCE_PUT] = { "invocation", "sourceId", "kind", "text", "original", "mediaType", "fileName",
                                  "origin", NULL },
        [PROTO_OP_DESCRIBE] = { NULL },
};

/* The refusal's outcome and its message (printf-style, cut to fit) into *err; -EINVAL. */
#define fail(err, outcome, ...)                                                                                        \
        ((err)->code = (outcome), set_why((err)->message, sizeof((err)->message), __VA_ARGS__), -EINVAL)

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

/* A name keepOutputs may give: what out-<call>-<name> needs to be a source ID (the
 * characters of one; the length is checked when the call number is known). */
static bool keep_name_valid(const char *s, size_t len) {
        return len > 0 && len <= PROTO_SOURCE_ID_MAX - strlen(PROTO_KEPT_PREFIX "1-") && proto_source_id_valid(s, len);
}

/* The strings of arr (an array whose size the caller bounded by out's) into out, in
 * order: each one valid() (else "FIELD[i] is not WHAT"), none repeating an earlier one. */
static int decode_names(const msgpack_object *arr, const char *field, bool (*valid)(const char *s, size_t len),
                        const char *what, ProtoBytes *out, ProtoError *err) {
        for (uint32_t i = 0; i < arr->via.array.size; i++) {
                const msgpack_object *o = &arr->via.array.ptr[i];
                if (o->type != MSGPACK_OBJECT_STR || !valid(o->via.str.ptr, o->via.str.size))
                        return fail(err, OUTCOME_INVALID_INPUT, "%s[%u] is not %s", field, i, what);
                for (uint32_t j = 0; j < i; j++)
                        if (out[j].len == o->via.str.size && memcmp(out[j].ptr, o->via.str.ptr, o->via.str.size) == 0)
                                return fail(err, OUTCOME_INVALID_INPUT, "%s[%u] repeats %s[%u]", field, i, field, j);
                out[i] = (ProtoBytes){ o->via.str.ptr, o->via.str.size };
        }
        return 0;
}

/* keepOutputs: "all", or an array of at most PROTO_MAX_KEEP_OUTPUTS unique names; only
 * with an invocation, whose registry keeps them. */
static int decode_keep(const msgpack_object *root, ProtoRequest *r, ProtoError *err) {
        const msgpack_object *keep = mp_map_get(root, "keepOutputs");
        char what[128];
        int k;

        if (!keep)
                return 0;
        if (r->invocation.len == 0)
                return fail(err, OUTCOME_INVALID_INPUT,
                            "field \"keepOutputs\" needs an \"invocation\" (kept outputs are its sources)");
        r->keep_requested = true;
        if (mp_str_eq(keep, "all")) {
                r->keep_all = true;
                return 0;
        }
        if (keep->type != MSGPACK_OBJECT_ARRAY)
                return fail(err, OUTCOME_INVALID_INPUT,
                            "field \"keepOutputs\" must be \"all\" or an array of artifact names");
        if (keep->via.array.size > PROTO_MAX_KEEP_OUTPUTS)
                return fail(err, OUTCOME_INVALID_INPUT, "keepOutputs has %u names, at most %d are allowed",
                            keep->via.array.size, PROTO_MAX_KEEP_OUTPUTS);
        snprintf(what, sizeof what, "a name that can be kept (1-%zu of A-Z a-z 0-9 _ - ., not starting with . or -)",
                 PROTO_SOURCE_ID_MAX - strlen(PROTO_KEPT_PREFIX "1-"));
        if ((k = decode_names(keep, "keepOutputs", keep_name_valid, what, r->keep, err)) < 0)
                return k;
        r->n_keep = keep->via.array.size;
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
        if ((k = decode_names(ids, "sourceIds", proto_source_id_valid,
                              "a valid source ID (1-64 of A-Z a-z 0-9 _ - ., not starting with . or -)", r->source_ids,
                              err)) < 0)
                return k;
        r->n_source_ids = ids->via.array.size;
        return decode_keep(root, r, err);
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
        if (r->source_id.len >= strlen(PROTO_KEPT_PREFIX) &&
            memcmp(r->source_id.ptr, PROTO_KEPT_PREFIX, strlen(PROTO_KEPT_PREFIX)) == 0)
                return fail(err, OUTCOME_INVALID_INPUT,
                            "sourceId starts with \"" PROTO_KEPT_PREFIX "\", which is reserved for kept outputs");
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

/* One well-formed msgpack map and nothing after it. */
static int decode_frame(const void *buf, size_t len, ProtoRequest *r, ProtoError *err) {
        size_t off = 0;

        if (mp_validate(buf, len, PROTO_MAX_DEPTH, NULL) < 0 ||
            msgpack_unpack_next(&r->unpacked, buf, len, &off) != MSGPACK_UNPACK_SUCCESS)
                return fail(err, OUTCOME_INVALID_INPUT,
                            "frame is not one well-formed msgpack object (nested at most %d deep)", PROTO_MAX_DEPTH);
        if (off != len)
                return fail(err, OUTCOME_INVALID_INPUT, "frame has %zu trailing bytes after the msgpack map",
                            len - off);
        if (r->unpacked.data.type != MSGPACK_OBJECT_MAP)
                return fail(err, OUTCOME_INVALID_INPUT, "request must be a msgpack map");
        return 0;
}

/* Keys must be unique strings. */
static int check_keys(const msgpack_object *root, ProtoError *err) {
        for (uint32_t i = 0; i < root->via.map.size; i++) {
                const msgpack_object *key = &root->via.map.ptr[i].key;
                if (key->type != MSGPACK_OBJECT_STR)
                        return fail(err, OUTCOME_INVALID_INPUT, "request keys must be strings");
                for (uint32_t j = 0; j < i; j++) {
                        const msgpack_object *o = &root->via.map.ptr[j].key;
                        /* An empty string's ptr may be NULL: memcmp must not see it. */
                        if (o->via.str.size == key->via.str.size &&
                            (key->via.str.size == 0 ||
                             memcmp(o->via.str.ptr, key->via.str.ptr, key->via.str.size) == 0))
                                return fail(err, OUTCOME_INVALID_INPUT, "duplicate field \"%.*s\"",
                                            (int) MIN(key->via.str.size, 64u), key->via.str.ptr);
                }
        }
        return 0;
}

static int decode_op(const msgpack_object *root, ProtoOp *ret, ProtoError *err) {
        const msgpack_object *op = mp_map_get(root, "op");

        if (!mp_is_str(op))
                return fail(err, OUTCOME_INVALID_INPUT, "field \"op\" must be a string");
        for (int i = 0; i < _PROTO_OP_MAX; i++)
                if (mp_str_eq(op, proto_op_to_string((ProtoOp) i))) {
                        *ret = (ProtoOp) i;
                        return 0;
                }
        return fail(err, OUTCOME_INVALID_INPUT, "unknown op \"%.*s\"", (int) MIN(op->via.str.size, 64u),
                    op->via.str.ptr);
}

/* Every field is one the op accepts. */
static int check_fields(const msgpack_object *root, ProtoOp op, ProtoError *err) {
        for (uint32_t i = 0; i < root->via.map.size; i++) {
                const msgpack_object *key = &root->via.map.ptr[i].key;
                bool ok = mp_str_eq(key, "op") || mp_str_eq(key, "id");
                for (size_t j = 0; !ok && allowed_fields[op][j]; j++)
                        ok = mp_str_eq(key, allowed_fields[op][j]);
                if (!ok)
                        return fail(err, OUTCOME_INVALID_INPUT, "field \"%.*s\" is not accepted by %s",
                                    (int) MIN(key->via.str.size, 64u), key->via.str.ptr, proto_op_to_string(op));
        }
        return 0;
}

static int decode_cancel(const msgpack_object *root, ProtoRequest *r, ProtoError *err) {
        const msgpack_object *c = mp_map_get(root, "callId");

        if (!mp_is_uint(c))
                return fail(err, OUTCOME_INVALID_INPUT, "field \"callId\" must be an unsigned integer");
        r->call_id = c->via.u64;
        return 0;
}

/* The op's own fields. */
static int decode_body(const msgpack_object *root, const Policy *p, ProtoRequest *r, ProtoError *err) {
        switch (r->op) {
        case PROTO_OP_EXECUTE:
                return decode_execute(root, p, r, err);
        case PROTO_OP_CANCEL:
                return decode_cancel(root, r, err);
        case PROTO_OP_INVOCATION_CLOSE:
                return decode_invocation(root, true, r, err);
        case PROTO_OP_SOURCE_PUT:
                return decode_source_put(root, p, r, err);
        default:
                return 0;
        }
}

int proto_decode_request(const void *buf, size_t len, const Policy *p, ProtoRequest *ret, ProtoError *err) {
        ProtoRequest r = {};
        const msgpack_object *root, *id;
        int k;

        *err = (ProtoError){};
        msgpack_unpacked_init(&r.unpacked);
        k = decode_frame(buf, len, &r, err);
        if (k < 0)
                goto out;
        root = &r.unpacked.data;
        id = mp_map_get(root, "id");
        if (!mp_is_uint(id)) {
                k = fail(err, OUTCOME_INVALID_INPUT, "field \"id\" must be an unsigned integer");
                goto out;
        }
        r.id = id->via.u64;
        err->has_id = true;
        err->id = r.id;
        if ((k = check_keys(root, err)) < 0 || (k = decode_op(root, &r.op, err)) < 0 ||
            (k = check_fields(root, r.op, err)) < 0)
                goto out;
        k = decode_body(root, p, &r, err);
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
