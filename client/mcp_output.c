/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp`'s writing side: each JSON-RPC answer handed to the transport's sink
 * (by default one line on stdout, written without allocating), and a tools/call result as
 * MCP content (the model text, the artifacts as images or resources, the structured
 * content). client/mcp.c reads and decides; this file only writes. */
#include <errno.h>
#include <math.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/mcp_internal.h"
#include "client/tool.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

/* ---- output ----
 *
 * Out of memory is not the end of a session: a request whose answer cannot be built
 * is answered with an "out of memory" error (mcp_answer_oom()), and the server goes on.
 * Only a lost stdout, stdin or supervisor ends it. json-c takes a NULL value as JSON
 * null, so every value is added through tool_json_set() (tool.h) or mcp_arr_push(), which
 * refuse NULL: an answer is complete or not sent, never sent with a field turned into
 * null. It is written by mcp_write_json(), which allocates nothing. */

int mcp_arr_push(json_object *a, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_array_add(a, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* o as JSON, straight from the tree to f. Not json-c's serialiser: it drops what it
 * cannot allocate and returns the rest (0.16), so under memory pressure a string (an
 * image's base64) could go out shortened or empty. This needs no memory. */
void mcp_write_json(FILE *f, json_object *o) {
        bool first = true;

        switch (json_object_get_type(o)) {
        case json_type_null:
                fputs("null", f);
                break;
        case json_type_boolean:
                fputs(json_object_get_boolean(o) ? "true" : "false", f);
                break;
        case json_type_int:
                if (json_object_get_int64(o) == INT64_MAX) /* or above: an unsigned one */
                        fprintf(f, "%" PRIu64, json_object_get_uint64(o));
                else
                        fprintf(f, "%" PRId64, json_object_get_int64(o));
                break;
        case json_type_double:
                if (isfinite(json_object_get_double(o)))
                        fprintf(f, "%.17g", json_object_get_double(o));
                else
                        fputs("null", f);
                break;
        case json_type_string:
                ci_json_write_string(f, json_object_get_string(o), (size_t) json_object_get_string_len(o));
                break;
        case json_type_array:
                fputc('[', f);
                for (size_t i = 0, n = json_object_array_length(o); i < n; i++) {
                        if (i)
                                fputc(',', f);
                        mcp_write_json(f, json_object_array_get_idx(o, i));
                }
                fputc(']', f);
                break;
        case json_type_object:
                fputc('{', f);
                json_object_object_foreach(o, key, val) {
                        if (!first)
                                fputc(',', f);
                        first = false;
                        ci_json_write_string(f, key, strlen(key));
                        fputc(':', f);
                        mcp_write_json(f, val);
                }
                fputc('}', f);
                break;
        }
}

/* Where answers go: NULL (stdio), one line each on stdout; else the HTTP transport's
 * sink (client/mcp_http.c), set around each call into the session it serves. */
static const McpSink *sink;

void mcp_output_set_sink(const McpSink *s) {
        sink = s;
}

/* Write msg (taken) as one line, or hand it to the sink. -EIO: stdout is gone. */
int mcp_send_json(json_object *msg) {
        int k = 0;

        if (sink)
                k = sink->send(sink->userdata, msg);
        else {
                mcp_write_json(stdout, msg);
                if (fputc('\n', stdout) < 0 || fflush(stdout) != 0 || ferror(stdout))
                        k = -EIO;
        }
        json_object_put(msg);
        return k;
}

/* Takes key's value v; the message is sent when every part of it could be made. */
int mcp_send_rpc(json_object *id, const char *key, json_object *v) {
        json_object *m = json_object_new_object(), *id_ref = id ? json_object_get(id) : NULL;
        int k;

        if (!m || tool_json_set(m, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_object_object_add(m, "id", id_ref) < 0)
                goto fail;
        id_ref = NULL; /* m holds it */
        k = tool_json_set(m, key, v);
        v = NULL; /* taken, also on failure */
        if (k < 0)
                goto fail;
        return mcp_send_json(m);
fail:
        json_object_put(id_ref);
        json_object_put(v);
        json_object_put(m);
        return -ENOMEM;
}

/* Takes result. */
int mcp_send_result(json_object *id, json_object *result) {
        return mcp_send_rpc(id, "result", result);
}

int mcp_send_error(json_object *id, int code, const char *message) {
        json_object *e = json_object_new_object();

        if (!e || tool_json_set(e, "code", json_object_new_int(code)) < 0 ||
            tool_json_set(e, "message", json_object_new_string(message)) < 0) {
                json_object_put(e);
                return -ENOMEM;
        }
        return mcp_send_rpc(id, "error", e);
}

/* The answer for id when not even an error object can be allocated: written straight
 * to stdout, whose buffer exists since the first answer. */
int mcp_send_oom(json_object *id) {
        if (sink)
                return sink->send_oom(sink->userdata, id);
        fputs("{\"jsonrpc\":\"2.0\",\"id\":", stdout);
        if (id && json_object_is_type(id, json_type_int))
                printf("%" PRId64, json_object_get_int64(id));
        else if (id && json_object_is_type(id, json_type_string)) {
                const char *s = json_object_get_string(id);
                putchar('"');
                for (int i = 0, n = json_object_get_string_len(id); i < n; i++) {
                        unsigned char c = (unsigned char) s[i];
                        if (c == '"' || c == '\\')
                                printf("\\%c", c);
                        else if (c < 0x20)
                                printf("\\u%04x", c);
                        else
                                putchar(c);
                }
                putchar('"');
        } else
                fputs("null", stdout);
        fprintf(stdout, ",\"error\":{\"code\":%d,\"message\":\"out of memory\"}}\n", RPC_INTERNAL_ERROR);
        return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -EIO;
}

/* k from answering request id: when it is -ENOMEM, answer with an error instead.
 * Returns 0, or -EIO when stdout is gone. */
int mcp_answer_oom(json_object *id, int k) {
        if (k != -ENOMEM)
                return k;
        k = mcp_send_error(id, RPC_INTERNAL_ERROR, "out of memory");
        return k == -ENOMEM ? mcp_send_oom(id) : k;
}

static char *base64_new(const uint8_t *p, size_t n) {
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v =
                        (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
                *o++ = tbl[v >> 18 & 63];
                *o++ = tbl[v >> 12 & 63];
                *o++ = i + 1 < n ? tbl[v >> 6 & 63] : '=';
                *o++ = i + 2 < n ? tbl[v & 63] : '=';
        }
        *o = 0;
        return out;
}

static bool is_image(const CiArtifact *a) {
        static const char *const images[] = { "image/png", "image/jpeg", "image/gif", "image/webp" };
        for (size_t i = 0; i < ELEMENTSOF(images); i++)
                if (a->media_type_len == strlen(images[i]) && !memcmp(a->media_type, images[i], a->media_type_len))
                        return true;
        return false;
}

/* One artifact as MCP content in *ret: an image as {type: image, data, mimeType};
 * anything else as an embedded resource {type: resource, resource: {uri, mimeType,
 * blob}} whose uri is file:///outputs/NAME, percent-encoded. -EINVAL: malformed, left
 * out (the text lists it); -ENOMEM. */
static int artifact_content(const CiArtifact *a, json_object **ret) {
        _cleanup_free_ char *b64 = NULL, *uri = NULL;
        json_object *item = NULL, *res = NULL;
        char mt[128];
        size_t u = 0;

        if (a->media_type_len >= sizeof mt)
                return -EINVAL;
        memcpy(mt, a->media_type, a->media_type_len);
        mt[a->media_type_len] = 0;
        b64 = base64_new(a->data, a->len);
        item = json_object_new_object();
        if (!b64 || !item)
                goto oom;
        if (is_image(a)) {
                if (tool_json_set(item, "type", json_object_new_string("image")) < 0 ||
                    tool_json_set(item, "data", json_object_new_string(b64)) < 0 ||
                    tool_json_set(item, "mimeType", json_object_new_string(mt)) < 0)
                        goto oom;
                *ret = item;
                return 0;
        }
        uri = malloc(strlen("file:///outputs/") + a->name_len * 3 + 1);
        res = json_object_new_object();
        if (!uri || !res)
                goto oom;
        u = (size_t) sprintf(uri, "file:///outputs/");
        for (size_t i = 0; i < a->name_len; i++) {
                unsigned char c = (unsigned char) a->name[i];
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c))
                        uri[u++] = (char) c;
                else
                        u += (size_t) sprintf(uri + u, "%%%02X", c);
        }
        uri[u] = 0;
        if (tool_json_set(res, "uri", json_object_new_string(uri)) < 0 ||
            tool_json_set(res, "mimeType", json_object_new_string(mt)) < 0 ||
            tool_json_set(res, "blob", json_object_new_string(b64)) < 0 ||
            tool_json_set(item, "type", json_object_new_string("resource")) < 0)
                goto oom;
        if (tool_json_set(item, "resource", res) < 0) {
                res = NULL; /* taken */
                goto oom;
        }
        *ret = item;
        return 0;
oom:
        json_object_put(res);
        json_object_put(item);
        return -ENOMEM;
}

/* A tools/call result: the model-visible text, isError for every outcome but ok; after
 * it, when attach, msg's artifacts (artifact_content()). With protocol versions that have
 * them, msg as structuredContent (tool_structured_content()), the typed result the
 * outputSchema describes. -ENOMEM: nothing sent. */
int mcp_send_tool_result_with(const Mcp *m, json_object *id, const char *text, bool is_error, const msgpack_object *msg,
                              bool attach) {
        json_object *r = json_object_new_object(), *content = json_object_new_array(), *item = json_object_new_object();
        json_object *structured = NULL;
        int k = -ENOMEM;

        if (m->structured && msg) {
                k = tool_structured_content(msg, &structured);
                if (k == -ENOMEM)
                        goto fail;
        }
        k = -ENOMEM;

        if (!r || !content || !item || tool_json_set(item, "type", json_object_new_string("text")) < 0 ||
            tool_json_set(item, "text", json_object_new_string(text)) < 0)
                goto fail;
        k = mcp_arr_push(content, item);
        item = NULL;
        for (size_t i = 0, n = msg && attach ? ci_artifact_count(msg) : 0; k >= 0 && i < n; i++) {
                CiArtifact a;
                json_object *c = NULL;
                if (ci_artifact_get(msg, i, &a) < 0 || !ci_artifact_name_safe(a.name, a.name_len))
                        continue;
                k = artifact_content(&a, &c);
                if (k == -EINVAL)
                        k = 0;
                else if (k >= 0)
                        k = mcp_arr_push(content, c);
        }
        if (k < 0)
                goto fail;
        k = tool_json_set(r, "content", content);
        content = NULL;
        if (k < 0 || (k = tool_json_set(r, "isError", json_object_new_boolean(is_error))) < 0)
                goto fail;
        if (structured) {
                k = tool_json_set(r, "structuredContent", structured);
                structured = NULL;
                if (k < 0)
                        goto fail;
        }
        return mcp_send_result(id, r);
fail:
        json_object_put(structured);
        json_object_put(item);
        json_object_put(content);
        json_object_put(r);
        return k;
}

/* An error the server decides itself (bad arguments, too many calls), rendered exactly as
 * the supervisor's error of that code would be. */
int mcp_send_local_error(const Mcp *m, json_object *id, const char *code, const char *message) {
        MpWriter w;
        msgpack_unpacked u;
        _cleanup_free_ char *text = NULL;
        int k;

        mp_writer_init(&w, 0);
        msgpack_pack_map(&w.pk, 4);
        mp_pack_kv_nil(&w.pk, "id");
        mp_pack_kv_str(&w.pk, "type", "error");
        mp_pack_kv_str(&w.pk, "code", code);
        mp_pack_kv_str(&w.pk, "message", message);
        msgpack_unpacked_init(&u);
        k = mp_writer_error(&w) == 0 && msgpack_unpack_next(&u, w.sb.data, w.sb.size, NULL) == MSGPACK_UNPACK_SUCCESS
                    ? 0
                    : -ENOMEM;
        if (k >= 0)
                k = ci_render_model_text(&u.data, &text);
        if (k >= 0)
                k = mcp_send_tool_result_with(m, id, text, true, &u.data, false);
        msgpack_unpacked_destroy(&u);
        mp_writer_done(&w);
        return k; /* -ENOMEM: mcp_answer_oom() */
}
