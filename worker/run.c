/* SPDX-License-Identifier: MIT */
/* The worker's last steps in both start modes (run.h): reading its plan, saying it is
 * ready, running the code in CPython and sending the report, or the setup failure. */
#include "worker/run.h"

#include <stdio.h>
#include <unistd.h>

#include "common/util.h"
#include "contract/fds.h"
#include "contract/report.h"
#include "worker/pyrun.h"

/* pyrun reports limits in the contract's numbering. */
_Static_assert((int) PYRUN_LIMIT_NONE == (int) REPORT_LIMIT_NONE &&
                       (int) PYRUN_LIMIT_MEMORY == (int) REPORT_LIMIT_MEMORY &&
                       (int) PYRUN_LIMIT_FILE_SIZE == (int) REPORT_LIMIT_FILE_SIZE &&
                       (int) PYRUN_LIMIT_PROCESSES == (int) REPORT_LIMIT_PROCESSES,
               "limit numbering");

_Noreturn void worker_fail(SetupStage stage, int r) {
        report_send_setup_error(WORKER_FD_REPORT, stage, r);
        _exit(127);
}

void worker_read_plan(WorkerPlan *ret) {
        void *buf;
        size_t len;
        int r;

        r = read_fd_all(WORKER_FD_PLAN, PLAN_MAX_BYTES, &buf, &len);
        if (r < 0)
                worker_fail(SETUP_STAGE_PLAN, r);
        r = plan_decode(buf, len, ret);
        if (r < 0)
                worker_fail(SETUP_STAGE_PLAN, r);
}

_Noreturn void worker_run(const WorkerPlan *plan) {
        PyrunInput inputs[PLAN_MAX_INPUTS];
        char paths[PLAN_MAX_INPUTS][2][PLAN_INPUT_ID_MAX + 32];
        PyrunReport rep = {};
        int r;

        /* Confined and ready: say so before any user code exists (contract/report.h). */
        r = report_send_ready(WORKER_FD_REPORT);
        if (r < 0)
                worker_fail(SETUP_STAGE_PYTHON_RUN, r);
        for (size_t i = 0; i < plan->sandbox.n_inputs; i++) {
                const PlanInput *in = &plan->sandbox.inputs[i];
                snprintf(paths[i][0], sizeof paths[i][0],
                         in->kind == PLAN_INPUT_OUTPUT ? "/inputs/%s" : "/inputs/%s.txt", in->id);
                snprintf(paths[i][1], sizeof paths[i][1], "/inputs/%s.original", in->id);
                inputs[i] = (PyrunInput){
                        .id = in->id,
                        .text_path = paths[i][0],
                        .original_path = in->kind == PLAN_INPUT_ATTACHMENT ? paths[i][1] : NULL,
                        .media_type = in->kind == PLAN_INPUT_ATTACHMENT ? in->media_type : NULL,
                };
        }
        r = pyrun_execute(plan->code, plan->code_len, inputs, plan->sandbox.n_inputs, WORKER_FD_RESULT, &rep);
        if (r < 0)
                worker_fail(SETUP_STAGE_PYTHON_RUN, r);
        ReportRun run = {
                .exception = rep.exception,
                .has_result = rep.has_result,
                .limit = (ReportLimit) rep.limit,
                .exc_type = rep.exc_type,
                .exc_message = rep.exc_message,
                .exc_traceback = rep.exc_traceback,
        };
        r = report_send_done(WORKER_FD_REPORT, &run, plan->exc_ceiling);
        /* No interpreter finalisation: nothing of the call survives the process anyway,
         * and user atexit handlers do not get to run after the report. */
        _exit(r < 0 ? 126 : 0);
}
