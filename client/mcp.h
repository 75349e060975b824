/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp`: the code_interpreter tool over the Model Context Protocol on stdio, or
 * over Streamable HTTP with --http (docs/client.md#codeinterp-mcp). */
#pragma once

/* argv[0] is "mcp". Returns the exit status: 0 at the end of input (with --http: on
 * SIGTERM or SIGINT), 2 for a usage error or a source that cannot be read or is refused,
 * 12 when the supervisor cannot be reached. */
int mcp_main(const char *socket, int argc, char **argv);
