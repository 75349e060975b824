/* SPDX-License-Identifier: MIT */
/* The zygote's control messages (contract/zygote_proto.c) over a real SOCK_SEQPACKET
 * pair, the one descriptor-passing helper (common/fdpass.c) and MpWriter's sticky
 * error (common/mp.c): a malformed message is refused whole and leaks no descriptor,
 * a failed pack is refused whole. */
#include "unit.h"

#include <stdbool.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/mp.h"
#include "contract/plan.h"
#include "contract/runtime.h"
#include "contract/zygote_proto.h"

static int count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        int n = 0;

        assert_non_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static void pair(int sv[2]) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_validate(void **state) {
        const ZygoteSlot slot = { .slot = 3, .uid = 2146435075, .gid = 2146435075 };
        const ZygoteSlot root = { .slot = 0, .uid = 0, .gid = 65534 };
        const ZygoteSlot with_cgroup = { .slot = 1, .uid = 7, .gid = 7, .n_cgroup_fds = 2 };
        ZygoteMsg m;

        m = zygote_msg_ready(0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), 0);
        m = zygote_msg_ready(ZYGOTE_PAGES_AHEAD_MAX); /* only READY says how many pages a worker maps ahead */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), 0);
        m = zygote_msg_ready(ZYGOTE_PAGES_AHEAD_MAX + 1);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_idle();
        m.pages_ahead = 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_exiting(); /* a hint like IDLE: no field, no descriptor */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        m.slot = 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_ready(700);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG); /* READY carries no fd */
        assert_int_equal(zygote_msg_validate(&m, sizeof m - 1, 0), -EBADMSG);
        m.magic ^= 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);

        m = zygote_msg_spawn(7, &slot);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX - 1), -EBADMSG);
        m = zygote_msg_spawn(0, &slot); /* tokens start at 1 */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX), -EBADMSG);
        m = zygote_msg_spawn(1, &root); /* never root */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX), -EBADMSG);
        m = zygote_msg_spawn(1, &with_cgroup); /* a slot's cgroup descriptors come last */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX + 2), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX), -EBADMSG);
        m.n_cgroup_fds = 3; /* v1 with the CPU cap: memory, pids and cpu */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX + 3), 0);
        assert_true(_SPAWN_FD_MAX + 3 <= FDPASS_MAX);
        m.n_cgroup_fds = ZYGOTE_CGROUP_FDS_MAX + 1; /* one per hierarchy at most */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, _SPAWN_FD_MAX + ZYGOTE_CGROUP_FDS_MAX + 1), -EBADMSG);

        m = zygote_msg_slot(&slot);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        m = zygote_msg_slot(&with_cgroup);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 2), 0);
        m = zygote_msg_slot(&root);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_slot(&slot);
        m.token = 4; /* a slot is no request */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);

        m = zygote_msg_spawned(3, 9, 0, 1234, WORKER_HOW_READY, false);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), 0);
        m.uid = 5; /* an answer names its slot by number only */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        /* A worker came in one of the zygote's three ways; EXEC is the supervisor's own. */
        for (uint32_t how = 0; how <= _WORKER_HOW_MAX; how++) {
                m = zygote_msg_spawned(3, 9, 0, 1234, (WorkerHow) how, false);
                assert_int_equal(zygote_msg_validate(&m, sizeof m, 1),
                                 how >= WORKER_HOW_READY && how <= WORKER_HOW_CLONED ? 0 : -EBADMSG);
        }
        m = zygote_msg_spawned(3, 0, EAGAIN, 0, WORKER_HOW_CLONED, false); /* a failure names no way */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_idle();
        m.how = WORKER_HOW_READY;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_spawned(3, 9, 0, 1234, WORKER_HOW_CLONED, false);
        m.pages_ahead = 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        assert_string_equal(worker_how_to_string(WORKER_HOW_PREPARING), "preparing");
        assert_null(worker_how_to_string(WORKER_HOW_NONE));
        assert_null(worker_how_to_string(_WORKER_HOW_MAX));
        m = zygote_msg_spawned(3, 0, 0, 1234, WORKER_HOW_CLONED, false);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG); /* success without a pidfd */
        m = zygote_msg_spawned(3, 0, EAGAIN, 0, WORKER_HOW_NONE, false);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG); /* failure with a pidfd */
        m = zygote_msg_spawned(3, 0, -EAGAIN, 0, WORKER_HOW_NONE, false); /* the sign of error is checked */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_spawned(3, 0, ZYGOTE_ERRNO_MAX + 1, 0, WORKER_HOW_NONE, false);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_spawned(3, 0, 0, -1, WORKER_HOW_READY, false); /* success names a real pid */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        m = zygote_msg_spawned(3, 0, EIO, 42, WORKER_HOW_NONE, false); /* failure names none */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);

        /* The worker's mount namespace follows its pidfd, when the zygote had it. */
        m = zygote_msg_spawned(3, 9, 0, 1234, WORKER_HOW_READY, true);
        assert_int_equal(m.mntns, 1);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 2), 0);
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        m.mntns = 2;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 3), -EBADMSG);
        m = zygote_msg_spawned(3, 9, EIO, 0, WORKER_HOW_NONE, false);
        m.mntns = 1; /* a failure names no worker, so no namespace */
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);
        m = zygote_msg_idle();
        m.mntns = 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
        m = zygote_msg_spawned(3, 9, 0, 1234, WORKER_HOW_READY, false);
        m.reserved = 1;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 1), -EBADMSG);

        m = zygote_msg_idle();
        m.kind = 99;
        assert_int_equal(zygote_msg_validate(&m, sizeof m, 0), -EBADMSG);
}

