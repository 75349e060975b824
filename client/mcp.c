/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp`: a Model Context Protocol server offering the code_interpreter tool,
 * the part both transports share. One MCP session is one codeinterp invocation: sources
 * given on the command line are registered in it at start, and maxCalls counts per
 * session. This file reads and decides (a JSON-RPC message, a supervisor message); what is
 * written back is built in client/mcp_output.c; the transports are client/mcp_stdio.c (one
 * session on stdin/stdout) and client/mcp_http.c (Streamable HTTP, a session per
 * Mcp-Session-Id); its command line is client/mcp_main.c. docs/client.md#codeinterp-mcp. */
#include "client/mcp.h"
#include "client/mcp_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/tool.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

/* Newest first: an unknown version from the client is answered with the first. */
static const char *const protocol_versions[] = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" };

static void tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

static int read_file(const char *path, char **ret, size_t *ret_len) {
        return read_file_all(path, MCP_MAX_FILE, ret, ret_len);
}

/* ---- calls ---- */

static void call_free(McpCall *call) {
        json_object_put(call->rpc_id);
        json_object_put(call->progress_token);
        *call = (McpCall){};
}

static McpCall *call_by_request(Mcp *m, uint64_t request_id) {
        for (size_t i = 0; i < MCP_MAX_CALLS; i++)
                if (m->calls[i].used && m->calls[i].request_id == request_id)
                        return &m->calls[i];
        return NULL;
}

static int call_send_cancel(Mcp *m, McpCall *call) {
        uint64_t id;
        int k;

        if (!call->cancelled || call->cancel_sent || !call->has_call_id)
                return 0;
        k = ci_cancel(m->client, call->call_id, &id);
        if (k >= 0)
                call->cancel_sent = true;
        return k;
}

static int on_progress(Mcp *m, McpCall *call, const msgpack_object *msg) {
        const msgpack_object *cid = ci_get(msg, "callId");
        _cleanup_free_ char *card = NULL;
        json_object *n, *params;
        int k;

        if (mp_is_uint(cid) && !call->has_call_id) {
                call->call_id = cid->via.u64;
                call->has_call_id = true;
                if ((k = call_send_cancel(m, call)) < 0)
                        return k;
        }
        if (!call->progress_token || call->cancelled)
                return 0;
        if (ci_render_progress_card(msg, &card) < 0)
                return 0; /* progress is best effort */
        n = json_object_new_object();
        params = json_object_new_object();
        if (!n || !params || tool_json_set(n, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            tool_json_set(n, "method", json_object_new_string("notifications/progress")) < 0 ||
            tool_json_set(params, "progressToken", json_object_get(call->progress_token)) < 0 ||
            tool_json_set(params, "progress", json_object_new_uint64(call->progress + 1)) < 0 ||
            tool_json_set(params, "message", json_object_new_string(card)) < 0) {
                json_object_put(n);
                json_object_put(params);
                return 0;
        }
        k = tool_json_set(n, "params", params);
        if (k < 0) {
                json_object_put(n);
                return 0;
        }
        k = mcp_send_json(n);
        if (k >= 0)
                call->progress++;
        return k == -ENOMEM ? 0 : k; /* progress is best effort */
}

/* The tool as offered now: the describe reply's, with the offered sources and the kept
 * files listed at the end of its description. */
static int rebuild_tool(Mcp *m) {
        size_t n = m->n_offered + m->n_kept, len;
        ToolSource *all = calloc(n + 1, sizeof *all);
        _cleanup_free_ char *extra = NULL;
        json_object *tool = NULL;
        FILE *f;
        int k;

        if (!all)
                return -ENOMEM;
        if (m->n_offered)
                memcpy(all, m->offered, m->n_offered * sizeof *all);
        if (m->n_kept)
                memcpy(all + m->n_offered, m->kept, m->n_kept * sizeof *all);
        f = open_memstream(&extra, &len);
        if (f)
                tool_write_sources(f, all, n);
        free(all);
        if (!f || fclose(f) != 0)
                return -ENOMEM;
        k = tool_export(ci_get(&m->describe.unpacked.data, "tool"), TOOL_FORMAT_MCP, 0, extra, &tool);
        if (k < 0)
                return k;
        json_object_put(m->tool);
        m->tool = tool;
        return 0;
}

/* The files a result says were kept become sources the tool lists; when there are new
 * ones, the client is told the tool changed (notifications/tools/list_changed). */
static int note_kept(Mcp *m, const msgpack_object *msg) {
        size_t n = ci_kept_count(msg), added = 0;
        int k;

        for (size_t i = 0; i < n; i++) {
                CiKept kept;
                ToolSource *more;
                if (ci_kept_get(msg, i, &kept) < 0 || kept.refused || !kept.source_id)
                        continue;
                more = realloc(m->kept, (m->n_kept + 1) * sizeof *more);
                if (!more)
                        return -ENOMEM;
                m->kept = more;
                m->kept[m->n_kept] = (ToolSource){ .output = true, .bytes = kept.bytes };
                if (!(m->kept[m->n_kept].id = strndup(kept.source_id, kept.source_id_len)))
                        return -ENOMEM;
                m->n_kept++, added++;
        }
        if (added == 0)
                return 0;
        if ((k = rebuild_tool(m)) < 0)
                return k;
        json_object *note = json_object_new_object();
        if (!note || tool_json_set(note, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            tool_json_set(note, "method", json_object_new_string("notifications/tools/list_changed")) < 0) {
                json_object_put(note);
                return -ENOMEM;
        }
        return mcp_send_json(note); /* takes note */
}

static int on_final(Mcp *m, McpCall *call, const msgpack_object *msg) {
        _cleanup_free_ char *text = NULL;
        int k = 0;

        /* A cancelled request gets no response (MCP: cancellation). */
        if (!call->cancelled) {
                bool is_error = !mp_str_eq(ci_get(msg, "type"), "result") || !mp_str_eq(ci_get(msg, "outcome"), "ok");
                k = ci_render_model_text(msg, &text);
                if (k < 0 && k != -ENOMEM)
                        k = mcp_send_error(call->rpc_id, RPC_INTERNAL_ERROR, "cannot render the result");
                else if (k >= 0)
                        k = mcp_send_tool_result_with(m, call->rpc_id, text, is_error, msg, true);
                if (k == -ENOMEM && text && ci_artifact_count(msg) > 0) {
                        /* No room for the artifacts' data: the text (which lists them, with
                         * sizes and digests) and why they are not attached. */
                        _cleanup_free_ char *t = NULL;
                        if (asprintf(&t, "%s\n(codeinterp mcp: the artifacts are not attached: out of memory)", text) >=
                            0)
                                k = mcp_send_tool_result_with(m, call->rpc_id, t, is_error, msg, false);
                        else
                                t = NULL;
                }
                k = mcp_answer_oom(call->rpc_id, k);
        }
        call_free(call);
        if (k >= 0 && mp_str_eq(ci_get(msg, "type"), "result")) {
                int r = note_kept(m, msg);
                if (r == -ENOMEM) /* the files are kept all the same; the list is not updated */
                        fprintf(stderr, "codeinterp mcp: out of memory: the tool's source list was not updated\n");
                else if (r < 0)
                        k = r;
        }
        return k;
}

/* A message from the supervisor did not fit in memory (ci_recv() read and dropped it):
 * which call it was for is unknown, so every running call is answered with an error
 * now (its result may be the one lost) and cancelled. The session goes on. */
static int lost_message(Mcp *m) {
        int k = 0;

        fprintf(stderr, "codeinterp mcp: a message from the supervisor did not fit in memory: "
                        "the calls running are answered with an error\n");
        for (size_t i = 0; i < MCP_MAX_CALLS; i++) {
                McpCall *call = &m->calls[i];
                uint64_t id;
                if (!call->used)
                        continue;
                if (!call->cancelled && k >= 0)
                        k = mcp_answer_oom(call->rpc_id,
                                           mcp_send_error(call->rpc_id, RPC_INTERNAL_ERROR,
                                                          "out of memory: the call's result could not be received"));
                if (call->has_call_id && !call->cancel_sent)
                        (void) ci_cancel(m->client, call->call_id, &id); /* a lost connection shows at the next read */
                call_free(call);
        }
        return k;
}

/* One message from the supervisor. */
int mcp_on_supervisor(Mcp *m) {
        CiMessage msg;
        int k = ci_recv(m->client, &msg);

        if (k == -ENOMEM)
                return lost_message(m);
        if (k < 0)
                return k;
        const msgpack_object *d = &msg.unpacked.data, *id = ci_get(d, "id");
        McpCall *call = id && mp_is_uint(id) ? call_by_request(m, id->via.u64) : NULL;
        if (call && mp_str_eq(ci_get(d, "type"), "progress"))
                k = on_progress(m, call, d);
        else if (call && (mp_str_eq(ci_get(d, "type"), "result") || mp_str_eq(ci_get(d, "type"), "error")))
                k = on_final(m, call, d);
        else if (id && id->type == MSGPACK_OBJECT_NIL) {
                const msgpack_object *msg_o = ci_get(d, "message");
                fprintf(stderr, "codeinterp mcp: the supervisor reports: %.*s\n",
                        mp_is_str(msg_o) ? (int) MIN(msg_o->via.str.size, 512u) : 0,
                        mp_is_str(msg_o) ? msg_o->via.str.ptr : "");
        }
        /* Replies to cancel requests need nothing. */
        ci_message_done(&msg);
        return k;
}

/* ---- requests ---- */

static json_object *get(json_object *obj, const char *key) {
        json_object *v = NULL;
        return obj && json_object_is_type(obj, json_type_object) && json_object_object_get_ex(obj, key, &v) ? v : NULL;
}

static bool is_string(json_object *o) {
        return o && json_object_is_type(o, json_type_string);
}

/* The guidance is in the tool's description (where every client shows it to the model),
 * so the instructions only point there. */
#define MCP_INSTRUCTIONS                                                                                               \
        "This server offers one tool, code_interpreter: Python run in a new sandbox for each call. Its "               \
        "description says when and how to use it, its bounds, and the sources this session offers."

/* The version is chosen once per session: the requested one when supported, else the
 * newest (MCP lifecycle, version negotiation). A second initialize is refused. */
static int handle_initialize(Mcp *m, json_object *id, json_object *params) {
        json_object *v = get(params, "protocolVersion");
        const char *version = protocol_versions[0];
        json_object *r, *caps, *tools, *info;
        int k;

        if (m->version)
                return mcp_send_error(id, RPC_INVALID_REQUEST, "invalid request: the session is already initialized");
        r = json_object_new_object();
        caps = json_object_new_object();
        tools = json_object_new_object();
        info = json_object_new_object();
        for (size_t i = 0; is_string(v) && i < ELEMENTSOF(protocol_versions); i++)
                if (!strcmp(json_object_get_string(v), protocol_versions[i]))
                        version = protocol_versions[i];
        if (!r || !caps || !tools || !info || tool_json_set(tools, "listChanged", json_object_new_boolean(true)) < 0 ||
            tool_json_set(info, "name", json_object_new_string("codeinterp")) < 0 ||
            tool_json_set(info, "version", json_object_new_string(CODEINTERP_VERSION)) < 0)
                goto fail;
        /* tool_json_set() takes its value, also when it fails. */
        k = tool_json_set(caps, "tools", tools);
        tools = NULL;
        if (k < 0 || tool_json_set(r, "protocolVersion", json_object_new_string(version)) < 0)
                goto fail;
        k = tool_json_set(r, "capabilities", caps);
        caps = NULL;
        if (k < 0)
                goto fail;
        k = tool_json_set(r, "serverInfo", info);
        info = NULL;
        if (k < 0 || tool_json_set(r, "instructions", json_object_new_string(MCP_INSTRUCTIONS)) < 0)
                goto fail;
        k = mcp_send_result(id, r);
        if (k >= 0) {
                m->version = version;
                m->structured = strcmp(version, MCP_VERSION_STRUCTURED) >= 0;
        }
        return k;
fail:
        json_object_put(r);
        json_object_put(caps);
        json_object_put(tools);
        json_object_put(info);
        return -ENOMEM;
}

/* The tool as the session's protocol version has it: without title and outputSchema
 * before 2025-06-18, without annotations before 2025-03-26. */
static int handle_tools_list(Mcp *m, json_object *id) {
        json_object *r = json_object_new_object(), *list = json_object_new_array(), *tool = NULL;

        if (m->structured)
                tool = json_object_get(m->tool);
        else if (json_object_deep_copy(m->tool, &tool, NULL) == 0) {
                json_object_object_del(tool, "title");
                json_object_object_del(tool, "outputSchema");
                if (strcmp(m->version, MCP_VERSION_ANNOTATIONS) < 0)
                        json_object_object_del(tool, "annotations");
        } else
                tool = NULL;
        if (!r || !list || mcp_arr_push(list, tool) < 0) {
                json_object_put(r);
                json_object_put(list);
                return -ENOMEM;
        }
        if (tool_json_set(r, "tools", list) < 0) {
                json_object_put(r);
                return -ENOMEM;
        }
        return mcp_send_result(id, r);
}

/* A string argument without NUL bytes (which the protocol's strings cannot carry here). */
static bool plain_string(json_object *o) {
        return is_string(o) && strlen(json_object_get_string(o)) == (size_t) json_object_get_string_len(o);
}

static int handle_tools_call(Mcp *m, json_object *id, json_object *params) {
        json_object *name = get(params, "name"), *args = get(params, "arguments");
        json_object *summary, *code, *ids, *token;
        const char *source_ids[MCP_MAX_SOURCE_IDS];
        size_t n_ids = 0;
        McpCall *call = NULL;
        int k;

        if (!params || !json_object_is_type(params, json_type_object))
                return mcp_send_error(id, RPC_INVALID_PARAMS, "tools/call needs params");
        if (!is_string(name) || strcmp(json_object_get_string(name), m->tool_name) != 0)
                return mcp_send_error(id, RPC_INVALID_PARAMS, "unknown tool (this server offers code_interpreter)");
        if (args && !json_object_is_type(args, json_type_object))
                return mcp_send_error(id, RPC_INVALID_PARAMS, "arguments must be an object");

        /* The argument values: checked here for their JSON types only; codeinterpd checks
         * the bounds and answers invalid_input, rendered like any other outcome. */
        if (args) {
                json_object_object_foreach(args, key, val) {
                        (void) val;
                        if (strcmp(key, "summary") != 0 && strcmp(key, "code") != 0 && strcmp(key, "sourceIds") != 0)
                                return mcp_send_local_error(
                                        m, id, "invalid_input",
                                        "unknown argument (the tool takes summary, code, sourceIds)");
                }
        }
        summary = get(args, "summary");
        code = get(args, "code");
        ids = get(args, "sourceIds");
        if (!plain_string(summary))
                return mcp_send_local_error(m, id, "invalid_input", "argument \"summary\" must be a string");
        if (!is_string(code))
                return mcp_send_local_error(m, id, "invalid_input", "argument \"code\" must be a string");
        if (ids && !json_object_is_type(ids, json_type_array))
                return mcp_send_local_error(m, id, "invalid_input",
                                            "argument \"sourceIds\" must be an array of strings");
        if (ids && json_object_array_length(ids) > MCP_MAX_SOURCE_IDS)
                return mcp_send_local_error(m, id, "invalid_input", "too many sourceIds");
        for (size_t i = 0; ids && i < json_object_array_length(ids); i++) {
                json_object *s = json_object_array_get_idx(ids, i);
                if (!plain_string(s))
                        return mcp_send_local_error(m, id, "invalid_input",
                                                    "argument \"sourceIds\" must be an array of strings");
                source_ids[n_ids++] = json_object_get_string(s);
        }
        for (size_t i = 0; i < MCP_MAX_CALLS && !call; i++)
                if (!m->calls[i].used)
                        call = &m->calls[i];
        if (!call)
                return mcp_send_local_error(m, id, "overloaded", "too many calls running in this session");

        CiExecute x = {
                .summary = json_object_get_string(summary),
                .code = json_object_get_string(code),
                .code_len = (size_t) json_object_get_string_len(code),
                .invocation = m->invocation,
                .source_ids = source_ids,
                .n_source_ids = n_ids,
        };
        /* Every file a call leaves in /outputs is kept as a source of the session (its
         * invocation), for later calls to name (docs/client.md, "Kept outputs"). */
        static const CiKeep keep_all = { .all = true };
        k = ci_execute_keep_send(m->client, &x, &keep_all, &call->request_id);
        if (k == -ENOMEM)
                return k; /* nothing was sent: mcp_answer_oom() */
        if (k < 0)
                return k; /* the supervisor is gone: the caller ends the session */
        call->used = true;
        call->rpc_id = json_object_get(id);
        token = get(get(params, "_meta"), "progressToken");
        if (token && (is_string(token) || json_object_is_type(token, json_type_int)))
                call->progress_token = json_object_get(token);
        return 0;
}

static void handle_cancelled(Mcp *m, json_object *params) {
        json_object *rid = get(params, "requestId");

        if (!rid)
                return;
        for (size_t i = 0; i < MCP_MAX_CALLS; i++) {
                McpCall *call = &m->calls[i];
                if (call->used && json_object_equal(call->rpc_id, rid)) {
                        call->cancelled = true;
                        if (call_send_cancel(m, call) < 0)
                                fprintf(stderr, "codeinterp mcp: cannot send cancel to the supervisor\n");
                }
        }
}

/* One JSON-RPC message (a line on stdio, a POST's body over HTTP). Returns < 0 only when
 * the session must end. */
int mcp_handle_message(Mcp *m, const char *line, size_t len) {
        _cleanup_(tokener_freep) json_tokener *tok = NULL;
        json_object *msg, *id, *method, *params;
        size_t end;
        int k = 0;

        /* json-c (0.16) drops the part of a string it cannot store and parses on, so
         * under memory pressure a code argument could come out shortened with no error.
         * A line is parsed only when room for several times its size exists (the
         * tokener's buffer doubles, and each value is copied out of it). */
        void *room = malloc(len * 4 + (64u << 10));
        if (!room || !(tok = json_tokener_new_ex(MCP_JSON_DEPTH))) {
                free(room);
                return mcp_answer_oom(NULL, -ENOMEM); /* the id is unknown: null */
        }
        free(room);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        msg = json_tokener_parse_ex(tok, line, (int) len);
        end = json_tokener_get_parse_end(tok);
        while (msg && end < len && strchr(" \t\r", line[end]))
                end++;
        if (!msg || json_tokener_get_error(tok) != json_tokener_success || end != len) {
                json_object_put(msg);
                return mcp_answer_oom(NULL, mcp_send_error(NULL, RPC_PARSE_ERROR, "parse error: not one JSON value"));
        }
        id = get(msg, "id");
        method = get(msg, "method");
        params = get(msg, "params");
        if (!json_object_is_type(msg, json_type_object) || !is_string(get(msg, "jsonrpc")) ||
            strcmp(json_object_get_string(get(msg, "jsonrpc")), "2.0") != 0 || !is_string(method) ||
            (id && !is_string(id) && !json_object_is_type(id, json_type_int))) {
                /* Responses from the client (we send no requests) are ignored. */
                if (!(json_object_is_type(msg, json_type_object) && (get(msg, "result") || get(msg, "error")))) {
                        id = id && (is_string(id) || json_object_is_type(id, json_type_int)) ? id : NULL;
                        k = mcp_answer_oom(id, mcp_send_error(id, RPC_INVALID_REQUEST, "invalid request"));
                }
                json_object_put(msg);
                return k;
        }
        const char *name = json_object_get_string(method);
        if (!json_object_object_get_ex(msg, "id", NULL)) { /* a notification: never answered */
                if (!strcmp(name, "notifications/cancelled"))
                        handle_cancelled(m, params);
        } else if (!id) /* MCP: unlike JSON-RPC, a request's id MUST NOT be null */
                k = mcp_send_error(NULL, RPC_INVALID_REQUEST, "invalid request: the id must be a string or an integer");
        else if (!m->version && strcmp(name, "initialize") != 0 && strcmp(name, "ping") != 0)
                /* MCP lifecycle: nothing but pings before initialize (the specification
                 * names no code for it: the request is invalid in this state). */
                k = mcp_send_error(id, RPC_INVALID_REQUEST, "invalid request: the session is not initialized");
        else if (!strcmp(name, "initialize"))
                k = handle_initialize(m, id, params);
        else if (!strcmp(name, "ping"))
                k = mcp_send_result(id, json_object_new_object());
        else if (!strcmp(name, "tools/list"))
                k = handle_tools_list(m, id);
        else if (!strcmp(name, "tools/call"))
                k = handle_tools_call(m, id, params);
        else
                k = mcp_send_error(id, RPC_METHOD_NOT_FOUND, "method not found");
        if (json_object_object_get_ex(msg, "id", NULL))
                k = mcp_answer_oom(id, k);
        json_object_put(msg);
        return k;
}

/* ---- start ---- */

/* Register the sources in the session's invocation (their sizes noted for the tool's list). */
static int register_sources(Mcp *m, ToolSource *sources, size_t n) {
        for (size_t i = 0; i < n; i++) {
                ToolSource *src = &sources[i];
                _cleanup_free_ char *data = NULL, *text = NULL;
                size_t len = 0, text_len = 0;
                CiMessage rep;
                int k = read_file(src->file, &data, &len);

                if (k < 0) {
                        fprintf(stderr, "codeinterp mcp: cannot read \"%s\": %s\n", src->file, strerror(-k));
                        return -EINVAL;
                }
                /* An attachment that is not UTF-8 (an image, a spreadsheet) gets the one-line
                 * canonical text exec gives it; its bytes are the original. */
                if (src->attachment &&
                    (k = ci_attachment_text(src->id, data, len, src->media_type, &text, &text_len)) < 0)
                        return k;
                const char *base = strrchr(src->file, '/');
                CiSource s = {
                        .id = src->id,
                        .attachment = src->attachment,
                        .text = text ?: data,
                        .text_len = text ? text_len : len,
                        .original = data,
                        .original_len = len,
                        .media_type = src->media_type,
                        .file_name = base ? base + 1 : src->file,
                };
                if ((k = ci_source_put(m->client, m->invocation, &s, &rep)) < 0)
                        return k;
                if (!mp_str_eq(ci_get(&rep.unpacked.data, "type"), "reply")) {
                        const msgpack_object *msg = ci_get(&rep.unpacked.data, "message");
                        fprintf(stderr, "codeinterp mcp: source %s was refused: %.*s\n", src->id,
                                mp_is_str(msg) ? (int) MIN(msg->via.str.size, 512u) : 0,
                                mp_is_str(msg) ? msg->via.str.ptr : "");
                        ci_message_done(&rep);
                        return -EINVAL;
                }
                ci_message_done(&rep);
                src->bytes = len;
        }
        return 0;
}

/* The supervisor answered a request at start with an error (a refused peer gets
 * permission_denied): say so, naming the code, and return the command's exit status for
 * it. */
static int refused(const char *what, const CiMessage *err) {
        const msgpack_object *code = ci_get(&err->unpacked.data, "code"), *msg = ci_get(&err->unpacked.data, "message");
        char name[32] = "?";

        if (mp_is_str(code))
                snprintf(name, sizeof name, "%.*s", (int) code->via.str.size, code->via.str.ptr);
        fprintf(stderr, "codeinterp mcp: %s was refused (%s): %.*s\n", what, name,
                mp_is_str(msg) ? (int) MIN(msg->via.str.size, 512u) : 0, mp_is_str(msg) ? msg->via.str.ptr : "");
        return ci_outcome_exit_status(name);
}

/* Connect, describe, open the session's invocation and register its sources. Returns 0,
 * or the exit status (> 0) after saying why on stderr. */
int mcp_session_start(Mcp *m, const char *socket, ToolSource *sources, size_t n) {
        CiMessage d = {}, err = {};
        int k;

        if ((k = ci_connect(socket, &m->client)) < 0) {
                fprintf(stderr, "codeinterp mcp: cannot connect to the supervisor: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        if ((k = ci_describe(m->client, &d)) < 0) {
                fprintf(stderr, "codeinterp mcp: describe failed: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        if (!mp_str_eq(ci_get(&d.unpacked.data, "type"), "reply")) {
                k = mp_str_eq(ci_get(&d.unpacked.data, "type"), "error") ? refused("describe", &d) : EXIT_CONNECT;
                if (k == EXIT_CONNECT)
                        fprintf(stderr, "codeinterp mcp: describe failed: an unexpected answer\n");
                ci_message_done(&d);
                return k;
        }
        if ((k = ci_invocation_open(m->client, m->invocation, &err)) < 0) {
                if (err.buf)
                        k = refused("invocation.open", &err);
                else {
                        fprintf(stderr, "codeinterp mcp: invocation.open failed: %s\n", strerror(-k));
                        k = EXIT_CONNECT;
                }
                ci_message_done(&err);
                ci_message_done(&d);
                return k;
        }
        m->describe = d; /* the session's from now on (mcp_session_end()) */
        m->offered = sources;
        m->n_offered = n;
        k = register_sources(m, sources, n);
        if (k >= 0 && !(m->tool_name = mp_strdup(ci_get(ci_get(&d.unpacked.data, "tool"), "name"))))
                k = -EPROTO;
        if (k >= 0)
                k = rebuild_tool(m);
        if (k == -EINVAL)
                return EXIT_USAGE; /* a source that cannot be read or was refused: said already */
        if (k < 0) {
                fprintf(stderr, "codeinterp mcp: cannot start the session: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        return 0;
}

/* End the session: running calls get an answer the client can match when the supervisor
 * was lost (lost), and are forgotten; the connection's close ends the invocation. */
void mcp_session_end(Mcp *m, bool lost) {
        for (size_t i = 0; i < MCP_MAX_CALLS; i++)
                if (m->calls[i].used) {
                        if (lost && !m->calls[i].cancelled)
                                mcp_send_error(m->calls[i].rpc_id, RPC_INTERNAL_ERROR, "lost the supervisor");
                        call_free(&m->calls[i]);
                }
        json_object_put(m->tool);
        ci_message_done(&m->describe);
        for (size_t i = 0; i < m->n_kept; i++)
                free(m->kept[i].id);
        free(m->kept);
        free(m->tool_name);
        free(m->in);
        ci_close(m->client);
        *m = (Mcp){};
}

/* Whether a tools/call with this JSON-RPC id is running and will be answered. */
bool mcp_call_pending(const Mcp *m, json_object *rpc_id) {
        for (size_t i = 0; i < MCP_MAX_CALLS; i++)
                if (m->calls[i].used && !m->calls[i].cancelled && json_object_equal(m->calls[i].rpc_id, rpc_id))
                        return true;
        return false;
}

bool mcp_version_supported(const char *version) {
        for (size_t i = 0; i < ELEMENTSOF(protocol_versions); i++)
                if (!strcmp(version, protocol_versions[i]))
                        return true;
        return false;
}
