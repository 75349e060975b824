/* SPDX-License-Identifier: MIT */
/* Learning the pages a copy touches, and mapping them ahead in the next (pageset.h). */
#include "common/pageset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* /proc/PID/pagemap (Documentation/admin-guide/mm/pagemap.rst): one 64-bit entry per
 * page; bit 63 present, bit 56 exclusively mapped. */
#define PAGEMAP_PRESENT (UINT64_C(1) << 63)
#define PAGEMAP_EXCLUSIVE (UINT64_C(1) << 56)
#define PAGEMAP_CHUNK 512 /* entries read at once */

static size_t page_size(void) {
        static size_t size;
        if (size == 0)
                size = (size_t) sysconf(_SC_PAGESIZE);
        return size;
}

int pageset_maps(PageMaps *ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/maps", "re");
        _cleanup_free_ char *line = NULL; /* a line ends with a path: any length */
        size_t size = 0;
        char perms[5];
        uintptr_t start, end;
        PageMaps m = { .n = 0 };

        if (!f)
                return -errno;
        while (getline(&line, &size, f) > 0) {
                if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s", &start, &end, perms) != 3)
                        return -EBADMSG;
                bool write = strcmp(perms, "rw-p") == 0;
                if ((!write && strcmp(perms, "r--p") != 0 && strcmp(perms, "r-xp") != 0) || end <= start ||
                    end - start > PAGESET_MAP_BYTES_MAX || m.n == PAGESET_MAPS_MAX)
                        continue;
                m.maps[m.n++] = (PageRun){ start, end, write };
        }
        if (ferror(f))
                return -EIO;
        *ret = m;
        return 0;
}

/* Append page addr of map to ps, extending the last run when adjacent and in the same
 * mapping (a run never spans two: each is checked to lie within one). false: ps is full. */
static bool pageset_add(PageSet *ps, uintptr_t addr, size_t psz, const PageRun *map) {
        if (ps->n_runs > 0 && ps->runs[ps->n_runs - 1].end == addr && addr != map->start)
                ps->runs[ps->n_runs - 1].end += psz;
        else if (ps->n_runs == PAGESET_RUNS_MAX)
                return false;
        else
                ps->runs[ps->n_runs++] = (PageRun){ addr, addr + psz, map->write };
        ps->n_pages++;
        return true;
}

/* The touched pages of one mapping into ps: 1, or 0 when ps is full, or -errno. */
static int collect_map(int pagemap, const PageRun *map, PageSet *ps) {
        uint64_t want_bits = map->write ? PAGEMAP_PRESENT | PAGEMAP_EXCLUSIVE : PAGEMAP_PRESENT;
        size_t psz = page_size();
        uint64_t ent[PAGEMAP_CHUNK];

        for (uintptr_t addr = map->start; addr < map->end;) {
                size_t want = (map->end - addr) / psz;
                ssize_t n;

                if (want > PAGEMAP_CHUNK)
                        want = PAGEMAP_CHUNK;
                n = pread(pagemap, ent, want * sizeof *ent, (off_t) (addr / psz * sizeof *ent));
                if (n < 0)
                        return -errno;
                if (n == 0 || (size_t) n % sizeof *ent != 0)
                        return -EIO;
                for (size_t i = 0; i < (size_t) n / sizeof *ent; i++, addr += psz)
                        if ((ent[i] & want_bits) == want_bits && !pageset_add(ps, addr, psz, map))
                                return 0;
        }
        return 1;
}

int pageset_collect(const PageMaps *maps, PageSet *ret) {
        _cleanup_close_ int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        int r = 1;

        if (pagemap < 0)
                return -errno;
        ret->n_runs = ret->n_pages = 0;
        for (size_t i = 0; i < maps->n && r > 0; i++)
                r = collect_map(pagemap, &maps->maps[i], ret);
        return r < 0 ? r : 0;
}

static bool within_maps(const PageRun *run, const PageMaps *maps) {
        for (size_t i = 0; i < maps->n; i++)
                if (run->start >= maps->maps[i].start && run->end <= maps->maps[i].end &&
                    run->write == maps->maps[i].write)
                        return true;
        return false;
}

