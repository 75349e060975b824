/* SPDX-License-Identifier: MIT */
/* Invocations (one agent run's context, owned by one connection) and their source
 * registries. Sources are stored bytes, never host paths; they are reference-counted
 * so a call that is queued or running keeps its copies even if the invocation closes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"
#include "supervisor/protocol.h"

typedef struct Source {
        unsigned n_ref;
        char id[PROTO_SOURCE_ID_MAX + 1];
        bool attachment;
        bool output;          /* a kept output (inv_keep_output): text is the artifact's bytes */
        uint32_t produced_by; /* outputs: the invocation's number of the call that made it */
        uint8_t *text;
        size_t text_len;
        uint8_t *original;
        size_t original_len;
        char *media_type; /* attachments; outputs: the artifact's sniffed type */
        char *file_name;
        char *origin;
        char text_sha256[65];
        char original_sha256[65];
} Source;

Source *source_ref(Source *s);
Source *source_unref(Source *s);

typedef struct Invocation Invocation;
typedef struct InvRegistry InvRegistry;
typedef struct Connection Connection; /* supervisor/server.c */

/* A fairness group for the scheduler: its calls take turns with other groups'. */
typedef struct FairGroup {
        uint64_t served; /* the scheduler's sequence when the group was last served */
} FairGroup;

struct Invocation {
        char id[PROTO_INVOCATION_ID_LEN + 1];
        InvRegistry *reg;
        Connection *conn;
        uid_t uid;
        bool anonymous;       /* a one-call invocation made for an execute without "invocation" */
        uint32_t calls_spent; /* also the number of the last admitted call (1-based) */
        Source **sources;
        size_t n_sources;
        uint64_t bytes;
        FairGroup fair;
        sd_event_source *ttl;
        Invocation *prev, *next;
};

/* on_close runs before an invocation goes away (close, connection close, idle TTL). */
typedef void (*InvCloseFn)(Invocation *inv, void *userdata);
int inv_registry_new(sd_event *e, const Policy *p, InvCloseFn on_close, void *userdata, InvRegistry **ret);
InvRegistry *inv_registry_free(InvRegistry *reg);
/* The current policy (reload): bounds checked from now on; idle TTLs already armed run
 * out as armed. p must stay valid until the next call or inv_registry_free(). */
void inv_registry_set_policy(InvRegistry *reg, const Policy *p);

/* -EMFILE: the connection already has maxInvocationsPerConnection. */
int inv_open(InvRegistry *reg, Connection *conn, uid_t uid, bool anonymous, Invocation **ret);
void inv_close(Invocation *inv);
/* Only the owning connection finds its invocations; unknown, expired and foreign look the same. */
Invocation *inv_find(InvRegistry *reg, Connection *conn, const char *id, size_t len);
void inv_close_connection(InvRegistry *reg, Connection *conn);
uint32_t inv_count_connection(InvRegistry *reg, Connection *conn);
/* Reset the idle TTL. */
void inv_touch(Invocation *inv);

/* Register a source. -EEXIST duplicate id, -ENOSPC a registry bound (message in err). */
int inv_put_source(Invocation *inv, const ProtoRequest *req, char *err, size_t errlen, Source **ret);
Source *inv_get_source(Invocation *inv, const char *id, size_t len);

/* Keep artifact a of the invocation's call number call_no as the source
 * out-<call_no>-<name> (docs/protocol.md#kept-outputs), under the same bounds as
 * inv_put_source() plus maxSourceBytes. Returns PROTO_KEEP_KEPT and the new source in
 * *ret (owned by the registry), or why it was not kept. */
ProtoKeepRefusal inv_keep_output(Invocation *inv, uint32_t call_no, const Artifact *a, Source **ret);

/* What admission found for an execute: its invocation (NULL: an anonymous call) and
 * the sources it mounts, in request order (not referenced: call_new() does that). */
typedef struct InvAdmission {
        Invocation *inv;
        Source *sources[PROTO_MAX_SOURCE_IDS];
        size_t n_sources;
} InvAdmission;

/* Every check an execute passes before it may be queued: the invocation is the
 * connection's, each source ID is available to it, its quota is not spent. Unknown,
 * closed, expired and foreign invocations and sources all look the same. Spends
 * nothing. On refusal fills err (outcome and message) and returns -EACCES. */
int inv_admit(InvRegistry *reg, Connection *conn, const ProtoRequest *req, InvAdmission *ret, ProtoError *err);
/* The call was queued: it spends one of the invocation's calls, whatever happens to it
 * from now on (inv may be NULL: anonymous calls have no quota to spend). */
void inv_charge(Invocation *inv);
