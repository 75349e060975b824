/* SPDX-License-Identifier: MIT */
/* The zygote's control protocol, on a SOCK_SEQPACKET socket (ZYGOTE_CTL_FD in the
 * zygote). Every message is one fixed-size ZygoteMsg, with descriptors by kind:
 *
 *   kind     direction            descriptors             meaning
 *   READY    zygote -> supervisor none                    initialised, serving (once, first)
 *   SPAWN    supervisor -> zygote the call's _SPAWN_FD_MAX a request: a worker for this call
 *   SPAWNED  zygote -> supervisor the worker's pidfd       the answer, error 0 (pid set) ...
 *                                 none                    ... or error = an errno, pid 0
 *   IDLE     supervisor -> zygote none                    a hint, no answer: no worker runs
 *                                                         and no call waits (refill the pool)
 *
 * The worker is cloned with CLONE_PARENT: it is the supervisor's child, reaped and killed
 * by the supervisor as in exec mode. Both sides decode with zygote_msg_recv(), which
 * checks size, magic, kind, the descriptors each kind carries and the ranges of its
 * fields, so a malformed message is -EBADMSG and never a half-believed one. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract/fds.h"

#define ZYGOTE_MAGIC 0x7a79676fU /* "zygo" */
#define ZYGOTE_POOL_NICE 10      /* pre-started workers prepare at this nice value */
#define ZYGOTE_ERRNO_MAX 4095    /* an answer's error is 0 or an errno in 1..4095 */

typedef enum ZygoteMsgKind {
        ZYGOTE_MSG_READY = 1,
        ZYGOTE_MSG_SPAWN = 2,
        ZYGOTE_MSG_SPAWNED = 3,
        ZYGOTE_MSG_IDLE = 4,
} ZygoteMsgKind;

typedef struct ZygoteMsg {
        uint32_t magic;
        uint32_t kind;  /* ZygoteMsgKind */
        uint64_t token; /* SPAWN and its SPAWNED: the request's number (> 0) */
        uint32_t uid;   /* SPAWN: the worker's uid and gid, checked by the zygote */
        uint32_t gid;
        int32_t error; /* SPAWNED: 0 or a positive errno */
        int32_t pid;   /* SPAWNED with error 0: the worker's pid in the supervisor's namespace */
} ZygoteMsg;

/* Build messages of each kind. */
ZygoteMsg zygote_msg_ready(void);
ZygoteMsg zygote_msg_spawn(uint64_t token, uid_t uid, gid_t gid);
ZygoteMsg zygote_msg_spawned(uint64_t token, int error, pid_t pid);
ZygoteMsg zygote_msg_idle(void);

/* Check a received message and the number of descriptors that came with it:
 * 0 or -EBADMSG. */
int zygote_msg_validate(const ZygoteMsg *m, size_t len, size_t n_fds);

/* Send m with fds (n_fds must be what its kind carries). flags: sendmsg's
 * (MSG_DONTWAIT for the supervisor). 0 or -errno. */
int zygote_msg_send(int sock, const ZygoteMsg *m, const int *fds, size_t n_fds, int flags);
/* Receive and validate one message; fds get what it carried (up to _SPAWN_FD_MAX).
 * -ECONNRESET at EOF; -EBADMSG for a malformed message (its descriptors are closed);
 * other -errno from recvmsg (-EAGAIN on a non-blocking socket with nothing to read). */
int zygote_msg_recv(int sock, ZygoteMsg *ret, int fds[_SPAWN_FD_MAX], size_t *ret_n_fds, int flags);
