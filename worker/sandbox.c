/* SPDX-License-Identifier: MIT */
/* Entering the sandbox, in the order sandbox.h lists: the runtime opened, credentials
 * taken, the minimal root built and pivoted into (/dev, accounts, /inputs), then
 * capabilities dropped, rlimits, Landlock and seccomp applied. */
#include "worker/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/landlock.h"
#include "common/userns.h"
#include "contract/fds.h"
#include "contract/runtime.h"
#include "common/util.h"
#include "policy/seccomp.h"

/* Where the new root is assembled, inside the worker's private mount namespace
 * (a tmpfs mounted over it there; the host's directory is never touched). */
#define NEWROOT "/tmp"

/* The worker's /tmp tmpfs (its size in bytes): mounted by sandbox_prepare() at the
 * size it is told (a zygote: its policy's tmpBytes) or one page, and remounted by
 * sandbox_finish() only when the call's tmpBytes differs (a policy reloaded since). */
#define TMP_OPTS_FMT "size=%llu,mode=1777,nr_inodes=4096"
static uint64_t tmp_size;

/* The capabilities setup needs inside the worker's user namespace. */
static const cap_value_t setup_caps[] = { CAP_SYS_ADMIN, CAP_SETPCAP };

#define FAIL(stage, err)                                                                                               \
        do {                                                                                                           \
                *ret_stage = (stage);                                                                                  \
                return -abs(err);                                                                                      \
        } while (0)

/* The runtime descriptors: what CPython needs (the standard library, its extension
 * modules, the shared libraries they load; contract/runtime.h), one O_PATH descriptor
 * per configured path, opened while the process still has its creator's credentials
 * and bound later by setup_root(). */
void sandbox_runtime_close(SandboxRuntime *rt) {
        for (size_t i = 0; i < rt->n; i++)
                closep(&rt->fd[i]);
        rt->n = 0;
        for (size_t i = 0; i < SANDBOX_HOST_DATA_MAX; i++)
                closep(&rt->data_fd[i]);
}

/* Data, not code, that ordinary programs expect of a Linux root: zoneinfo.ZoneInfo's
 * time zone files (tzdata), the C.UTF-8 locale (locale.setlocale), and the MIME types
 * table (mimetypes: 1,500 types instead of its built-in 150). Each bound read-only,
 * nodev, and left out when the host lacks it. */
static const char *const sandbox_host_data[SANDBOX_HOST_DATA_MAX] = {
        "/usr/share/zoneinfo",
        "/usr/lib/locale/C.utf8",
        "/etc/mime.types",
};

/* The runtime's paths in bind order: the interpreter's, then the packages'. */
typedef struct RuntimeCursor {
        bool base_done;
        const char *base;
        PolicyPackage package;
        const char *cursor;
} RuntimeCursor;

static int runtime_next(uint32_t packages, RuntimeCursor *c, char ret_path[static PATH_MAX]) {
        int r;

        if (!c->base_done) {
                r = runtime_path_next(runtime_binds, &c->base, ret_path);
                if (r != 0)
                        return r;
                c->base_done = true;
        }
        return runtime_package_bind_next(packages, &c->package, &c->cursor, ret_path);
}

int sandbox_runtime_open(uint32_t packages, SandboxRuntime *ret, SetupStage *ret_stage) {
        SandboxRuntime rt = SANDBOX_RUNTIME_EMPTY;
        RuntimeCursor c = {};
        char path[PATH_MAX];
        int r;

        rt.packages = packages;
        for (size_t i = 0; i < SANDBOX_HOST_DATA_MAX; i++) {
                rt.data_fd[i] = open(sandbox_host_data[i], O_PATH | O_CLOEXEC);
                if (rt.data_fd[i] < 0 && errno != ENOENT) {
                        r = -errno;
                        sandbox_runtime_close(&rt);
                        FAIL(SETUP_STAGE_MOUNT_BIND, r);
                }
        }

        /* A package this build lacks has no binds (the supervisor refuses such a policy
         * at start, and the zygote's preload would fail on its import). */
        while ((r = runtime_next(packages, &c, path)) > 0) {
                int fd;

                if (rt.n >= SANDBOX_RUNTIME_MAX) {
                        sandbox_runtime_close(&rt);
                        FAIL(SETUP_STAGE_MOUNT_BIND, E2BIG);
                }
                fd = open(path, O_PATH | O_CLOEXEC);
                if (fd < 0) {
                        r = -errno;
                        sandbox_runtime_close(&rt);
                        FAIL(SETUP_STAGE_MOUNT_BIND, r);
                }
                rt.fd[rt.n++] = fd;
        }
        if (r < 0) {
                sandbox_runtime_close(&rt);
                FAIL(SETUP_STAGE_MOUNT_BIND, r);
        }
        *ret = rt;
        return 0;
}

