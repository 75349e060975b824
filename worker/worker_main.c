/* SPDX-License-Identifier: MIT */
/* codeinterp-worker: the cold ("exec") worker. Started by the supervisor inside fresh
 * namespaces (supervisor/exec_spawner.c is the part between its clone and this exec) with
 * the descriptors of contract/fds.h and nothing else. It enters the sandbox, initialises CPython, runs the code once and exits.
 * With --zygote it is the zygote instead (worker/zygote.h). Not meant to be run by hand. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/util.h"
#include "policy/seccomp.h"
#include "contract/fds.h"
#include "contract/plan.h"
#include "worker/pyrun.h"
#include "worker/run.h"
#include "worker/sandbox.h"
#include "worker/zygote.h"

int main(int argc, char **argv) {
        WorkerPlan plan;
        SandboxRuntime rt;
        struct sock_fprog prog;
        SetupStage stage = SETUP_STAGE_NONE;
        int r;

        if (argc >= 2 && strcmp(argv[1], "--zygote") == 0)
                return zygote_main(argc, argv);
        if (argc != 2 || strcmp(argv[1], "--from-supervisor") != 0) {
                static const char msg[] = "codeinterp-worker is started by codeinterpd; it is not run by hand.\n";
                (void) !write(STDERR_FILENO, msg, sizeof msg - 1);
                return 2;
        }

        prctl(PR_SET_NAME, "ci-worker", 0, 0, 0);
        worker_read_plan(&plan);
        r = policy_seccomp_compile(plan.deny, &prog);
        if (r < 0)
                worker_fail(SETUP_STAGE_SECCOMP, r);
        /* Still root's credentials (supervisor/exec_spawner.c): open the runtime, then become the worker. */
        r = sandbox_runtime_open(plan.python_packages, &rt, &stage);
        if (r < 0)
                worker_fail(stage, r);
        r = sandbox_become(plan.sandbox.uid, plan.sandbox.gid, &stage);
        if (r < 0)
                worker_fail(stage, r);
        /* Credential changes clear the parent-death signal: set it again. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        r = sandbox_enter(&rt, &plan.sandbox, &prog, &stage);
        sandbox_runtime_close(&rt);
        if (r < 0)
                worker_fail(stage, r);

        r = pyrun_init_packages(plan.python_packages);
        if (r < 0)
                worker_fail(SETUP_STAGE_PYTHON_INIT, r);

        worker_run(&plan);
}
