/* SPDX-License-Identifier: MIT */
/* supervisor/artifacts.c: the media type sniffer, the name rule, and the reader over a
 * real directory (and, as root, a real fsmount()ed tmpfs) holding every kind of entry. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <seccomp.h>
#include <sys/capability.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/sha256.h"
#include "common/util.h"
#include "supervisor/artifacts.h"

#define SNIFF(lit) artifact_sniff(lit, sizeof lit - 1)

static void test_sniff_magic(void **state) {
        (void) state;
        assert_string_equal(SNIFF("\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), "image/png");
        assert_string_equal(SNIFF("\xff\xd8\xff\xe0\0\x10JFIF"), "image/jpeg");
        assert_string_equal(SNIFF("GIF89a\x01\0\x01\0"), "image/gif");
        assert_string_equal(SNIFF("GIF87a"), "image/gif");
        assert_string_equal(SNIFF("RIFF\x24\0\0\0WEBPVP8 "), "image/webp");
        assert_string_equal(SNIFF("RIFF\x24\0\0\0WAVEfmt "), "application/octet-stream");
        assert_string_equal(SNIFF("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), "application/pdf");
        /* Truncated magic is not the format. */
        assert_string_equal(SNIFF("\x89PNG\r\n"), "application/octet-stream");
        assert_string_equal(SNIFF("\xff\xd8"), "application/octet-stream");
}

static void test_sniff_text(void **state) {
        (void) state;
        assert_string_equal(SNIFF("hello\n"), "text/plain");
        assert_string_equal(SNIFF(""), "text/plain");
        assert_string_equal(SNIFF("gr\xc3\xbc\xc3\x9f dich\n"), "text/plain");
        assert_string_equal(SNIFF("bad \xc3\x28 utf-8"), "application/octet-stream");
        assert_string_equal(SNIFF("nul\0inside"), "application/octet-stream");
        assert_string_equal(SNIFF("<svg xmlns=\"http://www.w3.org/2000/svg\"/>"), "image/svg+xml");
        assert_string_equal(SNIFF("\xef\xbb\xbf  <?xml version=\"1.0\"?>\n<svg/>"), "image/svg+xml");
        assert_string_equal(SNIFF("<?xml version=\"1.0\"?>\n<doc/>"), "application/xml");
        assert_string_equal(SNIFF("{\"a\": [1, 2.5e3, -0.1, true, null, \"x\\u00e9\"]}\n"), "application/json");
        assert_string_equal(SNIFF("[]"), "application/json");
        assert_string_equal(SNIFF("{\"a\": }"), "text/plain");
        assert_string_equal(SNIFF("{\"a\": 1} trailing"), "text/plain");
        assert_string_equal(SNIFF("[01]"), "text/plain");
        assert_string_equal(SNIFF("42"), "text/plain"); /* a bare scalar is text */
        assert_string_equal(SNIFF("a,b,c\n1,2,3\n4,5,6\n"), "text/csv");
        assert_string_equal(SNIFF("a,b\r\n\"x,y\",2\r\n"), "text/csv");
        assert_string_equal(SNIFF("a,b\n1,2,3\n"), "text/plain"); /* ragged */
        assert_string_equal(SNIFF("a,b\n"), "text/plain");        /* one line */
        assert_string_equal(SNIFF("a\nb\n"), "text/plain");       /* no comma */
}

static void test_sniff_deep_json(void **state) {
        char buf[2 * 100 + 1];
        (void) state;
        /* Deeper than the sniffer follows: text, not a crash. */
        memset(buf, '[', 100);
        memset(buf + 100, ']', 100);
        assert_string_equal(artifact_sniff(buf, 200), "text/plain");
        assert_string_equal(artifact_sniff(buf + 90, 20), "application/json");
}

