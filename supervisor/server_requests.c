/* SPDX-License-Identifier: MIT */
/* The requests a connection makes (server_internal.h): decoded frames dispatched to
 * their handlers (hello, describe, status, invocations, sources, execute, cancel), the
 * calls they admit, and what those calls tell their connection: progress and the
 * result. */
#include "supervisor/server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/landlock.h"
#include "common/list.h"
#include "common/log.h"
#include "common/mp.h"
#include "common/sha256.h"
#include "common/userns.h"
#include "common/util.h"

/* ---- calls ---- */

static void conn_call_add(Connection *c, Call *call) {
        LIST_PREPEND(c_prev, c_next, c->calls, call);
}

static void conn_call_remove(Connection *c, Call *call) {
        LIST_REMOVE(c_prev, c_next, c->calls, call);
}

/* Metadata only: never code, output, source IDs, paths or exception text. Sizes come
 * from the live streams while running and from the fitted result at the end. */
static void send_progress(Connection *c, const Policy *p, Call *call, const char *phase, const RunnerResult *res,
                          Scheduler *sched) {
        ProtoProgress pr = {
                .request_id = call->request_id,
                .call_id = call->call_id,
                .phase = phase,
                .elapsed_ms = (now_usec() - call->admit_usec) / 1000,
                .queue_position = call->state == CALL_QUEUED && sched ? sched_queue_position(sched, call) : 0,
                .stdout_chars = res            ? res->out.total_chars
                                : call->runner ? runner_stdout_chars(call->runner)
                                               : 0,
                .stderr_chars = res            ? res->err.total_chars
                                : call->runner ? runner_stderr_chars(call->runner)
                                               : 0,
                .ceiling = p->max_output_characters,
                .outcome = res ? outcome_to_string(res->outcome) : NULL,
        };
        MpWriter w;

        /* Artifacts: how many and how large, never names. While running, the tmpfs's own
         * counters (entries, bytes allocated); at the end, what the reader found. */
        if (res && res->has_outputs) {
                pr.has_outputs = true;
                pr.artifacts = res->artifacts.n + res->artifacts.omitted;
                pr.artifact_bytes = res->artifacts.omitted_bytes;
                for (size_t i = 0; i < res->artifacts.n; i++)
                        pr.artifact_bytes += res->artifacts.items[i].len;
        } else if (!res && call->runner)
                pr.has_outputs = runner_outputs_usage(call->runner, &pr.artifacts, &pr.artifact_bytes);
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_progress(&w, &pr));
}

void on_call_progress(Call *call, const char *phase, void *userdata) {
        Server *s = userdata;
        Connection *c = call->conn;

        if (!c || c->closing)
                return;
        send_progress(c, call_policy(call), call, phase, NULL, s->sched);
}

static ProtoSourceInfo source_info(const Source *src) {
        return (ProtoSourceInfo){
                .id = src->id,
                .attachment = src->attachment,
                .output = src->output,
                .produced_by = src->produced_by,
                .text_bytes = src->text_len,
                .text_sha256 = src->text_sha256,
                .original_bytes = src->original_len,
                .original_sha256 = src->attachment ? src->original_sha256 : NULL,
                .media_type = src->media_type,
        };
}

/* The same kernel runs every worker: ask once. 0 = the Landlock layer is skipped. */
static int landlock_abi_cached(void) {
        static int abi = -1;
        if (abi < 0)
                abi = landlock_abi();
        return abi;
}

static const Artifact *find_artifact(const RunnerResult *res, const char *name) {
        if (!res->has_outputs)
                return NULL;
        for (size_t i = 0; i < res->artifacts.n; i++)
                if (strcmp(res->artifacts.items[i].name, name) == 0)
                        return &res->artifacts.items[i];
        return NULL;
}

/* What keepOutputs came to: one entry per name, the names copied (fitting the result
 * may free the artifacts they came from). */
typedef struct KeptList {
        ProtoKept *items;
        char **names;
        size_t n;
} KeptList;

static void kept_list_done(KeptList *l) {
        for (size_t i = 0; l->names && i < l->n; i++)
                free(l->names[i]);
        free(l->names);
        free(l->items);
        *l = (KeptList){};
}

