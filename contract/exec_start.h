/* SPDX-License-Identifier: MIT */
/* Exec mode's start handshake. The supervisor clones a child into the worker's
 * namespaces, writes its uid/gid maps (common/userns.h) and then writes one byte to
 * the sync pipe; the child runs exec_child_main() from the clone on. That function
 * belongs to the worker side (worker/exec_child.c, in the Python-free ci_sandbox
 * library): it takes the worker identity, keeps the namespace capabilities setup
 * needs as ambient ones, installs the fds of contract/fds.h and execs the sealed
 * worker binary, which builds the rest of the sandbox. A failure before the exec is
 * reported on the report pipe as (stage, errno), like any later setup step. */
#pragma once

#include <sys/types.h>

#include "contract/fds.h"

typedef struct ExecStart {
        int sync_fd;             /* read end: one byte once the id maps are written */
        int fds[_WORKER_FD_MAX]; /* the worker's descriptors, by WorkerFd */
        int worker_exec_fd;      /* the sealed codeinterp-worker */
        uid_t uid;               /* the worker identity */
        gid_t gid;
        int cgroup_fds[3]; /* its cgroup's cgroup.procs (v1: memory, pids, cpu), entered after the sync */
        size_t n_cgroup_fds;
} ExecStart;

_Noreturn void exec_child_main(const ExecStart *start);
