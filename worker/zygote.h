/* SPDX-License-Identifier: MIT */
/* The zygote: one CPython initialised once (never running user code) that clones a
 * fresh worker per call. Control protocol on a SOCK_SEQPACKET socket (fd 3):
 *
 *   supervisor -> zygote   ZygoteSpawn{op = SPAWN} + SCM_RIGHTS [stdout, stderr, report, result, plan]
 *   zygote -> supervisor   ZygoteSpawned + SCM_RIGHTS [pidfd] (none when error != 0)
 *   supervisor -> zygote   ZygoteSpawn{op = IDLE}, no fds and no answer: no worker is
 *                          running and no call is queued, so the pool may be refilled
 *   zygote -> supervisor   ZygoteSpawned{token = 0, pid = 0} once, when ready
 *
 * The worker is cloned with CLONE_PARENT: it is the supervisor's child, reaped and
 * killed by the supervisor exactly like an exec-mode worker; the zygote only writes
 * its uid/gid maps and lets it go. The zygote keeps up to POOL_SIZE workers pre-started
 * (namespaces, minimal root, after-fork work done), each waiting on its own socket
 * for one call's fds; a worker is used for exactly one call. It prepares them only
 * after its start and after an IDLE hint, never while a call runs: on a virtualised
 * host, creating a process slows every other process's page faults (TLB shootdowns),
 * so a refill during a call costs that call more than the pool saves it. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#define ZYGOTE_MAGIC 0x7a79676fU /* "zygo" */
#define ZYGOTE_CTL_FD 3
#define ZYGOTE_SPAWN_FDS 5
#define ZYGOTE_POOL_NICE 10 /* pre-started workers prepare at this nice value */

typedef enum ZygoteOp {
        ZYGOTE_OP_SPAWN = 0,
        ZYGOTE_OP_IDLE = 1,
} ZygoteOp;

typedef struct ZygoteSpawn {
        uint32_t magic;
        uint32_t uid;
        uint32_t gid;
        uint32_t op; /* ZygoteOp */
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
