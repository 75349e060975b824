/* SPDX-License-Identifier: MIT */
/* The packing of every message the supervisor sends (protocol.h), from plain data: the
 * names of outcomes and ops, replies, progress, status, results (their evidence,
 * timing and exit status packed by evidence.c) with artifacts fitted to
 * maxResultBytes, and the describe reply. Requests are decoded in
 * protocol_decode.c. */
#include "supervisor/protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"
#include "contract/zygote_proto.h"
#include "supervisor/evidence.h"

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
        [PROTO_OP_DESCRIBE] = "describe",
};

const char *proto_op_to_string(ProtoOp op) {
        if (op < 0 || op >= _PROTO_OP_MAX)
                return "unknown";
        return op_names[op];
}

static const char *const keep_refusal_names[_PROTO_KEEP_MAX] = {
        [PROTO_KEEP_KEPT] = "kept",
        [PROTO_KEEP_NOT_PRODUCED] = "not_produced",
        [PROTO_KEEP_INVALID_NAME] = "invalid_name",
        [PROTO_KEEP_MAX_SOURCE_BYTES] = "max_source_bytes",
        [PROTO_KEEP_MAX_SOURCES_PER_INVOCATION] = "max_sources_per_invocation",
        [PROTO_KEEP_MAX_INVOCATION_BYTES] = "max_invocation_bytes",
        [PROTO_KEEP_INVOCATION_CLOSED] = "invocation_closed",
        [PROTO_KEEP_OUT_OF_MEMORY] = "out_of_memory",
};

const char *proto_keep_refusal_to_string(ProtoKeepRefusal r) {
        if (r < 0 || r >= _PROTO_KEEP_MAX)
                return "out_of_memory";
        return keep_refusal_names[r];
}

/* ---- encoding ---- */

/* Room for the msgpack headers of the fitted strings, which grow by a few bytes when a
 * string crosses 31/255/65535 bytes: reserved on top of the measured skeleton. */
#define STRING_HEADER_SLACK 64

/* {"id", "type": "reply", "op": op, + n_extra more pairs} */
static void pack_reply_head(msgpack_packer *pk, uint64_t id, ProtoOp op, size_t n_extra) {
        msgpack_pack_map(pk, 3 + n_extra);
        mp_pack_kv_uint(pk, "id", id);
        mp_pack_kv_str(pk, "type", "reply");
        mp_pack_kv_str(pk, "op", proto_op_to_string(op));
}

/* The call's limits, from the policy's key table (and the protocol's own bound). */
void proto_pack_limits(msgpack_packer *pk, const Policy *p) {
        PolicyLimit limits[POLICY_MAX_LIMITS];
        size_t n = policy_limits(p, limits);

        mp_pack_cstr(pk, "limits");
        msgpack_pack_map(pk, n + 1);
        for (size_t i = 0; i < n; i++)
                mp_pack_kv_uint(pk, limits[i].key, limits[i].value);
        mp_pack_kv_uint(pk, "maxSourceIds", PROTO_MAX_SOURCE_IDS);
}

int proto_pack_error(MpWriter *w, bool has_id, uint64_t id, Outcome code, const char *message, bool closing) {
        msgpack_packer *pk = &w->pk;

        msgpack_pack_map(pk, closing ? 5 : 4);
        mp_pack_cstr(pk, "id");
        if (has_id)
                msgpack_pack_uint64(pk, id);
        else
                msgpack_pack_nil(pk);
        mp_pack_kv_str(pk, "type", "error");
        mp_pack_kv_str(pk, "code", outcome_to_string(code));
        mp_pack_kv_str(pk, "message", message);
        if (closing)
                mp_pack_kv_bool(pk, "closing", true);
        return mp_writer_error(w);
}

const char *proto_cgroup_name(CgroupVersion v) {
        switch (v) {
        case CGROUP_V2:
                return "v2";
        case CGROUP_V1:
                return "v1";
        case CGROUP_NONE:
                break;
        }
        return "none";
}

