/* SPDX-License-Identifier: MIT */
/* What each namespace costs a worker: clone3 into the namespace set, the child exits at
 * once, the parent reaps it. Compares a fresh network namespace per worker with the
 * same set minus CLONE_NEWNET (what sharing one empty namespace would save). Run by
 * tests/bench/bench.py; needs root. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/sched.h>
#include <sched.h>

#include "common/clone.h"

static double now_ms(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

static double cpu_ms(void) {
        struct timespec t;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

static int run(const char *name, uint64_t flags, int n) {
        double t0 = now_ms();
        for (int i = 0; i < n; i++) {
                int pidfd = -1;
                pid_t pid = clone_with_pidfd(flags, SIGCHLD, &pidfd);
                if (pid < 0) {
                        fprintf(stderr, "%s: clone failed: %d\n", name, pid);
                        return 1;
                }
                if (pid == 0)
                        _exit(0);
                waitpid(pid, NULL, 0);
                close(pidfd);
        }
        printf("%-34s %7.3f ms per worker\n", name, (now_ms() - t0) / n);
        return 0;
}

int main(int argc, char **argv) {
        const uint64_t all = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                             CLONE_NEWCGROUP;
        int n = argc > 1 ? atoi(argv[1]) : 300;
        (void) cpu_ms;

        if (n <= 0)
                n = 300;
        return run("fork (no namespaces)", 0, n) || run("all namespaces (fresh netns)", all, n) ||
               run("all but CLONE_NEWNET (shared netns)", all & ~(uint64_t) CLONE_NEWNET, n) ||
               run("user+net only", CLONE_NEWUSER | CLONE_NEWNET, n) || run("user only", CLONE_NEWUSER, n);
}
