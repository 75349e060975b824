/* SPDX-License-Identifier: MIT */
/* One admitted call (call.h): its references and what it owns. */
#include "supervisor/call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "supervisor/runner.h"

int call_new(PolicySnapshot *policy, const char *code, size_t code_len, uint64_t code_chars, Source *const *sources,
             size_t n, Call **ret) {
        Call *c;

        if (n > PLAN_MAX_INPUTS)
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->code = malloc(code_len + 1);
        if (!c->code) {
                free(c);
                return -ENOMEM;
        }
        c->n_ref = 1;
        c->policy = policy_snapshot_ref(policy);
        memcpy(c->code, code, code_len);
        c->code[code_len] = 0;
        c->code_len = code_len;
        c->code_chars = code_chars;
        for (size_t i = 0; i < n; i++) {
                const Source *src = sources[i];
                PlanInput *in = &c->inputs[i];

                c->sources[i] = source_ref(sources[i]);
                snprintf(in->id, sizeof in->id, "%s", src->id);
                in->kind = src->output       ? PLAN_INPUT_OUTPUT
                           : src->attachment ? PLAN_INPUT_ATTACHMENT
                                             : PLAN_INPUT_READ_SOURCE;
                in->text = src->text;
                in->text_len = src->text_len;
                in->original = src->original;
                in->original_len = src->original_len;
                snprintf(in->media_type, sizeof in->media_type, "%s", src->media_type ?: "");
        }
        c->n_inputs = n;
        *ret = c;
        return 0;
}

int call_set_keep(Call *c, const ProtoRequest *req) {
        c->keep_requested = req->keep_requested;
        c->keep_all = req->keep_all;
        for (size_t i = 0; i < req->n_keep; i++) {
                c->keep[i] = strndup(req->keep[i].ptr, req->keep[i].len);
                if (!c->keep[i])
                        return -ENOMEM;
                c->n_keep = i + 1;
        }
        return 0;
}

static void call_free(Call *c) {
        sd_event_source_disable_unref(c->deadline);
        sd_event_source_disable_unref(c->heartbeat);
        /* The runner reads the call's policy: it goes first. */
        runner_free(c->runner);
        policy_snapshot_unref(c->policy);
        for (size_t i = 0; i < c->n_inputs; i++)
                source_unref(c->sources[i]);
        for (size_t i = 0; i < c->n_keep; i++)
                free(c->keep[i]);
        free(c->code);
        free(c);
}

DEFINE_TRIVIAL_REF_UNREF_FUNC(Call, call, call_free);
