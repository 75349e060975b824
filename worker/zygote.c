/* SPDX-License-Identifier: MIT */
/* The zygote (zygote.h): CPython initialised once, a pool of pre-started workers, and
 * one fresh worker handed to each call the supervisor asks for. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "worker/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/child_start.h"
#include "common/cleanup.h"
#include "common/clone.h"
#include "common/fdpass.h"
#include "common/proc.h"
#include "common/userns.h"
#include "common/pageset.h"
#include "common/util.h"
#include "contract/fds.h"
#include "contract/zygote_proto.h"
#include "policy/seccomp.h"
#include "contract/plan.h"
#include "worker/pyrun.h"
#include "worker/run.h"
#include "worker/sandbox.h"

/* The seccomp filter in two parts (policy/seccomp.h): the early one and the late one
 * per mode, [0] errno, [1] kill, loaded by a worker for its call. The zygote loads the
 * early one into itself once it serves (filter_self()), so that every worker it clones
 * inherits it: the one program the kernel converted and compiled, shared, instead of
 * one per worker. Where that failed (early_inherited false) each worker loads its own
 * while it prepares. */
static struct sock_fprog early_filter;
static struct sock_fprog filters[2];
static bool early_inherited;
static int devnull = -1;
/* Decided once, at start: inside a new worker's namespace geteuid() no longer tells. */
static bool rootless;
/* Whether pre-started workers prepare at a lower priority (pool_nice_restorable()). */
static bool pool_nice;
/* The pages a worker touches while it prepares, learnt at start (learn_touch_set()) and
 * mapped ahead by each new worker (common/pageset.h). Empty when learning failed. */
static PageSet touch_set;

/* Whether the supervisor can bring a worker it takes back from ZYGOTE_POOL_NICE to
 * its own priority (runner.c): raising a priority needs CAP_SYS_NICE on the host, or an
 * RLIMIT_NICE in the worker that reaches the supervisor's nice (inherited from it; the
 * worker lowers it to 0 only once it has its call). The shipped unit gives no
 * CAP_SYS_NICE but LimitNICE=+0; a pod's container gets neither; rootless, only the
 * limit can count. Without either a call would run at the lower priority, so pre-started
 * workers keep the normal one. Asked at start, while we still have what the supervisor
 * passed on. */
static bool pool_nice_restorable(void) {
        _cleanup_cap_free_ cap_t caps = rootless ? NULL : cap_get_proc();
        cap_flag_value_t nice_cap = CAP_CLEAR;
        struct rlimit rl;
        int own;

        if (caps && cap_get_flag(caps, CAP_SYS_NICE, CAP_EFFECTIVE, &nice_cap) < 0)
                nice_cap = CAP_CLEAR;
        errno = 0;
        own = getpriority(PRIO_PROCESS, 0);
        if (errno != 0 || getrlimit(RLIMIT_NICE, &rl) < 0)
                return false;
        return proc_nice_restorable(own, nice_cap == CAP_SET, rl.rlim_cur);
}

/* The zygote keeps only what it needs to write id maps for its children. Rootless it
 * needs none (it owns its children's namespaces and maps only its own ids) and has
 * none to keep: every capability is cleared, and the bounding set, which only
 * CAP_SETPCAP may shrink, stays as it came. */