static void test_names(void **state) {
        char longname[300];
        (void) state;
        assert_true(file_name_safe("plot.png", 8));
        assert_true(file_name_safe("caf\xc3\xa9.txt", 9));
        assert_true(file_name_safe(".hidden", 7));
        assert_false(file_name_safe("", 0));
        assert_false(file_name_safe(".", 1));
        assert_false(file_name_safe("..", 2));
        assert_false(file_name_safe("a/b", 3));
        assert_false(file_name_safe("bad\xff", 4));
        assert_false(file_name_safe("tab\there", 8));
        assert_false(file_name_safe("nl\n", 3));
        assert_false(file_name_safe("del\x7f", 4));
        memset(longname, 'a', sizeof longname);
        longname[NAME_MAX] = 0;
        assert_true(file_name_safe(longname, NAME_MAX));
        longname[NAME_MAX] = 'a';
        longname[NAME_MAX + 1] = 0;
        assert_false(file_name_safe(longname, NAME_MAX + 1));
}

static void put(int dfd, const char *name, const void *data, size_t len) {
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        close(fd);
}

static char dir_template[] = "/tmp/ci-artifacts-XXXXXX";

/* Every kind of entry; the reader returns the regular files with good names, by name. */
static void test_collect_kinds(void **state) {
        char dir[sizeof dir_template], path[256], hex[65];
        ArtifactSet s = {};
        int dfd, fd;
        (void) state;

        memcpy(dir, dir_template, sizeof dir);
        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        assert_true(dfd >= 0);
        put(dfd, "b.txt", "bee\n", 4);
        put(dfd, "a.png", "not a png\n", 10); /* name says PNG, content says text */
        put(dfd, "c.bin", "\x00\x01\x02", 3);
        assert_int_equal(symlinkat("/etc/passwd", dfd, "link"), 0);
        assert_int_equal(mkfifoat(dfd, "fifo", 0644), 0);
        assert_int_equal(mkdirat(dfd, "sub", 0755), 0);
        put(dfd, "bad\xff", "xx", 2);  /* invalid UTF-8: omitted, 2 bytes */
        put(dfd, "ctl\x01", "yyy", 3); /* control character: omitted, 3 bytes */
        fd = openat(dfd, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t) 1 << 40), 0); /* 1 TiB, no blocks */
        close(fd);

        assert_int_equal(artifacts_collect(dfd, geteuid(), getegid(), 16, 1 << 20, &s), 0);
        assert_int_equal(s.n, 3);
        assert_string_equal(s.items[0].name, "a.png");
        assert_string_equal(s.items[0].media_type, "text/plain");
        assert_string_equal(s.items[1].name, "b.txt");
        assert_int_equal(s.items[1].len, 4);
        assert_memory_equal(s.items[1].data, "bee\n", 4);
        sha256_hex("bee\n", 4, hex);
        assert_string_equal(s.items[1].sha256, hex);
        assert_string_equal(s.items[2].name, "c.bin");
        assert_string_equal(s.items[2].media_type, "application/octet-stream");
        /* link, fifo, sub, two bad names, the sparse file (too large for the budget) */
        assert_int_equal(s.omitted, 6);
        assert_int_equal(s.omitted_bytes, 2 + 3 + ((uint64_t) 1 << 40));

        /* Omitting one when fitting moves it into the counts. */
        artifact_set_omit(&s, 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.items[0].name, "b.txt");
        assert_int_equal(s.omitted, 7);
        assert_int_equal(s.omitted_bytes, 2 + 3 + ((uint64_t) 1 << 40) + 10);
        artifact_set_done(&s);

        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        assert_int_equal(system(path), 0);
        close(dfd);
}

/* More files than kept: the first max_files by name, whatever the listing order;
 * the byte budget in name order, a file that does not fit is skipped, later smaller
 * ones still come. */
