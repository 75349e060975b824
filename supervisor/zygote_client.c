/* SPDX-License-Identifier: MIT */
/* The supervisor's side of the zygote (zygote_client.h): its lifecycle, spawn requests
 * and their tracking; the slots it holds are zygote_slots.c's. */
#include "supervisor/zygote_client.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "contract/zygote_proto.h"
#include "supervisor/zygote_slots.h"

#define ZYGOTE_START_TIMEOUT_SEC 30
#define ZYGOTE_SPAWN_TIMEOUT_SEC 5

typedef struct ZygotePending ZygotePending;

struct ZygoteClient {
        sd_event *event;
        Policy policy_at_start; /* the zygote's keys are read at start only: a reload keeps them */
        const Policy *policy;   /* = &policy_at_start */
        int worker_exec_fd;
        pid_t pid;
        int pidfd;
        int ctl;
        sd_event_source *exit_source;
        uint64_t started_usec;
        uint32_t calls;
        unsigned generation;
        uint64_t token;
        bool ready;                  /* said "ready" and serves spawns */
        uint32_t pages_ahead;        /* from its "ready" */
        bool retiring;               /* due for replacement: takes no new request */
        sd_event_source *ctl_source; /* while starting: waits for "ready" */
        sd_event_source *timer;      /* start timeout, or the next launch */
        unsigned failures;           /* consecutive failed starts (or deaths with requests in
                                      * flight): the relaunch backs off */
        char last_error[128];        /* the cause of the last failure, for details and status */
        ZygoteReadyFn on_ready;
        void *userdata;
        ZygotePending *pending;        /* spawn requests sent, answer not yet read (oldest first) */
        sd_event_source *reply_source; /* while ready: answers to spawn requests */
        sd_event_source *spawn_timer;  /* the oldest pending request's deadline */
        ZygoteSettledFn on_settled;
        void *settled_userdata;
        ZygoteSlots slots; /* the slots this zygote holds, and the spares */
};

struct ZygotePending {
        uint64_t token;
        uint64_t sent_usec;
        ZygoteSpawnedFn fn; /* NULL once abandoned: the answer's worker is killed */
        void *userdata;
        ZygotePending *next;
};

/* From this many consecutive failures on, calls are not kept waiting for the next
 * attempt: they end as worker_error naming the cause. */
#define ZYGOTE_BROKEN_FAILURES 2

static int zygote_launch(ZygoteClient *z);
static void zygote_relaunch_later(ZygoteClient *z);
static void zygote_fail_pending(ZygoteClient *z, ZygoteAnswer answer, int error, const char *cause);

pid_t zygote_client_pid(const ZygoteClient *z) {
        return z->pid;
}

unsigned zygote_client_generation(const ZygoteClient *z) {
        return z->generation;
}

uint32_t zygote_client_pages_ahead(const ZygoteClient *z) {
        return z->ready ? z->pages_ahead : 0;
}

bool zygote_client_ready(const ZygoteClient *z) {
        return z->pid > 0 && z->ready && !z->retiring;
}

ZygoteState zygote_client_state(const ZygoteClient *z) {
        if (zygote_client_ready(z))
                return ZYGOTE_STATE_READY;
        return z->failures >= ZYGOTE_BROKEN_FAILURES ? ZYGOTE_STATE_BROKEN : ZYGOTE_STATE_STARTING;
}

const char *zygote_client_last_error(const ZygoteClient *z) {
        return z->last_error;
}