static int zygote_drop_privileges(void) {
        static const cap_value_t keep[] = { CAP_SETUID, CAP_SETGID };
        _cleanup_cap_free_ cap_t caps = cap_init();

        if (!caps)
                return -ENOMEM;
        for (cap_value_t c = 0; c <= CAP_LAST_CAP && !rootless; c++)
                if (c != CAP_SETUID && c != CAP_SETGID && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        if (!rootless && (cap_set_flag(caps, CAP_PERMITTED, ELEMENTSOF(keep), keep, CAP_SET) < 0 ||
                          cap_set_flag(caps, CAP_EFFECTIVE, ELEMENTSOF(keep), keep, CAP_SET) < 0))
                return -errno;
        if (cap_set_proc(caps) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* A pre-started worker: everything that is the same for every call is done before its
 * call arrives; a failure is remembered and reported on the call's report pipe. */
typedef struct PoolChild {
        pid_t pid;
        int pidfd;
        int mntns;       /* its mount namespace (proc.h), handed over with its pidfd, or -1 */
        int chan;        /* zygote end of the worker's own socket: the call's fds arrive on it */
        ZygoteSlot slot; /* its host identity (contract/zygote_proto.h) */
} PoolChild;

/* A slot the supervisor gave us and no worker uses yet, with its cgroup's descriptors. */
typedef struct Slot {
        ZygoteSlot id;
        int cgroup_fds[ZYGOTE_CGROUP_FDS_MAX];
} Slot;

static PoolChild pool[POLICY_ZYGOTE_POOL_SIZE_MAX];
static size_t pool_len = 0;
static size_t pool_target = 0;
/* We hold at most the pool's slots and the one of the request being served. */
static Slot slots[ELEMENTSOF(pool) + 1];
static size_t n_slots = 0;
static bool may_refill = true; /* at start, then after each IDLE hint until the next spawn */
/* The last call found no worker ready (it waited for one preparing, or for a clone):
 * calls come faster than quiet moments do, so the pool is refilled while calls run. */
static bool pool_behind = false;
static uid_t worker_uid; /* the ids inside every worker's user namespace */
static gid_t worker_gid;
static uint32_t python_packages; /* the policy's pythonPackages: preloaded, and bound in every worker */
static uint64_t tmp_bytes;       /* the policy's tmpBytes: the size of a pre-started worker's /tmp */

static void slot_close(Slot *s) {
        fdpass_close_all(s->cgroup_fds, s->id.n_cgroup_fds);
        s->id.n_cgroup_fds = 0;
}

/* Keep a slot (from SLOT or SPAWN; its descriptors are ours now). false when we hold
 * too many already: the supervisor broke the protocol, the slot is dropped. */
static bool slot_push(const ZygoteSlot *id, const int *cgroup_fds) {
        Slot *s;

        if (n_slots >= ELEMENTSOF(slots)) {
                fdpass_close_all((int *) cgroup_fds, id->n_cgroup_fds);
                return false;
        }
        s = &slots[n_slots++];
        s->id = *id;
        memcpy(s->cgroup_fds, cgroup_fds, id->n_cgroup_fds * sizeof *cgroup_fds);
        return true;
}

/* The slot held longest (the first given). */
static Slot slot_pop(void) {
        Slot s = slots[0];

        memmove(slots, slots + 1, (n_slots - 1) * sizeof *slots);
        n_slots--;
        return s;
}

/* Receive the call's fds (a one-byte message) on chan. -ECONNRESET when the zygote
 * went away. */
static int recv_call_fds(int chan, int fds[_SPAWN_FD_MAX]) {
        char byte;
        size_t n_fds;
        ssize_t n = fdpass_recv(chan, &byte, 1, fds, _SPAWN_FD_MAX, &n_fds, 0);

        if (n <= 0)
                return n < 0 && n != -ECONNRESET ? (int) n : -ECONNRESET;
        if (n_fds != _SPAWN_FD_MAX) {
                fdpass_close_all(fds, n_fds);
                return -EBADMSG;
        }
        return 0;
}

static bool call_waiting(int chan) {
        struct pollfd pfd = { .fd = chan, .events = POLLIN };
        return poll(&pfd, 1, 0) > 0;
}

/* Prepared (or failed, which the call learns at once): the zygote, when it hands us a
 * call, sees our end of chan shut for writing and reports the worker as ready. No byte
 * is sent: a socket closed with unread data makes its peer's read fail (ECONNRESET),
 * and the zygote closes its end right after handing us the call. */
static void say_prepared(int chan) {
        (void) shutdown(chan, SHUT_WR);
}

/* In the new worker: a copy of the zygote, in fresh namespaces, waiting for its call.
 * slot: its cgroup's descriptors, entered first. */
static _Noreturn void child_main(int sync_fd, int chan, Slot *slot) {
        SetupStage stage = SETUP_STAGE_NONE, failed_stage = SETUP_STAGE_NONE;
        int failed = 0, fds[_SPAWN_FD_MAX], src[_WORKER_FD_MAX];
        WorkerPlan plan;
        SandboxRuntime rt = SANDBOX_RUNTIME_EMPTY;
        sigset_t none;
        char c;
        int r;

        /* Preparing runs at a lower priority so it never slows a running call; the
         * supervisor restores the normal priority when it hands this worker a call, where
         * it can (pool_nice_restorable()). */
        clone_tid_cache_renew();
        if (pool_nice)
                (void) !nice(ZYGOTE_POOL_NICE); /* relative to the supervisor's own: it may run niced */
        (void) pageset_populate(&touch_set);
        PyOS_AfterFork_Child();
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_NAME, "ci-pool", 0, 0, 0);

        /* The common part, before the call exists. Any failure is kept for the report. */
        if (read(sync_fd, &c, 1) != 1)
                _exit(127); /* the zygote could not map our ids and gave up on us */
        close(sync_fd);
        /* Into the slot's cgroup first (the wait is ours, not the zygote's): all it
         * touches from here on is charged there. Then the runtime is opened with the
         * zygote's (root's) credentials, before the switch to the worker uid, which may
         * not be able to traverse it (sandbox.h). */
        if ((r = child_enter_cgroup(slot->cgroup_fds, slot->id.n_cgroup_fds)) < 0) {
                failed = r;
                failed_stage = SETUP_STAGE_CGROUP;
        } else if ((r = sandbox_runtime_open(python_packages, &rt, &stage)) < 0 ||
                   (r = sandbox_become(worker_uid, worker_gid, &stage)) < 0 ||
                   (r = sandbox_prepare(&rt, early_inherited ? NULL : &early_filter, tmp_bytes, &stage)) < 0) {
                failed = r;
                failed_stage = stage;
        }
        sandbox_runtime_close(&rt);
        if (failed == 0 && ((r = pyrun_renew_worker()) < 0 || (!call_waiting(chan) && (r = pyrun_warmup()) < 0))) {
                /* Fresh entropy for this worker alone. The warm-up makes the runner's
                 * pages private before the call arrives; when the call is already
                 * waiting it would only add work to the call's own path. */
                failed = r;
                failed_stage = SETUP_STAGE_PYTHON_INIT;
        }
        /* The supervisor is our parent (CLONE_PARENT): die with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        say_prepared(chan);

        if (recv_call_fds(chan, fds) < 0)
                _exit(0); /* never assigned: the zygote went away */
        close(chan);
        /* The supervisor learns our pid only from the zygote's answer, after we have the
         * call's descriptors: it puts us into the call's cgroup, then says go. Nothing of
         * the call (not even its plan) is read before. EOF: the call is gone. */
        do
                r = (int) read(fds[SPAWN_FD_GO], &c, 1);
        while (r < 0 && errno == EINTR);
        if (r != 1)
                _exit(127);
        close(fds[SPAWN_FD_GO]);
        prctl(PR_SET_NAME, "ci-worker", 0, 0, 0);
        src[WORKER_FD_STDIN] = devnull;
        memcpy(src + WORKER_FD_STDOUT, fds, (_WORKER_FD_MAX - 1) * sizeof *fds);
        if (child_install_fds(src, _WORKER_FD_MAX) < 0)
                _exit(127);
        if (failed < 0)
                worker_fail(failed_stage, failed);

        worker_read_plan(&plan);
        if (plan.sandbox.uid != worker_uid || plan.sandbox.gid != worker_gid || plan.python_packages != python_packages)
                worker_fail(SETUP_STAGE_PLAN, EINVAL);
        r = sandbox_finish(&plan.sandbox, &filters[plan.deny == POLICY_DENY_KILL], &stage);
        if (r < 0)
                worker_fail(stage, r);

        worker_run(&plan);
}

static void pool_child_close(PoolChild *pc) {
        if (pc->chan >= 0)
                close(pc->chan);
        if (pc->pidfd >= 0)
                close(pc->pidfd);
        if (pc->mntns >= 0)
                close(pc->mntns);
        *pc = (PoolChild){ .pidfd = -1, .mntns = -1, .chan = -1 };
}

/* Clone one worker into fresh namespaces in the slot's identity (and cgroup), map its ids
 * and let it prepare. On success the slot is used up (its descriptors closed); on
 * failure it is intact: a child that did not get the sync byte never took the slot's
 * uid (it exits; the supervisor reaps it). */
static int pool_child_new(int ctl, Slot *slot, PoolChild *ret) {
        int chan[2] = { -1, -1 }, sync[2] = { -1, -1 }, pidfd = -1, mntns = -1, k;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0)
                return -errno;
        if (pipe2(sync, O_CLOEXEC) < 0) {
                k = -errno;
                close(chan[0]);
                close(chan[1]);
                return k;
        }
        PyOS_BeforeFork();
        /* CLONE_PARENT: the worker is the supervisor's child (the kernel then uses the
         * zygote's own exit signal, SIGCHLD). */
        pid = clone_with_pidfd(CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                       CLONE_NEWUTS | CLONE_NEWCGROUP,
                               0, &pidfd);
        if (pid == 0) {
                close(sync[1]);
                close(chan[0]);
                close(ctl);
                for (size_t i = 0; i < pool_len; i++)
                        pool_child_close(&pool[i]);
                for (size_t i = 0; i < n_slots; i++)
                        slot_close(&slots[i]);
                child_main(sync[0], chan[1], slot);
        }
        k = pid < 0 ? pid : 0;
        PyOS_AfterFork_Parent();
        close(sync[0]);
        close(chan[1]);
        if (k == 0)
                mntns = proc_open_mount_namespace(pid, pidfd); /* while it is still ours to read */
        /* Inside it is worker_uid, on the host the slot's own uid; once released it enters
         * the slot's cgroup itself, before it prepares anything. */
        if (k == 0 && ((k = userns_write_id_maps(pid, worker_uid, slot->id.uid, worker_gid, slot->id.gid)) < 0 ||
                       (write(sync[1], "x", 1) != 1 && (k = -EIO))))
                pidfd_kill(pidfd); /* reaped by the supervisor, its parent */
        close(sync[1]);
        if (k == 0)
                slot_close(slot); /* used up */
        if (k < 0) {
                close(chan[0]);
                if (pidfd >= 0)
                        close(pidfd);
                if (mntns >= 0)
                        close(mntns);
                return k;
        }
        *ret = (PoolChild){ .pid = pid, .pidfd = pidfd, .mntns = mntns, .chan = chan[0], .slot = slot->id };
        ret->slot.n_cgroup_fds = 0;
        return 0;
}

/* A pre-started worker has said it is prepared: it shut its end of chan for writing. */
static bool pool_child_prepared(const PoolChild *pc) {
        struct pollfd pfd = { .fd = pc->chan, .events = POLLRDHUP };
        return poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLRDHUP);
}

