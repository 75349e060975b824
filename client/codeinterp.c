/* SPDX-License-Identifier: MIT */
/* codeinterp: the command-line client's entry: the global options, the usage text, and
 * hello, describe and status (with --ready, --prometheus and --openmetrics), their --help
 * and exec's; each other subcommand is a file of its own (exec.c, tool.c, mcp.c, replay.c)
 * over libcodeinterp, which parses its own options, --help included. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/mcp.h"
#include "client/replay.h"
#include "client/lib/status.h"
#include "client/tool.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

static const char *arg_socket = NULL;

/* The usage texts: each command's lines appear in codeinterp --help and in that command's
 * own --help, from these strings. */
#define EXEC_SYNOPSIS "exec [OPTIONS] (-c CODE... | FILE... | -)"
static const char exec_options[] =
        "      --summary TEXT       the user-visible one-line summary (default \"codeinterp exec\")\n"
        "      --json               print the result message as one JSON object, no progress\n"
        "      --source ID=FILE     register FILE's text as read_source ID and mount it\n"
        "      --attach ID=FILE[:MEDIA_TYPE]\n"
        "                           register FILE as attachment ID (original bytes + text)\n"
        "      --text ID=FILE       the canonical text for attachment ID (default: the file itself)\n"
        "      --model-text         print what the model sees: outcome, output, omissions (text)\n"
        "      --cards              print the user's progress cards on stderr (metadata only)\n"
        "      --save FILE          also write a replay record of the call (or chain) to FILE (JSON)\n"
        "      --save-artifacts DIR write the files the code left in /outputs into DIR (new files\n"
        "                           only, never over existing ones); each is named on stderr\n"
        "      --keep NAME          keep /outputs file NAME as source out-K-NAME of the invocation\n"
        "                           (K: the call's number; repeatable, at most 16), say so on stderr\n"
        "      --keep-all           keep every file the code left in /outputs (as --keep)\n";
static const char status_options[] =
        "      --ready              say whether it is ready: exit 0 ready, 14 not ready (the cause is\n"
        "                           printed: zygote_down, worker_start_failures, shutting_down), 12 no\n"
        "                           answer, 11 permission_denied\n"
        "      --prometheus         the metrics in Prometheus' text format 0.0.4 (node_exporter's\n"
        "                           textfile collector, promtool check metrics)\n"
        "      --openmetrics        the metrics in the OpenMetrics 1.0.0 text format (ends with # EOF)\n";
static const char exit_statuses[] =
        "Exit status: 0 ok, 1 python_exception, 2 usage error, 3 timeout, 4 cancelled,\n"
        "5 resource_limit, 6 invalid_input, 7 unavailable_source, 8 quota_exhausted,\n"
        "9 worker_error, 10 overloaded, 11 not_found or permission_denied, 12 no connection\n"
        "or a protocol failure, 13 ok but an artifact could not be saved (--save-artifacts),\n"
        "14 not ready (status --ready).\n";

/* hello, describe and status: their synopsis, what they print, their options. */
typedef struct SimpleCommand {
        const char *name;
        const char *synopsis;
        const char *what;
        const char *options;
} SimpleCommand;

static const SimpleCommand simple_commands[] = {
        { "hello", "hello", "print the supervisor's versions, policy and limits (JSON)", "" },
        { "describe", "describe", "print the describe reply: the tool definition (JSON)", "" },
        { "status", "status [--ready | --prometheus | --openmetrics]",
          "print the supervisor's counters and readiness (JSON)", status_options },
};