int sandbox_become(uid_t uid, gid_t gid, SetupStage *ret_stage) {
        _cleanup_cap_free_ cap_t caps = NULL;

        /* The creator ran as root: drop its supplementary groups before anything else.
         * Rootless, the kernel forbids it (setgroups is "deny" in our namespace, the
         * condition of an unprivileged gid map): the supervisor's groups stay, unmapped. */
        if (setgroups(0, NULL) < 0 && !(errno == EPERM && userns_setgroups_denied()))
                FAIL(SETUP_STAGE_IDENTITY, errno);
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                FAIL(SETUP_STAGE_IDENTITY, errno);
        if (setresgid(gid, gid, gid) < 0)
                FAIL(SETUP_STAGE_IDENTITY, errno);
        if (setresuid(uid, uid, uid) < 0)
                FAIL(SETUP_STAGE_IDENTITY, errno);

        /* Keep only what setup needs (namespace-scoped: these are capabilities in the
         * worker's own user namespace, worthless on the host). An empty inheritable set
         * also clears any ambient capability carried across an exec. */
        caps = cap_init();
        if (!caps)
                FAIL(SETUP_STAGE_CAPS_KEEP, ENOMEM);
        if (cap_set_flag(caps, CAP_PERMITTED, ELEMENTSOF(setup_caps), setup_caps, CAP_SET) < 0 ||
            cap_set_flag(caps, CAP_EFFECTIVE, ELEMENTSOF(setup_caps), setup_caps, CAP_SET) < 0)
                FAIL(SETUP_STAGE_CAPS_KEEP, errno);
        if (cap_set_proc(caps) < 0)
                FAIL(SETUP_STAGE_CAPS_KEEP, errno);
        return 0;
}

/* A bind mount inherits locked flags (nosuid, nodev, noexec...) from its source;
 * a read-only remount must repeat them or the kernel refuses it in a user namespace. */
static unsigned long locked_flags(const char *path) {
        static const struct {
                unsigned long st, ms;
        } map[] = {
                { ST_NOSUID, MS_NOSUID },   { ST_NODEV, MS_NODEV },           { ST_NOEXEC, MS_NOEXEC },
                { ST_NOATIME, MS_NOATIME }, { ST_NODIRATIME, MS_NODIRATIME }, { ST_RELATIME, MS_RELATIME },
        };
        struct statvfs st;
        unsigned long f = 0;

        if (statvfs(path, &st) < 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (st.f_flag & map[i].st)
                        f |= map[i].ms;
        return f;
}

static int bind_ro(const char *src, const char *dst, unsigned long extra) {
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
                return -errno;
        if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | extra | locked_flags(dst), NULL) < 0)
                return -errno;
        return 0;
}

