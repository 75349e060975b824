/* SPDX-License-Identifier: MIT */
/* The wire protocol: msgpack maps in 4-byte big-endian length frames. The only place
 * that knows field names: requests are decoded here, and every message the
 * supervisor sends is packed here from plain data. Reference: docs/protocol.md. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract/plan.h"
#include "common/mp.h"
#include "contract/fit.h"
#include "policy/policy.h"
#include "supervisor/artifacts.h"
#include "supervisor/cgroup.h"
#include "supervisor/metrics.h"
#include "supervisor/outcome.h"

#define PROTO_VERSION 1
#define PROTO_MAX_SOURCE_IDS 4
#define PROTO_SOURCE_ID_MAX 64
#define PROTO_SUMMARY_MAX_CHARS 500
#define PROTO_INVOCATION_ID_LEN 32 /* hex characters */
#define PROTO_MEDIA_TYPE_MAX 127
#define PROTO_META_MAX_CHARS 2048
/* What proto_source_id_valid() accepts, as a JSON Schema (ECMA-262) pattern for the tool's
 * input schema; tests/unit/test_protocol.c checks that the two agree. */
#define PROTO_SOURCE_ID_PATTERN "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
#define PROTO_TOOL_NAME "code_interpreter"
#define PROTO_MAX_DEPTH 8 /* requests nest at most: map > array > ... */
/* keepOutputs: at most this many names; a kept artifact becomes the source
 * "out-<call>-<name>" of the call's invocation, and no client may register an ID with
 * this prefix (docs/protocol.md#kept-outputs). */
#define PROTO_MAX_KEEP_OUTPUTS 16
#define PROTO_KEPT_PREFIX "out-"

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
        PROTO_OP_DESCRIBE,
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
        ProtoBytes invocation;                   /* execute, invocation.close, source.put; len 0 = absent */
        bool keep_requested;                     /* keepOutputs given (then invocation is too) */
        bool keep_all;                           /* keepOutputs: "all" */
        ProtoBytes keep[PROTO_MAX_KEEP_OUTPUTS]; /* keepOutputs: artifact names, unique */
        size_t n_keep;
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

/* ---- Encoding. Every function packs one whole message into w (initialised by the
 * caller) and returns mp_writer_error(w): 0, or -ENOMEM / -E2BIG with nothing usable
 * in w. The server frames and sends it. ---- */

/* closing: the supervisor closes the connection once this error is sent (a refusal at
 * accept, an idle close, an oversized frame); it says so with "closing": true. */
int proto_pack_error(MpWriter *w, bool has_id, uint64_t id, Outcome code, const char *message, bool closing);
int proto_pack_hello(MpWriter *w, uint64_t id, const Policy *p, CgroupVersion cgroup, bool rootless);
/* The wire name of a cgroup version: "v2", "v1" or "none" (hello, evidence, --check-config). */
const char *proto_cgroup_name(CgroupVersion v);
/* The "limits" pair, from the policy's key table: in hello, describe and the evidence. */
void proto_pack_limits(msgpack_packer *pk, const Policy *p);
/* The one code_interpreter tool definition (name, description, guidance, inputSchema)
 * with this policy's bounds; docs/protocol.md#describe. */
int proto_pack_describe(MpWriter *w, uint64_t id, const Policy *p);

/* Why the supervisor is not ready (status's notReadyCause; docs/operations.md#readiness). */
typedef enum ProtoNotReady {
        PROTO_READY,
        PROTO_NOT_READY_SHUTTING_DOWN,
        PROTO_NOT_READY_ZYGOTE_DOWN,           /* zygote mode: no zygote serves spawns */
        PROTO_NOT_READY_WORKER_START_FAILURES, /* unreadyAfterStartFailures starts failed in a row */
} ProtoNotReady;

/* The zygote as status names it. */
typedef enum ProtoZygoteState {
        PROTO_ZYGOTE_NONE, /* exec mode */
        PROTO_ZYGOTE_READY,
        PROTO_ZYGOTE_STARTING,
        PROTO_ZYGOTE_BROKEN,
} ProtoZygoteState;

