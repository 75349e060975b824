/* SPDX-License-Identifier: MIT */
/* The `result` message: fitted channels (per-channel ceilings, then the aggregate byte
 * bound over the whole encoded message) and the evidence record. */
#pragma once

#include <msgpack.h>

#include "policy/policy.h"
#include "supervisor/runner.h"
#include "supervisor/scheduler.h"

typedef struct EvidenceSource {
        const char *id;
        bool attachment;
        uint64_t text_bytes;
        const char *text_sha256;
        uint64_t original_bytes;
        const char *original_sha256; /* NULL for read_source */
        const char *media_type;
} EvidenceSource;

typedef struct ResultContext {
        const Policy *policy;
        const Call *call;
        const char *code_sha256;
        const EvidenceSource *sources;
        size_t n_sources;
        const char *worker_start; /* "exec" | "zygote" */
} ResultContext;

/* Pack the whole result message into sb (initialised by the caller), applying the
 * aggregate bound (policy maxResultBytes) by shrinking the texts in res. */
int result_pack(msgpack_sbuffer *sb, const ResultContext *ctx, RunnerResult *res);
