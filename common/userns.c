/* SPDX-License-Identifier: MIT */
#include "common/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"

bool userns_rootless(void) {
        return geteuid() != 0;
}

static int write_proc_file(pid_t pid, const char *which, const char *text) {
        char path[64];
        _cleanup_close_ int fd = -1;
        size_t n = strlen(text);

        snprintf(path, sizeof path, "/proc/%d/%s", (int) pid, which);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, text, n) != (ssize_t) n)
                return -errno;
        return 0;
}

static int write_id_map(pid_t pid, const char *which, unsigned inside, unsigned host) {
        char line[64];

        snprintf(line, sizeof line, "%u %u 1\n", inside, host);
        return write_proc_file(pid, which, line);
}

int userns_write_id_maps(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid) {
        int r = write_id_map(pid, "uid_map", inside_uid, host_uid);
        if (r < 0)
                return r;
        if (userns_rootless() && (r = write_proc_file(pid, "setgroups", "deny")) < 0)
                return r;
        return write_id_map(pid, "gid_map", inside_gid, host_gid);
}

int userns_write_own_id_maps(uid_t host_uid, gid_t host_gid) {
        pid_t self = getpid();
        int r;

        if ((r = write_id_map(self, "uid_map", host_uid, host_uid)) < 0 ||
            (r = write_proc_file(self, "setgroups", "deny")) < 0)
                return r;
        return write_id_map(self, "gid_map", host_gid, host_gid);
}

bool userns_setgroups_denied(void) {
        _cleanup_close_ int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
        char buf[16] = {};

        if (fd < 0 || read(fd, buf, sizeof buf - 1) < 4)
                return false;
        return strncmp(buf, "deny", 4) == 0;
}