int proto_pack_hello(MpWriter *w, uint64_t id, const Policy *p, CgroupVersion cgroup, bool rootless) {
        msgpack_packer *pk = &w->pk;

        pack_reply_head(pk, id, PROTO_OP_HELLO, 8);
        mp_pack_kv_uint(pk, "protocol", PROTO_VERSION);
        mp_pack_kv_str(pk, "version", CODEINTERP_VERSION);
        mp_pack_kv_str(pk, "python", CODEINTERP_PY_VERSION);
        mp_pack_kv_str(pk, "cgroup", proto_cgroup_name(cgroup));
        mp_pack_kv_bool(pk, "rootless", rootless);
        mp_pack_cstr(pk, "policy");
        msgpack_pack_map(pk, 3);
        mp_pack_kv_str(pk, "name", p->name);
        mp_pack_kv_str(pk, "sha256", p->sha256);
        mp_pack_kv_str(pk, "workerStart", policy_worker_start_to_string(p->worker_start));
        proto_pack_limits(pk, p);
        mp_pack_cstr(pk, "outcomes");
        msgpack_pack_array(pk, _OUTCOME_MAX);
        for (int i = 0; i < _OUTCOME_MAX; i++)
                mp_pack_cstr(pk, outcome_to_string((Outcome) i));
        return mp_writer_error(w);
}

/* {"leMs": [bounds], "counts": [cumulative, per bound], "sumMs": float, "count": n}; the
 * +Inf bucket is count. */
static void pack_histogram(msgpack_packer *pk, const char *key, const Histogram *h) {
        mp_pack_cstr(pk, key);
        msgpack_pack_map(pk, 4);
        mp_pack_cstr(pk, "leMs");
        msgpack_pack_array(pk, METRICS_N_BUCKETS);
        for (size_t i = 0; i < METRICS_N_BUCKETS; i++)
                msgpack_pack_uint64(pk, metrics_bucket_ms[i]);
        mp_pack_cstr(pk, "counts");
        msgpack_pack_array(pk, METRICS_N_BUCKETS);
        for (size_t i = 0; i < METRICS_N_BUCKETS; i++)
                msgpack_pack_uint64(pk, histogram_cumulative(h, i));
        mp_pack_cstr(pk, "sumMs");
        msgpack_pack_double(pk, (double) h->sum_usec / 1000.0);
        mp_pack_kv_uint(pk, "count", h->count);
}

static const char *not_ready_name(ProtoNotReady r) {
        switch (r) {
        case PROTO_NOT_READY_SHUTTING_DOWN:
                return "shutting_down";
        case PROTO_NOT_READY_ZYGOTE_DOWN:
                return "zygote_down";
        case PROTO_NOT_READY_WORKER_START_FAILURES:
                return "worker_start_failures";
        case PROTO_READY:
                break;
        }
        return NULL;
}

static const char *zygote_state_name(ProtoZygoteState z) {
        switch (z) {
        case PROTO_ZYGOTE_READY:
                return "ready";
        case PROTO_ZYGOTE_STARTING:
                return "starting";
        case PROTO_ZYGOTE_BROKEN:
                return "broken";
        case PROTO_ZYGOTE_NONE:
                break;
        }
        return NULL;
}

static const char *const conn_refusal_names[_PROTO_CONN_REFUSED_MAX] = {
        [PROTO_CONN_REFUSED_PEER_NOT_ALLOWED] = "peer_not_allowed",
        [PROTO_CONN_REFUSED_MAX_CONNECTIONS] = "max_connections",
        [PROTO_CONN_REFUSED_MAX_CONNECTIONS_PER_PEER] = "max_connections_per_peer",
};

static const char *const call_state_names[] = {
        [PROTO_CALL_QUEUED] = "queued",
        [PROTO_CALL_STARTING] = "starting",
        [PROTO_CALL_RUNNING] = "running",
};

