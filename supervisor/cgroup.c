/* SPDX-License-Identifier: MIT */
/* A cgroup per worker (cgroup.h): finding and preparing the supervisor's cgroup root
 * (v2, or v1's memory, pids and cpu hierarchies), its orphans and its removal. Each
 * worker's cgroup is cgroup_worker.c's; file access is cgroupfs.c's. */
#include "supervisor/cgroup.h"
#include "supervisor/cgroup_internal.h"
#include "supervisor/cgroupfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

static int open_dir(const char *path) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* How long an orphan's empty cgroup is retried while the kernel still releases it. */
#define CG_ORPHAN_RMDIR_TRIES 1000

/* rmdir of a cgroup another supervisor left, retried (1 ms apart, at most
 * CG_ORPHAN_RMDIR_TRIES times) while it is EBUSY and holds no process: the kernel is
 * still releasing it after its last process left. One that holds a process is not
 * waited for. -1 with errno as rmdir. */
static int rmdir_retry(int dir, const char *name) {
        struct timespec pause = { .tv_nsec = CG_RMDIR_SLEEP_NSEC };
        char procs_file[300], buf[16];

        snprintf(procs_file, sizeof procs_file, "%s/cgroup.procs", name);
        for (int t = 0;; t++) {
                int e;

                if (unlinkat(dir, name, AT_REMOVEDIR) == 0)
                        return 0;
                e = errno;
                if (e != EBUSY || t >= CG_ORPHAN_RMDIR_TRIES || cgroupfs_read(dir, procs_file, buf, sizeof buf) < 0 ||
                    buf[0] != 0) {
                        errno = e;
                        return -1;
                }
                nanosleep(&pause, NULL);
        }
}

/* A directory stream over a duplicate of dir (dir stays open and ours); NULL on failure. */
static DIR *opendir_dup(int dir) {
        int fd = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

        if (!d && fd >= 0)
                close(fd);
        return d;
}

/* Remove the worker cgroups ("w<n>") in dir, a supervisor's own subtree. One that still
 * holds a process (EBUSY) is left; log says whether that is worth a warning. */
static void remove_workers(int dir, const char *where, bool log) {
        DIR *d = opendir_dup(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (de->d_name[0] == 'w' && de->d_type == DT_DIR && rmdir_retry(dir, de->d_name) < 0 &&
                    errno != ENOENT && log)
                        log_warning_errno(errno, "Could not remove the worker cgroup %s/%s: %m", where, de->d_name);
        closedir(d);
}

/* Remove the subtrees ("ci-<instance>") in parent whose owner is gone: the owner holds
 * an flock on its subtree for as long as it lives (the kernel drops it when the owner
 * dies, in whatever pid namespace or container it ran), so a subtree whose lock can be
 * taken has no owner. Never one a live supervisor holds, never anything else (the
 * "w<pid>-<n>" cgroups of versions before 0.9 are left to their owners). */
static void remove_orphans(int parent, const char *own) {
        DIR *d = opendir_dup(parent);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_close_ int sub = -1;

                if (strncmp(de->d_name, INSTANCE_PREFIX, strlen(INSTANCE_PREFIX)) != 0 || strcmp(de->d_name, own) == 0)
                        continue;
                sub = openat(parent, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 || flock(sub, LOCK_EX | LOCK_NB) < 0)
                        continue; /* gone meanwhile, or its owner lives */
                remove_workers(sub, de->d_name, false);
                if (rmdir_retry(parent, de->d_name) == 0)
                        log_info("Removed the worker cgroups of a supervisor that is gone (%s)", de->d_name);
                else if (errno != ENOENT)
                        log_warning_errno(errno, "Could not remove %s, left by a supervisor that is gone: %m",
                                          de->d_name);
        }
        closedir(d);
}

static const char *const controllers[] = { "memory", "pids", NULL };
static const char *const cpu_controller[] = { "cpu", NULL };

/* Whether this process may make the workers' cgroups in dir/name: the directory exists
 * (made by another supervisor of the same cgroup, say a root one beside a rootless one)
 * says nothing about that. */
static int writable_at(int dir, const char *name) {
        return faccessat(dir, name, W_OK | X_OK, AT_EACCESS) < 0 ? -errno : 0;
}

