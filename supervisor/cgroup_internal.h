/* SPDX-License-Identifier: MIT */
/* What cgroup.c (the supervisor's cgroup root) and cgroup_worker.c (each worker's
 * cgroup: made or reused, entered, read, given back) share. Not for other files. */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/cgroup.h"

/* v2 has one hierarchy; v1 two: memory and pids, and a third, cpu, only when the
 * CPU bandwidth cap is on (cpuBandwidthPercent). */
#define CG_MAX_DIRS 3
enum { CG_MEMORY, CG_PIDS, CG_CPU };
/* cpu.max's and cpu.cfs_period_us's period; 1 % of one CPU is 1000 us of it. */
#define CG_CPU_PERIOD_USEC 100000
/* How long a busy cgroup is retried before it is left (and logged): its last
 * processes are normally gone by the time the worker is reaped. */
#define CG_RMDIR_TRIES 50
#define CG_RMDIR_SLEEP_NSEC 1000000L
/* A supervisor's subtree is "ci-<instance>". */
#define INSTANCE_PREFIX "ci-"
/* Empty worker cgroups kept for reuse at most: a call's cgroup is given back when its
 * result is sent and taken by the next slot made, so a few cover a burst of results. */
#define CG_RECYCLED_MAX 4
/* A cgroup whose account still holds more than this once its worker is gone (kernel
 * objects and page cache its worker brought in) is removed rather than reused: it would
 * count towards the next worker's peak and limit. */
#define CG_RECYCLE_MAX_RESIDUAL_BYTES (4ULL << 20)

typedef struct KeptCgroup {
        char name[32];
        uint64_t memory_bytes; /* the limits it has */
        uint32_t max_processes;
} KeptCgroup;

struct CgroupRoot {
        CgroupVersion version;
        int dirs[CG_MAX_DIRS]; /* v2: [0] the workers' parent; v1: the supervisor's memory, pids (and cpu) cgroups */
        size_t n_dirs;
        char path[PATH_MAX]; /* dirs[0], relative to the hierarchy */
        /* This supervisor's own subtree under each workers' parent, "ci-<instance>",
         * opened and flock'ed for as long as the supervisor lives: the lock is how another
         * supervisor (in any pid namespace or container sharing the hierarchy) tells a
         * live owner's subtree from a dead one's. -1 where not made. */
        int own[CG_MAX_DIRS];
        char instance[17]; /* 64 random bits in hex, unique on the host */
        uint64_t seq;
        uint32_t want_cpu_percent; /* cpuBandwidthPercent */
        uint32_t cpu_percent;      /* the CPU cap each worker's cgroup gets, 0 = none */
        char cpu_why[256];         /* why a wanted cap is not applied */
        /* Empty worker cgroups given back, for the next cgroup_new() (cgroup_recycle()),
         * the last one first: only their names and limits, no descriptor. */
        KeptCgroup recycled[CG_RECYCLED_MAX];
        size_t n_recycled;
};

struct Cgroup {
        CgroupVersion version;
        int parents[CG_MAX_DIRS];
        int dirs[CG_MAX_DIRS];
        size_t n_dirs;
        char name[32]; /* relative to parents[] (the supervisor's own subtree): "w<n>" */
        char path[PATH_MAX + 80];
        uint64_t memory_bytes; /* the limits written */
        uint32_t max_processes;
        CgroupRoot *root; /* where it is given back (it outlives every cgroup) */
        /* A reused cgroup's account reset (cgroup_account_reset()): the OOM kills before
         * it, and v2's memory.peak descriptor the reset was written to (-1: none). */
        uint64_t oom_kills_base;
        int peak_fd;
};

/* Remove the cgroups kept for reuse (cgroup_worker.c): before the subtree goes. */
void cgroup_recycled_drop(CgroupRoot *root);
