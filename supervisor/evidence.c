/* SPDX-License-Identifier: MIT */
#include "supervisor/evidence.h"

#include <errno.h>
#include <string.h>

#include "common/mp.h"
#include "common/landlock.h"

/* Room for the msgpack headers of the fitted strings, which grow by a few bytes when a
 * string crosses 31/255/65535 bytes: reserved on top of the measured skeleton. */
#define STRING_HEADER_SLACK 64

static void pack_channel(msgpack_packer *pk, const char *key, const FitText *t, bool present) {
        mp_pack_cstr(pk, key);
        if (!present) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_map(pk, 7);
        mp_pack_cstr(pk, "text");
        mp_pack_strn(pk, t->text ? t->text : "", t->text_bytes);
        mp_pack_kv_uint(pk, "totalCharacters", t->total_chars);
        mp_pack_kv_uint(pk, "totalBytes", t->total_bytes);
        mp_pack_kv_uint(pk, "omittedCharacters", t->omitted_chars);
        mp_pack_kv_uint(pk, "omittedBytes", t->omitted_bytes);
        mp_pack_kv_uint(pk, "omittedAt", t->omitted_at);
        mp_pack_kv_uint(pk, "replacedCharacters", t->replaced);
}

/* The same kernel runs every worker: ask once. 0 = the Landlock layer is skipped. */
static int landlock_abi_cached(void) {
        static int abi = -1;
        if (abi < 0)
                abi = landlock_abi();
        return abi;
}

static void pack_evidence(msgpack_packer *pk, const ResultContext *ctx) {
        const Policy *p = ctx->policy;

        mp_pack_cstr(pk, "evidence");
        msgpack_pack_map(pk, 6);
        mp_pack_kv_str(pk, "codeSha256", ctx->code_sha256);
        mp_pack_kv_uint(pk, "codeCharacters", ctx->call->code_chars);
        mp_pack_cstr(pk, "inputs");
        msgpack_pack_array(pk, ctx->n_sources);
        for (size_t i = 0; i < ctx->n_sources; i++) {
                const EvidenceSource *s = &ctx->sources[i];
                msgpack_pack_map(pk, s->attachment ? 7 : 4);
                mp_pack_kv_str(pk, "sourceId", s->id);
                mp_pack_kv_str(pk, "kind", s->attachment ? "attachment" : "read_source");
                mp_pack_kv_uint(pk, "bytes", s->text_bytes);
                mp_pack_kv_str(pk, "sha256", s->text_sha256);
                if (s->attachment) {
                        mp_pack_kv_uint(pk, "originalBytes", s->original_bytes);
                        mp_pack_kv_str(pk, "originalSha256", s->original_sha256);
                        mp_pack_kv_str(pk, "mediaType", s->media_type);
                }
        }
        mp_pack_cstr(pk, "runtime");
        msgpack_pack_map(pk, 5);
        mp_pack_kv_str(pk, "codeinterp", CODEINTERP_VERSION);
        mp_pack_kv_str(pk, "python", CODEINTERP_PY_VERSION);
        mp_pack_kv_str(pk, "workerStart", ctx->worker_start);
        mp_pack_kv_str(pk, "seccomp", policy_deny_action_to_string(p->seccomp_deny));
        mp_pack_kv_uint(pk, "landlock", (uint64_t) landlock_abi_cached());
        mp_pack_cstr(pk, "policy");
        msgpack_pack_map(pk, 2);
        mp_pack_kv_str(pk, "name", p->name);
        mp_pack_kv_str(pk, "sha256", p->sha256);
        mp_pack_cstr(pk, "limits");
        msgpack_pack_map(pk, 10);
        mp_pack_kv_uint(pk, "timeoutMs", p->timeout_ms);
        mp_pack_kv_uint(pk, "maxCodeCharacters", p->max_code_characters);
        mp_pack_kv_uint(pk, "maxOutputCharacters", p->max_output_characters);
        mp_pack_kv_uint(pk, "maxResultBytes", p->max_result_bytes);
        mp_pack_kv_uint(pk, "memoryBytes", p->memory_bytes);
        mp_pack_kv_uint(pk, "cpuSeconds", p->cpu_seconds);
        mp_pack_kv_uint(pk, "maxFileBytes", p->file_bytes);
        mp_pack_kv_uint(pk, "maxOpenFiles", p->open_files);
        mp_pack_kv_uint(pk, "maxProcesses", p->processes);
        mp_pack_kv_uint(pk, "tmpBytes", p->tmp_bytes);
}

static uint64_t usec_to_ms(uint64_t a, uint64_t b) {
        return b > a ? (b - a) / 1000 : 0;
}

