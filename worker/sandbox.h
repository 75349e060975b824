/* SPDX-License-Identifier: MIT */
/* Entering the sandbox. A worker is created (by the supervisor in exec mode, by the
 * zygote in zygote mode) with clone(CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|
 * NEWCGROUP); its creator writes "uid uid 1" / "gid gid 1" maps and then lets it go.
 *
 *   sandbox_become()  in the new child: drop supplementary groups, switch to the
 *                     worker uid/gid, keep the namespace capabilities needed to build
 *                     the root (and, before an exec, carry them as ambient caps).
 *   sandbox_enter()   build the minimal root (pivot_root), mount the call's /tmp and
 *                     /inputs, drop every capability and the bounding set,
 *                     no_new_privs, rlimits, close stray fds, seccomp.
 *
 * Both take a prepared plan and are the same in both start modes; a failing step is
 * reported as (stage, errno) so the supervisor never runs code in a half-built sandbox. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SANDBOX_MAX_INPUTS 4
#define SANDBOX_ID_MAX 64

typedef enum SandboxStage {
        SANDBOX_STAGE_NONE,
        SANDBOX_STAGE_SYNC,      /* waiting for the creator to write the id maps */
        SANDBOX_STAGE_IDENTITY,  /* setgroups / setresgid / setresuid */
        SANDBOX_STAGE_CAPS_KEEP, /* keeping namespace capabilities for setup */
        SANDBOX_STAGE_EXEC,      /* exec of the worker binary (exec mode) */
        SANDBOX_STAGE_PLAN,      /* reading or decoding the plan */
        SANDBOX_STAGE_MOUNT_PRIVATE,
        SANDBOX_STAGE_MOUNT_ROOT, /* tmpfs for the new root */
        SANDBOX_STAGE_MOUNT_BIND, /* read-only binds of the runtime */
        SANDBOX_STAGE_MOUNT_DEV,
        SANDBOX_STAGE_MOUNT_TMP,
        SANDBOX_STAGE_MOUNT_INPUTS,
        SANDBOX_STAGE_WRITE_INPUTS,
        SANDBOX_STAGE_PIVOT_ROOT,
        SANDBOX_STAGE_REMOUNT_RO,
        SANDBOX_STAGE_HOSTNAME,
        SANDBOX_STAGE_FDS,
        SANDBOX_STAGE_CAPS_DROP,
        SANDBOX_STAGE_NO_NEW_PRIVS,
        SANDBOX_STAGE_LANDLOCK,
        SANDBOX_STAGE_RLIMITS,
        SANDBOX_STAGE_SECCOMP,
        SANDBOX_STAGE_PYTHON_INIT,
        SANDBOX_STAGE_PYTHON_RUN,
        _SANDBOX_STAGE_MAX,
} SandboxStage;

const char *sandbox_stage_to_string(SandboxStage s);

typedef enum SandboxInputKind {
        SANDBOX_INPUT_READ_SOURCE,
        SANDBOX_INPUT_ATTACHMENT,
} SandboxInputKind;

typedef struct SandboxInput {
        char id[SANDBOX_ID_MAX + 1];
        SandboxInputKind kind;
        const void *text; /* canonical text, written to /inputs/<id>.txt */
        size_t text_len;
        const void *original; /* attachments: original bytes, /inputs/<id>.original */
        size_t original_len;
        char media_type[128];
} SandboxInput;

typedef struct SandboxPlan {
        uid_t uid; /* same number inside and on the host */
        gid_t gid;
        uint64_t memory_bytes;            /* RLIMIT_AS */
        uint32_t cpu_seconds;             /* RLIMIT_CPU, soft = hard (SIGKILL: init ignores SIGXCPU) */
        uint64_t file_bytes;              /* RLIMIT_FSIZE */
        uint32_t open_files;              /* RLIMIT_NOFILE */
        uint32_t processes;               /* RLIMIT_NPROC */
        uint64_t tmp_bytes;               /* /tmp tmpfs size */
        const struct sock_fprog *seccomp; /* loaded last; NULL only in unit tests of earlier steps */
        SandboxInput inputs[SANDBOX_MAX_INPUTS];
        size_t n_inputs;
        int max_keep_fd; /* fds 0..max_keep_fd stay open; everything above is closed */
} SandboxPlan;

/* The read-only runtime binds (host path == sandbox path). */
extern const char *const sandbox_runtime_paths[];

/* The creator's side: write "id id 1" uid and gid maps for a child in a new user
 * namespace (needs CAP_SETUID/CAP_SETGID on the host). */
int sandbox_write_id_maps(pid_t pid, uid_t uid, gid_t gid);
/* In a new child: put src[0..n) at descriptors 0..n-1 (n <= 8), whatever numbers they had. */
int sandbox_install_fds(const int *src, int n);

int sandbox_become(const SandboxPlan *plan, bool for_exec, SandboxStage *ret_stage);
/* The Landlock ABI version this kernel offers, 0 if none (the layer is then skipped). */
int sandbox_landlock_abi(void);
int sandbox_enter(const SandboxPlan *plan, SandboxStage *ret_stage);
/* sandbox_enter() in two halves: what is the same for every call (the private mount
 * namespace's minimal root, pivot_root, hostname), which a pre-started worker does
 * before its call arrives, and what belongs to the call (/tmp, /inputs, fds, caps,
 * no_new_privs, rlimits, seccomp). */
int sandbox_prepare(SandboxStage *ret_stage);
int sandbox_finish(const SandboxPlan *plan, SandboxStage *ret_stage);
