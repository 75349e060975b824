/* SPDX-License-Identifier: MIT */
/* Reading and writing cgroupfs files relative to a directory descriptor (dir may be
 * AT_FDCWD with an absolute path), and this process's own cgroups. For cgroup.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Write value to file; 0 or -errno. */
int cgroupfs_write(int dir, const char *file, const char *value);
/* Read file into buf (at most size - 1 bytes, NUL-terminated); 0 or -errno. */
int cgroupfs_read(int dir, const char *file, char *buf, size_t size);
/* "key N" in a flat keyed file (memory.events, memory.oom_control); -ENOENT without it. */
int cgroupfs_read_keyed(int dir, const char *file, const char *key, uint64_t *ret);
/* A file holding one number; -EINVAL when it holds none (such as "max"). */
int cgroupfs_read_number(int dir, const char *file, uint64_t *ret);
/* The same through a descriptor kept open (read from offset 0). */
int cgroupfs_pread_number(int fd, uint64_t *ret);
/* Whether the space-separated list in file holds every word of want (NULL-terminated). */
bool cgroupfs_has_words(int dir, const char *file, const char *const *want);
/* This process's cgroups from /proc/self/cgroup: the v2 path and the v1 memory, pids
 * and cpu paths ("" where there is none), each of size bytes. 0 or -errno. */
int cgroupfs_own(char *v2, char *memory, char *pids, char *cpu, size_t size);
