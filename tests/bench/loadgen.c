/* SPDX-License-Identifier: MIT */
/* The benchmark's load generator in C, so that a throughput point measures the service
 * and its floors, not the Python that drives them (a Python client thread costs about
 * 0.7 ms of CPU per call, a seventh of both cores at capacity 2). Every mode runs LANES
 * forked processes back to back for SECONDS, timed from one start signal given once
 * every lane is ready, and prints one line:
 *
 *   loadgen spawn LANES SECONDS ARGV...     posix_spawn ARGV and reap it (the bare rate)
 *   loadgen serve LANES SECONDS ARGV...     one ARGV per lane, started before the clock:
 *                                           write a byte to its stdin, read one back
 *                                           (the fork floor's server, bench.py)
 *   loadgen calls LANES SECONDS SOCKET CODE one connection per lane, made before the
 *                                           clock: execute CODE, expect outcome "ok"
 *
 * "done N failed F seconds S lane_cpu_ms C": runs, requests or calls completed, how many
 * failed (spawn: a non-zero exit; serve: the server gone; calls: an outcome other than
 * "ok", an error reply or a broken connection), the time from the start signal to the
 * last lane's end, and the lanes' own CPU time with their children's (calls: the client's
 * whole cost). The first failure goes to stderr. Exit status 0 when every lane reported,
 * 1 otherwise, 2 for a usage error. Run by tests/bench/bench.py. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/lib/libcodeinterp.h"

extern char **environ;

/* What spawned programs start with: SIGPIPE back to its default (loadgen ignores it, so
 * that a server gone, or a lane gone, is an EPIPE it counts, not its death). */
static posix_spawnattr_t spawn_attr;

typedef enum Mode {
        MODE_SPAWN,
        MODE_SERVE,
        MODE_CALLS,
} Mode;

typedef struct Count {
        uint64_t done;
        uint64_t failed;
        char first_failure[48];
} Count;

/* What a lane holds from before the start signal to its end. */
typedef struct Lane {
        Mode mode;
        char **argv;
        const char *socket;
        const char *code;
        CiClient *client; /* calls */
        pid_t server;     /* serve */
        int to_server, from_server;
} Lane;

