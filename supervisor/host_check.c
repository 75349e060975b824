/* SPDX-License-Identifier: MIT */
/* What this host gives the policy: --check-config's report, step by step (namespaces,
 * Landlock and seccomp, the embedded Python and the packages' binds, /outputs, cgroups,
 * the worker host ids and their leases), and the packages check the daemon also makes
 * before it serves. Each step prints its lines and says whether calls would fail. */
#include "supervisor/host_check.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/landlock.h"
#include "common/userns.h"
#include "contract/runtime.h"
#include "policy/seccomp.h"
#include "supervisor/artifacts.h"
#include "supervisor/cgroup.h"
#include "supervisor/protocol.h"
#include "supervisor/worker_ids.h"

/* Can this host make a worker's namespaces? A child is cloned into the whole set and
 * exits at once. */
static int check_namespaces(void) {
        int pidfd = -1, status = 0;
        pid_t pid = clone_with_pidfd(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                                             CLONE_NEWUTS | CLONE_NEWCGROUP,
                                     SIGCHLD, &pidfd);
        if (pid == 0)
                _exit(0);
        if (pid < 0)
                return pid;
        close(pidfd);
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

/* Can a worker's host uid reach path on its own? Asked in a child that switches to the
 * first of the block (every id of it is "others" to the host's files). Informational:
 * workers bind the runtime from descriptors opened as root. Rootless the worker is this
 * user on the host: asked here. */
static bool worker_uid_reaches(const Policy *p, const char *path) {
        uid_t uid = p->worker_host_id_base;
        int status = 0;
        pid_t pid;

        if (userns_rootless())
                return access(path, R_OK) == 0;
        pid = fork();
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(2);
                _exit(access(path, R_OK) < 0 ? 1 : 0);
        }
        if (pid < 0 || waitpid(pid, &status, 0) < 0)
                return false;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The embedded Python the build chose (cmake/python.cmake) and what the worker binds. */
static int check_python(const Policy *p) {
        const char *cursor = NULL;
        uid_t host_uid = userns_rootless() ? geteuid() : p->worker_host_id_base;
        char path[PATH_MAX];
        int r, bad = 0;

        printf("embedded python: %s, from %s\n", CODEINTERP_PY_VERSION, CODEINTERP_PYTHON);
        printf("  prefix %s, stdlib %s, lib-dynload %s, libpython in %s\n", CODEINTERP_PY_PREFIX, CODEINTERP_PY_STDLIB,
               CODEINTERP_PY_DYNLOAD, CODEINTERP_PY_LIBDIR);
        printf("  worker root binds (read-only, from descriptors opened as %s):\n",
               userns_rootless() ? "this user" : "root");
        while ((r = runtime_path_next(runtime_binds, &cursor, path)) > 0) {
                _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
                if (fd < 0) {
                        printf("    %s: missing (%m)\n", path);
                        bad = 1;
                        continue;
                }
                printf("    %s: present; worker host uid %u %s\n", path, (unsigned) host_uid,
                       worker_uid_reaches(p, path) ? "can reach it too"
                                                   : "cannot reach it by path (fine: bound from the descriptor)");
        }
        if (r < 0) {
                printf("    a configured runtime path is malformed\n");
                bad = 1;
        }
        cursor = NULL;
        while ((r = runtime_path_next(runtime_masks, &cursor, path)) > 0)
                printf("    %s: hidden under an empty read-only tmpfs\n", path);
        if (access(CODEINTERP_PY_STDLIB "/os.py", R_OK) < 0) {
                printf("  the standard library is missing: %m\n");
                bad = 1;
        }
        return bad ? -ENOENT : 0;
}

/* The policy's pythonPackages against what this build's interpreter has (configure
 * time, contract/runtime.h): 0, or -ENOPKG with the first missing one and why in msg. */
int host_check_packages(const Policy *p, char *msg, size_t size) {
        PolicyPackage missing;

        if (runtime_packages_missing(p->python_packages, &missing) == 0)
                return 0;
        snprintf(msg, size,
                 "pythonPackages: %s is not available to this build's Python %s (%s): %s; install Debian's "
                 "python3-%s for /usr/bin/python3 (make deps) and build against it, or remove it from the policy",
                 policy_package_to_string(missing), CODEINTERP_PY_VERSION, CODEINTERP_PYTHON,
                 runtime_packages[missing].missing, policy_package_to_string(missing));
        return -ENOPKG;
}

/* The policy's packages: what each brings into the worker's root. */
static int check_packages(const Policy *p) {
        PolicyPackage package = 0;
        const char *cursor = NULL;
        char names[POLICY_PACKAGES_NAMES_MAX], path[PATH_MAX], msg[1024];
        int r, bad = 0;

        policy_packages_format(p->python_packages, names, sizeof names);
        printf("python packages: %s\n", names[0] ? names : "none (import numpy fails in a worker)");
        for (PolicyPackage k = 0; k < _POLICY_PACKAGE_MAX; k++)
                if (runtime_packages[k].missing)
                        printf("  %s: not available to this build (%s)\n", policy_package_to_string(k),
                               runtime_packages[k].missing);
        if (host_check_packages(p, msg, sizeof msg) < 0) {
                printf("  refused: %s\n", msg);
                return -ENOPKG;
        }
        if (!p->python_packages)
                return 0;
        printf("  extra read-only binds:\n");
        while ((r = runtime_package_bind_next(p->python_packages, &package, &cursor, path)) > 0) {
                _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
                printf("    %s: %s\n", path, fd < 0 ? "missing" : "present");
                bad |= fd < 0;
        }
        return bad || r < 0 ? -ENOENT : 0;
}

static void check_identity(const Policy *p) {
        printf("policy: %s (sha256 %s)\n", p->name, p->sha256);
        printf("worker start: %s, active workers: %u, queue: %u\n", policy_worker_start_to_string(p->worker_start),
               policy_active_workers(p), p->max_queued_calls);
        if (userns_rootless())
                printf("running as root: no, rootless (uid %u): workers are uid %u, gid %u inside and this user's "
                       "uid %u, gid %u on the host (docs/security.md)\n",
                       (unsigned) geteuid(), (unsigned) p->worker_uid, (unsigned) p->worker_gid, (unsigned) geteuid(),
                       (unsigned) getegid());
        else
                printf("running as root: yes: workers are uid %u, gid %u inside, each with a host uid and gid of "
                       "its own from the block below\n",
                       (unsigned) p->worker_uid, (unsigned) p->worker_gid);
}

static bool check_config_namespaces(void) {
        int ns = check_namespaces();

        printf("user, mount, pid, net, ipc, uts and cgroup namespaces: %s\n",
               ns < 0 ? strerror(-ns) : "can be created");
        if (ns < 0 && userns_rootless())
                printf("  (rootless needs unprivileged user namespaces: sysctl user.max_user_namespaces > 0, and "
                       "kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0 where "
                       "the kernel has them)\n");
        if (ns < 0 && (ns == -EPERM || ns == -ENOSYS) && proc_under_seccomp_filter())
                printf("  (codeinterpd runs under a seccomp filter, such as a container engine's default profile, "
                       "which may refuse this: run it with packaging/kubernetes/seccomp-codeinterpd.json as a "
                       "Localhost profile, or unconfined)\n");
        return ns < 0;
}

/* Landlock (informational) and the seccomp filter. */
static bool check_config_confinement(const Policy *p) {
        struct sock_fprog prog;
        int k = landlock_abi();

        if (k > 0)
                printf("landlock: ABI %d (workers get the filesystem fence)\n", k);
        else
                printf("landlock: not available (workers run without that layer)\n");
        k = policy_seccomp_compile(p->seccomp_deny, &prog);
        printf("seccomp filter: %s\n", k < 0 ? strerror(-k) : "compiles");
        if (k >= 0)
                policy_seccomp_fprog_free(&prog);
        return k < 0;
}

static bool check_config_outputs(const Policy *p) {
        int fd = -1, k;

        if (p->max_artifacts == 0) {
                printf("/outputs tmpfs: off (maxArtifacts: 0)\n");
                return false;
        }
        k = artifacts_mount_new(p->max_artifact_bytes, p->max_artifacts, &fd);
        if (k >= 0)
                printf("/outputs tmpfs: can be made (%u files, %llu bytes)\n", p->max_artifacts,
                       (unsigned long long) p->max_artifact_bytes);
        else if (k == -EPERM)
                printf("/outputs tmpfs: not in this mount namespace; codeinterpd moves into a private "
                       "one at start\n");
        else
                printf("/outputs tmpfs: %s (calls would fail as worker_error)\n", strerror(-k));
        if (fd >= 0)
                close(fd);
        return k < 0 && k != -EPERM;
}

static bool check_config_cgroups(const Policy *p, const char *cgroup_fs, uint64_t room) {
        CgroupRoot *cg = NULL;
        char why[512];
        int k;

        if (room == UINT64_MAX)
                printf("memory cgroup: no limit on the supervisor's cgroup\n");
        else
                printf("memory cgroup: %llu bytes left\n", (unsigned long long) room);
        k = cgroup_root_open(p->cgroups, p->cpu_bandwidth_percent, cgroup_fs, true, &cg, why, sizeof why);
        if (k < 0)
                printf("cgroup per worker: none, but the policy requires one (%s)\n", why);
        else
                printf("cgroup per worker: %s%s%s%s\n", proto_cgroup_name(cgroup_root_version(cg)), why[0] ? " (" : "",
                       why, why[0] ? ")" : "");
        if (k >= 0 && p->cpu_bandwidth_percent == 0)
                printf("cpu cap: off\n");
        else if (k >= 0 && cgroup_root_cpu_percent(cg) > 0)
                printf("cpu cap: %u%% of one CPU per worker\n", (unsigned) cgroup_root_cpu_percent(cg));
        else if (k >= 0)
                printf("cpu cap: none, workers run without the %u%% cap (%s)\n", (unsigned) p->cpu_bandwidth_percent,
                       cgroup_root_cpu_why(cg));
        cgroup_root_free(cg);
        return k < 0;
}

static bool check_config_host_ids(const Policy *p, const char *lease_dir, IdLeases **leases) {
        char why[512];
        bool bad;
        int k;

        if (userns_rootless()) {
                printf("worker host ids: none of their own, rootless (workerHostIdBase and workerHostIdCount are "
                       "not used)\n");
                return false;
        }
        k = worker_ids_check(p->worker_host_id_base, p->worker_host_id_count, NULL, NULL, why, sizeof why);
        printf("worker host ids: %u-%llu (uid %u, gid %u inside each worker): %s%s\n",
               (unsigned) p->worker_host_id_base,
               (unsigned long long) p->worker_host_id_base + p->worker_host_id_count - 1, (unsigned) p->worker_uid,
               (unsigned) p->worker_gid, k < 0 ? "refused, " : "free", why);
        bad = k < 0;
        k = id_leases_open(lease_dir, p->worker_host_id_base, p->worker_host_id_count, leases, why, sizeof why);
        if (k < 0)
                printf("worker host id leases: refused, %s\n", why);
        else
                printf("worker host id leases: in %s, shared with the supervisors on this host that use the "
                       "same block\n",
                       lease_dir);
        return bad || k < 0;
}

bool host_check_report(const Policy *p, const char *cgroup_fs, const char *lease_dir, IdLeases **leases) {
        uint64_t room = cgroup_self_memory_available();
        bool bad = false;

        check_identity(p);
        bad |= check_config_namespaces();
        bad |= check_config_confinement(p);
        bad |= check_python(p) < 0;
        bad |= check_config_outputs(p);
        bad |= check_packages(p) < 0;
        bad |= check_config_cgroups(p, cgroup_fs, room);
        bad |= check_config_host_ids(p, lease_dir, leases);
        return bad;
}
