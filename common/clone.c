/* SPDX-License-Identifier: MIT */
/* Creating children with a pidfd: clone3 (into a cgroup where asked) with the clone(2)
 * fallback, and the child's own thread id in glibc's cache after a raw clone (clone.h). */
#include "common/clone.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
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

/* glibc's thread descriptor records the thread's kernel id; glibc publishes where, for
 * debuggers (libthread_db): _thread_db_pthread_tid = { bits, count, offset }. Taken as
 * valid only when it describes one 32-bit field that holds this thread's id now. */
static long tid_offset = -1;

int clone_tid_cache_prepare(void) {
        const uint32_t *desc = dlsym(RTLD_DEFAULT, "_thread_db_pthread_tid");

        tid_offset = -1;
        if (!desc || desc[0] != 32 || desc[1] != 1 || desc[2] > 4096 - sizeof(pid_t))
                return -ENOENT;
        if (*(const pid_t *) ((const char *) pthread_self() + desc[2]) != gettid())
                return -EBADSLT;
        tid_offset = (long) desc[2];
        return 0;
}

void clone_tid_cache_renew(void) {
        if (tid_offset >= 0)
                *(pid_t *) ((char *) pthread_self() + tid_offset) = gettid();
}
