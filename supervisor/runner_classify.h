/* SPDX-License-Identifier: MIT */
/* How a worker's call ended, from what the runner saw: the kill it sent (if any), the
 * worker's report, its exit status and rusage, its cgroup's OOM kills. The one place
 * outcomes of finished workers are decided (runner.c calls it after the reap). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "policy/policy.h"
#include "supervisor/runner.h"

typedef struct RunnerEnding {
        const Policy *policy;
        RunnerKill kill;       /* the first kill's reason, or NONE */
        const uint8_t *report; /* what the worker sent on its report channel after "ready" */
        size_t report_len;
        uint64_t oom_kills; /* read from its cgroup after the reap */
} RunnerEnding;

/* The outcome, detail, stage, limit, exit code, signal, CPU time, max RSS and the
 * parsed report (which res then owns) into *res. */
void runner_classify(const RunnerEnding *e, int status, const struct rusage *ru, RunnerResult *res);
