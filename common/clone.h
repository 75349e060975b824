/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Fork-like clone with a pidfd for the child (CLONE_PIDFD is added): clone3(2), or
 * clone(2) where clone3 is refused with ENOSYS (seccomp filters such as systemd's
 * RestrictNamespaces= do that). Returns the child's pid in the parent, 0 in the child,
 * -errno on failure. exit_signal is ignored by the kernel with CLONE_PARENT. */
pid_t clone_with_pidfd(uint64_t flags, int exit_signal, int *ret_pidfd);
/* The same, born in the cgroup v2 directory cgroup_fd (CLONE_INTO_CGROUP, Linux 5.7):
 * no migration afterwards. No clone(2) fallback: -ENOSYS (or -E2BIG from a kernel
 * whose clone3 is older) tells the caller to clone plainly and move the child. */
pid_t clone_into_cgroup_with_pidfd(uint64_t flags, int exit_signal, int cgroup_fd, int *ret_pidfd);