static void pack_all(msgpack_sbuffer *sb, const ResultContext *ctx, const RunnerResult *res) {
        const Call *c = ctx->call;
        msgpack_packer pk;
        bool exc = res->report.exception;

        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 16);
        mp_pack_kv_uint(&pk, "id", c->request_id);
        mp_pack_kv_str(&pk, "type", "result");
        mp_pack_kv_uint(&pk, "callId", c->call_id);
        mp_pack_kv_str(&pk, "outcome", outcome_to_string(res->outcome));
        mp_pack_kv_str(&pk, "limit", res->limit);
        mp_pack_kv_str(&pk, "detail", res->detail[0] ? res->detail : NULL);
        mp_pack_kv_bool(&pk, "partial", res->partial);
        pack_channel(&pk, "stdout", &res->out, true);
        pack_channel(&pk, "stderr", &res->err, true);
        pack_channel(&pk, "result", &res->result, res->has_result && res->outcome == OUTCOME_OK);
        mp_pack_cstr(&pk, "exception");
        if (exc) {
                msgpack_pack_map(&pk, 3);
                mp_pack_kv_str(&pk, "type", res->report.exc_type);
                pack_channel(&pk, "message", &res->report.exc_message, true);
                pack_channel(&pk, "traceback", &res->report.exc_traceback, true);
        } else
                msgpack_pack_nil(&pk);

        /* The contract's elapsedMs at the top level; the breakdown is in timing. */
        mp_pack_kv_uint(&pk, "elapsedMs", usec_to_ms(c->admit_usec, c->end_usec));
        mp_pack_cstr(&pk, "timing");
        msgpack_pack_map(&pk, 5);
        mp_pack_kv_uint(&pk, "elapsedMs", usec_to_ms(c->admit_usec, c->end_usec));
        mp_pack_kv_uint(&pk, "elapsedUs", c->end_usec > c->admit_usec ? c->end_usec - c->admit_usec : 0);
        mp_pack_kv_uint(&pk, "queueMs", usec_to_ms(c->admit_usec, c->started ? c->start_usec : c->end_usec));
        mp_pack_kv_uint(&pk, "runMs", c->started ? usec_to_ms(c->start_usec, c->end_usec) : 0);
        mp_pack_kv_bool(&pk, "workerStarted", c->started);

        mp_pack_cstr(&pk, "exitStatus");
        if (c->started && res->start_usec) {
                msgpack_pack_map(&pk, 5);
                mp_pack_kv_uint(&pk, "pid", (uint64_t) res->pid);
                mp_pack_cstr(&pk, "code");
                if (res->exit_code >= 0)
                        msgpack_pack_int(&pk, res->exit_code);
                else
                        msgpack_pack_nil(&pk);
                mp_pack_cstr(&pk, "signal");
                if (res->signal)
                        msgpack_pack_int(&pk, res->signal);
                else
                        msgpack_pack_nil(&pk);
                mp_pack_kv_uint(&pk, "cpuMs", res->cpu_usec / 1000);
                mp_pack_kv_uint(&pk, "maxRssKb", res->max_rss_kb);
        } else
                msgpack_pack_nil(&pk);

        mp_pack_cstr(&pk, "workerError");
        if (res->stage[0]) {
                msgpack_pack_map(&pk, 2);
                mp_pack_kv_str(&pk, "stage", res->stage);
                mp_pack_kv_int(&pk, "errno", res->stage_errno);
        } else
                msgpack_pack_nil(&pk);

        pack_evidence(&pk, ctx);
}

int result_pack(msgpack_sbuffer *sb, const ResultContext *ctx, RunnerResult *res) {
        const size_t max = ctx->policy->max_result_bytes;
        bool show_result = res->has_result && res->outcome == OUTCOME_OK;
        FitText *texts[5] = { &res->out, &res->err, show_result ? &res->result : NULL,
                              res->report.exception ? &res->report.exc_message : NULL,
                              res->report.exception ? &res->report.exc_traceback : NULL };
        size_t text_total = 0, skeleton;
        int k;

        /* Measure the message with its texts, subtract them: the skeleton is what the
         * texts must share the bound with. */
        pack_all(sb, ctx, res);
        for (size_t i = 0; i < 5; i++)
                if (texts[i])
                        text_total += texts[i]->text_bytes;
        skeleton = sb->size - text_total;
        if (sb->size <= max)
                return 0;

        if (skeleton + STRING_HEADER_SLACK >= max)
                return -E2BIG;
        k = fit_texts_to_budget(texts, 5, max - skeleton - STRING_HEADER_SLACK);
        if (k < 0)
                return k;
        msgpack_sbuffer_clear(sb);
        pack_all(sb, ctx, res);
        return sb->size <= max ? 0 : -E2BIG;
}
