/* SPDX-License-Identifier: MIT */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "worker/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "policy/seccomp.h"
#include "worker/plan.h"
#include "worker/pyrun.h"
#include "worker/report.h"
#include "worker/sandbox.h"

#define PLAN_MAX_BYTES (1u << 30)

static struct sock_fprog filters[2]; /* [0] errno mode, [1] kill mode */
static int devnull = -1;

/* The zygote keeps only what it needs to write id maps for its children. */
static int zygote_drop_privileges(void) {
        static const cap_value_t keep[] = { CAP_SETUID, CAP_SETGID };
        _cleanup_(cap_free) cap_t caps = cap_init();

        if (!caps)
                return -ENOMEM;
        for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
                if (c != CAP_SETUID && c != CAP_SETGID && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        if (cap_set_flag(caps, CAP_PERMITTED, ELEMENTSOF(keep), keep, CAP_SET) < 0 ||
            cap_set_flag(caps, CAP_EFFECTIVE, ELEMENTSOF(keep), keep, CAP_SET) < 0 || cap_set_proc(caps) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

static int write_id_map(pid_t pid, const char *which, unsigned id) {
        char path[64], line[64];
        _cleanup_close_ int fd = -1;
        int n;

        snprintf(path, sizeof path, "/proc/%d/%s", (int) pid, which);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = snprintf(line, sizeof line, "%u %u 1\n", id, id);
        if (write(fd, line, (size_t) n) != n)
                return -errno;
        return 0;
}

static _Noreturn void fail(SandboxStage stage, int r) {
        report_send_setup_error(REPORT_FD, stage, r);
        _exit(127);
}

/* In the new worker: a copy of the zygote, in fresh namespaces. */
static _Noreturn void child_main(const ZygoteSpawn *req, int sync_fd, const int *fds) {
        PyrunInput inputs[SANDBOX_MAX_INPUTS];
        char paths[SANDBOX_MAX_INPUTS][2][SANDBOX_ID_MAX + 32];
        int src[6] = { devnull, fds[0], fds[1], fds[2], fds[3], fds[4] };
        int tmp[6];
        SandboxStage stage = SANDBOX_STAGE_NONE;
        PyrunReport rep = {};
        WorkerPlan plan;
        sigset_t none;
        void *buf;
        size_t len;
        char c;
        int r;

        PyOS_AfterFork_Child();
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        /* Descriptors first, so every failure below can be reported on fd 3. */
        for (int i = 0; i < 6; i++)
                if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 16)) < 0)
                        _exit(127);
        for (int i = 0; i < 6; i++)
                if (dup2(tmp[i], i) < 0)
                        _exit(127);
        if (read(sync_fd, &c, 1) != 1)
                fail(SANDBOX_STAGE_SYNC, EPIPE);

        r = read_fd_all(REPORT_PLAN_FD, PLAN_MAX_BYTES, &buf, &len);
        if (r < 0)
                fail(SANDBOX_STAGE_PLAN, r);
        r = plan_decode(buf, len, &plan);
        if (r < 0)
                fail(SANDBOX_STAGE_PLAN, r);
        if (plan.sandbox.uid != req->uid || plan.sandbox.gid != req->gid)
                fail(SANDBOX_STAGE_PLAN, EINVAL);
        plan.sandbox.seccomp = &filters[plan.deny == POLICY_DENY_KILL];
        plan.sandbox.max_keep_fd = REPORT_RESULT_FD;

        r = sandbox_become(&plan.sandbox, false, &stage);
        if (r < 0)
                fail(stage, r);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* the supervisor, our parent (CLONE_PARENT) */
        r = sandbox_enter(&plan.sandbox, &stage);
        if (r < 0)
                fail(stage, r);

        /* Fresh per call what forking alone would copy. */
        r = pyrun_reseed();
        if (r < 0)
                fail(SANDBOX_STAGE_PYTHON_INIT, r);

        for (size_t i = 0; i < plan.sandbox.n_inputs; i++) {
                const SandboxInput *in = &plan.sandbox.inputs[i];
                snprintf(paths[i][0], sizeof paths[i][0], "/inputs/%s.txt", in->id);
                snprintf(paths[i][1], sizeof paths[i][1], "/inputs/%s.original", in->id);
                inputs[i] = (PyrunInput){
                        .id = in->id,
                        .text_path = paths[i][0],
                        .original_path = in->kind == SANDBOX_INPUT_ATTACHMENT ? paths[i][1] : NULL,
                        .media_type = in->kind == SANDBOX_INPUT_ATTACHMENT ? in->media_type : NULL,
                };
        }
        r = pyrun_execute(plan.code, plan.code_len, inputs, plan.sandbox.n_inputs, REPORT_RESULT_FD, &rep);
        if (r < 0)
                fail(SANDBOX_STAGE_PYTHON_RUN, r);
        r = report_send_done(REPORT_FD, &rep, plan.exc_ceiling);
        _exit(r < 0 ? 126 : 0);
}

