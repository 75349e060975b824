/* SPDX-License-Identifier: MIT */
/* common/pageset.h against the real kernel: what a copy touched is learnt from pagemap,
 * and a new copy gets exactly those pages mapped ahead, with no byte changed. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/pageset.h"

#define PAGES 8

static size_t psz;
static char *anon;     /* PAGES private writable pages, all written by this process */
static const char *ro; /* PAGES of a private read-only file mapping, never touched here */
static char *shared;   /* a shared writable mapping: never in a set */
static PageMaps *maps;

static int setup(void **state) {
        char path[] = "/tmp/test_pageset.XXXXXX";
        int fd = mkstemp(path);

        psz = (size_t) sysconf(_SC_PAGESIZE);
        if (fd < 0 || unlink(path) < 0 || ftruncate(fd, (off_t) (PAGES * psz)) < 0)
                return -1;
        anon = mmap(NULL, PAGES * psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ro = mmap(NULL, PAGES * psz, PROT_READ, MAP_PRIVATE, fd, 0);
        shared = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        close(fd);
        maps = malloc(sizeof *maps);
        if (anon == MAP_FAILED || ro == MAP_FAILED || shared == MAP_FAILED || !maps)
                return -1;
        for (size_t i = 0; i < PAGES; i++)
                anon[i * psz] = (char) ('a' + i);
        shared[0] = 1;
        return pageset_maps(maps);
}

static int teardown(void **state) {
        munmap(anon, PAGES * psz);
        munmap((void *) ro, PAGES * psz);
        munmap(shared, psz);
        free(maps);
        return 0;
}

static const PageRun *map_of(const void *addr) {
        for (size_t i = 0; i < maps->n; i++)
                if ((uintptr_t) addr >= maps->maps[i].start && (uintptr_t) addr < maps->maps[i].end)
                        return &maps->maps[i];
        return NULL;
}

static void test_maps(void **state) {
        const PageRun *m;

        assert_int_equal(pageset_probe(), 0); /* Linux >= 5.14, as on every machine CI runs on */
        m = map_of(anon);
        assert_non_null(m);
        assert_true(m->write);
        m = map_of(ro);
        assert_non_null(m);
        assert_false(m->write);
        assert_null(map_of(shared)); /* a write there is seen by all: nothing to copy */
}

/* A mapping whose /proc/self/maps line is longer than any fixed buffer would be (its
 * path: five directories of 200 characters) is listed like any other, and so are the
 * lines after it. */
static void test_maps_long_path(void **state) {
        char path[1200] = "/tmp/test_pageset_long.XXXXXX", name[201];
        size_t base;
        PageMaps *m = malloc(sizeof *m);
        const char *p;
        int fd;

        assert_non_null(m);
        assert_non_null(mkdtemp(path));
        base = strlen(path);
        memset(name, 'd', 200);
        name[200] = 0;
        for (int i = 0; i < 5; i++) {
                strcat(path, "/");
                strcat(path, name);
                assert_int_equal(mkdir(path, 0700), 0);
        }
        strcat(path, "/f");
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t) psz), 0);
        p = mmap(NULL, psz, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        assert_true(p != MAP_FAILED);
        assert_int_equal(pageset_maps(m), 0);
        bool found = false, anon_found = false;
        for (size_t i = 0; i < m->n; i++) {
                found |= m->maps[i].start == (uintptr_t) p && !m->maps[i].write;
                anon_found |= m->maps[i].start <= (uintptr_t) anon && (uintptr_t) anon < m->maps[i].end;
        }
        assert_true(found);
        assert_true(anon_found);
        munmap((void *) p, psz);
        assert_int_equal(unlink(path), 0);
        *strrchr(path, '/') = 0;
        while (strlen(path) >= base) { /* each directory, the top one last */
                assert_int_equal(rmdir(path), 0);
                *strrchr(path, '/') = 0;
        }
        free(m);
}

