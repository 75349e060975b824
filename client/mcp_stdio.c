/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp` on stdio: one session, JSON-RPC 2.0 one message per line on stdin and
 * stdout. One poll() loop reads stdin and the supervisor's socket, so pings and
 * cancellations are answered while calls run. The session itself is client/mcp.c's. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/mcp_internal.h"
#include "common/cleanup.h"
#include "common/util.h"

/* Read what stdin has and handle every complete line. 0 at end of input. */
static int on_stdin(Mcp *m) {
        char chunk[65536];
        ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
        int k;

        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 1 : -errno;
        if (n == 0)
                return 0;
        for (ssize_t i = 0; i < n; i++) {
                char c = chunk[i];
                if (c == '\n') {
                        if (m->in_skipping == SKIP_TOO_LONG)
                                k = mcp_answer_oom(
                                        NULL, mcp_send_error(NULL, RPC_PARSE_ERROR, "parse error: message too long"));
                        else if (m->in_skipping == SKIP_NO_MEMORY)
                                k = mcp_answer_oom(NULL, -ENOMEM);
                        else if (m->in_len > 0 && !(m->in_len == 1 && m->in[0] == '\r'))
                                k = mcp_handle_message(m, m->in, m->in_len);
                        else
                                k = 0;
                        m->in_len = 0;
                        m->in_skipping = SKIP_NONE;
                        if (k < 0)
                                return k;
                        continue;
                }
                if (m->in_skipping)
                        continue;
                if (m->in_len == MCP_MAX_LINE) {
                        m->in_skipping = SKIP_TOO_LONG;
                        continue;
                }
                if (m->in_len == m->in_cap) {
                        size_t cap = m->in_cap ? MIN(m->in_cap * 2, (size_t) MCP_MAX_LINE) : 65536;
                        char *p = realloc(m->in, cap);
                        if (!p) {
                                m->in_skipping = SKIP_NO_MEMORY; /* answered at its end */
                                continue;
                        }
                        m->in = p;
                        m->in_cap = cap;
                }
                m->in[m->in_len++] = c;
        }
        return 1;
}

/* Start the session, serve it until the end of stdin; the exit status. */
int mcp_stdio_serve(const char *socket, ToolSource *sources, size_t n) {
        Mcp m = {};
        int status = mcp_session_start(&m, socket, sources, n);
        int k = status == 0 ? 0 : -ECONNABORTED;

        while (k >= 0) {
                struct pollfd fds[2] = {
                        { .fd = STDIN_FILENO, .events = POLLIN },
                        { .fd = ci_fd(m.client), .events = POLLIN },
                };
                if (poll(fds, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        k = -errno;
                        break;
                }
                if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        if ((k = mcp_on_supervisor(&m)) < 0) {
                                fprintf(stderr, "codeinterp mcp: lost the supervisor: %s\n", strerror(-k));
                                status = EXIT_CONNECT;
                                break;
                        }
                }
                if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        k = on_stdin(&m);
                        if (k == 0)
                                break; /* end of input: the session is over */
                        if (k < 0) {
                                fprintf(stderr, "codeinterp mcp: %s\n", strerror(-k));
                                status = EXIT_CONNECT;
                        }
                }
        }
        /* Calls still running get an answer the client can match. */
        mcp_session_end(&m, status != 0);
        return status;
}
