/* SPDX-License-Identifier: MIT */
/* The event loop's clients (server.h): the listening socket, connections and their
 * bounded buffers, peer credentials, request dispatch, progress and replies. */
#include "supervisor/server.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/landlock.h"
#include "common/log.h"
#include "common/mp.h"
#include "common/proc.h"
#include "common/sha256.h"
#include "common/userns.h"
#include "common/util.h"
#include "supervisor/invocation.h"
#include "supervisor/protocol.h"
#include "supervisor/scheduler.h"
#include "supervisor/self_check.h"

#define FRAMES_PER_TURN 16
#define ACCEPT_PAUSE_MSEC 100
#define READ_CHUNK 65536

typedef struct Connection Connection;

/* How long a shutdown waits for the first request of a connection that was accepted
 * and has not spoken yet (server_idle()). A client sends it at once: this bounds the
 * wait for one that does not. */
#define SHUTDOWN_FIRST_REQUEST_USEC (500 * 1000ULL)

/* How late a connection's idle timer may fire (connectionIdleTimeoutMs is at least 100 ms):
 * timers of connections that went quiet together fire together. */
#define IDLE_TIMER_ACCURACY_USEC (10 * 1000ULL)

struct Server {
        sd_event *event;
        PolicySnapshot *snapshot; /* the current policy: new connections, requests and calls */
        const Policy *policy;     /* = &snapshot->policy */
        int listen_fd;
        sd_event_source *listen_source;
        Scheduler *sched;
        InvRegistry *invocations;
        Connection *conns;
        uint32_t n_conns;
        sd_event_source *accept_retry; /* accept paused: out of descriptors */
        ZygoteClient *zygote;
        CgroupRoot *cgroups; /* the workers' cgroups: version none without */
        WorkerIds *ids;      /* the workers' host identities */
        uint64_t next_call_id;
        uint64_t refused[_OUTCOME_MAX];                  /* execute requests refused before admission, by outcome */
        uint64_t conns_refused[_PROTO_CONN_REFUSED_MAX]; /* connections refused at accept, by reason */
        uint64_t idle_closed;                            /* connections closed after connectionIdleTimeoutMs */
        bool shutting_down;
        uint64_t shutdown_usec; /* CLOCK_MONOTONIC when server_shutdown() was called */
        RunnerSpawner spawner;  /* how workers are made (the scheduler has a copy) */
        SelfCheck *self_check;  /* server_self_check()'s, until the server goes */
        ServerSelfCheckFn self_check_fn;
        void *self_check_userdata;
        uint64_t started_usec;      /* CLOCK_MONOTONIC at server_new(): uptime */
        uint64_t started_unix_msec; /* CLOCK_REALTIME then */
};

struct Connection {
        Server *server;
        int fd;
        sd_event_source *source;
        sd_event_source *idle_timer; /* connectionIdleTimeoutMs: conn_idle_restart() */
        struct ucred peer;
        /* input: header then body, never more than maxMessageBytes buffered */
        uint8_t hdr[4];
        size_t hdr_len;
        uint8_t *body;
        size_t body_len, body_want;
        bool in_body;
        /* output */
        uint8_t *out;
        size_t out_len, out_off, out_cap;
        bool closing;        /* flush what is queued, then close */
        bool spoke;          /* a frame has arrived on it */
        FairGroup anon_fair; /* the connection's anonymous calls take turns as one group */
        Call *calls;
        Connection *prev, *next;
};

static void conn_free(Connection *c);
static void conn_idle_restart(Connection *c);

/* ---- output ---- */

static int conn_update_events(Connection *c) {
        uint32_t ev = c->closing ? 0 : EPOLLIN;
        /* A closing connection waits to be writable: at once if nothing is pending, and
         * on_conn_io then frees it. */
        if (c->out_len > c->out_off || c->closing)
                ev |= EPOLLOUT;
        return sd_event_source_set_io_events(c->source, ev);
}

static int conn_flush(Connection *c) {
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                c->out_off += (size_t) n;
        }
        if (c->out_off == c->out_len)
                c->out_off = c->out_len = 0;
        return 0;
}

/* Queue one framed message. A peer that stops reading is cut off once its unsent
 * replies pass maxConnectionOutputBytes; that is its problem, not the supervisor's. */