/* Hand the call's fds to a pre-started worker if there is one (oldest first), else to
 * a new one made now in a slot we hold. A worker that died while waiting fails the send
 * and is dropped (its slot with it: the supervisor gets it back when we are replaced).
 * On success *ret is the worker (its chan closed by the caller) and *ret_how how it came. */
static int assign_worker(int ctl, const int fds[_SPAWN_FD_MAX], PoolChild *ret, WorkerHow *ret_how) {
        WorkerHow how;
        PoolChild pc;
        Slot slot;
        int k;

        for (;;) {
                if (pool_len > 0) {
                        pc = pool[0];
                        memmove(pool, pool + 1, (pool_len - 1) * sizeof *pool);
                        pool_len--;
                        how = pool_child_prepared(&pc) ? WORKER_HOW_READY : WORKER_HOW_PREPARING;
                } else if (n_slots == 0)
                        return -EUSERS;
                else {
                        slot = slot_pop();
                        if ((k = pool_child_new(ctl, &slot, &pc)) < 0) {
                                /* Nothing runs in it: it stays ours, for the answer. */
                                (void) slot_push(&slot.id, slot.cgroup_fds);
                                return k;
                        }
                        how = WORKER_HOW_CLONED;
                }
                if (fdpass_send(pc.chan, "c", 1, fds, _SPAWN_FD_MAX, 0) == 0)
                        break;
                pool_child_close(&pc);
        }
        *ret = pc;
        *ret_how = how;
        return 0;
}

