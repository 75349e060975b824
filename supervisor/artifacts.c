/* SPDX-License-Identifier: MIT */
/* Artifacts (artifacts.h): each call's /outputs tmpfs, made and bounded here, the
 * untrusting reader of what the worker left in it, and the media-type sniffer. */
#include "supervisor/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/fsuid.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/sha256.h"
#include "common/userns.h"
#include "common/util.h"

/* ---- the mount ---- */

static int set_option(int fs, const char *key, const char *value) {
        return fsconfig(fs, FSCONFIG_SET_STRING, key, value, 0) < 0 ? -errno : 0;
}

static int set_number(int fs, const char *key, unsigned long long v) {
        char buf[32];

        snprintf(buf, sizeof buf, "%llu", v);
        return set_option(fs, key, buf);
}

/* The mount, made in this process's mount namespace, its root owned by uid and gid:
 * mode 0777 for a root supervisor, whose workers have host ids of their own and write there as
 * "other" (nobody but the worker ever sees this tree: the mount is detached until the
 * worker attaches it in its own mount namespace), 0700 rootless, whose workers are
 * this user (rootless: decided by the caller, a helper's own ids being unmapped ones). */
static int mount_here(uint64_t max_bytes, uint32_t max_files, uid_t uid, gid_t gid, bool rootless, int *ret_fd) {
        _cleanup_close_ int fs = -1;
        int mnt, r;

        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if ((r = set_number(fs, "size", max_bytes)) < 0 ||
            (r = set_number(fs, "nr_inodes", (unsigned long long) max_files + 1)) < 0 ||
            (r = set_option(fs, "mode", rootless ? "0700" : "0777")) < 0 || (r = set_number(fs, "uid", uid)) < 0 ||
            (r = set_number(fs, "gid", gid)) < 0)
                return r;
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
        if (mnt < 0)
                return -errno;
        *ret_fd = mnt;
        return 0;
}

/* Where this process may not create a tmpfs (rootless; or root without CAP_SYS_ADMIN
 * over its mount namespace, as in a container that drops it), the mounts come from a
 * helper: a child cloned into a user namespace of its own and a mount namespace that
 * namespace owns, where fsopen() is allowed. It is started at the first need and kept
 * (one clone, id maps and exit per call cost 0.8 ms of the call's path), makes each
 * mount with the bounds it is asked for and sends its descriptor back, or the errno.
 * Its ids are mapped by this process before it may go: rootless only this user's
 * (all the kernel lets an unprivileged creator map), the mount's root being this
 * user's; as root the identity over every id this namespace has but uid 0
 * (userns_write_identity_maps()), so that the worker's host ids can own files there,
 * the root being 65534:65534's (nobody's: uid 0 is not there to own it). It runs only
 * this code, holds no descriptor but its socket, and dies with us (parent-death
 * signal, or EOF). One that is gone, hangs (HELPER_TIMEOUT_SEC) or garbles its answer
 * is killed, reaped and started again, once per mount. */
#define HELPER_TIMEOUT_SEC 1

typedef struct MountRequest {
        uint64_t max_bytes;
        uint32_t max_files;
        uint32_t zero;
} MountRequest;

static struct {
        pid_t pid; /* 0: none */
        int pidfd, sock;
} helper = { .pidfd = -1, .sock = -1 };

