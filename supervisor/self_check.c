/* SPDX-License-Identifier: MIT */
/* The self-check (self_check.h): one worker through the path every call takes. */
#include "supervisor/self_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"

struct SelfCheck {
        sd_event *event;
        const Policy *policy;
        const RunnerSpawner *spawner;
        SelfCheckFn fn;
        void *userdata;
        Runner *runner;            /* while a worker is asked for or runs */
        sd_event_source *deadline; /* timeoutMs (at least SELF_CHECK_MIN_TIMEOUT_MS) after the start */
        unsigned retries;          /* worker requests lost with a zygote */
        uint64_t start_usec;
        bool done; /* fn was called */
        char problem[512];
};

/* A lost worker request (the zygote was replaced) is asked again this often at most. */
#define SELF_CHECK_MAX_RETRIES 3

static const char with_file[] = "open('/outputs/self-check', 'w').write('ok')\n" SELF_CHECK_CODE;

/* An EPERM or ENOSYS under a filter the supervisor did not load: say which layer is
 * likely to refuse and what the remedy is (docs/deployment.md). */
static void add_seccomp_hint(SelfCheck *c, int error) {
        size_t n = strlen(c->problem);

        if ((abs(error) != EPERM && abs(error) != ENOSYS) || !proc_under_seccomp_filter())
                return;
        snprintf(c->problem + n, sizeof c->problem - n,
                 "; codeinterpd itself runs under a seccomp filter (Seccomp: 2 in /proc/self/status), such as a "
                 "container engine's default profile, which refuses what a worker's sandbox needs: run it with "
                 "the profile packaging/kubernetes/seccomp-codeinterpd.json (Localhost) or unconfined");
}

static void report(SelfCheck *c, const char *problem) {
        if (c->done)
                return;
        c->done = true;
        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (problem)
                log_error("Self-check failed: %s", problem);
        c->fn(c, problem, now_usec() - c->start_usec, c->userdata);
}

/* What went wrong with the result, or NULL: its value is SELF_CHECK_VALUE and its
 * /outputs file came back. */
static const char *problem_of(SelfCheck *c, const RunnerResult *res) {
        bool file = c->policy->max_artifacts == 0;

        if (res->outcome != OUTCOME_OK) {
                if (res->stage[0])
                        snprintf(c->problem, sizeof c->problem, "%s: %s (setup stage %s: %s)",
                                 outcome_to_string(res->outcome), res->detail[0] ? res->detail : "-", res->stage,
                                 strerror(abs(res->stage_errno)));
                else
                        snprintf(c->problem, sizeof c->problem, "%s%s%s", outcome_to_string(res->outcome),
                                 res->detail[0] ? ": " : "", res->detail);
                add_seccomp_hint(c, res->stage[0] ? res->stage_errno : 0);
                return c->problem;
        }
        if (!res->has_result || !res->result.text || strcmp(res->result.text, SELF_CHECK_VALUE) != 0) {
                snprintf(c->problem, sizeof c->problem, "the worker ran, but its value was not " SELF_CHECK_VALUE);
                return c->problem;
        }
        for (size_t i = 0; res->has_outputs && i < res->artifacts.n; i++)
                if (strcmp(res->artifacts.items[i].name, "self-check") == 0 && res->artifacts.items[i].len == 2 &&
                    memcmp(res->artifacts.items[i].data, "ok", 2) == 0)
                        file = true;
        if (!file) {
                snprintf(c->problem, sizeof c->problem,
                         "the worker ran, but the file it left in /outputs did not come back (%llu omitted; the "
                         "log says why)",
                         (unsigned long long) res->artifacts.omitted);
                return c->problem;
        }
        return NULL;
}

static void on_done(Runner *r, RunnerResult *res, void *userdata) {
        SelfCheck *c = userdata;
        const char *problem = problem_of(c, res);

        runner_result_done(res);
        c->runner = runner_free(c->runner);
        if (c->spawner->zygote)
                zygote_client_idle(c->spawner->zygote, false); /* prepare the next workers */
        report(c, problem);
}

static void try_start(SelfCheck *c);

static void on_started(Runner *r, RunnerStart how, const RunnerStartError *err, void *userdata) {
        SelfCheck *c = userdata;

        if (how == RUNNER_STARTED)
                return;
        c->runner = runner_free(c->runner);
        if (how == RUNNER_RETRY && c->retries++ < SELF_CHECK_MAX_RETRIES) {
                try_start(c); /* now, or at the next kick */
                return;
        }
        snprintf(c->problem, sizeof c->problem, "worker_error: %s", err->detail);
        add_seccomp_hint(c, err->error);
        report(c, c->problem);
}

static void try_start(SelfCheck *c) {
        bool file = c->policy->max_artifacts > 0;
        RunnerRequest req = {
                .code = file ? with_file : SELF_CHECK_CODE,
                .code_len = file ? sizeof with_file - 1 : strlen(SELF_CHECK_CODE),
        };
        RunnerStartError err = {};
        int k;

        if (c->done || c->runner)
                return;
        k = runner_start(c->event, c->policy, c->spawner, &req, on_done, on_started, c, &c->runner, &err);
        if (k == RUNNER_START_LATER) {
                c->runner = NULL; /* waits for self_check_kick() */
                return;
        }
        if (k < 0) {
                c->runner = NULL;
                snprintf(c->problem, sizeof c->problem, "worker_error: %s", err.detail);
                add_seccomp_hint(c, err.error);
                report(c, c->problem);
        }
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        SelfCheck *c = userdata;

        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (c->runner)
                runner_kill(c->runner, RUNNER_KILL_TIMEOUT); /* on_done reports the timeout */
        else
                report(c, "timeout: no worker could be started within timeoutMs");
        return 0;
}

int self_check_start(sd_event *e, const Policy *p, const RunnerSpawner *sp, SelfCheckFn fn, void *userdata,
                     SelfCheck **ret) {
        SelfCheck *c = calloc(1, sizeof *c);
        int k;

        if (!c)
                return -ENOMEM;
        *c = (SelfCheck){ .event = e, .policy = p, .spawner = sp, .fn = fn, .userdata = userdata };
        c->start_usec = now_usec();
        k = sd_event_add_time_relative(e, &c->deadline, CLOCK_MONOTONIC,
                                       (uint64_t) MAX(p->timeout_ms, (uint32_t) SELF_CHECK_MIN_TIMEOUT_MS) * 1000, 1000,
                                       on_deadline, c);
        if (k < 0) {
                free(c);
                return k;
        }
        *ret = c;
        try_start(c);
        return 0;
}

void self_check_kick(SelfCheck *c) {
        if (c)
                try_start(c);
}

void self_check_cancel(SelfCheck *c) {
        if (!c || c->done)
                return;
        if (c->runner)
                runner_kill(c->runner, RUNNER_KILL_SHUTDOWN);
        else
                report(c, "cancelled: the supervisor is stopping");
}

bool self_check_owns_pid(const SelfCheck *c, pid_t pid) {
        return c && c->runner && runner_pid(c->runner) == pid;
}

bool self_check_pending(const SelfCheck *c) {
        return c && !c->done;
}

SelfCheck *self_check_free(SelfCheck *c) {
        if (!c)
                return NULL;
        runner_free(c->runner);
        sd_event_source_disable_unref(c->deadline);
        free(c);
        return NULL;
}
