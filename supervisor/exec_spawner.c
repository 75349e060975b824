/* SPDX-License-Identifier: MIT */
/* Exec mode's worker creation (exec_spawner.h): a host identity and a cgroup, the clone
 * into fresh namespaces, the child's steps up to the exec of the worker binary, the id
 * maps, the release. */
#include "supervisor/exec_spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/child_start.h"
#include "common/cleanup.h"
#include "common/clone.h"
#include "common/fdpass.h"
#include "common/proc.h"
#include "common/userns.h"
#include "contract/report.h"
#include "contract/stage.h"

#define EXEC_CLONE_FLAGS                                                                                               \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

/* What the cloned child needs before its exec. */
typedef struct ExecChild {
        int sync_fd;                      /* read end: one byte once the id maps are written */
        int fds[_WORKER_FD_MAX];          /* the worker's descriptors, by WorkerFd */
        int worker_exec_fd;               /* the sealed codeinterp-worker */
        int cgroup_fds[CGROUP_PROCS_MAX]; /* its cgroup's cgroup.procs, entered after the sync */
        size_t n_cgroup_fds;
} ExecChild;

static _Noreturn void child_fail(int report_fd, SetupStage stage, int error) {
        report_send_setup_error(report_fd, stage, error);
        _exit(127);
}

/* In the child, from the clone on. Nothing here may allocate much or take locks: it
 * runs in a copy of the supervisor's address space, single-threaded, and ends in an
 * exec. A failure before the exec is reported on the report pipe as (stage, errno),
 * like any later setup step. */
static _Noreturn void child_main(const ExecChild *c) {
        int report_fd = c->fds[WORKER_FD_REPORT], exe, r;
        sigset_t all;
        char byte;

        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                signal(sig, SIG_DFL);

        /* Wait until the creator has written our uid/gid maps. */
        if (read(c->sync_fd, &byte, 1) != 1)
                child_fail(report_fd, SETUP_STAGE_SYNC, EPIPE);
        /* Into its cgroup before anything else: what it touches from here on is charged there. */
        r = child_enter_cgroup(c->cgroup_fds, c->n_cgroup_fds);
        if (r < 0)
                child_fail(report_fd, SETUP_STAGE_CGROUP, -r);
        /* The worker binary's fd may sit where a worker fd must go: move it up first. */
        exe = fcntl(c->worker_exec_fd, F_DUPFD_CLOEXEC, 16);
        if (exe < 0)
                child_fail(report_fd, SETUP_STAGE_FDS, errno);
        r = child_install_fds(c->fds, _WORKER_FD_MAX);
        if (r < 0)
                child_fail(report_fd, SETUP_STAGE_FDS, r);
        /* The worker changes its identity itself, after the exec (worker/sandbox.h): the
         * loader and the runtime's opening still run with root's credentials. */
        r = child_carry_caps();
        if (r < 0)
                child_fail(WORKER_FD_REPORT, SETUP_STAGE_CAPS_KEEP, r);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        static char *const argv[] = { "codeinterp-worker", "--from-supervisor", NULL };
        static char *const envp[] = { "LANG=C.UTF-8", NULL };
        syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
        child_fail(WORKER_FD_REPORT, SETUP_STAGE_EXEC, errno);
}

/* Clone the child. v2: born in its cgroup, nothing to move (a move waits for an RCU
 * grace period). v1, or a kernel without CLONE_INTO_CGROUP: the child moves itself
 * once released (child_enter_cgroup()), so the move's wait does not block this loop;
 * c->cgroup_fds are then the descriptors it writes to, ours again in the parent. */
static pid_t clone_child(Cgroup *cg, ExecChild *c, int *ret_pidfd, const char **ret_step) {
        pid_t pid = -ENOSYS;
        int k;

        *ret_step = "clone";
        if (cgroup_clone_fd(cg) >= 0) {
                pid = clone_into_cgroup_with_pidfd(EXEC_CLONE_FLAGS, SIGCHLD, cgroup_clone_fd(cg), ret_pidfd);
                if (pid >= 0)
                        cg = NULL; /* in it already */
        }
        if (pid != -ENOSYS && pid != -E2BIG)
                return pid;
        if (cg) {
                *ret_step = "opening its cgroup";
                k = cgroup_open_procs(cg, c->cgroup_fds, &c->n_cgroup_fds);
                if (k < 0)
                        return k;
                *ret_step = "clone";
        }
        return clone_with_pidfd(EXEC_CLONE_FLAGS, SIGCHLD, ret_pidfd);
}

