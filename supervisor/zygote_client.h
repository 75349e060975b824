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

/* Starts the first zygote and waits for it (nothing is served yet). Later starts
 * (after a death, a failure or a replacement) run in the event loop's background. */
int zygote_client_new(sd_event *e, const Policy *p, int worker_exec_fd, ZygoteClient **ret);
/* Called whenever a (new) zygote becomes ready to serve. */
void zygote_client_set_ready_callback(ZygoteClient *z, ZygoteReadyFn fn, void *userdata);
bool zygote_client_ready(const ZygoteClient *z);
ZygoteClient *zygote_client_free(ZygoteClient *z);
/* fds: stdout, stderr, report, result write ends and the plan memfd. On success the
 * worker is a child of the calling process; ret_pidfd refers to it. -EAGAIN: no zygote
 * is ready (one is starting); try again when the ready callback runs. */
int zygote_client_spawn(ZygoteClient *z, const int fds[5], pid_t *ret_pid, int *ret_pidfd);
/* Tell the zygote that no worker runs and no call waits: it may prepare workers now. */
void zygote_client_idle(ZygoteClient *z);
pid_t zygote_client_pid(const ZygoteClient *z);
unsigned zygote_client_generation(const ZygoteClient *z);
