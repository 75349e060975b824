/* SPDX-License-Identifier: MIT */
/* libcodeinterp's connection: connecting, the framed msgpack requests and replies, the
 * calls (hello, describe, status, execute with its progress, invocations and sources),
 * the artifacts of a result and the exit status of an outcome. */
#include "client/lib/libcodeinterp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/mp.h"
#include "common/sha256.h"
#include "common/util.h"

#define CI_MAX_MESSAGE (64u << 20)

struct CiClient {
        int fd;
        uint64_t next_id;
        char *path; /* to connect again after an idle close */
};

const char *ci_socket_path(const char *path) {
        if (!path)
                path = getenv("CODEINTERP_SOCKET");
        return path && *path ? path : CI_DEFAULT_SOCKET;
}

static int connect_to(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;

        if (strlen(path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int ci_connect(const char *path, CiClient **ret) {
        _cleanup_close_ int fd = -1;
        CiClient *c;
        char *copy;

        path = ci_socket_path(path);
        fd = connect_to(path);
        if (fd < 0)
                return fd;
        c = malloc(sizeof *c);
        copy = strdup(path);
        if (!c || !copy) {
                free(c);
                free(copy);
                return -ENOMEM;
        }
        *c = (CiClient){ .fd = TAKE_FD(fd), .next_id = 1, .path = copy };
        *ret = c;
        return 0;
}

void ci_close(CiClient *c) {
        if (c) {
                close(c->fd);
                free(c->path);
        }
        free(c);
}

int ci_fd(const CiClient *c) {
        return c->fd;
}

int ci_send(CiClient *c, const msgpack_sbuffer *sb) {
        uint8_t hdr[4];
        int k;

        frame_put_len(hdr, (uint32_t) sb->size);
        if ((k = send_full(c->fd, hdr, 4)) < 0)
                return k;
        return send_full(c->fd, sb->data, sb->size);
}

int ci_recv(CiClient *c, CiMessage *ret) {
        uint8_t hdr[4];
        CiMessage m = {};
        size_t off = 0;
        int k;

        if ((k = read_full(c->fd, hdr, 4)) < 0)
                return k;
        m.len = frame_get_len(hdr);
        if (m.len > CI_MAX_MESSAGE)
                return -EMSGSIZE;
        m.buf = malloc(m.len ? m.len : 1);
        if (!m.buf) {
                /* Read the message and drop it, so that the next one is read from its
                 * start: the connection stays usable, this one message is lost. */
                uint8_t scratch[16384];
                for (size_t left = m.len; left > 0;) {
                        size_t n = MIN(left, sizeof scratch);
                        if ((k = read_full(c->fd, scratch, n)) < 0)
                                return k;
                        left -= n;
                }
                return -ENOMEM;
        }
        if ((k = read_full(c->fd, m.buf, m.len)) < 0) {
                free(m.buf);
                return k;
        }
        msgpack_unpacked_init(&m.unpacked);
        msgpack_unpack_return u = MSGPACK_UNPACK_PARSE_ERROR;
        if (mp_validate(m.buf, m.len, 16, NULL) < 0 ||
            (u = msgpack_unpack_next(&m.unpacked, m.buf, m.len, &off)) != MSGPACK_UNPACK_SUCCESS ||
            m.unpacked.data.type != MSGPACK_OBJECT_MAP) {
                msgpack_unpacked_destroy(&m.unpacked);
                free(m.buf);
                return u == MSGPACK_UNPACK_NOMEM_ERROR ? -ENOMEM : -EPROTO;
        }
        *ret = m;
        return 0;
}

void ci_message_done(CiMessage *m) {
        if (!m->buf)
                return;
        msgpack_unpacked_destroy(&m->unpacked);
        free(m->buf);
        m->buf = NULL;
}

const msgpack_object *ci_get(const msgpack_object *map, const char *key) {
        return mp_map_get(map, key);
}

const char *ci_message_type(const CiMessage *m) {
        static char buf[16];
        const msgpack_object *t = mp_map_get(&m->unpacked.data, "type");
        if (!mp_is_str(t) || t->via.str.size >= sizeof buf)
                return NULL;
        memcpy(buf, t->via.str.ptr, t->via.str.size);
        buf[t->via.str.size] = 0;
        return buf;
}

static bool message_id_is(const CiMessage *m, uint64_t id) {
        const msgpack_object *o = mp_map_get(&m->unpacked.data, "id");
        return mp_is_uint(o) && o->via.u64 == id;
}

static bool is_connection_error(const CiMessage *m) {
        const char *type = ci_message_type(m);
        const msgpack_object *mid = mp_map_get(&m->unpacked.data, "id");
        return type && !strcmp(type, "error") && mid && mid->type == MSGPACK_OBJECT_NIL;
}

/* A send failed (k): when the supervisor closed the connection it may have said why
 * first, in an error with a nil id (permission_denied for a peer the policy refuses,
 * overloaded past maxConnections), and those bytes are still ours to read. That error
 * goes to ret and 0 is returned; otherwise k. The peer is gone, so the reads end at
 * once: with the queued messages, then end of file. */
static int send_failed(CiClient *c, int k, CiMessage *ret) {
        if (k != -EPIPE && k != -ECONNRESET)
                return k;
        for (;;) {
                CiMessage m;
                if (ci_recv(c, &m) < 0)
                        return k;
                if (is_connection_error(&m)) {
                        *ret = m;
                        return 0;
                }
                ci_message_done(&m);
        }
}

/* Wait for the reply (or error) to request id, skipping unrelated messages. An error
 * with a nil id (connection-level) also ends the wait. */
static int wait_reply(CiClient *c, uint64_t id, CiMessage *ret) {
        for (;;) {
                CiMessage m;
                int k = ci_recv(c, &m);
                if (k < 0)
                        return k;
                const char *type = ci_message_type(&m);
                if ((type && (!strcmp(type, "reply") || !strcmp(type, "error")) && message_id_is(&m, id)) ||
                    is_connection_error(&m)) {
                        *ret = m;
                        return 0;
                }
                ci_message_done(&m);
        }
}

/* A request is packed whole into an MpWriter, then sent: if memory ran out while
 * packing (a large code or source), nothing is sent and the call returns -ENOMEM,
 * never a frame with fields missing. */
static void begin(MpWriter *w, CiClient *c, const char *op, size_t extra, uint64_t *ret_id) {
        mp_writer_init(w, 0);
        msgpack_pack_map(&w->pk, 2 + extra);
        mp_pack_kv_str(&w->pk, "op", op);
        *ret_id = c->next_id++;
        mp_pack_kv_uint(&w->pk, "id", *ret_id);
}

/* Whether buf (len bytes) is exactly one frame: the supervisor's parting error, an
 * error without an id saying "closing": true. */
static bool is_parting_frame(const uint8_t *buf, size_t len) {
        msgpack_unpacked up;
        size_t off = 0;
        bool parting = false;

        if (len < 4 || frame_get_len(buf) != len - 4 || mp_validate((const char *) buf + 4, len - 4, 16, NULL) < 0)
                return false;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, (const char *) buf + 4, len - 4, &off) == MSGPACK_UNPACK_SUCCESS &&
            off == len - 4) {
                const msgpack_object *m = &up.data, *id = mp_map_get(m, "id"), *closing = mp_map_get(m, "closing");
                parting = mp_str_eq(mp_map_get(m, "type"), "error") && id && id->type == MSGPACK_OBJECT_NIL &&
                          closing && closing->type == MSGPACK_OBJECT_BOOLEAN && closing->via.boolean;
        }
        msgpack_unpacked_destroy(&up);
        return parting;
}

/* The supervisor closes a connection that has no invocation and no call after
 * connectionIdleTimeoutMs, saying so first in a parting error (docs/protocol.md#idle-
 * connections). Such a connection held nothing: the next request goes over a new one,
 * as the Python client does. Anything else left to read (a message the caller has not
 * taken yet) is the caller's: then the connection is left as it is, and the send fails
 * as before. */
static void reconnect_if_closed_idle(CiClient *c) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
        uint8_t buf[512];
        ssize_t n;
        int fd;

        if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP)))
                return;
        n = recv(c->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 || (n > 0 && !is_parting_frame(buf, (size_t) n)))
                return;
        fd = connect_to(c->path);
        if (fd < 0)
                return; /* the send on the old one says why (the parting error, or EPIPE) */
        close(c->fd);
        c->fd = fd;
}

