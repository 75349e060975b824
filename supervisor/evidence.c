/* SPDX-License-Identifier: MIT */
/* What a result carries so that it can be trusted (evidence.h): the evidence (the code's
 * digest, each input with its digest and, for a kept output, the call that made it, the
 * runtime, the policy and its limits), the timing, and how the worker ended. */
#include "supervisor/evidence.h"

#include "common/mp.h"

static const char *source_kind_name(const ProtoSourceInfo *s) {
        return s->output ? "output" : s->attachment ? "attachment" : "read_source";
}

static void pack_source_info(msgpack_packer *pk, const ProtoSourceInfo *s) {
        msgpack_pack_map(pk, s->attachment ? 7 : s->output ? 6 : 4);
        mp_pack_kv_str(pk, "sourceId", s->id);
        mp_pack_kv_str(pk, "kind", source_kind_name(s));
        mp_pack_kv_uint(pk, "bytes", s->text_bytes);
        mp_pack_kv_str(pk, "sha256", s->text_sha256);
        if (s->attachment) {
                mp_pack_kv_uint(pk, "originalBytes", s->original_bytes);
                mp_pack_kv_str(pk, "originalSha256", s->original_sha256);
                mp_pack_kv_str(pk, "mediaType", s->media_type);
        } else if (s->output) {
                /* The chain's link: which call of the invocation made these bytes. */
                mp_pack_kv_str(pk, "mediaType", s->media_type);
                mp_pack_cstr(pk, "producedBy");
                msgpack_pack_map(pk, 2);
                mp_pack_kv_uint(pk, "call", s->produced_by);
                mp_pack_kv_str(pk, "sha256", s->text_sha256);
        }
}

void evidence_pack(msgpack_packer *pk, const ProtoResult *r) {
        const Policy *p = r->policy;

        mp_pack_cstr(pk, "evidence");
        msgpack_pack_map(pk, 6);
        mp_pack_kv_str(pk, "codeSha256", r->code_sha256);
        mp_pack_kv_uint(pk, "codeCharacters", r->code_chars);
        mp_pack_cstr(pk, "inputs");
        msgpack_pack_array(pk, r->n_sources);
        for (size_t i = 0; i < r->n_sources; i++)
                pack_source_info(pk, &r->sources[i]);
        mp_pack_cstr(pk, "runtime");
        msgpack_pack_map(pk, 7);
        mp_pack_kv_str(pk, "codeinterp", CODEINTERP_VERSION);
        mp_pack_kv_str(pk, "python", CODEINTERP_PY_VERSION);
        mp_pack_kv_str(pk, "workerStart", r->worker_start);
        mp_pack_kv_str(pk, "seccomp", policy_deny_action_to_string(p->seccomp_deny));
        mp_pack_kv_uint(pk, "landlock", (uint64_t) r->landlock_abi);
        mp_pack_kv_str(pk, "cgroup", proto_cgroup_name(r->cgroup));
        mp_pack_kv_bool(pk, "rootless", r->rootless);
        mp_pack_cstr(pk, "policy");
        msgpack_pack_map(pk, 2);
        mp_pack_kv_str(pk, "name", p->name);
        mp_pack_kv_str(pk, "sha256", p->sha256);
        proto_pack_limits(pk, p);
}

static uint64_t usec_to_ms(uint64_t a, uint64_t b) {
        return b > a ? (b - a) / 1000 : 0;
}

void evidence_pack_timing(msgpack_packer *pk, const ProtoResult *r) {
        /* The contract's elapsedMs at the top level; the breakdown is in timing. */
        mp_pack_kv_uint(pk, "elapsedMs", usec_to_ms(r->admit_usec, r->end_usec));
        mp_pack_cstr(pk, "timing");
        msgpack_pack_map(pk, 6);
        mp_pack_kv_uint(pk, "elapsedMs", usec_to_ms(r->admit_usec, r->end_usec));
        mp_pack_kv_uint(pk, "elapsedUs", r->end_usec > r->admit_usec ? r->end_usec - r->admit_usec : 0);
        mp_pack_kv_uint(pk, "queueMs", usec_to_ms(r->admit_usec, r->started ? r->start_usec : r->end_usec));
        mp_pack_kv_uint(pk, "runMs", r->started ? usec_to_ms(r->start_usec, r->end_usec) : 0);
        mp_pack_kv_bool(pk, "workerStarted", r->started);
        mp_pack_kv_str(pk, "worker", r->worker_how);
}

void evidence_pack_exit_status(msgpack_packer *pk, const ProtoResult *r) {
        mp_pack_cstr(pk, "exitStatus");
        if (!r->has_exit) {
                msgpack_pack_nil(pk);
                return;
        }
        msgpack_pack_map(pk, 7);
        mp_pack_kv_uint(pk, "pid", (uint64_t) r->pid);
        mp_pack_kv_uint_or_nil(pk, "hostUid", r->has_host_uid, r->host_uid);
        mp_pack_kv_int_or_nil(pk, "code", r->exit_code >= 0, r->exit_code);
        mp_pack_kv_int_or_nil(pk, "signal", r->signal != 0, r->signal);
        mp_pack_kv_uint(pk, "cpuMs", r->cpu_usec / 1000);
        mp_pack_kv_uint(pk, "maxRssKb", r->max_rss_kb);
        mp_pack_kv_uint_or_nil(pk, "memoryPeakBytes", r->has_memory_peak, r->memory_peak_bytes);
}
