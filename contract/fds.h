/* SPDX-License-Identifier: MIT */
/* The descriptors a worker starts its call with, the same in both start modes:
 *
 *   0 /dev/null          1 stdout pipe        2 stderr pipe
 *   3 report pipe        (worker -> supervisor frames, contract/report.h)
 *   4 result pipe        (the final expression's repr, UTF-8)
 *   5 plan               (a sealed memfd, contract/plan.h)
 *   6 outputs            (a detached tmpfs mount the supervisor made with fsmount(),
 *                         mounted on /outputs when the plan says so; else /dev/null)
 *
 * Everything above WORKER_FD_LAST_KEPT is closed before user code runs (the plan
 * is read and the outputs mount moved into place first). The supervisor hands the zygote the same set less
 * stdin, in the order of ZygoteSpawnFd, with a spawn request, plus the read end of
 * the "go" pipe: a zygote-mode worker reads one byte from it before it installs its
 * descriptors and reads its plan, so the supervisor can put it into its call's cgroup
 * first (docs/design.md, "The worker's cgroup"); it is closed before anything else. */
#pragma once

typedef enum WorkerFd {
        WORKER_FD_STDIN = 0,
        WORKER_FD_STDOUT = 1,
        WORKER_FD_STDERR = 2,
        WORKER_FD_REPORT = 3,
        WORKER_FD_RESULT = 4,
        WORKER_FD_PLAN = 5,
        WORKER_FD_OUTPUTS = 6,
        _WORKER_FD_MAX,
} WorkerFd;

/* fds 0..WORKER_FD_LAST_KEPT stay open while the code runs. */
#define WORKER_FD_LAST_KEPT WORKER_FD_RESULT

/* The fds of one spawn request, in SCM_RIGHTS order: the worker's fds 1..6, then go. */
typedef enum ZygoteSpawnFd {
        SPAWN_FD_STDOUT,
        SPAWN_FD_STDERR,
        SPAWN_FD_REPORT,
        SPAWN_FD_RESULT,
        SPAWN_FD_PLAN,
        SPAWN_FD_OUTPUTS,
        SPAWN_FD_GO, /* read end of the go pipe: one byte when the worker may go on */
        _SPAWN_FD_MAX,
} ZygoteSpawnFd;

/* The zygote's control socket, in the zygote. */
#define ZYGOTE_CTL_FD 3

_Static_assert((int) _SPAWN_FD_MAX == (int) _WORKER_FD_MAX,
               "a spawn carries every worker fd but stdin, and the go pipe");
_Static_assert(SPAWN_FD_STDOUT + 1 == WORKER_FD_STDOUT && SPAWN_FD_OUTPUTS + 1 == WORKER_FD_OUTPUTS,
               "spawn fd i is worker fd i + 1");
