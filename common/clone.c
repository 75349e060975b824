/* SPDX-License-Identifier: MIT */
#include "common/clone.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

pid_t clone_with_pidfd(uint64_t flags, int exit_signal, int *ret_pidfd) {
        struct clone_args args = {
                .flags = flags | CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) ret_pidfd,
                .exit_signal = (uint64_t) exit_signal,
        };
        long pid = syscall(SYS_clone3, &args, sizeof args);

        if (pid < 0 && errno == ENOSYS)
                /* x86_64 clone(flags, stack, parent_tid, child_tid, tls): with CLONE_PIDFD
                 * the pidfd is written through parent_tid. */
                pid = syscall(SYS_clone, (unsigned long) (flags | CLONE_PIDFD) | (unsigned long) exit_signal, NULL,
                              ret_pidfd, NULL, 0);
        return pid < 0 ? -errno : (pid_t) pid;
}

pid_t clone_into_cgroup_with_pidfd(uint64_t flags, int exit_signal, int cgroup_fd, int *ret_pidfd) {
        struct clone_args args = {
                .flags = flags | CLONE_PIDFD | CLONE_INTO_CGROUP,
                .pidfd = (uint64_t) (uintptr_t) ret_pidfd,
                .exit_signal = (uint64_t) exit_signal,
                .cgroup = (uint64_t) cgroup_fd,
        };
        long pid = syscall(SYS_clone3, &args, sizeof args);

        return pid < 0 ? -errno : (pid_t) pid;
}
