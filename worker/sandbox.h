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

/* The read-only runtime binds (host path == sandbox path). */
extern const char *const sandbox_runtime_paths[];

/* In a new child: put src[0..n) at descriptors 0..n-1 (n <= 8), whatever numbers they had. */
int sandbox_install_fds(const int *src, int n);

int sandbox_become(uid_t uid, gid_t gid, bool for_exec, SetupStage *ret_stage);
/* seccomp: the compiled filter, loaded last. */
int sandbox_enter(const PlanSandbox *plan, const struct sock_fprog *seccomp, SetupStage *ret_stage);
/* sandbox_enter() in two halves: what is the same for every call (the private mount
 * namespace's minimal root, pivot_root, hostname), which a pre-started worker does
 * before its call arrives, and what belongs to the call (/tmp, /inputs, fds, caps,
 * no_new_privs, rlimits, seccomp). */
int sandbox_prepare(SetupStage *ret_stage);
int sandbox_finish(const PlanSandbox *plan, const struct sock_fprog *seccomp, SetupStage *ret_stage);
