/* SPDX-License-Identifier: MIT */
/* One worker's life: start it in fresh namespaces, read its pipes into fitted buffers,
 * kill it from outside on request, reap it, classify how it ended. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "contract/fit.h"
#include "contract/plan.h"
#include "contract/report.h"
#include "policy/policy.h"
#include "supervisor/artifacts.h"
#include "supervisor/cgroup.h"
#include "supervisor/outcome.h"
#include "supervisor/worker_ids.h"
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
        bool has_host_uid;   /* a worker existed: it ran as host_uid */
        uid_t host_uid;
        int exit_code; /* -1 if killed by a signal */
        int signal;    /* 0 if exited */
        uint64_t cpu_usec;
        uint64_t max_rss_kb;
        bool has_memory_peak; /* the worker had a cgroup that reports its peak */
        uint64_t memory_peak_bytes;
        uint64_t start_usec, end_usec; /* CLOCK_MONOTONIC */
        WorkerHow worker_how;          /* how the worker came; NONE without one */
        bool has_outputs;              /* the call had an /outputs (maxArtifacts > 0) and a worker */
        ArtifactSet artifacts;         /* what the worker left there, read after the reap */
} RunnerResult;

typedef struct Runner Runner;
typedef void (*RunnerDoneFn)(Runner *r, RunnerResult *res, void *userdata);

/* How an asked-for worker start ended. "Try again later" and "failed" are different
 * values here and everywhere a start is reported. */
typedef enum RunnerStart {
        RUNNER_STARTED, /* the worker exists */
        RUNNER_RETRY,   /* no worker, through no fault of the call: it may be asked for again */
        RUNNER_FAILED,  /* no worker: the call ends as worker_error with the detail */
} RunnerStart;

/* Why a start did not happen: errno and a detail that names the cause, no user content. */
typedef struct RunnerStartError {
        int error; /* -errno */
        char detail[160];
} RunnerStartError;

/* The worker has begun its last report: its code has run, it is about to exit. What is
 * left of the call is the worker's exit (its address space torn down: ≈ 1 ms here) and
 * the reap. A worker's code could write to the report descriptor itself: this is a
 * hint for scheduling, never a result. Called at most once, from the event loop. */
typedef void (*RunnerFinishingFn)(Runner *r, void *userdata);

/* Zygote mode: the answer to the worker request. err is NULL for RUNNER_STARTED. Not
 * called when the call was killed before the worker existed: done is, with the kill's
 * outcome. */
typedef void (*RunnerStartedFn)(Runner *r, RunnerStart how, const RunnerStartError *err, void *userdata);

typedef struct RunnerRequest {
        const char *code;
        size_t code_len;
        const PlanInput *inputs;
        size_t n_inputs;
} RunnerRequest;

/* The value runner_start() returns when the worker cannot be asked for now (no zygote is
 * ready): the call waits, nothing was spent. */
#define RUNNER_START_LATER 1

/* How workers are made: cloned here and exec'd (worker_exec_fd, the sealed copy of
 * codeinterp-worker), or cloned by the zygote (zygote != NULL). */
typedef struct RunnerSpawner {
        int worker_exec_fd;
        ZygoteClient *zygote;
        CgroupRoot *cgroups; /* a cgroup per worker unless NULL or version none */
        WorkerIds *ids;      /* the workers' host identities */
} RunnerSpawner;

/* Start a worker. Returns 0: in exec mode the worker exists; in zygote mode it is asked
 * for and runner_spawning() is true until started is called. RUNNER_START_LATER: no
 * runner was made, try again when the spawner is ready. -errno: the start failed,
 * ret_err names the cause. done is called at most once, from the event loop, after
 * the worker is reaped (or, killed while spawning, instead of started); never after
 * started reported RUNNER_RETRY or RUNNER_FAILED. */
int runner_start(sd_event *e, const Policy *p, const RunnerSpawner *sp, const RunnerRequest *req, RunnerDoneFn done,
                 RunnerStartedFn started, void *userdata, Runner **ret, RunnerStartError *ret_err);
bool runner_spawning(const Runner *r);
/* Call fn (with the runner's userdata) once the worker begins its last report. */
void runner_set_finishing_callback(Runner *r, RunnerFinishingFn fn);
/* Whether it has (RunnerFinishingFn). */
bool runner_finishing(const Runner *r);
/* If the worker has already exited (its exit not yet processed), finish the call now,
 * as the pidfd event would, and return true; r may have been freed then. */
bool runner_finish_if_exited(Runner *r);
/* SIGKILL the worker from outside; the first reason wins. True when the call will end
 * with a kill's outcome (this reason or an earlier one); false when the worker has
 * already exited: it is left alone and its outcome is what it did (finish it with
 * runner_finish_if_exited()). The answer is final: once true, a worker that exits
 * on its own a moment later still ends as killed. */
bool runner_kill(Runner *r, RunnerKill why);
Runner *runner_free(Runner *r);
pid_t runner_pid(const Runner *r);
/* How its worker came (WORKER_HOW_NONE before it has one). */
WorkerHow runner_worker_how(const Runner *r);
/* The worker has reported its sandbox complete (its "ready" frame): the code runs now. */
bool runner_confined(const Runner *r);
uint64_t runner_stdout_chars(const Runner *r);
uint64_t runner_stderr_chars(const Runner *r);
/* What /outputs holds now (files and other entries, bytes in use), from the tmpfs's own
 * counters: metadata for progress, nothing is read. False when the call has none. */
bool runner_outputs_usage(const Runner *r, uint64_t *ret_count, uint64_t *ret_bytes);
void runner_result_done(RunnerResult *res);
