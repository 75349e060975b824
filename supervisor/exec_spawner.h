/* SPDX-License-Identifier: MIT */
/* Exec mode's worker creation, beside the zygote client (zygote_client.h): the same
 * request (the call's descriptors in ZygoteSpawnFd order) and the same answer (a
 * ZygoteSpawnedFn with the worker's pid, pidfd, host identity and cgroup), so that a
 * worker arrives in one place in the runner whatever the mode. Here the worker is
 * cloned by the supervisor into fresh namespaces, given its own cgroup and host
 * identity, and its child execs the sealed codeinterp-worker, which builds the sandbox.
 * Nothing of the sandbox is linked here: the child's steps before the exec are
 * common/child_start.h's. */
#pragma once

#include "contract/fds.h"
#include "policy/policy.h"
#include "supervisor/cgroup.h"
#include "supervisor/worker_ids.h"
#include "supervisor/zygote_client.h"

typedef struct ExecSpawner {
        int worker_exec_fd;  /* the sealed copy of codeinterp-worker */
        CgroupRoot *cgroups; /* a cgroup per worker unless NULL or version none */
        WorkerIds *ids;      /* the workers' host identities */
} ExecSpawner;

/* Make a worker for the call whose descriptors these are (fds[SPAWN_FD_GO] unused),
 * with p's limits and identity. Synchronous: on success fn is called before this
 * returns, with ZYGOTE_ANSWER_WORKER, and 0 is returned; otherwise nothing is left
 * behind (no process, id or cgroup), fn is not called, -errno is returned and
 * *ret_step names the failed step. */
int exec_spawner_spawn(const ExecSpawner *x, const Policy *p, const int fds[_SPAWN_FD_MAX], ZygoteSpawnedFn fn,
                       void *userdata, const char **ret_step);