/* [{"callId", "state", "workerPid"}]: metadata only, as in progress. */
static void pack_calls(msgpack_packer *pk, const ProtoCallInfo *calls, size_t n) {
        mp_pack_cstr(pk, "calls");
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++) {
                msgpack_pack_map(pk, 3);
                mp_pack_kv_uint(pk, "callId", calls[i].call_id);
                mp_pack_kv_str(pk, "state", call_state_names[calls[i].state]);
                mp_pack_cstr(pk, "workerPid");
                if (calls[i].worker_pid > 0)
                        msgpack_pack_uint64(pk, (uint64_t) calls[i].worker_pid);
                else
                        msgpack_pack_nil(pk);
        }
}

int proto_pack_status(MpWriter *w, uint64_t id, const ProtoStatus *st) {
        msgpack_packer *pk = &w->pk;

        pack_reply_head(pk, id, PROTO_OP_STATUS, 37);
        mp_pack_kv_bool(pk, "ready", st->not_ready == PROTO_READY);
        mp_pack_kv_str(pk, "notReadyCause", not_ready_name(st->not_ready));
        mp_pack_kv_str(pk, "notReadyDetail", st->not_ready == PROTO_READY ? NULL : st->not_ready_detail);
        mp_pack_kv_uint(pk, "queued", st->queued);
        mp_pack_kv_uint(pk, "running", st->running);
        mp_pack_kv_uint(pk, "capacity", st->capacity);
        mp_pack_kv_uint(pk, "admittedTotal", st->admitted_total);
        mp_pack_kv_uint(pk, "startedTotal", st->started_total);
        /* By how each call's worker came: every way, 0 included, so the set is stable. */
        mp_pack_cstr(pk, "workersStartedBy");
        msgpack_pack_map(pk, _WORKER_HOW_MAX - 1);
        for (WorkerHow h = WORKER_HOW_READY; h < _WORKER_HOW_MAX; h++)
                mp_pack_kv_uint(pk, worker_how_to_string(h), st->started_by_how[h]);
        mp_pack_kv_uint(pk, "finishedTotal", st->finished_total);
        mp_pack_kv_uint(pk, "maxRunningSeen", st->max_running_seen);
        mp_pack_kv_uint(pk, "workerStartFailures", st->start_failures_total);
        mp_pack_kv_uint(pk, "workerStartFailuresInRow", st->start_failures_in_row);
        mp_pack_kv_str(pk, "lastWorkerStartError", st->last_start_error);
        mp_pack_kv_uint(pk, "connections", st->connections);
        mp_pack_cstr(pk, "connectionsRefused");
        msgpack_pack_map(pk, _PROTO_CONN_REFUSED_MAX);
        for (size_t i = 0; i < _PROTO_CONN_REFUSED_MAX; i++)
                mp_pack_kv_uint(pk, conn_refusal_names[i], st->connections_refused[i]);
        mp_pack_kv_uint(pk, "connectionsIdleClosed", st->connections_idle_closed);
        mp_pack_kv_uint(pk, "pid", (uint64_t) st->pid);
        mp_pack_kv_str(pk, "workerStart", st->worker_start);
        mp_pack_cstr(pk, "zygotePid");
        if (st->zygote_pid > 0)
                msgpack_pack_uint64(pk, (uint64_t) st->zygote_pid);
        else
                msgpack_pack_nil(pk);
        mp_pack_kv_uint(pk, "zygoteGeneration", st->zygote_generation);
        mp_pack_kv_bool(pk, "zygoteReady", st->zygote_ready);
        mp_pack_kv_uint(pk, "zygotePagesAhead", st->zygote_pages_ahead);
        mp_pack_kv_str(pk, "zygoteState", zygote_state_name(st->zygote_state));
        mp_pack_kv_uint(pk, "memoryGateHolds", st->memory_gate_holds);
        mp_pack_kv_bool(pk, "memoryGateHolding", st->memory_gate_holding);
        mp_pack_kv_uint(pk, "memoryGateHeldMs", st->memory_gate_held_ms);
        mp_pack_kv_uint(pk, "uptimeMs", st->uptime_ms);
        mp_pack_kv_uint(pk, "startTimeUnixMs", st->start_time_unix_ms);
        mp_pack_kv_str(pk, "version", CODEINTERP_VERSION);
        mp_pack_kv_str(pk, "python", CODEINTERP_PY_VERSION);
        mp_pack_cstr(pk, "outcomes");
        msgpack_pack_map(pk, _OUTCOME_MAX);
        for (size_t i = 0; i < _OUTCOME_MAX; i++)
                mp_pack_kv_uint(pk, outcome_to_string((Outcome) i), st->outcomes[i]);
        pack_histogram(pk, "queueWaitMs", st->queue_wait);
        pack_histogram(pk, "runTimeMs", st->run_time);
        mp_pack_kv_str(pk, "policySha256", st->policy_sha256);
        mp_pack_kv_str(pk, "policyName", st->policy_name);
        pack_calls(pk, st->calls, st->n_calls);
        return mp_writer_error(w);
}