static int conn_send(Connection *c, const msgpack_sbuffer *sb) {
        const Policy *p = c->server->policy;
        size_t need;
        int k;

        if (c->fd < 0)
                return -ENOTCONN;
        if (c->out_off > 0 && c->out_off == c->out_len)
                c->out_off = c->out_len = 0;
        need = c->out_len - c->out_off + 4 + sb->size;
        if (need > p->max_connection_output_bytes) {
                log_notice("Connection from uid %u does not read its replies; closing it", (unsigned) c->peer.uid);
                return -ENOBUFS;
        }
        if (c->out_off > 0) {
                memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
                c->out_len -= c->out_off;
                c->out_off = 0;
        }
        if (c->out_len + 4 + sb->size > c->out_cap) {
                size_t ncap = MAX(c->out_cap * 2, c->out_len + 4 + sb->size);
                uint8_t *n = realloc(c->out, ncap);
                if (!n)
                        return -ENOMEM;
                c->out = n;
                c->out_cap = ncap;
        }
        frame_put_len(c->out + c->out_len, (uint32_t) sb->size);
        memcpy(c->out + c->out_len + 4, sb->data, sb->size);
        c->out_len += 4 + sb->size;
        k = conn_flush(c);
        if (k < 0)
                return k;
        return conn_update_events(c);
}

/* Give up on a connection: nothing more is sent, and it is freed on the loop's next
 * turn (not here: the caller may be inside a callback that still uses it). Shutting
 * the socket down makes epoll report EPOLLHUP at once even when the peer has stopped
 * reading and the socket will never be writable again. */
static void conn_drop(Connection *c) {
        c->closing = true;
        c->out_len = c->out_off = 0;
        if (c->fd >= 0)
                (void) shutdown(c->fd, SHUT_RDWR);
        conn_update_events(c);
}

/* Send what w holds; packed is what packing returned. A message that could not be
 * packed (out of memory) is never sent in part: the connection is closed instead,
 * and so it is when a send fails (the peer is gone or hopeless), on the next turn. */
static void conn_send_packed(Connection *c, MpWriter *w, int packed) {
        if (packed < 0) {
                log_error_errno(packed, "Could not pack a message for uid %u: %m; closing the connection",
                                (unsigned) c->peer.uid);
                conn_drop(c);
        } else if (conn_send(c, &w->sb) < 0)
                conn_drop(c);
        mp_writer_done(w);
}

static void send_error(Connection *c, bool has_id, uint64_t id, Outcome code, const char *msg) {
        MpWriter w;
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_error(&w, has_id, id, code, msg, false));
}

/* The last message of a connection the supervisor is closing: an error with a nil id and
 * "closing": true, so that a client tells it from a connection-level error after which
 * the connection goes on. The caller sets c->closing. */
static void send_parting_error(Connection *c, Outcome code, const char *msg) {
        MpWriter w;
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_error(&w, false, 0, code, msg, true));
}

/* ---- idle connections ---- */

/* A connection is busy while it has an open invocation or a call (queued or running):
 * connectionIdleTimeoutMs never closes it then. */
static bool conn_busy(Connection *c) {
        return c->calls || inv_count_connection(c->server->invocations, c) > 0;
}

/* Start the idle timer again: connectionIdleTimeoutMs from now. Called on whatever shows
 * the client is there or may make the connection idle: it is accepted, a frame arrives,
 * the client reads replies, its last call finishes, an invocation of it ends. Whether it
 * is idle is decided when the timer fires. */
static void conn_idle_restart(Connection *c) {
        uint64_t usec = (uint64_t) c->server->policy->connection_idle_timeout_ms * 1000;

        if (c->closing || !c->idle_timer)
                return;
        if (sd_event_source_set_time_relative(c->idle_timer, usec) >= 0)
                (void) sd_event_source_set_enabled(c->idle_timer, SD_EVENT_ONESHOT);
}

/* Silent for connectionIdleTimeoutMs. Busy: nothing (the end of its last call or
 * invocation starts the timer again). Idle: it is told why (an error with a nil id), then
 * closed; when replies are still unsent the client is not reading, and it is cut off. */
