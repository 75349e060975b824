/* SPDX-License-Identifier: MIT */
/* One worker's life: start it in fresh namespaces, read its pipes into fitted buffers,
 * kill it from outside on request, reap it, classify how it ended. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"
#include "supervisor/fit.h"
#include "supervisor/outcome.h"
#include "worker/report.h"
#include "worker/sandbox.h"
#include "supervisor/zygote_client.h"

typedef enum RunnerKill {
        RUNNER_KILL_NONE,
        RUNNER_KILL_TIMEOUT,
        RUNNER_KILL_CANCEL,
        RUNNER_KILL_SHUTDOWN,
        RUNNER_KILL_REPORT, /* the worker broke the report protocol */
} RunnerKill;

typedef struct RunnerResult {
        Outcome outcome;
        const char *limit; /* resource_limit: "memory" | "cpu" | "file_size" | "processes" */
        char detail[160];  /* worker_error / cancelled: a short explanation, no user content */
        char stage[32];    /* worker_error from setup: the failed step */
        int stage_errno;
        FitText out, err, result;
        bool has_result;
        WorkerReport report; /* when the worker sent "done" */
        bool partial;        /* killed before it finished: output is what arrived until then */
        pid_t pid;           /* the worker's pid on the host */
        int exit_code;       /* -1 if killed by a signal */
        int signal;          /* 0 if exited */
        uint64_t cpu_usec;
        uint64_t max_rss_kb;
        uint64_t start_usec, end_usec; /* CLOCK_MONOTONIC */
} RunnerResult;

typedef struct Runner Runner;
typedef void (*RunnerDoneFn)(Runner *r, RunnerResult *res, void *userdata);
/* Zygote mode: the worker exists (error 0) or could not be made (-errno; -EAGAIN: the
 * zygote went away, the call may wait for the next one). Not called when the call was
 * killed before the worker existed: done is, with the kill's outcome. */
typedef void (*RunnerStartedFn)(Runner *r, int error, void *userdata);

typedef struct RunnerRequest {
        const char *code;
        size_t code_len;
        const SandboxInput *inputs;
        size_t n_inputs;
} RunnerRequest;

/* How workers are made: cloned here and exec'd (worker_exec_fd, the sealed copy of
 * codeinterp-worker), or cloned by the zygote (zygote != NULL). */
typedef struct RunnerSpawner {
        int worker_exec_fd;
        ZygoteClient *zygote;
} RunnerSpawner;

/* Start a worker. In exec mode it exists when this returns; in zygote mode it is asked
 * for and runner_spawning() is true until started is called. done is called at most
 * once, from the event loop, after the worker is reaped (or, killed while spawning,
 * instead of started); never after started reported an error. */
int runner_start(sd_event *e, const Policy *p, const RunnerSpawner *sp, const RunnerRequest *req, RunnerDoneFn done,
                 RunnerStartedFn started, void *userdata, Runner **ret);
bool runner_spawning(const Runner *r);
/* If the worker has already exited (its exit not yet processed), finish the call now,
 * as the pidfd event would, and return true; r may have been freed then. */
bool runner_finish_if_exited(Runner *r);
/* SIGKILL the worker from outside; the first reason wins. A worker that has already
 * exited is left alone: its outcome is what it did. */
void runner_kill(Runner *r, RunnerKill why);
Runner *runner_free(Runner *r);
pid_t runner_pid(const Runner *r);
uint64_t runner_stdout_chars(const Runner *r);
uint64_t runner_stderr_chars(const Runner *r);
void runner_result_done(RunnerResult *res);