int pageset_validate(const PageSet *ps, const PageMaps *maps) {
        size_t psz = page_size(), pages = 0;

        if (ps->n_runs > PAGESET_RUNS_MAX)
                return -EINVAL;
        for (size_t i = 0; i < ps->n_runs; i++) {
                const PageRun *r = &ps->runs[i];
                if (r->start % psz != 0 || r->end % psz != 0 || r->end <= r->start ||
                    (i > 0 && r->start < ps->runs[i - 1].end) || !within_maps(r, maps))
                        return -EINVAL;
                pages += (r->end - r->start) / psz;
        }
        return pages == ps->n_pages ? 0 : -EINVAL;
}

int pageset_probe(void) {
        size_t psz = page_size();
        void *p = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int r = 0;

        if (p == MAP_FAILED)
                return -errno;
        if (madvise(p, psz, MADV_POPULATE_READ) < 0 || madvise(p, psz, MADV_POPULATE_WRITE) < 0)
                r = -errno;
        (void) munmap(p, psz);
        return r;
}

static bool run_of(const PageRun *r, int kind) {
        return kind < 0 || r->write == (kind == PAGE_KIND_WRITTEN);
}

/* kind < 0: every run. */
static size_t populate_runs(const PageSet *ps, int kind) {
        size_t psz = page_size(), done = 0;
        bool first = true;

        for (size_t i = 0; i < ps->n_runs; i++) {
                const PageRun *r = &ps->runs[i];
                if (!run_of(r, kind))
                        continue;
                if (madvise((void *) r->start, r->end - r->start,
                            r->write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
                        done += (r->end - r->start) / psz;
                else if (errno == EINVAL && first)
                        break; /* no MADV_POPULATE_* here */
                first = false;
        }
        return done;
}

size_t pageset_populate(const PageSet *ps) {
        return populate_runs(ps, -1);
}

size_t pageset_populate_kind(const PageSet *ps, PageKind kind) {
        return populate_runs(ps, (int) kind);
}

size_t pageset_kind_pages(const PageSet *ps, PageKind kind) {
        size_t psz = page_size(), n = 0;

        for (size_t i = 0; i < ps->n_runs; i++)
                if (run_of(&ps->runs[i], (int) kind))
                        n += (ps->runs[i].end - ps->runs[i].start) / psz;
        return n;
}

size_t pageset_touch_kind(const PageSet *ps, PageKind kind) {
        size_t psz = page_size(), n = 0;

        for (size_t i = 0; i < ps->n_runs; i++) {
                const PageRun *r = &ps->runs[i];
                if (!run_of(r, (int) kind))
                        continue;
                for (uintptr_t a = r->start; a < r->end; a += psz, n++) {
                        volatile uint8_t *b = (volatile uint8_t *) a;
                        uint8_t v = *b;
                        if (r->write)
                                *b = v;
                }
        }
        return n;
}

void pageset_drop_kind(PageSet *ps, PageKind kind) {
        size_t psz = page_size(), kept = 0;

        ps->n_pages = 0;
        for (size_t i = 0; i < ps->n_runs; i++) {
                if (run_of(&ps->runs[i], (int) kind))
                        continue;
                ps->runs[kept] = ps->runs[i];
                ps->n_pages += (ps->runs[kept].end - ps->runs[kept].start) / psz;
                kept++;
        }
        ps->n_runs = kept;
}

int64_t pageset_time_kind(const PageSet *ps, PageKind kind, bool ahead) {
        int64_t ns = 0;
        int p[2], status, r;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid == 0) {
                struct timespec a, b;

                close(p[0]);
                clock_gettime(CLOCK_MONOTONIC, &a);
                if (ahead)
                        (void) pageset_populate_kind(ps, kind);
                else
                        (void) pageset_touch_kind(ps, kind);
                clock_gettime(CLOCK_MONOTONIC, &b);
                ns = (int64_t) (b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
                _exit(write_full(p[1], &ns, sizeof ns) < 0);
        }
        close(p[1]);
        if (pid < 0) {
                close(p[0]);
                return -errno;
        }
        r = read_full(p[0], &ns, sizeof ns); /* -EPIPE: the copy died first (a run it could not touch) */
        close(p[0]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || ns < 0)
                return -EIO;
        return ns;
}