int proto_pack_invocation_opened(MpWriter *w, uint64_t id, const char *invocation, const Policy *p) {
        msgpack_packer *pk = &w->pk;

        pack_reply_head(pk, id, PROTO_OP_INVOCATION_OPEN, 3);
        mp_pack_kv_str(pk, "invocation", invocation);
        mp_pack_kv_uint(pk, "maxCalls", p->max_calls);
        mp_pack_kv_uint(pk, "idleTtlMs", p->invocation_ttl_ms);
        return mp_writer_error(w);
}

int proto_pack_invocation_closed(MpWriter *w, uint64_t id) {
        pack_reply_head(&w->pk, id, PROTO_OP_INVOCATION_CLOSE, 0);
        return mp_writer_error(w);
}

int proto_pack_source_stored(MpWriter *w, uint64_t id, const ProtoSourceInfo *src) {
        msgpack_packer *pk = &w->pk;

        pack_reply_head(pk, id, PROTO_OP_SOURCE_PUT, src->attachment ? 6 : 4);
        mp_pack_kv_str(pk, "sourceId", src->id);
        mp_pack_kv_str(pk, "kind", src->attachment ? "attachment" : "read_source");
        mp_pack_kv_uint(pk, "bytes", src->text_bytes);
        mp_pack_kv_str(pk, "sha256", src->text_sha256);
        if (src->attachment) {
                mp_pack_kv_uint(pk, "originalBytes", src->original_bytes);
                mp_pack_kv_str(pk, "originalSha256", src->original_sha256);
        }
        return mp_writer_error(w);
}

int proto_pack_cancel_reply(MpWriter *w, uint64_t id, uint64_t call_id, bool queued) {
        msgpack_packer *pk = &w->pk;

        pack_reply_head(pk, id, PROTO_OP_CANCEL, 2);
        mp_pack_kv_uint(pk, "callId", call_id);
        mp_pack_kv_str(pk, "state", queued ? "queued" : "running");
        return mp_writer_error(w);
}

int proto_pack_progress(MpWriter *w, const ProtoProgress *pr) {
        msgpack_packer *pk = &w->pk;

        msgpack_pack_map(pk, 13);
        mp_pack_kv_uint(pk, "id", pr->request_id);
        mp_pack_kv_str(pk, "type", "progress");
        mp_pack_kv_uint(pk, "callId", pr->call_id);
        mp_pack_kv_str(pk, "phase", pr->phase);
        mp_pack_kv_uint(pk, "elapsedMs", pr->elapsed_ms);
        mp_pack_cstr(pk, "queuePosition");
        if (pr->queue_position > 0)
                msgpack_pack_uint32(pk, pr->queue_position);
        else
                msgpack_pack_nil(pk);
        mp_pack_kv_uint(pk, "stdoutCharacters", pr->stdout_chars);
        mp_pack_kv_uint(pk, "stderrCharacters", pr->stderr_chars);
        mp_pack_kv_uint(pk, "stdoutOmittedCharacters",
                        pr->stdout_chars > pr->ceiling ? pr->stdout_chars - pr->ceiling : 0);
        mp_pack_kv_uint(pk, "stderrOmittedCharacters",
                        pr->stderr_chars > pr->ceiling ? pr->stderr_chars - pr->ceiling : 0);
        mp_pack_kv_str(pk, "outcome", pr->outcome);
        mp_pack_kv_uint_or_nil(pk, "artifacts", pr->has_outputs, pr->artifacts);
        mp_pack_kv_uint_or_nil(pk, "artifactBytes", pr->has_outputs, pr->artifact_bytes);
        return mp_writer_error(w);
}