void cli_help(void) {
        printf("Usage: codeinterp [--socket PATH] COMMAND [OPTIONS]\n"
               "\n"
               "Talk to codeinterpd, which runs Python calculations in fresh sandboxed workers.\n"
               "Each command's --help shows its own usage.\n"
               "\n"
               "Commands:\n"
               "  " EXEC_SYNOPSIS "   run code and print what it printed and its value\n"
               "%s"
               "  tool [--format F]        print the code_interpreter tool definition; F: codeinterp\n"
               "                           (default), openai, openai-chat, anthropic, mcp, json-schema\n"
               "      --strict             openai, openai-chat: OpenAI's strict mode and its schema rules\n"
               "      --source ID=FILE     list read_source ID in the description (as mcp does)\n"
               "      --attach ID=FILE[:MEDIA_TYPE]\n"
               "                           list attachment ID in the description (as mcp does)\n"
               "  mcp [--source ID=FILE] [--attach ID=FILE[:MEDIA_TYPE]]\n"
               "                           serve the tool over the Model Context Protocol on stdio\n"
               "      --http ADDRESS:PORT  serve it over Streamable HTTP instead (a session per client)\n"
               "      --token-file PATH    with --http, required: the bearer token (owner-only file)\n"
               "      --allow-origin ORIGIN  with --http: an Origin header accepted (repeatable)\n"
               "      --max-sessions N     with --http: sessions at once (16)\n"
               "      --max-body BYTES     with --http: largest request body (1048576)\n"
               "      --idle-timeout SECS  with --http: end a session idle this long (1800)\n"
               "      --session-calls N    with --http: tools/call per session (1000)\n"
               "  replay FILE              run a call or chain saved with exec --save again and report\n"
               "                           whether the code, inputs, outcome, channels and kept files are\n"
               "                           identical (exit 0 identical, 1 not, 2 error)\n",
               exec_options);
        for (size_t i = 0; i < ELEMENTSOF(simple_commands); i++)
                printf("  %-24s %s\n%s", simple_commands[i].name, simple_commands[i].what, simple_commands[i].options);
        printf("\n"
               "  --socket PATH            the supervisor's socket (default $CODEINTERP_SOCKET, else\n"
               "                           " CI_DEFAULT_SOCKET ")\n"
               "  -h, --help               show this help\n"
               "\n"
               "%s",
               exit_statuses);
}

void cli_exec_help(void) {
        printf("Usage: codeinterp [--socket PATH] " EXEC_SYNOPSIS "\n"
               "\n"
               "Run code (-c CODE, the file FILE, or - for standard input) in a fresh sandboxed worker\n"
               "and print what it printed and its value. Options come before FILE.\n"
               "\n"
               "Several steps (-c repeated, or several FILEs, at most 16) make a chain: the calls run in\n"
               "order in one invocation, each with the same --keep options, each mounting the sources and\n"
               "the files the call before it kept (call 2 reads /inputs/out-1-NAME). \"codeinterp: call K\n"
               "of N\" on stderr precedes each (with --json: one JSON line per call). The chain stops at\n"
               "the first call that is not ok, with that call's exit status.\n"
               "\n"
               "  -c CODE                  the code to run (repeatable: one step each)\n"
               "%s"
               "  -h, --help               show this help\n"
               "\n"
               "%s",
               exec_options, exit_statuses);
}

static void simple_help(const SimpleCommand *cmd) {
        printf("Usage: codeinterp [--socket PATH] %s\n\n%c%s.\n\n%s  -h, --help               show this help\n",
               cmd->synopsis, toupper((unsigned char) cmd->what[0]), cmd->what + 1, cmd->options);
}

/* hello, describe, status: the reply as JSON (status: or what `how` asks for). */
typedef enum StatusHow {
        STATUS_JSON,
        STATUS_READY,
        STATUS_PROMETHEUS,
        STATUS_OPENMETRICS,
} StatusHow;

static int print_status(const CiMessage *m, StatusHow how) {
        char cause[STATUS_CAUSE_MAX], detail[STATUS_DETAIL_MAX];
        bool ready;
        int k;

        if (how == STATUS_READY) {
                k = status_readiness(&m->unpacked.data, &ready, cause, detail);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: the status reply says nothing of readiness (an older "
                                        "supervisor?)\n");
                        return EXIT_CONNECT;
                }
                if (ready)
                        puts("ready");
                else
                        printf("not ready (%s): %s\n", cause, detail);
                return fflush(stdout) == 0 ? (ready ? 0 : EXIT_NOT_READY) : EXIT_CONNECT;
        }
        k = status_metrics_write(stdout, &m->unpacked.data,
                                 how == STATUS_PROMETHEUS ? STATUS_FORMAT_PROMETHEUS : STATUS_FORMAT_OPENMETRICS);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot write the metrics: %s\n",
                        k == -EBADMSG ? "the status reply lacks a field they need (an older supervisor?)"
                                      : strerror(-k));
                return EXIT_CONNECT;
        }
        return 0;
}

