/* SPDX-License-Identifier: MIT */
/* The process-wide queue (scheduler.h): admission, capacity, fairness, the memory gate,
 * the whole-call deadline, cancellation, start back-off, the status counters. */
#include "supervisor/scheduler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/list.h"
#include "common/log.h"
#include "common/util.h"

#define UID_SLOTS 64
#define MEMORY_RETRY_USEC 100000
/* After a failed worker start the next start waits 25 ms, doubling per consecutive
 * failure up to 1 s: a failure that persists (a process or descriptor limit) ends
 * calls at a bounded rate instead of in a loop; a success resets it. */
#define START_BACKOFF_MIN_USEC 25000ULL
#define START_BACKOFF_MAX_USEC 1000000ULL
/* A call whose worker request was lost with its zygote is asked for again once. */
#define START_MAX_RETRIES 1
/* What a trial worker runs (see start_trial()). */
#define TRIAL_CODE "None"

typedef struct UidServed {
        uid_t uid;
        uint64_t served;
        bool used;
} UidServed;

struct Scheduler {
        sd_event *event;
        PolicySnapshot *snapshot; /* the server's current policy (not a reference of ours) */
        const Policy *policy;     /* = &snapshot->policy */
        RunnerSpawner spawner;
        SchedCallbacks cb;
        void *userdata;
        Call *queue; /* arrival order */
        Call *running;
        uint32_t n_queued, n_running, capacity;
        uint64_t seq, serve_seq;
        uint64_t admitted_total, started_total, finished_total;
        uint32_t max_running_seen;
        UidServed uids[UID_SLOTS];
        sd_event_source *retry; /* memory gate, or start backoff: when to dispatch again */
        bool dispatching;
        /* worker-start failures */
        uint64_t start_failures_total;
        uint64_t started_by_how[_WORKER_HOW_MAX]; /* started_total, by how the worker came */
        uint32_t start_failures_in_row;
        uint64_t backoff_until; /* CLOCK_MONOTONIC usec; no start before */
        char last_start_error[160];
        /* Readiness after start failures: the trial worker in flight, if any. */
        Call *trial;
        bool stopping; /* shutting down: no more trials */
        /* the memory gate */
        uint64_t memory_gate_holds;
        uint64_t memory_gate_held_usec;  /* finished holds */
        uint64_t memory_gate_held_since; /* CLOCK_MONOTONIC usec while it holds, else 0 */
        uint64_t finished_by_outcome[_OUTCOME_MAX];
        Histogram queue_wait, run_time;
};

static void list_remove(Call **head, Call *c) {
        LIST_REMOVE(q_prev, q_next, *head, c);
}

static void list_append(Call **head, Call *c) {
        Call *t = *head;
        c->q_next = NULL;
        if (!t) {
                c->q_prev = NULL;
                *head = c;
                return;
        }
        while (t->q_next)
                t = t->q_next;
        t->q_next = c;
        c->q_prev = t;
}

static UidServed *uid_slot(Scheduler *s, uid_t uid) {
        UidServed *free_slot = NULL, *oldest = &s->uids[0];
        for (size_t i = 0; i < UID_SLOTS; i++) {
                if (s->uids[i].used && s->uids[i].uid == uid)
                        return &s->uids[i];
                if (!s->uids[i].used && !free_slot)
                        free_slot = &s->uids[i];
                if (s->uids[i].served < oldest->served)
                        oldest = &s->uids[i];
        }
        UidServed *u = free_slot ?: oldest;
        *u = (UidServed){ .uid = uid, .used = true };
        return u;
}

/* Fairness: among queued calls, serve the peer uid served longest ago, then within it
 * the fairness group (invocation) served longest ago, then arrival order. A group that
 * queues many calls therefore gets one turn per round, not one turn per call. */
static Call *pick_next(Scheduler *s) {
        Call *best = NULL;
        uint64_t best_u = 0, best_g = 0;

        for (Call *c = s->queue; c; c = c->q_next) {
                uint64_t u = uid_slot(s, c->uid)->served;
                uint64_t g = c->fair ? c->fair->served : 0;
                if (!best || u < best_u || (u == best_u && (g < best_g || (g == best_g && c->seq < best->seq)))) {
                        best = c;
                        best_u = u;
                        best_g = g;
                }
        }
        return best;
}

