/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp --http`: the MCP Streamable HTTP transport (docs/client.md#codeinterp-mcp---http). */
#pragma once

#include <stddef.h>

#include "client/tool.h"

#define MCP_HTTP_PATH "/mcp" /* the one endpoint */
#define MCP_HTTP_MAX_ORIGINS 16u
#define MCP_HTTP_TOKEN_MIN 32u   /* bytes of the bearer token, at least */
#define MCP_HTTP_TOKEN_MAX 4096u /* and at most (the token file's size too) */
#define MCP_HTTP_DEFAULT_SESSIONS 16u
#define MCP_HTTP_MAX_SESSIONS 1024u /* --max-sessions, at most */
#define MCP_HTTP_DEFAULT_BODY (1u << 20)
#define MCP_HTTP_MAX_BODY (32u << 20) /* --max-body, at most: MCP_MAX_LINE */
#define MCP_HTTP_DEFAULT_IDLE 1800u   /* seconds */
#define MCP_HTTP_DEFAULT_SESSION_CALLS 1000u

typedef struct McpHttpOptions {
        const char *address;    /* ADDRESS:PORT, [IPV6]:PORT; port 0 picks one (logged) */
        const char *token_file; /* required */
        unsigned max_sessions;
        size_t max_body;
        unsigned idle_timeout; /* seconds without a request or a running call */
        unsigned session_calls;
        const char *origins[MCP_HTTP_MAX_ORIGINS];
        size_t n_origins;
} McpHttpOptions;

/* Serve until SIGTERM or SIGINT: 0 then; 2 for a bad address, token file or source, 12
 * when the supervisor cannot be reached at start. */
int mcp_http_serve(const char *socket, ToolSource *sources, size_t n, const McpHttpOptions *o);

/* The bearer token: the file's first line, refused (with a message) when others may read
 * the file, it is not one line of printable ASCII, or it is shorter than
 * MCP_HTTP_TOKEN_MIN. 0 or -EINVAL. */
int mcp_http_read_token(const char *path, char token[static MCP_HTTP_TOKEN_MAX + 1], size_t *ret_len);
/* Bind ADDRESS:PORT ([ADDRESS]:PORT for IPv6) and listen, logging where: the fd, or
 * -EINVAL with a message. */
int mcp_http_listen(const char *address);
