/* SPDX-License-Identifier: MIT */
/* Killing and reaping children through their pidfds, listing this thread's children,
 * and whether a seccomp filter already sits around this process (proc.h). */
#include "common/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

void pidfd_kill(int pidfd) {
        int saved = errno;
        if (pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        errno = saved;
}

void kill_and_reap(pid_t pid, int pidfd) {
        int saved = errno;

        if (pid <= 0)
                return;
        if (pidfd >= 0)
                pidfd_kill(pidfd);
        else
                (void) kill(pid, SIGKILL);
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
        errno = saved;
}

/* The supervisor is single-threaded: its children are its main thread's. */
size_t proc_list_children(pid_t *ret, size_t max) {
        char path[64], buf[4096];
        size_t n_pids = 0;
        ssize_t n;
        int fd;

        snprintf(path, sizeof path, "/proc/self/task/%d/children", (int) getpid());
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = 0;
        for (char *p = buf, *end; *p && n_pids < max; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid > 0)
                        ret[n_pids++] = (pid_t) pid;
        }
        return n_pids;
}

bool proc_under_seccomp_filter(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[128];

        if (!f)
                return false;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "Seccomp:", 8) == 0)
                        return atoi(line + 8) == 2;
        return false;
}