uint32_t sched_queue_position(const Scheduler *s, const Call *c) {
        uint32_t pos = 1;
        if (c->state != CALL_QUEUED)
                return 0;
        for (Call *o = s->queue; o; o = o->q_next)
                if (o != c && o->seq < c->seq)
                        pos++;
        return pos;
}

/* The memory gate: the lower of MemAvailable from /proc/meminfo (the kernel's own
 * estimate of what can be allocated without swapping) and the room left in our
 * memory cgroup. 0 disables the gate. */
static bool memory_available(const Scheduler *s) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[256];
        unsigned long long kb;
        uint64_t avail = UINT64_MAX;

        if (s->policy->min_available_memory_bytes == 0)
                return true;
        f = fopen("/proc/meminfo", "re");
        while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                        avail = kb * 1024ULL;
                        break;
                }
        avail = MIN(avail, cgroup_self_memory_available());
        return avail >= s->policy->min_available_memory_bytes;
}

static void finish(Scheduler *s, Call *c, RunnerResult *res) {
        if (c->state == CALL_FINISHED)
                return;
        if (c->state == CALL_QUEUED) {
                list_remove(&s->queue, c);
                s->n_queued--;
        } else if (c->state == CALL_RUNNING) {
                list_remove(&s->running, c);
                s->n_running--;
        }
        c->state = CALL_FINISHED;
        c->end_usec = now_usec();
        c->deadline = sd_event_source_disable_unref(c->deadline);
        c->heartbeat = sd_event_source_disable_unref(c->heartbeat);
        s->finished_total++;
        if (res->outcome < _OUTCOME_MAX)
                s->finished_by_outcome[res->outcome]++;
        if (c->started) {
                histogram_observe(&s->queue_wait, c->start_usec - c->admit_usec);
                histogram_observe(&s->run_time, c->end_usec - c->start_usec);
        } else
                histogram_observe(&s->queue_wait, c->end_usec - c->admit_usec);
        s->cb.finished(c, res, s->userdata);
}

static void dispatch(Scheduler *s);
static void on_runner_finishing(Runner *r, void *userdata);

static int on_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Scheduler *s = userdata;
        s->retry = sd_event_source_disable_unref(s->retry);
        dispatch(s);
        return 0;
}

static void trial_end(Scheduler *s);

static void on_runner_done(Runner *r, RunnerResult *res, void *userdata) {
        Call *c = userdata;
        Scheduler *s = c->sched;

        if (c->trial) {
                runner_result_done(res);
                trial_end(s);
                dispatch(s);
                return;
        }
        finish(s, c, res);
        /* The runner is freed with the call; start whoever is next. */
        dispatch(s);
}

static int on_heartbeat(sd_event_source *src, uint64_t usec, void *userdata) {
        Call *c = userdata;
        if (c->state != CALL_RUNNING)
                return 0;
        c->sched->cb.progress(c, "running", c->sched->userdata);
        sd_event_source_set_time(src, usec + (uint64_t) call_policy(c)->heartbeat_ms * 1000);
        sd_event_source_set_enabled(src, SD_EVENT_ON);
        return 0;
}

/* The worker exists: the call is under way. */
static void call_started(Scheduler *s, Call *c) {
        c->started = true;
        s->started_total++;
        s->started_by_how[runner_worker_how(c->runner)]++;
        if (s->n_running > s->max_running_seen)
                s->max_running_seen = s->n_running;
        s->cb.progress(c, "started", s->userdata);
        if (call_policy(c)->heartbeat_ms > 0 &&
            sd_event_add_time_relative(s->event, &c->heartbeat, CLOCK_MONOTONIC,
                                       (uint64_t) call_policy(c)->heartbeat_ms * 1000, 1000, on_heartbeat, c) < 0)
                c->heartbeat = NULL;
}

/* Back into the queue, unchanged: no zygote could take it (one is starting). */
static void requeue(Scheduler *s, Call *c) {
        c->runner = runner_free(c->runner);
        list_remove(&s->running, c);
        s->n_running--;
        c->state = CALL_QUEUED;
        list_append(&s->queue, c);
        s->n_queued++;
}

