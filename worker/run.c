/* SPDX-License-Identifier: MIT */
#include "worker/run.h"

#include <stdio.h>
#include <unistd.h>

#include "common/util.h"
#include "worker/pyrun.h"
#include "worker/report.h"

#define PLAN_MAX_BYTES (1u << 30)

_Noreturn void worker_fail(SandboxStage stage, int r) {
        report_send_setup_error(REPORT_FD, stage, r);
        _exit(127);
}

void worker_read_plan(WorkerPlan *ret) {
        void *buf;
        size_t len;
        int r;

        r = read_fd_all(REPORT_PLAN_FD, PLAN_MAX_BYTES, &buf, &len);
        if (r < 0)
                worker_fail(SANDBOX_STAGE_PLAN, r);
        r = plan_decode(buf, len, ret);
        if (r < 0)
                worker_fail(SANDBOX_STAGE_PLAN, r);
}

_Noreturn void worker_run(const WorkerPlan *plan) {
        PyrunInput inputs[SANDBOX_MAX_INPUTS];
        char paths[SANDBOX_MAX_INPUTS][2][SANDBOX_ID_MAX + 32];
        PyrunReport rep = {};
        int r;

        for (size_t i = 0; i < plan->sandbox.n_inputs; i++) {
                const SandboxInput *in = &plan->sandbox.inputs[i];
                snprintf(paths[i][0], sizeof paths[i][0], "/inputs/%s.txt", in->id);
                snprintf(paths[i][1], sizeof paths[i][1], "/inputs/%s.original", in->id);
                inputs[i] = (PyrunInput){
                        .id = in->id,
                        .text_path = paths[i][0],
                        .original_path = in->kind == SANDBOX_INPUT_ATTACHMENT ? paths[i][1] : NULL,
                        .media_type = in->kind == SANDBOX_INPUT_ATTACHMENT ? in->media_type : NULL,
                };
        }
        r = pyrun_execute(plan->code, plan->code_len, inputs, plan->sandbox.n_inputs, REPORT_RESULT_FD, &rep);
        if (r < 0)
                worker_fail(SANDBOX_STAGE_PYTHON_RUN, r);
        r = report_send_done(REPORT_FD, &rep, plan->exc_ceiling);
        /* No interpreter finalisation: nothing of the call survives the process anyway,
         * and user atexit handlers do not get to run after the report. */
        _exit(r < 0 ? 126 : 0);
}