static _Noreturn void helper_main(int sock, uid_t uid, gid_t gid, bool rootless) {
        MountRequest req;
        char c;

        (void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        (void) prctl(PR_SET_NAME, "ci-mount", 0, 0, 0);
        /* Nothing of ours stays open in it: a client's connection would never see EOF. */
        (void) syscall(SYS_close_range, 0U, (unsigned) sock - 1, 0);
        (void) syscall(SYS_close_range, (unsigned) sock + 1, ~0U, 0);
        /* The go byte: its ids are mapped (EOF: they could not be). */
        if (read(sock, &c, 1) != 1)
                _exit(EPROTO);
        while (recv(sock, &req, sizeof req, 0) == (ssize_t) sizeof req) {
                int fd = -1;
                int32_t error = -mount_here(req.max_bytes, req.max_files, uid, gid, rootless, &fd);
                if (fdpass_send(sock, &error, sizeof error, &fd, fd >= 0 ? 1 : 0, 0) < 0)
                        break;
                closep(&fd);
        }
        _exit(0);
}

void artifacts_helper_stop(void) {
        if (helper.pid > 0)
                kill_and_reap(helper.pid, helper.pidfd);
        closep(&helper.pidfd);
        closep(&helper.sock);
        helper.pid = 0;
}

pid_t artifacts_helper_pid(void) {
        return helper.pid;
}

static int helper_start(void) {
        _cleanup_close_ int ours = -1, theirs = -1;
        bool rootless = userns_rootless();
        uid_t uid = rootless ? geteuid() : 65534;
        gid_t gid = rootless ? getegid() : 65534;
        struct timeval timeout = { .tv_sec = HELPER_TIMEOUT_SEC };
        int pair[2], r;
        pid_t pid;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        ours = pair[0];
        theirs = pair[1];
        pid = clone_with_pidfd(CLONE_NEWUSER | CLONE_NEWNS, SIGCHLD, &helper.pidfd);
        if (pid < 0)
                return pid;
        if (pid == 0)
                helper_main(theirs, uid, gid, rootless);
        helper.pid = pid;
        r = rootless ? userns_write_id_maps(pid, uid, uid, gid, gid) : userns_write_identity_maps(pid);
        if (r >= 0 && (setsockopt(ours, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) < 0 ||
                       setsockopt(ours, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) < 0))
                r = -errno;
        if (r >= 0 && fdpass_send(ours, "g", 1, NULL, 0, 0) < 0)
                r = -EPROTO;
        if (r < 0) {
                artifacts_helper_stop();
                return r;
        }
        helper.sock = TAKE_FD(ours);
        return 0;
}

/* One mount from the helper. *ret_answered: the helper answered (r is its errno, or 0;
 * -EMFILE when its mount found no descriptor slot here: the helper is fine, we are
 * full); otherwise the channel failed (r), and the helper is not to be trusted again. */
static int helper_ask(uint64_t max_bytes, uint32_t max_files, int *ret_fd, bool *ret_answered) {
        MountRequest req = { .max_bytes = max_bytes, .max_files = max_files };
        _cleanup_close_ int fd = -1;
        int32_t error = 0;
        size_t n_fds = 0;
        bool cut = false;
        ssize_t n;

        *ret_answered = false;
        if (send(helper.sock, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t) sizeof req)
                return -errno;
        n = fdpass_recv_cut(helper.sock, &error, sizeof error, &fd, 1, &n_fds, &cut, 0);
        if (n < 0)
                return (int) n; /* -EAGAIN: it did not answer in time */
        if (n == (ssize_t) sizeof error && error == 0 && cut && n_fds == 0) {
                *ret_answered = true;
                return -EMFILE;
        }
        if (cut || n != (ssize_t) sizeof error || error < 0 || error > 4095 || (error == 0) != (n_fds == 1))
                return -EPROTO; /* EOF (it is gone), or garbled */
        *ret_answered = true;
        if (error != 0)
                return -error;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int mount_in_helper(uint64_t max_bytes, uint32_t max_files, int *ret_fd) {
        bool answered = false;
        int r = 0;

        for (int attempt = 0; attempt < 2 && !answered; attempt++) {
                if (helper.pid <= 0 && (r = helper_start()) < 0)
                        return r;
                r = helper_ask(max_bytes, max_files, ret_fd, &answered);
                if (!answered) {
                        log_debug_errno(r, "The /outputs mount helper failed (%m): starting another");
                        artifacts_helper_stop();
                }
        }
        return r;
}

int artifacts_prepare(void) {
        _cleanup_close_ int fs = -1, probe = -1;
        int r;

        if (userns_rootless())
                return ARTIFACTS_BY_HELPER;
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs >= 0)
                return ARTIFACTS_HERE;
        if (errno != EPERM)
                return -errno;
        /* A user namespace of our own that does not own the mount namespace (unshare -r):
         * a private mount namespace of our own is enough. */
        if (unshare(CLONE_NEWNS) == 0) {
                if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                        return -errno;
                fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
                return fs < 0 ? -errno : ARTIFACTS_PRIVATE_NAMESPACE;
        }
        /* No CAP_SYS_ADMIN at all (a container that drops it): each mount from a helper,
         * started again at the first call's, after the supervisor's cgroup move (a
         * process left in the unit's own cgroup would stop it delegating, on v2). */
        r = mount_in_helper(4096, 1, &probe);
        artifacts_helper_stop();
        return r < 0 ? r : ARTIFACTS_BY_HELPER;
}

static int mount_new(uint64_t max_bytes, uint32_t max_files, int *ret_fd) {
        int r;

        if (max_bytes == 0) /* tmpfs reads size=0 as "unbounded" */
                return -EINVAL;
        if (userns_rootless())
                return mount_in_helper(max_bytes, max_files, ret_fd);
        r = mount_here(max_bytes, max_files, geteuid(), getegid(), false, ret_fd);
        return r == -EPERM ? mount_in_helper(max_bytes, max_files, ret_fd) : r;
}

/* The mount made ahead (artifacts_mount_ahead()): a superblock and ten system calls (a
 * helper's round trip, where one makes the mounts) off the next call's path. */
static struct {
        int fd; /* -1: none */
        uint64_t max_bytes;
        uint32_t max_files;
} ahead = { .fd = -1 };

static bool ahead_fits(uint64_t max_bytes, uint32_t max_files) {
        return ahead.fd >= 0 && ahead.max_bytes == max_bytes && ahead.max_files == max_files;
}

int artifacts_mount_new(uint64_t max_bytes, uint32_t max_files, int *ret_fd) {
        if (ahead_fits(max_bytes, max_files)) {
                *ret_fd = TAKE_FD(ahead.fd);
                return 0;
        }
        /* Made for other bounds: the call before was admitted after a reload, this one
         * (queued) before it. */
        closep(&ahead.fd);
        return mount_new(max_bytes, max_files, ret_fd);
}

void artifacts_mount_ahead(uint64_t max_bytes, uint32_t max_files) {
        int r;

        if (ahead_fits(max_bytes, max_files))
                return;
        closep(&ahead.fd);
        r = mount_new(max_bytes, max_files, &ahead.fd);
        if (r < 0) {
                log_debug_errno(r, "Making the next call's /outputs ahead failed (%m): that call makes its own");
                return;
        }
        ahead.max_bytes = max_bytes;
        ahead.max_files = max_files;
}

void artifacts_mount_ahead_drop(void) {
        closep(&ahead.fd);
}

/* ---- media types ---- */

typedef struct Cursor {
        const uint8_t *p, *end;
} Cursor;

static void skip_ws(Cursor *c) {
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
                c->p++;
}

static bool lit(Cursor *c, const char *s) {
        size_t n = strlen(s);
        if ((size_t) (c->end - c->p) < n || memcmp(c->p, s, n) != 0)
                return false;
        c->p += n;
        return true;
}

static bool json_string(Cursor *c) {
        if (c->p >= c->end || *c->p != '"')
                return false;
        for (c->p++; c->p < c->end; c->p++) {
                if (*c->p == '"') {
                        c->p++;
                        return true;
                }
                if (*c->p < 0x20)
                        return false;
                if (*c->p == '\\') {
                        if (++c->p >= c->end)
                                return false;
                        if (*c->p == 'u') {
                                for (int i = 0; i < 4; i++)
                                        if (++c->p >= c->end || !strchr("0123456789abcdefABCDEF", *c->p) || !*c->p)
                                                return false;
                        } else if (!strchr("\"\\/bfnrt", *c->p) || !*c->p)
                                return false;
                }
        }
        return false;
}

static bool json_number(Cursor *c) {
        const uint8_t *start;

        if (c->p < c->end && *c->p == '-')
                c->p++;
        start = c->p;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
                c->p++;
        if (c->p == start || (*start == '0' && c->p - start > 1))
                return false;
        if (c->p < c->end && *c->p == '.') {
                start = ++c->p;
                while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
                        c->p++;
                if (c->p == start)
                        return false;
        }
        if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
                c->p++;
                if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
                        c->p++;
                start = c->p;
                while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
                        c->p++;
                if (c->p == start)
                        return false;
        }
        return true;
}

