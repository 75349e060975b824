/* SPDX-License-Identifier: MIT */
/* One admitted call: what it runs, who asked, where it stands. Reference-counted: the
 * scheduler's finish hands the last word to the server, and whoever still uses a call
 * across a step that may finish it (handle_execute across sched_submit) holds its own
 * reference, so no code path reads a freed call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "common/cleanup.h"
#include "contract/plan.h"
#include "supervisor/invocation.h"

typedef struct Connection Connection; /* supervisor/server.c */
typedef struct Runner Runner;         /* supervisor/runner.h */
typedef struct Scheduler Scheduler;   /* supervisor/scheduler.h */

typedef enum CallState {
        CALL_NEW,
        CALL_QUEUED,
        CALL_RUNNING,
        CALL_FINISHED,
} CallState;

typedef struct Call Call;

struct Call {
        unsigned n_ref;
        uint64_t call_id;       /* supervisor-chosen, unique for the process lifetime */
        uint64_t request_id;    /* the client's id, echoed */
        Connection *conn;       /* the owning connection; NULL once it is gone */
        Invocation *inv;        /* its invocation; NULL for an anonymous call or once closed */
        FairGroup *fair;        /* its fairness group (the invocation's, or the connection's
                              * anonymous one); NULL once that group is gone */
        uid_t uid;              /* the peer's uid: the outer fairness level */
        PolicySnapshot *policy; /* the policy it was admitted under (a reference): a reload
                                 * changes new calls only */

        char *code;
        size_t code_len;
        uint64_t code_chars;
        PlanInput inputs[PLAN_MAX_INPUTS]; /* point into sources[i] */
        Source *sources[PLAN_MAX_INPUTS];  /* references keeping the source bytes alive */
        size_t n_inputs;

        /* keepOutputs (docs/protocol.md#kept-outputs) */
        uint32_t inv_call_no; /* its number in its invocation, 1-based; 0 anonymous */
        bool keep_requested, keep_all;
        char *keep[PROTO_MAX_KEEP_OUTPUTS]; /* the names, NUL-terminated */
        size_t n_keep;

        CallState state;
        uint64_t admit_usec, start_usec, end_usec;
        uint64_t seq;           /* arrival order */
        bool started;           /* a worker was started */
        bool trial;             /* the scheduler's trial worker (sched_*): no caller, no counter */
        unsigned start_retries; /* times its worker request was lost with a zygote */
        sd_event_source *deadline;
        sd_event_source *heartbeat;
        Runner *runner;
        Scheduler *sched;
        Call *q_prev, *q_next; /* scheduler's queue / running list */
        Call *c_prev, *c_next; /* connection's list */
};

/* A new call (one reference) for code under policy, mounting sources[0..n) (the policy
 * and the sources are referenced). */
int call_new(PolicySnapshot *policy, const char *code, size_t code_len, uint64_t code_chars, Source *const *sources,
             size_t n, Call **ret);
/* The policy the call was admitted under. */
static inline const Policy *call_policy(const Call *c) {
        return &c->policy->policy;
}
/* Copy the request's keepOutputs into the call. */
int call_set_keep(Call *c, const ProtoRequest *req);
Call *call_ref(Call *c);
Call *call_unref(Call *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Call *, call_unref)
