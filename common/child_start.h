/* SPDX-License-Identifier: MIT */
/* A new worker's first steps in the child its creator has just cloned, before anything
 * of the sandbox: enter its cgroup, put its descriptors in place, keep the capabilities
 * its setup needs across an exec. No sandbox types, no allocation, no locks: these run
 * in a copy of the creator's address space (the supervisor's in exec mode). */
#pragma once

#include <stddef.h>

/* Move the calling process into its cgroup: "0" written to each cgroup.procs
 * descriptor (one per hierarchy, opened O_WRONLY by the supervisor as root, which is
 * whose credentials the kernel checks), then closed. The worker does it itself, first
 * thing after its creator released it: the move waits for an RCU grace period in the
 * kernel, and so that wait blocks neither the supervisor's loop nor the zygote.
 * Returns 0 or -errno. */
int child_enter_cgroup(const int *fds, size_t n);
/* Put src[0..n) at descriptors 0..n-1 (n <= 8), whatever numbers they had. 0 or -errno. */
int child_install_fds(const int *src, int n);
/* Before an exec: keep CAP_SYS_ADMIN, CAP_SETPCAP, CAP_SETUID and CAP_SETGID of the
 * process's user namespace as ambient capabilities across it (what the worker's setup
 * and its change of identity need afterwards). 0 or -errno. */
int child_carry_caps(void);
