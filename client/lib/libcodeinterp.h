/* SPDX-License-Identifier: MIT */
/* libcodeinterp: a small blocking client for codeinterpd's protocol (docs/protocol.md,
 * API in docs/client.md). One CiClient is one connection; not thread-safe. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CI_DEFAULT_SOCKET "/run/codeinterp/codeinterp.sock"
#define CI_INVOCATION_ID_MAX 64

typedef struct CiClient CiClient;

/* A received message: the object tree and the bytes it points into. */
typedef struct CiMessage {
        msgpack_unpacked unpacked;
        char *buf;
        size_t len;
} CiMessage;

typedef struct CiSource {
        const char *id;
        bool attachment;
        const void *text; /* canonical text (UTF-8) */
        size_t text_len;
        const void *original; /* attachments: the original bytes */
        size_t original_len;
        const char *media_type; /* attachments */
        const char *file_name;  /* attachments */
        const char *origin;     /* read_source: URI or title (metadata only) */
} CiSource;

typedef struct CiExecute {
        const char *summary;
        const char *code;
        size_t code_len;
        const char *invocation; /* NULL: a one-call anonymous invocation */
        const char *const *source_ids;
        size_t n_source_ids;
} CiExecute;

/* Which /outputs files an execute keeps as sources of its invocation (keepOutputs,
 * docs/protocol.md#kept-outputs): all of them, or the names given (at most
 * CI_KEEP_OUTPUTS_MAX). Only with an invocation. */
#define CI_KEEP_OUTPUTS_MAX 16
typedef struct CiKeep {
        bool all;
        const char *const *names;
        size_t n_names;
} CiKeep;

/* Called for every progress message of the call; may be NULL. */
typedef void (*CiProgressFn)(const msgpack_object *progress, void *userdata);

/* Connect to path (NULL: $CODEINTERP_SOCKET, else CI_DEFAULT_SOCKET). */
int ci_connect(const char *path, CiClient **ret);
/* The socket ci_connect(path) connects to, for messages that name it. */
const char *ci_socket_path(const char *path);
void ci_close(CiClient *c);
int ci_fd(const CiClient *c);
/* Lowest level: send one map built in sb; receive one message (at most 64 MiB).
 * ci_recv() returns -ENOMEM when the message cannot be held in memory: it has been
 * read and dropped, and the next call reads the next message. The request helpers
 * below return -ENOMEM, having sent nothing, when their request cannot be built. */
int ci_send(CiClient *c, const msgpack_sbuffer *sb);
int ci_recv(CiClient *c, CiMessage *ret);
void ci_message_done(CiMessage *m);
/* Request/reply helpers: fill ret with the reply (or -EPROTO; an "error" reply is
 * returned as 0 with ret holding it: check ci_message_type()). */
int ci_hello(CiClient *c, CiMessage *ret);
int ci_status(CiClient *c, CiMessage *ret);
/* The tool definition: a reply whose "tool" map holds name, description, guidance and
 * inputSchema (docs/protocol.md#describe). */
int ci_describe(CiClient *c, CiMessage *ret);
int ci_invocation_open(CiClient *c, char ret_id[CI_INVOCATION_ID_MAX + 1], CiMessage *ret_error);
int ci_invocation_close(CiClient *c, const char *invocation, CiMessage *ret);
int ci_source_put(CiClient *c, const char *invocation, const CiSource *s, CiMessage *ret);
/* Execute and wait for the result (or error) message; progress goes to cb. */
int ci_execute(CiClient *c, const CiExecute *x, CiProgressFn cb, void *userdata, CiMessage *ret);
/* Send execute without waiting; returns the request id used. */
int ci_execute_send(CiClient *c, const CiExecute *x, uint64_t *ret_id);
/* The same with keepOutputs (keep NULL: none, as ci_execute()). -EINVAL, having sent
 * nothing, for a keep list without x->invocation or with more than CI_KEEP_OUTPUTS_MAX
 * names (the supervisor checks the names themselves). */
int ci_execute_keep(CiClient *c, const CiExecute *x, const CiKeep *keep, CiProgressFn cb, void *userdata,
                    CiMessage *ret);
int ci_execute_keep_send(CiClient *c, const CiExecute *x, const CiKeep *keep, uint64_t *ret_id);
int ci_cancel(CiClient *c, uint64_t call_id, uint64_t *ret_id);