static void pack_channel(msgpack_packer *pk, const char *key, const FitText *t) {
        mp_pack_cstr(pk, key);
        if (!t) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_map(pk, FIT_TEXT_WIRE_FIELDS + 2);
        fit_text_pack_fields(pk, t);
        mp_pack_kv_uint(pk, "omittedAt", t->omitted_at);
        mp_pack_kv_uint(pk, "replacedCharacters", t->replaced);
}

static void pack_artifact(msgpack_packer *pk, const Artifact *a) {
        msgpack_pack_map(pk, 5);
        mp_pack_kv_str(pk, "name", a->name);
        mp_pack_kv_str(pk, "mediaType", a->media_type);
        mp_pack_kv_uint(pk, "bytes", a->len);
        mp_pack_kv_str(pk, "sha256", a->sha256);
        mp_pack_cstr(pk, "data");
        msgpack_pack_bin(pk, a->len);
        msgpack_pack_bin_body(pk, a->data, a->len);
}

static void pack_artifacts(msgpack_packer *pk, const ArtifactSet *s) {
        mp_pack_cstr(pk, "artifacts");
        if (!s)
                msgpack_pack_nil(pk);
        else {
                msgpack_pack_array(pk, s->n);
                for (size_t i = 0; i < s->n; i++)
                        pack_artifact(pk, &s->items[i]);
        }
        mp_pack_cstr(pk, "omittedArtifacts");
        msgpack_pack_uint64(pk, s ? s->omitted : 0);
        mp_pack_cstr(pk, "omittedArtifactBytes");
        msgpack_pack_uint64(pk, s ? s->omitted_bytes : 0);
}

/* The packed size of one artifact entry. */
static size_t artifact_packed_size(const Artifact *a) {
        MpWriter w;
        size_t n;

        mp_writer_init(&w, 0);
        pack_artifact(&w.pk, a);
        n = mp_writer_error(&w) < 0 ? SIZE_MAX : w.sb.size;
        mp_writer_done(&w);
        return n;
}

static void pack_kept(msgpack_packer *pk, const ProtoResult *r) {
        mp_pack_cstr(pk, "keptOutputs");
        if (!r->has_kept) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_array(pk, r->n_kept);
        for (size_t i = 0; i < r->n_kept; i++) {
                const ProtoKept *k = &r->kept[i];
                if (k->refused != PROTO_KEEP_KEPT) {
                        msgpack_pack_map(pk, 2);
                        mp_pack_kv_str(pk, "name", k->name);
                        mp_pack_kv_str(pk, "refused", proto_keep_refusal_to_string(k->refused));
                        continue;
                }
                msgpack_pack_map(pk, 4);
                mp_pack_kv_str(pk, "name", k->name);
                mp_pack_kv_str(pk, "sourceId", k->source_id);
                mp_pack_kv_uint(pk, "bytes", k->bytes);
                mp_pack_kv_str(pk, "sha256", k->sha256);
        }
}