/* Send m with n descriptors and receive it with room for `room` more
 * descriptors than this process holds (RLIMIT_NOFILE bounds their numbers). */
static int recv_with_room(const ZygoteMsg *m, size_t n, int room, ZygoteMsg *r, int got[ZYGOTE_FDS_MAX],
                          size_t *ret_n) {
        int sv[2], fds[ZYGOTE_FDS_MAX], lowest, k;
        struct rlimit old, low;

        pair(sv);
        /* /dev/null, but a mount namespace where an answer says one comes. */
        for (size_t i = 0; i < n; i++)
                fds[i] = open(i == 1 && m->kind == ZYGOTE_MSG_SPAWNED && m->mntns ? "/proc/self/ns/mnt" : "/dev/null",
                              O_RDONLY | O_CLOEXEC);
        assert_int_equal(fdpass_send(sv[0], m, sizeof *m, fds, n, 0), 0);
        fdpass_close_all(fds, n);
        lowest = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free number */
        close(lowest);
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = (struct rlimit){ .rlim_cur = (rlim_t) (lowest + room), .rlim_max = old.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        k = zygote_msg_recv(sv[1], r, got, ret_n, 0);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
        close(sv[0]);
        close(sv[1]);
        return k;
}

/* A worker's mount namespace is the one descriptor an answer may lose to the
 * receiver's RLIMIT_NOFILE: with room for the pidfd alone the answer arrives without
 * it (the worker runs without the hold); anything else cut short is refused, and no
 * descriptor is left behind. */
static void test_spawned_without_room_for_the_mount_namespace(void **state) {
        ZygoteMsg m = zygote_msg_spawned(7, 3, 0, 1234, WORKER_HOW_READY, true), r;
        int got[ZYGOTE_FDS_MAX], before = count_fds();
        size_t n;
        (void) state;

        assert_int_equal(recv_with_room(&m, 2, 2, &r, got, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(r.mntns, 1);
        fdpass_close_all(got, n);
        assert_int_equal(recv_with_room(&m, 2, 1, &r, got, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(r.mntns, 0);
        assert_int_equal(r.token, 7);
        assert_true(fcntl(got[0], F_GETFD) >= 0);
        fdpass_close_all(got, n);
        /* Something else as the namespace: refused. */
        int sv[2], fds[2] = { open("/dev/null", O_RDONLY | O_CLOEXEC), open("/dev/null", O_RDONLY | O_CLOEXEC) };
        pair(sv);
        assert_int_equal(fdpass_send(sv[0], &m, sizeof m, fds, 2, 0), 0);
        fdpass_close_all(fds, 2);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), -EBADMSG);
        close(sv[0]);
        close(sv[1]);
        /* No room for the pidfd either: nothing to believe. */
        assert_int_equal(recv_with_room(&m, 2, 0, &r, got, &n), -EBADMSG);
        /* An answer without the namespace has nothing it may lose. */
        m = zygote_msg_spawned(7, 3, 0, 1234, WORKER_HOW_READY, false);
        assert_int_equal(recv_with_room(&m, 1, 0, &r, got, &n), -EBADMSG);
        /* Nor one that carried a descriptor more than it says, whatever arrived. */
        assert_int_equal(recv_with_room(&m, 2, 1, &r, got, &n), -EBADMSG);
        /* Nor has a request: a spawn's descriptors all count. */
        const ZygoteSlot slot = { .slot = 1, .uid = 65534, .gid = 65534 };
        m = zygote_msg_spawn(8, &slot);
        assert_int_equal(recv_with_room(&m, _SPAWN_FD_MAX, _SPAWN_FD_MAX - 1, &r, got, &n), -EBADMSG);
        assert_int_equal(count_fds(), before);
}

static void test_round_trip_with_fds(void **state) {
        int sv[2], fds[_SPAWN_FD_MAX], got[ZYGOTE_FDS_MAX];
        const ZygoteSlot slot = { .slot = 17, .uid = 65534, .gid = 65533 };
        ZygoteMsg m = zygote_msg_spawn(42, &slot), r;
        size_t n;

        pair(sv);
        for (int i = 0; i < _SPAWN_FD_MAX; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(zygote_msg_send(sv[0], &m, fds, _SPAWN_FD_MAX, 0), 0);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), 0);
        assert_int_equal(n, _SPAWN_FD_MAX);
        assert_int_equal(r.kind, ZYGOTE_MSG_SPAWN);
        assert_int_equal(r.token, 42);
        assert_int_equal(r.uid, 65534);
        assert_int_equal(r.gid, 65533);
        assert_int_equal(zygote_msg_get_slot(&r).slot, 17);
        for (int i = 0; i < _SPAWN_FD_MAX; i++)
                assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
        fdpass_close_all(got, n);
        fdpass_close_all(fds, _SPAWN_FD_MAX);
        /* A message that would not validate is not sent at all. */
        m.token = 0;
        assert_int_equal(zygote_msg_send(sv[0], &m, fds, 0, 0), -EINVAL);
        close(sv[0]);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), -ECONNRESET);
        close(sv[1]);
}

