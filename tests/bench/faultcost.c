/* SPDX-License-Identifier: MIT */
/* What a page costs a new copy of a process, per way of getting it (bench.py prints it;
 * docs/performance.md, "Touching a worker's pages ahead"): a private page written after
 * fork, by a fault and by MADV_POPULATE_WRITE; a read-only file page touched after
 * fork, by a fault and by MADV_POPULATE_READ; and a fault that only maps a zeroed page.
 * Each in a fresh child of a parent that has the pages, as a worker of the zygote.
 *
 *   faultcost [PAGES]   (default 2000) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static size_t n, psz;
static char *anon;
static const char *file;

static double now_us(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

typedef enum { COW_FAULT, COW_POPULATE, FILE_FAULT, FILE_POPULATE, ZERO_FAULT } Way;

static const char *const names[] = {
        [COW_FAULT] = "private page written, by a fault (copy-on-write)",
        [COW_POPULATE] = "private page written, by MADV_POPULATE_WRITE",
        [FILE_FAULT] = "read-only file page touched, by a fault",
        [FILE_POPULATE] = "read-only file page touched, by MADV_POPULATE_READ",
        [ZERO_FAULT] = "new anonymous page written, by a fault",
};

/* In a fresh child: the way's work over all n pages; its time per page, in µs. */
static void child(Way way, int out) {
        volatile char sink = 0;
        char *fresh = NULL;
        double t, per;
        int r = 0;

        if (way == ZERO_FAULT) {
                fresh = mmap(NULL, n * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (fresh == MAP_FAILED)
                        _exit(1);
                (void) madvise(fresh, n * psz, MADV_NOHUGEPAGE);
        }
        t = now_us();
        switch (way) {
        case COW_FAULT:
                for (size_t i = 0; i < n; i++)
                        anon[i * psz] = 2;
                break;
        case COW_POPULATE:
                r = madvise(anon, n * psz, MADV_POPULATE_WRITE);
                break;
        case FILE_FAULT:
                /* Every 16th page: the kernel maps up to 16 cached pages around a fault. */
                for (size_t i = 0; i < n; i += 16)
                        sink += file[i * psz];
                break;
        case FILE_POPULATE:
                r = madvise((void *) file, n * psz, MADV_POPULATE_READ);
                break;
        case ZERO_FAULT:
                for (size_t i = 0; i < n; i++)
                        fresh[i * psz] = 1;
                break;
        }
        per = (now_us() - t) / (double) (way == FILE_FAULT ? (n + 15) / 16 : n);
        (void) sink;
        if (r < 0)
                per = -errno;
        _exit(write(out, &per, sizeof per) == sizeof per ? 0 : 1);
}

static double measure(Way way) {
        int p[2], st;
        double per = -1;
        pid_t pid;

        if (pipe(p) < 0)
                return -1;
        pid = fork();
        if (pid == 0) {
                close(p[0]);
                child(way, p[1]);
        }
        close(p[1]);
        if (pid < 0 || read(p[0], &per, sizeof per) != sizeof per)
                per = -1;
        close(p[0]);
        if (pid > 0)
                (void) waitpid(pid, &st, 0);
        return per;
}

int main(int argc, char **argv) {
        char path[] = "/tmp/faultcost.XXXXXX";
        int fd;

        n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
        psz = (size_t) sysconf(_SC_PAGESIZE);
        fd = mkstemp(path);
        if (n == 0 || fd < 0 || unlink(path) < 0 || ftruncate(fd, (off_t) (n * psz)) < 0) {
                perror("faultcost");
                return 1;
        }
        anon = mmap(NULL, n * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        file = mmap(NULL, n * psz, PROT_READ, MAP_PRIVATE, fd, 0);
        if (anon == MAP_FAILED || file == MAP_FAILED) {
                perror("faultcost: mmap");
                return 1;
        }
        (void) madvise(anon, n * psz, MADV_NOHUGEPAGE);
        for (size_t i = 0; i < n; i++) {
                volatile char c = file[i * psz]; /* in the page cache, as a library's text */
                (void) c;
                anon[i * psz] = 1; /* present in the parent, as the zygote's heap */
        }
        for (Way w = COW_FAULT; w <= ZERO_FAULT; w++) {
                double per = measure(w);
                if (per < 0)
                        printf("  %-52s failed (%s)\n", names[w], per == -1 ? "child" : strerror((int) -per));
                else
                        printf("  %-52s %6.2f µs per %s\n", names[w], per, w == FILE_FAULT ? "fault" : "page");
        }
        return 0;
}