/* Send what w holds unless packing it failed; frees w's buffer either way. */
static int send_writer(CiClient *c, MpWriter *w) {
        int k = mp_writer_error(w);

        if (k == 0)
                reconnect_if_closed_idle(c);
        if (k == 0)
                k = ci_send(c, &w->sb);
        mp_writer_done(w);
        return k;
}

static int simple(CiClient *c, const char *op, CiMessage *ret) {
        MpWriter w;
        uint64_t id;
        int k;

        begin(&w, c, op, 0, &id);
        k = send_writer(c, &w);
        return k < 0 ? send_failed(c, k, ret) : wait_reply(c, id, ret);
}

int ci_hello(CiClient *c, CiMessage *ret) {
        return simple(c, "hello", ret);
}

int ci_status(CiClient *c, CiMessage *ret) {
        return simple(c, "status", ret);
}

int ci_describe(CiClient *c, CiMessage *ret) {
        return simple(c, "describe", ret);
}

int ci_invocation_open(CiClient *c, char ret_id[CI_INVOCATION_ID_MAX + 1], CiMessage *ret_error) {
        CiMessage m;
        const msgpack_object *inv;
        int k = simple(c, "invocation.open", &m);

        if (k < 0)
                return k;
        inv = mp_map_get(&m.unpacked.data, "invocation");
        if (!mp_is_str(inv) || inv->via.str.size > CI_INVOCATION_ID_MAX) {
                if (ret_error)
                        *ret_error = m;
                else
                        ci_message_done(&m);
                return -EPROTO;
        }
        memcpy(ret_id, inv->via.str.ptr, inv->via.str.size);
        ret_id[inv->via.str.size] = 0;
        ci_message_done(&m);
        return 0;
}