/* Run fn in a forked copy; the set it sends back. */
static void in_copy(void (*fn)(PageSet *), PageSet *ret) {
        int p[2];
        pid_t pid;
        size_t have = 0;
        ssize_t n;
        int st;

        assert_int_equal(pipe(p), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                PageSet *ps = mmap(NULL, sizeof *ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                close(p[0]);
                if (ps == MAP_FAILED)
                        _exit(1);
                fn(ps);
                _exit(write(p[1], ps, sizeof *ps) == (ssize_t) sizeof *ps ? 0 : 1);
        }
        close(p[1]);
        while ((n = read(p[0], (char *) ret + have, sizeof *ret - have)) > 0)
                have += (size_t) n;
        close(p[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_int_equal(have, sizeof *ret);
}

static bool covers(const PageSet *ps, const void *addr, bool write) {
        for (size_t i = 0; i < ps->n_runs; i++)
                if ((uintptr_t) addr >= ps->runs[i].start && (uintptr_t) addr < ps->runs[i].end)
                        return ps->runs[i].write == write;
        return false;
}

static void rehearse(PageSet *ret) {
        volatile char c;

        anon[1 * psz] = 'X';
        anon[2 * psz + 100] = 'Y';
        anon[5 * psz] = 'Z';
        c = ro[3 * psz];
        (void) c;
        if (pageset_collect(maps, ret) < 0)
                _exit(2);
}

static void test_collect(void **state) {
        PageSet *ps = malloc(sizeof *ps);

        assert_non_null(ps);
        in_copy(rehearse, ps);
        assert_int_equal(pageset_validate(ps, maps), 0);
        /* The written pages and only those: the others are still shared with us. */
        for (size_t i = 0; i < PAGES; i++)
                assert_int_equal(covers(ps, anon + i * psz, true), i == 1 || i == 2 || i == 5);
        assert_true(covers(ps, ro + 3 * psz, false)); /* touched: mapped (with its neighbours) */
        assert_false(covers(ps, shared, true) || covers(ps, shared, false));
        free(ps);
}

static PageSet *ahead;

/* The set the tests below map ahead: anon's pages 2-3 written, ro's page 6 read. */
static void two_kinds(PageSet *ps) {
        PageRun w = { (uintptr_t) anon + 2 * psz, (uintptr_t) anon + 4 * psz, true };
        PageRun r = { (uintptr_t) ro + 6 * psz, (uintptr_t) ro + 7 * psz, false };

        *ps = (PageSet){ .n_runs = 2, .n_pages = 3 };
        ps->runs[0] = ro < anon ? r : w; /* runs ascend */
        ps->runs[1] = ro < anon ? w : r;
}

/* In a copy, after it mapped or touched pages: what of anon and ro it maps now, alone or
 * at all, as a set (exits on failure), having checked that no byte changed: what was
 * there is there, what was not is zero. */
static void report_ours(PageSet *ret) {
        PageRun probe[] = { { (uintptr_t) anon, (uintptr_t) anon + PAGES * psz, true },
                            { (uintptr_t) ro, (uintptr_t) ro + PAGES * psz, false } };
        PageMaps only = { .n = 2 };

        memcpy(only.maps, probe, sizeof probe);
        if (pageset_collect(&only, ret) < 0)
                _exit(2);
        for (size_t i = 0; i < PAGES; i++)
                if (anon[i * psz] != (char) ('a' + i) || ro[i * psz] != 0)
                        _exit(3);
}

/* ahead: two_kinds(), checked; returns room for what a copy reports. */
static PageSet *two_kinds_ahead(void) {
        PageSet *got = malloc(sizeof *got);

        ahead = calloc(1, sizeof *ahead);
        assert_non_null(got);
        assert_non_null(ahead);
        two_kinds(ahead);
        assert_int_equal(pageset_validate(ahead, maps), 0);
        return got;
}

static void populate(PageSet *ret) {
        if (pageset_populate(ahead) != ahead->n_pages)
                _exit(4);
        report_ours(ret);
}

static void test_populate(void **state) {
        PageSet *got = two_kinds_ahead();
        in_copy(populate, got);
        for (size_t i = 0; i < PAGES; i++)
                assert_int_equal(covers(got, anon + i * psz, true), i == 2 || i == 3);
        assert_true(covers(got, ro + 6 * psz, false)); /* (the kernel may map cached neighbours too) */
        free(got);
        free(ahead);
}

/* A run the copy no longer maps fails alone; the others are still mapped ahead. Timed,
 * that set maps ahead as well, but touching it kills the copy (SIGSEGV) before it says
 * how long: no time. */
static void test_populate_skips_a_gone_run(void **state) {
        char *gone = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        PageSet *ps = calloc(1, sizeof *ps);

        assert_true(gone != MAP_FAILED);
        assert_non_null(ps);
        assert_int_equal(munmap(gone, psz), 0);
        ps->runs[0] = (PageRun){ (uintptr_t) gone, (uintptr_t) gone + psz, true };
        ps->runs[1] = (PageRun){ (uintptr_t) anon, (uintptr_t) anon + psz, true };
        ps->n_runs = 2;
        ps->n_pages = 2;
        assert_int_equal(pageset_populate(ps), 1);
        assert_true(pageset_time_kind(ps, PAGE_KIND_WRITTEN, true) >= 0);
        assert_int_equal(pageset_time_kind(ps, PAGE_KIND_WRITTEN, false), -EIO);
        free(ps);
}

static PageKind kind_now;

/* Only kind_now's pages are mapped ahead. */
static void populate_kind(PageSet *ret) {
        if (pageset_populate_kind(ahead, kind_now) != (kind_now == PAGE_KIND_WRITTEN ? 2 : 1))
                _exit(4);
        report_ours(ret);
}

/* Touched like the work would: written pages become this copy's own, read ones mapped. */
static void touch_kind(PageSet *ret) {
        if (pageset_touch_kind(ahead, kind_now) != (kind_now == PAGE_KIND_WRITTEN ? 2 : 1))
                _exit(4);
        report_ours(ret);
}

static void test_kinds(void **state) {
        PageSet *got = two_kinds_ahead();
        assert_int_equal(pageset_kind_pages(ahead, PAGE_KIND_WRITTEN), 2);
        assert_int_equal(pageset_kind_pages(ahead, PAGE_KIND_READ), 1);
        for (int way = 0; way < 2; way++) {
                void (*fn)(PageSet *) = way ? touch_kind : populate_kind;

                kind_now = PAGE_KIND_WRITTEN;
                in_copy(fn, got);
                for (size_t i = 0; i < PAGES; i++)
                        assert_int_equal(covers(got, anon + i * psz, true), i == 2 || i == 3);
                assert_false(covers(got, ro + 6 * psz, false));
                kind_now = PAGE_KIND_READ;
                in_copy(fn, got);
                for (size_t i = 0; i < PAGES; i++)
                        assert_false(covers(got, anon + i * psz, true));
                assert_true(covers(got, ro + 6 * psz, false));
        }
        /* Both ways can be timed, in copies. */
        for (PageKind k = PAGE_KIND_READ; k <= PAGE_KIND_WRITTEN; k++) {
                assert_true(pageset_time_kind(ahead, k, false) >= 0);
                assert_true(pageset_time_kind(ahead, k, true) >= 0);
        }
        /* Dropping a kind keeps the other, and the count follows. */
        pageset_drop_kind(ahead, PAGE_KIND_READ);
        assert_int_equal(ahead->n_runs, 1);
        assert_int_equal(ahead->n_pages, 2);
        assert_true(ahead->runs[0].write);
        assert_int_equal(pageset_validate(ahead, maps), 0);
        pageset_drop_kind(ahead, PAGE_KIND_WRITTEN);
        assert_int_equal(ahead->n_runs, 0);
        assert_int_equal(ahead->n_pages, 0);
        free(got);
        free(ahead);
}

static void test_validate(void **state) {
        PageSet *ps = calloc(1, sizeof *ps);
        uintptr_t a = (uintptr_t) anon, r = (uintptr_t) ro;

        assert_non_null(ps);
        assert_int_equal(pageset_validate(ps, maps), 0); /* empty: nothing ahead */
        ps->n_runs = 2;
        ps->n_pages = 3;
        ps->runs[0] = (PageRun){ a, a + 2 * psz, true };
        ps->runs[1] = (PageRun){ r + psz, r + 2 * psz, false };
        assert_int_equal(pageset_validate(ps, maps), a < r ? 0 : -EINVAL); /* ascending */
        if (a > r) {
                PageRun t = ps->runs[0];
                ps->runs[0] = ps->runs[1];
                ps->runs[1] = t;
                assert_int_equal(pageset_validate(ps, maps), 0);
        }
        ps->n_pages = 4; /* the sum is checked */
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->n_runs = 1;
        ps->n_pages = 2;
        ps->runs[0] = (PageRun){ a + 1, a + 2 * psz + 1, true }; /* unaligned */
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->runs[0] = (PageRun){ a, a, true }; /* empty */
        ps->n_pages = 0;
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->runs[0] = (PageRun){ a, a + 2 * psz, false }; /* of the wrong kind */
        ps->n_pages = 2;
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->runs[0] = (PageRun){ (uintptr_t) shared, (uintptr_t) shared + psz, true }; /* not a private mapping */
        ps->n_pages = 1;
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->runs[0] = (PageRun){ a + (PAGES - 1) * psz, a + (PAGES + 1) * psz, true }; /* past its mapping's end */
        ps->n_pages = 2;
        assert_int_equal(pageset_validate(ps, maps), map_of(anon + PAGES * psz) == map_of(anon) ? 0 : -EINVAL);
        ps->n_runs = 2; /* overlapping */
        ps->n_pages = 3;
        ps->runs[0] = (PageRun){ a, a + 2 * psz, true };
        ps->runs[1] = (PageRun){ a + psz, a + 2 * psz, true };
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        ps->n_runs = PAGESET_RUNS_MAX + 1;
        assert_int_equal(pageset_validate(ps, maps), -EINVAL);
        free(ps);
}

UNIT_MAIN(setup, teardown, TEST(test_maps), TEST(test_maps_long_path), TEST(test_collect), TEST(test_populate),
          TEST(test_populate_skips_a_gone_run), TEST(test_kinds), TEST(test_validate))
