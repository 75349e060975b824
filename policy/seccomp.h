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
void policy_seccomp_fprog_free(struct sock_fprog *p);
/* Load a compiled program into the calling thread (no_new_privs must already be set). */
int policy_seccomp_load(const struct sock_fprog *p);