static void test_collect_bounds(void **state) {
        char dir[sizeof dir_template], path[256], name[16];
        ArtifactSet s = {};
        int dfd;
        (void) state;

        memcpy(dir, dir_template, sizeof dir);
        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        assert_true(dfd >= 0);
        for (int i = 19; i >= 0; i--) {
                snprintf(name, sizeof name, "f%02d", i);
                put(dfd, name, "0123456789", (size_t) (i % 2 ? 10 : 1));
        }
        assert_int_equal(artifacts_collect(dfd, geteuid(), getegid(), 5, 1000, &s), 0);
        assert_int_equal(s.n, 5);
        for (size_t i = 0; i < 5; i++) {
                snprintf(name, sizeof name, "f%02zu", i);
                assert_string_equal(s.items[i].name, name);
        }
        assert_int_equal(s.omitted, 15);
        assert_int_equal(s.omitted_bytes, 8 * 10 + 7 * 1); /* f05..f19: 8 odd (10 B), 7 even (1 B) */
        artifact_set_done(&s);

        /* Budget 13 bytes: f00 (1), f01 (10), f02 (1) fit; f03 (10) does not; f04 (1) does. */
        assert_int_equal(artifacts_collect(dfd, geteuid(), getegid(), 5, 13, &s), 0);
        assert_int_equal(s.n, 4);
        assert_string_equal(s.items[0].name, "f00");
        assert_string_equal(s.items[1].name, "f01");
        assert_string_equal(s.items[2].name, "f02");
        assert_string_equal(s.items[3].name, "f04");
        assert_int_equal(s.omitted, 16);
        assert_int_equal(s.omitted_bytes, 8 * 10 + 7 * 1 + 10);
        artifact_set_done(&s);

        /* No files wanted: everything is counted. */
        assert_int_equal(artifacts_collect(dfd, geteuid(), getegid(), 0, 1000, &s), 0);
        assert_int_equal(s.n, 0);
        assert_int_equal(s.omitted, 20);
        assert_int_equal(s.omitted_bytes, 10 * 10 + 10 * 1);
        artifact_set_done(&s);

        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        assert_int_equal(system(path), 0);
        close(dfd);
}

