/* SPDX-License-Identifier: MIT */
/* The wire protocol: msgpack maps in 4-byte big-endian length frames. The only place
 * that knows field names. Reference: docs/protocol.md. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/plan.h"
#include "policy/policy.h"
#include "supervisor/outcome.h"

#define PROTO_VERSION 1
#define PROTO_MAX_SOURCE_IDS 4
#define PROTO_SOURCE_ID_MAX 64
#define PROTO_SUMMARY_MAX_CHARS 500
#define PROTO_INVOCATION_ID_LEN 32 /* hex characters */
#define PROTO_MEDIA_TYPE_MAX 127
#define PROTO_META_MAX_CHARS 2048
#define PROTO_MAX_DEPTH 8 /* requests nest at most: map > array > ... */

/* Whatever the protocol admits, a worker's plan can carry. */
_Static_assert(PROTO_MAX_SOURCE_IDS <= PLAN_MAX_INPUTS, "sourceIds fit a plan's inputs");
_Static_assert(PROTO_SOURCE_ID_MAX <= PLAN_INPUT_ID_MAX, "a source ID fits a plan input's id");

typedef enum ProtoOp {
        PROTO_OP_HELLO,
        PROTO_OP_EXECUTE,
        PROTO_OP_CANCEL,
        PROTO_OP_STATUS,
        PROTO_OP_INVOCATION_OPEN,
        PROTO_OP_INVOCATION_CLOSE,
        PROTO_OP_SOURCE_PUT,
        _PROTO_OP_MAX,
} ProtoOp;

typedef struct ProtoBytes {
        const char *ptr; /* points into the frame buffer */
        size_t len;
} ProtoBytes;

typedef struct ProtoRequest {
        ProtoOp op;
        uint64_t id;
        /* execute */
        ProtoBytes summary;
        ProtoBytes code;
        uint64_t code_chars;
        ProtoBytes source_ids[PROTO_MAX_SOURCE_IDS];
        size_t n_source_ids;
        ProtoBytes invocation; /* execute, invocation.close, source.put; len 0 = absent */
        /* cancel */
        uint64_t call_id;
        /* source.put */
        ProtoBytes source_id;
        bool attachment; /* kind: "attachment" vs "read_source" */
        ProtoBytes text;
        ProtoBytes original;
        ProtoBytes media_type;
        ProtoBytes file_name;
        ProtoBytes origin; /* read_source: uri or title, metadata only */

        msgpack_unpacked unpacked; /* owns the object tree */
} ProtoRequest;

typedef struct ProtoError {
        Outcome code;
        bool has_id;
        uint64_t id;
        char message[256];
} ProtoError;

/* Decode and validate one frame body. On failure fills err (with the request id when
 * one could be read) and returns -EINVAL. The buffer must outlive *ret. */
int proto_decode_request(const void *buf, size_t len, const Policy *p, ProtoRequest *ret, ProtoError *err);
void proto_request_done(ProtoRequest *r);

bool proto_source_id_valid(const char *s, size_t len);
const char *proto_op_to_string(ProtoOp op);

/* Encoding helpers: every message is built in an sbuffer and framed by the server. */
void proto_pack_error(msgpack_sbuffer *sb, bool has_id, uint64_t id, Outcome code, const char *message);
/* Begin a reply map: {"id", "type": "reply", "op": op, + n_extra more pairs}. */
void proto_pack_reply_head(msgpack_packer *pk, uint64_t id, ProtoOp op, size_t n_extra);
