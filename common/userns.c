/* SPDX-License-Identifier: MIT */
/* Writing a child user namespace's uid and gid maps, rootless or as root, and what the
 * host allows of them (userns.h). */
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

/* /proc/self/WHICH's lines "first host n" as "first first n", into buf; without id 0
 * when skip_zero (its range then starts at 1). */
static int identity_of_own_map(const char *which, bool skip_zero, char *buf, size_t size) {
        char path[32], line[128];
        _cleanup_fclose_ FILE *f = NULL;
        size_t used = 0;

        snprintf(path, sizeof path, "/proc/self/%s", which);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        buf[0] = 0;
        while (fgets(line, sizeof line, f)) {
                unsigned long first, host, n;
                int k;
                if (sscanf(line, "%lu %lu %lu", &first, &host, &n) != 3)
                        return -EIO;
                if (skip_zero && first == 0) {
                        first = 1;
                        n--;
                }
                if (n == 0)
                        continue;
                k = snprintf(buf + used, size - used, "%lu %lu %lu\n", first, first, n);
                if (k < 0 || (size_t) k >= size - used)
                        return -E2BIG;
                used += (size_t) k;
        }
        return used > 0 ? 0 : -EIO;
}

int userns_write_identity_maps(pid_t pid) {
        char map[4096]; /* the kernel takes at most 340 lines; a namespace rarely has more than a few */
        int r;

        if ((r = identity_of_own_map("uid_map", true, map, sizeof map)) < 0 ||
            (r = write_proc_file(pid, "uid_map", map)) < 0 ||
            (r = identity_of_own_map("gid_map", false, map, sizeof map)) < 0)
                return r;
        return write_proc_file(pid, "gid_map", map);
}

bool userns_setgroups_denied(void) {
        _cleanup_close_ int fd = open("/proc/self/setgroups", O_RDONLY | O_CLOEXEC);
        char buf[16] = {};

        if (fd < 0 || read(fd, buf, sizeof buf - 1) < 4)
                return false;
        return strncmp(buf, "deny", 4) == 0;
}
