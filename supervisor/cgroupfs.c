/* SPDX-License-Identifier: MIT */
/* Reading and writing cgroupfs files (cgroupfs.h), and this process's own cgroups
 * (/proc/self/cgroup): what cgroup.c builds on. */
#include "supervisor/cgroupfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "supervisor/cgroup.h"

int cgroupfs_write(int dir, const char *file, const char *value) {
        _cleanup_close_ int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return write_full(fd, value, strlen(value));
}

int cgroupfs_read(int dir, const char *file, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(dir, file, O_RDONLY | O_CLOEXEC);
        size_t len = 0;
        ssize_t n;

        if (fd < 0)
                return -errno;
        while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                len += (size_t) n;
        }
        buf[len] = 0;
        return 0;
}

/* "key N" in a flat keyed file (memory.events, memory.oom_control). */
int cgroupfs_read_keyed(int dir, const char *file, const char *key, uint64_t *ret) {
        char buf[1024];
        size_t klen = strlen(key);
        int k = cgroupfs_read(dir, file, buf, sizeof buf);

        if (k < 0)
                return k;
        for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
                        *ret = strtoull(line + klen + 1, NULL, 10);
                        return 0;
                }
        return -ENOENT;
}

static int parse_number(const char *buf, uint64_t *ret) {
        char *end;

        errno = 0;
        *ret = strtoull(buf, &end, 10);
        if (errno != 0 || end == buf)
                return -EINVAL;
        return 0;
}

int cgroupfs_read_number(int dir, const char *file, uint64_t *ret) {
        char buf[64];
        int k = cgroupfs_read(dir, file, buf, sizeof buf);

        return k < 0 ? k : parse_number(buf, ret);
}

int cgroupfs_pread_number(int fd, uint64_t *ret) {
        char buf[64];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);

        if (n < 0)
                return -errno;
        buf[n] = 0;
        return parse_number(buf, ret);
}

/* Room left in the supervisor's own memory cgroup (v2, or v1's memory controller),
 * UINT64_MAX when there is no limit ("max", which is no number) or no cgroup to read.
 * Workers are the supervisor's children and start in its cgroup. */
uint64_t cgroup_self_memory_available(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64], path[PATH_MAX + 128];
        uint64_t best = UINT64_MAX;

        while (f && fgets(line, sizeof line, f)) {
                char *ctrl = strchr(line, ':'), *cg;
                uint64_t limit, usage;
                const char *limit_name, *usage_name, *base;

                if (!ctrl || !(cg = strchr(ctrl + 1, ':')))
                        continue;
                *cg++ = 0;
                cg[strcspn(cg, "\n")] = 0;
                if (strcmp(ctrl + 1, "") == 0) { /* v2: "0::/path" */
                        base = access("/sys/fs/cgroup/unified", F_OK) == 0 ? "/sys/fs/cgroup/unified"
                                                                           : "/sys/fs/cgroup";
                        limit_name = "memory.max";
                        usage_name = "memory.current";
                } else if (strstr(ctrl + 1, "memory")) { /* v1 */
                        base = "/sys/fs/cgroup/memory";
                        limit_name = "memory.limit_in_bytes";
                        usage_name = "memory.usage_in_bytes";
                } else
                        continue;
                snprintf(path, sizeof path, "%s%s/%s", base, cg, limit_name);
                if (cgroupfs_read_number(AT_FDCWD, path, &limit) < 0 || limit >= (1ULL << 62))
                        continue;
                snprintf(path, sizeof path, "%s%s/%s", base, cg, usage_name);
                if (cgroupfs_read_number(AT_FDCWD, path, &usage) < 0)
                        continue;
                best = MIN(best, usage >= limit ? 0 : limit - usage);
        }
        return best;
}

/* Whether the space-separated list in file holds every word of want. */
bool cgroupfs_has_words(int dir, const char *file, const char *const *want) {
        char buf[512];

        if (cgroupfs_read(dir, file, buf, sizeof buf) < 0)
                return false;
        for (; *want; want++) {
                bool found = false;
                size_t n = strlen(*want);
                for (char *w = buf; (w = strstr(w, *want)); w += n)
                        if ((w == buf || w[-1] == ' ') && (w[n] == 0 || w[n] == ' ' || w[n] == '\n')) {
                                found = true;
                                break;
                        }
                if (!found)
                        return false;
        }
        return true;
}

/* The supervisor's own cgroups from /proc/self/cgroup. */
int cgroupfs_own(char *v2, char *memory, char *pids, char *cpu, size_t size) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64];

        if (!f)
                return -errno;
        v2[0] = memory[0] = pids[0] = cpu[0] = 0;
        while (fgets(line, sizeof line, f)) {
                char *ctrl = strchr(line, ':'), *path;
                if (!ctrl || !(path = strchr(ctrl + 1, ':')))
                        continue;
                *path++ = 0;
                path[strcspn(path, "\n")] = 0;
                *ctrl++ = 0;
                if (strcmp(line, "0") == 0 && ctrl[0] == 0)
                        snprintf(v2, size, "%s", path);
                for (char *save = NULL, *c = strtok_r(ctrl, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
                        if (strcmp(c, "memory") == 0)
                                snprintf(memory, size, "%s", path);
                        else if (strcmp(c, "pids") == 0)
                                snprintf(pids, size, "%s", path);
                        else if (strcmp(c, "cpu") == 0)
                                snprintf(cpu, size, "%s", path);
                }
        }
        return 0;
}