static void pack_result(msgpack_packer *pk, const ProtoResult *r) {
        msgpack_pack_map(pk, 20);
        mp_pack_kv_uint(pk, "id", r->request_id);
        mp_pack_kv_str(pk, "type", "result");
        mp_pack_kv_uint(pk, "callId", r->call_id);
        mp_pack_kv_str(pk, "outcome", outcome_to_string(r->outcome));
        mp_pack_kv_str(pk, "limit", r->limit);
        mp_pack_kv_str(pk, "detail", r->detail);
        mp_pack_kv_bool(pk, "partial", r->partial);
        pack_channel(pk, "stdout", r->out);
        pack_channel(pk, "stderr", r->err);
        pack_channel(pk, "result", r->result);
        mp_pack_cstr(pk, "exception");
        if (r->exception) {
                msgpack_pack_map(pk, 3);
                mp_pack_kv_str(pk, "type", r->exc_type);
                pack_channel(pk, "message", r->exc_message);
                pack_channel(pk, "traceback", r->exc_traceback);
        } else
                msgpack_pack_nil(pk);
        evidence_pack_timing(pk, r);
        evidence_pack_exit_status(pk, r);
        mp_pack_cstr(pk, "workerError");
        if (r->stage) {
                msgpack_pack_map(pk, 2);
                mp_pack_kv_str(pk, "stage", r->stage);
                mp_pack_kv_int(pk, "errno", r->stage_errno);
        } else
                msgpack_pack_nil(pk);
        pack_artifacts(pk, r->artifacts);
        pack_kept(pk, r);
        evidence_pack(pk, r);
}

/* Artifacts, in name order, while they fit beside the rest as it is (w holds the whole
 * message packed once). An omitted one widens the omitted counts by at most 16 bytes. */
static int fit_artifacts(MpWriter *w, ProtoResult *r, size_t max_bytes) {
        ArtifactSet *s = r->artifacts;
        size_t sizes_total = 0, base, budget;
        _cleanup_free_ size_t *sizes = NULL;

        if (!s || s->n == 0)
                return 0;
        sizes = calloc(s->n, sizeof *sizes);
        if (!sizes)
                return -ENOMEM;
        for (size_t i = 0; i < s->n; i++) {
                sizes[i] = artifact_packed_size(&s->items[i]);
                if (sizes[i] == SIZE_MAX)
                        return -ENOMEM;
                sizes_total += sizes[i];
        }
        base = w->sb.size - sizes_total + 16;
        budget = base < max_bytes ? max_bytes - base : 0;
        /* k walks the sizes as measured, i the set as it shrinks. */
        size_t orig_n = s->n;
        for (size_t k = 0, i = 0; k < orig_n; k++) {
                if (sizes[k] <= budget) {
                        budget -= sizes[k];
                        i++;
                } else
                        artifact_set_omit(s, i);
        }
        return 0;
}

int proto_pack_result(MpWriter *w, ProtoResult *r, size_t max_bytes) {
        FitText *texts[5] = { r->out, r->err, r->result, r->exception ? r->exc_message : NULL,
                              r->exception ? r->exc_traceback : NULL };
        size_t text_total = 0, skeleton;
        int k;

        /* Measure the message with its texts, subtract them: the skeleton is what the
         * texts must share the bound with. */
        pack_result(&w->pk, r);
        if ((k = mp_writer_error(w)) < 0)
                return k;
        if (w->sb.size <= max_bytes)
                return 0;
        if (r->artifacts && r->artifacts->n > 0) {
                if ((k = fit_artifacts(w, r, max_bytes)) < 0)
                        return k;
                mp_writer_reset(w);
                pack_result(&w->pk, r);
                if ((k = mp_writer_error(w)) < 0)
                        return k;
                if (w->sb.size <= max_bytes)
                        return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(texts); i++)
                if (texts[i])
                        text_total += texts[i]->text_bytes;
        skeleton = w->sb.size - text_total;
        if (skeleton + STRING_HEADER_SLACK >= max_bytes)
                return -E2BIG;
        k = fit_texts_to_budget(texts, ELEMENTSOF(texts), max_bytes - skeleton - STRING_HEADER_SLACK);
        if (k < 0)
                return k;
        mp_writer_reset(w);
        pack_result(&w->pk, r);
        if ((k = mp_writer_error(w)) < 0)
                return k;
        return w->sb.size <= max_bytes ? 0 : -E2BIG;
}

/* ---- describe: the code_interpreter tool ---- */

/* The embedded CPython's X.Y, from the build (cmake/python.cmake): a build choice, not ours. */
#ifndef CODEINTERP_PY_MAJOR_MINOR
#error "CODEINTERP_PY_MAJOR_MINOR (e.g. \"3.11\") must be defined by the build"
#endif