/* A start failed (a call's or a trial's): remember why, count it in the row, back the
 * next start off. Returns the back-off. */
static uint64_t count_start_failure(Scheduler *s, const RunnerStartError *err) {
        uint64_t delay = MIN(START_BACKOFF_MIN_USEC << MIN(s->start_failures_in_row, 6u), START_BACKOFF_MAX_USEC);
        uint32_t unready_after = s->policy->unready_after_start_failures;

        snprintf(s->last_start_error, sizeof s->last_start_error, "%s", err->detail);
        s->start_failures_in_row++;
        s->backoff_until = now_usec() + delay;
        if (unready_after > 0 && s->start_failures_in_row == unready_after)
                log_warning("Not ready: %u worker starts failed in a row (unreadyAfterStartFailures); a trial worker "
                            "is tried after each back-off until one starts",
                            s->start_failures_in_row);
        return delay;
}

/* The call ends as worker_error naming the cause; the next start backs off. */
static void start_failed(Scheduler *s, Call *c, const RunnerStartError *err) {
        RunnerResult res = { .outcome = OUTCOME_WORKER_ERROR, .exit_code = -1 };
        uint64_t delay;

        c->runner = runner_free(c->runner);
        snprintf(res.detail, sizeof res.detail, "%s", err->detail);
        s->start_failures_total++;
        delay = count_start_failure(s, err);
        res.start_usec = res.end_usec = now_usec();
        log_warning("Call %llu: %s (%u in a row; the next start waits %llu ms)", (unsigned long long) c->call_id,
                    err->detail, s->start_failures_in_row, (unsigned long long) delay / 1000);
        finish(s, c, &res);
}

static void start_succeeded(Scheduler *s) {
        uint32_t unready_after = s->policy->unready_after_start_failures;

        if (unready_after > 0 && s->start_failures_in_row >= unready_after)
                log_notice("Ready again: a worker started after %u failed starts in a row", s->start_failures_in_row);
        s->start_failures_in_row = 0;
        s->backoff_until = 0;
}

static void retry_in(Scheduler *s, uint64_t usec);

/* ---- trial workers ----
 *
 * After unreadyAfterStartFailures failed starts in a row the supervisor reports itself
 * not ready until a worker starts again. A readiness probe that fails keeps callers
 * away, and without calls nothing would ever start: so while that holds and no call
 * waits or runs, the scheduler starts a worker of its own after each back-off, a trial:
 * TRIAL_CODE under the current policy, for nobody. Its start counts like a call's
 * (success resets the row, failure adds to it and backs off); nothing else of it is
 * counted or sent. Calls that arrive meanwhile wait until it is over (dispatch()). */

static bool trial_wanted(const Scheduler *s) {
        uint32_t unready_after = s->policy->unready_after_start_failures;

        return unready_after > 0 && s->start_failures_in_row >= unready_after && !s->trial && !s->stopping &&
               !s->queue && s->n_running == 0;
}

static void trial_end(Scheduler *s) {
        Call *c = TAKE_PTR(s->trial);

        c->state = CALL_FINISHED;
        call_unref(c);
}

static void trial_failed(Scheduler *s, const RunnerStartError *err) {
        uint64_t delay = count_start_failure(s, err);

        log_debug("Trial worker: %s (%u in a row)", err->detail, s->start_failures_in_row);
        trial_end(s);
        retry_in(s, delay);
}

static int on_deadline(sd_event_source *src, uint64_t usec, void *userdata);
static void on_runner_started(Runner *r, RunnerStart how, const RunnerStartError *err, void *userdata);

