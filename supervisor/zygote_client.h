/* SPDX-License-Identifier: MIT */
/* The supervisor's side of the zygote: start it (an exec of the worker binary with
 * --zygote), ask it for workers, notice when it dies and bring it back, and replace it
 * after zygoteMaxCalls calls or zygoteMaxSeconds seconds so address-space layouts and
 * hash seeds do not stay the same forever. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"

typedef struct ZygoteClient ZygoteClient;

typedef void (*ZygoteReadyFn)(void *userdata);
/* The answer to a spawn request: error 0 with the worker's pid and a pidfd (now the
 * callee's), or -errno; -EAGAIN means "the zygote went away, try again later". */
typedef void (*ZygoteSpawnedFn)(int error, pid_t pid, int pidfd, void *userdata);
/* No spawn request is in flight any more. */
typedef void (*ZygoteSettledFn)(void *userdata);

/* Starts the first zygote and waits for it (nothing is served yet). Later starts
 * (after a death, a failure or a replacement) run in the event loop's background. */
int zygote_client_new(sd_event *e, const Policy *p, int worker_exec_fd, ZygoteClient **ret);
/* Called whenever a (new) zygote becomes ready to serve. */
void zygote_client_set_ready_callback(ZygoteClient *z, ZygoteReadyFn fn, void *userdata);
bool zygote_client_ready(const ZygoteClient *z);
ZygoteClient *zygote_client_free(ZygoteClient *z);
/* Ask for a worker for the call whose fds these are (stdout, stderr, report, result
 * write ends and the plan memfd). Does not wait: fn is called from the event loop with
 * the answer (also when the zygote dies or stops answering); the worker is a child of
 * the calling process. -EAGAIN when no zygote can take it now (one is starting, or
 * this one is being replaced): try again when the ready callback runs. */
int zygote_client_spawn(ZygoteClient *z, const int fds[5], ZygoteSpawnedFn fn, void *userdata, uint64_t *ret_token);
/* The request's call is gone: fn is not called; the worker, if one comes, is killed. */
void zygote_client_spawn_abandon(ZygoteClient *z, uint64_t token);
bool zygote_client_spawns_pending(const ZygoteClient *z);
void zygote_client_set_settled_callback(ZygoteClient *z, ZygoteSettledFn fn, void *userdata);
/* Tell the zygote that no worker runs and no call waits: it may prepare workers now. */
void zygote_client_idle(ZygoteClient *z);
pid_t zygote_client_pid(const ZygoteClient *z);
unsigned zygote_client_generation(const ZygoteClient *z);