/* v2 with the cap on: the cpu controller for the workers' cgroups (dir is their parent).
 * Unavailable: the cap stays 0 with root->cpu_why set; cgroup_root_open() decides. */
static void enable_v2_cpu(CgroupRoot *root, int dir, bool dry_run) {
        int k;

        if (!cgroupfs_has_words(dir, "cgroup.controllers", cpu_controller)) {
                set_why(root->cpu_why, sizeof root->cpu_why, "cgroup v2: the cpu controller is not available in %s",
                        root->path);
                return;
        }
        if (!cgroupfs_has_words(dir, "cgroup.subtree_control", cpu_controller)) {
                if (dry_run)
                        k = faccessat(dir, "cgroup.subtree_control", W_OK, 0) < 0 ? -errno : 0;
                else
                        k = cgroupfs_write(dir, "cgroup.subtree_control", "+cpu");
                if (k < 0) {
                        set_why(root->cpu_why, sizeof root->cpu_why, "cgroup v2: cannot enable cpu in %s: %s",
                                root->path, strerror(-k));
                        return;
                }
        }
        root->cpu_percent = root->want_cpu_percent;
}

/* v2: the workers' parent is the supervisor's cgroup when its children may have the
 * controllers; the supervisor moves itself into a leaf "supervisor" first if needed. */
