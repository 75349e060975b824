/* SPDX-License-Identifier: MIT */
/* Each worker's cgroup (cgroup.h): made with its limits, or reused, entered, read after
 * the reap, then given back: kept with its account reset when it is empty, removed
 * otherwise. The root it is made under is cgroup.c's; file access is cgroupfs.c's. */
#include "supervisor/cgroup.h"
#include "supervisor/cgroup_internal.h"
#include "supervisor/cgroupfs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

const char *cgroup_path(const Cgroup *cg) {
        return cg ? cg->path : "";
}

static void cgroup_rmdir(Cgroup *cg, size_t i) {
        struct timespec pause = { .tv_nsec = CG_RMDIR_SLEEP_NSEC };

        for (int t = 0; t < CG_RMDIR_TRIES; t++) {
                if (unlinkat(cg->parents[i], cg->name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                        return;
                if (errno != EBUSY)
                        break;
                nanosleep(&pause, NULL);
        }
        log_warning_errno(errno, "Could not remove the worker cgroup %s: %m", cg->path);
}

/* Close the cgroup's descriptors and free it; remove its directories too, or keep them
 * (given back for reuse: cgroup_recycle()). */
static Cgroup *cgroup_close(Cgroup *cg, bool remove) {
        if (!cg)
                return NULL;
        if (cg->peak_fd >= 0)
                close(cg->peak_fd);
        for (size_t i = 0; i < cg->n_dirs; i++) {
                if (cg->dirs[i] >= 0) {
                        close(cg->dirs[i]);
                        if (remove)
                                cgroup_rmdir(cg, i);
                }
                if (cg->parents[i] >= 0)
                        close(cg->parents[i]);
        }
        free(cg);
        return NULL;
}

Cgroup *cgroup_free(Cgroup *cg) {
        return cgroup_close(cg, true);
}

static int set_limits(Cgroup *cg, uint64_t memory_bytes, uint32_t max_processes, const char **ret_step) {
        char mem[32], procs[32];
        int k;

        snprintf(mem, sizeof mem, "%" PRIu64, memory_bytes);
        snprintf(procs, sizeof procs, "%" PRIu32, max_processes);
        if (cg->version == CGROUP_V2) {
                int d = cg->dirs[0];
                *ret_step = "setting memory.max";
                k = cgroupfs_write(d, "memory.max", mem);
                if (k < 0)
                        return k;
                /* No swap: ENOENT where the kernel does not account it (then there is none). */
                *ret_step = "setting memory.swap.max";
                k = cgroupfs_write(d, "memory.swap.max", "0");
                if (k < 0 && k != -ENOENT)
                        return k;
                *ret_step = "setting memory.oom.group";
                k = cgroupfs_write(d, "memory.oom.group", "1");
                if (k < 0)
                        return k;
                *ret_step = "setting pids.max";
                k = cgroupfs_write(d, "pids.max", procs);
                if (k < 0)
                        return k;
                cg->memory_bytes = memory_bytes;
                cg->max_processes = max_processes;
                return 0;
        }
        /* v1 keeps memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every step:
         * raising an existing limit writes memsw first, lowering it (or a new cgroup,
         * where both are unlimited) the memory limit first. */
        for (int i = 0; i < 2; i++) {
                bool memsw = (i == 0) == (cg->memory_bytes != 0 && memory_bytes > cg->memory_bytes);
                *ret_step = memsw ? "setting memory.memsw.limit_in_bytes" : "setting memory.limit_in_bytes";
                k = cgroupfs_write(cg->dirs[CG_MEMORY], memsw ? "memory.memsw.limit_in_bytes" : "memory.limit_in_bytes",
                                   mem);
                if (k < 0 && !(memsw && k == -ENOENT))
                        return k;
        }
        *ret_step = "setting pids.max";
        k = cgroupfs_write(cg->dirs[CG_PIDS], "pids.max", procs);
        if (k < 0)
                return k;
        cg->memory_bytes = memory_bytes;
        cg->max_processes = max_processes;
        return 0;
}

int cgroup_write_cpu_cap(int dir, CgroupVersion version, uint32_t percent, const char **ret_step) {
        char quota[32], period[32], max[64];
        int k;

        if (percent == 0)
                return 0;
        snprintf(quota, sizeof quota, "%" PRIu64, (uint64_t) percent * (CG_CPU_PERIOD_USEC / 100));
        snprintf(period, sizeof period, "%d", CG_CPU_PERIOD_USEC);
        if (version == CGROUP_V2) {
                snprintf(max, sizeof max, "%s %s", quota, period);
                *ret_step = "setting cpu.max";
                return cgroupfs_write(dir, "cpu.max", max);
        }
        /* The period first: the quota is checked against it. */
        *ret_step = "setting cpu.cfs_period_us";
        if ((k = cgroupfs_write(dir, "cpu.cfs_period_us", period)) < 0)
                return k;
        *ret_step = "setting cpu.cfs_quota_us";
        return cgroupfs_write(dir, "cpu.cfs_quota_us", quota);
}

/* Whether no process is left in any of the cgroup's hierarchies. */
static bool cgroup_empty(const Cgroup *cg) {
        char buf[16];

        for (size_t i = 0; i < cg->n_dirs; i++)
                if (cgroupfs_read(cg->dirs[i], "cgroup.procs", buf, sizeof buf) < 0 || buf[0] != 0)
                        return false;
        return true;
}

/* A Cgroup named name under root, its parents open (a duplicate of the root's own
 * subtree, per hierarchy), its directories not yet. */
static int cgroup_alloc(CgroupRoot *root, const char *name, Cgroup **ret) {
        Cgroup *cg = calloc(1, sizeof *cg);

        if (!cg)
                return -ENOMEM;
        cg->version = root->version;
        cg->root = root;
        cg->peak_fd = -1;
        snprintf(cg->name, sizeof cg->name, "%s", name);
        snprintf(cg->path, sizeof cg->path, "%s%s/" INSTANCE_PREFIX "%s/%s",
                 strcmp(root->path, "/") == 0 ? "" : root->path, root->version == CGROUP_V1 ? "/codeinterp" : "",
                 root->instance, cg->name);
        for (size_t i = 0; i < root->n_dirs; i++) {
                cg->parents[i] = cg->dirs[i] = -1;
                cg->n_dirs = i + 1;
                if ((cg->parents[i] = fcntl(root->own[i], F_DUPFD_CLOEXEC, 3)) < 0) {
                        int k = -errno;
                        cgroup_free(cg);
                        return k;
                }
        }
        *ret = cg;
        return 0;
}

/* Remove a kept cgroup's directories by name (those still there). */
static void kept_remove(CgroupRoot *root, const char *name) {
        for (size_t i = 0; i < root->n_dirs; i++)
                if (unlinkat(root->own[i], name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                        log_warning_errno(errno, "Could not remove the worker cgroup %s: %m", name);
}

/* A kept cgroup opened again with its account reset for a new worker. -ESTALE when it
 * cannot serve (removed meanwhile by somebody else, a process in it, an account that
 * cannot be reset): it is removed then, where it is still there. */
static int cgroup_reuse(CgroupRoot *root, const KeptCgroup *kept, Cgroup **ret) {
        Cgroup *cg;
        int k = cgroup_alloc(root, kept->name, &cg);

        if (k < 0) {
                kept_remove(root, kept->name); /* out of descriptors: not kept for later either */
                return k;
        }
        cg->memory_bytes = kept->memory_bytes;
        cg->max_processes = kept->max_processes;
        for (size_t i = 0; i < cg->n_dirs; i++)
                if ((cg->dirs[i] = openat(cg->parents[i], cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                        k = errno == ENOENT ? -ESTALE : -errno;
                        cgroup_close(cg, false);
                        kept_remove(root, kept->name);
                        return k;
                }
        if (!cgroup_empty(cg) ||
            cgroup_account_reset(cg->dirs[CG_MEMORY], cg->version, &cg->peak_fd, &cg->oom_kills_base) < 0) {
                cgroup_free(cg);
                return -ESTALE;
        }
        *ret = cg;
        return 0;
}

int cgroup_new(CgroupRoot *root, uint64_t memory_bytes, uint32_t max_processes, Cgroup **ret, const char **ret_step) {
        char name[32];
        Cgroup *cg;
        int k;

        if (!root || root->version == CGROUP_NONE) {
                *ret = NULL;
                return 0;
        }
        *ret_step = "reusing its cgroup";
        while (root->n_recycled > 0) {
                cg = NULL;
                k = cgroup_reuse(root, &root->recycled[--root->n_recycled], &cg);
                if (k == -ESTALE)
                        continue; /* the next one, or a new one */
                if (k >= 0 && (k = cgroup_update_limits(cg, memory_bytes, max_processes, ret_step)) < 0)
                        cg = cgroup_free(cg);
                if (k < 0)
                        return k;
                *ret = cg;
                return 0;
        }
        *ret_step = "making its cgroup";
        snprintf(name, sizeof name, "w%" PRIu64, ++root->seq);
        if ((k = cgroup_alloc(root, name, &cg)) < 0)
                return k;
        for (size_t i = 0; i < cg->n_dirs; i++) {
                if (mkdirat(cg->parents[i], cg->name, 0755) < 0) {
                        k = -errno;
                        cgroup_free(cg);
                        return k;
                }
                if ((cg->dirs[i] = openat(cg->parents[i], cg->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                        k = -errno;
                        (void) unlinkat(cg->parents[i], cg->name, AT_REMOVEDIR);
                        cgroup_free(cg);
                        return k;
                }
        }
        if ((k = set_limits(cg, memory_bytes, max_processes, ret_step)) < 0 ||
            (k = cgroup_write_cpu_cap(cg->dirs[cg->version == CGROUP_V2 ? 0 : CG_CPU], cg->version, root->cpu_percent,
                                      ret_step)) < 0) {
                cgroup_free(cg);
                return k;
        }
        *ret = cg;
        return 0;
}

int cgroup_attach(Cgroup *cg, pid_t pid) {
        char s[32];
        int k;

        snprintf(s, sizeof s, "%d", (int) pid);
        for (size_t i = 0; i < cg->n_dirs; i++)
                if ((k = cgroupfs_write(cg->dirs[i], "cgroup.procs", s)) < 0)
                        return k;
        return 0;
}

/* The OOM kills the kernel has counted in the cgroup whose memory directory is dir. */
static int read_oom_kills(int dir, CgroupVersion version, uint64_t *ret) {
        if (version == CGROUP_V2)
                return cgroupfs_read_keyed(dir, "memory.events", "oom_kill", ret);
        int k = cgroupfs_read_keyed(dir, "memory.oom_control", "oom_kill", ret);
        /* Kernels before 4.13 do not count kills: a failed charge is the sign. */
        return k < 0 ? cgroupfs_read_number(dir, "memory.failcnt", ret) : k;
}

int cgroup_stats(Cgroup *cg, CgroupStats *ret) {
        CgroupStats st = {};
        int dir = cg->dirs[CG_MEMORY];
        int k = read_oom_kills(dir, cg->version, &st.oom_kills);

        if (k < 0)
                return k;
        /* Those of earlier workers do not count (a reused cgroup, cgroup_recycle()). */
        st.oom_kills = st.oom_kills >= cg->oom_kills_base ? st.oom_kills - cg->oom_kills_base : st.oom_kills;
        if (cg->peak_fd >= 0)
                st.has_peak = cgroupfs_pread_number(cg->peak_fd, &st.peak_bytes) >= 0;
        else
                st.has_peak = cgroupfs_read_number(
                                      dir, cg->version == CGROUP_V2 ? "memory.peak" : "memory.max_usage_in_bytes",
                                      &st.peak_bytes) >= 0;
        *ret = st;
        return 0;
}

int cgroup_account_reset(int dir, CgroupVersion version, int *peak_fd, uint64_t *ret_oom_kills) {
        int k;

        if (version == CGROUP_V2) {
                /* memory.peak's reset holds for reads through the descriptor written
                 * (kernels 6.12 and later; before, the file takes no write). */
                if (*peak_fd < 0 && (*peak_fd = openat(dir, "memory.peak", O_RDWR | O_CLOEXEC)) < 0)
                        return -errno;
                if (pwrite(*peak_fd, "reset\n", 6, 0) != 6)
                        return errno > 0 ? -errno : -EIO;
        } else if ((k = cgroupfs_write(dir, "memory.max_usage_in_bytes", "0")) < 0)
                return k;
        return read_oom_kills(dir, version, ret_oom_kills);
}

Cgroup *cgroup_recycle(Cgroup *cg) {
        KeptCgroup *kept;
        uint64_t residual;

        if (!cg)
                return NULL;
        if (cg->root->n_recycled >= CG_RECYCLED_MAX || !cgroup_empty(cg) ||
            cgroupfs_read_number(cg->dirs[CG_MEMORY],
                                 cg->version == CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes",
                                 &residual) < 0 ||
            residual > CG_RECYCLE_MAX_RESIDUAL_BYTES)
                return cgroup_free(cg);
        kept = &cg->root->recycled[cg->root->n_recycled++];
        snprintf(kept->name, sizeof kept->name, "%s", cg->name);
        kept->memory_bytes = cg->memory_bytes;
        kept->max_processes = cg->max_processes;
        return cgroup_close(cg, false);
}

void cgroup_recycled_drop(CgroupRoot *root) {
        while (root->n_recycled > 0)
                kept_remove(root, root->recycled[--root->n_recycled].name);
}

int cgroup_open_procs(Cgroup *cg, int fds[static CGROUP_PROCS_MAX], size_t *ret_n) {
        size_t n = 0;

        for (size_t i = 0; i < cg->n_dirs; i++) {
                int fd = openat(cg->dirs[i], "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        int k = -errno;
                        while (n > 0)
                                close(fds[--n]);
                        return k;
                }
                fds[n++] = fd;
        }
        *ret_n = n;
        return 0;
}

int cgroup_clone_fd(const Cgroup *cg) {
        return cg && cg->version == CGROUP_V2 ? cg->dirs[0] : -1;
}

int cgroup_update_limits(Cgroup *cg, uint64_t memory_bytes, uint32_t max_processes, const char **ret_step) {
        if (cg->memory_bytes == memory_bytes && cg->max_processes == max_processes)
                return 0;
        return set_limits(cg, memory_bytes, max_processes, ret_step);
}

void cgroup_kill_members(Cgroup *cg) {
        char buf[4096];

        if (!cg || cg->n_dirs == 0 || cgroupfs_read(cg->dirs[0], "cgroup.procs", buf, sizeof buf) < 0)
                return;
        for (char *p = buf, *end; *p; p = end) {
                long pid = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (pid > 0)
                        (void) kill((pid_t) pid, SIGKILL);
        }
}