static void start_trial(Scheduler *s) {
        RunnerRequest req = { .code = TRIAL_CODE, .code_len = strlen(TRIAL_CODE) };
        RunnerStartError err = {};
        Call *c;
        int k;

        if (call_new(s->snapshot, req.code, req.code_len, req.code_len, NULL, 0, &c) < 0) {
                retry_in(s, START_BACKOFF_MAX_USEC);
                return;
        }
        c->trial = true;
        c->sched = s;
        c->state = CALL_RUNNING;
        c->admit_usec = c->start_usec = now_usec();
        s->trial = c;
        /* Bounded like a call: a worker that hangs is killed at the policy's deadline. */
        if (sd_event_add_time(s->event, &c->deadline, CLOCK_MONOTONIC,
                              c->admit_usec + (uint64_t) call_policy(c)->timeout_ms * 1000, 1, on_deadline, c) < 0) {
                trial_end(s);
                retry_in(s, START_BACKOFF_MAX_USEC);
                return;
        }
        k = runner_start(s->event, call_policy(c), &s->spawner, &req, on_runner_done, on_runner_started, c, &c->runner,
                         &err);
        if (k == RUNNER_START_LATER) {
                trial_end(s); /* no zygote now: its ready callback dispatches again */
                return;
        }
        if (k < 0) {
                c->runner = runner_free(c->runner);
                trial_failed(s, &err);
                return;
        }
        if (!runner_spawning(c->runner)) {
                log_debug("Trial worker started (pid %d)", (int) runner_pid(c->runner));
                start_succeeded(s);
        }
}

static void on_runner_started(Runner *r, RunnerStart how, const RunnerStartError *err, void *userdata) {
        Call *c = userdata;
        Scheduler *s = c->sched;

        if (c->trial) {
                /* A zygote that went away before it answered (RUNNER_RETRY) counts as a
                 * failure too: the trial only runs while starts are failing anyway, and
                 * the next one waits for a zygote that is ready. */
                if (how == RUNNER_STARTED)
                        start_succeeded(s);
                else {
                        c->runner = runner_free(c->runner);
                        trial_failed(s, err);
                }
                return;
        }
        switch (how) {
        case RUNNER_STARTED:
                start_succeeded(s);
                call_started(s, c);
                return;
        case RUNNER_RETRY:
                if (c->start_retries++ < START_MAX_RETRIES) {
                        requeue(s, c);
                        break;
                }
                start_failed(s, c, err);
                break;
        case RUNNER_FAILED:
                start_failed(s, c, err);
                break;
        }
        dispatch(s);
}

static void start_call(Scheduler *s, Call *c) {
        RunnerRequest req = {
                .code = c->code,
                .code_len = c->code_len,
                .inputs = c->inputs,
                .n_inputs = c->n_inputs,
        };
        UidServed *u = uid_slot(s, c->uid);
        RunnerStartError err = {};
        int k;

        list_remove(&s->queue, c);
        s->n_queued--;
        u->served = ++s->serve_seq;
        if (c->fair)
                c->fair->served = s->serve_seq;

        c->state = CALL_RUNNING;
        c->start_usec = now_usec();
        list_append(&s->running, c);
        s->n_running++;

        k = runner_start(s->event, call_policy(c), &s->spawner, &req, on_runner_done, on_runner_started, c, &c->runner,
                         &err);
        if (k == RUNNER_START_LATER) {
                requeue(s, c);
                return;
        }
        if (k < 0) {
                start_failed(s, c, &err);
                return;
        }
        runner_set_finishing_callback(c->runner, on_runner_finishing);
        if (!runner_spawning(c->runner)) {
                start_succeeded(s);
                call_started(s, c);
        }
}

/* Calls wait while a zygote is starting (sched_kick() resumes when one is ready); a
 * broken one (its starts keep failing) does not keep them waiting: they are started,
 * and fail naming the cause. */
static bool spawner_ready(const Scheduler *s) {
        return !s->spawner.zygote || zygote_client_state(s->spawner.zygote) != ZYGOTE_STATE_STARTING;
}

static void retry_in(Scheduler *s, uint64_t usec) {
        if (!s->retry)
                (void) sd_event_add_time_relative(s->event, &s->retry, CLOCK_MONOTONIC, usec, 1000, on_retry, s);
}

/* The memory gate holds queued calls back (holding), or does not: count the holds and
 * the time spent in them. */
static void memory_gate_set(Scheduler *s, bool holding) {
        uint64_t now = now_usec();

        if (holding && s->memory_gate_held_since == 0) {
                s->memory_gate_holds++;
                s->memory_gate_held_since = now;
                log_debug("The memory gate holds queued calls back: available memory is below minAvailableMemoryBytes");
        } else if (!holding && s->memory_gate_held_since != 0) {
                s->memory_gate_held_usec += now - s->memory_gate_held_since;
                s->memory_gate_held_since = 0;
                log_debug("The memory gate lets calls start again");
        }
}

