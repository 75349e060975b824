/* SPDX-License-Identifier: MIT */
#include "supervisor/zygote_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/log.h"
#include "common/util.h"
#include "worker/zygote.h"

#define ZYGOTE_START_TIMEOUT_SEC 30
#define ZYGOTE_SPAWN_TIMEOUT_SEC 5

typedef struct ZygotePending ZygotePending;

struct ZygoteClient {
        sd_event *event;
        const Policy *policy;
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
        bool retiring;               /* due for replacement: takes no new request */
        sd_event_source *ctl_source; /* while starting: waits for "ready" */
        sd_event_source *timer;      /* start timeout, or the next launch */
        unsigned failures;           /* consecutive failed starts: the relaunch backs off */
        ZygoteReadyFn on_ready;
        void *userdata;
        ZygotePending *pending;        /* spawn requests sent, answer not yet read (oldest first) */
        sd_event_source *reply_source; /* while ready: answers to spawn requests */
        sd_event_source *spawn_timer;  /* the oldest pending request's deadline */
        ZygoteSettledFn on_settled;
        void *settled_userdata;
};

struct ZygotePending {
        uint64_t token;
        uint64_t sent_usec;
        ZygoteSpawnedFn fn; /* NULL once abandoned: the answer's worker is killed */
        void *userdata;
        ZygotePending *next;
};

static int zygote_launch(ZygoteClient *z);
static void zygote_relaunch_later(ZygoteClient *z);
static void zygote_fail_pending(ZygoteClient *z);

pid_t zygote_client_pid(const ZygoteClient *z) {
        return z->pid;
}

unsigned zygote_client_generation(const ZygoteClient *z) {
        return z->generation;
}

