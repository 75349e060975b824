/* SPDX-License-Identifier: MIT */
#include "common/proc.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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