static double now_s(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

static void note_failure(Count *c, const char *what) {
        if (c->failed++ == 0)
                snprintf(c->first_failure, sizeof c->first_failure, "%s", what);
}

static void spawn_once(Lane *l, Count *c) {
        pid_t pid;
        int st = 0;
        int r = posix_spawn(&pid, l->argv[0], NULL, &spawn_attr, l->argv, environ);
        if (r != 0)
                note_failure(c, strerror(r));
        else if (waitpid(pid, &st, 0) < 0 || st != 0)
                note_failure(c, "exit status");
}

static int serve_once(Lane *l) {
        char b = 'x';
        if (write(l->to_server, &b, 1) != 1 || read(l->from_server, &b, 1) != 1)
                return -EPIPE;
        return 0;
}

/* The server with its stdin and stdout on pipes, answering three requests to warm up. */
static int serve_start(Lane *l) {
        int in[2], out[2];
        posix_spawn_file_actions_t fa;
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        int r = posix_spawn(&l->server, l->argv[0], &fa, &spawn_attr, l->argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(in[0]);
        close(out[1]);
        l->to_server = in[1];
        l->from_server = out[0];
        if (r != 0)
                return -r;
        for (int i = 0; i < 3; i++)
                if ((r = serve_once(l)) < 0)
                        return r;
        return 0;
}

/* The result's outcome, or the error reply's code (in buf), else the message's type. */
static const char *reply_name(CiMessage *m, char *buf, size_t size) {
        const char *type = ci_message_type(m);
        return cli_str_or(ci_get(&m->unpacked.data, type && !strcmp(type, "error") ? "code" : "outcome"), buf, size,
                          type ?: "malformed");
}

static int call_once(Lane *l, Count *c) {
        CiExecute x = { .summary = "loadgen", .code = l->code, .code_len = strlen(l->code) };
        CiMessage m;
        char name[48];
        int r = ci_execute(l->client, &x, NULL, NULL, &m);
        if (r < 0) {
                note_failure(c, strerror(-r));
                return r;
        }
        const char *got = reply_name(&m, name, sizeof name);
        if (strcmp(got, "ok") != 0)
                note_failure(c, got);
        ci_message_done(&m);
        return 0;
}

/* A lane: get ready, say so on ready_fd, wait for the start signal (a byte on go_fd,
 * with the time to stop), run until then, report its count on report_fd. */
static int lane_main(Lane *l, int ready_fd, int go_fd, int report_fd) {
        Count c = { 0 };
        double stop;
        int r = 0;
        if (l->mode == MODE_SERVE)
                r = serve_start(l);
        else if (l->mode == MODE_CALLS)
                r = ci_connect(l->socket, &l->client);
        if (r < 0)
                note_failure(&c, strerror(-r));
        if (write(ready_fd, "r", 1) != 1 || read(go_fd, &stop, sizeof stop) != (ssize_t) sizeof stop)
                return 1;
        while (r == 0 && now_s() < stop) {
                c.done++;
                if (l->mode == MODE_SPAWN)
                        spawn_once(l, &c);
                else if (l->mode == MODE_SERVE && (r = serve_once(l)) < 0)
                        note_failure(&c, "the server is gone");
                else if (l->mode == MODE_CALLS)
                        r = call_once(l, &c);
        }
        if (l->mode == MODE_SERVE) {
                close(l->to_server); /* EOF: the server exits */
                if (l->server > 0)
                        waitpid(l->server, NULL, 0);
        }
        if (l->client)
                ci_close(l->client);
        return write(report_fd, &c, sizeof c) == (ssize_t) sizeof c ? 0 : 1;
}

static int usage(void) {
        fprintf(stderr, "usage: loadgen spawn LANES SECONDS ARGV...\n"
                        "       loadgen serve LANES SECONDS ARGV...\n"
                        "       loadgen calls LANES SECONDS SOCKET CODE\n");
        return 2;
}

static int parse(int argc, char **argv, Lane *l, int *ret_lanes, double *ret_seconds) {
        if (argc < 5)
                return -EINVAL;
        if (!strcmp(argv[1], "spawn"))
                l->mode = MODE_SPAWN;
        else if (!strcmp(argv[1], "serve"))
                l->mode = MODE_SERVE;
        else if (!strcmp(argv[1], "calls") && argc == 6)
                l->mode = MODE_CALLS;
        else
                return -EINVAL;
        l->argv = argv + 4;
        l->socket = argv[4];
        l->code = argv[5];
        *ret_lanes = atoi(argv[2]);
        *ret_seconds = atof(argv[3]);
        return *ret_lanes >= 1 && *ret_lanes <= 64 && *ret_seconds > 0 ? 0 : -EINVAL;
}

static int sum_lanes(const int *report, int lanes, Count *total) {
        int missing = 0;
        for (int i = 0; i < lanes; i++) {
                Count c;
                if (read(report[i], &c, sizeof c) != (ssize_t) sizeof c) {
                        missing++;
                        continue;
                }
                if (c.failed && !total->failed)
                        memcpy(total->first_failure, c.first_failure, sizeof c.first_failure);
                total->done += c.done;
                total->failed += c.failed;
        }
        return missing;
}

int main(int argc, char **argv) {
        Lane lane = { 0 };
        int lanes, ready[2], go[2], report[64];
        double seconds;
        if (parse(argc, argv, &lane, &lanes, &seconds) < 0)
                return usage();
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        signal(SIGPIPE, SIG_IGN);
        posix_spawnattr_init(&spawn_attr);
        posix_spawnattr_setsigdefault(&spawn_attr, &pipe_only);
        posix_spawnattr_setflags(&spawn_attr, POSIX_SPAWN_SETSIGDEF);
        if (pipe(ready) < 0 || pipe(go) < 0)
                return perror("pipe"), 1;
        for (int i = 0; i < lanes; i++) {
                int p[2];
                if (pipe(p) < 0)
                        return perror("pipe"), 1;
                pid_t pid = fork();
                if (pid < 0)
                        return perror("fork"), 1;
                if (pid == 0) {
                        close(p[0]);
                        close(ready[0]);
                        close(go[1]);
                        _exit(lane_main(&lane, ready[1], go[0], p[1]));
                }
                close(p[1]);
                report[i] = p[0];
        }
        close(ready[1]);
        close(go[0]);
        for (int i = 0; i < lanes; i++) {
                char b;
                if (read(ready[0], &b, 1) != 1)
                        break; /* a lane died before it was ready: it reports nothing */
        }
        double t0 = now_s(), stop = t0 + seconds;
        for (int i = 0; i < lanes; i++)
                if (write(go[1], &stop, sizeof stop) != (ssize_t) sizeof stop)
                        break; /* no lane left to read it (EPIPE): each reports nothing */
        Count total = { 0 };
        int missing = sum_lanes(report, lanes, &total);
        while (wait(NULL) > 0)
                ;
        double elapsed = now_s() - t0;
        struct rusage ru;
        getrusage(RUSAGE_CHILDREN, &ru);
        double cpu_ms = (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                        (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        if (total.failed)
                fprintf(stderr, "loadgen: %" PRIu64 " failed, the first: %s\n", total.failed, total.first_failure);
        printf("done %" PRIu64 " failed %" PRIu64 " seconds %.4f lane_cpu_ms %.1f\n", total.done, total.failed, elapsed,
               cpu_ms);
        return missing ? 1 : 0;
}
