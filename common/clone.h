/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Fork-like clone with a pidfd for the child (CLONE_PIDFD is added): clone3(2), or
 * clone(2) where clone3 is refused with ENOSYS (seccomp filters such as systemd's
 * RestrictNamespaces= do that). Returns the child's pid in the parent, 0 in the child,
 * -errno on failure. exit_signal is ignored by the kernel with CLONE_PARENT. */
pid_t clone_with_pidfd(uint64_t flags, int exit_signal, int *ret_pidfd);