int ci_invocation_close(CiClient *c, const char *invocation, CiMessage *ret) {
        MpWriter w;
        uint64_t id;
        int k;

        begin(&w, c, "invocation.close", 1, &id);
        mp_pack_kv_str(&w.pk, "invocation", invocation);
        k = send_writer(c, &w);
        return k < 0 ? send_failed(c, k, ret) : wait_reply(c, id, ret);
}

int ci_source_put(CiClient *c, const char *invocation, const CiSource *s, CiMessage *ret) {
        MpWriter w;
        uint64_t id;
        int k;

        begin(&w, c, "source.put", s->attachment ? 7 : (s->origin ? 5 : 4), &id);
        mp_pack_kv_str(&w.pk, "invocation", invocation);
        mp_pack_kv_str(&w.pk, "sourceId", s->id);
        mp_pack_kv_str(&w.pk, "kind", s->attachment ? "attachment" : "read_source");
        mp_pack_cstr(&w.pk, "text");
        mp_pack_strn(&w.pk, s->text, s->text_len);
        if (s->attachment) {
                mp_pack_cstr(&w.pk, "original");
                msgpack_pack_bin(&w.pk, s->original_len);
                msgpack_pack_bin_body(&w.pk, s->original, s->original_len);
                mp_pack_kv_str(&w.pk, "mediaType", s->media_type ?: "application/octet-stream");
                mp_pack_kv_str(&w.pk, "fileName", s->file_name ?: s->id);
        } else if (s->origin)
                mp_pack_kv_str(&w.pk, "origin", s->origin);
        k = send_writer(c, &w);
        return k < 0 ? send_failed(c, k, ret) : wait_reply(c, id, ret);
}

int ci_execute_send(CiClient *c, const CiExecute *x, uint64_t *ret_id) {
        return ci_execute_keep_send(c, x, NULL, ret_id);
}