/* A trial worker, when one is wanted and may start now (see start_trial()). */
static void maybe_start_trial(Scheduler *s) {
        uint64_t now = now_usec();

        if (!trial_wanted(s))
                return;
        /* A zygote that is not serving is restarted by its client, whose ready callback
         * dispatches again. */
        if (s->spawner.zygote && zygote_client_state(s->spawner.zygote) != ZYGOTE_STATE_READY)
                return;
        if (now < s->backoff_until) {
                retry_in(s, s->backoff_until - now);
                return;
        }
        if (!memory_available(s)) {
                retry_in(s, MEMORY_RETRY_USEC);
                return;
        }
        start_trial(s);
}

/* Nothing waits and no call's code runs: the moment for the zygote to prepare the next
 * workers. IDLE when no call runs at all; EXITING when each running call's worker has
 * begun its last report and only its exit (≈ 1 ms) is left: the zygote then prepares a
 * worker only if it has none, beside those exits rather than after them, for the call
 * that comes right after (docs/performance.md, "When the pool is refilled"). */
static void maybe_idle(Scheduler *s) {
        if (s->queue || s->trial || !s->spawner.zygote)
                return;
        for (const Call *c = s->running; c; c = c->q_next)
                if (!c->runner || !runner_finishing(c->runner))
                        return;
        zygote_client_idle(s->spawner.zygote, s->n_running > 0);
}

static void on_runner_finishing(Runner *r, void *userdata) {
        Call *c = userdata;

        (void) r;
        maybe_idle(c->sched);
}

static void dispatch(Scheduler *s) {
        bool gate_holds = false;

        if (s->dispatching)
                return;
        s->dispatching = true;
        while (s->queue && !s->trial && s->n_running < s->capacity && spawner_ready(s)) {
                uint64_t now = now_usec();

                if (now < s->backoff_until) {
                        retry_in(s, s->backoff_until - now);
                        break;
                }
                if (!memory_available(s)) {
                        gate_holds = true;
                        retry_in(s, MEMORY_RETRY_USEC);
                        break;
                }
                start_call(s, pick_next(s));
        }
        memory_gate_set(s, gate_holds);
        maybe_start_trial(s);
        s->dispatching = false;
        maybe_idle(s);
}

static int on_deadline(sd_event_source *src, uint64_t usec, void *userdata) {
        Call *c = userdata;
        Scheduler *s = c->sched;

        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (c->state == CALL_QUEUED) {
                RunnerResult res = { .outcome = OUTCOME_TIMEOUT, .exit_code = -1 };
                snprintf(res.detail, sizeof res.detail, "the deadline passed while the call was queued");
                finish(s, c, &res);
        } else if (c->state == CALL_RUNNING)
                runner_kill(c->runner, RUNNER_KILL_TIMEOUT);
        return 0;
}

int sched_new(sd_event *e, PolicySnapshot *p, const RunnerSpawner *sp, const SchedCallbacks *cb, void *userdata,
              Scheduler **ret) {
        Scheduler *s = calloc(1, sizeof *s);

        if (!s)
                return -ENOMEM;
        s->event = e;
        s->snapshot = p;
        s->policy = &p->policy;
        s->spawner = *sp;
        s->cb = *cb;
        s->userdata = userdata;
        s->capacity = policy_active_workers(s->policy);
        *ret = s;
        return 0;
}

Scheduler *sched_free(Scheduler *s) {
        if (!s)
                return NULL;
        if (s->trial)
                trial_end(s); /* its runner kills and reaps the worker */
        sd_event_source_disable_unref(s->retry);
        free(s);
        return NULL;
}

void sched_set_policy(Scheduler *s, PolicySnapshot *p) {
        s->snapshot = p;
        s->policy = &p->policy;
        s->capacity = policy_active_workers(s->policy);
        dispatch(s);
}

void sched_kick(Scheduler *s) {
        dispatch(s);
}

