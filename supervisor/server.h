/* SPDX-License-Identifier: MIT */
/* The event loop's clients: the listening socket, connections with bounded buffers,
 * peer credentials, request dispatch. */
#pragma once

#include "supervisor/cgroup.h"
#include "supervisor/id_leases.h"

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"

typedef struct Server Server;

/* A server without a listener yet (server_listen()). worker_exec_fd: sealed copy of
 * codeinterp-worker. Takes cgroups (the workers' cgroup root, cgroup_root_open()) on
 * success; leases (the host-wide leases of the workers' host ids, NULL: none) is
 * borrowed and must outlive the server. */
int server_new(sd_event *e, PolicySnapshot *p, int worker_exec_fd, CgroupRoot *cgroups, IdLeases *leases, Server **ret);
/* Start accepting on listen_fd, a bound, listening AF_UNIX SOCK_STREAM socket (the
 * server takes it on success only; on failure it is still the caller's to close). */
int server_listen(Server *s, int listen_fd);

/* The self-check (supervisor/self_check.h) with this server's spawner; fn gets its
 * answer from the loop (problem NULL: passed). Once per server. */
typedef void (*ServerSelfCheckFn)(Server *s, const char *problem, uint64_t elapsed_usec, void *userdata);
int server_self_check(Server *s, ServerSelfCheckFn fn, void *userdata);
/* Reload: new connections, requests and calls get p (referenced); queued and running
 * calls keep the policy they were admitted under. The caller has already kept the
 * running values of the keys read only at start (policy_keep_restart_keys()). */
void server_set_policy(Server *s, PolicySnapshot *p);
const Policy *server_policy(const Server *s);
sd_event *server_event(const Server *s);
/* Stop accepting, cancel every call (running workers are killed, their callers get a
 * typed outcome). Returns once nothing is running; the loop then exits. */
void server_shutdown(Server *s);
Server *server_free(Server *s);
/* Nothing queued, running or unsent. */
bool server_idle(Server *s);
/* No connection, and nothing queued, running or unsent (idle exit). */
bool server_unused(Server *s);
/* Reap children nobody owns: pre-started workers of a zygote that went away. */
void server_reap_strays(Server *s);