/* keepOutputs: the named artifacts (or all the reader collected, in name order) become
 * sources of the call's invocation, before fitting the result can omit any from it.
 * -ENOMEM when the list itself cannot be made (then nothing was kept). */
static int keep_outputs(Call *call, const RunnerResult *res, KeptList *ret) {
        size_t n = call->keep_all ? (res->has_outputs ? res->artifacts.n : 0) : call->n_keep;
        KeptList l = { .n = n };

        l.items = calloc(MAX(n, 1u), sizeof *l.items);
        l.names = calloc(MAX(n, 1u), sizeof *l.names);
        if (!l.items || !l.names) {
                kept_list_done(&l);
                return -ENOMEM;
        }
        /* The names first: out of memory, nothing has been kept (and the list says so). */
        for (size_t i = 0; i < n; i++) {
                l.names[i] = strdup(call->keep_all ? res->artifacts.items[i].name : call->keep[i]);
                if (!l.names[i]) {
                        kept_list_done(&l);
                        return -ENOMEM;
                }
                l.items[i].name = l.names[i];
        }
        for (size_t i = 0; i < n; i++) {
                const Artifact *a = find_artifact(res, l.names[i]);
                Source *src = NULL;

                if (!a)
                        l.items[i].refused = PROTO_KEEP_NOT_PRODUCED;
                else if (!call->inv)
                        l.items[i].refused = PROTO_KEEP_INVOCATION_CLOSED;
                else
                        l.items[i].refused = inv_keep_output(call->inv, call->inv_call_no, a, &src);
                if (l.items[i].refused == PROTO_KEEP_KEPT) {
                        l.items[i].source_id = src->id;
                        l.items[i].bytes = src->text_len;
                        l.items[i].sha256 = src->text_sha256;
                }
        }
        *ret = l;
        return 0;
}

static void send_result(Connection *c, const Policy *p, Call *call, RunnerResult *res, const ProtoKept *kept,
                        size_t n_kept) {
        ProtoSourceInfo srcs[PLAN_MAX_INPUTS];
        bool show_result = res->has_result && res->outcome == OUTCOME_OK;
        char code_sha[65];
        MpWriter w;
        int k;

        for (size_t i = 0; i < call->n_inputs; i++)
                srcs[i] = source_info(call->sources[i]);
        sha256_hex(call->code, call->code_len, code_sha);
        ProtoResult r = {
                .request_id = call->request_id,
                .call_id = call->call_id,
                .outcome = res->outcome,
                .limit = res->limit,
                .detail = res->detail[0] ? res->detail : NULL,
                .partial = res->partial,
                .out = &res->out,
                .err = &res->err,
                .result = show_result ? &res->result : NULL,
                .exception = res->report.exception,
                .exc_type = res->report.exc_type,
                .exc_message = &res->report.exc_message,
                .exc_traceback = &res->report.exc_traceback,
                .admit_usec = call->admit_usec,
                .start_usec = call->start_usec,
                .end_usec = call->end_usec,
                .started = call->started,
                .worker_how = call->started ? worker_how_to_string(res->worker_how) : NULL,
                .has_exit = call->started && res->start_usec,
                .pid = res->pid,
                .has_host_uid = res->has_host_uid,
                .host_uid = res->host_uid,
                .exit_code = res->exit_code,
                .signal = res->signal,
                .cpu_usec = res->cpu_usec,
                .max_rss_kb = res->max_rss_kb,
                .has_memory_peak = res->has_memory_peak,
                .memory_peak_bytes = res->memory_peak_bytes,
                .stage = res->stage[0] ? res->stage : NULL,
                .stage_errno = res->stage_errno,
                .code_sha256 = code_sha,
                .code_chars = call->code_chars,
                .sources = srcs,
                .n_sources = call->n_inputs,
                .policy = p,
                .worker_start = policy_worker_start_to_string(p->worker_start),
                .landlock_abi = landlock_abi_cached(),
                .cgroup = cgroup_root_version(c->server->cgroups),
                .rootless = userns_rootless(),
                .artifacts = res->has_outputs ? &res->artifacts : NULL,
                .has_kept = call->keep_requested,
                .kept = kept,
                .n_kept = n_kept,
        };

        mp_writer_init(&w, 0);
        k = proto_pack_result(&w, &r, p->max_result_bytes);
        if (k == -E2BIG) {
                log_error_errno(k, "Could not fit the result of call %llu: %m", (unsigned long long) call->call_id);
                mp_writer_reset(&w);
                k = proto_pack_error(&w, true, call->request_id, OUTCOME_WORKER_ERROR,
                                     "the result could not be fitted into maxResultBytes", false);
        }
        conn_send_packed(c, &w, k);
}

