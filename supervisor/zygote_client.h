/* SPDX-License-Identifier: MIT */
/* The supervisor's side of the zygote: start it (an exec of the worker binary with
 * --zygote), ask it for workers, notice when it dies and bring it back, and replace it
 * after zygoteMaxCalls calls or zygoteMaxSeconds seconds so address-space layouts and
 * hash seeds do not stay the same forever. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "contract/fds.h"
#include "contract/zygote_proto.h"
#include "policy/policy.h"
#include "supervisor/cgroup.h"
#include "supervisor/worker_ids.h"

typedef struct ZygoteClient ZygoteClient;

typedef void (*ZygoteReadyFn)(void *userdata);

/* How a spawn request ended. */
typedef enum ZygoteAnswer {
        ZYGOTE_ANSWER_WORKER, /* the worker exists: pid and pidfd (now the callee's) */
        ZYGOTE_ANSWER_RETRY,  /* the zygote went away or stopped answering before it
                               * answered; it is being replaced: the call may ask again */
        ZYGOTE_ANSWER_FAILED, /* no worker: error (-errno) and cause say why */
} ZygoteAnswer;

/* A worker made for a call: pid and pidfd, its mount namespace (proc.h's
 * proc_open_mount_namespace(), opened by its creator; -1 when it could not be had), its
 * host identity, and its cgroup (NULL without cgroups: the one it already runs in, or
 * moves itself into once released), all now the callee's: the id is released
 * (worker_id_release()) and the cgroup freed once the worker is reaped. how: whether it
 * was ready, preparing, cloned or exec'd. */
typedef struct SpawnedWorker {
        pid_t pid;
        int pidfd;
        int mntns_fd;
        WorkerId id;
        Cgroup *cgroup;
        WorkerHow how;
} SpawnedWorker;

/* cause: a short text naming what failed, no user content (for the result's detail).
 * w: the worker with ZYGOTE_ANSWER_WORKER, else NULL. */
typedef void (*ZygoteSpawnedFn)(ZygoteAnswer answer, int error, const char *cause, const SpawnedWorker *w,
                                void *userdata);
/* No spawn request is in flight any more. */
typedef void (*ZygoteSettledFn)(void *userdata);

/* Starts the first zygote and waits for it (nothing is served yet). Later starts
 * (after a death, a failure or a replacement) run in the event loop's background. The
 * zygote's workers take their host identities from ids and, unless cgroups is NULL or
 * version none, a cgroup each, made with the start policy's limits and entered by the
 * worker when the zygote clones it (both the caller's, outliving z): zygotePoolSize
 * slots when it is ready, one with each spawn request. */
int zygote_client_new(sd_event *e, const Policy *p, int worker_exec_fd, WorkerIds *ids, CgroupRoot *cgroups,
                      ZygoteClient **ret);
/* The memory and process limits the slots' cgroups are made with (the start policy's). */
void zygote_client_slot_limits(const ZygoteClient *z, uint64_t *ret_memory_bytes, uint32_t *ret_max_processes);
/* Called whenever a (new) zygote becomes ready to serve. */
void zygote_client_set_ready_callback(ZygoteClient *z, ZygoteReadyFn fn, void *userdata);
bool zygote_client_ready(const ZygoteClient *z);
ZygoteClient *zygote_client_free(ZygoteClient *z);
/* Whether a spawn request can be sent now. */
typedef enum ZygoteState {
        ZYGOTE_STATE_READY,    /* serving */
        ZYGOTE_STATE_STARTING, /* a zygote is starting (or being replaced): wait for the ready callback */
        ZYGOTE_STATE_BROKEN,   /* the last start failed and the next is backed off: calls cannot
                                * be served now (zygote_client_last_error() says why) */
} ZygoteState;
ZygoteState zygote_client_state(const ZygoteClient *z);
/* The cause of the last failed start or replacement ("" if none), for details and status. */
const char *zygote_client_last_error(const ZygoteClient *z);

/* The value zygote_client_spawn() returns when no zygote can take a request now. */
#define ZYGOTE_SPAWN_LATER 1

/* Ask for a worker for the call whose fds these are (contract/fds.h, ZygoteSpawnFd
 * order), giving the zygote one more slot (-EUSERS: none is free). Does not wait: fn is called from the event loop with the answer (also when
 * the zygote dies or stops answering); the worker is a child of the calling process.
 * Returns 0 when asked, ZYGOTE_SPAWN_LATER when no zygote can take it now (one is
 * starting, or this one is being replaced: try again when the ready callback runs),
 * or -errno when the request could not be sent (then fn is not called). */
int zygote_client_spawn(ZygoteClient *z, const int fds[_SPAWN_FD_MAX], ZygoteSpawnedFn fn, void *userdata,
                        uint64_t *ret_token);
/* The request's call is gone: fn is not called; the worker, if one comes, is killed. */
void zygote_client_spawn_abandon(ZygoteClient *z, uint64_t token);
bool zygote_client_spawns_pending(const ZygoteClient *z);
void zygote_client_set_settled_callback(ZygoteClient *z, ZygoteSettledFn fn, void *userdata);
/* Tell the zygote that no worker runs and no call waits: it may prepare workers now
 * (IDLE). exiting: no call waits and every running worker is exiting; it may prepare
 * a worker now if it has none, for a call that comes right after (EXITING). */
void zygote_client_idle(ZygoteClient *z, bool exiting);
pid_t zygote_client_pid(const ZygoteClient *z);
unsigned zygote_client_generation(const ZygoteClient *z);
/* The pages each new worker of the serving zygote maps ahead of its preparation (its
 * READY message; worker/zygote.c); 0 when none or while no zygote serves. */
uint32_t zygote_client_pages_ahead(const ZygoteClient *z);
