/* SPDX-License-Identifier: MIT */
#include "common/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/cleanup.h"

static int write_id_map(pid_t pid, const char *which, unsigned inside, unsigned host) {
        char path[64], line[64];
        _cleanup_close_ int fd = -1;
        int n;

        snprintf(path, sizeof path, "/proc/%d/%s", (int) pid, which);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = snprintf(line, sizeof line, "%u %u 1\n", inside, host);
        if (write(fd, line, (size_t) n) != n)
                return -errno;
        return 0;
}

int userns_write_id_maps(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid) {
        int r = write_id_map(pid, "uid_map", inside_uid, host_uid);
        return r < 0 ? r : write_id_map(pid, "gid_map", inside_gid, host_gid);
}