/* The canonical text of an attachment registered without one (docs/client.md): its
 * bytes when they are valid UTF-8 (returns 0, *ret_text NULL: use the bytes), else one
 * line describing it, "[binary attachment: MEDIA_TYPE, N bytes; the original bytes are
 * /inputs/ID.original]" (returns 1, *ret_text malloc'd and NUL-terminated). -ENOMEM. */
int ci_attachment_text(const char *id, const void *data, size_t len, const char *media_type, char **ret_text,
                       size_t *ret_len);

/* "reply" | "error" | "result" | "progress" | NULL */
const char *ci_message_type(const CiMessage *m);
const msgpack_object *ci_get(const msgpack_object *map, const char *key);

/* Artifacts (docs/protocol.md#artifacts): the files a call left in /outputs, as a result
 * carries them. Pointers point into the message. */
typedef struct CiArtifact {
        const char *name; /* not NUL-terminated */
        size_t name_len;
        const char *media_type; /* not NUL-terminated */
        size_t media_type_len;
        const void *data;
        size_t len;
        char sha256[65];
} CiArtifact;

/* How many artifacts the result carries (0 for none, nil or not a result). */
size_t ci_artifact_count(const msgpack_object *result);
/* Artifact i, checked: every field present with its type, bytes == the data's length,
 * sha256 64 lowercase hex digits equal to the data's digest. -EBADMSG otherwise,
 * -ENOENT past the end. */
int ci_artifact_get(const msgpack_object *result, size_t i, CiArtifact *ret);
/* A name that may become a file name in a directory: 1..255 bytes of valid UTF-8, not
 * "." or "..", no '/', no C0 control character or DEL (the supervisor sends no other). */
bool ci_artifact_name_safe(const char *name, size_t len);
/* Write a into the directory dir_fd under its own name: a new file (O_CREAT | O_EXCL |
 * O_NOFOLLOW, mode 0644), never over an existing file or through a symlink. -EINVAL for
 * a name that is not safe, -EEXIST, other -errno; a partly written file is removed. */
int ci_artifact_save(int dir_fd, const CiArtifact *a);

/* Kept outputs (docs/protocol.md#kept-outputs): what a result's keptOutputs says of each
 * file asked for. Pointers point into the message; none is NUL-terminated. */
typedef struct CiKept {
        const char *name;
        size_t name_len;
        const char *source_id; /* NULL when refused */
        size_t source_id_len;
        uint64_t bytes;
        char sha256[65];     /* kept: the bytes' digest, as the supervisor computed it */
        const char *refused; /* NULL when kept, else the reason ("max_source_bytes", ...) */
        size_t refused_len;
} CiKept;

/* Whether the result has keptOutputs (its request had keepOutputs), and how many entries. */
bool ci_kept_present(const msgpack_object *result);
size_t ci_kept_count(const msgpack_object *result);
/* Entry i, checked: name a string, and either sourceId, bytes and sha256 (64 lowercase hex
 * digits) or refused a string. -EBADMSG otherwise, -ENOENT past the end. */
int ci_kept_get(const msgpack_object *result, size_t i, CiKept *ret);

/* Exit status for an outcome name (documented in docs/client.md). */
int ci_outcome_exit_status(const char *outcome);

/* Rendering (client/lib/render.c, docs/client.md#rendering). Both return a malloc'd,
 * NUL-terminated UTF-8 string in *ret (free() it), or -ENOMEM / -EINVAL (msg is not a map).
 *
 * ci_render_model_text: what the model sees for a "result" or "error" message: the outcome,
 * stdout, stderr, value and exception, each with an explicit note of the exact number of
 * characters omitted; timeout, cancelled and worker_error as runtime outcomes; an error's
 * code and message. Its size is bounded by the message's (itself bounded by maxResultBytes)
 * plus CI_RENDER_OVERHEAD_MAX bytes.
 *
 * ci_render_progress_card: one line for the user from a "progress" or "result" message:
 * phase, elapsed time, queue position, output sizes and omission counts, the outcome name.
 * Never code, output, value, source ids, paths, exception text, detail or limit. */
#define CI_RENDER_OVERHEAD_MAX 4096
int ci_render_model_text(const msgpack_object *msg, char **ret);
int ci_render_progress_card(const msgpack_object *msg, char **ret);
