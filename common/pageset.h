/* SPDX-License-Identifier: MIT */
/* The pages a copy of this process touches: learnt once from a rehearsal, then mapped
 * ahead in each new copy with one madvise(MADV_POPULATE_WRITE or _READ) per run.
 *
 * Why: a page fault costs an exception round trip on top of its work, and on the
 * virtual machines this runs on the round trip is most of it (docs/performance.md,
 * "Touching a worker's pages ahead", measured by tests/bench/faultcost.c: 18-19 µs per
 * copy-on-write fault against 5-6 µs per page copied by MADV_POPULATE_WRITE; 21-28 µs
 * per fault on a library's text against 0.2-0.4 µs per page by MADV_POPULATE_READ).
 * A worker cloned from the zygote touches the same pages each time while it prepares,
 * at the same addresses (every copy has the zygote's layout):
 * - it writes pages of its private writable mappings (heap, Python's arenas,
 *   libraries' data), each write a copy-on-write fault;
 * - it runs code and reads constants from read-only file mappings, whose page table
 *   entries fork(2) does not copy, each first touch a fault (the kernel maps up to 16
 *   pages around it).
 * Mapping them ahead changes no byte anyone reads (a copy-on-write break copies, a
 * missing anonymous page is zero-filled, a file page is the file's: what the first
 * touch would have done); it only takes the faults in bulk, in the kernel. Where
 * faults are cheap that is no saving (2 µs a fault on another machine, and a read
 * fault maps up to 16 pages): the user times both ways (pageset_time_kind()) and keeps
 * a kind only where mapping ahead wins. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds: the mappings looked at, and the runs kept. A process with more mappings has
 * the rest ignored; a rehearsal that touched more runs keeps the first PAGESET_RUNS_MAX
 * (lowest addresses). Measured: the default policy's worker touches 1 124 pages in 163
 * runs while it prepares (185 of them written), the data policy's 3 388 in 911 (1 035
 * written). */
#define PAGESET_MAPS_MAX 1024
#define PAGESET_RUNS_MAX 4096
/* A mapping larger than this is left out: scanning it would cost more than it saves
 * (AddressSanitizer's shadow is terabytes of reserved address space). */
#define PAGESET_MAP_BYTES_MAX (UINT64_C(1) << 30)

/* [start, end), page-aligned; write: in a private writable mapping (written ahead),
 * else in a read-only private one (mapped ahead). */
typedef struct {
        uintptr_t start;
        uintptr_t end;
        bool write;
} PageRun;

/* This process's private mappings that are writable ("rw-p") or read-only ("r--p",
 * "r-xp"), as /proc/self/maps lists them, up to PAGESET_MAP_BYTES_MAX each. */
typedef struct {
        size_t n;
        PageRun maps[PAGESET_MAPS_MAX];
} PageMaps;

typedef struct {
        size_t n_runs;
        size_t n_pages;
        PageRun runs[PAGESET_RUNS_MAX];
} PageSet;

/* This process's private mappings: taken before the fork of the rehearsal, so that only
 * pages which exist in every copy are kept. */
int pageset_maps(PageMaps *ret);
/* In the rehearsal, after the work: the pages of maps it touched (pagemap(5), readable
 * without privileges), in runs. Right after a fork every page of a writable mapping is
 * shared with the parent, and no page of a read-only file mapping is mapped: so the
 * writable ones this process alone maps now ("exclusively mapped") are those it wrote,
 * and the read-only ones mapped ("present") those it touched. */
int pageset_collect(const PageMaps *maps, PageSet *ret);
/* What came back from a rehearsal, before it is used: runs page-aligned, non-empty,
 * ascending, not overlapping, each within one of maps and of its kind, and n_pages
 * their sum. -EINVAL otherwise. */
int pageset_validate(const PageSet *ps, const PageMaps *maps);
/* Whether this kernel has MADV_POPULATE_READ and _WRITE (Linux 5.14): 0, or -EINVAL
 * (or what else madvise(2) said). */
int pageset_probe(void);
/* In a new copy: MADV_POPULATE_WRITE or _READ over each run. A run the copy no longer
 * maps as it did fails alone (nothing is touched); on a kernel without them (before
 * 5.14) the first run fails with EINVAL and nothing more is tried. Returns the pages
 * mapped ahead. */
size_t pageset_populate(const PageSet *ps);

/* The two kinds of runs, for what follows. */
typedef enum PageKind {
        PAGE_KIND_READ,    /* read-only pages, mapped ahead by MADV_POPULATE_READ */
        PAGE_KIND_WRITTEN, /* private writable pages, written ahead by MADV_POPULATE_WRITE */
} PageKind;
/* The pages of ps's runs of one kind. */
size_t pageset_kind_pages(const PageSet *ps, PageKind kind);
/* pageset_populate() of one kind's runs only. */
size_t pageset_populate_kind(const PageSet *ps, PageKind kind);
/* Touch one kind's pages the way the work does, one fault per page not yet mapped: a
 * read of one byte (read pages), or a byte read and written back (written pages, a
 * copy-on-write break each). Changes no byte. What mapping them ahead saves, for
 * timing it against pageset_populate_kind() in a throwaway copy (worker/zygote.c).
 * Returns the pages touched. */
size_t pageset_touch_kind(const PageSet *ps, PageKind kind);
/* Drop one kind's runs from ps (n_pages follows): not mapped ahead. */
void pageset_drop_kind(PageSet *ps, PageKind kind);
/* How long one kind's pages take to get in a new copy of this process, in ns: a
 * throwaway fork touches them (ahead false: the faults) or maps them ahead (true), and
 * says how long that took. -errno when the copy could not be made or said nothing. */
int64_t pageset_time_kind(const PageSet *ps, PageKind kind, bool ahead);
