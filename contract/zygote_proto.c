/* SPDX-License-Identifier: MIT */
/* The zygote's control messages validated, sent and received, with their descriptors. */
#include "contract/zygote_proto.h"

#include <errno.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/ioctl.h>

#include "common/fdpass.h"

_Static_assert(ZYGOTE_FDS_MAX <= FDPASS_MAX, "a spawn's descriptors and its slot's fit one message");
_Static_assert(sizeof(ZygoteMsg) == 56, "no padding: every byte of a message is a field");

ZygoteMsg zygote_msg_ready(uint32_t pages_ahead) {
        return (ZygoteMsg){ .magic = ZYGOTE_MAGIC, .kind = ZYGOTE_MSG_READY, .pages_ahead = pages_ahead };
}

ZygoteMsg zygote_msg_slot(const ZygoteSlot *slot) {
        return (ZygoteMsg){ .magic = ZYGOTE_MAGIC,
                            .kind = ZYGOTE_MSG_SLOT,
                            .uid = slot->uid,
                            .gid = slot->gid,
                            .slot = slot->slot,
                            .n_cgroup_fds = slot->n_cgroup_fds };
}

ZygoteMsg zygote_msg_spawn(uint64_t token, const ZygoteSlot *slot) {
        ZygoteMsg m = zygote_msg_slot(slot);

        m.kind = ZYGOTE_MSG_SPAWN;
        m.token = token;
        return m;
}

ZygoteMsg zygote_msg_spawned(uint64_t token, uint32_t slot, int error, pid_t pid, WorkerHow how, bool mntns) {
        return (ZygoteMsg){ .magic = ZYGOTE_MAGIC,
                            .kind = ZYGOTE_MSG_SPAWNED,
                            .token = token,
                            .error = error,
                            .pid = pid,
                            .slot = slot,
                            .how = (uint32_t) how,
                            .mntns = mntns };
}

const char *worker_how_to_string(WorkerHow how) {
        static const char *const names[_WORKER_HOW_MAX] = {
                [WORKER_HOW_READY] = "ready",
                [WORKER_HOW_PREPARING] = "preparing",
                [WORKER_HOW_CLONED] = "cloned",
                [WORKER_HOW_EXEC] = "exec",
        };
        return how < _WORKER_HOW_MAX ? names[how] : NULL;
}

ZygoteSlot zygote_msg_get_slot(const ZygoteMsg *m) {
        return (ZygoteSlot){ .slot = m->slot, .uid = m->uid, .gid = m->gid, .n_cgroup_fds = m->n_cgroup_fds };
}

ZygoteMsg zygote_msg_idle(void) {
        return (ZygoteMsg){ .magic = ZYGOTE_MAGIC, .kind = ZYGOTE_MSG_IDLE };
}

ZygoteMsg zygote_msg_exiting(void) {
        return (ZygoteMsg){ .magic = ZYGOTE_MAGIC, .kind = ZYGOTE_MSG_EXITING };
}

/* How many descriptors each kind carries. */
static size_t fds_of(const ZygoteMsg *m) {
        switch (m->kind) {
        case ZYGOTE_MSG_SLOT:
                return m->n_cgroup_fds;
        case ZYGOTE_MSG_SPAWN:
                return _SPAWN_FD_MAX + (size_t) m->n_cgroup_fds;
        case ZYGOTE_MSG_SPAWNED:
                return m->error == 0 ? 1 + (size_t) m->mntns : 0;
        default:
                return 0;
        }
}