/* A JSON value nested at most depth deep (deeper is "not JSON": the sniffer says text). */
static bool json_value(Cursor *c, int depth) {
        skip_ws(c);
        if (c->p >= c->end || depth <= 0)
                return false;
        switch (*c->p) {
        case '{':
        case '[': {
                uint8_t close = *c->p == '{' ? '}' : ']';
                bool object = close == '}';
                c->p++;
                skip_ws(c);
                if (c->p < c->end && *c->p == close) {
                        c->p++;
                        return true;
                }
                for (;;) {
                        if (object) {
                                skip_ws(c);
                                if (!json_string(c))
                                        return false;
                                skip_ws(c);
                                if (!lit(c, ":"))
                                        return false;
                        }
                        if (!json_value(c, depth - 1))
                                return false;
                        skip_ws(c);
                        if (lit(c, ","))
                                continue;
                        if (c->p < c->end && *c->p == close) {
                                c->p++;
                                return true;
                        }
                        return false;
                }
        }
        case '"':
                return json_string(c);
        case 't':
                return lit(c, "true");
        case 'f':
                return lit(c, "false");
        case 'n':
                return lit(c, "null");
        default:
                return json_number(c);
        }
}

static bool is_json(const uint8_t *p, size_t len) {
        Cursor c = { p, p + len };

        skip_ws(&c);
        if (c.p >= c.end || (*c.p != '{' && *c.p != '['))
                return false; /* a bare "3" or "true" is text */
        if (!json_value(&c, 64))
                return false;
        skip_ws(&c);
        return c.p == c.end;
}