static int send_reply(int ctl, const ZygoteSpawned *rep, int pidfd) {
        struct iovec iov = { .iov_base = (void *) rep, .iov_len = sizeof *rep };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (pidfd >= 0) {
                mh.msg_control = u.buf;
                mh.msg_controllen = sizeof u.buf;
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
        }
        return sendmsg(ctl, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* One request. Returns <0 only when the control channel is gone. */
static int serve_one(int ctl) {
        ZygoteSpawn req;
        ZygoteSpawned rep = { .magic = ZYGOTE_MAGIC };
        struct iovec iov = { .iov_base = &req, .iov_len = sizeof req };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_SPAWN_FDS)];
        } u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        int fds[ZYGOTE_SPAWN_FDS], n_fds = 0, pidfd = -1, sync[2] = { -1, -1 };
        ssize_t n;
        pid_t pid;

        n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        if (n == 0)
                return -ECONNRESET;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        int k = (int) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        for (int i = 0; i < k; i++) {
                                int fd;
                                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                                if (n_fds < ZYGOTE_SPAWN_FDS)
                                        fds[n_fds++] = fd;
                                else
                                        close(fd);
                        }
                }
        rep.token = req.token;
        if ((size_t) n != sizeof req || req.magic != ZYGOTE_MAGIC || n_fds != ZYGOTE_SPAWN_FDS ||
            (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || req.uid == 0 || req.gid == 0) {
                rep.error = EBADMSG;
                goto out;
        }
        if (pipe2(sync, O_CLOEXEC) < 0) {
                rep.error = errno;
                goto out;
        }

        struct clone_args args = {
                .flags = CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                         CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_PIDFD,
                .pidfd = (uint64_t) (uintptr_t) &pidfd,
                /* With CLONE_PARENT the kernel uses the zygote's own exit signal (SIGCHLD). */
                .exit_signal = 0,
        };
        PyOS_BeforeFork();
        pid = (pid_t) syscall(SYS_clone3, &args, sizeof args);
        if (pid == 0) {
                close(sync[1]);
                close(ctl);
                child_main(&req, sync[0], fds);
        }
        PyOS_AfterFork_Parent();
        if (pid < 0) {
                rep.error = errno;
                goto out;
        }
        rep.pid = pid;
        int k;
        if ((k = write_id_map(pid, "uid_map", req.uid)) < 0 || (k = write_id_map(pid, "gid_map", req.gid)) < 0 ||
            write(sync[1], "x", 1) != 1) {
                /* The child exits when it reads EOF on sync; tell the supervisor. */
                rep.error = k < 0 ? -k : EIO;
                rep.pid = 0;
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        }
out:
        if (sync[0] >= 0)
                close(sync[0]);
        if (sync[1] >= 0)
                close(sync[1]);
        for (int i = 0; i < n_fds; i++)
                close(fds[i]);
        k = send_reply(ctl, &rep, rep.error ? -1 : pidfd);
        if (pidfd >= 0)
                close(pidfd);
        return k < 0 ? k : 0;
}

int zygote_main(void) {
        ZygoteSpawned ready = { .magic = ZYGOTE_MAGIC };
        int r;

        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (chdir("/") < 0)
                return 1;
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return 1;
        if (policy_seccomp_compile(POLICY_DENY_ERRNO, &filters[0]) < 0 ||
            policy_seccomp_compile(POLICY_DENY_KILL, &filters[1]) < 0) {
                fprintf(stderr, "codeinterp-zygote: compiling the seccomp filter failed\n");
                return 1;
        }
        r = pyrun_init();
        if (r >= 0)
                r = pyrun_preload();
        if (r < 0) {
                fprintf(stderr, "codeinterp-zygote: initialising Python failed: %s\n", strerror(-r));
                return 1;
        }
        /* Everything allocated so far is shared copy-on-write with every worker: keep
         * the collector from touching (and so copying) it. */
        PyRun_SimpleString("import gc; gc.freeze()");
        r = zygote_drop_privileges();
        if (r < 0) {
                fprintf(stderr, "codeinterp-zygote: dropping privileges failed: %s\n", strerror(-r));
                return 1;
        }
        if (send_reply(ZYGOTE_CTL_FD, &ready, -1) < 0)
                return 1;
        for (;;) {
                r = serve_one(ZYGOTE_CTL_FD);
                if (r < 0)
                        return 0; /* the supervisor closed the channel: we are done */
        }
}