int ci_execute_keep_send(CiClient *c, const CiExecute *x, const CiKeep *keep, uint64_t *ret_id) {
        MpWriter w;
        int k;

        if (keep && (!x->invocation || (!keep->all && keep->n_names > CI_KEEP_OUTPUTS_MAX)))
                return -EINVAL;
        begin(&w, c, "execute", 3 + !!x->invocation + !!keep, ret_id);
        mp_pack_kv_str(&w.pk, "summary", x->summary ?: "");
        mp_pack_cstr(&w.pk, "code");
        mp_pack_strn(&w.pk, x->code, x->code_len);
        if (x->invocation)
                mp_pack_kv_str(&w.pk, "invocation", x->invocation);
        mp_pack_cstr(&w.pk, "sourceIds");
        msgpack_pack_array(&w.pk, x->n_source_ids);
        for (size_t i = 0; i < x->n_source_ids; i++)
                mp_pack_cstr(&w.pk, x->source_ids[i]);
        if (keep && keep->all)
                mp_pack_kv_str(&w.pk, "keepOutputs", "all");
        else if (keep) {
                mp_pack_cstr(&w.pk, "keepOutputs");
                msgpack_pack_array(&w.pk, keep->n_names);
                for (size_t i = 0; i < keep->n_names; i++)
                        mp_pack_cstr(&w.pk, keep->names[i]);
        }
        k = send_writer(c, &w);
        return k;
}

int ci_execute(CiClient *c, const CiExecute *x, CiProgressFn cb, void *userdata, CiMessage *ret) {
        return ci_execute_keep(c, x, NULL, cb, userdata, ret);
}

int ci_execute_keep(CiClient *c, const CiExecute *x, const CiKeep *keep, CiProgressFn cb, void *userdata,
                    CiMessage *ret) {
        uint64_t id;
        int k;

        if (keep && (!x->invocation || (!keep->all && keep->n_names > CI_KEEP_OUTPUTS_MAX)))
                return -EINVAL;
        k = ci_execute_keep_send(c, x, keep, &id);
        if (k < 0)
                return send_failed(c, k, ret);
        for (;;) {
                CiMessage m;
                const char *type;

                if ((k = ci_recv(c, &m)) < 0)
                        return k;
                type = ci_message_type(&m);
                const msgpack_object *mid = mp_map_get(&m.unpacked.data, "id");
                bool ours = message_id_is(&m, id) || (mid && mid->type == MSGPACK_OBJECT_NIL);
                if (ours && type && !strcmp(type, "progress")) {
                        if (cb)
                                cb(&m.unpacked.data, userdata);
                } else if (ours && type && (!strcmp(type, "result") || !strcmp(type, "error"))) {
                        *ret = m;
                        return 0;
                }
                ci_message_done(&m);
        }
}

int ci_cancel(CiClient *c, uint64_t call_id, uint64_t *ret_id) {
        MpWriter w;
        int k;

        begin(&w, c, "cancel", 1, ret_id);
        mp_pack_kv_uint(&w.pk, "callId", call_id);
        k = send_writer(c, &w);
        return k;
}