/* Garbage from a broken peer: refused, and the descriptors it carried are closed. */
static void test_garbage_closes_fds(void **state) {
        int sv[2], fds[3], got[ZYGOTE_FDS_MAX], before;
        char junk[sizeof(ZygoteMsg)] = "not a zygote message";
        ZygoteMsg r;
        size_t n = 99;

        pair(sv);
        before = count_fds();
        for (int i = 0; i < 3; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(fdpass_send(sv[0], junk, sizeof junk, fds, 3, 0), 0);
        fdpass_close_all(fds, 3);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), -EBADMSG);
        assert_int_equal(n, 0);
        assert_int_equal(count_fds(), before);

        /* A well-formed SPAWNED with a negative error, as a buggy zygote might send. */
        ZygoteMsg bad = zygote_msg_spawned(5, 0, 0, 0, WORKER_HOW_NONE, false);
        bad.error = -11;
        assert_int_equal(fdpass_send(sv[0], &bad, sizeof bad, NULL, 0, 0), 0);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), -EBADMSG);

        /* Too long: a datagram one byte longer than a message. */
        char longer[sizeof(ZygoteMsg) + 8] = {};
        ZygoteMsg ok = zygote_msg_idle();
        memcpy(longer, &ok, sizeof ok);
        assert_int_equal(fdpass_send(sv[0], longer, sizeof longer, NULL, 0, 0), 0);
        assert_int_equal(zygote_msg_recv(sv[1], &r, got, &n, 0), -EBADMSG);
        close(sv[0]);
        close(sv[1]);
}

