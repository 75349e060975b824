/* SPDX-License-Identifier: MIT */
/* Children created with a pidfd, and glibc's thread-id cache renewed after a raw clone. */
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

/* A child of a raw clone is a copy of its parent's calling thread, glibc's descriptor
 * included, and that still records the parent's kernel thread id: pthread_getcpuclockid
 * (time.thread_time, clock_gettime of the main thread), pthread_kill of itself and the
 * owner of a recursive or robust mutex would use a tid that is not the child's (glibc's
 * own fork() fixes it, a raw clone cannot). prepare(), in the parent before its
 * clones, finds where glibc keeps it and checks it (-errno: unknown here, renew() will
 * then do nothing); renew(), first thing in the child, writes the child's own. */
int clone_tid_cache_prepare(void);
void clone_tid_cache_renew(void);
