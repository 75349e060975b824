/* SPDX-License-Identifier: MIT */
/* The last steps every worker takes, in both start modes, once its sandbox is
 * complete and CPython is initialised. */
#pragma once

#include "contract/plan.h"
#include "contract/stage.h"

/* Report a setup failure on the report pipe and exit 127. */
_Noreturn void worker_fail(SetupStage stage, int r);
/* Read and decode the call's plan from WORKER_FD_PLAN; on failure report it (stage
 * "plan") and exit. The plan points into a buffer that lives as long as the process. */
void worker_read_plan(WorkerPlan *ret);
/* Expose the plan's inputs, run its code, send the report, exit. */
_Noreturn void worker_run(const WorkerPlan *plan);