/* One control message. Returns <0 only when the control channel is gone. */
static int serve_one(int ctl) {
        ZygoteMsg req, rep;
        PoolChild pc = { .pidfd = -1, .mntns = -1, .chan = -1 };
        WorkerHow how = WORKER_HOW_NONE;
        ZygoteSlot id;
        int fds[ZYGOTE_FDS_MAX];
        size_t n_fds = 0;
        int k;

        k = zygote_msg_recv(ctl, &req, fds, &n_fds, 0);
        if (k == -EINTR || k == -EBADMSG)
                return 0; /* a malformed request has no token to answer: dropped */
        if (k < 0)
                return k;
        if (req.kind == ZYGOTE_MSG_IDLE || (req.kind == ZYGOTE_MSG_EXITING && pool_len == 0)) {
                may_refill = true;
                return 0;
        }
        if (req.kind == ZYGOTE_MSG_EXITING)
                return 0; /* a worker is there already: the rest waits for IDLE */
        id = zygote_msg_get_slot(&req);
        if (req.kind == ZYGOTE_MSG_SLOT) {
                (void) slot_push(&id, fds);
                return 0;
        }
        if (req.kind != ZYGOTE_MSG_SPAWN) {
                fdpass_close_all(fds, n_fds);
                return 0; /* a READY or SPAWNED has no business here */
        }
        may_refill = false;
        /* The request's slot is ours now; the answer gives one back. */
        if (!slot_push(&id, fds + _SPAWN_FD_MAX)) {
                rep = zygote_msg_spawned(req.token, id.slot, EBADMSG, 0, WORKER_HOW_NONE, false);
        } else if ((k = assign_worker(ctl, fds, &pc, &how)) < 0) {
                Slot unused = slot_pop();
                slot_close(&unused);
                rep = zygote_msg_spawned(req.token, unused.id.slot, -k, 0, WORKER_HOW_NONE, false);
        } else {
                pool_behind = how != WORKER_HOW_READY;
                rep = zygote_msg_spawned(req.token, pc.slot.slot, 0, pc.pid, how, pc.mntns >= 0);
        }
        fdpass_close_all(fds, _SPAWN_FD_MAX);
        int answer_fds[] = { pc.pidfd, pc.mntns };
        k = zygote_msg_send(ctl, &rep, answer_fds, rep.error ? 0 : 1 + rep.mntns, 0);
        pool_child_close(&pc);
        return k < 0 ? k : 0;
}

