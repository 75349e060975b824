/* SPDX-License-Identifier: MIT */
/* The plan the supervisor hands to a worker (a sealed memfd, msgpack): the code, the
 * sandbox plan, and the copies of the call's sources. */
#pragma once

#include <msgpack.h>

#include "policy/policy.h"
#include "worker/sandbox.h"

typedef struct WorkerPlan {
        const char *code; /* UTF-8, not NUL-terminated */
        size_t code_len;
        uint64_t exc_ceiling; /* characters kept of exception message / traceback */
        PolicyDenyAction deny;
        SandboxPlan sandbox;
        /* owns the memory the pointers above refer to */
        void *buf;
        msgpack_unpacked unpacked;
} WorkerPlan;

/* Encode: code, policy limits and inputs (sandbox->inputs point at caller memory). */
int plan_encode(const char *code, size_t code_len, const Policy *p, const SandboxInput *inputs, size_t n_inputs,
                msgpack_sbuffer *ret);
/* Decode from buf (takes ownership of buf, a malloc'd block). */
int plan_decode(void *buf, size_t len, WorkerPlan *ret);
void plan_done(WorkerPlan *p);