static int on_idle_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        Connection *c = userdata;
        uint32_t ms = c->server->policy->connection_idle_timeout_ms;
        char msg[96];

        if (c->closing || conn_busy(c))
                return 0;
        c->server->idle_closed++;
        log_debug("Closing an idle connection of uid %u (connectionIdleTimeoutMs: %u)", (unsigned) c->peer.uid,
                  (unsigned) ms);
        if (c->out_len == c->out_off) {
                snprintf(msg, sizeof msg, "connection closed: idle for connectionIdleTimeoutMs (%u ms)", (unsigned) ms);
                send_parting_error(c, OUTCOME_OVERLOADED, msg);
        }
        /* The kernel takes a small frame whole or not at all: never a part of one. */
        if (c->out_len > c->out_off) {
                conn_drop(c);
                return 0;
        }
        c->closing = true;
        conn_update_events(c);
        return 0;
}

/* ---- calls ---- */

static void conn_call_add(Connection *c, Call *call) {
        call->c_next = c->calls;
        if (c->calls)
                c->calls->c_prev = call;
        c->calls = call;
}

static void conn_call_remove(Connection *c, Call *call) {
        if (call->c_prev)
                call->c_prev->c_next = call->c_next;
        else if (c->calls == call)
                c->calls = call->c_next;
        if (call->c_next)
                call->c_next->c_prev = call->c_prev;
        call->c_prev = call->c_next = NULL;
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

static void on_progress(Call *call, const char *phase, void *userdata) {
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

static void send_result(Connection *c, const Policy *p, Call *call, RunnerResult *res) {
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

static void on_finished(Call *call, RunnerResult *res, void *userdata) {
        Connection *c = call->conn;
        const char *outcome = outcome_to_string(res->outcome);
        char f_call[40], f_outcome[40], f_elapsed[40], f_uid[40];
        if (c && !c->closing)
                send_progress(c, call_policy(call), call, "finished", res, NULL);
        if (c && !c->closing)
                send_result(c, call_policy(call), call, res);
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
static void cancel_calls(Connection *c, Invocation *inv) {
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

static void on_invocation_closed(Invocation *inv, void *userdata) {
        Connection *c = inv->conn;
        if (c) {
                cancel_calls(c, inv);
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
                return send_error(c, true, req->id, OUTCOME_INVALID_INPUT, msg);
        }
        if (k < 0)
                return send_error(c, true, req->id, OUTCOME_WORKER_ERROR, "could not create an invocation");
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_invocation_opened(&w, req->id, inv->id, c->server->policy));
}

static void handle_invocation_close(Connection *c, const ProtoRequest *req) {
        Invocation *inv = inv_find(c->server->invocations, c, req->invocation.ptr, req->invocation.len);
        MpWriter w;

        if (!inv)
                return send_error(c, true, req->id, OUTCOME_NOT_FOUND, "no such invocation on this connection");
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
                return send_error(c, true, req->id, OUTCOME_NOT_FOUND, "no such invocation on this connection");
        k = inv_put_source(inv, req, err, sizeof err, &src);
        if (k == -EEXIST || k == -ENOSPC)
                return send_error(c, true, req->id, OUTCOME_INVALID_INPUT, err);
        if (k < 0)
                return send_error(c, true, req->id, OUTCOME_WORKER_ERROR, "could not store the source");
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
                return send_error(c, true, req->id, OUTCOME_NOT_FOUND,
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
        send_error(c, has_id, id, code, message);
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
        call->call_id = ++s->next_call_id;
        call->request_id = req->id;
        call->conn = c;
        call->uid = c->peer.uid;
        call->inv = adm.inv;
        call->fair = adm.inv ? &adm.inv->fair : &c->anon_fair;
        conn_call_add(c, call);

        /* The call may start, and even finish, inside sched_submit(): the reference given
         * to it is dropped by on_finished(); this function keeps its own until it returns. */
        k = sched_submit(s->sched, call_ref(call));
        if (k < 0) {
                conn_call_remove(c, call);
                call_unref(call); /* never admitted: on_finished() will not run */
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

static void handle_frame(Connection *c, const uint8_t *buf, size_t len) {
        ProtoRequest req;
        ProtoError err;

        c->spoke = true;
        conn_idle_restart(c);
        if (proto_decode_request(buf, len, c->server->policy, &req, &err) < 0)
                return send_error(c, err.has_id, err.id, err.code, err.message);
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
                send_error(c, true, req.id, OUTCOME_INVALID_INPUT, "unknown op");
        }
        proto_request_done(&req);
}

/* ---- input ---- */

/* Returns <0 when the connection must be closed. */
static int conn_read(Connection *c) {
        const Policy *p = c->server->policy;
        int frames = 0;

        while (!c->closing && frames < FRAMES_PER_TURN) {
                ssize_t n;

                if (!c->in_body) {
                        n = recv(c->fd, c->hdr + c->hdr_len, 4 - c->hdr_len, MSG_DONTWAIT);
                        if (n < 0)
                                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                        if (n == 0)
                                return -ECONNRESET;
                        c->hdr_len += (size_t) n;
                        if (c->hdr_len < 4)
                                continue;
                        c->body_want = frame_get_len(c->hdr);
                        c->hdr_len = 0;
                        if (c->body_want > p->max_message_bytes) {
                                char msg[128];
                                /* Framing cannot be trusted any more: answer and close. */
                                snprintf(msg, sizeof msg, "frame of %zu bytes exceeds maxMessageBytes (%u)",
                                         c->body_want, p->max_message_bytes);
                                send_parting_error(c, OUTCOME_INVALID_INPUT, msg);
                                c->closing = true;
                                conn_update_events(c);
                                return 0;
                        }
                        c->body = malloc(c->body_want ? c->body_want : 1);
                        if (!c->body)
                                return -ENOMEM;
                        c->body_len = 0;
                        c->in_body = true;
                }
                if (c->body_len < c->body_want) {
                        n = recv(c->fd, c->body + c->body_len, c->body_want - c->body_len, MSG_DONTWAIT);
                        if (n < 0)
                                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
                        if (n == 0)
                                return -ECONNRESET;
                        c->body_len += (size_t) n;
                        if (c->body_len < c->body_want)
                                continue;
                }
                _cleanup_free_ uint8_t *body = TAKE_PTR(c->body);
                c->in_body = false;
                frames++;
                handle_frame(c, body, c->body_len);
        }
        return 0;
}

static int on_conn_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;
        int k = 0;

        if (revents & EPOLLOUT) {
                size_t unsent = c->out_len - c->out_off;
                k = conn_flush(c);
                /* The client read some of its replies: it is not idle. */
                if (k >= 0 && c->out_len - c->out_off < unsent)
                        conn_idle_restart(c);
        }
        if (k >= 0 && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing)
                k = conn_read(c);
        if (k >= 0 && c->closing && c->out_off >= c->out_len)
                k = -ECONNRESET;
        if (k >= 0 && (revents & (EPOLLHUP | EPOLLERR)) && !(revents & EPOLLIN))
                k = -ECONNRESET;
        if (k < 0) {
                conn_free(c);
                return 0;
        }
        conn_update_events(c);
        return 0;
}

static void conn_free(Connection *c) {
        Server *s = c->server;

        /* Everything this connection started ends with it, in this event-loop turn:
         * queued calls finish as cancelled, running workers are SIGKILLed and reaped. */
        c->closing = true;
        cancel_calls(c, NULL);
        inv_close_connection(s->invocations, c);
        if (c->prev)
                c->prev->next = c->next;
        else if (s->conns == c)
                s->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        s->n_conns--;
        sd_event_source_disable_unref(c->idle_timer);
        sd_event_source_disable_unref(c->source);
        if (c->fd >= 0)
                close(c->fd);
        free(c->body);
        free(c->out);
        free(c);
}

/* Whether the client has closed its end of c (or the connection failed): c is on its way
 * out, and is freed when its own event is dispatched, maybe later in this same turn. */
static bool conn_hung_up(const Connection *c) {
        struct pollfd pfd = { .fd = c->fd, .events = POLLRDHUP };

        return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The open connections (of peer *uid, or all) that were not refused nor are being closed;
 * with live, also not hung up by their client. A walk: at most maxConnections of them, and
 * this runs once per accepted connection. */
static uint32_t count_connections(const Server *s, const uid_t *uid, bool live) {
        uint32_t n = 0;

        for (const Connection *c = s->conns; c; c = c->next)
                if (!c->closing && (!uid || c->peer.uid == *uid) && !(live && conn_hung_up(c)))
                        n++;
        return n;
}

/* Whether the connections (of peer *uid, or all) exceed limit. A client that closed a
 * connection and opens the next at once must find its room: the hang-up and the new
 * connection can be seen in one event-loop turn, the accept first. So the ones whose
 * client has hung up do not count; asked of the kernel only when the plain count is over. */
static bool over_limit(const Server *s, const uid_t *uid, uint32_t limit) {
        return count_connections(s, uid, false) > limit && count_connections(s, uid, true) > limit;
}

/* Answer a connection at accept time (an error with a nil id) and close it once that is
 * sent; counted by why for status. */
static void refuse_connection(Connection *c, ProtoConnRefusal why, Outcome code, const char *msg) {
        c->server->conns_refused[why]++;
        send_parting_error(c, code, msg);
        c->closing = true;
        conn_update_events(c);
}

static bool peer_allowed(const Policy *p, const struct ucred *cred) {
        if (p->n_allowed_uids == 0 && p->n_allowed_gids == 0)
                return cred->uid == 0 || cred->uid == geteuid();
        for (size_t i = 0; i < p->n_allowed_uids; i++)
                if (p->allowed_uids[i] == cred->uid)
                        return true;
        for (size_t i = 0; i < p->n_allowed_gids; i++)
                if (p->allowed_gids[i] == cred->gid)
                        return true;
        return false;
}

static int on_accept_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Server *s = userdata;

        s->accept_retry = sd_event_source_disable_unref(s->accept_retry);
        if (s->listen_source && !s->shutting_down)
                (void) sd_event_source_set_enabled(s->listen_source, SD_EVENT_ON);
        return 0;
}

/* Out of descriptors or memory: the pending connection stays in the backlog, and the
 * listening socket stays readable. Stop watching it for a while instead of spinning on
 * a level-triggered event. */
static void pause_accepting(Server *s, int error) {
        if (s->accept_retry)
                return;
        log_warning_errno(error, "accept failed: %m; not accepting for %d ms", ACCEPT_PAUSE_MSEC);
        if (sd_event_add_time_relative(s->event, &s->accept_retry, CLOCK_MONOTONIC, ACCEPT_PAUSE_MSEC * 1000ULL, 1000,
                                       on_accept_retry, s) >= 0)
                (void) sd_event_source_set_enabled(s->listen_source, SD_EVENT_OFF);
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Server *s = userdata;

        for (int i = 0; i < 16; i++) {
                _cleanup_close_ int cfd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                socklen_t len = sizeof(struct ucred);
                Connection *c;

                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                pause_accepting(s, errno);
                        else if (errno != EAGAIN && errno != EINTR)
                                log_warning_errno(errno, "accept failed: %m");
                        return 0;
                }
                c = calloc(1, sizeof *c);
                if (!c)
                        return 0;
                c->server = s;
                c->fd = -1;
                if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &c->peer, &len) < 0) {
                        free(c);
                        continue;
                }
                if (sd_event_add_io(s->event, &c->source, cfd, EPOLLIN, on_conn_io, c) < 0) {
                        free(c);
                        continue;
                }
                if (sd_event_add_time_relative(s->event, &c->idle_timer, CLOCK_MONOTONIC,
                                               (uint64_t) s->policy->connection_idle_timeout_ms * 1000,
                                               IDLE_TIMER_ACCURACY_USEC, on_idle_timeout, c) < 0) {
                        sd_event_source_disable_unref(c->source);
                        free(c);
                        continue;
                }
                c->fd = TAKE_FD(cfd);
                c->next = s->conns;
                if (s->conns)
                        s->conns->prev = c;
                s->conns = c;
                s->n_conns++;

                /* The new connection counts itself, among all and among its peer's. When
                 * both limits are reached the answer names the whole, maxConnections. */
                if (!peer_allowed(s->policy, &c->peer)) {
                        log_notice("Refused a connection from uid %u gid %u (not in allowedUids/allowedGids)",
                                   (unsigned) c->peer.uid, (unsigned) c->peer.gid);
                        refuse_connection(c, PROTO_CONN_REFUSED_PEER_NOT_ALLOWED, OUTCOME_PERMISSION_DENIED,
                                          "this peer is not allowed");
                } else if (over_limit(s, NULL, s->policy->max_connections)) {
                        log_debug("Refused a connection from uid %u: maxConnections (%u) reached",
                                  (unsigned) c->peer.uid, s->policy->max_connections);
                        refuse_connection(c, PROTO_CONN_REFUSED_MAX_CONNECTIONS, OUTCOME_OVERLOADED,
                                          "too many connections (maxConnections)");
                } else if (over_limit(s, &c->peer.uid, s->policy->max_connections_per_peer)) {
                        log_debug("Refused a connection from uid %u: maxConnectionsPerPeer (%u) reached",
                                  (unsigned) c->peer.uid, s->policy->max_connections_per_peer);
                        refuse_connection(c, PROTO_CONN_REFUSED_MAX_CONNECTIONS_PER_PEER, OUTCOME_OVERLOADED,
                                          "too many connections from this peer (maxConnectionsPerPeer)");
                }
        }
        return 0;
}

static uint64_t realtime_msec(void) {
        struct timespec ts;

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void on_zygote_ready(void *userdata) {
        Server *s = userdata;
        self_check_kick(s->self_check);
        sched_kick(s->sched);
}

static void on_zygote_settled(void *userdata) {
        server_reap_strays(userdata);
}

int server_new(sd_event *e, PolicySnapshot *snapshot, int worker_exec_fd, CgroupRoot *cgroups, IdLeases *leases,
               Server **ret) {
        static const SchedCallbacks cb = { .finished = on_finished, .progress = on_progress };
        Server *s;
        int k;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        const Policy *p = &snapshot->policy;

        s->event = e;
        s->started_usec = now_usec();
        s->started_unix_msec = realtime_msec();
        s->snapshot = policy_snapshot_ref(snapshot);
        s->policy = p;
        s->listen_fd = -1; /* ours only on success: the caller closes it otherwise */
        if ((k = worker_ids_new(p, leases, &s->ids)) < 0) {
                server_free(s);
                return k;
        }
        if (p->worker_start == POLICY_WORKER_START_ZYGOTE &&
            (k = zygote_client_new(e, p, worker_exec_fd, s->ids, cgroups, &s->zygote)) < 0) {
                log_error_errno(k, "Starting the zygote failed: %m");
                server_free(s);
                return k;
        }
        s->spawner = (RunnerSpawner){
                .worker_exec_fd = worker_exec_fd, .zygote = s->zygote, .cgroups = cgroups, .ids = s->ids
        };
        if ((k = sched_new(e, s->snapshot, &s->spawner, &cb, s, &s->sched)) < 0 ||
            (k = inv_registry_new(e, p, on_invocation_closed, s, &s->invocations)) < 0) {
                server_free(s);
                return k;
        }
        if (s->zygote) {
                zygote_client_set_ready_callback(s->zygote, on_zygote_ready, s);
                zygote_client_set_settled_callback(s->zygote, on_zygote_settled, s);
        }
        s->cgroups = cgroups;
        *ret = s;
        return 0;
}

int server_listen(Server *s, int listen_fd) {
        int k;

        assert(!s->listen_source);
        k = sd_event_add_io(s->event, &s->listen_source, listen_fd, EPOLLIN, on_accept, s);
        if (k < 0)
                return k;
        s->listen_fd = listen_fd;
        return 0;
}

static void on_self_check(SelfCheck *c, const char *problem, uint64_t elapsed_usec, void *userdata) {
        Server *s = userdata;
        s->self_check_fn(s, problem, elapsed_usec, s->self_check_userdata);
}

int server_self_check(Server *s, ServerSelfCheckFn fn, void *userdata) {
        if (s->self_check || s->shutting_down)
                return -EBUSY;
        s->self_check_fn = fn;
        s->self_check_userdata = userdata;
        return self_check_start(s->event, s->policy, &s->spawner, on_self_check, s, &s->self_check);
}

void server_set_policy(Server *s, PolicySnapshot *snapshot) {
        PolicySnapshot *old = s->snapshot;

        s->snapshot = policy_snapshot_ref(snapshot);
        s->policy = &snapshot->policy;
        inv_registry_set_policy(s->invocations, s->policy);
        sched_set_policy(s->sched, s->snapshot);
        /* Calls hold their own references: the old policy lives on until the last is freed. */
        policy_snapshot_unref(old);
}

sd_event *server_event(const Server *s) {
        return s->event;
}

const Policy *server_policy(const Server *s) {
        return s->policy;
}

void server_shutdown(Server *s) {
        s->shutting_down = true;
        s->shutdown_usec = now_usec();
        s->listen_source = sd_event_source_disable_unref(s->listen_source);
        s->accept_retry = sd_event_source_disable_unref(s->accept_retry);
        self_check_cancel(s->self_check);
        sched_cancel_all(s->sched);
}

void server_reap_strays(Server *s) {
        pid_t pids[512];
        size_t n;

        /* A worker the zygote has made but whose pid we have not read yet is no stray:
         * wait until every answer is in (on_zygote_settled() calls us again). */
        if (zygote_client_spawns_pending(s->zygote))
                return;
        n = proc_list_children(pids, ELEMENTSOF(pids));
        for (size_t i = 0; i < n; i++) {
                if (sched_owns_pid(s->sched, pids[i]) || self_check_owns_pid(s->self_check, pids[i]) ||
                    (s->zygote && zygote_client_pid(s->zygote) == pids[i]))
                        continue;
                if (waitpid(pids[i], NULL, WNOHANG) > 0)
                        log_debug("Reaped stray child %d", (int) pids[i]);
        }
        /* The host ids of strays (and of a lost zygote's pre-started workers) are free
         * once they are reaped. */
        worker_ids_sweep(s->ids);
}

/* At exit nothing of ours may outlive us: pre-started workers still preparing (they
 * set their parent-death signal only once prepared) would otherwise linger until
 * they notice the zygote is gone. Every child is SIGKILLed and reaped. */
static void kill_children(void) {
        pid_t pids[512];
        size_t n;

        while ((n = proc_list_children(pids, ELEMENTSOF(pids))) > 0)
                for (size_t i = 0; i < n; i++)
                        kill_and_reap(pids[i], -1);
}

bool server_idle(Server *s) {
        SchedStats st;
        sched_get_stats(s->sched, &st);
        if (st.running || st.queued || self_check_pending(s->self_check))
                return false;
        for (Connection *c = s->conns; c; c = c->next) {
                if (c->out_len > c->out_off)
                        return false;
                /* Shutting down: a client accepted just before, whose first request is on
                 * its way, gets its answer ("cancelled") rather than a reset connection
                 * when this process exits with the request unread (an upgrade's restart
                 * under load would otherwise drop it). */
                if (s->shutting_down && !c->spoke && !c->closing &&
                    now_usec() - s->shutdown_usec < SHUTDOWN_FIRST_REQUEST_USEC)
                        return false;
        }
        return true;
}

bool server_unused(Server *s) {
        return s->n_conns == 0 && !s->shutting_down && server_idle(s);
}

Server *server_free(Server *s) {
        if (!s)
                return NULL;
        while (s->conns)
                conn_free(s->conns);
        /* Calls whose connection is gone but whose workers still run are reaped by the scheduler. */
        s->invocations = inv_registry_free(s->invocations);
        sd_event_source_disable_unref(s->listen_source);
        sd_event_source_disable_unref(s->accept_retry);
        s->sched = sched_free(s->sched);
        s->self_check = self_check_free(s->self_check);
        s->zygote = zygote_client_free(s->zygote);
        kill_children();
        /* Every process is gone: a slot's cgroup whose removal gave up while its killed
         * pre-started worker was still leaving (a loaded machine) goes now. */
        cgroup_root_remove_own(s->cgroups);
        s->cgroups = cgroup_root_free(s->cgroups); /* after every runner: their cgroups are gone */
        s->ids = worker_ids_free(s->ids);
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        policy_snapshot_unref(s->snapshot);
        free(s);
        return NULL;
}