/* mkdir -p for a path below NEWROOT (path is absolute in sandbox terms). */
static int mkdir_below_root(const char *path, mode_t mode) {
        char buf[PATH_MAX];
        int n = snprintf(buf, sizeof buf, "%s%s", NEWROOT, path);

        if (n < 0 || (size_t) n >= sizeof buf)
                return -ENAMETOOLONG;
        for (char *p = buf + strlen(NEWROOT) + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int write_file_below_root(const char *path, const char *text) {
        char buf[PATH_MAX];
        int n = snprintf(buf, sizeof buf, "%s%s", NEWROOT, path);
        _cleanup_close_ int fd = -1;

        if (n < 0 || (size_t) n >= sizeof buf)
                return -ENAMETOOLONG;
        fd = open(buf, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return -errno;
        return write_full(fd, text, strlen(text));
}

static int create_file_below_root(const char *path) {
        return write_file_below_root(path, "");
}

static int write_input_file(int dirfd, const char *name, const void *data, size_t len) {
        _cleanup_close_ int fd = openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (fd < 0)
                return -errno;
        return write_full(fd, data, len);
}

static int setup_inputs(const PlanSandbox *plan, SetupStage *ret_stage) {
        char opts[64];
        uint64_t size = 4096;
        _cleanup_close_ int dirfd = -1;
        int r;

        /* No sources: /inputs stays the read-only root's empty directory. A tmpfs
         * would hold nothing more, and its mount and its teardown at exit were both
         * on the call's path (docs/performance.md). */
        if (plan->n_inputs == 0)
                return 0;
        for (size_t i = 0; i < plan->n_inputs; i++)
                size += plan->inputs[i].text_len + plan->inputs[i].original_len + 8192;
        snprintf(opts, sizeof opts, "size=%llu,mode=0755,nr_inodes=64", (unsigned long long) size);
        if (mount("tmpfs", "/inputs", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                FAIL(SETUP_STAGE_MOUNT_INPUTS, errno);
        dirfd = open("/inputs", O_DIRECTORY | O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (dirfd < 0)
                FAIL(SETUP_STAGE_WRITE_INPUTS, errno);
        for (size_t i = 0; i < plan->n_inputs; i++) {
                const PlanInput *in = &plan->inputs[i];
                char name[PLAN_INPUT_ID_MAX + 16];

                /* IDs were validated by the supervisor ([A-Za-z0-9_.-], no leading dot);
                 * check again: a slash here would be a supervisor bug, not a feature. */
                if (!in->id[0] || in->id[0] == '.' || strchr(in->id, '/'))
                        FAIL(SETUP_STAGE_WRITE_INPUTS, EINVAL);
                /* A kept output keeps its own name (out-<call>-<name>): no suffix. */
                snprintf(name, sizeof name, in->kind == PLAN_INPUT_OUTPUT ? "%s" : "%s.txt", in->id);
                if ((r = write_input_file(dirfd, name, in->text, in->text_len)) < 0)
                        FAIL(SETUP_STAGE_WRITE_INPUTS, r);
                if (in->kind == PLAN_INPUT_ATTACHMENT) {
                        snprintf(name, sizeof name, "%s.original", in->id);
                        if ((r = write_input_file(dirfd, name, in->original, in->original_len)) < 0)
                                FAIL(SETUP_STAGE_WRITE_INPUTS, r);
                }
        }
        if (mount(NULL, "/inputs", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                FAIL(SETUP_STAGE_MOUNT_INPUTS, errno);
        return 0;
}

/* Bind one runtime path (a directory, or a single library file) from the descriptor
 * opened by sandbox_runtime_open(): the source is named through /proc/self/fd, so the
 * worker's uid need not be able to traverse the host path (pyenv under /root 0700). */
static int bind_runtime(int fd, const char *path) {
        char src[64], dst[PATH_MAX], parent[PATH_MAX];
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                r = mkdir_below_root(path, 0755);
        else if (S_ISREG(st.st_mode)) {
                char *slash;

                snprintf(parent, sizeof parent, "%s", path);
                slash = strrchr(parent, '/');
                if (!slash || slash == parent)
                        return -EINVAL;
                *slash = 0;
                if ((r = mkdir_below_root(parent, 0755)) < 0)
                        return r;
                r = create_file_below_root(path);
                if (r == -EEXIST)
                        r = 0;
        } else
                return -ENOTDIR;
        if (r < 0)
                return r;
        snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
        if (snprintf(dst, sizeof dst, "%s%s", NEWROOT, path) >= (int) sizeof dst)
                return -ENAMETOOLONG;
        return bind_ro(src, dst, MS_NODEV);
}

/* The worker's own account files, in its read-only root: one user and one group for
 * its ids (getpass.getuser(), pwd, Path.owner(), ~ without HOME), nobody for what it
 * sees of ids its namespace does not map (65534, the kernel's overflow id), root for
 * id 0 (which every Linux names so: tarfile and shutil.make_archive look it up), and a
 * name service of files only, so that glibc never turns to nscd's or a DNS server's
 * socket, which the seccomp filter denies (kill mode: kills). Nothing of the host's:
 * no other account, no home, no shell. */
static int write_accounts(void) {
        char passwd[320], group[160];
        unsigned uid = (unsigned) getuid(), gid = (unsigned) getgid();
        int r;

        snprintf(passwd, sizeof passwd, "%ssandbox:x:%u:%u:codeinterp sandbox:/tmp:/usr/sbin/nologin\n%s",
                 uid == 0 ? "" : "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n", uid, gid,
                 uid == 65534 ? "" : "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
        snprintf(group, sizeof group, "%ssandbox:x:%u:\n%s", gid == 0 ? "" : "root:x:0:\n", gid,
                 gid == 65534 ? "" : "nogroup:x:65534:\n");
        if ((r = mkdir_below_root("/etc", 0755)) < 0 || (r = write_file_below_root("/etc/passwd", passwd)) < 0 ||
            (r = write_file_below_root("/etc/group", group)) < 0 ||
            (r = write_file_below_root("/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\n"
                                                             "hosts: files\nnetworks: files\nprotocols: files\n"
                                                             "services: files\n")) < 0)
                return r;
        return 0;
}

/* Hide a directory below a bind (site-packages) under an empty read-only tmpfs. A
 * directory that is not there (removed since the build) needs no hiding. */
static int mask_dir(const char *path) {
        char dst[PATH_MAX];
        struct stat st;

        if (snprintf(dst, sizeof dst, "%s%s", NEWROOT, path) >= (int) sizeof dst)
                return -ENAMETOOLONG;
        if (stat(dst, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,nr_inodes=2,mode=0755") < 0)
                return -errno;
        return 0;
}

/* /dev: a small read-only tmpfs with the four harmless devices (only /dev/null
 * writable) and /dev/shm. */
static int setup_dev(SetupStage *ret_stage) {
        static const char *const devices[] = { "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", NULL };
        int r;

        /* A directory of the root tmpfs, read-only with it: a filesystem of its own
         * would add a superblock to tear down when the worker exits, on its call's path
         * (docs/performance.md). It holds nothing but the binds and the symlink below. */
        if ((r = mkdir_below_root("/dev", 0755)) < 0)
                FAIL(SETUP_STAGE_MOUNT_DEV, r);
        for (size_t i = 0; devices[i]; i++) {
                char dst[PATH_MAX];
                if ((r = create_file_below_root(devices[i])) < 0)
                        FAIL(SETUP_STAGE_MOUNT_DEV, r);
                snprintf(dst, sizeof dst, "%s%s", NEWROOT, devices[i]);
                if ((r = bind_ro(devices[i], dst, MS_NOEXEC)) < 0)
                        FAIL(SETUP_STAGE_MOUNT_DEV, r);
        }
        /* POSIX semaphores and shared memory (sem_open, shm_open: multiprocessing's
         * locks, its thread pools, shared_memory) live in /dev/shm: there, the call's
         * /tmp, so they are bounded by tmpBytes, vanish with the call and are shared
         * with nobody. */
        if (symlink("../tmp", NEWROOT "/dev/shm") < 0)
                FAIL(SETUP_STAGE_MOUNT_DEV, errno);
        /* Writes to /dev/null are part of normal programs: make that one read-write. */
        if (mount(NULL, NEWROOT "/dev/null", NULL,
                  MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NOEXEC | locked_flags(NEWROOT "/dev/null"), NULL) < 0)
                FAIL(SETUP_STAGE_MOUNT_DEV, errno);
        return 0;
}

static int setup_root(const SandboxRuntime *rt, SetupStage *ret_stage) {
        RuntimeCursor rc = {};
        const char *cursor = NULL;
        char path[PATH_MAX];
        int r;

        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                FAIL(SETUP_STAGE_MOUNT_PRIVATE, errno);
        if (mount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755,nr_inodes=256") < 0)
                FAIL(SETUP_STAGE_MOUNT_ROOT, errno);

        for (size_t i = 0; i < rt->n; i++) {
                if ((r = runtime_next(rt->packages, &rc, path)) <= 0)
                        FAIL(SETUP_STAGE_MOUNT_BIND, r < 0 ? r : EINVAL);
                if ((r = bind_runtime(rt->fd[i], path)) < 0)
                        FAIL(SETUP_STAGE_MOUNT_BIND, r);
        }
        cursor = NULL;
        while ((r = runtime_path_next(runtime_masks, &cursor, path)) > 0)
                if ((r = mask_dir(path)) < 0)
                        FAIL(SETUP_STAGE_MOUNT_BIND, r);
        if (r < 0)
                FAIL(SETUP_STAGE_MOUNT_BIND, r);
        for (size_t i = 0; i < SANDBOX_HOST_DATA_MAX; i++)
                if (rt->data_fd[i] >= 0 && (r = bind_runtime(rt->data_fd[i], sandbox_host_data[i])) < 0)
                        FAIL(SETUP_STAGE_MOUNT_BIND, r);
        if ((r = write_accounts()) < 0)
                FAIL(SETUP_STAGE_MOUNT_ROOT, r);
        /* Merged-/usr layout: /lib -> usr/lib so absolute library paths resolve. */
        if (symlink("usr/lib", NEWROOT "/lib") < 0 && errno != EEXIST)
                FAIL(SETUP_STAGE_MOUNT_BIND, errno);

        if ((r = setup_dev(ret_stage)) < 0)
                return r;

        /* Mount points for the per-call filesystems, mounted by sandbox_finish(). */
        if ((r = mkdir_below_root("/tmp", 0755)) < 0)
                FAIL(SETUP_STAGE_MOUNT_TMP, r);
        if ((r = mkdir_below_root("/inputs", 0755)) < 0)
                FAIL(SETUP_STAGE_MOUNT_INPUTS, r);
        /* Stays an empty directory of the read-only root when the policy has no /outputs. */
        if ((r = mkdir_below_root("/outputs", 0755)) < 0)
                FAIL(SETUP_STAGE_MOUNT_OUTPUTS, r);

        /* Swap roots: the old root is stacked under the new one and detached. */
        if (chdir(NEWROOT) < 0)
                FAIL(SETUP_STAGE_PIVOT_ROOT, errno);
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                FAIL(SETUP_STAGE_PIVOT_ROOT, errno);
        if (umount2(".", MNT_DETACH) < 0)
                FAIL(SETUP_STAGE_PIVOT_ROOT, errno);
        if (chdir("/") < 0)
                FAIL(SETUP_STAGE_PIVOT_ROOT, errno);
        if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m,mode=0755,nr_inodes=256") <
            0)
                FAIL(SETUP_STAGE_REMOUNT_RO, errno);
        return 0;
}

/* What no capability the process still holds can undo, and nothing before its call
 * needs: the securebits locked (no way back to root semantics; needs CAP_SETPCAP),
 * the bounding set emptied (what an exec could grant; none happens) and the ambient
 * set cleared. The capabilities themselves stay until drop_caps(): the call's
 * mounts need CAP_SYS_ADMIN. sandbox_prepare() does this, so the 43 system calls are
 * off a pre-started worker's call path. */
static int limit_caps(void) {
        if (prctl(PR_SET_SECUREBITS,
                  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                          SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                  0, 0, 0) < 0)
                return -errno;
        for (cap_value_t c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

/* Every capability gone (effective, permitted, inheritable), after the call's mounts. */
static int drop_caps(void) {
        _cleanup_cap_free_ cap_t caps = cap_init(); /* all clear */

        if (!caps)
                return -ENOMEM;
        if (cap_set_proc(caps) < 0)
                return -errno;
        return 0;
}

#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

#define LL_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define LL_TMP                                                                                                         \
        (LL_READ | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |    \
         LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SYM |                     \
         LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)

static int landlock_allow(int ruleset, const char *path, uint64_t access, uint64_t handled) {
        struct landlock_path_beneath_attr attr = { .allowed_access = access & handled };
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        attr.parent_fd = fd;
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) < 0)
                return -errno;
        return 0;
}

/* The ruleset, built by sandbox_prepare() and applied by sandbox_finish(); above the
 * worker's descriptor numbers, like statm_fd. -1: none (no Landlock here). */
static int landlock_ruleset = -1;
static uint64_t landlock_handled;

/* A second, independent fence inside the minimal root: reads only where the runtime,
 * the inputs and the devices are, writes only in /tmp, /outputs (when mounted) and to
 * /dev/null, and no device, socket or fifo nodes anywhere. Mount isolation already
 * hides the host; this holds even if that failed. Built with the root, before the call
 * exists: the rules for /, /tmp and /dev/null, whose inodes stay what they are (the
 * call's remount of /tmp changes only its size). No ruleset (0) on kernels without
 * Landlock. */
static int landlock_build(void) {
        int abi = landlock_abi(), fd, r;
        uint64_t handled;

        closep(&landlock_ruleset);
        if (abi <= 0)
                return 0;
        handled = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
        if (abi >= 2)
                handled |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;

        struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
        fd = (int) syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
        if (fd < 0)
                return -errno;
        landlock_ruleset = fcntl(fd, F_DUPFD_CLOEXEC, _WORKER_FD_MAX);
        close(fd);
        if (landlock_ruleset < 0)
                return -errno;
        landlock_handled = handled;
        if ((r = landlock_allow(landlock_ruleset, "/", LL_READ, handled)) < 0 ||
            (r = landlock_allow(landlock_ruleset, "/tmp", LL_TMP, handled)) < 0 ||
            /* a file takes file rights only (READ_DIR would be EINVAL) */
            (r = landlock_allow(landlock_ruleset, "/dev/null",
                                LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                        LANDLOCK_ACCESS_FS_TRUNCATE,
                                handled)) < 0) {
                closep(&landlock_ruleset);
                return r;
        }
        return 0;
}

/* The call's part: /outputs (mounted by now) when the policy has it, then the fence. */
static int landlock_apply(bool outputs) {
        _cleanup_close_ int ruleset = TAKE_FD(landlock_ruleset);
        int r;

        if (ruleset < 0)
                return landlock_abi() > 0 ? -EBADF : 0; /* never built: sandbox_prepare() first */
        if (outputs && (r = landlock_allow(ruleset, "/outputs", LL_TMP, landlock_handled)) < 0)
                return r;
        if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
                return -errno;
        return 0;
}

/* The limits sandbox_finish() sets, and the hard limit of each that the worker
 * inherited, read by sandbox_prepare() (nothing changes them in between). A limit above
 * the inherited hard limit cannot be raised: that takes CAP_SYS_RESOURCE on the host,
 * which no worker has (a rootless supervisor's user may well have lower hard limits
 * than root). The inherited hard limit is kept then, which is stricter than the plan
 * asked for, never looser. */
typedef enum Limit {
        LIMIT_AS,
        LIMIT_CPU,
        LIMIT_FSIZE,
        LIMIT_NOFILE,
        LIMIT_NPROC,
        LIMIT_CORE,
        LIMIT_MEMLOCK,
        LIMIT_MSGQUEUE,
        LIMIT_NICE,
        _LIMIT_MAX,
} Limit;

static const int limit_resource[_LIMIT_MAX] = {
        [LIMIT_AS] = RLIMIT_AS,           [LIMIT_CPU] = RLIMIT_CPU,           [LIMIT_FSIZE] = RLIMIT_FSIZE,
        [LIMIT_NOFILE] = RLIMIT_NOFILE,   [LIMIT_NPROC] = RLIMIT_NPROC,       [LIMIT_CORE] = RLIMIT_CORE,
        [LIMIT_MEMLOCK] = RLIMIT_MEMLOCK, [LIMIT_MSGQUEUE] = RLIMIT_MSGQUEUE, [LIMIT_NICE] = RLIMIT_NICE,
};
static rlim_t limit_inherited[_LIMIT_MAX];

static int read_inherited_limits(void) {
        for (size_t i = 0; i < _LIMIT_MAX; i++) {
                struct rlimit cur;
                if (getrlimit(limit_resource[i], &cur) < 0)
                        return -errno;
                limit_inherited[i] = cur.rlim_max;
        }
        return 0;
}

static int set_limit(Limit l, rlim_t soft, rlim_t hard) {
        struct rlimit rl = { .rlim_cur = soft, .rlim_max = hard };
        rlim_t max = limit_inherited[l];

        if (max != RLIM_INFINITY && (hard == RLIM_INFINITY || hard > max))
                rl.rlim_max = max;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max)
                rl.rlim_cur = rl.rlim_max;
        return setrlimit(limit_resource[l], &rl) < 0 ? -errno : 0;
}

/* /proc/self/statm, opened by sandbox_prepare() while the host's /proc is still in
 * view and read by sandbox_finish() just before the limits are set. */
static int statm_fd = -1;

/* The address space this process has mapped now (statm's first field, in pages). */
static int mapped_bytes(uint64_t *ret) {
        char buf[128];
        unsigned long long pages;
        ssize_t n;

        if (statm_fd < 0)
                return -EBADF;
        n = pread(statm_fd, buf, sizeof buf - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        if (sscanf(buf, "%llu", &pages) != 1 || pages > UINT64_MAX / (uint64_t) getpagesize())
                return -EIO;
        *ret = (uint64_t) pages * (uint64_t) getpagesize();
        return 0;
}

/* memoryBytes bounds what the call may add to the address space the worker had mapped
 * when its limits were set: in zygote mode that is the interpreter and every package
 * the zygote preloaded (shared copy-on-write, charged to the zygote's cgroup, not the
 * call's), in exec mode the bare worker binary before Python starts. Counting the
 * preloaded runtime against the call would leave the code next to nothing under a
 * data policy (numpy, pandas and matplotlib map about 200 MiB, OpenBLAS's buffers
 * about 40 MiB more) -- and a different amount on every host.
 *
 * Less a sixteenth: the worker's cgroup, also at memoryBytes, is charged a little
 * more than the pages the code maps (the runtime's pages it writes to, copied on
 * write; page tables), and a runaway allocation should end in a MemoryError the code
 * sees, with its traceback, rather than in the OOM killer's SIGKILL. */
static int set_rlimits(const PlanSandbox *plan, uint64_t mapped) {
        rlim_t as = (rlim_t) (mapped + plan->memory_bytes - plan->memory_bytes / 16);
        int r;

        if ((r = set_limit(LIMIT_AS, as, as)) < 0 ||
            /* Soft == hard: the worker is its pid namespace's init, and init does not get
             * SIGXCPU's default action, so the limit is enforced by the hard limit's SIGKILL. */
            (r = set_limit(LIMIT_CPU, plan->cpu_seconds, plan->cpu_seconds)) < 0 ||
            (r = set_limit(LIMIT_FSIZE, plan->file_bytes, plan->file_bytes)) < 0 ||
            (r = set_limit(LIMIT_NOFILE, plan->open_files, plan->open_files)) < 0 ||
            (r = set_limit(LIMIT_NPROC, plan->processes, plan->processes)) < 0 ||
            (r = set_limit(LIMIT_CORE, 0, 0)) < 0 || (r = set_limit(LIMIT_MEMLOCK, 0, 0)) < 0 ||
            (r = set_limit(LIMIT_MSGQUEUE, 0, 0)) < 0 || (r = set_limit(LIMIT_NICE, 0, 0)) < 0)
                return r;
        return 0;
}

int sandbox_prepare(const SandboxRuntime *rt, const struct sock_fprog *early, uint64_t tmp_bytes,
                    SetupStage *ret_stage) {
        char opts[64];
        int r;

        closep(&statm_fd);
        r = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        if (r < 0)
                FAIL(SETUP_STAGE_RLIMITS, errno);
        /* Above the worker's descriptor numbers, which a pre-started worker has
         * child_install_fds() put in place between here and sandbox_finish(). */
        statm_fd = fcntl(r, F_DUPFD_CLOEXEC, _WORKER_FD_MAX);
        close(r);
        if (statm_fd < 0 || read_inherited_limits() < 0)
                FAIL(SETUP_STAGE_RLIMITS, errno);
        r = setup_root(rt, ret_stage);
        if (r < 0)
                return r;
        if (sethostname("codeinterp", 10) < 0)
                FAIL(SETUP_STAGE_HOSTNAME, errno);
        /* The worker's own /tmp, empty, mounted now, so that a pre-started worker makes
         * the new superblock before its call arrives. */
        tmp_size = tmp_bytes > 0 ? tmp_bytes : 4096;
        snprintf(opts, sizeof opts, TMP_OPTS_FMT, (unsigned long long) tmp_size);
        if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                FAIL(SETUP_STAGE_MOUNT_TMP, errno);
        /* The call's working directory: relative paths (open("results.csv", "w")) land
         * in its /tmp, not on the read-only root. */
        if (chdir("/tmp") < 0)
                FAIL(SETUP_STAGE_MOUNT_TMP, errno);
        if ((r = landlock_build()) < 0)
                FAIL(SETUP_STAGE_LANDLOCK, r);
        if ((r = limit_caps()) < 0)
                FAIL(SETUP_STAGE_CAPS_DROP, r);
        /* The early part of the seccomp filter (policy/seccomp.h), the dear one to load,
         * before any call exists, unless inherited from the zygote; CAP_SYS_ADMIN in our
         * namespace allows it without no_new_privs, which sandbox_finish() sets before
         * the late part. */
        if (early && (r = policy_seccomp_load(early)) < 0)
                FAIL(SETUP_STAGE_SECCOMP, r);
        return 0;
}

/* Every descriptor above the worker's own, but the Landlock ruleset, which is applied
 * (and closed) after no_new_privs. */
static int close_stray_fds(void) {
        unsigned first = (unsigned) WORKER_FD_LAST_KEPT + 1;

        if (landlock_ruleset >= (int) first) {
                if ((unsigned) landlock_ruleset > first &&
                    syscall(SYS_close_range, first, (unsigned) landlock_ruleset - 1, 0) < 0)
                        return -errno;
                first = (unsigned) landlock_ruleset + 1;
        }
        return syscall(SYS_close_range, first, ~0U, 0) < 0 ? -errno : 0;
}

int sandbox_finish(const PlanSandbox *plan, const struct sock_fprog *seccomp, SetupStage *ret_stage) {
        char opts[64];
        uint64_t mapped = 0;
        int r;

        /* Measured first: nothing of the call has been mapped yet. */
        r = mapped_bytes(&mapped);
        closep(&statm_fd);
        if (r < 0)
                FAIL(SETUP_STAGE_RLIMITS, -r);
        if (plan->tmp_bytes != tmp_size) {
                snprintf(opts, sizeof opts, TMP_OPTS_FMT, (unsigned long long) plan->tmp_bytes);
                if (mount(NULL, "/tmp", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
                        FAIL(SETUP_STAGE_MOUNT_TMP, errno);
                tmp_size = plan->tmp_bytes;
        }
        r = setup_inputs(plan, ret_stage);
        if (r < 0)
                return r;
        /* The supervisor made this tmpfs (size and inode count are its bounds, enforced by
         * the kernel) and keeps its own descriptor to read it after the reap; here it only
         * gets attached. Closed with the rest below either way. */
        if (plan->outputs && move_mount(WORKER_FD_OUTPUTS, "", AT_FDCWD, "/outputs", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                FAIL(SETUP_STAGE_MOUNT_OUTPUTS, errno);
        if ((r = close_stray_fds()) < 0)
                FAIL(SETUP_STAGE_FDS, r);
        if ((r = drop_caps()) < 0)
                FAIL(SETUP_STAGE_CAPS_DROP, r);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                FAIL(SETUP_STAGE_NO_NEW_PRIVS, errno);
        if ((r = landlock_apply(plan->outputs)) < 0)
                FAIL(SETUP_STAGE_LANDLOCK, r);
        if ((r = set_rlimits(plan, mapped)) < 0)
                FAIL(SETUP_STAGE_RLIMITS, r);
        if (!seccomp)
                FAIL(SETUP_STAGE_SECCOMP, EINVAL);
        if ((r = policy_seccomp_load(seccomp)) < 0)
                FAIL(SETUP_STAGE_SECCOMP, r);
        return 0;
}

int sandbox_enter(const SandboxRuntime *rt, const PlanSandbox *plan, const struct sock_fprog *seccomp,
                  SetupStage *ret_stage) {
        int r = sandbox_prepare(rt, NULL, plan->tmp_bytes, ret_stage);
        if (r < 0)
                return r;
        return sandbox_finish(plan, seccomp, ret_stage);
}
