/* SPDX-License-Identifier: MIT */
/* Invocations and their source registries (invocation.h): TTL, admission and quota. */
#include "supervisor/invocation.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/cleanup.h"
#include "common/list.h"
#include "common/sha256.h"
#include "common/util.h"

struct InvRegistry {
        sd_event *event;
        const Policy *policy;
        InvCloseFn on_close;
        void *userdata;
        Invocation *head;
};

static void source_free(Source *s) {
        free(s->text);
        free(s->original);
        free(s->media_type);
        free(s->file_name);
        free(s->origin);
        free(s);
}

DEFINE_TRIVIAL_REF_UNREF_FUNC(Source, source, source_free);

int inv_registry_new(sd_event *e, const Policy *p, InvCloseFn on_close, void *userdata, InvRegistry **ret) {
        InvRegistry *reg = calloc(1, sizeof *reg);
        if (!reg)
                return -ENOMEM;
        reg->event = e;
        reg->policy = p;
        reg->on_close = on_close;
        reg->userdata = userdata;
        *ret = reg;
        return 0;
}

void inv_registry_set_policy(InvRegistry *reg, const Policy *p) {
        reg->policy = p;
}

InvRegistry *inv_registry_free(InvRegistry *reg) {
        if (!reg)
                return NULL;
        while (reg->head)
                inv_close(reg->head);
        free(reg);
        return NULL;
}

static int on_ttl(sd_event_source *s, uint64_t usec, void *userdata) {
        inv_close(userdata);
        return 0;
}

void inv_touch(Invocation *inv) {
        if (!inv->ttl)
                return;
        sd_event_source_set_time_relative(inv->ttl, (uint64_t) inv->reg->policy->invocation_ttl_ms * 1000);
        sd_event_source_set_enabled(inv->ttl, SD_EVENT_ONESHOT);
}

uint32_t inv_count_connection(InvRegistry *reg, Connection *conn) {
        uint32_t n = 0;
        for (Invocation *i = reg->head; i; i = i->next)
                if (i->conn == conn && !i->anonymous)
                        n++;
        return n;
}

int inv_open(InvRegistry *reg, Connection *conn, uid_t uid, bool anonymous, Invocation **ret) {
        uint8_t rnd[PROTO_INVOCATION_ID_LEN / 2];
        Invocation *inv;
        int k;

        if (!anonymous && inv_count_connection(reg, conn) >= reg->policy->max_invocations_per_connection)
                return -EMFILE;
        inv = calloc(1, sizeof *inv);
        if (!inv)
                return -ENOMEM;
        /* 128 random bits: an ID cannot be guessed, and it is only honoured on its own
         * connection anyway. */
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd) {
                free(inv);
                return -EIO;
        }
        for (size_t i = 0; i < sizeof rnd; i++)
                snprintf(inv->id + 2 * i, 3, "%02x", rnd[i]);
        inv->reg = reg;
        inv->conn = conn;
        inv->uid = uid;
        inv->anonymous = anonymous;
        if (!anonymous) {
                k = sd_event_add_time_relative(reg->event, &inv->ttl, CLOCK_MONOTONIC,
                                               (uint64_t) reg->policy->invocation_ttl_ms * 1000, 1000000, on_ttl, inv);
                if (k < 0) {
                        free(inv);
                        return k;
                }
        }
        LIST_PREPEND(prev, next, reg->head, inv);
        *ret = inv;
        return 0;
}

void inv_close(Invocation *inv) {
        InvRegistry *reg = inv->reg;

        if (reg->on_close)
                reg->on_close(inv, reg->userdata);
        LIST_REMOVE(prev, next, reg->head, inv);
        sd_event_source_disable_unref(inv->ttl);
        for (size_t i = 0; i < inv->n_sources; i++)
                source_unref(inv->sources[i]);
        free(inv->sources);
        free(inv);
}

Invocation *inv_find(InvRegistry *reg, Connection *conn, const char *id, size_t len) {
        if (len != PROTO_INVOCATION_ID_LEN)
                return NULL;
        for (Invocation *i = reg->head; i; i = i->next)
                if (i->conn == conn && !i->anonymous && memcmp(i->id, id, len) == 0)
                        return i;
        return NULL;
}