void on_call_finished(Call *call, RunnerResult *res, void *userdata) {
        Connection *c = call->conn;
        const char *outcome = outcome_to_string(res->outcome);
        char f_call[40], f_outcome[40], f_elapsed[40], f_uid[40];
        _cleanup_(kept_list_done) KeptList kept = {};

        /* Kept whether or not the result can still be sent: the registry is the truth. */
        if (call->keep_requested && keep_outputs(call, res, &kept) < 0)
                log_error("Could not list the kept outputs of call %llu: out of memory",
                          (unsigned long long) call->call_id);
        if (c)
                conn_cork(c); /* "finished" and the result: one send */
        if (c && !c->closing)
                send_progress(c, call_policy(call), call, "finished", res, NULL);
        if (c && !c->closing)
                send_result(c, call_policy(call), call, res, kept.items, kept.n);
        if (c)
                conn_uncork(c);
        /* The journal gets the same line with fields to filter on; metadata only. */
        snprintf(f_call, sizeof f_call, "CALL_ID=%llu", (unsigned long long) call->call_id);
        snprintf(f_outcome, sizeof f_outcome, "OUTCOME=%s", outcome);
        snprintf(f_elapsed, sizeof f_elapsed, "ELAPSED_MS=%llu",
                 (unsigned long long) (call->end_usec - call->admit_usec) / 1000);
        snprintf(f_uid, sizeof f_uid, "PEER_UID=%u", (unsigned) call->uid);
        log_struct(LOG_INFO, ((const char *const[]){ f_call, f_outcome, f_elapsed, f_uid, NULL }),
                   "call %llu finished: %s (%s)", (unsigned long long) call->call_id, outcome,
                   call->started ? "worker started" : "no worker");
        runner_result_done(res);

        if (c) {
                conn_call_remove(c, call);
                conn_idle_restart(c);
        }
        call_unref(call);
}

/* Cancel this connection's calls (all of them, or those of one invocation): queued
 * ones finish at once, running ones are SIGKILLed and finish when reaped. They no longer
 * refer to the connection's or invocation's fairness counter, which may go away. */
void conn_cancel_calls(Connection *c, Invocation *inv) {
        Call *call = c->calls;

        while (call) {
                Call *next = call->c_next;
                if (!inv || call->inv == inv) {
                        call->fair = NULL;
                        call->inv = NULL;
                        if (c->closing) {
                                conn_call_remove(c, call);
                                call->conn = NULL;
                        }
                        if (call->state == CALL_QUEUED)
                                sched_cancel(c->server->sched, call, RUNNER_KILL_CANCEL);
                        else if (call->state == CALL_RUNNING)
                                runner_kill(call->runner, RUNNER_KILL_CANCEL);
                }
                call = next;
        }
}

void on_conn_invocation_closed(Invocation *inv, void *userdata) {
        Connection *c = inv->conn;
        if (c) {
                conn_cancel_calls(c, inv);
                conn_idle_restart(c);
        }
}

/* ---- request handlers ---- */

static void handle_hello(Connection *c, const ProtoRequest *req) {
        MpWriter w;

        mp_writer_init(&w, 0);
        conn_send_packed(c, &w,
                         proto_pack_hello(&w, req->id, c->server->policy, cgroup_root_version(c->server->cgroups),
                                          userns_rootless()));
}

static void handle_describe(Connection *c, const ProtoRequest *req) {
        MpWriter w;

        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_describe(&w, req->id, c->server->policy));
}

static ProtoZygoteState zygote_state(const Server *s) {
        if (!s->zygote)
                return PROTO_ZYGOTE_NONE;
        switch (zygote_client_state(s->zygote)) {
        case ZYGOTE_STATE_READY:
                return PROTO_ZYGOTE_READY;
        case ZYGOTE_STATE_STARTING:
                return PROTO_ZYGOTE_STARTING;
        case ZYGOTE_STATE_BROKEN:
                break;
        }
        return PROTO_ZYGOTE_BROKEN;
}