/* At least two lines, the first with a comma, every non-empty line with the same
 * number of commas outside double quotes. */
static bool is_csv(const uint8_t *p, size_t len) {
        long want = -1, have = 0;
        size_t lines = 0;
        bool quoted = false, empty = true;

        for (size_t i = 0; i <= len; i++) {
                if (i == len || (!quoted && p[i] == '\n')) {
                        if (!empty) {
                                if (want < 0)
                                        want = have;
                                if (have != want || want == 0)
                                        return false;
                                lines++;
                        }
                        have = 0;
                        empty = true;
                        continue;
                }
                if (p[i] == '\r')
                        continue;
                empty = false;
                if (p[i] == '"')
                        quoted = !quoted;
                else if (p[i] == ',' && !quoted)
                        have++;
        }
        return !quoted && lines >= 2;
}

static bool has_prefix(const uint8_t *p, size_t len, const char *s, size_t n) {
        return len >= n && memcmp(p, s, n) == 0;
}

static bool contains(const uint8_t *p, size_t len, const char *s) {
        size_t n = strlen(s);
        return len >= n && memmem(p, len, s, n) != NULL;
}

const char *artifact_sniff(const void *data, size_t len) {
        const uint8_t *p = data;
        uint64_t chars;

        if (has_prefix(p, len, "\x89PNG\r\n\x1a\n", 8))
                return "image/png";
        if (has_prefix(p, len, "\xff\xd8\xff", 3))
                return "image/jpeg";
        if (has_prefix(p, len, "GIF87a", 6) || has_prefix(p, len, "GIF89a", 6))
                return "image/gif";
        if (len >= 12 && has_prefix(p, len, "RIFF", 4) && memcmp(p + 8, "WEBP", 4) == 0)
                return "image/webp";
        if (has_prefix(p, len, "%PDF-", 5))
                return "application/pdf";
        if (memchr(p, 0, len) || utf8_count(data, len, &chars) < 0)
                return "application/octet-stream";

        /* Text. Markup is looked for after a byte-order mark and leading white space. */
        Cursor c = { p, p + len };
        if (has_prefix(p, len, "\xef\xbb\xbf", 3))
                c.p += 3;
        skip_ws(&c);
        size_t rest = (size_t) (c.end - c.p), head = MIN(rest, (size_t) 4096);
        if (has_prefix(c.p, rest, "<svg", 4) ||
            ((has_prefix(c.p, rest, "<?xml", 5) || has_prefix(c.p, rest, "<!DOCTYPE svg", 13)) &&
             contains(c.p, head, "<svg")))
                return "image/svg+xml";
        if (has_prefix(c.p, rest, "<?xml", 5))
                return "application/xml";
        if (is_json(c.p, rest))
                return "application/json";
        if (is_csv(p, len))
                return "text/csv";
        return "text/plain";
}

/* ---- collecting ---- */

/* One entry of the top level, never through a symlink and never on another mount:
 * name is a single component (from the listing: no '/'), opened with O_NOFOLLOW, and
 * what it opens must be a regular file on the directory's own device. openat2()'s
 * RESOLVE_* would say the same for one component, but sandboxes answer it with ENOSYS
 * (systemd's RestrictSUIDSGID=, container profiles), so it is not used.
 *
 * Read as the files' owner (artifacts_collect() takes the fsuid of the worker's host
 * ids): a file the code made unreadable is given its owner's read bit back first. The
 * worker is reaped, so nothing can change the entry between the look and the chmod. */
