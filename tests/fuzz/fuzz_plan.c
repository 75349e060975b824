/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the plan decoder (contract/plan.c), the worker's reading of what
 * the supervisor hands it. Any input is decoded or refused with -EBADMSG (or -ENOMEM),
 * and a decoded plan survives a round trip: plan_encode() of the decoded plan, decoded
 * again, gives the same plan. The round trip stays inside what the encoder can express:
 * ids and media types are C strings and excCeiling is the policy's 32-bit
 * maxOutputCharacters, so a decoded plan outside that is only decoded.
 *
 * It found that plan_decode() handed its bytes to msgpack-c without mp_validate(), so
 * a declared count was allocated before anything checked it (5 bytes dd ff ff ff ff
 * asked for 128 GiB); fixed, and both inputs are kept as seeds
 * (corpus/fuzz_plan/regress-*).
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/mp.h"
#include "contract/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool bytes_eq(const void *a, size_t a_len, const void *b, size_t b_len) {
        return a_len == b_len && (a_len == 0 || memcmp(a, b, a_len) == 0);
}

static bool inputs_eq(const PlanInput *a, const PlanInput *b) {
        if (strcmp(a->id, b->id) != 0 || a->kind != b->kind || !bytes_eq(a->text, a->text_len, b->text, b->text_len))
                return false;
        if (a->kind != PLAN_INPUT_ATTACHMENT)
                return true;
        return bytes_eq(a->original, a->original_len, b->original, b->original_len) &&
               strcmp(a->media_type, b->media_type) == 0;
}

static bool plans_eq(const WorkerPlan *a, const WorkerPlan *b) {
        const PlanSandbox *x = &a->sandbox, *y = &b->sandbox;

        if (!bytes_eq(a->code, a->code_len, b->code, b->code_len) || a->exc_ceiling != b->exc_ceiling ||
            a->deny != b->deny)
                return false;
        if (x->uid != y->uid || x->gid != y->gid || x->memory_bytes != y->memory_bytes ||
            x->cpu_seconds != y->cpu_seconds || x->file_bytes != y->file_bytes || x->open_files != y->open_files ||
            x->processes != y->processes || x->tmp_bytes != y->tmp_bytes || x->outputs != y->outputs ||
            x->n_inputs != y->n_inputs)
                return false;
        for (size_t i = 0; i < x->n_inputs; i++)
                if (!inputs_eq(&x->inputs[i], &y->inputs[i]))
                        return false;
        return true;
}

/* What plan_encode() can express of a decoded plan. */
static bool encodable(const WorkerPlan *p) {
        if (p->exc_ceiling > UINT32_MAX)
                return false;
        for (size_t i = 0; i < p->sandbox.n_inputs; i++)
                if (p->sandbox.inputs[i].id[0] == '\0')
                        return false;
        return true;
}

static void round_trip(const WorkerPlan *p) {
        MpWriter w;
        WorkerPlan again;
        Policy pol;
        void *copy;

        policy_init_defaults(&pol);
        pol.worker_uid = p->sandbox.uid;
        pol.worker_gid = p->sandbox.gid;
        pol.memory_bytes = p->sandbox.memory_bytes;
        pol.cpu_seconds = p->sandbox.cpu_seconds;
        pol.file_bytes = p->sandbox.file_bytes;
        pol.open_files = p->sandbox.open_files;
        pol.processes = p->sandbox.processes;
        pol.tmp_bytes = p->sandbox.tmp_bytes;
        pol.max_artifacts = p->sandbox.outputs ? 16 : 0;
        pol.max_output_characters = (uint32_t) p->exc_ceiling;
        pol.seccomp_deny = p->deny;
        mp_writer_init(&w, 0);
        if (plan_encode(p->code, p->code_len, &pol, p->sandbox.inputs, p->sandbox.n_inputs, &w) < 0)
                abort(); /* out of memory: nothing to learn */
        copy = malloc(w.sb.size);
        if (!copy)
                abort();
        memcpy(copy, w.sb.data, w.sb.size);
        if (plan_decode(copy, w.sb.size, &again) < 0)
                __builtin_trap(); /* the encoder wrote a plan its own decoder refuses */
        if (!plans_eq(p, &again))
                __builtin_trap();
        plan_done(&again);
        mp_writer_done(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WorkerPlan p;
        void *buf;
        int r;

        /* plan_decode() takes ownership of a malloc'd buffer of exactly the input's size. */
        buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        if (size)
                memcpy(buf, data, size);
        r = plan_decode(buf, size, &p);
        if (r < 0) {
                if (r != -EBADMSG && r != -ENOMEM)
                        __builtin_trap();
                return 0;
        }
        if (p.sandbox.n_inputs > PLAN_MAX_INPUTS || p.code_len > size)
                __builtin_trap();
        for (size_t i = 0; i < p.sandbox.n_inputs; i++)
                if (strlen(p.sandbox.inputs[i].id) > PLAN_INPUT_ID_MAX ||
                    strlen(p.sandbox.inputs[i].media_type) >= sizeof p.sandbox.inputs[i].media_type)
                        __builtin_trap();
        if (encodable(&p))
                round_trip(&p);
        plan_done(&p);
        return 0;
}