static int cmd_simple(const char *what, StatusHow how) {
        CiClient *c;
        CiMessage m;
        int k = ci_connect(arg_socket, &c);

        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor at %s: %s\n", ci_socket_path(arg_socket),
                        strerror(-k));
                return EXIT_CONNECT;
        }
        k = !strcmp(what, "hello")      ? ci_hello(c, &m)
            : !strcmp(what, "describe") ? ci_describe(c, &m)
                                        : ci_status(c, &m);
        ci_close(c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: %s failed (the supervisor at %s): %s\n", what, ci_socket_path(arg_socket),
                        strerror(-k));
                return EXIT_CONNECT;
        }
        if (how != STATUS_JSON && strcmp(ci_message_type(&m) ?: "", "reply") == 0) {
                k = print_status(&m, how);
                ci_message_done(&m);
                return k;
        }
        ci_json_write(stdout, &m.unpacked.data);
        fputc('\n', stdout);
        /* An error reply is printed like a reply, named on stderr, and its code decides the
         * status (a refused peer: permission_denied, 11). */
        if (!strcmp(ci_message_type(&m) ?: "", "error")) {
                char code_buf[32], msg[512];
                cli_str_or(ci_get(&m.unpacked.data, "code"), code_buf, sizeof code_buf, "?");
                fprintf(stderr, "codeinterp: %s was refused (%s): %s\n", what, code_buf,
                        cli_str_or(ci_get(&m.unpacked.data, "message"), msg, sizeof msg, ""));
                k = ci_outcome_exit_status(code_buf);
        } else
                k = 0;
        ci_message_done(&m);
        return k;
}

/* hello, describe or status (argv[0]) with its arguments. */
static int simple_main(const SimpleCommand *cmd, int argc, char **argv) {
        static const NameValue hows[] = {
                { "--ready", STATUS_READY },
                { "--prometheus", STATUS_PROMETHEUS },
                { "--openmetrics", STATUS_OPENMETRICS },
        };

        if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
                simple_help(cmd);
                return 0;
        }
        if (argc == 2 && !strcmp(cmd->name, "status")) {
                int how = name_to_value(hows, ELEMENTSOF(hows), argv[1]);
                if (how >= 0)
                        return cmd_simple(cmd->name, (StatusHow) how);
        }
        if (argc > 1) {
                fprintf(stderr, "codeinterp: unexpected argument \"%s\" after %s; see %s --help\n", argv[1], cmd->name,
                        cmd->name);
                return EXIT_USAGE;
        }
        return cmd_simple(cmd->name, STATUS_JSON);
}

/* The commands with a file of their own; each parses its options, --help included. */
static const struct {
        const char *name;
        int (*run)(const char *socket_path, int argc, char **argv);
} commands[] = {
        { "exec", exec_main },
        { "tool", tool_main },
        { "mcp", mcp_main },
        { "replay", replay_main },
};

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int opt;

        while ((opt = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (opt) {
                case 's':
                        arg_socket = optarg;
                        break;
                case 'h':
                        cli_help();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                cli_help();
                return EXIT_USAGE;
        }
        const char *cmd = argv[optind];
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (!strcmp(cmd, commands[i].name))
                        return commands[i].run(arg_socket, argc - optind, argv + optind);
        for (size_t i = 0; i < ELEMENTSOF(simple_commands); i++)
                if (!strcmp(cmd, simple_commands[i].name))
                        return simple_main(&simple_commands[i], argc - optind, argv + optind);
        fprintf(stderr, "codeinterp: unknown command \"%s\"; see --help\n", cmd);
        return EXIT_USAGE;
}
