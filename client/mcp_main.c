/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp`'s command line: --help, the options of both transports, and the choice
 * between them (client/mcp_stdio.c, or client/mcp_http.c with --http). */
#include "client/mcp.h"
#include "client/mcp_http.h"
#include "client/mcp_internal.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/tool.h"
#include "common/util.h"

static void help(void) {
        printf("Usage: codeinterp [--socket PATH] mcp [--source ID=FILE ...] [--attach ID=FILE[:MEDIA_TYPE] ...]\n"
               "       codeinterp [--socket PATH] mcp --http ADDRESS:PORT --token-file PATH [OPTION...] [--source "
               "...]\n"
               "\n"
               "Serve the code_interpreter tool over the Model Context Protocol on stdin/stdout\n"
               "(JSON-RPC 2.0, one message per line). The session is one invocation: the sources\n"
               "are registered at start and offered to the model by id; maxCalls counts per session.\n"
               "An --attach file that is not UTF-8 gets a one-line text naming its original, as in exec.\n"
               "Each call's /outputs files are kept as sources of the session (out-CALL-NAME), listed\n"
               "in the tool's description for later calls to name.\n"
               "MCP protocol versions 2025-11-25 (the newest), 2025-06-18, 2025-03-26, 2024-11-05.\n"
               "\n"
               "With --http, serve the Streamable HTTP transport at http://ADDRESS:PORT" MCP_HTTP_PATH " instead:\n"
               "one session (one invocation) per Mcp-Session-Id. Put TLS in front (docs/deployment.md).\n"
               "      --http ADDRESS:PORT   listen there (IPv6 as [ADDR]:PORT; port 0 picks one, logged)\n"
               "      --token-file PATH     required: the bearer token clients send (Authorization: Bearer),\n"
               "                            at least %u bytes, the file readable by its owner only\n"
               "      --allow-origin ORIGIN accept requests with this Origin header (repeatable; default:\n"
               "                            a request with any Origin header gets 403)\n"
               "      --max-sessions N      sessions open at once (default %u)\n"
               "      --max-body BYTES      largest request body (default %u)\n"
               "      --idle-timeout SECS   end a session idle this long, closing its invocation (default %u)\n"
               "      --session-calls N     tools/call per session (default %u)\n",
               MCP_HTTP_TOKEN_MIN, MCP_HTTP_DEFAULT_SESSIONS, MCP_HTTP_DEFAULT_BODY, MCP_HTTP_DEFAULT_IDLE,
               MCP_HTTP_DEFAULT_SESSION_CALLS);
}

/* A number option in [min, max]. */
static int parse_count(const char *name, const char *arg, unsigned long long min, unsigned long long max,
                       unsigned long long *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-' || v < min || v > max) {
                fprintf(stderr, "codeinterp mcp: --%s wants a number from %llu to %llu, not \"%s\"\n", name, min, max,
                        arg);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

enum { OPT_HTTP = 0x100, OPT_TOKEN, OPT_ORIGIN, OPT_SESSIONS, OPT_BODY, OPT_IDLE, OPT_CALLS };

/* One of the --http options into http: 0, or -EINVAL with the message written. */
static int parse_http_option(int opt, const char *arg, McpHttpOptions *http) {
        unsigned long long v = 0;

        switch (opt) {
        case OPT_HTTP:
                http->address = arg;
                return 0;
        case OPT_TOKEN:
                http->token_file = arg;
                return 0;
        case OPT_ORIGIN:
                if (http->n_origins == MCP_HTTP_MAX_ORIGINS) {
                        fprintf(stderr, "codeinterp mcp: more than %u --allow-origin\n", MCP_HTTP_MAX_ORIGINS);
                        return -EINVAL;
                }
                http->origins[http->n_origins++] = arg;
                return 0;
        case OPT_SESSIONS:
                if (parse_count("max-sessions", arg, 1, MCP_HTTP_MAX_SESSIONS, &v) < 0)
                        return -EINVAL;
                http->max_sessions = (unsigned) v;
                return 0;
        case OPT_BODY:
                if (parse_count("max-body", arg, 1024, MCP_HTTP_MAX_BODY, &v) < 0)
                        return -EINVAL;
                http->max_body = (size_t) v;
                return 0;
        case OPT_IDLE:
                if (parse_count("idle-timeout", arg, 1, 7 * 24 * 3600, &v) < 0)
                        return -EINVAL;
                http->idle_timeout = (unsigned) v;
                return 0;
        default: /* OPT_CALLS */
                if (parse_count("session-calls", arg, 1, UINT32_MAX, &v) < 0)
                        return -EINVAL;
                http->session_calls = (unsigned) v;
                return 0;
        }
}

int mcp_main(const char *socket, int argc, char **argv) {
        static const struct option options[] = {
                { "source", required_argument, NULL, 's' },
                { "attach", required_argument, NULL, 'a' },
                { "http", required_argument, NULL, OPT_HTTP },
                { "token-file", required_argument, NULL, OPT_TOKEN },
                { "allow-origin", required_argument, NULL, OPT_ORIGIN },
                { "max-sessions", required_argument, NULL, OPT_SESSIONS },
                { "max-body", required_argument, NULL, OPT_BODY },
                { "idle-timeout", required_argument, NULL, OPT_IDLE },
                { "session-calls", required_argument, NULL, OPT_CALLS },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        ToolSource sources[TOOL_MAX_SOURCES];
        size_t n_sources = 0;
        McpHttpOptions http = {
                .max_sessions = MCP_HTTP_DEFAULT_SESSIONS,
                .max_body = MCP_HTTP_DEFAULT_BODY,
                .idle_timeout = MCP_HTTP_DEFAULT_IDLE,
                .session_calls = MCP_HTTP_DEFAULT_SESSION_CALLS,
        };
        bool http_option = false;
        int opt;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "+h", options, NULL)) >= 0) {
                http_option |= opt >= OPT_TOKEN;
                if (opt == 's' || opt == 'a') {
                        if (n_sources == TOOL_MAX_SOURCES ||
                            tool_parse_source(optarg, opt == 'a', &sources[n_sources]) < 0) {
                                fprintf(stderr, "codeinterp mcp: bad or too many --source/--attach \"%s\"\n", optarg);
                                return EXIT_USAGE;
                        }
                        n_sources++;
                } else if (opt >= OPT_HTTP && opt <= OPT_CALLS) {
                        if (parse_http_option(opt, optarg, &http) < 0)
                                return EXIT_USAGE;
                } else if (opt == 'h') {
                        help();
                        return 0;
                } else
                        return EXIT_USAGE;
        }
        if (optind != argc) {
                fprintf(stderr, "codeinterp mcp: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        signal(SIGPIPE, SIG_IGN);
        if (http.address)
                return mcp_http_serve(socket, sources, n_sources, &http);
        if (http_option) {
                fprintf(stderr, "codeinterp mcp: --token-file, --allow-origin and the limits go with --http\n");
                return EXIT_USAGE;
        }
        return mcp_stdio_serve(socket, sources, n_sources);
}