/* The rehearsal: a plain copy of the zygote does the Python part of a worker's
 * preparation (what child_main does after the clone, the warm-up included), then sends
 * back the pages it touched. Only our own code runs in it, before any call exists; it
 * lives in the zygote's namespaces for the few milliseconds this takes, and the zygote
 * reaps it. The sandbox steps are not rehearsed: they need the worker's namespaces,
 * and touch few pages. */
static _Noreturn void rehearse(int out, const PageMaps *maps) {
        /* A mapping of its own, made after maps was taken: what it writes here is not
         * counted as the preparation's. */
        PageSet *ps = mmap(NULL, sizeof *ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        size_t len;

        clone_tid_cache_renew();
        PyOS_AfterFork_Child();
        if (ps == MAP_FAILED || pyrun_renew_worker() < 0 || pyrun_warmup() < 0 || pageset_collect(maps, ps) < 0)
                _exit(1);
        len = offsetof(PageSet, runs) + ps->n_runs * sizeof ps->runs[0];
        _exit(write(out, ps, len) == (ssize_t) len ? 0 : 1);
}

/* What a rehearsal sends (rehearse()), read to its end (in is closed); its exit
 * status; the set, checked against maps, into touch_set. */
static int rehearsal_result(int in, pid_t pid, const PageMaps *maps) {
        _cleanup_free_ PageSet *got = malloc(sizeof *got);
        size_t have = 0;
        ssize_t n;
        int r, status;

        do {
                n = got ? read(in, (char *) got + have, sizeof *got - have) : 0;
                if (n > 0)
                        have += (size_t) n;
        } while (n > 0 || (n < 0 && errno == EINTR));
        close(in); /* a rehearsal still writing (we stopped reading) gets EPIPE and ends */
        while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                ;
        if (!got)
                return -ENOMEM;
        if (r < 0)
                return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || have < offsetof(PageSet, runs) ||
            have != offsetof(PageSet, runs) + got->n_runs * sizeof got->runs[0] || pageset_validate(got, maps) < 0)
                return -EBADMSG;
        memcpy(&touch_set, got, have); /* only the runs it has: fewer of the zygote's pages written */
        return 0;
}

/* Mapping pages ahead pays where a fault is dear (on some virtual machines mostly an
 * exception's round trip) and costs where faults are cheap (a fault maps up to 16
 * read-only pages at once; MADV_POPULATE_READ writes each page table entry itself).
 * So each kind is timed here, on this machine, against the faults it saves, in
 * throwaway copies (the best of PAGES_AHEAD_ROUNDS each way), and kept only where
 * mapping ahead is the faster (docs/performance.md). */
