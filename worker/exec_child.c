/* SPDX-License-Identifier: MIT */
/* Exec mode: the worker's first steps, in the child the supervisor has just cloned
 * (contract/exec_start.h). Nothing here may allocate much or take locks: it runs in a
 * copy of the supervisor's address space, single-threaded, and ends in an exec. */
#include "contract/exec_start.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "contract/report.h"
#include "worker/sandbox.h"

static _Noreturn void fail(int report_fd, SetupStage stage, int error) {
        report_send_setup_error(report_fd, stage, error);
        _exit(127);
}

_Noreturn void exec_child_main(const ExecStart *start) {
        SetupStage stage = SETUP_STAGE_NONE;
        int report_fd = start->fds[WORKER_FD_REPORT], exe, r;
        sigset_t all;
        char c;

        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < _NSIG; sig++)
                signal(sig, SIG_DFL);

        /* Wait until the creator has written our uid/gid maps. */
        if (read(start->sync_fd, &c, 1) != 1)
                fail(report_fd, SETUP_STAGE_SYNC, EPIPE);
        /* Into its cgroup before anything else: what it touches from here on is charged there. */
        if ((r = sandbox_enter_cgroup(start->cgroup_fds, start->n_cgroup_fds)) < 0)
                fail(report_fd, SETUP_STAGE_CGROUP, -r);
        /* The worker binary's fd may sit where a worker fd must go: move it up first. */
        exe = fcntl(start->worker_exec_fd, F_DUPFD_CLOEXEC, 16);
        if (exe < 0)
                fail(report_fd, SETUP_STAGE_FDS, errno);
        if ((r = sandbox_install_fds(start->fds, _WORKER_FD_MAX)) < 0)
                fail(report_fd, SETUP_STAGE_FDS, r);
        /* The worker changes its identity itself, after the exec (sandbox.h): the loader
         * and sandbox_runtime_open() still run with root's credentials. */
        if ((r = sandbox_carry_caps(&stage)) < 0)
                fail(WORKER_FD_REPORT, stage, r);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        static char *const argv[] = { "codeinterp-worker", "--from-supervisor", NULL };
        static char *const envp[] = { "LANG=C.UTF-8", NULL };
        syscall(SYS_execveat, exe, "", argv, envp, AT_EMPTY_PATH);
        fail(WORKER_FD_REPORT, SETUP_STAGE_EXEC, errno);
}
