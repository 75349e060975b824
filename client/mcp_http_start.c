/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp --http` before it serves (mcp_http.h): the bearer token read from its
 * file and checked, and the listening socket for ADDRESS:PORT. */
#include "client/mcp_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

/* The token: the file's first line, refused when others may read the file or it is short. */
int mcp_http_read_token(const char *path, char token[static MCP_HTTP_TOKEN_MAX + 1], size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        ssize_t n;

        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "codeinterp mcp: cannot read the token file \"%s\": %m\n", path);
                return -EINVAL;
        }
        if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IRWXG | S_IRWXO))) {
                fprintf(stderr,
                        "codeinterp mcp: the token file \"%s\" must be a regular file only its owner can read "
                        "(chmod 600)\n",
                        path);
                return -EINVAL;
        }
        n = read(fd, token, MCP_HTTP_TOKEN_MAX + 1);
        if (n < 0 || n > MCP_HTTP_TOKEN_MAX) {
                fprintf(stderr, "codeinterp mcp: cannot read the token file \"%s\": %s\n", path,
                        n < 0 ? strerror(errno) : "larger than 4096 bytes");
                return -EINVAL;
        }
        while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r'))
                n--;
        token[n] = 0;
        *ret_len = (size_t) n;
        for (ssize_t i = 0; i < n; i++)
                if (token[i] <= ' ' || token[i] > '~') {
                        fprintf(stderr,
                                "codeinterp mcp: the token in \"%s\" must be one line of printable ASCII "
                                "without spaces\n",
                                path);
                        return -EINVAL;
                }
        if (*ret_len < MCP_HTTP_TOKEN_MIN) {
                fprintf(stderr, "codeinterp mcp: the token in \"%s\" is %zu bytes: at least %u are needed\n", path,
                        *ret_len, MCP_HTTP_TOKEN_MIN);
                return -EINVAL;
        }
        return 0;
}

/* Bind ADDRESS:PORT ([ADDRESS]:PORT for IPv6) and listen; logs where. Returns the fd. */
int mcp_http_listen(const char *address) {
        char host[256], *colon = NULL, *name;
        struct addrinfo hints = { .ai_family = AF_UNSPEC,
                                  .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        char shown[INET6_ADDRSTRLEN], port[8];
        int fd, k, one = 1;

        if (strlen(address) < sizeof host) {
                strcpy(host, address);
                colon = strrchr(host, ':');
        }
        if (!colon || colon == host || !colon[1]) {
                fprintf(stderr, "codeinterp mcp: --http wants ADDRESS:PORT, not \"%s\"\n", address);
                return -EINVAL;
        }
        *colon = 0;
        name = host;
        if (name[0] == '[' && colon[-1] == ']') {
                name++;
                colon[-1] = 0;
        }
        if ((k = getaddrinfo(name, colon + 1, &hints, &ai)) != 0) {
                fprintf(stderr, "codeinterp mcp: --http \"%s\": %s\n", address, gai_strerror(k));
                return -EINVAL;
        }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0 ||
            getsockname(fd, (struct sockaddr *) &ss, &len) < 0) {
                k = -errno;
                fprintf(stderr, "codeinterp mcp: cannot listen on %s: %s\n", address, strerror(-k));
                if (fd >= 0)
                        close(fd);
                freeaddrinfo(ai);
                return -EINVAL;
        }
        freeaddrinfo(ai);
        if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) &ss;
                inet_ntop(AF_INET6, &a->sin6_addr, shown, sizeof shown);
                snprintf(port, sizeof port, "%u", ntohs(a->sin6_port));
                fprintf(stderr, "codeinterp mcp: listening on http://[%s]:%s%s\n", shown, port, MCP_HTTP_PATH);
        } else {
                const struct sockaddr_in *a = (const struct sockaddr_in *) &ss;
                inet_ntop(AF_INET, &a->sin_addr, shown, sizeof shown);
                snprintf(port, sizeof port, "%u", ntohs(a->sin_port));
                fprintf(stderr, "codeinterp mcp: listening on http://%s:%s%s\n", shown, port, MCP_HTTP_PATH);
        }
        return fd;
}