/* More descriptors than the receiver takes: the extra ones are closed. */
static void test_fdpass_extra_fds_closed(void **state) {
        int sv[2], fds[4], got[2], before;
        size_t n;
        char b = 'x';

        pair(sv);
        before = count_fds();
        for (int i = 0; i < 4; i++)
                fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(fdpass_send(sv[0], &b, 1, fds, 4, 0), 0);
        fdpass_close_all(fds, 4);
        assert_int_equal(fdpass_recv(sv[1], &b, 1, got, 2, &n, 0), 1);
        assert_int_equal(n, 2);
        fdpass_close_all(got, n);
        assert_int_equal(count_fds(), before);
        assert_int_equal(fdpass_send(sv[0], &b, 1, fds, FDPASS_MAX + 1, 0), -EINVAL);
        close(sv[0]);
        close(sv[1]);
}

static void test_mp_writer_sticky(void **state) {
        MpWriter w;
        char big[100];

        memset(big, 'x', sizeof big);
        mp_writer_init(&w, 32);
        msgpack_pack_map(&w.pk, 2);
        mp_pack_kv_str(&w.pk, "a", "b");
        assert_int_equal(mp_writer_error(&w), 0);
        mp_pack_strn(&w.pk, big, sizeof big); /* past the limit */
        assert_int_equal(mp_writer_error(&w), -E2BIG);
        size_t size = w.sb.size;
        mp_pack_kv_str(&w.pk, "c", "d"); /* nothing more is written */
        assert_int_equal(w.sb.size, size);
        assert_int_equal(mp_writer_error(&w), -E2BIG);
        mp_writer_reset(&w);
        assert_int_equal(mp_writer_error(&w), 0);
        assert_int_equal(w.sb.size, 0);
        mp_pack_kv_str(&w.pk, "c", "d");
        assert_int_equal(mp_writer_error(&w), 0);
        mp_writer_done(&w);
}

/* The configured runtime paths: absolute, each one once, the standard library first,
 * lib-dynload inside one of them, and then the end (also on a second call). */
static void test_runtime_paths(void **state) {
        const char *cursor = NULL;
        char path[PATH_MAX], seen[16][PATH_MAX];
        bool dynload = false;
        size_t n = 0;
        int r;

        while ((r = runtime_path_next(runtime_binds, &cursor, path)) > 0) {
                assert_true(n < 16);
                assert_int_equal(path[0], '/');
                for (size_t i = 0; i < n; i++)
                        assert_string_not_equal(seen[i], path);
                if (n == 0)
                        assert_string_equal(path, CODEINTERP_PY_STDLIB);
                if (strncmp(CODEINTERP_PY_DYNLOAD, path, strlen(path)) == 0 &&
                    (CODEINTERP_PY_DYNLOAD[strlen(path)] == '/' || CODEINTERP_PY_DYNLOAD[strlen(path)] == 0))
                        dynload = true;
                strcpy(seen[n++], path);
        }
        assert_int_equal(r, 0);
        assert_true(n >= 2); /* the stdlib and at least the C library's directory */
        assert_true(dynload);
        assert_int_equal(runtime_path_next(runtime_binds, &cursor, path), 0);
}

/* The packages' binds: none for an empty mask; for all of them, absolute paths, each
 * once although several packages list the same (numpy comes with pandas and
 * matplotlib too), and never one of the interpreter's binds. A package the build lacks
 * is reported as missing. */
static void test_runtime_packages(void **state) {
        const uint32_t all = POLICY_PACKAGE_BIT(POLICY_PACKAGE_NUMPY) | POLICY_PACKAGE_BIT(POLICY_PACKAGE_PANDAS) |
                             POLICY_PACKAGE_BIT(POLICY_PACKAGE_MATPLOTLIB);
        PolicyPackage package = 0, missing;
        const char *cursor = NULL;
        char path[PATH_MAX], seen[64][PATH_MAX];
        size_t n = 0, listed = 0;
        uint32_t available = 0;
        int r;

        assert_int_equal(runtime_package_bind_next(0, &package, &cursor, path), 0);
        assert_int_equal(runtime_packages_missing(0, &missing), 0);
        for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                if (runtime_packages[p].missing) {
                        assert_int_equal(runtime_packages_missing(POLICY_PACKAGE_BIT(p), &missing), 1);
                        assert_int_equal(missing, p);
                        assert_string_equal(runtime_packages[p].binds, "");
                        continue;
                }
                available |= POLICY_PACKAGE_BIT(p);
                for (const char *c = runtime_packages[p].binds; *c; c++)
                        listed += *c == ':';
                listed += runtime_packages[p].binds[0] != 0;
        }
        assert_int_equal(runtime_packages_missing(available, &missing), 0);
        if (available != all)
                skip(); /* the dedup below needs the packages that share numpy */

        package = 0;
        cursor = NULL;
        while ((r = runtime_package_bind_next(all, &package, &cursor, path)) > 0) {
                const char *base = NULL;
                char b[PATH_MAX];

                assert_true(n < 64);
                assert_int_equal(path[0], '/');
                for (size_t i = 0; i < n; i++)
                        assert_string_not_equal(seen[i], path);
                while (runtime_path_next(runtime_binds, &base, b) > 0)
                        assert_string_not_equal(b, path);
                strcpy(seen[n++], path);
        }
        assert_int_equal(r, 0);
        assert_true(n > 0 && n < listed); /* shared entries came once */
        assert_int_equal(runtime_package_bind_next(all, &package, &cursor, path), 0);
}