#define PAGES_AHEAD_ROUNDS 3
static void choose_pages_ahead(void) {
        static const char *const names[] = { [PAGE_KIND_READ] = "read-only", [PAGE_KIND_WRITTEN] = "written" };

        for (PageKind k = PAGE_KIND_READ; k <= PAGE_KIND_WRITTEN; k++) {
                int64_t faults = INT64_MAX, ahead = INT64_MAX;
                size_t n = pageset_kind_pages(&touch_set, k);

                if (n == 0)
                        continue;
                for (int i = 0; i < PAGES_AHEAD_ROUNDS; i++) {
                        int64_t t = pageset_time_kind(&touch_set, k, false);
                        if (t >= 0)
                                faults = MIN(faults, t);
                        t = pageset_time_kind(&touch_set, k, true);
                        if (t >= 0)
                                ahead = MIN(ahead, t);
                }
                if (faults == INT64_MAX || ahead == INT64_MAX) {
                        fprintf(stderr, "codeinterp-zygote: %zu %s pages could not be timed: mapped ahead\n", n,
                                names[k]);
                        continue;
                }
                fprintf(stderr, "codeinterp-zygote: %zu %s pages: by faults %.3f ms, mapped ahead %.3f ms: %s\n", n,
                        names[k], (double) faults / 1e6, (double) ahead / 1e6,
                        ahead < faults ? "mapped ahead" : "left to faults");
                if (ahead >= faults)
                        pageset_drop_kind(&touch_set, k);
        }
}

/* Learn the pages a new worker touches while it prepares (touch_set), from one
 * rehearsal. Returns how many, or -errno (touch_set stays empty: nothing is mapped
 * ahead, workers prepare as before). */
static int learn_touch_set(void) {
        _cleanup_free_ PageMaps *maps = malloc(sizeof *maps);
        _cleanup_close_ int pidfd = -1;
        int p[2], r;
        pid_t pid;

        if (!maps)
                return -ENOMEM;
        if ((r = pageset_probe()) < 0 || (r = pageset_maps(maps)) < 0)
                return r;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        PyOS_BeforeFork();
        pid = clone_with_pidfd(0, SIGCHLD, &pidfd);
        if (pid == 0) {
                close(p[0]);
                rehearse(p[1], maps);
        }
        PyOS_AfterFork_Parent();
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return pid;
        }
        r = rehearsal_result(p[0], pid, maps);
        if (r >= 0 && touch_set.n_pages > ZYGOTE_PAGES_AHEAD_MAX) {
                touch_set = (PageSet){ .n_runs = 0 };
                r = -E2BIG;
        }
        if (r >= 0)
                choose_pages_ahead();
        return r < 0 ? r : (int) touch_set.n_pages;
}

/* Once, before serving: READY, with the pages learn_touch_set() learnt. Failing to
 * learn them costs only speed: it is said, and workers prepare as they did before. */
static ZygoteMsg learn_touch_set_for_ready(void) {
        int r = learn_touch_set();

        if (r < 0)
                fprintf(stderr,
                        "codeinterp-zygote: learning the pages a worker touches failed (%s): none is mapped ahead\n",
                        strerror(-r));
        return zygote_msg_ready(r > 0 ? (uint32_t) r : 0);
}

static int compile_filters(void) {
        int r;

        if ((r = policy_seccomp_compile_early(&early_filter)) < 0 ||
            (r = policy_seccomp_compile_late(POLICY_DENY_ERRNO, &filters[0])) < 0 ||
            (r = policy_seccomp_compile_late(POLICY_DENY_KILL, &filters[1])) < 0)
                return r;
        return 0;
}

/* The early part of the filter into the zygote itself, after everything it does once
 * (the rehearsals' forks) and before it serves: from here on it makes only the system
 * calls seccomp_late[] lists beyond what a call may make. The kernel allows the load
 * under the no_new_privs zygote_drop_privileges() set. Failing costs only speed: it is
 * said, and each worker loads its own. */
static void filter_self(void) {
        int r = policy_seccomp_load(&early_filter);

        if (r < 0)
                fprintf(stderr,
                        "codeinterp-zygote: loading the early seccomp filter into the zygote failed (%s): "
                        "each worker loads its own\n",
                        strerror(-r));
        early_inherited = r >= 0;
}

