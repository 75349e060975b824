/* SPDX-License-Identifier: MIT */
/* Entering the sandbox. A worker is created (by the supervisor in exec mode, by the
 * zygote in zygote mode) with clone(CLONE_NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|
 * NEWCGROUP); its creator writes "uid uid 1" / "gid gid 1" maps and then lets it go.
 *
 *   sandbox_runtime_open()  still with its creator's (root's) credentials, in its own
 *                     mount namespace: open the runtime paths (O_PATH), so that the
 *                     binds below need no path traversal by the worker's uid.
 *   sandbox_become()  drop supplementary groups, switch to the worker uid/gid, keep
 *                     the namespace capabilities needed to build the root.
 *   sandbox_enter()   build the minimal root (pivot_root) from the runtime fds and the
 *                     worker's /tmp, size /tmp to the call's tmpBytes, mount /inputs
 *                     (a call with sources) and /outputs, drop every capability and the
 *                     bounding set, no_new_privs, rlimits, close stray fds, seccomp.
 *
 * In exec mode the exec comes first (child_carry_caps(), common/child_start.h, makes the capabilities
 * sandbox_become() needs ambient), so the dynamic loader also still runs with root's
 * credentials and finds a libpython the worker uid could not reach.
 *
 * Each takes a prepared plan and is the same in both start modes; a failing step is
 * reported as (stage, errno) so the supervisor never runs code in a half-built sandbox. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/capability.h>
#include <sys/types.h>

#include "common/cleanup.h"

#include "contract/plan.h"
#include "contract/stage.h"

/* libcap's cap_free() takes the object itself, not its address: this is the form for
 * _cleanup_ (passing &caps to cap_free makes libcap refuse it and free nothing). */
static inline void cap_freep(cap_t *caps) {
        if (*caps)
                cap_free(*caps);
}
#define _cleanup_cap_free_ _cleanup_(cap_freep)

/* The read-only runtime binds (host path == sandbox path), one descriptor each: the
 * interpreter's (runtime_path_next() over runtime_binds), then those of the policy's
 * pythonPackages (runtime_package_bind_next()), in that order (contract/runtime.h). */
#define SANDBOX_RUNTIME_MAX 64
/* The host's data files the standard library reads, bound read-only at their own paths
 * when the host has them (time zones, the C.UTF-8 locale, the MIME types table): see
 * sandbox_host_data[] in sandbox.c and docs/security.md. -1: not on this host. */
#define SANDBOX_HOST_DATA_MAX 3
typedef struct SandboxRuntime {
        size_t n;
        uint32_t packages; /* the pythonPackages mask the binds were opened for */
        int fd[SANDBOX_RUNTIME_MAX];
        int data_fd[SANDBOX_HOST_DATA_MAX];
} SandboxRuntime;
/* Closed as it is: nothing open. */
#define SANDBOX_RUNTIME_EMPTY                                                                                          \
        {                                                                                                              \
                .data_fd = { -1, -1, -1 }                                                                              \
        }

/* packages: the policy's pythonPackages mask (0: the interpreter's binds alone). */
int sandbox_runtime_open(uint32_t packages, SandboxRuntime *ret, SetupStage *ret_stage);
void sandbox_runtime_close(SandboxRuntime *rt);

int sandbox_become(uid_t uid, gid_t gid, SetupStage *ret_stage);
/* seccomp: the compiled filter, loaded last. */
int sandbox_enter(const SandboxRuntime *rt, const PlanSandbox *plan, const struct sock_fprog *seccomp,
                  SetupStage *ret_stage);
/* sandbox_enter() in two halves: what is the same for every call (the private mount
 * namespace's minimal root, pivot_root, hostname, an empty /tmp of tmp_bytes (0: one
 * page) as the working directory, the Landlock ruleset's rules for the root, /tmp and
 * /dev/null, the inherited hard limits read, and early, if not NULL: the early part of
 * the seccomp filter, policy_seccomp_compile_early(); NULL when it is inherited), which
 * a pre-started worker does before its call arrives, and what belongs to the call
 * (/tmp's size when the call's differs, /inputs, /outputs, fds, caps, no_new_privs,
 * Landlock applied, rlimits, seccomp: the whole filter, or the late part after an early
 * one). */
int sandbox_prepare(const SandboxRuntime *rt, const struct sock_fprog *early, uint64_t tmp_bytes,
                    SetupStage *ret_stage);
int sandbox_finish(const PlanSandbox *plan, const struct sock_fprog *seccomp, SetupStage *ret_stage);