/* An admitted call that has not finished (status's "calls"). */
typedef enum ProtoCallState {
        PROTO_CALL_QUEUED,
        PROTO_CALL_STARTING,
        PROTO_CALL_RUNNING,
} ProtoCallState;

/* Why a connection was refused when it was accepted (status's connectionsRefused). */
typedef enum ProtoConnRefusal {
        PROTO_CONN_REFUSED_PEER_NOT_ALLOWED,         /* allowedUids / allowedGids */
        PROTO_CONN_REFUSED_MAX_CONNECTIONS,          /* maxConnections */
        PROTO_CONN_REFUSED_MAX_CONNECTIONS_PER_PEER, /* maxConnectionsPerPeer */
        _PROTO_CONN_REFUSED_MAX,
} ProtoConnRefusal;

typedef struct ProtoCallInfo {
        uint64_t call_id;
        ProtoCallState state;
        pid_t worker_pid; /* 0: nil (not running yet) */
} ProtoCallInfo;

typedef struct ProtoStatus {
        ProtoNotReady not_ready;      /* PROTO_READY: ready */
        const char *not_ready_detail; /* NULL when ready */
        uint32_t queued, running, capacity;
        uint64_t admitted_total, started_total, finished_total;
        uint32_t max_running_seen;
        uint64_t start_failures_total;
        const uint64_t *started_by_how; /* [_WORKER_HOW_MAX], indexed by WorkerHow */
        uint32_t start_failures_in_row;
        const char *last_start_error; /* NULL: none */
        uint32_t connections;
        const uint64_t *connections_refused; /* [_PROTO_CONN_REFUSED_MAX], since the start */
        uint64_t connections_idle_closed;    /* closed after connectionIdleTimeoutMs, since the start */
        pid_t pid;
        const char *worker_start;
        pid_t zygote_pid; /* 0: none */
        unsigned zygote_generation;
        bool zygote_ready;
        uint32_t zygote_pages_ahead; /* the serving zygote's READY (contract/zygote_proto.h); 0: none */
        ProtoZygoteState zygote_state;
        uint64_t memory_gate_holds;
        bool memory_gate_holding;
        uint64_t memory_gate_held_ms;
        uint64_t uptime_ms;
        uint64_t start_time_unix_ms; /* CLOCK_REALTIME when the supervisor started */
        const uint64_t *outcomes;    /* [_OUTCOME_MAX]: finished calls and refused executes */
        const Histogram *queue_wait, *run_time;
        const char *policy_sha256; /* the current policy's */
        const char *policy_name;
        const ProtoCallInfo *calls; /* in callId order */
        size_t n_calls;
} ProtoStatus;
int proto_pack_status(MpWriter *w, uint64_t id, const ProtoStatus *st);

int proto_pack_invocation_opened(MpWriter *w, uint64_t id, const char *invocation, const Policy *p);
int proto_pack_invocation_closed(MpWriter *w, uint64_t id);

/* A stored source as replies and evidence describe it (never its text). */
typedef struct ProtoSourceInfo {
        const char *id;
        bool attachment;
        bool output;          /* a kept output: text is the artifact's bytes */
        uint32_t produced_by; /* outputs: the number of the call that made it */
        uint64_t text_bytes;
        const char *text_sha256;
        uint64_t original_bytes;
        const char *original_sha256; /* attachments */
        const char *media_type;      /* attachments, outputs */
} ProtoSourceInfo;
int proto_pack_source_stored(MpWriter *w, uint64_t id, const ProtoSourceInfo *src);
int proto_pack_cancel_reply(MpWriter *w, uint64_t id, uint64_t call_id, bool queued);