/* The arguments (zygote.h), into the globals every worker is made with. */
static int parse_arguments(int argc, char **argv) {
        unsigned long uid, gid, size, packages;
        unsigned long long tmp;

        if (argc != 7 || sscanf(argv[2], "%lu", &uid) != 1 || sscanf(argv[3], "%lu", &gid) != 1 ||
            sscanf(argv[4], "%lu", &size) != 1 || sscanf(argv[5], "%lu", &packages) != 1 ||
            sscanf(argv[6], "%llu", &tmp) != 1 || uid == 0 || gid == 0 || size > ELEMENTSOF(pool) ||
            packages >> _POLICY_PACKAGE_MAX)
                return -EINVAL;
        worker_uid = (uid_t) uid;
        worker_gid = (gid_t) gid;
        pool_target = size;
        python_packages = (uint32_t) packages;
        tmp_bytes = (uint64_t) tmp;
        return 0;
}

int zygote_main(int argc, char **argv) {
        ZygoteMsg ready;
        int r;

        if (parse_arguments(argc, argv) < 0) {
                fprintf(stderr, "codeinterp-zygote: bad arguments\n");
                return 2;
        }
        /* The dynamic linker has read it (zygote_client.c); no worker's os.environ shows it. */
        (void) unsetenv("LD_BIND_NOW");
        rootless = userns_rootless();
        pool_nice = pool_nice_restorable();

        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        prctl(PR_SET_NAME, "ci-zygote", 0, 0, 0);
        if (chdir("/") < 0)
                return 1;
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return 1;
        /* Without it a worker's main thread has the zygote's tid in glibc (clone.h):
         * time.thread_time() and pthread_getcpuclockid() then fail (EINVAL). */
        if ((r = clone_tid_cache_prepare()) < 0)
                fprintf(stderr,
                        "codeinterp-zygote: glibc's thread id field not found (%s): "
                        "a worker's main thread keeps the zygote's thread id\n",
                        strerror(-r));
        if (compile_filters() < 0) {
                fprintf(stderr, "codeinterp-zygote: compiling the seccomp filter failed\n");
                return 1;
        }
        r = pyrun_init_packages(python_packages);
        if (r >= 0)
                r = pyrun_preload();
        if (r >= 0)
                r = pyrun_warmup();
        if (r < 0) {
                fprintf(stderr, "codeinterp-zygote: initialising Python failed: %s\n", strerror(-r));
                return 1;
        }
        /* Everything allocated so far is shared copy-on-write with every worker: the
         * garbage of the preload and the warm-up collected, then the collector kept from
         * touching (and so copying) what is left, and the C heap's free pages given back,
         * so that no worker maps them (every page the zygote has mapped costs each
         * worker's clone a page table entry to copy and its exit one to tear down). */
        PyRun_SimpleString("import gc; gc.collect(); gc.freeze(); del gc"); /* no name left in __main__ */
        (void) malloc_trim(0);
        r = zygote_drop_privileges();
        if (r < 0) {
                fprintf(stderr, "codeinterp-zygote: dropping privileges failed: %s\n", strerror(-r));
                return 1;
        }
        ready = learn_touch_set_for_ready();
        filter_self();
        if (zygote_msg_send(ZYGOTE_CTL_FD, &ready, NULL, 0, 0) < 0)
                return 1;
        for (;;) {
                /* Requests first; the pool is refilled one worker at a time while none
                 * is waiting, and only while no call runs unless the pool is behind
                 * (see zygote.h). */
                if (pool_len < pool_target && (may_refill || pool_behind) && n_slots > 0) {
                        struct pollfd pfd = { .fd = ZYGOTE_CTL_FD, .events = POLLIN };
                        if (poll(&pfd, 1, 0) == 0) {
                                Slot slot = slot_pop();
                                if (pool_child_new(ZYGOTE_CTL_FD, &slot, &pool[pool_len]) == 0)
                                        pool_len++;
                                else {
                                        (void) slot_push(&slot.id, slot.cgroup_fds);
                                        (void) poll(&pfd, 1, 100); /* do not spin on a failing clone */
                                }
                                continue;
                        }
                }
                r = serve_one(ZYGOTE_CTL_FD);
                if (r < 0)
                        return 0; /* the supervisor closed the channel: we are done */
        }
}
