/* SPDX-License-Identifier: MIT */
/* Killing and reaping children through their pidfds, listing this thread's children,
 * and whether a seccomp filter already sits around this process (proc.h). */
#include "common/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
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

/* One process's real, effective, saved and filesystem uids from its status file. */
static bool status_has_uid(int proc_fd, const char *pid, uid_t uid) {
        char path[64], line[256];
        _cleanup_fclose_ FILE *f = NULL;
        unsigned long ids[4];
        int fd;

        snprintf(path, sizeof path, "%s/status", pid);
        fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || !(f = fdopen(fd, "re"))) {
                if (fd >= 0)
                        close(fd);
                return false; /* gone meanwhile */
        }
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "Uid:", 4) == 0)
                        return sscanf(line + 4, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4 &&
                               (ids[0] == uid || ids[1] == uid || ids[2] == uid || ids[3] == uid);
        return false;
}

bool proc_uid_in_use(uid_t uid) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        bool found = false;

        if (!d)
                return false;
        while (!found && (de = readdir(d)))
                found = de->d_name[0] >= '1' && de->d_name[0] <= '9' && status_has_uid(dirfd(d), de->d_name, uid);
        closedir(d);
        return found;
}

/* Linux 6.11's pidfd ioctl; Debian 12's headers predate it. */
#ifndef PIDFD_GET_MNT_NAMESPACE
#define PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3)
#endif

int proc_open_mount_namespace(pid_t pid, int pidfd) {
        /* Set once the ioctl is answered ENOTTY: an older kernel, or the zygote's own
         * seccomp filter (its early part, which gives ioctl the call's rules). */
        static bool no_ioctl;
        char path[64];

        /* The pidfd's ioctl makes the same ptrace check as /proc's link, without the
         * walk through /proc/PID/ns, whose three inodes procfs makes anew for every
         * fresh pid. Where it is not to be had: /proc. */
        if (pidfd >= 0 && !no_ioctl) {
                int fd = ioctl(pidfd, PIDFD_GET_MNT_NAMESPACE, 0);
                if (fd >= 0)
                        return fd;
                no_ioctl = errno == ENOTTY;
        }
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int) pid);
        return open(path, O_RDONLY | O_CLOEXEC);
}

bool proc_nice_restorable(int nice, bool cap_sys_nice, rlim_t rlimit_nice) {
        return cap_sys_nice || rlimit_nice == RLIM_INFINITY || (nice >= -20 && rlimit_nice >= (rlim_t) (20 - nice));
}
