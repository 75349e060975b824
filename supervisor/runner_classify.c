/* SPDX-License-Identifier: MIT */
/* Classifying how a worker ended (runner_classify.h). */
#include "supervisor/runner_classify.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "contract/report.h"

/* RLIMIT_CPU is enforced on tick-sampled user + system time; rusage (and /proc, which
 * shows the same adjusted figures) reports the scheduler's runtime, which on a loaded
 * guest has been seen well below it (823 ms of CPU at a 1 s limit). Nothing inside the
 * sandbox can SIGKILL the worker (it is init of its pid namespace), so an unexplained
 * SIGKILL after at least half the limit's CPU is the limit. */
#define CPU_LIMIT_SLACK_USEC(limit_usec) MAX(200000ULL, (limit_usec) / 2)

/* The outcome and its detail (printf-style, cut to fit) into *res. */
#define set_detail(res, o, ...) ((res)->outcome = (o), set_why((res)->detail, sizeof((res)->detail), __VA_ARGS__))

/* Killed from outside: the reason is the outcome, whatever the worker did. */
static bool classify_kill(const RunnerEnding *r, RunnerResult *res) {
        res->partial = r->kill != RUNNER_KILL_NONE;
        bool worker = res->pid > 0; /* else killed while the zygote was making it */

        switch (r->kill) {
        case RUNNER_KILL_TIMEOUT:
                set_detail(res, OUTCOME_TIMEOUT,
                           worker ? "the deadline passed while the code was running"
                                  : "the deadline passed before a worker was started");
                return true;
        case RUNNER_KILL_CANCEL:
                set_detail(res, OUTCOME_CANCELLED,
                           worker ? "cancelled while running" : "cancelled before a worker was started");
                return true;
        case RUNNER_KILL_SHUTDOWN:
                set_detail(res, OUTCOME_CANCELLED, "the supervisor is shutting down");
                return true;
        case RUNNER_KILL_REPORT:
                set_detail(res, OUTCOME_WORKER_ERROR, "the worker's report exceeded maxWorkerMessageBytes");
                return true;
        case RUNNER_KILL_NONE:
                break;
        }
        return false;
}

/* Exactly one well-formed frame, or nothing (0: no report). 1 with *ret filled, or
 * -EBADMSG. */
static int parse_report(const RunnerEnding *r, WorkerReport *ret) {
        uint32_t n;

        if (r->report_len == 0)
                return 0;
        n = r->report_len >= 4 ? frame_get_len(r->report) : 0;
        if (r->report_len < 4 || (size_t) n + 4 != r->report_len ||
            report_parse(r->report + 4, n, r->policy->max_output_characters, ret) < 0)
                return -EBADMSG;
        return 1;
}

/* Ended by a signal nobody outside sent. The model text tells the code's deaths from the
 * sandbox's by the beginnings of these details and of "the worker exited with status"
 * (client/lib/render.c code_death(), python/codeinterp/render.py): change them together. */
static void classify_signal(const RunnerEnding *r, int sig, RunnerResult *res) {
        /* RLIMIT_CPU's SIGKILL: the worker is init in its pid namespace, so the soft
         * limit's SIGXCPU does nothing and soft == hard. */
        uint64_t limit_usec = (uint64_t) r->policy->cpu_seconds * 1000000;

        res->partial = true;
        if (sig == SIGKILL && r->oom_kills > 0) {
                /* Only the kernel's OOM killer, counted in the worker's cgroup, does this
                 * (besides RLIMIT_CPU, which cannot have been near if it came first). */
                set_detail(res, OUTCOME_RESOURCE_LIMIT,
                           "the worker's memory cgroup reached memoryBytes (%llu bytes): the kernel's OOM "
                           "killer ended it",
                           (unsigned long long) r->policy->memory_bytes);
                res->limit = "memory";
        } else if (sig == SIGXCPU ||
                   (sig == SIGKILL && res->cpu_usec + CPU_LIMIT_SLACK_USEC(limit_usec) >= limit_usec)) {
                set_detail(res, OUTCOME_RESOURCE_LIMIT, "CPU time limit (%u s) reached", r->policy->cpu_seconds);
                res->limit = "cpu";
        } else if (sig == SIGSYS)
                set_detail(res, OUTCOME_WORKER_ERROR, "killed by the seccomp filter (a denied system call)");
        else
                set_detail(res, OUTCOME_WORKER_ERROR, "the worker died from signal %d (%s)", sig,
                           sigabbrev_np(sig) ?: "?");
}

void runner_classify(const RunnerEnding *r, int status, const struct rusage *ru, RunnerResult *res) {
        WorkerReport rep = {};
        int have_report;

        res->cpu_usec = (uint64_t) ru->ru_utime.tv_sec * 1000000 + (uint64_t) ru->ru_utime.tv_usec +
                        (uint64_t) ru->ru_stime.tv_sec * 1000000 + (uint64_t) ru->ru_stime.tv_usec;
        res->max_rss_kb = (uint64_t) ru->ru_maxrss;
        res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

        if (classify_kill(r, res))
                return;
        have_report = parse_report(r, &rep);
        if (have_report < 0) {
                set_detail(res, OUTCOME_WORKER_ERROR, "the worker sent a malformed report");
                return;
        }
        if (have_report && rep.kind == REPORT_SETUP_ERROR) {
                snprintf(res->stage, sizeof res->stage, "%s", rep.stage);
                res->stage_errno = rep.error;
                set_detail(res, OUTCOME_WORKER_ERROR, "sandbox setup failed at %s: %s", rep.stage, strerror(rep.error));
                report_done(&rep);
                return;
        }
        if (WIFSIGNALED(status) || !have_report || rep.kind != REPORT_DONE || WEXITSTATUS(status) != 0) {
                report_done(&rep);
                if (WIFSIGNALED(status))
                        classify_signal(r, WTERMSIG(status), res);
                else
                        set_detail(res, OUTCOME_WORKER_ERROR, "the worker exited with status %d without a result",
                                   WEXITSTATUS(status));
                return;
        }

        res->has_result = rep.has_result;
        if (rep.exception && rep.limit != REPORT_LIMIT_NONE) {
                res->outcome = OUTCOME_RESOURCE_LIMIT;
                res->limit = report_limit_to_string(rep.limit);
        } else
                res->outcome = rep.exception ? OUTCOME_PYTHON_EXCEPTION : OUTCOME_OK;
        res->report = rep;
}