static const char tool_description[] =
        "Run a short Python " CODEINTERP_PY_MAJOR_MINOR
        " program in a new, isolated sandbox and get back what it printed, the "
        "value of its last expression, or the exception it raised. Use it for calculations, parsing, "
        "counting, sorting, filtering, aggregation, deduplication and checks over explicit data.";

/* The guidance for the coordinating model, with the policy's live bounds. Our words for the
 * rules in docs/protocol.md (outcomes, fitting, sources) and docs/client.md (rendering). */
static char *tool_guidance(const Policy *p) {
        _cleanup_free_ char *files = NULL;
        char *s = NULL, names[POLICY_PACKAGES_NAMES_MAX], available[512] = "The Python standard library is available.";
        unsigned keep = p->max_output_characters - p->max_output_characters / 4;

        /* Files handed back: only when the policy gives calls an /outputs. */
        if (p->max_artifacts == 0)
                files = strdup(", and files handed back after the call");
        else if (asprintf(&files,
                          ". Files: to hand back a file (a plot, a table), write it to /outputs (top level, at most "
                          "%u files and %llu bytes in all); each comes back with its name, media type (from its "
                          "content), size and sha256, or is counted as omitted when it does not fit. Everything "
                          "else the code writes is gone after the call",
                          p->max_artifacts, (unsigned long long) p->max_artifact_bytes) < 0)
                files = NULL;
        if (!files)
                return NULL;

        /* The policy's pythonPackages (docs/policy.md): named, so the model uses them. */
        policy_packages_format(p->python_packages, names, sizeof names);
        if (names[0])
                snprintf(available, sizeof available,
                         "The Python standard library is available, and these packages (read-only): %s%s.", names,
                         p->python_packages & POLICY_PACKAGE_BIT(POLICY_PACKAGE_MATPLOTLIB)
                                 ? " (matplotlib with the non-interactive Agg backend: save figures to files)"
                                 : "");

        if (asprintf(&s,
                     "When to use it: whenever your answer creates or transforms structured, machine-readable "
                     "data (numbers, tables, lists, JSON, CSV) or depends on arithmetic, compute it with this "
                     "tool. Never simulate a calculation in prose or present arithmetic you did not run as a "
                     "computed result.\n"
                     "\n"
                     "Every call starts fresh: a new Python process with no variables, imports or files from "
                     "earlier calls. Put everything a call needs into its code or into the sources it names.\n"
                     "\n"
                     "Inputs: the code sees data only through sourceIds. Name at most %d unique source ids that "
                     "this conversation offers; never invent ids or paths. Each named source is mounted "
                     "read-only: the global input_files maps each id to the path of its text "
                     "(/inputs/<id>.txt), and input_assets maps the id of each attachment to "
                     "{\"text\": path, \"original\": path, \"mediaType\": str}. Both are {} when nothing is "
                     "mounted.\n"
                     "\n"
                     "Not available: network access, package installation (pip or otherwise), other host "
                     "files%s. %s\n"
                     "\n"
                     "What comes back: the outcome, stdout, stderr, and the repr() of the value of the final "
                     "expression statement (none if it ends with ';' or is None). Each of these keeps at most "
                     "%u characters: the first %u and the last %u. When more was produced the middle is cut "
                     "out, and the reply says so with the exact number of characters omitted; treat such "
                     "text as incomplete and print summaries or counts rather than whole tables. An uncaught "
                     "exception comes back as outcome python_exception with its type, message and traceback; "
                     "correct the code and call again if that helps. timeout (the whole call, queueing "
                     "included, may take %u ms) and cancelled are decided by the runtime; they are not "
                     "program output, and any output shown with them is partial. Errors such as "
                     "invalid_input, unavailable_source or quota_exhausted mean that no code ran.\n"
                     "\n"
                     "Bounds: code at most %u characters, summary at most %d characters, at most %u calls per "
                     "invocation, %llu bytes of memory and %u CPU seconds per call.\n"
                     "\n"
                     "Numbers: the module codeinterp_numeric normalises values before arithmetic. "
                     "to_number(x) accepts int, float and finite numeric strings such as \"9\", \"7.5\" or "
                     "\"1e-1\", and raises NumericError for booleans, empty or malformed strings, NaN and "
                     "infinities. mean(values, missing=...), total(values, missing=...) and count(values, "
                     "missing=...) return Aggregate(value, n, missing), where n is how many values were "
                     "used. A missing value (None) never counts as zero: missing=\"reject\" raises "
                     "MissingValueError, missing=\"omit\" uses only the values present (report n), "
                     "missing=\"propagate\" gives value None. Say which policy you chose.\n"
                     "\n"
                     "An ok outcome shows what this code computed from these inputs under these limits; it "
                     "does not show that the inputs are true or that the code does what its summary says.",
                     PROTO_MAX_SOURCE_IDS, files, available, p->max_output_characters, keep,
                     p->max_output_characters - keep, p->timeout_ms, p->max_code_characters, PROTO_SUMMARY_MAX_CHARS,
                     p->max_calls, (unsigned long long) p->memory_bytes, p->cpu_seconds) < 0)
                return NULL;
        return s;
}