int sched_submit(Scheduler *s, Call *c) {
        int k;

        /* maxQueuedCalls bounds the calls that wait; one that can start at once never waits. */
        if (s->n_queued >= s->policy->max_queued_calls && !(s->n_running < s->capacity && !s->queue))
                return -EBUSY;
        c->sched = s;
        c->admit_usec = now_usec();
        c->seq = ++s->seq;
        k = sd_event_add_time(s->event, &c->deadline, CLOCK_MONOTONIC,
                              c->admit_usec + (uint64_t) call_policy(c)->timeout_ms * 1000, 1, on_deadline, c);
        if (k < 0)
                return k;
        c->state = CALL_QUEUED;
        list_append(&s->queue, c);
        s->n_queued++;
        s->admitted_total++;
        s->cb.progress(c, "requested", s->userdata);
        s->cb.progress(c, "queued", s->userdata);
        /* The call may start here, and even finish (its worker could not start): the
         * caller holds its own reference (call_ref) across this. */
        dispatch(s);
        return 0;
}

int sched_cancel(Scheduler *s, Call *c, RunnerKill why) {
        if (c->state == CALL_QUEUED) {
                RunnerResult res = { .outcome = OUTCOME_CANCELLED, .exit_code = -1 };
                snprintf(res.detail, sizeof res.detail, "%s",
                         why == RUNNER_KILL_SHUTDOWN ? "the supervisor is shutting down" : "cancelled while queued");
                finish(s, c, &res);
                return 0;
        }
        if (c->state == CALL_RUNNING) {
                runner_kill(c->runner, why);
                return 0;
        }
        return -ESRCH;
}

void sched_cancel_all(Scheduler *s) {
        s->stopping = true;
        if (s->trial && s->trial->runner)
                runner_kill(s->trial->runner, RUNNER_KILL_SHUTDOWN);
        while (s->queue)
                sched_cancel(s, s->queue, RUNNER_KILL_SHUTDOWN);
        for (Call *c = s->running; c; c = c->q_next)
                runner_kill(c->runner, RUNNER_KILL_SHUTDOWN);
}

bool sched_owns_pid(const Scheduler *s, pid_t pid) {
        for (Call *c = s->running; c; c = c->q_next)
                if (c->runner && runner_pid(c->runner) == pid)
                        return true;
        return s->trial && s->trial->runner && runner_pid(s->trial->runner) == pid;
}

void sched_get_stats(const Scheduler *s, SchedStats *ret) {
        *ret = (SchedStats){
                .queued = s->n_queued,
                .running = s->n_running,
                .capacity = s->capacity,
                .admitted_total = s->admitted_total,
                .started_total = s->started_total,
                .finished_total = s->finished_total,
                .max_running_seen = s->max_running_seen,
                .start_failures_total = s->start_failures_total,
                .started_by_how = s->started_by_how,
                .start_failures_in_row = s->start_failures_in_row,
                .last_start_error = s->last_start_error[0] ? s->last_start_error : NULL,
                .memory_gate_holds = s->memory_gate_holds,
                .memory_gate_holding = s->memory_gate_held_since != 0,
                .memory_gate_held_usec = s->memory_gate_held_usec +
                                         (s->memory_gate_held_since ? now_usec() - s->memory_gate_held_since : 0),
                .queue_wait = s->queue_wait,
                .run_time = s->run_time,
        };
        memcpy(ret->finished_by_outcome, s->finished_by_outcome, sizeof ret->finished_by_outcome);
}

static int call_info_cmp(const void *a, const void *b) {
        uint64_t x = ((const SchedCallInfo *) a)->call_id, y = ((const SchedCallInfo *) b)->call_id;
        return (x > y) - (x < y);
}

size_t sched_list_calls(const Scheduler *s, SchedCallInfo *ret, size_t max) {
        size_t n = 0;

        for (const Call *c = s->running; c && n < max; c = c->q_next) {
                bool confined = c->runner && runner_confined(c->runner) && runner_pid(c->runner) > 0;
                ret[n++] = (SchedCallInfo){
                        .call_id = c->call_id,
                        .state = confined ? SCHED_CALL_RUNNING : SCHED_CALL_STARTING,
                        .worker_pid = confined ? runner_pid(c->runner) : 0,
                };
        }
        for (const Call *c = s->queue; c && n < max; c = c->q_next)
                ret[n++] = (SchedCallInfo){ .call_id = c->call_id, .state = SCHED_CALL_QUEUED };
        qsort(ret, n, sizeof *ret, call_info_cmp);
        return n;
}
