/* SPDX-License-Identifier: MIT */
/* The plan the supervisor hands to a worker (a sealed memfd at WORKER_FD_PLAN,
 * msgpack): the code, what the sandbox is built from, and the copies of the call's
 * sources. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/mp.h"
#include "policy/policy.h"

/* A call mounts at most this many inputs, with ids of at most this many bytes; the
 * protocol's bounds are tied to these by _Static_assert (supervisor/protocol.h). */
#define PLAN_MAX_INPUTS 4
#define PLAN_INPUT_ID_MAX 64
/* A plan nests at most: map > inputs array > input map > value. */
#define PLAN_MAX_DEPTH 4
/* The largest plan a worker reads. */
#define PLAN_MAX_BYTES (1u << 30)

typedef enum PlanInputKind {
        PLAN_INPUT_READ_SOURCE,
        PLAN_INPUT_ATTACHMENT,
        PLAN_INPUT_OUTPUT, /* a kept output: its bytes (text) at /inputs/<id>, no suffix */
} PlanInputKind;

typedef struct PlanInput {
        char id[PLAN_INPUT_ID_MAX + 1];
        PlanInputKind kind;
        const void *text; /* canonical text, written to /inputs/<id>.txt (outputs: /inputs/<id>) */
        size_t text_len;
        const void *original; /* attachments: original bytes, /inputs/<id>.original */
        size_t original_len;
        char media_type[128];
} PlanInput;

typedef struct PlanSandbox {
        uid_t uid; /* same number inside and on the host */
        gid_t gid;
        uint64_t memory_bytes; /* RLIMIT_AS above what the worker has mapped then; the cgroup's limit */
        uint32_t cpu_seconds;  /* RLIMIT_CPU, soft = hard (SIGKILL: init ignores SIGXCPU) */
        uint64_t file_bytes;   /* RLIMIT_FSIZE */
        uint32_t open_files;   /* RLIMIT_NOFILE */
        uint32_t processes;    /* RLIMIT_NPROC */
        uint64_t tmp_bytes;    /* /tmp tmpfs size */
        bool outputs;          /* mount the supervisor's tmpfs (WORKER_FD_OUTPUTS) on /outputs */
        PlanInput inputs[PLAN_MAX_INPUTS];
        size_t n_inputs;
} PlanSandbox;

typedef struct WorkerPlan {
        const char *code; /* UTF-8, not NUL-terminated */
        size_t code_len;
        uint64_t exc_ceiling; /* characters kept of exception message / traceback */
        PolicyDenyAction deny;
        uint32_t python_packages; /* the policy's pythonPackages (POLICY_PACKAGE_BIT() mask) */
        PlanSandbox sandbox;
        /* owns the memory the pointers above refer to */
        void *buf;
        msgpack_unpacked unpacked;
} WorkerPlan;

/* Encode: code, policy limits and inputs (sandbox->inputs point at caller memory). */
int plan_encode(const char *code, size_t code_len, const Policy *p, const PlanInput *inputs, size_t n_inputs,
                MpWriter *w);
/* Decode from buf (takes ownership of buf, a malloc'd block). */
int plan_decode(void *buf, size_t len, WorkerPlan *ret);
void plan_done(WorkerPlan *p);
