/* SPDX-License-Identifier: MIT */
/* What server.c (the socket, connections, their buffers and input) and
 * server_requests.c (the requests, the calls they admit and what those calls tell
 * their connection) share: the server's and a connection's state. Nothing else
 * includes it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "common/mp.h"
#include "supervisor/call.h"
#include "supervisor/invocation.h"
#include "supervisor/protocol.h"
#include "supervisor/scheduler.h"
#include "supervisor/self_check.h"
#include "supervisor/server.h"

typedef struct Connection Connection;

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
        unsigned corked;     /* conn_cork(): frames are queued, sent together at conn_uncork() */
        bool closing;        /* flush what is queued, then close */
        bool spoke;          /* a frame has arrived on it */
        FairGroup anon_fair; /* the connection's anonymous calls take turns as one group */
        Call *calls;
        Connection *prev, *next;
};

/* server.c: queue a packed message (packed: what the packer returned), or drop the
 * connection when it cannot be; an error reply; closing the connection after one. */
void conn_send_packed(Connection *c, MpWriter *w, int packed);
/* Frames sent between conn_cork() and the matching conn_uncork() go out together, in
 * order, in one send at the uncork: what one request or one call's end produces (its
 * progress frames and its reply) wakes the client once, and after the work that
 * request started (docs/performance.md). Nests. */
void conn_cork(Connection *c);
void conn_uncork(Connection *c);
void conn_send_error(Connection *c, bool has_id, uint64_t id, Outcome code, const char *msg);
void conn_send_parting_error(Connection *c, Outcome code, const char *msg);
void conn_idle_restart(Connection *c);

/* server_requests.c: one decoded frame's request, and the callbacks of the calls and
 * invocations it makes. */
void conn_handle_frame(Connection *c, const uint8_t *buf, size_t len);
void conn_cancel_calls(Connection *c, Invocation *inv);
void on_call_progress(Call *call, const char *phase, void *userdata);
void on_call_finished(Call *call, RunnerResult *res, void *userdata);
void on_conn_invocation_closed(Invocation *inv, void *userdata);