static int open_v2(CgroupRoot *root, const char *mnt, const char *own, bool dry_run, char *why, size_t why_len) {
        char base[2 * PATH_MAX], parent[2 * PATH_MAX], pid[32];
        const char *leaf = strrchr(own, '/');
        _cleanup_close_ int dir = -1, parent_dir = -1;
        int k;

        snprintf(base, sizeof base, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
        /* Already moved (a restart in the same unit): the parent of our leaf. */
        if (leaf && strcmp(leaf, "/supervisor") == 0 && leaf != own) {
                snprintf(parent, sizeof parent, "%s%.*s", mnt, (int) (leaf - own), own);
                parent_dir = open_dir(parent);
                if (parent_dir >= 0 && cgroupfs_has_words(parent_dir, "cgroup.subtree_control", controllers) &&
                    writable_at(parent_dir, ".") == 0) {
                        snprintf(root->path, sizeof root->path, "%.*s", (int) (leaf - own), own);
                        root->dirs[0] = TAKE_FD(parent_dir);
                        root->n_dirs = 1;
                        if (root->want_cpu_percent > 0)
                                enable_v2_cpu(root, root->dirs[0], dry_run);
                        return 0;
                }
        }
        dir = open_dir(base);
        if (dir < 0) {
                set_why(why, why_len, "cgroup v2: cannot open %s: %s", base, strerror(-dir));
                return dir;
        }
        if (!cgroupfs_has_words(dir, "cgroup.controllers", controllers)) {
                set_why(why, why_len, "cgroup v2: the memory and pids controllers are not available in %s", base);
                return -EOPNOTSUPP;
        }
        if (!cgroupfs_has_words(dir, "cgroup.subtree_control", controllers)) {
                if (dry_run) {
                        if (faccessat(dir, "cgroup.subtree_control", W_OK, 0) < 0) {
                                set_why(why, why_len, "cgroup v2: %s is not writable", base);
                                return -EACCES;
                        }
                } else {
                        /* No process may stay in a cgroup whose children get controllers. */
                        if (mkdirat(dir, "supervisor", 0755) < 0 && errno != EEXIST) {
                                k = -errno;
                                set_why(why, why_len, "cgroup v2: cannot make %s/supervisor: %s", base, strerror(-k));
                                return k;
                        }
                        snprintf(pid, sizeof pid, "%d", (int) getpid());
                        if ((k = cgroupfs_write(dir, "supervisor/cgroup.procs", pid)) < 0) {
                                set_why(why, why_len, "cgroup v2: cannot move into %s/supervisor: %s", base,
                                        strerror(-k));
                                return k;
                        }
                        if ((k = cgroupfs_write(dir, "cgroup.subtree_control", "+memory +pids")) < 0) {
                                set_why(why, why_len, "cgroup v2: cannot enable memory and pids in %s: %s", base,
                                        strerror(-k));
                                return k;
                        }
                }
        }
        if ((k = writable_at(dir, ".")) < 0) {
                set_why(why, why_len, "cgroup v2: cannot make cgroups in %s: %s", base, strerror(-k));
                return k;
        }
        snprintf(root->path, sizeof root->path, "%s", own);
        root->dirs[0] = TAKE_FD(dir);
        root->n_dirs = 1;
        if (root->want_cpu_percent > 0)
                enable_v2_cpu(root, root->dirs[0], dry_run);
        return 0;
}

/* v1: a "codeinterp" directory under the supervisor's memory and pids cgroups, and its
 * cpu cgroup when the CPU cap is on. It is shared by the supervisors of one cgroup:
 * each makes it again when it needs it and tries to remove it at exit (it goes when
 * the last one's workers are gone). */
static int open_v1(CgroupRoot *root, const char *fs, const char *memory, const char *pids, const char *cpu,
                   bool dry_run, char *why, size_t why_len) {
        const char *hier[CG_MAX_DIRS] = { "memory", "pids", "cpu" }, *own[CG_MAX_DIRS] = { memory, pids, cpu };
        size_t n = root->want_cpu_percent > 0 ? CG_MAX_DIRS : CG_CPU;
        char base[PATH_MAX];
        int k;

        for (size_t i = 0; i < n; i++) {
                _cleanup_close_ int dir = -1;

                /* Without the cpu hierarchy the workers run without the cap (the caller
                 * decides whether that is acceptable). */
                if (i == CG_CPU && !own[i][0]) {
                        set_why(root->cpu_why, sizeof root->cpu_why, "cgroup v1: no cpu hierarchy");
                        break;
                }
                if (!own[i][0]) {
                        set_why(why, why_len, "cgroup v1: no %s hierarchy", hier[i]);
                        return -EOPNOTSUPP;
                }
                snprintf(base, sizeof base, "%s/%s%s", fs, hier[i], strcmp(own[i], "/") == 0 ? "" : own[i]);
                dir = open_dir(base);
                if (dir < 0 && i == CG_CPU) {
                        set_why(root->cpu_why, sizeof root->cpu_why, "cgroup v1: cannot open %s: %s", base,
                                strerror(-dir));
                        break;
                }
                if (dir < 0) {
                        set_why(why, why_len, "cgroup v1: cannot open %s: %s", base, strerror(-dir));
                        return dir;
                }
                if (dry_run)
                        k = writable_at(dir, faccessat(dir, "codeinterp", F_OK, 0) == 0 ? "codeinterp" : ".");
                else
                        k = mkdirat(dir, "codeinterp", 0755) < 0 && errno != EEXIST ? -errno
                                                                                    : writable_at(dir, "codeinterp");
                if (k < 0) {
                        if (i == CG_CPU) {
                                set_why(root->cpu_why, sizeof root->cpu_why, "cgroup v1: cannot make %s/codeinterp: %s",
                                        base, strerror(-k));
                                break;
                        }
                        set_why(why, why_len, "cgroup v1: cannot make %s/codeinterp: %s", base, strerror(-k));
                        return k;
                }
                root->dirs[root->n_dirs++] = TAKE_FD(dir);
                if (i == CG_CPU)
                        root->cpu_percent = root->want_cpu_percent;
        }
        snprintf(root->path, sizeof root->path, "%s", strcmp(memory, "/") == 0 ? "" : memory);
        return 0;
}

/* The workers' parent under each of root's directories (v1: its "codeinterp"), opened;
 * -1 where there is none. */
static int workers_parent(const CgroupRoot *root, size_t i) {
        return root->version == CGROUP_V1 ? openat(root->dirs[i], "codeinterp", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                          : fcntl(root->dirs[i], F_DUPFD_CLOEXEC, 3);
}

/* "ci-<instance>", this supervisor's subtree's name. */
static void own_name(const CgroupRoot *root, char *buf, size_t size) {
        snprintf(buf, size, INSTANCE_PREFIX "%s", root->instance);
}

void cgroup_root_remove_own(CgroupRoot *root) {
        if (root)
                cgroup_recycled_drop(root);
        for (size_t i = 0; root && i < root->n_dirs; i++)
                if (root->own[i] >= 0)
                        remove_workers(root->own[i], root->path, true);
}

/* Remove this supervisor's subtree (once empty) and close every directory. */
static void root_close(CgroupRoot *root) {
        char name[32];

        own_name(root, name, sizeof name);
        for (size_t i = 0; i < root->n_dirs; i++) {
                if (root->own[i] >= 0) {
                        int parent = workers_parent(root, i);
                        /* Still locked while it goes: nobody else takes it for an orphan. */
                        if (parent >= 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                                log_warning_errno(errno, "Could not remove this supervisor's cgroup subtree %s: %m",
                                                  name);
                        if (parent >= 0)
                                close(parent);
                        close(root->own[i]);
                }
                /* v1's "codeinterp" goes when it is empty (another supervisor may use it). */
                if (root->version == CGROUP_V1)
                        (void) unlinkat(root->dirs[i], "codeinterp", AT_REMOVEDIR);
                close(root->dirs[i]);
                root->own[i] = root->dirs[i] = -1;
        }
        root->n_dirs = 0;
}

CgroupRoot *cgroup_root_free(CgroupRoot *root) {
        if (root) {
                cgroup_recycled_drop(root);
                root_close(root);
                free(root);
        }
        return NULL;
}

/* Whether fd is on a cgroup filesystem (not a unit test's fake tree, which has no
 * controllers to enable). */
static bool on_cgroupfs(int fd) {
        struct statfs st;

        return fstatfs(fd, &st) < 0 || st.f_type == CGROUP2_SUPER_MAGIC || st.f_type == CGROUP_SUPER_MAGIC;
}

/* Make and lock this supervisor's subtree under hierarchy i's workers' parent, and
 * remove the subtrees there whose owners are gone. v2 gives the subtree the controllers
 * its children (the workers' cgroups) need. */
static int make_own(CgroupRoot *root, size_t i, char *why, size_t why_len) {
        char name[32];
        int k = 0;

        own_name(root, name, sizeof name);
        /* Retried when the subtree vanishes before it is locked (another supervisor took it
         * for an orphan in that moment) or v1's "codeinterp" between its mkdir and ours. */
        for (int t = 0; t < 4; t++) {
                _cleanup_close_ int parent = -1, fd = -1;
                struct stat a, b;

                if (root->version == CGROUP_V1 && mkdirat(root->dirs[i], "codeinterp", 0755) < 0 && errno != EEXIST) {
                        k = -errno;
                        break;
                }
                if ((parent = workers_parent(root, i)) < 0) {
                        k = -errno;
                        continue;
                }
                if (mkdirat(parent, name, 0755) < 0) {
                        k = -errno;
                        if (k == -ENOENT)
                                continue;
                        break;
                }
                if ((fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
                    flock(fd, LOCK_EX | LOCK_NB) < 0) {
                        k = -errno;
                        continue;
                }
                if (fstat(fd, &a) < 0 || fstatat(parent, name, &b, AT_SYMLINK_NOFOLLOW) < 0 || a.st_ino != b.st_ino) {
                        k = -ENOENT;
                        continue;
                }
                if (root->version == CGROUP_V2 && on_cgroupfs(fd)) {
                        const char *want = root->cpu_percent > 0 ? "+memory +pids +cpu" : "+memory +pids";
                        if ((k = cgroupfs_write(fd, "cgroup.subtree_control", want)) < 0) {
                                set_why(why, why_len, "cgroup v2: cannot enable %s in %s/%s: %s", want, root->path,
                                        name, strerror(-k));
                                (void) unlinkat(parent, name, AT_REMOVEDIR);
                                return k;
                        }
                }
                root->own[i] = TAKE_FD(fd);
                remove_orphans(parent, name);
                return 0;
        }
        set_why(why, why_len, "cgroup: cannot make this supervisor's subtree %s under %s: %s", name, root->path,
                strerror(-k));
        return k;
}

/* Where this supervisor's cgroups are, v2 tried first, then v1: root->version says what
 * was found (CGROUP_NONE: nothing usable, why says what was missing). Returns the last
 * step's result. */
static int open_hierarchy(CgroupRoot *root, const char *fs, bool dry_run, char *why, size_t why_len) {
        char v2[PATH_MAX], memory[PATH_MAX], pids[PATH_MAX], cpu[PATH_MAX], mnt[PATH_MAX], probe[PATH_MAX + 32];
        int k;

        k = cgroupfs_own(v2, memory, pids, cpu, sizeof v2);
        if (k < 0)
                set_why(why, why_len, "cannot read /proc/self/cgroup: %s", strerror(-k));
        if (k >= 0 && v2[0]) {
                /* Pure v2 at fs, or the unified hierarchy of a hybrid at fs/unified. */
                snprintf(mnt, sizeof mnt, "%s", fs);
                snprintf(probe, sizeof probe, "%s/cgroup.controllers", fs);
                if (access(probe, F_OK) < 0)
                        snprintf(mnt, sizeof mnt, "%s/unified", fs);
                k = open_v2(root, mnt, v2, dry_run, why, why_len);
                if (k >= 0)
                        root->version = CGROUP_V2;
        }
        if (root->version == CGROUP_NONE && (memory[0] || pids[0])) {
                char why_v2[256];
                snprintf(why_v2, sizeof why_v2, "%s", why);
                k = open_v1(root, fs, memory, pids, cpu, dry_run, why, why_len);
                if (k >= 0)
                        root->version = CGROUP_V1;
                else if (why_v2[0]) {
                        size_t n = strlen(why);
                        snprintf(why + n, why_len - n, "; %s", why_v2);
                }
        }
        return k;
}

int cgroup_root_open(PolicyCgroups want, uint32_t cpu_percent, const char *fs, bool dry_run, CgroupRoot **ret,
                     char *why, size_t why_len) {
        CgroupRoot *root = calloc(1, sizeof *root);
        int k = 0;

        if (!root)
                return -ENOMEM;
        why[0] = 0;
        for (size_t i = 0; i < CG_MAX_DIRS; i++)
                root->own[i] = -1;
        {
                uint64_t r;
                if (getrandom(&r, sizeof r, 0) != (ssize_t) sizeof r) {
                        k = -errno;
                        set_why(why, why_len, "getrandom: %s", strerror(-k));
                        free(root);
                        return k;
                }
                snprintf(root->instance, sizeof root->instance, "%016" PRIx64, r);
        }
        root->version = CGROUP_NONE;
        root->want_cpu_percent = cpu_percent;
        if (want == POLICY_CGROUPS_OFF) {
                set_why(why, why_len, "cgroups: off");
                if (cpu_percent > 0)
                        set_why(root->cpu_why, sizeof root->cpu_why, "cgroups: off");
                *ret = root;
                return 0;
        }
        k = open_hierarchy(root, fs, dry_run, why, why_len);
        if (root->version == CGROUP_NONE) {
                for (size_t i = 0; i < root->n_dirs; i++)
                        close(root->dirs[i]);
                root->n_dirs = 0;
                if (!why[0])
                        set_why(why, why_len, "no cgroup hierarchy with the memory and pids controllers");
                if (want == POLICY_CGROUPS_REQUIRED) {
                        free(root);
                        return k < 0 ? k : -EOPNOTSUPP;
                }
                if (cpu_percent > 0)
                        set_why(root->cpu_why, sizeof root->cpu_why, "%s", why);
        } else if (cpu_percent > 0 && root->cpu_percent == 0 && want == POLICY_CGROUPS_REQUIRED) {
                /* A cap the policy asks for that cannot be applied: refuse, as for the cgroup. */
                set_why(why, why_len, "cpuBandwidthPercent %" PRIu32 " needs the cpu controller: %s", cpu_percent,
                        root->cpu_why);
                cgroup_root_free(root);
                return -EOPNOTSUPP;
        } else if (!dry_run)
                for (size_t i = 0; i < root->n_dirs; i++)
                        if ((k = make_own(root, i, why, why_len)) < 0) {
                                if (want == POLICY_CGROUPS_REQUIRED) {
                                        cgroup_root_free(root);
                                        return k;
                                }
                                root_close(root); /* auto: without, and why says why */
                                root->version = CGROUP_NONE;
                                root->cpu_percent = 0;
                                set_why(root->cpu_why, sizeof root->cpu_why, "%s", why);
                                break;
                        }
        *ret = root;
        return 0;
}

CgroupVersion cgroup_root_version(const CgroupRoot *root) {
        return root ? root->version : CGROUP_NONE;
}

uint32_t cgroup_root_cpu_percent(const CgroupRoot *root) {
        return root ? root->cpu_percent : 0;
}

const char *cgroup_root_cpu_why(const CgroupRoot *root) {
        return root ? root->cpu_why : "";
}

const char *cgroup_root_instance(const CgroupRoot *root) {
        return root && root->version != CGROUP_NONE ? root->instance : "";
}