/* Whether a call sent now would be served (docs/operations.md#readiness), and if not
 * why, the first cause that holds: shutting down; zygote mode's zygote not serving
 * (a start or restart under way, or failing and backed off); unreadyAfterStartFailures
 * worker starts failed in a row (the scheduler tries trial workers meanwhile). */
static ProtoNotReady readiness(const Server *s, const SchedStats *st, char *detail, size_t size) {
        uint32_t unready_after = s->policy->unready_after_start_failures;
        ProtoZygoteState z = zygote_state(s);

        if (s->shutting_down) {
                snprintf(detail, size, "the supervisor is shutting down");
                return PROTO_NOT_READY_SHUTTING_DOWN;
        }
        if (z == PROTO_ZYGOTE_STARTING || z == PROTO_ZYGOTE_BROKEN) {
                const char *why = zygote_client_last_error(s->zygote);
                if (z == PROTO_ZYGOTE_BROKEN)
                        snprintf(detail, size, "no zygote serves: %s; the next start is backed off", why);
                else if (why[0])
                        snprintf(detail, size, "a new zygote is starting after: %s", why);
                else
                        snprintf(detail, size, "a new zygote is starting");
                return PROTO_NOT_READY_ZYGOTE_DOWN;
        }
        if (unready_after > 0 && st->start_failures_in_row >= unready_after) {
                snprintf(detail, size, "%u worker starts failed in a row (unreadyAfterStartFailures: %u); the last: %s",
                         st->start_failures_in_row, unready_after, st->last_start_error ?: "?");
                return PROTO_NOT_READY_WORKER_START_FAILURES;
        }
        return PROTO_READY;
}

static const ProtoCallState call_states[] = {
        [SCHED_CALL_QUEUED] = PROTO_CALL_QUEUED,
        [SCHED_CALL_STARTING] = PROTO_CALL_STARTING,
        [SCHED_CALL_RUNNING] = PROTO_CALL_RUNNING,
};

static void handle_status(Connection *c, const ProtoRequest *req) {
        Server *s = c->server;
        char not_ready_detail[384];
        _cleanup_free_ SchedCallInfo *sched_calls = NULL;
        _cleanup_free_ ProtoCallInfo *calls = NULL;
        size_t n_calls = 0;
        SchedStats st;
        MpWriter w;

        sched_get_stats(s->sched, &st);
        uint64_t outcomes[_OUTCOME_MAX];
        size_t max_calls = (size_t) st.queued + st.running;

        /* Out of memory: the counters still go, without the list. */
        sched_calls = max_calls ? calloc(max_calls, sizeof *sched_calls) : NULL;
        calls = max_calls ? calloc(max_calls, sizeof *calls) : NULL;
        if (sched_calls && calls) {
                n_calls = sched_list_calls(s->sched, sched_calls, max_calls);
                for (size_t i = 0; i < n_calls; i++)
                        calls[i] = (ProtoCallInfo){
                                .call_id = sched_calls[i].call_id,
                                .state = call_states[sched_calls[i].state],
                                .worker_pid = sched_calls[i].worker_pid,
                        };
        }

        for (size_t i = 0; i < _OUTCOME_MAX; i++)
                outcomes[i] = st.finished_by_outcome[i] + s->refused[i];
        ProtoStatus ps = {
                .not_ready = readiness(s, &st, not_ready_detail, sizeof not_ready_detail),
                .not_ready_detail = not_ready_detail,
                .queued = st.queued,
                .running = st.running,
                .capacity = st.capacity,
                .admitted_total = st.admitted_total,
                .started_total = st.started_total,
                .finished_total = st.finished_total,
                .max_running_seen = st.max_running_seen,
                .start_failures_total = st.start_failures_total,
                .started_by_how = st.started_by_how,
                .start_failures_in_row = st.start_failures_in_row,
                .last_start_error = st.last_start_error,
                .connections = s->n_conns,
                .connections_refused = s->conns_refused,
                .connections_idle_closed = s->idle_closed,
                .pid = getpid(),
                .worker_start = policy_worker_start_to_string(s->policy->worker_start),
                .zygote_pid = s->zygote ? zygote_client_pid(s->zygote) : 0,
                .zygote_generation = s->zygote ? zygote_client_generation(s->zygote) : 0,
                .zygote_ready = s->zygote && zygote_client_ready(s->zygote),
                .zygote_pages_ahead = s->zygote ? zygote_client_pages_ahead(s->zygote) : 0,
                .zygote_state = zygote_state(s),
                .memory_gate_holds = st.memory_gate_holds,
                .memory_gate_holding = st.memory_gate_holding,
                .memory_gate_held_ms = st.memory_gate_held_usec / 1000,
                .uptime_ms = (now_usec() - s->started_usec) / 1000,
                .start_time_unix_ms = s->started_unix_msec,
                .outcomes = outcomes,
                .queue_wait = &st.queue_wait,
                .run_time = &st.run_time,
                .policy_sha256 = s->policy->sha256,
                .policy_name = s->policy->name,
                .calls = calls,
                .n_calls = n_calls,
        };
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_status(&w, req->id, &ps));
}

