/* SPDX-License-Identifier: MIT */
/* The zygote's control protocol, on a SOCK_SEQPACKET socket (ZYGOTE_CTL_FD in the
 * zygote). Every message is one fixed-size ZygoteMsg, with descriptors by kind:
 *
 *   kind     direction            descriptors             meaning
 *   READY    zygote -> supervisor none                    initialised, serving (once, first);
 *                                                         pages_ahead set
 *   SLOT     supervisor -> zygote n_cgroup_fds            a host identity (slot, uid, gid) for
 *                                                         a pre-started worker, with its cgroup
 *   SPAWN    supervisor -> zygote the call's _SPAWN_FD_MAX a request: a worker for this call,
 *                                 + n_cgroup_fds          and one more slot (as SLOT)
 *   SPAWNED  zygote -> supervisor the worker's pidfd       the answer, error 0 (pid and how
 *                                 (+ its mount namespace  the worker came set) ...
 *                                 when mntns is 1)
 *                                 none                    ... or error = an errno, pid 0
 *   IDLE     supervisor -> zygote none                    a hint, no answer: no worker runs
 *                                                         and no call waits (refill the pool)
 *   EXITING  supervisor -> zygote none                    a hint, no answer: no call waits and
 *                                                         every running call's worker has begun
 *                                                         its last report (refill an empty pool)
 *
 * Slots. Every worker runs in a slot the supervisor owns (supervisor/worker_ids.h): a
 * host uid and gid of its own and, with cgroups, its own cgroup, whose cgroup.procs
 * files (opened by the supervisor, O_WRONLY) come with the slot. The zygote holds the
 * slots the supervisor gave it; each pre-started worker uses one; it never reuses one.
 * Every SPAWN gives one slot and every SPAWNED gives one back: on success the slot of
 * the worker it names, on failure an unused one. So the zygote holds as many slots as
 * it was given with SLOT (its pool's size), and a slot comes back to it only through
 * the supervisor, after the worker that had it is reaped.
 *
 * The worker is cloned with CLONE_PARENT: it is the supervisor's child, reaped and killed
 * by the supervisor as in exec mode. Both sides decode with zygote_msg_recv(), which
 * checks size, magic, kind, the descriptors each kind carries and the ranges of its
 * fields, so a malformed message is -EBADMSG and never a half-believed one. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract/fds.h"

#define ZYGOTE_MAGIC 0x7a79676fU          /* "zygo" */
#define ZYGOTE_POOL_NICE 10               /* pre-started workers prepare this much nicer than the supervisor */
#define ZYGOTE_ERRNO_MAX 4095             /* an answer's error is 0 or an errno in 1..4095 */
#define ZYGOTE_PAGES_AHEAD_MAX (1U << 20) /* 4 GiB of 4 KiB pages: more is no worker's preparation */
#define ZYGOTE_CGROUP_FDS_MAX 3           /* a slot's cgroup.procs files: v1 memory, pids (and cpu), v2 one */
/* The most descriptors a message carries: a spawn's and its slot's cgroup. */
#define ZYGOTE_FDS_MAX (_SPAWN_FD_MAX + ZYGOTE_CGROUP_FDS_MAX)

/* How a call got its worker (SPAWNED's `how`; the supervisor adds EXEC for exec mode).
 * Reported per call (the result's timing.worker) and counted (status, metrics). */
typedef enum WorkerHow {
        WORKER_HOW_NONE = 0,      /* no worker (a failed answer) */
        WORKER_HOW_READY = 1,     /* pre-started, and done preparing when the call reached it */
        WORKER_HOW_PREPARING = 2, /* pre-started, still preparing: the call waited for the rest */
        WORKER_HOW_CLONED = 3,    /* none was pre-started: cloned for this call */
        WORKER_HOW_EXEC = 4,      /* exec mode: a new executable for this call */
        _WORKER_HOW_MAX,
} WorkerHow;

/* "ready", "preparing", "cloned", "exec"; NULL for NONE or out of range. */
const char *worker_how_to_string(WorkerHow how);