/* Metadata only: never code, output, source IDs, paths or exception text. */
typedef struct ProtoProgress {
        uint64_t request_id, call_id;
        const char *phase;
        uint64_t elapsed_ms;
        uint32_t queue_position; /* 0: not queued (nil) */
        uint64_t stdout_chars, stderr_chars;
        uint64_t ceiling;                   /* maxOutputCharacters, for the omitted counts */
        const char *outcome;                /* "finished" only */
        bool has_outputs;                   /* the call has an /outputs: the two below are sent, else nil */
        uint64_t artifacts, artifact_bytes; /* entries there and their size, never names */
} ProtoProgress;
int proto_pack_progress(MpWriter *w, const ProtoProgress *pr);

/* Why an artifact named by keepOutputs (or found under "all") was not kept: a closed
 * set, the wire names in proto_keep_refusal_to_string(). */
typedef enum ProtoKeepRefusal {
        PROTO_KEEP_KEPT,
        PROTO_KEEP_NOT_PRODUCED,               /* not among the call's collected artifacts */
        PROTO_KEEP_INVALID_NAME,               /* out-<call>-<name> is not a valid source ID */
        PROTO_KEEP_MAX_SOURCE_BYTES,           /* larger than maxSourceBytes */
        PROTO_KEEP_MAX_SOURCES_PER_INVOCATION, /* the registry is full */
        PROTO_KEEP_MAX_INVOCATION_BYTES,       /* the registry's bytes would pass the bound */
        PROTO_KEEP_INVOCATION_CLOSED,          /* the invocation ended before the call did */
        PROTO_KEEP_OUT_OF_MEMORY,
        _PROTO_KEEP_MAX,
} ProtoKeepRefusal;
const char *proto_keep_refusal_to_string(ProtoKeepRefusal r);

/* One entry of a result's keptOutputs. */
typedef struct ProtoKept {
        const char *name;
        ProtoKeepRefusal refused; /* PROTO_KEEP_KEPT: kept, the fields below are set */
        const char *source_id;
        uint64_t bytes;
        const char *sha256;
} ProtoKept;

/* The result of one call. The texts are fitted further (shrunk in place) to fit the
 * whole message into max_bytes. */
typedef struct ProtoResult {
        uint64_t request_id, call_id;
        Outcome outcome;
        const char *limit;  /* resource_limit: "memory" | "cpu" | ... */
        const char *detail; /* NULL: none */
        bool partial;
        FitText *out, *err;
        FitText *result; /* NULL: no value shown */
        bool exception;
        const char *exc_type;
        FitText *exc_message, *exc_traceback;
        uint64_t admit_usec, start_usec, end_usec;
        bool started;
        const char *worker_how; /* timing.worker: "ready", "preparing", "cloned", "exec"; NULL: nil */
        bool has_exit;          /* the worker existed and was reaped */
        pid_t pid;
        bool has_host_uid; /* the worker's own host uid, else hostUid is nil */
        uid_t host_uid;
        int exit_code; /* -1: killed */
        int signal;
        uint64_t cpu_usec, max_rss_kb;
        bool has_memory_peak; /* the worker's cgroup peak, else memoryPeakBytes is nil */
        uint64_t memory_peak_bytes;
        const char *stage; /* worker_error from setup, else NULL */
        int stage_errno;
        /* evidence */
        const char *code_sha256;
        uint64_t code_chars;
        const ProtoSourceInfo *sources;
        size_t n_sources;
        const Policy *policy;
        const char *worker_start;
        int landlock_abi;
        CgroupVersion cgroup;
        bool rootless; /* the supervisor is not root: the worker was its user on the host */
        /* /outputs: NULL when the call had none (artifacts is nil then). Fitting moves
         * artifacts that do not fit into its omitted counts. */
        ArtifactSet *artifacts;
        /* keepOutputs: has_kept false when the request had none (keptOutputs is nil). */
        bool has_kept;
        const ProtoKept *kept;
        size_t n_kept;
} ProtoResult;
/* -E2BIG when even the texts cut to nothing do not fit max_bytes. Artifacts are kept in
 * name order while the message with the texts as they are fits; those that do not are
 * omitted (counted); only then are the texts cut. */
int proto_pack_result(MpWriter *w, ProtoResult *r, size_t max_bytes);
