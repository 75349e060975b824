/* SPDX-License-Identifier: MIT */
/* The plan's writer (the supervisor) and its validating decoder (the worker). */
#include "contract/plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/mp.h"

int plan_encode(const char *code, size_t code_len, const Policy *p, const PlanInput *inputs, size_t n_inputs,
                MpWriter *w) {
        msgpack_packer *pk = &w->pk;

        msgpack_pack_map(pk, 14);
        mp_pack_cstr(pk, "code");
        mp_pack_strn(pk, code, code_len);
        mp_pack_kv_uint(pk, "uid", p->worker_uid);
        mp_pack_kv_uint(pk, "gid", p->worker_gid);
        mp_pack_kv_uint(pk, "memoryBytes", p->memory_bytes);
        mp_pack_kv_uint(pk, "cpuSeconds", p->cpu_seconds);
        mp_pack_kv_uint(pk, "fileBytes", p->file_bytes);
        mp_pack_kv_uint(pk, "openFiles", p->open_files);
        mp_pack_kv_uint(pk, "processes", p->processes);
        mp_pack_kv_uint(pk, "tmpBytes", p->tmp_bytes);
        mp_pack_kv_bool(pk, "outputs", p->max_artifacts > 0);
        mp_pack_kv_uint(pk, "excCeiling", p->max_output_characters);
        mp_pack_kv_bool(pk, "denyKill", p->seccomp_deny == POLICY_DENY_KILL);
        mp_pack_kv_uint(pk, "pythonPackages", p->python_packages);
        mp_pack_cstr(pk, "inputs");
        msgpack_pack_array(pk, n_inputs);
        for (size_t i = 0; i < n_inputs; i++) {
                const PlanInput *in = &inputs[i];
                msgpack_pack_map(pk, 5);
                mp_pack_kv_str(pk, "id", in->id);
                mp_pack_kv_str(pk, "kind",
                               in->kind == PLAN_INPUT_ATTACHMENT ? "attachment"
                               : in->kind == PLAN_INPUT_OUTPUT   ? "output"
                                                                 : "read_source");
                mp_pack_cstr(pk, "text");
                msgpack_pack_bin(pk, in->text_len);
                msgpack_pack_bin_body(pk, in->text, in->text_len);
                mp_pack_cstr(pk, "original");
                if (in->kind == PLAN_INPUT_ATTACHMENT) {
                        msgpack_pack_bin(pk, in->original_len);
                        msgpack_pack_bin_body(pk, in->original, in->original_len);
                } else
                        msgpack_pack_nil(pk);
                mp_pack_kv_str(pk, "mediaType", in->media_type);
        }
        return mp_writer_error(w);
}

static int get_u32(const msgpack_object *m, const char *key, uint32_t *ret) {
        uint64_t v;
        int r = mp_get_uint(m, key, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

/* One entry of the plan's inputs into in. 0, or < 0 (plan_decode() makes it -EBADMSG). */
static int decode_input(const msgpack_object *o, PlanInput *in) {
        const char *s, *t;
        uint32_t slen, tl;
        int r;

        if ((r = mp_get_str(o, "id", &s, &slen)) < 0)
                return r;
        if (slen == 0 || slen > PLAN_INPUT_ID_MAX)
                return -EBADMSG;
        memcpy(in->id, s, slen);
        in->id[slen] = 0;
        if ((r = mp_get_str(o, "kind", &s, &slen)) < 0)
                return r;
        if (slen == 10 && memcmp(s, "attachment", 10) == 0)
                in->kind = PLAN_INPUT_ATTACHMENT;
        else if (slen == 6 && memcmp(s, "output", 6) == 0)
                in->kind = PLAN_INPUT_OUTPUT;
        else
                in->kind = PLAN_INPUT_READ_SOURCE;
        if ((r = mp_get_bin(o, "text", &t, &tl)) < 0)
                return r;
        in->text = t;
        in->text_len = tl;
        if (in->kind == PLAN_INPUT_ATTACHMENT) {
                if ((r = mp_get_bin(o, "original", &t, &tl)) < 0)
                        return r;
                in->original = t;
                in->original_len = tl;
                if (mp_get_str(o, "mediaType", &s, &slen) == 0 && slen < sizeof in->media_type) {
                        memcpy(in->media_type, s, slen);
                        in->media_type[slen] = 0;
                }
        }
        return 0;
}

int plan_decode(void *buf, size_t len, WorkerPlan *ret) {
        WorkerPlan p = { .buf = buf };
        const msgpack_object *root, *inputs;
        uint32_t slen;
        uint64_t u;
        bool b;
        int r;

        msgpack_unpacked_init(&p.unpacked);
        /* Validate before msgpack-c allocates for the declared counts: 5 bytes must not
         * be able to ask for gigabytes (found by fuzz_plan). */
        if (mp_validate(buf, len, PLAN_MAX_DEPTH, NULL) < 0 ||
            msgpack_unpack_next(&p.unpacked, buf, len, NULL) != MSGPACK_UNPACK_SUCCESS) {
                r = -EBADMSG;
                goto fail;
        }
        root = &p.unpacked.data;
        if ((r = mp_get_str(root, "code", &p.code, &slen)) < 0)
                goto fail;
        p.code_len = slen;
        if ((r = mp_get_uint(root, "uid", &u)) < 0)
                goto fail;
        p.sandbox.uid = (uid_t) u;
        if ((r = mp_get_uint(root, "gid", &u)) < 0)
                goto fail;
        p.sandbox.gid = (gid_t) u;
        if ((r = mp_get_uint(root, "memoryBytes", &p.sandbox.memory_bytes)) < 0 ||
            (r = get_u32(root, "cpuSeconds", &p.sandbox.cpu_seconds)) < 0 ||
            (r = mp_get_uint(root, "fileBytes", &p.sandbox.file_bytes)) < 0 ||
            (r = get_u32(root, "openFiles", &p.sandbox.open_files)) < 0 ||
            (r = get_u32(root, "processes", &p.sandbox.processes)) < 0 ||
            (r = mp_get_uint(root, "tmpBytes", &p.sandbox.tmp_bytes)) < 0 ||
            (r = mp_get_bool(root, "outputs", &p.sandbox.outputs)) < 0 ||
            (r = mp_get_uint(root, "excCeiling", &p.exc_ceiling)) < 0 || (r = mp_get_bool(root, "denyKill", &b)) < 0)
                goto fail;
        p.deny = b ? POLICY_DENY_KILL : POLICY_DENY_ERRNO;
        if ((r = get_u32(root, "pythonPackages", &p.python_packages)) < 0)
                goto fail;
        if (p.python_packages >> _POLICY_PACKAGE_MAX) {
                r = -EBADMSG;
                goto fail;
        }

        inputs = mp_map_get(root, "inputs");
        if (!inputs || inputs->type != MSGPACK_OBJECT_ARRAY || inputs->via.array.size > PLAN_MAX_INPUTS) {
                r = -EBADMSG;
                goto fail;
        }
        for (uint32_t i = 0; i < inputs->via.array.size; i++) {
                if ((r = decode_input(&inputs->via.array.ptr[i], &p.sandbox.inputs[i])) < 0)
                        goto fail;
                p.sandbox.n_inputs++;
        }
        *ret = p;
        return 0;
fail:
        msgpack_unpacked_destroy(&p.unpacked);
        free(buf);
        return r == -ENOENT || r == -EINVAL || r == -ERANGE ? -EBADMSG : r;
}

void plan_done(WorkerPlan *p) {
        msgpack_unpacked_destroy(&p->unpacked);
        free(p->buf);
        p->buf = NULL;
}
