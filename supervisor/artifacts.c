/* SPDX-License-Identifier: MIT */
#include "supervisor/artifacts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/fdpass.h"
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

int artifacts_prepare(void) {
        _cleanup_close_ int fs = -1;

        if (userns_rootless())
                return 0; /* each mount is made by a helper (artifacts_mount_new) */
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs >= 0)
                return 0;
        if (errno != EPERM)
                return -errno;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return -errno;
        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        return fs < 0 ? -errno : 1;
}

/* The mount, made in this process's mount namespace; uid and gid are host ids. */
static int mount_here(uint64_t max_bytes, uint32_t max_files, uid_t uid, gid_t gid, int *ret_fd) {
        _cleanup_close_ int fs = -1;
        int mnt, r;

        fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if ((r = set_number(fs, "size", max_bytes)) < 0 ||
            (r = set_number(fs, "nr_inodes", (unsigned long long) max_files + 1)) < 0 ||
            (r = set_option(fs, "mode", "0700")) < 0 || (r = set_number(fs, "uid", uid)) < 0 ||
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

/* Rootless: a child cloned into a user namespace of its own (mapping only this user's
 * ids, to themselves) and a mount namespace that namespace owns, where fsopen() is
 * allowed, makes the mount with the same bounds and sends its descriptor back, then
 * exits. The child runs only this code; a failure is its exit status (the errno). */
static int mount_in_helper(uint64_t max_bytes, uint32_t max_files, uid_t uid, gid_t gid, int *ret_fd) {
        _cleanup_close_ int ours = -1, theirs = -1, pidfd = -1, mnt = -1;
        int pair[2], status = 0;
        size_t n_fds = 0;
        ssize_t n;
        pid_t pid;
        char c;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        ours = pair[0];
        theirs = pair[1];
        pid = clone_with_pidfd(CLONE_NEWUSER | CLONE_NEWNS, SIGCHLD, &pidfd);
        if (pid < 0)
                return pid;
        if (pid == 0) {
                int fd = -1, r = userns_write_own_id_maps(uid, gid);
                if (r >= 0)
                        r = mount_here(max_bytes, max_files, uid, gid, &fd);
                if (r >= 0)
                        r = fdpass_send(theirs, "m", 1, &fd, 1, 0);
                _exit(r < 0 ? MIN(-r, 255) : 0);
        }
        closep(&theirs);
        /* One message with the descriptor, or EOF when the child failed: then its exit
         * status is the errno. Either way it has exited or is about to. */
        n = fdpass_recv(ours, &c, 1, &mnt, 1, &n_fds, 0);
        while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR)
                ;
        if (n == 1 && n_fds == 1) {
                *ret_fd = TAKE_FD(mnt);
                return 0;
        }
        return n < 0 ? (int) n : WIFEXITED(status) && WEXITSTATUS(status) > 0 ? -WEXITSTATUS(status) : -EPROTO;
}

int artifacts_mount_new(uint64_t max_bytes, uint32_t max_files, uid_t uid, gid_t gid, int *ret_fd) {
        if (max_bytes == 0) /* tmpfs reads size=0 as "unbounded" */
                return -EINVAL;
        if (userns_rootless())
                return mount_in_helper(max_bytes, max_files, uid, gid, ret_fd);
        return mount_here(max_bytes, max_files, uid, gid, ret_fd);
}

/* ---- names ---- */

bool artifact_name_valid(const char *name, size_t len) {
        uint64_t chars;

        if (len == 0 || len > ARTIFACT_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) name[i];
                if (c < 0x20 || c == 0x7f || c == '/')
                        return false;
        }
        return utf8_count(name, len, &chars) >= 0;
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

static int open_beneath(int dir_fd, const char *name, uint64_t flags) {
        struct open_how how = {
                .flags = flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int) syscall(SYS_openat2, dir_fd, name, &how, sizeof how);
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
static int read_candidate(int dir_fd, const Candidate *cand, Artifact *ret) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ uint8_t *data = NULL;
        struct stat st;
        size_t got = 0;

        fd = open_beneath(dir_fd, cand->name, O_RDONLY);
        if (fd < 0)
                return fd == -ENOMEM ? fd : 0;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t) st.st_size != cand->size)
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

int artifacts_collect(int dir_fd, uint32_t max_files, uint64_t max_bytes, ArtifactSet *ret) {
        _cleanup_close_ int dfd = -1;
        ArtifactSet set = {};
        Candidate *heap = NULL;
        size_t n_heap = 0;
        DIR *dir = NULL;
        uint64_t budget = max_bytes;
        int r = 0;

        dfd = open_beneath(dir_fd, ".", O_RDONLY | O_DIRECTORY);
        if (dfd < 0)
                return dfd;
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
        for (;;) {
                struct dirent *de;
                struct stat st = {};
                Candidate cand;

                errno = 0;
                de = readdir(dir);
                if (!de) {
                        r = errno ? -errno : 0;
                        if (r < 0)
                                goto out;
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        st.st_mode = 0;
                if (!S_ISREG(st.st_mode) || !artifact_name_valid(de->d_name, strlen(de->d_name)) || max_files == 0) {
                        set.omitted++;
                        if (S_ISREG(st.st_mode))
                                set.omitted_bytes += (uint64_t) st.st_size;
                        continue;
                }
                cand = (Candidate){ .name = de->d_name, .size = (uint64_t) st.st_size };
                if (n_heap == max_files) {
                        /* Full: the new name displaces the greatest kept one, or is omitted. */
                        if (!name_less(&cand, &heap[0])) {
                                set.omitted++;
                                set.omitted_bytes += cand.size;
                                continue;
                        }
                        set.omitted++;
                        set.omitted_bytes += heap[0].size;
                        free(heap[0].name);
                        heap[0] = heap[--n_heap];
                        heap_down(heap, n_heap, 0);
                }
                cand.name = strdup(de->d_name);
                if (!cand.name) {
                        r = -ENOMEM;
                        goto out;
                }
                heap[n_heap] = cand;
                heap_up(heap, n_heap++);
        }

        if (n_heap > 1)
                qsort(heap, n_heap, sizeof *heap, by_name);
        set.items = calloc(n_heap ? n_heap : 1, sizeof *set.items);
        if (!set.items) {
                r = -ENOMEM;
                goto out;
        }
        for (size_t i = 0; i < n_heap; i++) {
                /* In name order, each file that still fits the byte budget. */
                if (heap[i].size > budget) {
                        set.omitted++;
                        set.omitted_bytes += heap[i].size;
                        continue;
                }
                r = read_candidate(dfd, &heap[i], &set.items[set.n]);
                if (r < 0)
                        goto out;
                if (r == 0) {
                        set.omitted++;
                        set.omitted_bytes += heap[i].size;
                        continue;
                }
                budget -= set.items[set.n].len;
                set.n++;
        }
        r = 0;
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