int zygote_msg_validate(const ZygoteMsg *m, size_t len, size_t n_fds) {
        if (len != sizeof *m || m->magic != ZYGOTE_MAGIC ||
            (m->kind == ZYGOTE_MSG_READY ? m->pages_ahead > ZYGOTE_PAGES_AHEAD_MAX : m->pages_ahead != 0))
                return -EBADMSG;
        /* Only a successful answer says how its worker came, and only as a zygote can. */
        bool names_how = m->kind == ZYGOTE_MSG_SPAWNED && m->error == 0;
        if (names_how ? m->how < WORKER_HOW_READY || m->how > WORKER_HOW_CLONED : m->how != 0)
                return -EBADMSG;
        if (m->mntns > (names_how ? 1U : 0U) || m->reserved != 0)
                return -EBADMSG;
        switch (m->kind) {
        case ZYGOTE_MSG_READY:
        case ZYGOTE_MSG_IDLE:
        case ZYGOTE_MSG_EXITING:
                if (m->token != 0 || m->error != 0 || m->pid != 0 || m->uid != 0 || m->gid != 0 || m->slot != 0 ||
                    m->n_cgroup_fds != 0)
                        return -EBADMSG;
                break;
        case ZYGOTE_MSG_SLOT:
        case ZYGOTE_MSG_SPAWN:
                /* A slot is never root's, and carries at most one cgroup per hierarchy. */
                if ((m->kind == ZYGOTE_MSG_SPAWN) != (m->token != 0) || m->uid == 0 || m->gid == 0 || m->error != 0 ||
                    m->pid != 0 || m->n_cgroup_fds > ZYGOTE_CGROUP_FDS_MAX)
                        return -EBADMSG;
                break;
        case ZYGOTE_MSG_SPAWNED:
                /* The sign of error matters: a negative value is no errno, and a success
                 * names a real pid. */
                if (m->token == 0 || m->error < 0 || m->error > ZYGOTE_ERRNO_MAX || m->uid != 0 || m->gid != 0 ||
                    m->n_cgroup_fds != 0)
                        return -EBADMSG;
                if (m->error == 0 ? m->pid <= 0 : m->pid != 0)
                        return -EBADMSG;
                break;
        default:
                return -EBADMSG;
        }
        return n_fds == fds_of(m) ? 0 : -EBADMSG;
}

int zygote_msg_send(int sock, const ZygoteMsg *m, const int *fds, size_t n_fds, int flags) {
        if (zygote_msg_validate(m, sizeof *m, n_fds) < 0)
                return -EINVAL;
        return fdpass_send(sock, m, sizeof *m, fds, n_fds, flags);
}

int zygote_msg_recv(int sock, ZygoteMsg *ret, int fds[ZYGOTE_FDS_MAX], size_t *ret_n_fds, int flags) {
        ZygoteMsg m = {};
        size_t n_fds = 0;
        bool cut;
        ssize_t n;

        *ret_n_fds = 0;
        /* One byte more than a message: a longer datagram shows as a wrong size. */
        char buf[sizeof m + 1];
        n = fdpass_recv_cut(sock, buf, sizeof buf, fds, ZYGOTE_FDS_MAX, &n_fds, &cut, flags);
        if (n == -EMSGSIZE)
                return -EBADMSG;
        if (n < 0)
                return (int) n;
        if (n == 0 && n_fds == 0 && !cut)
                return -ECONNRESET;
        if ((size_t) n == sizeof m)
                __builtin_memcpy(&m, buf, sizeof m);
        /* The one descriptor a message may lose: a worker's mount namespace, last, when
         * its pidfd took the last slot we had (the hold is an optimisation). */
        if (cut && m.kind == ZYGOTE_MSG_SPAWNED && m.mntns == 1 && n_fds == 1) {
                m.mntns = 0;
                cut = false;
        }
        /* What comes as a worker's mount namespace must be one, or it is held for nothing. */
        if (cut || zygote_msg_validate(&m, (size_t) n, n_fds) < 0 ||
            (m.kind == ZYGOTE_MSG_SPAWNED && m.mntns && ioctl(fds[1], NS_GET_NSTYPE) != CLONE_NEWNS)) {
                fdpass_close_all(fds, n_fds);
                return -EBADMSG;
        }
        *ret = m;
        *ret_n_fds = n_fds;
        return 0;
}