static void handle_invocation_open(Connection *c, const ProtoRequest *req) {
        Invocation *inv;
        MpWriter w;
        int k;

        k = inv_open(c->server->invocations, c, c->peer.uid, false, &inv);
        if (k == -EMFILE) {
                char msg[128];
                snprintf(msg, sizeof msg, "this connection already has maxInvocationsPerConnection (%u) invocations",
                         c->server->policy->max_invocations_per_connection);
                return conn_send_error(c, true, req->id, OUTCOME_INVALID_INPUT, msg);
        }
        if (k < 0)
                return conn_send_error(c, true, req->id, OUTCOME_WORKER_ERROR, "could not create an invocation");
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_invocation_opened(&w, req->id, inv->id, c->server->policy));
}

static void handle_invocation_close(Connection *c, const ProtoRequest *req) {
        Invocation *inv = inv_find(c->server->invocations, c, req->invocation.ptr, req->invocation.len);
        MpWriter w;

        if (!inv)
                return conn_send_error(c, true, req->id, OUTCOME_NOT_FOUND, "no such invocation on this connection");
        inv_close(inv);
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_invocation_closed(&w, req->id));
}

static void handle_source_put(Connection *c, const ProtoRequest *req) {
        Invocation *inv = inv_find(c->server->invocations, c, req->invocation.ptr, req->invocation.len);
        Source *src;
        char err[192];
        MpWriter w;
        int k;

        if (!inv)
                return conn_send_error(c, true, req->id, OUTCOME_NOT_FOUND, "no such invocation on this connection");
        k = inv_put_source(inv, req, err, sizeof err, &src);
        if (k == -EEXIST || k == -ENOSPC)
                return conn_send_error(c, true, req->id, OUTCOME_INVALID_INPUT, err);
        if (k < 0)
                return conn_send_error(c, true, req->id, OUTCOME_WORKER_ERROR, "could not store the source");
        ProtoSourceInfo info = source_info(src);
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_source_stored(&w, req->id, &info));
}

static void handle_cancel(Connection *c, const ProtoRequest *req) {
        MpWriter w;
        Call *call;

        for (call = c->calls; call; call = call->c_next)
                if (call->call_id == req->call_id)
                        break;
        if (call && call->state == CALL_RUNNING) {
                /* One decision, taken once: either the kill is recorded (the call ends
                 * cancelled, its result follows this reply through the loop), or the worker
                 * had already exited: it finished on its own, so its result goes first and
                 * then the answer that there is nothing to cancel. Polling for the exit and
                 * then killing would leave a window in which both answers are given. */
                if (runner_kill(call->runner, RUNNER_KILL_CANCEL)) {
                        mp_writer_init(&w, 0);
                        conn_send_packed(c, &w, proto_pack_cancel_reply(&w, req->id, call->call_id, false));
                        return;
                }
                (void) runner_finish_if_exited(call->runner);
                call = NULL;
        }
        if (!call || call->state == CALL_FINISHED)
                return conn_send_error(c, true, req->id, OUTCOME_NOT_FOUND,
                                       "no such call in progress on this connection (unknown or already finished)");
        /* Queued: reply first, the cancelled call's own result follows at once. */
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_cancel_reply(&w, req->id, call->call_id, call->state == CALL_QUEUED));
        sched_cancel(c->server->sched, call, RUNNER_KILL_CANCEL);
}