/* The supervisor's tmpfs: the kernel enforces both bounds. Needs CAP_SYS_ADMIN. */
static void test_mount_bounds(void **state) {
        int mnt, dfd, fd;
        char buf[8192] = { 0 };
        ArtifactSet s = {};
        (void) state;

        if (geteuid() != 0) {
                skip();
                return;
        }
        assert_int_equal(artifacts_mount_new(0, 2, &mnt), -EINVAL);
        /* tmpfs counts whole pages: two one-byte files need two. */
        assert_int_equal(artifacts_mount_new(8192, 2, &mnt), 0);
        dfd = openat(mnt, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        assert_true(dfd >= 0);
        put(dfd, "one", "1", 1);
        put(dfd, "two", "2", 1);
        /* maxArtifacts + 1 inodes: a third entry does not fit. */
        assert_int_equal(openat(dfd, "three", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644), -1);
        assert_int_equal(errno, ENOSPC);
        /* size=8192, two pages in use: a larger write fails or is short. */
        fd = openat(dfd, "one", O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_true(write(fd, buf, sizeof buf) < (ssize_t) sizeof buf);
        close(fd);
        close(dfd);
        assert_int_equal(artifacts_collect(mnt, geteuid(), getegid(), 2, 8192, &s), 0);
        assert_int_equal(s.n, 2);
        assert_int_equal(s.omitted, 0);
        artifact_set_done(&s);
        close(mnt);
}

/* Rootless (run as root, in a child that becomes uid/gid 65534): artifacts_prepare()
 * says each mount comes from a helper, and artifacts_mount_new() gets it, with the
 * same bounds, the root owned by this user on the host; the helper is kept for the
 * next mount, and reaped by artifacts_helper_stop(). The
 * child's exit status names the first check that failed (77: no unprivileged user
 * namespaces here). */
static int rootless_child(void) {
        int mnt = -1, dfd, fd, status;
        struct statfs sfs;
        struct stat st;

        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return 2;
        /* As after an exec by that user (setpriv, systemd): the uid change made us
         * non-dumpable, and /proc/PID/uid_map would be root's. */
        if (prctl(PR_SET_DUMPABLE, 1) < 0)
                return 2;
        if (artifacts_prepare() != ARTIFACTS_BY_HELPER)
                return 3;
        int r = artifacts_mount_new(8192, 2, &mnt);
        if (r == -EPERM || r == -ENOSPC)
                return 77;
        if (r < 0)
                return 4;
        pid_t helper = artifacts_helper_pid();
        int again = -1;
        if (helper <= 0 || waitpid(-1, &status, WNOHANG) != 0)
                return 5; /* the helper is kept, alive */
        if (artifacts_mount_new(4096, 1, &again) < 0 || artifacts_helper_pid() != helper)
                return 5;
        close(again);
        artifacts_helper_stop();
        if (artifacts_helper_pid() != 0 || waitpid(-1, &status, WNOHANG) != -1 || errno != ECHILD)
                return 5; /* and reaped when stopped */
        if (fstatfs(mnt, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC || fstat(mnt, &st) < 0)
                return 6;
        if (st.st_uid != 65534 || st.st_gid != 65534 || (st.st_mode & 07777) != 0700)
                return 7;
        dfd = openat(mnt, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (dfd < 0)
                return 8;
        for (int i = 0; i < 2; i++) {
                char name[8];
                snprintf(name, sizeof name, "f%d", i);
                fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0)
                        return 9;
                close(fd);
        }
        if (openat(dfd, "f2", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) >= 0 || errno != ENOSPC)
                return 10;
        if (sfs.f_blocks * sfs.f_bsize != 8192)
                return 11;
        return 0;
}

/* Run fn in a forked child of root (skipped when not root); its exit status names the
 * first check that failed (0: all passed, 77: this host cannot run the test). */
static void in_root_child(int (*fn)(void)) {
        int status = 0;
        pid_t pid;

        if (geteuid() != 0) {
                skip();
                return;
        }
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(fn());
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77) {
                skip();
                return;
        }
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_mount_rootless(void **state) {
        (void) state;
        in_root_child(rootless_child);
}

/* Take capability c out of every set of this process, the bounding set too. */
static int cap_drop(cap_value_t c) {
        cap_t caps = cap_get_proc();
        int r = -1;

        if (caps && cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_CLEAR) == 0 &&
            cap_set_flag(caps, CAP_PERMITTED, 1, &c, CAP_CLEAR) == 0 &&
            cap_set_flag(caps, CAP_INHERITABLE, 1, &c, CAP_CLEAR) == 0 && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
                r = cap_set_proc(caps);
        cap_free(caps);
        return r;
}

/* What the worker leaves as another user (its host ids, 65534 here), made unreadable
 * (mode 0): read as that owner, without CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH (the
 * child drops both, as the systemd unit's bounding set does), every byte comes back.
 * And with openat2() answering ENOSYS, as systemd's RestrictSUIDSGID= makes it: the
 * reader never needed it; a symlink is still never followed. */
static int owner_child(void) {
        char dir[sizeof dir_template];
        ArtifactSet s = {};
        scmp_filter_ctx ctx;
        int dfd, fd;

        memcpy(dir, dir_template, sizeof dir);
        if (!mkdtemp(dir) || chmod(dir, 0777) < 0 || (dfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC)) < 0)
                return 2;
        /* The "worker": files of uid/gid 65534, one of them mode 0, one mode 0200. */
        fd = openat(dfd, "secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "s3", 2) != 2 || fchown(fd, 65534, 65534) < 0 || fchmod(fd, 0) < 0)
                return 3;
        close(fd);
        fd = openat(dfd, "wonly", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, "w", 1) != 1 || fchown(fd, 65534, 65534) < 0 || fchmod(fd, 0200) < 0)
                return 3;
        close(fd);
        if (symlinkat("secret", dfd, "link") < 0 || fchownat(dfd, "link", 65534, 65534, AT_SYMLINK_NOFOLLOW) < 0)
                return 3;
        /* No capability that reads past a file's mode. */
        if (cap_drop(CAP_DAC_OVERRIDE) < 0 || cap_drop(CAP_DAC_READ_SEARCH) < 0 || cap_drop(CAP_FOWNER) < 0)
                return 4;
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 || seccomp_load(ctx) < 0)
                return 5;
        seccomp_release(ctx);
        /* As root (fsuid 0) without those capabilities, the mode-0 file is omitted. */
        if (artifacts_collect(dfd, 0, 0, 8, 1000, &s) < 0 || s.n != 0 || s.omitted != 3)
                return 6;
        artifact_set_done(&s);
        /* As the owner: both files, whole; the link is omitted, not followed. */
        if (artifacts_collect(dfd, 65534, 65534, 8, 1000, &s) < 0)
                return 7;
        if (s.n != 2 || strcmp(s.items[0].name, "secret") != 0 || s.items[0].len != 2 ||
            memcmp(s.items[0].data, "s3", 2) != 0 || strcmp(s.items[1].name, "wonly") != 0 || s.omitted != 1)
                return 8;
        artifact_set_done(&s);
        /* The process's own ids are back. */
        if (setfsuid((uid_t) -1) != 0 || setfsgid((gid_t) -1) != 0)
                return 9;
        close(dfd);
        return 0;
}

static void test_collect_as_owner(void **state) {
        (void) state;
        in_root_child(owner_child);
        /* The child's directory is left under /tmp/ci-artifacts-*: remove them all. */
        assert_int_equal(system("find /tmp -maxdepth 1 -name 'ci-artifacts-*' -exec rm -rf {} +"), 0);
}

/* Root without CAP_SYS_ADMIN and CAP_SETFCAP (a container that drops them): the tmpfs
 * comes from a helper whose user namespace maps every id of ours but uid 0, so a
 * worker's host ids (1000 here) can own files there; its root is nobody's, mode 0777;
 * the bounds hold. */
static int no_sys_admin_child(void) {
        int mnt = -1, dfd, fd;
        struct statfs sfs;
        struct stat st;
        ArtifactSet s = {};

        if (cap_drop(CAP_SYS_ADMIN) < 0 || cap_drop(CAP_SETFCAP) < 0)
                return 2;
        int how = artifacts_prepare();
        if (how == -EPERM || how == -ENOSPC)
                return 77; /* no unprivileged user namespaces on this host */
        if (how != ARTIFACTS_BY_HELPER)
                return 3;
        if (artifacts_mount_new(8192, 2, &mnt) < 0)
                return 4;
        if (fstatfs(mnt, &sfs) < 0 || sfs.f_type != TMPFS_MAGIC || sfs.f_blocks * sfs.f_bsize != 8192 ||
            fstat(mnt, &st) < 0)
                return 5;
        if (st.st_uid != 65534 || st.st_gid != 65534 || (st.st_mode & 07777) != 0777)
                return 6;
        dfd = openat(mnt, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
        if (dfd < 0)
                return 7;
        /* The worker's side: another uid creates a file there (and makes it unreadable). */
        pid_t pid = fork();
        if (pid == 0) {
                if (setresgid(1000, 1000, 1000) < 0 || setresuid(1000, 1000, 1000) < 0)
                        _exit(1);
                fd = openat(dfd, "made", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
                _exit(fd >= 0 && write(fd, "hi", 2) == 2 ? 0 : 2);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return 8;
        if (fstatat(dfd, "made", &st, 0) < 0 || st.st_uid != 1000)
                return 9;
        if (artifacts_collect(mnt, 1000, 1000, 2, 8192, &s) < 0 || s.n != 1 || s.items[0].len != 2)
                return 10;
        artifact_set_done(&s);
        close(dfd);
        close(mnt);
        return 0;
}

static void test_mount_without_sys_admin(void **state) {
        (void) state;
        in_root_child(no_sys_admin_child);
}

UNIT_MAIN(NULL, NULL, TEST(test_sniff_magic), TEST(test_sniff_text), TEST(test_sniff_deep_json), TEST(test_names),
          TEST(test_collect_kinds), TEST(test_collect_bounds), TEST(test_mount_bounds), TEST(test_mount_rootless),
          TEST(test_collect_as_owner), TEST(test_mount_without_sys_admin))