/* The input schema (JSON Schema, as msgpack): the execute fields a model chooses. */
static void pack_input_schema(msgpack_packer *pk, const Policy *p) {
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "type", "object");
        mp_pack_cstr(pk, "properties");
        msgpack_pack_map(pk, 3);

        mp_pack_cstr(pk, "summary");
        msgpack_pack_map(pk, 3);
        mp_pack_kv_str(pk, "type", "string");
        mp_pack_kv_uint(pk, "maxLength", PROTO_SUMMARY_MAX_CHARS);
        mp_pack_kv_str(pk, "description",
                       "One line for the user saying what this calculation does. Shown to the user; not "
                       "visible to the code.");

        mp_pack_cstr(pk, "code");
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "type", "string");
        mp_pack_kv_uint(pk, "minLength", 1);
        mp_pack_kv_uint(pk, "maxLength", p->max_code_characters);
        mp_pack_kv_str(pk, "description",
                       "Python " CODEINTERP_PY_MAJOR_MINOR
                       " source. Runs top to bottom in a fresh interpreter; the repr() of a final "
                       "expression statement is returned as the value.");

        mp_pack_cstr(pk, "sourceIds");
        msgpack_pack_map(pk, 6);
        mp_pack_kv_str(pk, "type", "array");
        mp_pack_cstr(pk, "items");
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "type", "string");
        mp_pack_kv_uint(pk, "minLength", 1);
        mp_pack_kv_uint(pk, "maxLength", PROTO_SOURCE_ID_MAX);
        mp_pack_kv_str(pk, "pattern", PROTO_SOURCE_ID_PATTERN);
        mp_pack_kv_uint(pk, "maxItems", PROTO_MAX_SOURCE_IDS);
        mp_pack_kv_bool(pk, "uniqueItems", true);
        mp_pack_cstr(pk, "default");
        msgpack_pack_array(pk, 0);
        mp_pack_kv_str(pk, "description",
                       "Ids of the sources offered in this conversation to mount for this call (see "
                       "input_files and input_assets). Empty or absent: no inputs.");

        mp_pack_cstr(pk, "required");
        msgpack_pack_array(pk, 2);
        mp_pack_cstr(pk, "summary");
        mp_pack_cstr(pk, "code");
        mp_pack_kv_bool(pk, "additionalProperties", false);
}

int proto_pack_describe(MpWriter *w, uint64_t id, const Policy *p) {
        msgpack_packer *pk = &w->pk;
        _cleanup_free_ char *guidance = tool_guidance(p);

        if (!guidance)
                return -ENOMEM;
        pack_reply_head(pk, id, PROTO_OP_DESCRIBE, 1);
        mp_pack_cstr(pk, "tool");
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "name", PROTO_TOOL_NAME);
        mp_pack_kv_str(pk, "description", tool_description);
        mp_pack_kv_str(pk, "guidance", guidance);
        mp_pack_cstr(pk, "inputSchema");
        pack_input_schema(pk, p);
        return mp_writer_error(w);
}