/* An execute refused before admission: counted by outcome for status. */
static void refuse_execute(Connection *c, bool has_id, uint64_t id, Outcome code, const char *message) {
        if (code < _OUTCOME_MAX)
                c->server->refused[code]++;
        conn_send_error(c, has_id, id, code, message);
}

static void handle_execute(Connection *c, const ProtoRequest *req) {
        Server *s = c->server;
        _cleanup_(call_unrefp) Call *call = NULL;
        InvAdmission adm;
        ProtoError err;
        int k;

        if (s->shutting_down)
                return refuse_execute(c, true, req->id, OUTCOME_CANCELLED, "the supervisor is shutting down");
        /* Everything that can reject does so before admission: nothing is spent, no worker. */
        if (inv_admit(s->invocations, c, req, &adm, &err) < 0)
                return refuse_execute(c, err.has_id, err.id, err.code, err.message);
        if (call_new(s->snapshot, req->code.ptr, req->code.len, req->code_chars, adm.sources, adm.n_sources, &call) < 0)
                return refuse_execute(c, true, req->id, OUTCOME_WORKER_ERROR, "out of memory");
        if (call_set_keep(call, req) < 0)
                return refuse_execute(c, true, req->id, OUTCOME_WORKER_ERROR, "out of memory");
        call->call_id = ++s->next_call_id;
        call->request_id = req->id;
        /* Its number in its invocation: the one inv_charge() spends below (documented as
         * the call number of kept outputs' IDs). */
        call->inv_call_no = adm.inv ? adm.inv->calls_spent + 1 : 0;
        call->conn = c;
        call->uid = c->peer.uid;
        call->inv = adm.inv;
        call->fair = adm.inv ? &adm.inv->fair : &c->anon_fair;
        conn_call_add(c, call);

        /* The call may start, and even finish, inside sched_submit(): the reference given
         * to it is dropped by on_call_finished(); this function keeps its own until it returns. */
        k = sched_submit(s->sched, call_ref(call));
        if (k < 0) {
                conn_call_remove(c, call);
                call_unref(call); /* never admitted: on_call_finished() will not run */
                if (k == -EBUSY)
                        return refuse_execute(c, true, req->id, OUTCOME_OVERLOADED,
                                              "the queue is full (maxQueuedCalls); nothing was spent");
                return refuse_execute(c, true, req->id, OUTCOME_WORKER_ERROR, "could not admit the call");
        }
        /* Admitted: the quota is spent, whatever happens to the call now. */
        inv_charge(adm.inv);
        log_info("call %llu admitted (uid %u, %llu code characters, %zu sources)", (unsigned long long) call->call_id,
                 (unsigned) c->peer.uid, (unsigned long long) call->code_chars, call->n_inputs);
}

void conn_handle_frame(Connection *c, const uint8_t *buf, size_t len) {
        ProtoRequest req;
        ProtoError err;

        c->spoke = true;
        conn_idle_restart(c);
        if (proto_decode_request(buf, len, c->server->policy, &req, &err) < 0)
                return conn_send_error(c, err.has_id, err.id, err.code, err.message);
        switch (req.op) {
        case PROTO_OP_HELLO:
                handle_hello(c, &req);
                break;
        case PROTO_OP_EXECUTE:
                handle_execute(c, &req);
                break;
        case PROTO_OP_CANCEL:
                handle_cancel(c, &req);
                break;
        case PROTO_OP_STATUS:
                handle_status(c, &req);
                break;
        case PROTO_OP_INVOCATION_OPEN:
                handle_invocation_open(c, &req);
                break;
        case PROTO_OP_INVOCATION_CLOSE:
                handle_invocation_close(c, &req);
                break;
        case PROTO_OP_SOURCE_PUT:
                handle_source_put(c, &req);
                break;
        case PROTO_OP_DESCRIBE:
                handle_describe(c, &req);
                break;
        default:
                conn_send_error(c, true, req.id, OUTCOME_INVALID_INPUT, "unknown op");
        }
        proto_request_done(&req);
}
