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
#include "common/list.h"
#include "common/log.h"
#include "common/mp.h"
#include "common/proc.h"
#include "common/sha256.h"
#include "common/userns.h"
#include "common/util.h"
#include "supervisor/artifacts.h"
#include "supervisor/invocation.h"
#include "supervisor/protocol.h"
#include "supervisor/scheduler.h"
#include "supervisor/self_check.h"
#include "supervisor/server_internal.h"

#define FRAMES_PER_TURN 16
#define ACCEPT_PAUSE_MSEC 100
#define READ_CHUNK 65536

/* How long a shutdown waits for the first request of a connection that was accepted
 * and has not spoken yet (server_idle()). A client sends it at once: this bounds the
 * wait for one that does not. */
#define SHUTDOWN_FIRST_REQUEST_USEC (500 * 1000ULL)

/* How late a connection's idle timer may fire (connectionIdleTimeoutMs is at least 100 ms):
 * timers of connections that went quiet together fire together. */
#define IDLE_TIMER_ACCURACY_USEC (10 * 1000ULL)

static void conn_free(Connection *c);
static void conn_drop(Connection *c);

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
        if (c->corked > 0)
                return 0; /* conn_uncork() sends it */
        k = conn_flush(c);
        if (k < 0)
                return k;
        return conn_update_events(c);
}

void conn_cork(Connection *c) {
        c->corked++;
}

void conn_uncork(Connection *c) {
        assert(c->corked > 0);
        if (--c->corked > 0 || c->fd < 0)
                return;
        if (conn_flush(c) < 0 || conn_update_events(c) < 0)
                conn_drop(c);
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
void conn_send_packed(Connection *c, MpWriter *w, int packed) {
        if (packed < 0) {
                log_error_errno(packed, "Could not pack a message for uid %u: %m; closing the connection",
                                (unsigned) c->peer.uid);
                conn_drop(c);
        } else if (conn_send(c, &w->sb) < 0)
                conn_drop(c);
        mp_writer_done(w);
}

void conn_send_error(Connection *c, bool has_id, uint64_t id, Outcome code, const char *msg) {
        MpWriter w;
        mp_writer_init(&w, 0);
        conn_send_packed(c, &w, proto_pack_error(&w, has_id, id, code, msg, false));
}

/* The last message of a connection the supervisor is closing: an error with a nil id and
 * "closing": true, so that a client tells it from a connection-level error after which
 * the connection goes on. The caller sets c->closing. */
void conn_send_parting_error(Connection *c, Outcome code, const char *msg) {
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
void conn_idle_restart(Connection *c) {
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
                conn_send_parting_error(c, OUTCOME_OVERLOADED, msg);
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
                                conn_send_parting_error(c, OUTCOME_INVALID_INPUT, msg);
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
                conn_cork(c);
                conn_handle_frame(c, body, c->body_len);
                conn_uncork(c);
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
        conn_cancel_calls(c, NULL);
        inv_close_connection(s->invocations, c);
        LIST_REMOVE(prev, next, s->conns, c);
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
        conn_send_parting_error(c, code, msg);
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
                LIST_PREPEND(prev, next, s->conns, c);
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
        static const SchedCallbacks cb = { .finished = on_call_finished, .progress = on_call_progress };
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
            (k = inv_registry_new(e, p, on_conn_invocation_closed, s, &s->invocations)) < 0) {
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
                    (s->zygote && zygote_client_pid(s->zygote) == pids[i]) || artifacts_helper_pid() == pids[i])
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
