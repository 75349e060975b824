/* SPDX-License-Identifier: MIT */
/* What the files of `codeinterp mcp` share: the session (Mcp) and its calls (McpCall), the
 * server's bounds and JSON-RPC codes, and the writing side (client/mcp_output.c). */
#pragma once

#include <json-c/json.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "client/lib/libcodeinterp.h"
#include "client/tool.h"

#define EXIT_USAGE 2
#define EXIT_CONNECT 12
#define MCP_MAX_LINE (32u << 20)  /* one JSON-RPC message; beyond it: parse error, line skipped */
#define MCP_MAX_FILE (256u << 20) /* a --source/--attach file */
#define MCP_MAX_CALLS 8           /* tools/call running at once */
#define MCP_MAX_SOURCE_IDS 64     /* sourceIds passed on (codeinterpd itself allows 4) */
#define MCP_JSON_DEPTH 64

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602
#define RPC_INTERNAL_ERROR -32603

/* The first versions with tool annotations, and with titles and structured results. */
#define MCP_VERSION_ANNOTATIONS "2025-03-26"
#define MCP_VERSION_STRUCTURED "2025-06-18"

typedef struct McpCall {
        bool used;
        json_object *rpc_id;         /* the tools/call request's id (a reference we own) */
        json_object *progress_token; /* NULL: the client asked for no progress */
        uint64_t request_id;         /* the execute request's id on the supervisor connection */
        uint64_t call_id;
        bool has_call_id;
        bool cancelled; /* notifications/cancelled arrived: cancel, and send no response */
        bool cancel_sent;
        uint64_t progress;
} McpCall;

typedef struct Mcp {
        CiClient *client;
        char invocation[CI_INVOCATION_ID_MAX + 1];
        json_object *tool;   /* the tools/list entry, for the newest protocol version */
        CiMessage describe;  /* the describe reply the tool is made from (kept: rebuilt as files are kept) */
        ToolSource *offered; /* the --source/--attach sources (borrowed) */
        size_t n_offered;
        ToolSource *kept; /* the files the session's calls kept (owned ids), in order */
        size_t n_kept;
        char *tool_name;
        const char *version; /* the session's protocol version; NULL until initialize */
        bool structured;     /* the version has titles, outputSchema and structuredContent */
        McpCall calls[MCP_MAX_CALLS];
        char *in;
        size_t in_len, in_cap;
        enum { SKIP_NONE, SKIP_TOO_LONG, SKIP_NO_MEMORY } in_skipping; /* inside a line not kept: why */
} Mcp;

/* Where the answers go when not to stdout: the HTTP transport routes each to the request
 * it answers. send() gets every message (borrowed: a response has an "id" member, a
 * notification none); send_oom() the out-of-memory error for id, built without allocating
 * if it can be. Both return 0, or < 0 when the session must end. */
typedef struct McpSink {
        int (*send)(void *userdata, json_object *msg);
        int (*send_oom)(void *userdata, json_object *id);
        void *userdata;
} McpSink;

/* client/mcp.c: the transport-independent session. */
int mcp_session_start(Mcp *m, const char *socket, ToolSource *sources, size_t n);
void mcp_session_end(Mcp *m, bool lost);
int mcp_handle_message(Mcp *m, const char *text, size_t len);
int mcp_on_supervisor(Mcp *m);
bool mcp_call_pending(const Mcp *m, json_object *rpc_id);
bool mcp_version_supported(const char *version);

/* client/mcp_stdio.c: one session on stdin and stdout. */
int mcp_stdio_serve(const char *socket, ToolSource *sources, size_t n);

/* client/mcp_output.c: JSON-RPC answers on stdout (or the sink) and tool results as MCP content. */
void mcp_output_set_sink(const McpSink *s);
void mcp_write_json(FILE *f, json_object *o);
int mcp_arr_push(json_object *a, json_object *v);
int mcp_send_json(json_object *msg);
int mcp_send_rpc(json_object *id, const char *key, json_object *v);
int mcp_send_result(json_object *id, json_object *result);
int mcp_send_error(json_object *id, int code, const char *message);
int mcp_send_oom(json_object *id);
int mcp_answer_oom(json_object *id, int k);
int mcp_send_tool_result_with(const Mcp *m, json_object *id, const char *text, bool is_error, const msgpack_object *msg,
                              bool attach);
int mcp_send_local_error(const Mcp *m, json_object *id, const char *code, const char *message);
