/* SPDX-License-Identifier: MIT */
/* The worker's seccomp allow-list, built with libseccomp and compiled once to BPF so a
 * forked worker can load it with one syscall. The list is in policy/seccomp.c and
 * explained in docs/security.md. */
#pragma once

#include <linux/filter.h>
#include <seccomp.h>

#include "policy/policy.h"

/* Build the filter context (caller releases with seccomp_release). */
int policy_seccomp_build(PolicyDenyAction deny, scmp_filter_ctx *ret);
/* Build and export to a malloc'd BPF program. */
int policy_seccomp_compile(PolicyDenyAction deny, struct sock_fprog *ret);
/* The filter in two parts, for a pre-started worker: the early part (the errno-mode
 * filter with seccomp_late[] allowed) is in place before any call exists (loaded by the
 * zygote into itself and inherited, or by the worker while it prepares); the late part,
 * loaded when the call arrives, gives those syscalls the whole filter's verdicts (errno
 * mode: a small filter on a default of allow; kill mode: the whole kill-mode filter).
 * Stacked, the two decide every syscall as the whole filter of the call's mode does
 * (policy/seccomp.c, tests/unit/test_seccomp.c). */
int policy_seccomp_compile_early(struct sock_fprog *ret);
int policy_seccomp_compile_late(PolicyDenyAction deny, struct sock_fprog *ret);
void policy_seccomp_fprog_free(struct sock_fprog *p);
/* Load a compiled program into the calling thread (no_new_privs must already be set). */
int policy_seccomp_load(const struct sock_fprog *p);
