/* SPDX-License-Identifier: MIT */
/* The zygote: one CPython initialised once (never running user code) that clones a
 * fresh worker per call. Control protocol on a SOCK_SEQPACKET socket (fd 3):
 *
 *   supervisor -> zygote   ZygoteSpawn + SCM_RIGHTS [stdout, stderr, report, result, plan]
 *   zygote -> supervisor   ZygoteSpawned + SCM_RIGHTS [pidfd] (none when error != 0)
 *   zygote -> supervisor   ZygoteSpawned{token = 0, pid = 0} once, when ready
 *
 * The worker is cloned with CLONE_PARENT: it is the supervisor's child, reaped and
 * killed by the supervisor exactly like an exec-mode worker; the zygote only writes
 * its uid/gid maps and lets it go. The zygote keeps POOL_SIZE workers pre-started
 * (namespaces, minimal root, after-fork work done), each waiting on its own socket
 * for one call's fds; a worker is used for exactly one call. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#define ZYGOTE_MAGIC 0x7a79676fU /* "zygo" */
#define ZYGOTE_CTL_FD 3
#define ZYGOTE_SPAWN_FDS 5
#define ZYGOTE_POOL_NICE 10 /* pre-started workers prepare at this nice value */

typedef struct ZygoteSpawn {
        uint32_t magic;
        uint32_t uid;
        uint32_t gid;
        uint32_t reserved;
        uint64_t token;
} ZygoteSpawn;

typedef struct ZygoteSpawned {
        uint32_t magic;
        int32_t error; /* 0 or an errno */
        int32_t pid;   /* in the supervisor's pid namespace */
        uint32_t reserved;
        uint64_t token;
} ZygoteSpawned;

/* argv: codeinterp-zygote --zygote UID GID POOL_SIZE. Runs the zygote loop on fd
 * ZYGOTE_CTL_FD; returns the process exit status. */
int zygote_main(int argc, char **argv);