typedef enum ZygoteMsgKind {
        ZYGOTE_MSG_READY = 1,
        ZYGOTE_MSG_SPAWN = 2,
        ZYGOTE_MSG_SPAWNED = 3,
        ZYGOTE_MSG_IDLE = 4,
        ZYGOTE_MSG_SLOT = 5,
        ZYGOTE_MSG_EXITING = 6,
} ZygoteMsgKind;

typedef struct ZygoteMsg {
        uint32_t magic;
        uint32_t kind;  /* ZygoteMsgKind */
        uint64_t token; /* SPAWN and its SPAWNED: the request's number (> 0) */
        uint32_t uid;   /* SLOT, SPAWN: the slot's host uid and gid (never 0) */
        uint32_t gid;
        int32_t error;         /* SPAWNED: 0 or a positive errno */
        int32_t pid;           /* SPAWNED with error 0: the worker's pid in the supervisor's namespace */
        uint32_t slot;         /* SLOT, SPAWN: the slot given; SPAWNED: the slot given back */
        uint32_t n_cgroup_fds; /* SLOT, SPAWN: the slot's cgroup.procs descriptors, last (0..3) */
        uint32_t how;          /* SPAWNED with error 0: WorkerHow, READY..CLONED; otherwise 0 */
        uint32_t pages_ahead;  /* READY: the pages each new worker maps ahead (common/pageset.h),
                                * 0 for none, at most ZYGOTE_PAGES_AHEAD_MAX; otherwise 0 */
        uint32_t mntns;        /* SPAWNED with error 0: 1 when the worker's mount namespace
                                * follows its pidfd (common/proc.h), 0 when the zygote could
                                * not open it; otherwise 0 */
        uint32_t reserved;     /* 0 (no padding: every byte is a field, and checked) */
} ZygoteMsg;

/* A slot as it travels: its number, host ids and how many cgroup.procs descriptors
 * come with it. */
typedef struct ZygoteSlot {
        uint32_t slot;
        uid_t uid;
        gid_t gid;
        uint32_t n_cgroup_fds;
} ZygoteSlot;

/* Build messages of each kind. */
ZygoteMsg zygote_msg_ready(uint32_t pages_ahead);
ZygoteMsg zygote_msg_slot(const ZygoteSlot *slot);
ZygoteMsg zygote_msg_spawn(uint64_t token, const ZygoteSlot *slot);
ZygoteMsg zygote_msg_spawned(uint64_t token, uint32_t slot, int error, pid_t pid, WorkerHow how, bool mntns);
ZygoteMsg zygote_msg_idle(void);
ZygoteMsg zygote_msg_exiting(void);
ZygoteSlot zygote_msg_get_slot(const ZygoteMsg *m);

/* Check a received message and the number of descriptors that came with it:
 * 0 or -EBADMSG. */
int zygote_msg_validate(const ZygoteMsg *m, size_t len, size_t n_fds);

/* Send m with fds (n_fds must be what its kind carries). flags: sendmsg's
 * (MSG_DONTWAIT for the supervisor). 0 or -errno. */
int zygote_msg_send(int sock, const ZygoteMsg *m, const int *fds, size_t n_fds, int flags);
/* Receive and validate one message; fds get what it carried (up to ZYGOTE_FDS_MAX).
 * A SPAWNED whose mount namespace found no descriptor slot here (RLIMIT_NOFILE, the
 * pidfd did) arrives as one without (mntns 0): the worker runs without the hold; one
 * whose mount namespace is no mount namespace (NS_GET_NSTYPE) is malformed.
 * -ECONNRESET at EOF; -EBADMSG for a malformed message (its descriptors are closed);
 * other -errno from recvmsg (-EAGAIN on a non-blocking socket with nothing to read). */
int zygote_msg_recv(int sock, ZygoteMsg *ret, int fds[ZYGOTE_FDS_MAX], size_t *ret_n_fds, int flags);