void inv_close_connection(InvRegistry *reg, Connection *conn) {
        Invocation *i = reg->head;
        while (i) {
                Invocation *next = i->next;
                if (i->conn == conn)
                        inv_close(i);
                i = next;
        }
}

Source *inv_get_source(Invocation *inv, const char *id, size_t len) {
        for (size_t i = 0; i < inv->n_sources; i++)
                if (strlen(inv->sources[i]->id) == len && memcmp(inv->sources[i]->id, id, len) == 0)
                        return inv->sources[i];
        return NULL;
}

static char *dup_bytes(const ProtoBytes *b) {
        return b->ptr ? strndup(b->ptr, b->len) : NULL;
}

/* Room for one more source of size bytes with this id: the bounds every source obeys,
 * registered or kept. PROTO_KEEP_KEPT, or the bound it would pass (err says which); an
 * ID already there is PROTO_KEEP_INVALID_NAME (a kept ID never repeats: the call
 * number is in it, and the prefix is not for registered sources). */
static ProtoKeepRefusal check_room(Invocation *inv, const char *id, size_t id_len, uint64_t size, char *err,
                                   size_t errlen) {
        const Policy *p = inv->reg->policy;

        if (inv_get_source(inv, id, id_len)) {
                snprintf(err, errlen, "sourceId is already registered in this invocation");
                return PROTO_KEEP_INVALID_NAME;
        }
        if (inv->n_sources >= p->max_sources_per_invocation) {
                snprintf(err, errlen, "the invocation already has maxSourcesPerInvocation (%u) sources",
                         p->max_sources_per_invocation);
                return PROTO_KEEP_MAX_SOURCES_PER_INVOCATION;
        }
        if (inv->bytes + size > p->max_invocation_bytes) {
                snprintf(err, errlen, "the source would take the invocation past maxInvocationBytes (%llu)",
                         (unsigned long long) p->max_invocation_bytes);
                return PROTO_KEEP_MAX_INVOCATION_BYTES;
        }
        return PROTO_KEEP_KEPT;
}

/* Add s (its reference passes to the registry) of size bytes. */
static int add_source(Invocation *inv, Source *s, uint64_t size) {
        Source **ns = realloc(inv->sources, (inv->n_sources + 1) * sizeof *ns);
        if (!ns)
                return -ENOMEM;
        inv->sources = ns;
        inv->sources[inv->n_sources++] = s;
        inv->bytes += size;
        inv_touch(inv);
        return 0;
}

int inv_put_source(Invocation *inv, const ProtoRequest *req, char *err, size_t errlen, Source **ret) {
        uint64_t size = (uint64_t) req->text.len + req->original.len;
        ProtoKeepRefusal room;
        Source *s;

        room = check_room(inv, req->source_id.ptr, req->source_id.len, size, err, errlen);
        if (room == PROTO_KEEP_INVALID_NAME)
                return -EEXIST;
        if (room != PROTO_KEEP_KEPT)
                return -ENOSPC;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->n_ref = 1;
        memcpy(s->id, req->source_id.ptr, req->source_id.len);
        s->attachment = req->attachment;
        s->text = malloc(req->text.len + 1);
        s->original = req->attachment ? malloc(req->original.len + 1) : NULL;
        if (!s->text || (req->attachment && !s->original))
                goto oom;
        memcpy(s->text, req->text.ptr, req->text.len);
        s->text_len = req->text.len;
        sha256_hex(s->text, s->text_len, s->text_sha256);
        if (req->attachment) {
                memcpy(s->original, req->original.ptr, req->original.len);
                s->original_len = req->original.len;
                sha256_hex(s->original, s->original_len, s->original_sha256);
                if (!(s->media_type = dup_bytes(&req->media_type)) || !(s->file_name = dup_bytes(&req->file_name)))
                        goto oom;
        } else if (req->origin.ptr && !(s->origin = dup_bytes(&req->origin)))
                goto oom;
        if (add_source(inv, s, size) < 0)
                goto oom;
        *ret = s;
        return 0;
oom:
        source_unref(s);
        return -ENOMEM;
}