static int open_entry(int dir_fd, dev_t dev, const char *name) {
        struct stat st;
        int fd;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 && errno == EACCES && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == (uid_t) setfsuid((uid_t) -1) && fchmodat(dir_fd, name, (st.st_mode & 07777) | S_IRUSR, 0) == 0)
                fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_dev != dev) {
                close(fd);
                return -EXDEV;
        }
        return fd;
}

/* The mount's root as a directory to list. The mount descriptor is O_PATH. A root the
 * code made unsearchable (rootless: the worker owns it) is given its owner's bits back
 * through the descriptor's /proc/self/fd link. */
static int open_root(int dir_fd) {
        char path[64];
        struct stat st;
        int fd;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 && errno == EACCES && fstat(dir_fd, &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == (uid_t) setfsuid((uid_t) -1)) {
                snprintf(path, sizeof path, "/proc/self/fd/%d", dir_fd);
                if (chmod(path, (st.st_mode & 07777) | S_IRWXU) == 0)
                        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        return fd < 0 ? -errno : fd;
}

/* A candidate: a regular file with a valid name, and its size at listing time. */
typedef struct Candidate {
        char *name;
        uint64_t size;
} Candidate;

/* The candidates kept so far form a max-heap by name, so the first max_files names in
 * bytewise order are kept with O(log max_files) work per entry, whatever the number of
 * entries (hard links make names without inodes). */
static bool name_less(const Candidate *a, const Candidate *b) {
        return strcmp(a->name, b->name) < 0;
}

static void heap_down(Candidate *h, size_t n, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, top = i;
                if (l < n && name_less(&h[top], &h[l]))
                        top = l;
                if (r < n && name_less(&h[top], &h[r]))
                        top = r;
                if (top == i)
                        return;
                Candidate t = h[i];
                h[i] = h[top];
                h[top] = t;
                i = top;
        }
}

static void heap_up(Candidate *h, size_t i) {
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!name_less(&h[parent], &h[i]))
                        return;
                Candidate t = h[i];
                h[i] = h[parent];
                h[parent] = t;
                i = parent;
        }
}

static int by_name(const void *a, const void *b) {
        return strcmp(((const Candidate *) a)->name, ((const Candidate *) b)->name);
}

/* Read exactly size bytes of a regular file the listing found (the worker is gone: the
 * tree no longer changes; a file that is not what it was is omitted). */
static int read_candidate(int dir_fd, dev_t dev, const Candidate *cand, Artifact *ret) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ uint8_t *data = NULL;
        struct stat st;
        size_t got = 0;

        fd = open_entry(dir_fd, dev, cand->name);
        if (fd < 0)
                return fd == -ENOMEM ? fd : 0;
        if (fstat(fd, &st) < 0 || (uint64_t) st.st_size != cand->size)
                return 0;
        data = malloc(cand->size ? cand->size : 1);
        if (!data)
                return -ENOMEM;
        while (got < cand->size) {
                ssize_t n = read(fd, data + got, cand->size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 0;
                got += (size_t) n;
        }
        ret->name = strdup(cand->name);
        if (!ret->name)
                return -ENOMEM;
        ret->len = got;
        ret->media_type = artifact_sniff(data, got);
        sha256_hex(data, got, ret->sha256);
        ret->data = TAKE_PTR(data);
        return 1;
}

/* As the owner of what the worker made: fsuid and fsgid its host ids. Needs CAP_SETUID
 * and CAP_SETGID unless they are this process's own (rootless); without them it reads
 * with its own, and a file only its owner may read is omitted. The supervisor has no
 * threads, so the switch is the whole process's until owner_end(). */
typedef struct Owner {
        uid_t fsuid;
        gid_t fsgid;
} Owner;

static Owner owner_begin(uid_t uid, gid_t gid) {
        Owner old = { (uid_t) setfsuid(uid), (gid_t) setfsgid(gid) };
        return old;
}

static void owner_end(const Owner *old) {
        (void) setfsgid(old->fsgid);
        (void) setfsuid(old->fsuid);
}

/* An entry that is not collected: counted, with its bytes when it is a file. */
static void omit(ArtifactSet *set, const struct stat *st) {
        set->omitted++;
        if (S_ISREG(st->st_mode))
                set->omitted_bytes += (uint64_t) st->st_size;
}

/* Keep the max_files first names (in name order) of the regular files with valid names
 * in the heap; the rest is omitted. */
