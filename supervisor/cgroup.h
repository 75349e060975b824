/* SPDX-License-Identifier: MIT */
/* A cgroup per worker, the same behind cgroup v1 (the memory and pids hierarchies, and
 * cpu with the CPU cap on) and v2. At start the supervisor finds where it may make cgroups
 * (its root); per worker it makes one with the call's memory and process limits (and the
 * CPU bandwidth cap, cpuBandwidthPercent, when it is on), puts the worker in
 * it before the worker runs any code of its call, reads after the reap whether the OOM
 * killer ended it and the peak memory, then removes it, or, empty, keeps it with its
 * account reset for a later worker (cgroup_recycle()). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "policy/policy.h"

typedef enum CgroupVersion {
        CGROUP_NONE,
        CGROUP_V1,
        CGROUP_V2,
} CgroupVersion;

typedef struct CgroupRoot CgroupRoot;

/* cgroup.procs descriptors of one worker's cgroup at most: v1 memory, pids and cpu. */
#define CGROUP_PROCS_MAX 3

/* Find (and, unless dry_run, prepare) the place for workers' cgroups under the cgroupfs
 * mounted at fs ("/sys/fs/cgroup"). want off: version none. auto: none when no usable
 * hierarchy is found, with why saying what was missing. required: -errno then, with
 * why. On v2 (not dry_run) the supervisor may move itself into a leaf "supervisor"
 * (see docs/design.md); call it before any child is started. cpu_percent > 0 (the
 * policy's cpuBandwidthPercent) also wants the cpu controller (v2: enabled for the
 * workers' cgroups; v1: the cpu hierarchy, opened only then): without it, required
 * fails with why, auto runs without the cap (cgroup_root_cpu_percent() 0,
 * cgroup_root_cpu_why() says why). */
int cgroup_root_open(PolicyCgroups want, uint32_t cpu_percent, const char *fs, bool dry_run, CgroupRoot **ret,
                     char *why, size_t why_len);
CgroupVersion cgroup_root_version(const CgroupRoot *root);
/* This supervisor's instance: its workers' cgroups are "ci-<instance>/w<n>" under the
 * workers' parent ("" without cgroups). 64 random bits: unique on the host, unlike a
 * pid, which another pid namespace reuses. */
const char *cgroup_root_instance(const CgroupRoot *root);
/* The CPU cap workers' cgroups get (percent of one CPU), 0 = none. */
uint32_t cgroup_root_cpu_percent(const CgroupRoot *root);
/* Why a cap that was asked for is not applied; "" when it is (or none was asked for). */
const char *cgroup_root_cpu_why(const CgroupRoot *root);
/* Remove every worker cgroup of this supervisor (in its subtree) still there: those whose removal gave up
 * while a killed worker was still leaving (cgroup_free() retries for CG_RMDIR_TRIES ms).
 * Only once none of its processes is left (at exit, after every child is reaped). */
void cgroup_root_remove_own(CgroupRoot *root);
CgroupRoot *cgroup_root_free(CgroupRoot *root);
/* Room left in the supervisor's own memory cgroup (v1 or v2), for the memory gate and
 * --check-config; UINT64_MAX if unlimited or unknown. */
uint64_t cgroup_self_memory_available(void);

typedef struct Cgroup Cgroup;

/* Make a worker's cgroup with these limits. With a root of version none, *ret is NULL
 * and 0 is returned. ret_step names the failed step. */
int cgroup_new(CgroupRoot *root, uint64_t memory_bytes, uint32_t max_processes, Cgroup **ret, const char **ret_step);
/* Put the process into the cgroup (every hierarchy). 0 or -errno. */
int cgroup_attach(Cgroup *cg, pid_t pid);
/* The cgroup's cgroup.procs files, opened O_WRONLY here (as root) for another process
 * to move a child in: v1 checks the writer's euid, v2 the opener's credentials. One
 * per hierarchy; *ret_n of them (at most CGROUP_PROCS_MAX). */
int cgroup_open_procs(Cgroup *cg, int fds[static CGROUP_PROCS_MAX], size_t *ret_n);
/* v2: the cgroup's directory, for CLONE_INTO_CGROUP; -1 on v1 (two hierarchies, which
 * clone3 cannot name). */
int cgroup_clone_fd(const Cgroup *cg);
/* Write the limits again if they differ from the ones the cgroup has (a reload changed
 * memoryBytes or maxProcesses since it was made). ret_step names a failed step. */
int cgroup_update_limits(Cgroup *cg, uint64_t memory_bytes, uint32_t max_processes, const char **ret_step);
/* SIGKILL every process in the cgroup (its first hierarchy's cgroup.procs): for the
 * pre-started worker of a slot whose zygote went away, which only this tells us of. */
void cgroup_kill_members(Cgroup *cg);

typedef struct CgroupStats {
        uint64_t oom_kills; /* processes the cgroup's OOM killer ended */
        bool has_peak;
        uint64_t peak_bytes; /* v2 memory.peak (kernels that have it), v1 memory.max_usage_in_bytes */
} CgroupStats;
int cgroup_stats(Cgroup *cg, CgroupStats *ret);
/* Write the CPU bandwidth cap of percent % of one CPU into the cgroup directory dir:
 * v2 cpu.max "<quota> 100000", v1 cpu.cfs_period_us 100000 then cpu.cfs_quota_us.
 * percent 0 writes nothing. ret_step names a failed step. (cgroup_new() uses it; the
 * unit test calls it on a fake directory.) */
int cgroup_write_cpu_cap(int dir, CgroupVersion version, uint32_t percent, const char **ret_step);
/* The path relative to the cgroupfs hierarchy ("/…/w7"), for logs and tests. */
const char *cgroup_path(const Cgroup *cg);

/* Remove the cgroup (its processes must be gone: retried briefly while busy) and free.
 * A cgroup that cannot be removed is logged. NULL-safe. */
Cgroup *cgroup_free(Cgroup *cg);
static inline void cgroup_freep(Cgroup **cg) {
        cgroup_free(*cg);
}
/* Give a worker's cgroup back once its worker is reaped (and cgroup_stats() read): kept,
 * as its name and limits with no descriptor open, for the root's next cgroup_new() (at
 * most a few, the last given back taken first) when no process is left in it and what
 * its account still holds is small; removed as cgroup_free() otherwise. cgroup_new()
 * opens a kept one again, checks it is still empty and resets its account
 * (cgroup_account_reset()), else removes it and tries the next. NULL-safe; returns NULL. */
Cgroup *cgroup_recycle(Cgroup *cg);
static inline void cgroup_recyclep(Cgroup **cg) {
        cgroup_recycle(*cg);
}
/* Reset the account of the cgroup whose memory directory is dir for a new worker: its
 * peak (v1: memory.max_usage_in_bytes written 0; v2: "reset" written to memory.peak
 * through *peak_fd, opened here when it is -1 and kept: the reset holds for reads
 * through that descriptor, and kernels before 6.12 refuse it), and the OOM kills counted
 * so far into *ret_oom_kills, which cgroup_stats() subtracts. 0 or -errno: such a cgroup
 * is not reused. (cgroup_new() uses it on a kept cgroup; the unit test calls it on a
 * fake directory.) */
int cgroup_account_reset(int dir, CgroupVersion version, int *peak_fd, uint64_t *ret_oom_kills);