/* The supervisor is the worker's creator and maps its ids (workerUid inside, its own
 * host uid outside), then lets it go. */
static int map_and_release(const Policy *p, const WorkerId *id, pid_t pid, int sync_w, const char **ret_step) {
        int k;

        *ret_step = "writing its id maps";
        k = userns_write_id_maps(pid, p->worker_uid, id->uid, p->worker_gid, id->gid);
        if (k < 0)
                return k;
        *ret_step = "releasing it";
        if (write(sync_w, "x", 1) != 1)
                return -errno;
        return 0;
}

/* Clone the child into the worker's namespaces, map its ids, let it go. The child's
 * fds are ours until then. */
static int start_child(const ExecSpawner *x, const Policy *p, Cgroup *cg, const WorkerId *id,
                       const int fds[_SPAWN_FD_MAX], pid_t *ret_pid, int *ret_pidfd, const char **ret_step) {
        _cleanup_close_ int devnull = -1, sync_r = -1, sync_w = -1;
        int sync_pipe[2], pidfd = -1, k;
        ExecChild c = { .cgroup_fds = { -1, -1, -1 }, .worker_exec_fd = x->worker_exec_fd };
        pid_t pid;

        *ret_step = "opening /dev/null";
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                return -errno;
        *ret_step = "creating its sync pipe";
        if (pipe2(sync_pipe, O_CLOEXEC) < 0)
                return -errno;
        sync_r = sync_pipe[0];
        sync_w = sync_pipe[1];
        pid = clone_child(cg, &c, &pidfd, ret_step);
        if (pid < 0) {
                fdpass_close_all(c.cgroup_fds, c.n_cgroup_fds);
                return pid;
        }
        if (pid == 0) {
                c.sync_fd = sync_r;
                c.fds[WORKER_FD_STDIN] = devnull;
                c.fds[WORKER_FD_STDOUT] = fds[SPAWN_FD_STDOUT];
                c.fds[WORKER_FD_STDERR] = fds[SPAWN_FD_STDERR];
                c.fds[WORKER_FD_REPORT] = fds[SPAWN_FD_REPORT];
                c.fds[WORKER_FD_RESULT] = fds[SPAWN_FD_RESULT];
                c.fds[WORKER_FD_PLAN] = fds[SPAWN_FD_PLAN];
                c.fds[WORKER_FD_OUTPUTS] = fds[SPAWN_FD_OUTPUTS];
                child_main(&c);
        }
        fdpass_close_all(c.cgroup_fds, c.n_cgroup_fds);
        k = map_and_release(p, id, pid, sync_w, ret_step);
        if (k < 0) {
                kill_and_reap(pid, pidfd);
                close(pidfd);
                return k;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}

int exec_spawner_spawn(const ExecSpawner *x, const Policy *p, const int fds[_SPAWN_FD_MAX], ZygoteSpawnedFn fn,
                       void *userdata, const char **ret_step) {
        Cgroup *cg = NULL;
        WorkerId id;
        pid_t pid = 0;
        int pidfd = -1, k;

        /* Its own cgroup, made before the worker exists. */
        k = cgroup_new(x->cgroups, p->memory_bytes, p->processes, &cg, ret_step);
        if (k < 0)
                return k;
        *ret_step = "taking a host uid";
        k = worker_id_acquire(x->ids, &id);
        if (k < 0) {
                cgroup_free(cg);
                return k;
        }
        k = start_child(x, p, cg, &id, fds, &pid, &pidfd, ret_step);
        if (k < 0) {
                /* No worker was left behind: its id is free again. */
                worker_id_release(x->ids, id.slot);
                cgroup_free(cg);
                return k;
        }
        /* No mount namespace yet: it is held once the worker has exec'd (runner.c). */
        SpawnedWorker w = {
                .pid = pid, .pidfd = pidfd, .mntns_fd = -1, .id = id, .cgroup = cg, .how = WORKER_HOW_EXEC
        };
        fn(ZYGOTE_ANSWER_WORKER, 0, NULL, &w, userdata);
        return 0;
}