static int list_candidates(DIR *dir, int dfd, uint32_t max_files, Candidate *heap, size_t *n_heap, ArtifactSet *set) {
        for (;;) {
                struct dirent *de;
                struct stat st = {};
                Candidate cand;

                errno = 0;
                de = readdir(dir);
                if (!de)
                        return errno ? -errno : 0;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        st.st_mode = 0;
                if (!S_ISREG(st.st_mode) || !file_name_safe(de->d_name, strlen(de->d_name)) || max_files == 0) {
                        omit(set, &st);
                        continue;
                }
                cand = (Candidate){ .name = de->d_name, .size = (uint64_t) st.st_size };
                if (*n_heap == max_files) {
                        /* Full: the new name displaces the greatest kept one, or is omitted. */
                        if (!name_less(&cand, &heap[0])) {
                                set->omitted++;
                                set->omitted_bytes += cand.size;
                                continue;
                        }
                        set->omitted++;
                        set->omitted_bytes += heap[0].size;
                        free(heap[0].name);
                        heap[0] = heap[--*n_heap];
                        heap_down(heap, *n_heap, 0);
                }
                cand.name = strdup(de->d_name);
                if (!cand.name)
                        return -ENOMEM;
                heap[*n_heap] = cand;
                heap_up(heap, (*n_heap)++);
        }
}

/* In name order, read each kept file that still fits the byte budget. */
static int read_candidates(int dfd, dev_t dev, Candidate *heap, size_t n_heap, uint64_t budget, ArtifactSet *set) {
        int r;

        if (n_heap > 1)
                qsort(heap, n_heap, sizeof *heap, by_name);
        set->items = calloc(n_heap ? n_heap : 1, sizeof *set->items);
        if (!set->items)
                return -ENOMEM;
        for (size_t i = 0; i < n_heap; i++) {
                if (heap[i].size > budget) {
                        set->omitted++;
                        set->omitted_bytes += heap[i].size;
                        continue;
                }
                r = read_candidate(dfd, dev, &heap[i], &set->items[set->n]);
                if (r < 0)
                        return r;
                if (r == 0) {
                        set->omitted++;
                        set->omitted_bytes += heap[i].size;
                        continue;
                }
                budget -= set->items[set->n].len;
                set->n++;
        }
        return 0;
}

static int collect(int dir_fd, uint32_t max_files, uint64_t max_bytes, ArtifactSet *ret) {
        _cleanup_close_ int dfd = -1;
        ArtifactSet set = {};
        Candidate *heap = NULL;
        size_t n_heap = 0;
        DIR *dir = NULL;
        struct stat root;
        int r = 0;

        dfd = open_root(dir_fd);
        if (dfd < 0)
                return dfd;
        if (fstat(dfd, &root) < 0)
                return -errno;
        int list_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (list_fd < 0)
                return -errno;
        dir = fdopendir(list_fd);
        if (!dir) {
                r = -errno;
                close(list_fd);
                return r;
        }
        if (max_files > 0 && !(heap = calloc(max_files, sizeof *heap))) {
                r = -ENOMEM;
                goto out;
        }
        r = list_candidates(dir, dfd, max_files, heap, &n_heap, &set);
        if (r < 0)
                goto out;
        r = read_candidates(dfd, root.st_dev, heap, n_heap, max_bytes, &set);
        if (r < 0)
                goto out;
        *ret = set;
        set = (ArtifactSet){};
out:
        for (size_t i = 0; i < n_heap; i++)
                free(heap[i].name);
        free(heap);
        closedir(dir);
        artifact_set_done(&set);
        return r;
}

int artifacts_collect(int dir_fd, uid_t uid, gid_t gid, uint32_t max_files, uint64_t max_bytes, ArtifactSet *ret) {
        Owner old = owner_begin(uid, gid);
        int r = collect(dir_fd, max_files, max_bytes, ret);
        owner_end(&old);
        return r;
}

void artifact_set_omit(ArtifactSet *s, size_t i) {
        if (i >= s->n)
                return;
        s->omitted++;
        s->omitted_bytes += s->items[i].len;
        free(s->items[i].name);
        free(s->items[i].data);
        memmove(&s->items[i], &s->items[i + 1], (s->n - i - 1) * sizeof *s->items);
        s->n--;
}

void artifact_set_done(ArtifactSet *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++) {
                free(s->items[i].name);
                free(s->items[i].data);
        }
        free(s->items);
        *s = (ArtifactSet){};
}
