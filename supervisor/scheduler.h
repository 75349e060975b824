/* SPDX-License-Identifier: MIT */
/* The process-wide queue: admission, capacity, fairness, the whole-call deadline and
 * cancellation. A call is finished exactly once, by exactly one of: its worker ending,
 * its deadline, a cancel, or shutdown. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"
#include "supervisor/call.h"
#include "supervisor/metrics.h"
#include "supervisor/outcome.h"
#include "supervisor/runner.h"

typedef struct SchedCallbacks {
        /* Called exactly once per submitted call; res is owned by the callee for the duration. */
        void (*finished)(Call *c, RunnerResult *res, void *userdata);
        /* Metadata-only phase changes: "requested", "queued", "started", "running"
         * (the server adds "finished"). */
        void (*progress)(Call *c, const char *phase, void *userdata);
} SchedCallbacks;

typedef struct SchedStats {
        uint32_t queued;
        uint32_t running;
        uint32_t capacity;
        uint64_t admitted_total;
        uint64_t started_total;
        uint64_t finished_total;
        uint32_t max_running_seen;
        uint64_t start_failures_total;  /* calls that ended because their worker could not start */
        const uint64_t *started_by_how; /* [_WORKER_HOW_MAX]: started_total by how the worker came */
        uint32_t start_failures_in_row; /* > 0: starts are failing now (and backing off); trial
                                         * workers' failures count here too */
        const char *last_start_error;   /* the last such failure's detail, or NULL */
        /* The memory gate (minAvailableMemoryBytes): times it began to hold queued calls
         * back, whether it holds them now, and for how long it has held them in all. */
        uint64_t memory_gate_holds;
        bool memory_gate_holding;
        uint64_t memory_gate_held_usec;
        uint64_t finished_by_outcome[_OUTCOME_MAX];
        /* One observation per finished call: queue wait (admission to its worker's start,
         * or to its end when no worker started), and run time (start to end; calls with
         * a worker only). */
        Histogram queue_wait, run_time;
} SchedStats;

/* One admitted call that has not finished, as status shows it. */
typedef enum SchedCallState {
        SCHED_CALL_QUEUED,
        SCHED_CALL_STARTING, /* its worker is asked for, or exists and is entering its sandbox */
        SCHED_CALL_RUNNING,  /* its worker reported its sandbox complete: the code runs */
} SchedCallState;

typedef struct SchedCallInfo {
        uint64_t call_id;
        SchedCallState state;
        pid_t worker_pid; /* SCHED_CALL_RUNNING only, else 0 */
} SchedCallInfo;

/* p: the current policy (the server's reference; see sched_set_policy()). */
int sched_new(sd_event *e, PolicySnapshot *p, const RunnerSpawner *sp, const SchedCallbacks *cb, void *userdata,
              Scheduler **ret);
Scheduler *sched_free(Scheduler *s);
/* Admit: starts the deadline and queues the call. -EBUSY when the queue is full (the call
 * is not admitted and the caller answers "overloaded"). */
int sched_submit(Scheduler *s, Call *c);
/* Cancel: a queued call finishes as cancelled at once and never starts; a running call's
 * worker is SIGKILLed and it finishes when reaped. Returns -ESRCH if already finished. */
int sched_cancel(Scheduler *s, Call *c, RunnerKill why);
/* The current policy (reload): the queue bound, capacity, memory gate and
 * unreadyAfterStartFailures follow it at once; each call keeps the limits, deadline and
 * heartbeat of the policy it was admitted under (call_policy()), and so does a trial
 * worker (it takes its own reference). p must stay valid until the next call or
 * sched_free(). */
void sched_set_policy(Scheduler *s, PolicySnapshot *p);
/* Try to start queued calls (e.g. a zygote became ready). */
void sched_kick(Scheduler *s);
/* Cancel everything (shutdown), a trial worker included; no trial starts after it. */
void sched_cancel_all(Scheduler *s);
void sched_get_stats(const Scheduler *s, SchedStats *ret);
/* The calls admitted and not finished (queued plus running: at most that many), in
 * callId order, into ret; returns how many were written (at most max). */
size_t sched_list_calls(const Scheduler *s, SchedCallInfo *ret, size_t max);
/* Whether pid is a running call's worker, or the trial worker. */
bool sched_owns_pid(const Scheduler *s, pid_t pid);
/* Position (1-based) of a queued call in the current serving order estimate; 0 if not queued. */
uint32_t sched_queue_position(const Scheduler *s, const Call *c);