static void zygote_failed(ZygoteClient *z, int error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Remember why (error 0: no errno to add) and count the failure. */
static void zygote_failed(ZygoteClient *z, int error, const char *fmt, ...) {
        va_list ap;
        size_t n;

        va_start(ap, fmt);
        vsnprintf(z->last_error, sizeof z->last_error, fmt, ap);
        va_end(ap);
        n = strlen(z->last_error);
        if (error != 0 && n < sizeof z->last_error)
                snprintf(z->last_error + n, sizeof z->last_error - n, ": %s", strerror(abs(error)));
        z->failures++;
        log_error("Zygote %u: %s (%u failure%s in a row)", z->generation, z->last_error, z->failures,
                  z->failures == 1 ? "" : "s");
}

void zygote_client_slot_limits(const ZygoteClient *z, uint64_t *ret_memory_bytes, uint32_t *ret_max_processes) {
        *ret_memory_bytes = z->policy->memory_bytes;
        *ret_max_processes = z->policy->processes;
}

/* A freshly ready zygote gets a slot per pre-started worker. A slot that cannot be
 * given is not: the pool is smaller (logged). */
static void give_pool_slots(ZygoteClient *z) {
        for (uint32_t i = 0; i < z->policy->zygote_pool_size; i++) {
                int fds[ZYGOTE_CGROUP_FDS_MAX];
                ZygoteSlot slot;
                ZygoteMsg m;
                int k = zygote_slots_give(&z->slots, z->generation, &slot, fds);
                if (k >= 0) {
                        m = zygote_msg_slot(&slot);
                        k = zygote_msg_send(z->ctl, &m, fds, slot.n_cgroup_fds, MSG_DONTWAIT);
                        fdpass_close_all(fds, slot.n_cgroup_fds);
                        if (k < 0)
                                zygote_slots_take_back(&z->slots, slot.slot);
                }
                if (k < 0) {
                        log_warning_errno(k, "Zygote %u: a pre-started worker gets no slot: %m", z->generation);
                        return;
                }
        }
}

void zygote_client_set_ready_callback(ZygoteClient *z, ZygoteReadyFn fn, void *userdata) {
        z->on_ready = fn;
        z->userdata = userdata;
}

void zygote_client_set_settled_callback(ZygoteClient *z, ZygoteSettledFn fn, void *userdata) {
        z->on_settled = fn;
        z->settled_userdata = userdata;
}

bool zygote_client_spawns_pending(const ZygoteClient *z) {
        return z && z->pending;
}

static void zygote_stop(ZygoteClient *z) {
        z->ready = false;
        z->exit_source = sd_event_source_disable_unref(z->exit_source);
        z->ctl_source = sd_event_source_disable_unref(z->ctl_source);
        z->reply_source = sd_event_source_disable_unref(z->reply_source);
        z->spawn_timer = sd_event_source_disable_unref(z->spawn_timer);
        z->timer = sd_event_source_disable_unref(z->timer);
        if (z->ctl >= 0) {
                close(z->ctl); /* the zygote exits on EOF */
                z->ctl = -1;
        }
        kill_and_reap(z->pid, z->pidfd);
        z->pid = 0;
        if (z->pidfd >= 0) {
                close(z->pidfd);
                z->pidfd = -1;
        }
        zygote_slots_quarantine_all(&z->slots);
}

/* Stop this zygote, start the next one (at once, or backed off after failures), and
 * end the requests it had not answered with answer (RETRY: the calls may ask the next
 * zygote; FAILED: the zygote broke the protocol, the calls end). */
static void zygote_restart(ZygoteClient *z, ZygoteAnswer answer, int error, const char *cause) {
        zygote_stop(z);
        zygote_relaunch_later(z);
        zygote_fail_pending(z, answer, error, cause);
}

static int on_zygote_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;
        int status = 0;

        pid_t pid = z->pid;

        if (waitpid(pid, &status, WNOHANG) <= 0)
                return 0;
        z->pid = 0;
        /* A death while starting, or with requests in flight (which may have caused it),
         * is a failure: the next start backs off. One between calls is not. */
        if (!z->ready || z->pending)
                zygote_failed(z, 0, "the zygote died (%s %d)", WIFSIGNALED(status) ? "signal" : "exit status",
                              WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        else
                log_warning("The zygote (pid %d) %s %d; starting a new one", (int) pid,
                            WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                            WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        zygote_restart(z, ZYGOTE_ANSWER_RETRY, -ECHILD, "the zygote died before it answered");
        return 0;
}

static int on_reply(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_spawn_timeout(sd_event_source *s, uint64_t usec, void *userdata);

static int on_ctl_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;
        ZygoteMsg ready;
        int k, fds[ZYGOTE_FDS_MAX];
        size_t n_fds;

        k = zygote_msg_recv(z->ctl, &ready, fds, &n_fds, MSG_DONTWAIT);
        if (k == -EAGAIN || k == -EINTR)
                return 0;
        fdpass_close_all(fds, n_fds);
        if (k >= 0 && ready.kind != ZYGOTE_MSG_READY)
                k = -EBADMSG;
        if (k >= 0 && fcntl(z->ctl, F_SETFL, O_NONBLOCK) < 0)
                k = -errno;
        /* From now on ctl carries answers to spawn requests. */
        z->ctl_source = sd_event_source_disable_unref(z->ctl_source);
        if (k >= 0)
                k = sd_event_add_io(z->event, &z->reply_source, z->ctl, EPOLLIN, on_reply, z);
        if (k < 0) {
                zygote_failed(z, k, "the zygote did not start");
                zygote_stop(z);
                zygote_relaunch_later(z);
                return 0;
        }
        z->timer = sd_event_source_disable_unref(z->timer);
        z->ready = true;
        z->pages_ahead = ready.pages_ahead;
        z->failures = 0;
        z->last_error[0] = 0;
        log_info("Zygote %u ready (pid %d; a new worker maps %" PRIu32 " pages ahead)", z->generation, (int) z->pid,
                 z->pages_ahead);
        give_pool_slots(z);
        if (z->on_ready)
                z->on_ready(z->userdata);
        return 0;
}

static int on_start_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        ZygoteClient *z = userdata;

        zygote_failed(z, 0, "the zygote did not become ready within %d s", ZYGOTE_START_TIMEOUT_SEC);
        zygote_stop(z);
        zygote_relaunch_later(z);
        return 0;
}

static int on_relaunch(sd_event_source *s, uint64_t usec, void *userdata) {
        ZygoteClient *z = userdata;
        int k;

        z->timer = sd_event_source_disable_unref(z->timer);
        k = zygote_launch(z);
        if (k < 0) {
                zygote_failed(z, k, "starting a zygote failed");
                zygote_relaunch_later(z);
        }
        return 0;
}

/* At once after a zygote that had served; after 1, 2, 4 ... 30 s after failed starts. */
static void zygote_relaunch_later(ZygoteClient *z) {
        uint64_t delay = z->failures == 0 ? 0 : MIN(30ULL, 1ULL << MIN(z->failures - 1, 5u)) * 1000000ULL;

        z->timer = sd_event_source_disable_unref(z->timer);
        if (sd_event_add_time_relative(z->event, &z->timer, CLOCK_MONOTONIC, delay, 1000, on_relaunch, z) < 0)
                log_error("Cannot schedule a new zygote");
        else if (delay > 0)
                log_notice("Next zygote in %llu s", (unsigned long long) (delay / 1000000));
}

static int zygote_launch(ZygoteClient *z) {
        _cleanup_close_ int devnull = -1;
        int sp[2], pidfd = -1, k;
        pid_t pid;

        /* Opened here, not in the child: a failure is then a reported error, not a
                 * silent exit of a child. */
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return -errno;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -errno;
        pid = clone_with_pidfd(0, SIGCHLD, &pidfd);
        if (pid < 0) {
                k = pid;
                close(sp[0]);
                close(sp[1]);
                return k;
        }
        if (pid == 0) {
                char uid[16], gid[16], pool_size[16], packages[16], tmp_bytes[24];
                char *const argv[] = {
                        "codeinterp-zygote", "--zygote", uid, gid, pool_size, packages, tmp_bytes, NULL
                };
                /* LD_BIND_NOW: the dynamic linker resolves every library's symbols in the
                 * zygote, once, so that no worker binds a function lazily (a symbol
                 * lookup and a copy-on-write fault on a GOT page each time): 15 fewer
                 * faults per worker (docs/performance.md). The zygote unsets it. */
                static char *const envp[] = { "LANG=C.UTF-8", "LD_BIND_NOW=1", NULL };
                sigset_t none;
                int exe = fcntl(z->worker_exec_fd, F_DUPFD_CLOEXEC, 16);
                int ctl = fcntl(sp[1], F_DUPFD_CLOEXEC, 16);

                snprintf(uid, sizeof uid, "%u", (unsigned) z->policy->worker_uid);
                snprintf(gid, sizeof gid, "%u", (unsigned) z->policy->worker_gid);
                snprintf(pool_size, sizeof pool_size, "%u", z->policy->zygote_pool_size);
                snprintf(packages, sizeof packages, "%u", (unsigned) z->policy->python_packages);
                snprintf(tmp_bytes, sizeof tmp_bytes, "%llu", (unsigned long long) z->policy->tmp_bytes);
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                for (int sig = 1; sig < _NSIG; sig++)
                        signal(sig, SIG_DFL);
                if (devnull < 0 || exe < 0 || ctl < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
                    dup2(ctl, ZYGOTE_CTL_FD) < 0)
                        _exit(127);
                syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
                _exit(127);
        }
        close(sp[1]);
        z->pid = pid;
        z->pidfd = pidfd;
        z->ctl = sp[0];
        z->calls = 0;
        z->started_usec = now_usec();
        z->generation++;

        z->ready = false;
        z->retiring = false;

        /* "ready" (CPython initialised, the modules imported) arrives on ctl; the event
         * loop goes on meanwhile, calls wait in the queue. */
        if ((k = sd_event_add_io(z->event, &z->exit_source, z->pidfd, EPOLLIN, on_zygote_exit, z)) < 0 ||
            (k = sd_event_add_io(z->event, &z->ctl_source, z->ctl, EPOLLIN, on_ctl_ready, z)) < 0 ||
            (k = sd_event_add_time_relative(z->event, &z->timer, CLOCK_MONOTONIC,
                                            (uint64_t) ZYGOTE_START_TIMEOUT_SEC * 1000000, 1000000, on_start_timeout,
                                            z)) < 0) {
                zygote_stop(z);
                return k;
        }
        log_debug("Zygote %u starting (pid %d)", z->generation, (int) z->pid);
        return 0;
}

/* At supervisor start nothing is served yet: wait for the first zygote here. */
static int wait_first_ready(ZygoteClient *z) {
        struct pollfd pfd = { .fd = z->ctl, .events = POLLIN };
        int k;

        k = poll(&pfd, 1, ZYGOTE_START_TIMEOUT_SEC * 1000);
        if (k <= 0)
                return log_error_errno(k < 0 ? errno : ETIMEDOUT, "The zygote did not become ready: %m");
        (void) fcntl(z->ctl, F_SETFL, O_NONBLOCK);
        on_ctl_ready(z->ctl_source, z->ctl, EPOLLIN, z);
        return z->ready ? 0 : -EIO;
}

int zygote_client_new(sd_event *e, const Policy *p, int worker_exec_fd, WorkerIds *ids, CgroupRoot *cgroups,
                      ZygoteClient **ret) {
        ZygoteClient *z = calloc(1, sizeof *z);
        int k;

        if (!z)
                return -ENOMEM;
        z->event = e;
        z->policy_at_start = *p;
        z->policy = &z->policy_at_start;
        z->worker_exec_fd = worker_exec_fd;
        zygote_slots_init(&z->slots, e, z->policy, ids, cgroups);
        z->pidfd = z->ctl = -1;
        k = zygote_launch(z);
        if (k >= 0)
                k = wait_first_ready(z);
        if (k < 0) {
                zygote_stop(z);
                zygote_slots_done(&z->slots);
                free(z);
                return k;
        }
        *ret = z;
        return 0;
}

ZygoteClient *zygote_client_free(ZygoteClient *z) {
        if (!z)
                return NULL;
        zygote_stop(z);
        while (z->pending) { /* their runners are gone already; nobody is told */
                ZygotePending *p = z->pending;
                z->pending = p->next;
                free(p);
        }
        zygote_slots_done(&z->slots);
        free(z);
        return NULL;
}

static bool replacement_due(const ZygoteClient *z) {
        const Policy *p = z->policy;
        return z->calls >= p->zygote_max_calls ||
               now_usec() - z->started_usec >= (uint64_t) p->zygote_max_seconds * 1000000;
}

/* Retire this zygote now (its age, not a fault): nothing is in flight. */
static void retire_zygote(ZygoteClient *z) {
        log_info("Replacing zygote %u: it reached zygoteMaxCalls or zygoteMaxSeconds", z->generation);
        zygote_restart(z, ZYGOTE_ANSWER_RETRY, -EAGAIN, "the zygote was replaced");
}

/* Every request without an answer ends with answer; abandoned ones are dropped. The
 * list is detached first: a callback may spawn again. */
static void zygote_fail_pending(ZygoteClient *z, ZygoteAnswer answer, int error, const char *cause) {
        ZygotePending *list = TAKE_PTR(z->pending);

        while (list) {
                ZygotePending *p = list;
                list = p->next;
                if (p->fn)
                        p->fn(answer, error, cause, NULL, p->userdata);
                free(p);
        }
        if (z->on_settled)
                z->on_settled(z->settled_userdata);
}

static void arm_spawn_timer(ZygoteClient *z) {
        uint64_t when;

        if (!z->pending) {
                z->spawn_timer = sd_event_source_disable_unref(z->spawn_timer);
                return;
        }
        when = z->pending->sent_usec + (uint64_t) ZYGOTE_SPAWN_TIMEOUT_SEC * 1000000;
        if (z->spawn_timer) {
                sd_event_source_set_time(z->spawn_timer, when);
                sd_event_source_set_enabled(z->spawn_timer, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time(z->event, &z->spawn_timer, CLOCK_MONOTONIC, when, 1000, on_spawn_timeout, z) < 0)
                z->spawn_timer = NULL; /* the zygote's death is still noticed through its pidfd */
}

static int on_spawn_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        ZygoteClient *z = userdata;

        zygote_failed(z, 0, "the zygote did not answer a spawn request within %d s", ZYGOTE_SPAWN_TIMEOUT_SEC);
        zygote_restart(z, ZYGOTE_ANSWER_RETRY, -ETIMEDOUT, "the zygote stopped answering");
        return 0;
}

/* Whether an answer is one this zygote may give: to a request in flight, giving back a
 * slot it holds, naming (on success) a child of ours. A pidfd of any other process is
 * not a worker: it is neither killed nor used. */
static bool answer_plausible(const ZygoteClient *z, const ZygoteMsg *rep, const int *fds) {
        siginfo_t si = {};
        const ZygotePending *p;

        for (p = z->pending; p && p->token != rep->token; p = p->next)
                ;
        if (!p || !zygote_slots_held(&z->slots, rep->slot))
                return false;
        if (rep->error != 0)
                return true;
        /* WNOWAIT: only asks; ECHILD if it is not our child. */
        return waitid(P_PIDFD, (id_t) fds[0], &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

/* One answer (answer_plausible() has found its request): hand it over, descriptors too. */
static void deliver(ZygoteClient *z, const ZygoteMsg *rep, const int *fds) {
        int pidfd = rep->error == 0 ? fds[0] : -1, mntns = rep->error == 0 && rep->mntns ? fds[1] : -1;
        ZygotePending **pp, *p;
        Cgroup *cg = NULL;
        WorkerId id;

        for (pp = &z->pending; (*pp)->token != rep->token; pp = &(*pp)->next)
                ;
        p = *pp;
        *pp = p->next;
        /* The slot given back leaves the zygote: to the worker's runner, or free (no
         * worker ever had it), or into quarantine (its worker is killed as a stray). */
        zygote_slots_take(&z->slots, rep->slot, &cg);
        worker_id_of_slot(z->slots.ids, rep->slot, &id);
        if (!p->fn) {
                /* Abandoned: the worker must not run anything. It is our child and is
                 * reaped as a stray. */
                int own[] = { pidfd, mntns };
                pidfd_kill(pidfd);
                fdpass_close_all(own, ELEMENTSOF(own));
                cgroup_free(cg);
                if (rep->error == 0)
                        worker_id_quarantine(z->slots.ids, rep->slot);
                else
                        worker_id_release(z->slots.ids, rep->slot);
        } else if (rep->error != 0) {
                zygote_slots_release(&z->slots, rep->slot, cg);
                log_warning("Zygote %u failed to start a worker: %s", z->generation, strerror(rep->error));
                p->fn(ZYGOTE_ANSWER_FAILED, -rep->error, "the zygote could not make a worker", NULL, p->userdata);
        } else {
                SpawnedWorker w = {
                        .pid = rep->pid, .pidfd = pidfd, .mntns_fd = mntns, .id = id, .cgroup = cg, .how = rep->how
                };
                p->fn(ZYGOTE_ANSWER_WORKER, 0, NULL, &w, p->userdata);
        }
        free(p);
}

static int on_reply(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;
        unsigned generation = z->generation;

        for (;;) {
                ZygoteMsg rep;
                int k, fds[ZYGOTE_FDS_MAX];
                size_t n_fds;

                k = zygote_msg_recv(z->ctl, &rep, fds, &n_fds, MSG_DONTWAIT);
                if (k == -EAGAIN || k == -EINTR)
                        break;
                if (k >= 0 && (rep.kind != ZYGOTE_MSG_SPAWNED || !answer_plausible(z, &rep, fds))) {
                        fdpass_close_all(fds, n_fds);
                        k = -EBADMSG;
                }
                if (k == -EBADMSG) {
                        /* A zygote that breaks the protocol is not trusted with the calls it
                         * holds either: they end, and the next zygote starts backed off. */
                        zygote_failed(z, 0, "the zygote sent a malformed answer");
                        zygote_restart(z, ZYGOTE_ANSWER_FAILED, -EBADMSG, "the zygote sent a malformed answer");
                        return 0;
                }
                if (k < 0) {
                        zygote_failed(z, k, "the zygote's control channel failed");
                        zygote_restart(z, ZYGOTE_ANSWER_RETRY, k, "the zygote's control channel failed");
                        return 0;
                }
                deliver(z, &rep, fds);
                if (z->generation != generation || !z->ready)
                        return 0; /* the zygote was replaced meanwhile */
        }
        arm_spawn_timer(z);
        if (!z->pending) {
                if (z->on_settled)
                        z->on_settled(z->settled_userdata);
                /* A retiring zygote is replaced once nothing is in flight. */
                if (z->retiring && z->ready)
                        retire_zygote(z);
        }
        return 0;
}

int zygote_client_spawn(ZygoteClient *z, const int fds[_SPAWN_FD_MAX], ZygoteSpawnedFn fn, void *userdata,
                        uint64_t *ret_token) {
        ZygoteMsg req;
        ZygoteSlot slot;
        ZygotePending *p, **tail;
        int all[ZYGOTE_FDS_MAX];
        int k;

        if (!zygote_client_ready(z))
                return ZYGOTE_SPAWN_LATER;
        /* An old zygote serves no new call; it is replaced once its requests in flight
         * are answered (until then it is not ready), and the call waits in the queue
         * for the new one. */
        if (replacement_due(z)) {
                if (z->pending)
                        z->retiring = true;
                else
                        retire_zygote(z);
                return ZYGOTE_SPAWN_LATER;
        }
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        /* The call's descriptors, then its slot's cgroup.procs. */
        memcpy(all, fds, _SPAWN_FD_MAX * sizeof *fds);
        if ((k = zygote_slots_give(&z->slots, z->generation, &slot, all + _SPAWN_FD_MAX)) < 0) {
                free(p);
                return k;
        }
        req = zygote_msg_spawn(++z->token, &slot);
        k = zygote_msg_send(z->ctl, &req, all, _SPAWN_FD_MAX + slot.n_cgroup_fds, MSG_DONTWAIT);
        fdpass_close_all(all + _SPAWN_FD_MAX, slot.n_cgroup_fds);
        if (k < 0) {
                zygote_slots_take_back(&z->slots, slot.slot);
                free(p);
                if (k == -EAGAIN)
                        return -ENOBUFS; /* its socket is full: far more requests than workers */
                zygote_failed(z, k, "sending to the zygote failed");
                zygote_restart(z, ZYGOTE_ANSWER_RETRY, k, "the zygote's control channel failed");
                return k;
        }
        *p = (ZygotePending){ .token = req.token, .sent_usec = now_usec(), .fn = fn, .userdata = userdata };
        for (tail = &z->pending; *tail; tail = &(*tail)->next)
                ;
        *tail = p;
        z->calls++;
        if (!z->spawn_timer || p == z->pending)
                arm_spawn_timer(z);
        *ret_token = req.token;
        return 0;
}

void zygote_client_spawn_abandon(ZygoteClient *z, uint64_t token) {
        for (ZygotePending *p = z ? z->pending : NULL; p; p = p->next)
                if (p->token == token)
                        p->fn = NULL;
}

void zygote_client_idle(ZygoteClient *z, bool exiting) {
        ZygoteMsg req = exiting ? zygote_msg_exiting() : zygote_msg_idle();

        if (!zygote_client_ready(z))
                return; /* a new zygote fills its pool when it starts */
        /* A hint: when the socket is full or the zygote is gone it is simply not given
         * (a dead zygote is noticed through its pidfd). */
        (void) zygote_msg_send(z->ctl, &req, NULL, 0, MSG_DONTWAIT);
}