/* The plan carries the policy's pythonPackages; a mask with a bit outside the
 * allow-list is refused. */
static void test_plan_packages(void **state) {
        Policy p;
        MpWriter w;
        WorkerPlan plan;
        void *buf;

        policy_init_defaults(&p);
        p.python_packages = POLICY_PACKAGE_BIT(POLICY_PACKAGE_NUMPY) | POLICY_PACKAGE_BIT(POLICY_PACKAGE_MATPLOTLIB);
        mp_writer_init(&w, 1 << 20);
        assert_int_equal(plan_encode("1", 1, &p, NULL, 0, &w), 0);
        buf = malloc(w.sb.size);
        assert_non_null(buf);
        memcpy(buf, w.sb.data, w.sb.size);
        assert_int_equal(plan_decode(buf, w.sb.size, &plan), 0);
        assert_int_equal(plan.python_packages, p.python_packages);
        plan_done(&plan);

        mp_writer_reset(&w);
        p.python_packages = POLICY_PACKAGE_BIT(_POLICY_PACKAGE_MAX);
        assert_int_equal(plan_encode("1", 1, &p, NULL, 0, &w), 0);
        buf = malloc(w.sb.size);
        assert_non_null(buf);
        memcpy(buf, w.sb.data, w.sb.size);
        assert_int_equal(plan_decode(buf, w.sb.size, &plan), -EBADMSG);
        mp_writer_done(&w);
}

/* A kept output travels as kind "output": its bytes, no original (mounted at
 * /inputs/<id> by the worker, worker/sandbox.c). */
static void test_plan_output_input(void **state) {
        PlanInput in = { .id = "out-1-raw.csv",
                         .kind = PLAN_INPUT_OUTPUT,
                         .text = "a,b\n",
                         .text_len = 4,
                         .media_type = "text/csv" };
        Policy p;
        MpWriter w;
        WorkerPlan plan;
        void *buf;
        (void) state;

        policy_init_defaults(&p);
        mp_writer_init(&w, 1 << 20);
        assert_int_equal(plan_encode("1", 1, &p, &in, 1, &w), 0);
        buf = malloc(w.sb.size);
        assert_non_null(buf);
        memcpy(buf, w.sb.data, w.sb.size);
        assert_int_equal(plan_decode(buf, w.sb.size, &plan), 0);
        assert_int_equal(plan.sandbox.n_inputs, 1);
        assert_string_equal(plan.sandbox.inputs[0].id, "out-1-raw.csv");
        assert_int_equal(plan.sandbox.inputs[0].kind, PLAN_INPUT_OUTPUT);
        assert_int_equal(plan.sandbox.inputs[0].text_len, 4);
        assert_memory_equal(plan.sandbox.inputs[0].text, "a,b\n", 4);
        assert_int_equal(plan.sandbox.inputs[0].original_len, 0);
        plan_done(&plan);
        mp_writer_done(&w);
}

UNIT_MAIN(NULL, NULL, TEST(test_runtime_paths), TEST(test_validate), TEST(test_round_trip_with_fds),
          TEST(test_spawned_without_room_for_the_mount_namespace), TEST(test_garbage_closes_fds),
          TEST(test_fdpass_extra_fds_closed), TEST(test_mp_writer_sticky), TEST(test_runtime_packages),
          TEST(test_plan_output_input), TEST(test_plan_packages))