ProtoKeepRefusal inv_keep_output(Invocation *inv, uint32_t call_no, const Artifact *a, Source **ret) {
        char id[PROTO_SOURCE_ID_MAX + 2], err[192];
        ProtoKeepRefusal room;
        int n;
        Source *s;

        n = snprintf(id, sizeof id, PROTO_KEPT_PREFIX "%" PRIu32 "-%s", call_no, a->name);
        if (n < 0 || !proto_source_id_valid(id, (size_t) n))
                return PROTO_KEEP_INVALID_NAME;
        if (a->len > inv->reg->policy->max_source_bytes)
                return PROTO_KEEP_MAX_SOURCE_BYTES;
        room = check_room(inv, id, (size_t) n, a->len, err, sizeof err);
        if (room != PROTO_KEEP_KEPT)
                return room;
        s = calloc(1, sizeof *s);
        if (!s)
                return PROTO_KEEP_OUT_OF_MEMORY;
        s->n_ref = 1;
        memcpy(s->id, id, (size_t) n);
        s->output = true;
        s->produced_by = call_no;
        s->text = malloc(a->len + 1);
        s->media_type = strdup(a->media_type);
        if (!s->text || !s->media_type)
                goto oom;
        memcpy(s->text, a->data, a->len);
        s->text_len = a->len;
        /* Computed here, not copied: the evidence names the bytes the registry holds. */
        sha256_hex(s->text, s->text_len, s->text_sha256);
        if (add_source(inv, s, a->len) < 0)
                goto oom;
        *ret = s;
        return PROTO_KEEP_KEPT;
oom:
        source_unref(s);
        return PROTO_KEEP_OUT_OF_MEMORY;
}

static int refuse(ProtoError *err, uint64_t id, Outcome code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static int refuse(ProtoError *err, uint64_t id, Outcome code, const char *fmt, ...) {
        va_list ap;

        *err = (ProtoError){ .code = code, .has_id = true, .id = id };
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        return -EACCES;
}

int inv_admit(InvRegistry *reg, Connection *conn, const ProtoRequest *req, InvAdmission *ret, ProtoError *err) {
        InvAdmission a = {};

        if (req->invocation.len == 0) {
                /* An anonymous call has no sources: every ID is unavailable. */
                if (req->n_source_ids > 0)
                        return refuse(err, req->id, OUTCOME_UNAVAILABLE_SOURCE,
                                      "sourceIds[0] is not available to this call");
                *ret = a;
                return 0;
        }
        a.inv = inv_find(reg, conn, req->invocation.ptr, req->invocation.len);
        /* Named sources in an invocation that is not ours are unavailable, like any
         * source ID that is not ours. */
        if (!a.inv && req->n_source_ids > 0)
                return refuse(err, req->id, OUTCOME_UNAVAILABLE_SOURCE, "sourceIds[0] is not available to this call");
        if (!a.inv)
                return refuse(err, req->id, OUTCOME_NOT_FOUND,
                              "no such invocation on this connection (unknown, closed or expired)");
        for (size_t i = 0; i < req->n_source_ids; i++) {
                a.sources[i] = inv_get_source(a.inv, req->source_ids[i].ptr, req->source_ids[i].len);
                if (!a.sources[i])
                        return refuse(err, req->id, OUTCOME_UNAVAILABLE_SOURCE,
                                      "sourceIds[%zu] is not available to this call", i);
        }
        a.n_sources = req->n_source_ids;
        if (a.inv->calls_spent >= reg->policy->max_calls)
                return refuse(err, req->id, OUTCOME_QUOTA_EXHAUSTED, "the invocation has spent its %u calls",
                              reg->policy->max_calls);
        *ret = a;
        return 0;
}

void inv_charge(Invocation *inv) {
        if (!inv)
                return;
        inv->calls_spent++;
        inv_touch(inv);
}