int ci_outcome_exit_status(const char *o) {
        static const struct {
                const char *name;
                int status;
        } table[] = {
                { "ok", 0 },
                { "python_exception", 1 },
                { "timeout", 3 },
                { "cancelled", 4 },
                { "resource_limit", 5 },
                { "invalid_input", 6 },
                { "unavailable_source", 7 },
                { "quota_exhausted", 8 },
                { "worker_error", 9 },
                { "overloaded", 10 },
                { "not_found", 11 },
                { "permission_denied", 11 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (o && !strcmp(o, table[i].name))
                        return table[i].status;
        return 12;
}

int ci_attachment_text(const char *id, const void *data, size_t len, const char *media_type, char **ret_text,
                       size_t *ret_len) {
        uint64_t chars;
        char *text;
        int n;

        if (utf8_count(data, len, &chars) >= 0) {
                *ret_text = NULL;
                *ret_len = len;
                return 0;
        }
        n = asprintf(&text, "[binary attachment: %s, %zu bytes; the original bytes are /inputs/%s.original]",
                     media_type && *media_type ? media_type : "application/octet-stream", len, id);
        if (n < 0)
                return -ENOMEM;
        *ret_text = text;
        *ret_len = (size_t) n;
        return 1;
}

size_t ci_artifact_count(const msgpack_object *result) {
        const msgpack_object *a = mp_map_get(result, "artifacts");
        return a && a->type == MSGPACK_OBJECT_ARRAY ? a->via.array.size : 0;
}

bool ci_artifact_name_safe(const char *name, size_t len) {
        return file_name_safe(name, len);
}

int ci_artifact_get(const msgpack_object *result, size_t i, CiArtifact *ret) {
        const msgpack_object *arr = mp_map_get(result, "artifacts"), *a, *name, *mt, *bytes, *sha, *data;
        CiArtifact out = {};

        if (i >= ci_artifact_count(result))
                return -ENOENT;
        a = &arr->via.array.ptr[i];
        name = mp_map_get(a, "name");
        mt = mp_map_get(a, "mediaType");
        bytes = mp_map_get(a, "bytes");
        sha = mp_map_get(a, "sha256");
        data = mp_map_get(a, "data");
        if (!mp_is_str(name) || !mp_is_str(mt) || !mp_is_uint(bytes) || !mp_is_str(sha) || sha->via.str.size != 64 ||
            !data || data->type != MSGPACK_OBJECT_BIN || bytes->via.u64 != data->via.bin.size)
                return -EBADMSG;
        out.name = name->via.str.ptr;
        out.name_len = name->via.str.size;
        out.media_type = mt->via.str.ptr;
        out.media_type_len = mt->via.str.size;
        out.data = data->via.bin.ptr;
        out.len = data->via.bin.size;
        sha256_hex(out.data, out.len, out.sha256);
        if (memcmp(out.sha256, sha->via.str.ptr, 64) != 0)
                return -EBADMSG;
        *ret = out;
        return 0;
}

bool ci_kept_present(const msgpack_object *result) {
        const msgpack_object *a = mp_map_get(result, "keptOutputs");
        return a && a->type == MSGPACK_OBJECT_ARRAY;
}

size_t ci_kept_count(const msgpack_object *result) {
        return ci_kept_present(result) ? mp_map_get(result, "keptOutputs")->via.array.size : 0;
}

static bool lower_hex(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

int ci_kept_get(const msgpack_object *result, size_t i, CiKept *ret) {
        const msgpack_object *k, *name, *sid, *bytes, *sha, *refused;
        CiKept out = {};

        if (i >= ci_kept_count(result))
                return -ENOENT;
        k = &mp_map_get(result, "keptOutputs")->via.array.ptr[i];
        name = mp_map_get(k, "name");
        refused = mp_map_get(k, "refused");
        if (!mp_is_str(name))
                return -EBADMSG;
        out.name = name->via.str.ptr;
        out.name_len = name->via.str.size;
        if (refused) {
                if (!mp_is_str(refused) || refused->via.str.size == 0)
                        return -EBADMSG;
                out.refused = refused->via.str.ptr;
                out.refused_len = refused->via.str.size;
                *ret = out;
                return 0;
        }
        sid = mp_map_get(k, "sourceId");
        bytes = mp_map_get(k, "bytes");
        sha = mp_map_get(k, "sha256");
        if (!mp_is_str(sid) || sid->via.str.size == 0 || !mp_is_uint(bytes) || !mp_is_str(sha) ||
            sha->via.str.size != 64 || !lower_hex(sha->via.str.ptr, 64))
                return -EBADMSG;
        out.source_id = sid->via.str.ptr;
        out.source_id_len = sid->via.str.size;
        out.bytes = bytes->via.u64;
        memcpy(out.sha256, sha->via.str.ptr, 64);
        *ret = out;
        return 0;
}

int ci_artifact_save(int dir_fd, const CiArtifact *a) {
        char name[256];
        _cleanup_close_ int fd = -1;
        int k;

        if (!ci_artifact_name_safe(a->name, a->name_len))
                return -EINVAL;
        memcpy(name, a->name, a->name_len);
        name[a->name_len] = 0;
        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
                return -errno;
        k = write_full(fd, a->data, a->len);
        if (k >= 0 && fsync(fd) < 0)
                k = -errno;
        if (k < 0) {
                (void) unlinkat(dir_fd, name, 0);
                return k;
        }
        return 0;
}
