/* SPDX-License-Identifier: MIT */
/* The host identities of workers. Inside its user namespace every worker is the same
 * unprivileged workerUid/workerGid; on the host each live worker has a uid and gid of
 * its own, from the policy's block (workerHostIdBase, workerHostIdCount), so that what
 * the kernel counts or checks per host uid (RLIMIT_NPROC, file ownership, signals)
 * never joins two workers, nor a worker and a host user. An id ("slot" n: uid = gid =
 * base + n) is given out again only after the worker that had it is reaped, and only
 * if no other supervisor on the host holds its lease (id_leases.h).
 *
 * worker_id_acquire() is the one place that decides which host uid a worker gets. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "supervisor/id_leases.h"

typedef struct WorkerId {
        uint32_t slot; /* index in the block */
        uid_t uid;     /* host uid: the block's base + slot */
        gid_t gid;     /* host gid: likewise */
} WorkerId;

typedef struct WorkerIds WorkerIds;

/* Whether the block [base, base + count) may be used: it must not hold the uid of a
 * user or the gid of a group this host knows (getpwent, getgrent), nor overlap a range
 * of subuid / subgid (NULL: /etc/subuid, /etc/subgid; a missing file is empty), and it
 * must be mapped in the supervisor's own user namespace (/proc/self/uid_map, gid_map).
 * 0, or -EEXIST / -ERANGE with why naming the clash. */
int worker_ids_check(uint32_t base, uint32_t count, const char *subuid, const char *subgid, char *why, size_t why_len);

/* leases: the host-wide leases of the block's ids (not owned; NULL: none, each id is
 * then unique among this supervisor's workers only). */
int worker_ids_new(const Policy *p, IdLeases *leases, WorkerIds **ret);
WorkerIds *worker_ids_free(WorkerIds *ids);

/* The host identity for the next worker: the first free slot after the last one given
 * out, so an id freed now is reused as late as possible. -EUSERS when every id of the
 * block belongs to a worker that is not reaped yet. */
int worker_id_acquire(WorkerIds *ids, WorkerId *ret);
/* The slot's worker has been reaped (or never existed): the id is free. */
void worker_id_release(WorkerIds *ids, uint32_t slot);
/* The slot's worker may still exist and no runner serves it (a pre-started worker of a
 * zygote that went away, the worker of an abandoned request): the id is free again once
 * no child of the supervisor is mapped to it (worker_ids_sweep()). */
void worker_id_quarantine(WorkerIds *ids, uint32_t slot);
/* Find the children of this process mapped to a quarantined id (each child's
 * /proc/PID/uid_map; a zombie still has it), SIGKILL and reap them (no runner serves
 * them), and free the quarantined ids. Called after strays are reaped, when a zygote
 * stops, and by worker_id_acquire() when no id is free. */
void worker_ids_sweep(WorkerIds *ids);
/* The identity of a slot number, if it is in the block. */
bool worker_id_of_slot(const WorkerIds *ids, uint32_t slot, WorkerId *ret);
/* Ids now given out (to workers, a zygote or quarantined). */
uint32_t worker_ids_in_use(const WorkerIds *ids);