bool zygote_client_ready(const ZygoteClient *z) {
        return z->pid > 0 && z->ready && !z->retiring;
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
        if (z->pid > 0) {
                syscall(SYS_pidfd_send_signal, z->pidfd, SIGKILL, NULL, 0);
                while (waitpid(z->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                z->pid = 0;
        }
        if (z->pidfd >= 0) {
                close(z->pidfd);
                z->pidfd = -1;
        }
}

/* Stop this zygote, start the next one (at once, or backed off after failed starts),
 * and send the calls it had not answered back to the queue. */
static void zygote_restart(ZygoteClient *z) {
        zygote_stop(z);
        zygote_relaunch_later(z);
        zygote_fail_pending(z);
}

static int on_zygote_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;
        int status = 0;

        if (waitpid(z->pid, &status, WNOHANG) <= 0)
                return 0;
        log_warning("The zygote (pid %d) %s %d; starting a new one", (int) z->pid,
                    WIFSIGNALED(status) ? "was killed by signal" : "exited with status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        z->pid = 0;
        if (!z->ready)
                z->failures++;
        zygote_restart(z);
        return 0;
}

static int recv_reply(int ctl, ZygoteSpawned *rep, int *ret_fd) {
        struct iovec iov = { .iov_base = rep, .iov_len = sizeof *rep };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        ssize_t n;

        *ret_fd = -1;
        do
                n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ECONNRESET;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        for (size_t i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                                if (*ret_fd < 0)
                                        *ret_fd = fd;
                                else
                                        close(fd);
                        }
                }
        if ((size_t) n != sizeof *rep || rep->magic != ZYGOTE_MAGIC) {
                if (*ret_fd >= 0)
                        close(*ret_fd);
                *ret_fd = -1;
                return -EBADMSG;
        }
        return 0;
}

static int on_reply(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_spawn_timeout(sd_event_source *s, uint64_t usec, void *userdata);

static int on_ctl_ready(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;
        ZygoteSpawned ready;
        int k, rfd;

        k = recv_reply(z->ctl, &ready, &rfd);
        if (k == -EAGAIN)
                return 0;
        if (rfd >= 0)
                close(rfd);
        if (k >= 0 && ready.token != 0)
                k = -EBADMSG;
        if (k >= 0 && fcntl(z->ctl, F_SETFL, O_NONBLOCK) < 0)
                k = -errno;
        /* From now on ctl carries answers to spawn requests. */
        z->ctl_source = sd_event_source_disable_unref(z->ctl_source);
        if (k >= 0)
                k = sd_event_add_io(z->event, &z->reply_source, z->ctl, EPOLLIN, on_reply, z);
        if (k < 0) {
                log_error_errno(k, "The zygote did not start: %m");
                z->failures++;
                zygote_stop(z);
                zygote_relaunch_later(z);
                return 0;
        }
        z->timer = sd_event_source_disable_unref(z->timer);
        z->ready = true;
        z->failures = 0;
        log_info("Zygote %u ready (pid %d)", z->generation, (int) z->pid);
        if (z->on_ready)
                z->on_ready(z->userdata);
        return 0;
}

static int on_start_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        ZygoteClient *z = userdata;

        log_error("The zygote did not become ready within %d s", ZYGOTE_START_TIMEOUT_SEC);
        z->failures++;
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
                log_error_errno(k, "Starting a zygote failed: %m");
                z->failures++;
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
}

static int zygote_launch(ZygoteClient *z) {
        int sp[2], pidfd = -1, k;
        pid_t pid;

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
                char uid[16], gid[16], pool_size[16];
                char *const argv[] = { "codeinterp-zygote", "--zygote", uid, gid, pool_size, NULL };
                static char *const envp[] = { "LANG=C.UTF-8", NULL };
                sigset_t none;
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                int exe = fcntl(z->worker_exec_fd, F_DUPFD_CLOEXEC, 16);
                int ctl = fcntl(sp[1], F_DUPFD_CLOEXEC, 16);

                snprintf(uid, sizeof uid, "%u", (unsigned) z->policy->worker_uid);
                snprintf(gid, sizeof gid, "%u", (unsigned) z->policy->worker_gid);
                snprintf(pool_size, sizeof pool_size, "%u", z->policy->zygote_pool_size);
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
        on_ctl_ready(z->ctl_source, z->ctl, EPOLLIN, z);
        return z->ready ? 0 : -EIO;
}

int zygote_client_new(sd_event *e, const Policy *p, int worker_exec_fd, ZygoteClient **ret) {
        ZygoteClient *z = calloc(1, sizeof *z);
        int k;

        if (!z)
                return -ENOMEM;
        z->event = e;
        z->policy = p;
        z->worker_exec_fd = worker_exec_fd;
        z->pidfd = z->ctl = -1;
        k = zygote_launch(z);
        if (k >= 0)
                k = wait_first_ready(z);
        if (k < 0) {
                zygote_stop(z);
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
        free(z);
        return NULL;
}

static bool replacement_due(const ZygoteClient *z) {
        const Policy *p = z->policy;
        return z->calls >= p->zygote_max_calls ||
               now_usec() - z->started_usec >= (uint64_t) p->zygote_max_seconds * 1000000;
}

static void replace_zygote(ZygoteClient *z, const char *why) {
        log_info("Replacing zygote %u: %s", z->generation, why);
        zygote_restart(z);
}

/* Every request without an answer fails with -EAGAIN (its call goes back to the queue);
 * abandoned ones are dropped. The list is detached first: a callback may spawn again. */
static void zygote_fail_pending(ZygoteClient *z) {
        ZygotePending *list = TAKE_PTR(z->pending);

        while (list) {
                ZygotePending *p = list;
                list = p->next;
                if (p->fn)
                        p->fn(-EAGAIN, 0, -1, p->userdata);
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

        log_warning("Zygote %u did not answer a spawn request within %d s", z->generation, ZYGOTE_SPAWN_TIMEOUT_SEC);
        replace_zygote(z, "it stopped answering");
        return 0;
}

static int on_reply(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ZygoteClient *z = userdata;

        for (;;) {
                ZygoteSpawned rep;
                ZygotePending **pp, *p;
                int k, pidfd;

                k = recv_reply(z->ctl, &rep, &pidfd);
                if (k == -EAGAIN)
                        break;
                if (k < 0) {
                        log_warning_errno(k, "Zygote %u control channel failed: %m", z->generation);
                        replace_zygote(z, "its control channel failed");
                        return 0;
                }
                for (pp = &z->pending; *pp && (*pp)->token != rep.token; pp = &(*pp)->next)
                        ;
                p = *pp;
                if (!p || (rep.error == 0 && (pidfd < 0 || rep.pid <= 0))) {
                        if (pidfd >= 0) {
                                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                                close(pidfd);
                                pidfd = -1;
                        }
                        if (!p) {
                                log_warning("Zygote %u answered an unknown request", z->generation);
                                continue;
                        }
                        rep.error = EBADMSG;
                }
                *pp = p->next;
                if (!p->fn) {
                        /* Its call is gone: the worker must not run it. It is our child and is
                         * reaped as a stray. */
                        if (pidfd >= 0) {
                                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                                close(pidfd);
                        }
                } else if (rep.error != 0) {
                        if (pidfd >= 0)
                                close(pidfd);
                        log_warning("Zygote %u failed to start a worker: %s", z->generation, strerror(rep.error));
                        /* Its own EAGAIN (clone hit a process limit) fails the call: -EAGAIN
                         * here would put it back into the queue, again and again. */
                        p->fn(rep.error == EAGAIN ? -EBUSY : -rep.error, 0, -1, p->userdata);
                } else
                        p->fn(0, rep.pid, pidfd, p->userdata);
                free(p);
                if (!z->ready)
                        return 0; /* the zygote was replaced meanwhile */
        }
        arm_spawn_timer(z);
        if (!z->pending) {
                if (z->on_settled)
                        z->on_settled(z->settled_userdata);
                /* A retiring zygote is replaced once nothing is in flight. */
                if (z->retiring && z->ready)
                        replace_zygote(z, "it reached zygoteMaxCalls or zygoteMaxSeconds");
        }
        return 0;
}

int zygote_client_spawn(ZygoteClient *z, const int fds[5], ZygoteSpawnedFn fn, void *userdata, uint64_t *ret_token) {
        ZygoteSpawn req = {
                .magic = ZYGOTE_MAGIC,
                .uid = z->policy->worker_uid,
                .gid = z->policy->worker_gid,
                .op = ZYGOTE_OP_SPAWN,
        };
        struct iovec iov = { .iov_base = &req, .iov_len = sizeof req };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_SPAWN_FDS)];
        } u = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        ZygotePending *p, **tail;

        if (!zygote_client_ready(z))
                return -EAGAIN;
        /* An old zygote serves no new call; it is replaced once its requests in flight
         * are answered (until then it is not ready), and the call waits in the queue
         * for the new one. */
        if (replacement_due(z)) {
                if (z->pending)
                        z->retiring = true;
                else
                        replace_zygote(z, "it reached zygoteMaxCalls or zygoteMaxSeconds");
                return -EAGAIN;
        }
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        req.token = ++z->token;
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * ZYGOTE_SPAWN_FDS);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * ZYGOTE_SPAWN_FDS);
        if (sendmsg(z->ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                int k = -errno;
                free(p);
                if (k == -EAGAIN)
                        return -ENOBUFS; /* its socket is full: far more requests than workers */
                log_warning_errno(k, "Sending to zygote %u failed: %m", z->generation);
                replace_zygote(z, "its control channel failed");
                return -EAGAIN;
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

void zygote_client_idle(ZygoteClient *z) {
        ZygoteSpawn req = {
                .magic = ZYGOTE_MAGIC,
                .uid = z->policy->worker_uid,
                .gid = z->policy->worker_gid,
                .op = ZYGOTE_OP_IDLE,
        };

        if (!zygote_client_ready(z))
                return; /* a new zygote fills its pool when it starts */
        /* A hint: when the socket is full or the zygote is gone it is simply not given
         * (a dead zygote is noticed through its pidfd). */
        (void) send(z->ctl, &req, sizeof req, MSG_DONTWAIT | MSG_NOSIGNAL);
}
