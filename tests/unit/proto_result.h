/* SPDX-License-Identifier: MIT */
/* What the unit tests that pack results (test_protocol.c, test_client_keep.c) share: the
 * fields of a plain ok result, kept outputs, and a result packed by proto_pack_result()
 * and read back. */
#pragma once

#include "unit.h"

#include "common/mp.h"
#include "supervisor/protocol.h"

/* The fields of an ok result for call 1 of request 1 under the test's own `policy`. */
#define PROTO_RESULT_OK                                                                                                \
        .request_id = 1, .call_id = 1, .outcome = OUTCOME_OK, .code_sha256 = "c", .policy = &policy,                   \
        .worker_start = "zygote"

/* A keptOutputs answer of two: kept_name kept as source kept_id (kept_bytes long, digest
 * kept_sha), and refused_name not kept, over maxSourceBytes. */
#define PROTO_KEPT_ONE_REFUSED_ONE(kept_name, kept_id, kept_bytes, kept_sha, refused_name)                             \
        {                                                                                                              \
                { .name = kept_name,                                                                                   \
                  .refused = PROTO_KEEP_KEPT,                                                                          \
                  .source_id = kept_id,                                                                                \
                  .bytes = kept_bytes,                                                                                 \
                  .sha256 = kept_sha },                                                                                \
                {                                                                                                      \
                        .name = refused_name, .refused = PROTO_KEEP_MAX_SOURCE_BYTES                                   \
                }                                                                                                      \
        }

/* r packed into w (within max_bytes) and unpacked into u; packed_done() frees both. */
static inline void pack_result(ProtoResult *r, size_t max_bytes, MpWriter *w, msgpack_unpacked *u) {
        mp_writer_init(w, 0);
        assert_int_equal(proto_pack_result(w, r, max_bytes), 0);
        msgpack_unpacked_init(u);
        assert_int_equal(msgpack_unpack_next(u, w->sb.data, w->sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
}

static inline void packed_done(MpWriter *w, msgpack_unpacked *u) {
        msgpack_unpacked_destroy(u);
        mp_writer_done(w);
}
