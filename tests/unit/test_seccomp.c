/* SPDX-License-Identifier: MIT */
/* The worker's seccomp filter, exercised for real: every test forks a child that sets
 * no_new_privs, loads the compiled program (errno or kill mode) and then makes the calls
 * under test. The child reports the first failed check through a pipe (write(2) is
 * allowed) and exits 1; the parent turns that into a cmocka failure. Kill-mode tests
 * expect the child to die of SIGSYS (core dumps are switched off first). */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "policy/seccomp.h"

extern char **environ;

static struct sock_fprog prog_errno;
static struct sock_fprog prog_kill;
/* The two parts a pre-started worker loads (policy_seccomp_compile_early/_late). */
static struct sock_fprog prog_early;
static struct sock_fprog prog_late_errno;
static struct sock_fprog prog_late_kill;
/* Loaded by run_child() before its prog, when set: the early part. */
static const struct sock_fprog *preload;

/* ---- child side ------------------------------------------------------------------------ */

static int report_fd = -1;

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

static _Noreturn void child_fail(int line, const char *what, long got, int err, int want_err) {
        char buf[512];
        int n = snprintf(buf, sizeof buf, "test_seccomp.c:%d: %s (returned %ld, errno %d %s; wanted errno %d)\n", line,
                         what, got, err, strerrorname_np(err) ?: "?", want_err);
        if (n > 0 && write(report_fd, buf, (size_t) MIN(n, (int) sizeof buf - 1)) < 0) {
                /* nothing more we can do */
        }
        _exit(1);
}

/* cond must hold. */
#define CHECK(cond)                                                                                                    \
        do {                                                                                                           \
                if (!(cond))                                                                                           \
                        child_fail(__LINE__, "check failed: " #cond, 0, errno, 0);                                     \
        } while (0)

/* expr (a libc call or syscall() returning -1/errno on failure) must succeed (>= 0). */
#define CHECK_OK(expr)                                                                                                 \
        do {                                                                                                           \
                errno = 0;                                                                                             \
                long _r = (long) (expr);                                                                               \
                if (_r < 0)                                                                                            \
                        child_fail(__LINE__, "should succeed: " #expr, _r, errno, 0);                                  \
        } while (0)

/* expr must fail with -1 and errno == want. */
#define CHECK_ERR(expr, want)                                                                                          \
        do {                                                                                                           \
                errno = 0;                                                                                             \
                long _r = (long) (expr);                                                                               \
                int _e = errno;                                                                                        \
                if (_r != -1 || _e != (want))                                                                          \
                        child_fail(__LINE__, "should fail: " #expr, _r, _e, (want));                                   \
        } while (0)

/* ---- parent side ----------------------------------------------------------------------- */

typedef void (*ChildFn)(void);

/* Fork; the child loads `prog` (if any) and runs fn. Returns the wait status; the child's
 * report, if any, is in msg. */
static int run_child(const struct sock_fprog *prog, ChildFn fn, char *msg, size_t msglen) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(p[0]);
                report_fd = p[1];
                /* cmocka catches these to longjmp back into its runner: in the child that
                 * would resume the test suite in a second process. */
                static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT };
                for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
                        signal(sigs[i], SIG_DFL);
                /* Kill-mode deaths must not leave core files behind. */
                struct rlimit no_core = { 0, 0 };
                CHECK_OK(setrlimit(RLIMIT_CORE, &no_core));
                if (prog) {
                        CHECK_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
                        int r = preload ? policy_seccomp_load(preload) : 0;
                        if (r < 0)
                                child_fail(__LINE__, "policy_seccomp_load(preload)", r, -r, 0);
                        r = policy_seccomp_load(prog);
                        if (r < 0)
                                child_fail(__LINE__, "policy_seccomp_load", r, -r, 0);
                }
                fn();
                _exit(0);
        }

        close(p[1]);
        size_t n = 0;
        for (;;) {
                ssize_t k = read(p[0], msg + n, msglen - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (n == msglen - 1)
                        break;
        }
        msg[n] = 0;
        close(p[0]);

        int status;
        while (waitpid(pid, &status, 0) < 0)
                assert_int_equal(errno, EINTR);
        return status;
}

static void expect_ok(const struct sock_fprog *prog, ChildFn fn) {
        char msg[1024];
        int status = run_child(prog, fn, msg, sizeof msg);
        if (WIFSIGNALED(status))
                fail_msg("child killed by signal %d (%s) %s", WTERMSIG(status), strsignal(WTERMSIG(status)), msg);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("child failed: %s", msg[0] ? msg : "(no report)");
}

static void expect_signal(const struct sock_fprog *prog, ChildFn fn, int sig) {
        char msg[1024];
        int status = run_child(prog, fn, msg, sizeof msg);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != sig)
                fail_msg("child not killed by signal %d: status 0x%x %s", sig, (unsigned) status,
                         msg[0] ? msg : "(no report)");
}

/* ---- children -------------------------------------------------------------------------- */

static void child_sockets(void) {
        int sv[2];
        char c = 'x';
        int p[2];

        CHECK_ERR(socket(AF_INET, SOCK_STREAM, 0), EPERM);
        CHECK_ERR(socket(AF_INET6, SOCK_DGRAM, 0), EPERM);
        CHECK_ERR(socket(AF_UNIX, SOCK_STREAM, 0), EPERM);
        CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
        CHECK_ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv), EPERM);
        CHECK_ERR(socketpair(AF_NETLINK, SOCK_RAW, 0, sv), EPERM);
        CHECK_ERR(connect(0, NULL, 0), EPERM);
        CHECK_ERR(bind(0, NULL, 0), EPERM);
        CHECK_ERR(listen(0, 1), EPERM);
        CHECK_ERR(accept4(0, NULL, NULL, 0), EPERM);
        CHECK_OK(pipe(p));
        /* Plain send() reaches the kernel (which says a pipe is no socket); with flags,
         * the filter refuses it. */
        CHECK_ERR(send(p[1], &c, 1, 0), ENOTSOCK);
        CHECK_ERR(sendto(p[1], &c, 1, MSG_NOSIGNAL, NULL, 0), EPERM);
        CHECK_ERR(recv(p[0], &c, 1, MSG_DONTWAIT), EPERM);
        struct msghdr mh = { 0 };
        CHECK_ERR(sendmsg(p[1], &mh, 0), EPERM);
        /* A connected AF_UNIX pair: send() and recv() without flags or addresses only. */
        CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        CHECK(send(sv[0], &c, 1, 0) == 1);
        CHECK(recv(sv[1], &c, 1, 0) == 1);
        CHECK_ERR(send(sv[0], &c, 1, MSG_DONTWAIT), EPERM);
        CHECK_ERR(recv(sv[1], &c, 1, MSG_PEEK), EPERM);
        struct sockaddr_un sun = { .sun_family = AF_UNIX };
        socklen_t sunlen = sizeof sun;
        CHECK_ERR(sendto(sv[0], &c, 1, 0, (struct sockaddr *) &sun, sizeof sun), EPERM);
        CHECK_ERR(recvfrom(sv[1], &c, 1, 0, (struct sockaddr *) &sun, &sunlen), EPERM);
        CHECK_ERR(sendmsg(sv[0], &mh, 0), EPERM);
        CHECK_ERR(getsockname(sv[0], (struct sockaddr *) &sun, &sunlen), EPERM);
        CHECK_ERR(getpeername(sv[0], (struct sockaddr *) &sun, &sunlen), EPERM);
        close(sv[0]);
        close(sv[1]);
        CHECK_ERR(recvmsg(p[0], &mh, 0), EPERM);
        CHECK_ERR(shutdown(p[0], SHUT_RD), EPERM);
        /* The worker's channels: plain read/write on an inherited descriptor. */
        CHECK(write(p[1], &c, 1) == 1);
        CHECK(read(p[0], &c, 1) == 1);
}

static void child_processes(void) {
        errno = 0;
        pid_t pid = fork(); /* glibc: clone(SIGCHLD | CLONE_CHILD_*) */
        if (pid == 0)
                _exit(0);
        CHECK(pid == -1 && errno == EPERM);

        long r = syscall(SYS_fork);
        if (r == 0)
                _exit(0);
        CHECK(r == -1 && errno == EPERM);

        r = syscall(SYS_vfork);
        if (r == 0)
                _exit(0);
        CHECK(r == -1 && errno == EPERM);

        r = syscall(SYS_clone, (unsigned long) SIGCHLD, 0UL, 0UL, 0UL, 0UL);
        if (r == 0)
                _exit(0);
        CHECK(r == -1 && errno == EPERM);

        /* A "thread" with a namespace flag is not a thread the filter allows (EPERM from the
         * filter before the kernel could say EINVAL or start it; kill mode proves it). */
        r = syscall(SYS_clone, (unsigned long) (CLONE_VM | CLONE_SIGHAND | CLONE_THREAD | CLONE_NEWNET), 0UL, 0UL, 0UL,
                    0UL);
        CHECK(r == -1 && errno == EPERM);

        /* glibc's posix_spawn: clone3 (ENOSYS), then clone(CLONE_VM | CLONE_VFORK). */
        char *argv[] = { (char *) "/bin/true", NULL };
        pid_t spawned;
        int e = posix_spawn(&spawned, "/bin/true", NULL, NULL, argv, environ);
        CHECK(e == EPERM);

        CHECK_ERR(execve("/bin/true", argv, environ), EPERM);
        CHECK_ERR(syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv, environ, 0), EPERM);
}

static void child_clone3(void) {
        struct clone_args args = { .exit_signal = SIGCHLD };
        long r = syscall(SYS_clone3, &args, sizeof args);
        if (r == 0)
                _exit(0);
        CHECK(r == -1 && errno == ENOSYS);
}

static void *thread_main(void *arg) {
        uint64_t *v = arg;
        uint64_t acc = 0;
        for (uint64_t i = 0; i < 100000; i++)
                acc += i ^ *v;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        *v = acc;
        return NULL;
}

static void *thread_spawner(void *arg) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_main, arg) != 0)
                return (void *) 1;
        if (pthread_join(t, NULL) != 0)
                return (void *) 2;
        return NULL;
}

static void child_threads(void) {
        pthread_t t[4];
        uint64_t v[4];
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

        for (int i = 0; i < 4; i++) {
                v[i] = (uint64_t) i;
                CHECK(pthread_create(&t[i], NULL, i == 3 ? thread_spawner : thread_main, &v[i]) == 0);
        }
        for (int i = 0; i < 4; i++) {
                void *ret = (void *) 42;
                CHECK(pthread_join(t[i], &ret) == 0);
                CHECK(i == 3 ? ret == NULL : true);
        }
        for (int i = 0; i < 4; i++) {
                uint64_t acc = 0;
                for (uint64_t k = 0; k < 100000; k++)
                        acc += k ^ (uint64_t) i;
                CHECK(v[i] == acc);
        }

        /* A timed condition wait (futex with a timeout). */
        struct timespec until;
        CHECK_OK(clock_gettime(CLOCK_REALTIME, &until));
        until.tv_nsec += 2000000;
        if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
        }
        CHECK(pthread_mutex_lock(&m) == 0);
        CHECK(pthread_cond_timedwait(&cv, &m, &until) == ETIMEDOUT);
        CHECK(pthread_mutex_unlock(&m) == 0);
}

static void child_namespaces(void) {
        CHECK_ERR(unshare(CLONE_NEWUSER), EPERM);
        CHECK_ERR(unshare(CLONE_NEWNS), EPERM);
        CHECK_ERR(setns(0, 0), EPERM);
        CHECK_ERR(mount("none", "/nonexistent", "tmpfs", 0, NULL), EPERM);
        CHECK_ERR(umount2("/nonexistent", 0), EPERM);
        CHECK_ERR(chroot("/nonexistent"), EPERM);
        CHECK_ERR(syscall(SYS_pivot_root, "/nonexistent", "/nonexistent"), EPERM);
        CHECK_ERR(syscall(SYS_open_tree, AT_FDCWD, "/nonexistent", 0), EPERM);
        CHECK_ERR(syscall(SYS_fsopen, "tmpfs", 0), EPERM);
}

static void child_other_processes(void) {
        char buf[8];
        struct iovec local = { buf, sizeof buf }, remote = { buf, sizeof buf };

        CHECK_ERR(ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
        CHECK_ERR(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), EPERM);
        CHECK_ERR(process_vm_writev(getpid(), &local, 1, &remote, 1, 0), EPERM);
        CHECK_ERR(syscall(SYS_pidfd_open, getpid(), 0), EPERM);
        CHECK_ERR(syscall(SYS_kcmp, getpid(), getpid(), 0, 0, 0), EPERM);
}

static void child_rlimits(void) {
        struct rlimit rl, zero = { 0, 0 };

        CHECK_OK(getrlimit(RLIMIT_NOFILE, &rl)); /* glibc: prlimit64(0, r, NULL, &old) */
        CHECK_OK(prlimit(0, RLIMIT_AS, NULL, &rl));
        CHECK_OK(syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl));
        CHECK_ERR(setrlimit(RLIMIT_NOFILE, &rl), EPERM);
        CHECK_ERR(prlimit(0, RLIMIT_CORE, &zero, NULL), EPERM);
        CHECK_ERR(prlimit(0, RLIMIT_CORE, &zero, &rl), EPERM);
        CHECK_ERR(syscall(SYS_setrlimit, RLIMIT_NOFILE, &rl), EPERM);

        struct rusage ru;
        CHECK_OK(getrusage(RUSAGE_SELF, &ru));
}

static void child_ioctl_errno(void) {
        int p[2], n = -1, on = 1;
        struct termios tio;
        struct winsize ws;

        CHECK_OK(pipe(p));
        CHECK(write(p[1], "abc", 3) == 3);
        CHECK_OK(ioctl(p[0], FIONREAD, &n));
        CHECK(n == 3);
        CHECK_OK(ioctl(p[0], FIOCLEX));
        CHECK_OK(ioctl(p[0], FIONCLEX));
        CHECK_OK(ioctl(p[0], FIONBIO, &on));
        CHECK_ERR(ioctl(p[0], TCGETS, &tio), ENOTTY); /* allowed; a pipe is no tty */
        CHECK_ERR(ioctl(p[0], TIOCGWINSZ, &ws), ENOTTY);
        CHECK(isatty(p[0]) == 0);
        /* os.tcgetpgrp(): allowed, so a bad descriptor is the kernel's EBADF. */
        pid_t pgrp;
        CHECK_ERR(ioctl(p[0], TIOCGPGRP, &pgrp), ENOTTY);
        CHECK_ERR(ioctl(-1, TIOCGPGRP, &pgrp), EBADF);
        /* Its setter is not: the filter answers before the kernel looks at the fd. */
        CHECK_ERR(ioctl(-1, TIOCSPGRP, &pgrp), ENOTTY);

        /* Denied by the filter, with ENOTTY. The last two would succeed on a pipe
         * without the filter (generic requests; the kernel truncates to 32 bits). */
        CHECK_ERR(ioctl(p[0], TIOCSTI, "x"), ENOTTY);
        CHECK_ERR(ioctl(p[0], FIOASYNC, &on), ENOTTY);
        CHECK_ERR(syscall(SYS_ioctl, p[0], (unsigned long) FIONREAD | (1UL << 32), &n), ENOTTY);
        CHECK_ERR(syscall(SYS_ioctl, p[0], 0UL, &n), ENOTTY);
        CHECK_ERR(syscall(SYS_ioctl, p[0], ~0UL, &n), ENOTTY);
}

static void child_ioctl_allowed(void) {
        int p[2], n = -1;
        struct termios tio;

        CHECK_OK(pipe(p));
        CHECK_OK(ioctl(p[0], FIONREAD, &n));
        CHECK_OK(ioctl(p[0], FIOCLEX));
        CHECK_ERR(ioctl(p[0], TCGETS, &tio), ENOTTY);
}

static void child_ioctl_tiocsti(void) {
        int p[2];
        CHECK_OK(pipe(p));
        (void) ioctl(p[0], TIOCSTI, "x");
}

static void child_prctl(void) {
        char name[16];
        static const uint64_t denied[] = {
                0,
                1,
                2,
                4,
                14,
                17,
                18,
                20,
                22,
                24,
                31,
                38,
                40,
                41,
                1000,
                0x53564d41 /* PR_SET_VMA */,
                PR_SET_DUMPABLE,
                PR_SET_PDEATHSIG,
                PR_SET_SECCOMP,
                PR_SET_NO_NEW_PRIVS,
                PR_SET_MM,
                PR_CAPBSET_DROP,
                PR_SET_KEEPCAPS,
                PR_CAP_AMBIENT,
                PR_SET_CHILD_SUBREAPER,
                (1ULL << 32) | PR_SET_NAME, /* the kernel would truncate to PR_SET_NAME */
                UINT64_MAX,
        };

        CHECK_OK(prctl(PR_SET_NAME, "seccomp-test", 0, 0, 0));
        CHECK_OK(prctl(PR_GET_NAME, name, 0, 0, 0));
        CHECK(strcmp(name, "seccomp-test") == 0);
        CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
        CHECK(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2);
        CHECK_OK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
        CHECK_OK(prctl(PR_CAPBSET_READ, 0 /* CAP_CHOWN */, 0, 0, 0));
        /* Invalid options would be EINVAL from the kernel: EPERM proves the filter. */
        for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
                CHECK_ERR(syscall(SYS_prctl, denied[i], 0UL, 0UL, 0UL, 0UL), EPERM);
}

static void child_personality(void) {
        CHECK_OK(syscall(SYS_personality, 0xffffffffUL));
        CHECK_OK(syscall(SYS_personality, (unsigned long) PER_LINUX));
        CHECK_ERR(syscall(SYS_personality, (unsigned long) READ_IMPLIES_EXEC), ENOSYS);
        CHECK_ERR(syscall(SYS_personality, (unsigned long) ADDR_NO_RANDOMIZE), ENOSYS);
}

static void child_unlisted(void) {
        CHECK_ERR(syscall(1000), ENOSYS);
        CHECK_ERR(syscall(-1L), ENOSYS);
        CHECK_ERR(inotify_init1(IN_CLOEXEC), ENOSYS);
        CHECK_ERR(syscall(SYS_membarrier, 0, 0), ENOSYS);
        CHECK_ERR(syscall(SYS_mlock, (void *) 0, 4096UL), ENOSYS);
        CHECK_ERR(syscall(SYS_sync), ENOSYS);
}

static void child_denied_misc(void) {
        CHECK_ERR(syscall(SYS_bpf, 0, NULL, 0), EPERM);
        CHECK_ERR(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
        CHECK_ERR(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
        CHECK_ERR(syscall(SYS_userfaultfd, 0), EPERM);
        CHECK_ERR(syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM);
        CHECK_ERR(syscall(SYS_add_key, "user", "x", "y", 1, 0), EPERM);
        CHECK_ERR(syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0), EPERM);
        CHECK_ERR(syscall(SYS_reboot, 0, 0, 0, NULL), EPERM); /* bad magic: EINVAL without the filter */
        CHECK_ERR(syscall(SYS_init_module, NULL, 0, ""), EPERM);
        CHECK_ERR(syscall(SYS_modify_ldt, 0, NULL, 0UL), EPERM);
        CHECK_ERR(syscall(SYS_iopl, 0), EPERM);
        CHECK_ERR(syscall(SYS_memfd_create, "x", 0), EPERM);
        CHECK_ERR(syscall(SYS_seccomp, 2 /* SECCOMP_GET_ACTION_AVAIL */, 0, NULL), EPERM);
        CHECK_ERR(syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* _VERSION */), EPERM);
        CHECK_ERR(syscall(SYS_open_by_handle_at, -1, NULL, 0), EPERM);
        CHECK_ERR(syscall(SYS_fanotify_init, 0, 0), EPERM);
        CHECK_ERR(setuid(getuid()), EPERM);
        CHECK_ERR(setgid(getgid()), EPERM);
        CHECK_ERR(setresuid(-1, -1, -1), EPERM);
        CHECK_ERR(setgroups(0, NULL), EPERM);
        CHECK_ERR(syscall(SYS_capset, NULL, NULL), EPERM);
        CHECK_ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, NULL), EPERM);
        CHECK_ERR(syscall(SYS_sethostname, NULL, 1UL), EPERM); /* EFAULT without the filter */
}

static void child_xattr(void) {
        char buf[64];
        CHECK_ERR(listxattr("/", buf, sizeof buf), EOPNOTSUPP);
        CHECK_ERR(llistxattr("/", buf, sizeof buf), EOPNOTSUPP);
        CHECK_ERR(flistxattr(0, buf, sizeof buf), EOPNOTSUPP);
        CHECK_ERR(getxattr("/", "user.x", buf, sizeof buf), EOPNOTSUPP);
        CHECK_ERR(setxattr("/nonexistent", "user.x", "y", 1, 0), EOPNOTSUPP);
        CHECK_ERR(removexattr("/nonexistent", "user.x"), EOPNOTSUPP);
}

static void child_file_io(void) {
        char dir[] = "/tmp/test-seccomp-XXXXXX";
        char a[128], b[128], c[128], d[128], buf[256];
        struct stat st;

        CHECK(mkdtemp(dir) != NULL);
        snprintf(a, sizeof a, "%s/a", dir);
        snprintf(b, sizeof b, "%s/b", dir);
        snprintf(c, sizeof c, "%s/c", dir);
        snprintf(d, sizeof d, "%s/sub", dir);

        int fd = open(a, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        CHECK(write(fd, "hello world\n", 12) == 12);
        struct iovec iov[2] = { { (void *) "ab", 2 }, { (void *) "cd", 2 } };
        CHECK(writev(fd, iov, 2) == 4);
        CHECK(pwrite(fd, "H", 1, 0) == 1);
        CHECK(lseek(fd, 0, SEEK_SET) == 0);
        CHECK(read(fd, buf, sizeof buf) == 16);
        CHECK(memcmp(buf, "Hello world\nabcd", 16) == 0);
        CHECK(pread(fd, buf, 5, 6) == 5 && memcmp(buf, "world", 5) == 0);
        CHECK_OK(fstat(fd, &st));
        CHECK(st.st_size == 16);
        CHECK_OK(fsync(fd));
        CHECK_OK(fdatasync(fd));
        CHECK_OK(ftruncate(fd, 12));
        CHECK_OK(fallocate(fd, 0, 0, 4096));
        CHECK_OK(ftruncate(fd, 12));
        CHECK_OK(flock(fd, LOCK_EX));
        CHECK_OK(flock(fd, LOCK_UN));
        CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
        int fd2 = dup(fd);
        CHECK(fd2 >= 0);
        CHECK(dup2(fd, fd2) == fd2);
        CHECK(dup3(fd, fd2, O_CLOEXEC) == fd2);
        CHECK_OK(close(fd2));

        void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(m != MAP_FAILED);
        CHECK(memcmp(m, "Hello", 5) == 0);
        CHECK_OK(msync(m, 4096, MS_SYNC));
        CHECK_OK(munmap(m, 4096));

        /* sendfile and copy_file_range between files (shutil.copyfile's fast path). */
        int out = open(b, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(out >= 0);
        off_t off = 0;
        CHECK(sendfile(out, fd, &off, 12) == 12);
        off = 0;
        CHECK(copy_file_range(fd, &off, out, NULL, 12, 0) == 12);
        CHECK_OK(close(out));
        CHECK_OK(stat(b, &st));
        CHECK(st.st_size == 24);
        CHECK_OK(close(fd));

        CHECK_OK(rename(b, c));
        CHECK_ERR(access(b, F_OK), ENOENT);
        CHECK_OK(access(c, R_OK | W_OK));
        CHECK_OK(faccessat(AT_FDCWD, c, R_OK, AT_EACCESS));
        CHECK_OK(renameat2(AT_FDCWD, c, AT_FDCWD, b, RENAME_NOREPLACE));
        CHECK_OK(link(b, c));
        CHECK_OK(lstat(c, &st));
        CHECK(st.st_nlink == 2);
        CHECK_OK(unlink(c));
        CHECK_OK(symlink("a", c));
        ssize_t k = readlink(c, buf, sizeof buf);
        CHECK(k == 1 && buf[0] == 'a');
        CHECK_OK(chmod(b, 0600));
        CHECK_OK(utimensat(AT_FDCWD, b, NULL, 0));
        CHECK_OK(truncate(b, 1));
        struct statx stx;
        CHECK_OK(statx(AT_FDCWD, b, 0, STATX_SIZE, &stx));
        CHECK(stx.stx_size == 1);

        CHECK_OK(mkdir(d, 0700));
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        CHECK(dfd >= 0);
        CHECK_OK(mkdirat(dfd, "sub/x", 0700));
        CHECK_OK(unlinkat(dfd, "sub/x", AT_REMOVEDIR));
        CHECK_OK(fchmod(dfd, 0700));
        char cwd[256];
        CHECK(getcwd(cwd, sizeof cwd) != NULL);
        CHECK_OK(fchdir(dfd));
        CHECK_OK(chdir(cwd));

        DIR *dp = opendir(dir);
        CHECK(dp != NULL);
        int entries = 0;
        struct dirent *de;
        while ((de = readdir(dp)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        entries++;
        CHECK(entries == 4); /* a, b, c, sub */
        CHECK_OK(closedir(dp));
        CHECK_OK(close(dfd));

        CHECK_OK(unlink(a));
        CHECK_OK(unlink(b));
        CHECK_OK(unlink(c));
        CHECK_OK(rmdir(d));
        CHECK_OK(rmdir(dir));

        /* Waiting on descriptors. */
        int p[2];
        CHECK_OK(pipe2(p, O_CLOEXEC));
        CHECK(write(p[1], "x", 1) == 1);
        struct pollfd pfd = { .fd = p[0], .events = POLLIN };
        CHECK(poll(&pfd, 1, 1000) == 1);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
        CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
        CHECK(epoll_wait(ep, &ev, 1, 1000) == 1);
        int efd = eventfd(0, EFD_CLOEXEC);
        CHECK(efd >= 0);
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(p[0], &rs);
        struct timeval tv = { 1, 0 };
        CHECK(select(p[0] + 1, &rs, NULL, NULL, &tv) == 1);
        CHECK_OK(close_range(3, ~0U, 0)); /* closes everything above stderr, incl. report_fd */
}

static void child_memory(void) {
        void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED);
        memset(m, 1, 1 << 20);
        CHECK_OK(mprotect(m, 4096, PROT_READ));
        CHECK_OK(mprotect(m, 4096, PROT_READ | PROT_WRITE));
        CHECK_OK(madvise(m, 1 << 20, MADV_DONTNEED));
        void *m2 = mremap(m, 1 << 20, 2 << 20, MREMAP_MAYMOVE);
        CHECK(m2 != MAP_FAILED);
        CHECK_OK(munmap(m2, 2 << 20));
        void *big = malloc(64 << 20);
        CHECK(big != NULL);
        free(big);
        void *small = malloc(100);
        CHECK(small != NULL);
        free(small);
        CHECK_ERR(memfd_create("x", 0), EPERM);
        CHECK_ERR(syscall(SYS_mlock, &m, 8UL), ENOSYS); /* not mlock(): ASan stubs it out */
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
        got_signal = sig;
}

static void child_signals_time(void) {
        struct sigaction sa = { .sa_handler = on_signal };
        CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
        CHECK_OK(sigaction(SIGALRM, &sa, NULL));
        CHECK_OK(kill(getpid(), SIGUSR1));
        CHECK(got_signal == SIGUSR1);
        got_signal = 0;
        CHECK_OK(raise(SIGUSR1)); /* tgkill */
        CHECK(got_signal == SIGUSR1);

        sigset_t set, old;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR2);
        CHECK_OK(sigprocmask(SIG_BLOCK, &set, &old));
        CHECK_OK(kill(getpid(), SIGUSR2));
        siginfo_t si;
        struct timespec zero = { 0, 0 };
        CHECK(sigtimedwait(&set, &si, &zero) == SIGUSR2);
        CHECK_OK(sigpending(&set));

        static char altstack[1 << 16];
        stack_t ss = { .ss_sp = altstack, .ss_size = sizeof altstack };
        CHECK_OK(sigaltstack(&ss, NULL));

        struct itimerval it = { .it_value = { 0, 2000 } }, cur;
        got_signal = 0;
        CHECK_OK(setitimer(ITIMER_REAL, &it, NULL));
        CHECK_OK(getitimer(ITIMER_REAL, &cur));
        while (got_signal != SIGALRM)
                pause();
        CHECK_OK(alarm(0));

        struct timespec ts;
        CHECK_OK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts));
        CHECK_OK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts));
        CHECK_OK(clock_getres(CLOCK_MONOTONIC, &ts));
        CHECK_OK(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts));
        struct timespec d = { 0, 1000000 };
        CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL) == 0);
        CHECK_OK(nanosleep(&d, NULL));
        struct timeval tv;
        CHECK_OK(syscall(SYS_gettimeofday, &tv, NULL));
        CHECK_OK(syscall(SYS_time, NULL));
        struct tms t;
        CHECK(times(&t) != (clock_t) -1);
}

static void child_identity(void) {
        uid_t r, e, s;
        gid_t groups[64];
        struct utsname u;
        struct sysinfo si;
        unsigned char rnd[16];
        cpu_set_t cpus;

        CHECK(syscall(SYS_getpid) == getpid());
        CHECK_OK(getppid());
        CHECK_OK(gettid());
        CHECK_OK(syscall(SYS_getuid));
        CHECK_OK(syscall(SYS_geteuid));
        CHECK_OK(syscall(SYS_getgid));
        CHECK_OK(syscall(SYS_getegid));
        CHECK_OK(getresuid(&r, &e, &s));
        CHECK_OK(getgroups(64, groups));
        CHECK_OK(getpgrp());
        CHECK_OK(getsid(0));
        CHECK_OK(uname(&u));
        CHECK_ERR(sysinfo(&si), ENOSYS); /* it tells the host's task count */
        /* NUMA policy: ENOSYS in both modes, as without NUMA (policy/seccomp.c). */
        CHECK_ERR(syscall(SYS_mbind, NULL, 0UL, 0, NULL, 0UL, 0U), ENOSYS);
        CHECK_ERR(syscall(SYS_set_mempolicy, 0, NULL, 0UL), ENOSYS);
        CHECK_ERR(syscall(SYS_get_mempolicy, NULL, NULL, 0UL, NULL, 0UL), ENOSYS);
        CHECK(getrandom(rnd, sizeof rnd, 0) == (ssize_t) sizeof rnd);
        CHECK_OK(sched_getaffinity(0, sizeof cpus, &cpus));
        CHECK_OK(sched_getscheduler(0));
        CHECK_OK(sched_yield());
        errno = 0;
        CHECK(getpriority(PRIO_PROCESS, 0) != -1 || errno == 0);
        CHECK(sysconf(_SC_NPROCESSORS_ONLN) > 0);
}

static void child_socket_only(void) {
        (void) socket(AF_INET, SOCK_STREAM, 0);
}

static void child_socketpair_inet_only(void) {
        int sv[2];
        (void) socketpair(AF_INET, SOCK_STREAM, 0, sv);
}

static void child_recv_peek_only(void) {
        int sv[2];
        char c = 'x';
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || send(sv[0], &c, 1, 0) != 1)
                _exit(3);
        (void) recv(sv[1], &c, 1, MSG_PEEK);
}

/* Answered EPERM in both modes, never killed (policy/seccomp.c): glibc's nscd client,
 * a socket's repr(), mkfifo, shutil's splice. Then chown and setpriority, which the
 * kernel decides (allowed in both modes: kill mode would have killed here). */
static void child_fixed_eperm(void) {
        struct sockaddr_un sun;
        socklen_t len = sizeof sun;
        int sv[2];

        CHECK_ERR(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), EPERM);
        CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
        CHECK_ERR(getsockname(sv[0], (struct sockaddr *) &sun, &len), EPERM);
        CHECK_ERR(getpeername(sv[0], (struct sockaddr *) &sun, &len), EPERM);
        CHECK_ERR(mknodat(AT_FDCWD, "/nonexistent", S_IFIFO | 0600, 0), EPERM);
        CHECK_ERR(syscall(SYS_mknod, "/nonexistent", S_IFIFO | 0600, 0), EPERM);
        CHECK_ERR(syscall(SYS_splice, -1, NULL, -1, NULL, 1UL, 0U), EPERM);
        CHECK_ERR(syscall(SYS_tee, -1, -1, 1UL, 0U), EPERM);
        CHECK_ERR(syscall(SYS_vmsplice, -1, NULL, 0UL, 0U), EPERM);
        CHECK_ERR(chown("/nonexistent", 0, 0), ENOENT);
        CHECK_ERR(fchown(-1, 0, 0), EBADF);
        CHECK_ERR(syscall(SYS_lchown, "/nonexistent", 0, 0), ENOENT);
        CHECK_ERR(fchownat(AT_FDCWD, "/nonexistent", 0, 0, 0), ENOENT);
        errno = 0;
        int nice_now = getpriority(PRIO_PROCESS, 0);
        CHECK(errno == 0);
        int nice_lower = nice_now < 19 ? nice_now + 1 : 19; /* a lower priority needs no right */
        CHECK_OK(setpriority(PRIO_PROCESS, 0, nice_lower));
        CHECK(getpriority(PRIO_PROCESS, 0) == nice_lower);
}

static void child_fork_only(void) {
        pid_t pid = fork();
        if (pid == 0)
                _exit(0);
}

static void child_clone_namespace_thread(void) {
        /* Killed before the kernel sees it; would otherwise start a thread on this stack. */
        (void) syscall(SYS_clone, (unsigned long) (CLONE_VM | CLONE_SIGHAND | CLONE_THREAD | CLONE_NEWNET), 0UL, 0UL,
                       0UL, 0UL);
}

static void child_unlisted_only(void) {
        (void) syscall(1000);
}

static void child_prctl_denied_only(void) {
        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static void child_prlimit_set_only(void) {
        struct rlimit zero = { 0, 0 };
        (void) prlimit(0, RLIMIT_CORE, &zero, NULL);
}

static void child_x32(void) {
        /* __X32_SYSCALL_BIT | getpid: x32 ABI numbers arrive with AUDIT_ARCH_X86_64. */
        (void) syscall(0x40000000L | SYS_getpid);
}

static long int80_getpid(void) {
        long r;
        /* i386 getpid (20) through the 32-bit entry point: AUDIT_ARCH_I386. */
        __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
        return r;
}

static void child_int80(void) {
        (void) int80_getpid();
}

static void child_int80_probe(void) {
        CHECK(int80_getpid() == getpid());
}

/* ---- a classic-BPF evaluator ------------------------------------------------------------
 * Runs the compiled program on synthetic seccomp_data, so argument rules can be checked
 * exhaustively and paths this kernel cannot take (int $0x80 on kernels without ia32
 * emulation) are still covered. Handles every instruction seccomp accepts. */

static uint32_t bpf_run(const struct sock_fprog *p, const struct seccomp_data *d) {
        uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = { 0 };

        for (size_t pc = 0; pc < p->len; pc++) {
                const struct sock_filter *f = &p->filter[pc];
                uint32_t k = f->k;
                switch (f->code) {
                case BPF_LD | BPF_W | BPF_ABS:
                        assert_true(k % 4 == 0 && k + 4 <= sizeof *d);
                        memcpy(&A, (const char *) d + k, 4);
                        break;
                case BPF_LD | BPF_W | BPF_LEN:
                        A = sizeof *d;
                        break;
                case BPF_LDX | BPF_W | BPF_LEN:
                        X = sizeof *d;
                        break;
                case BPF_LD | BPF_IMM:
                        A = k;
                        break;
                case BPF_LDX | BPF_IMM:
                        X = k;
                        break;
                case BPF_LD | BPF_MEM:
                        assert_true(k < BPF_MEMWORDS);
                        A = M[k];
                        break;
                case BPF_LDX | BPF_MEM:
                        assert_true(k < BPF_MEMWORDS);
                        X = M[k];
                        break;
                case BPF_ST:
                        assert_true(k < BPF_MEMWORDS);
                        M[k] = A;
                        break;
                case BPF_STX:
                        assert_true(k < BPF_MEMWORDS);
                        M[k] = X;
                        break;
                case BPF_ALU | BPF_ADD | BPF_K:
                        A += k;
                        break;
                case BPF_ALU | BPF_ADD | BPF_X:
                        A += X;
                        break;
                case BPF_ALU | BPF_SUB | BPF_K:
                        A -= k;
                        break;
                case BPF_ALU | BPF_SUB | BPF_X:
                        A -= X;
                        break;
                case BPF_ALU | BPF_AND | BPF_K:
                        A &= k;
                        break;
                case BPF_ALU | BPF_AND | BPF_X:
                        A &= X;
                        break;
                case BPF_ALU | BPF_OR | BPF_K:
                        A |= k;
                        break;
                case BPF_ALU | BPF_OR | BPF_X:
                        A |= X;
                        break;
                case BPF_ALU | BPF_XOR | BPF_K:
                        A ^= k;
                        break;
                case BPF_ALU | BPF_XOR | BPF_X:
                        A ^= X;
                        break;
                case BPF_ALU | BPF_LSH | BPF_K:
                        A = k < 32 ? A << k : 0;
                        break;
                case BPF_ALU | BPF_RSH | BPF_K:
                        A = k < 32 ? A >> k : 0;
                        break;
                case BPF_ALU | BPF_NEG:
                        A = -A;
                        break;
                case BPF_MISC | BPF_TAX:
                        X = A;
                        break;
                case BPF_MISC | BPF_TXA:
                        A = X;
                        break;
                case BPF_JMP | BPF_JA:
                        pc += k;
                        break;
                case BPF_JMP | BPF_JEQ | BPF_K:
                        pc += A == k ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JEQ | BPF_X:
                        pc += A == X ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JGT | BPF_K:
                        pc += A > k ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JGT | BPF_X:
                        pc += A > X ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JGE | BPF_K:
                        pc += A >= k ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JGE | BPF_X:
                        pc += A >= X ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JSET | BPF_K:
                        pc += (A & k) ? f->jt : f->jf;
                        break;
                case BPF_JMP | BPF_JSET | BPF_X:
                        pc += (A & X) ? f->jt : f->jf;
                        break;
                case BPF_RET | BPF_K:
                        return k;
                case BPF_RET | BPF_A:
                        return A;
                default:
                        fail_msg("unexpected BPF opcode 0x%x at %zu", f->code, pc);
                }
        }
        fail_msg("BPF program fell off its end");
        return 0;
}

static uint32_t verdict(const struct sock_fprog *p, uint32_t arch, int nr, uint64_t a0, uint64_t a1, uint64_t a2) {
        struct seccomp_data d = { .nr = nr, .arch = arch, .args = { a0, a1, a2 } };
        return bpf_run(p, &d);
}

#define V_ALLOW SECCOMP_RET_ALLOW
#define V_KILL SECCOMP_RET_KILL_PROCESS
#define V_ERRNO(e) (SECCOMP_RET_ERRNO | (uint32_t) (e))
#define X64 AUDIT_ARCH_X86_64

static void test_bpf_arches(void **state) {
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *p = mode ? &prog_kill : &prog_errno;
                for (int nr = 0; nr < 512; nr++) {
                        assert_int_equal(verdict(p, AUDIT_ARCH_I386, nr, 0, 0, 0), V_KILL);
                        assert_int_equal(verdict(p, AUDIT_ARCH_AARCH64, nr, 0, 0, 0), V_KILL);
                        /* x32: same audit arch, __X32_SYSCALL_BIT in the number. */
                        assert_int_equal(verdict(p, X64, 0x40000000 | nr, 0, 0, 0), V_KILL);
                }
                assert_int_equal(verdict(p, X64, SYS_read, 0, 0, 0), V_ALLOW);
                assert_int_equal(verdict(p, X64, SYS_clone3, 0, 0, 0), V_ERRNO(ENOSYS));
                assert_int_equal(verdict(p, X64, SYS_listxattr, 0, 0, 0), V_ERRNO(EOPNOTSUPP));
                assert_int_equal(verdict(p, X64, 1000, 0, 0, 0), mode ? V_KILL : V_ERRNO(ENOSYS));
                assert_int_equal(verdict(p, X64, -1, 0, 0, 0), mode ? V_KILL : V_ERRNO(ENOSYS));
                assert_int_equal(verdict(p, X64, SYS_socket, 0, 0, 0), mode ? V_KILL : V_ERRNO(EPERM));
        }
}

static bool in_list(uint64_t v, const uint64_t *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (l[i] == v)
                        return true;
        return false;
}

/* Every value 0..limit, plus each of them with bits 32..63 set one at a time. */
static void check_values(int nr, unsigned arg, const uint64_t *allowed, size_t n, uint64_t limit, int deny_errno) {
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *p = mode ? &prog_kill : &prog_errno;
                uint32_t deny = mode ? V_KILL : V_ERRNO(deny_errno);
                for (uint64_t v = 0; v <= limit; v++)
                        for (int hi = -1; hi < 32; hi++) {
                                uint64_t x = hi < 0 ? v : v | (1ULL << (32 + hi));
                                uint64_t args[3] = { 0 };
                                args[arg] = x;
                                uint32_t got = verdict(p, X64, nr, args[0], args[1], args[2]);
                                uint32_t want = in_list(x, allowed, n) ? V_ALLOW : deny;
                                if (got != want)
                                        fail_msg("syscall %d arg%u=0x%llx: verdict 0x%x, wanted 0x%x", nr, arg,
                                                 (unsigned long long) x, got, want);
                        }
        }
}

static void test_bpf_prctl(void **state) {
        static const uint64_t allowed[] = { PR_GET_DUMPABLE, PR_SET_NAME,     PR_GET_NAME,
                                            PR_GET_SECCOMP,  PR_CAPBSET_READ, PR_GET_NO_NEW_PRIVS };
        check_values(SYS_prctl, 0, allowed, 6, 4096, EPERM);
        assert_int_equal(verdict(&prog_errno, X64, SYS_prctl, UINT64_MAX, 0, 0), V_ERRNO(EPERM));
        assert_int_equal(verdict(&prog_errno, X64, SYS_prctl, 0x53564d41 /* PR_SET_VMA */, 0, 0), V_ERRNO(EPERM));
}

static void test_bpf_ioctl(void **state) {
        static const uint64_t allowed[] = { TCGETS, TIOCGPGRP, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX };
        check_values(SYS_ioctl, 1, allowed, sizeof allowed / sizeof allowed[0], 0x10000, ENOTTY);
        assert_int_equal(verdict(&prog_errno, X64, SYS_ioctl, 0, 0xc0045878 /* FICLONE-ish */, 0), V_ERRNO(ENOTTY));
        assert_int_equal(verdict(&prog_errno, X64, SYS_ioctl, 0, UINT64_MAX, 0), V_ERRNO(ENOTTY));
}

static void test_bpf_personality(void **state) {
        /* Not EPERM: other values take the default action (see seccomp.c). */
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *p = mode ? &prog_kill : &prog_errno;
                uint32_t def = mode ? V_KILL : V_ERRNO(ENOSYS);
                assert_int_equal(verdict(p, X64, SYS_personality, 0, 0, 0), V_ALLOW);
                assert_int_equal(verdict(p, X64, SYS_personality, 0xffffffff, 0, 0), V_ALLOW);
                for (uint64_t v = 1; v < 0x10000; v++)
                        assert_int_equal(verdict(p, X64, SYS_personality, v, 0, 0), def);
                assert_int_equal(verdict(p, X64, SYS_personality, 0xfffffffe, 0, 0), def);
                assert_int_equal(verdict(p, X64, SYS_personality, 1ULL << 32, 0, 0), def);
                assert_int_equal(verdict(p, X64, SYS_personality, UINT64_MAX, 0, 0), def);
        }
}

static void test_bpf_clone(void **state) {
        static const uint64_t ns[] = { CLONE_NEWNS,   CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                       CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET };
        /* Flags glibc and others combine with them, to show they do not matter. */
        static const uint64_t other[] = { 0,
                                          SIGCHLD,
                                          CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_SYSVSEM |
                                                  CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID,
                                          CLONE_VM | CLONE_VFORK | SIGCHLD,
                                          CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD,
                                          1ULL << 32,
                                          0xffffffff00000000ULL };
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *p = mode ? &prog_kill : &prog_errno;
                uint32_t deny = mode ? V_KILL : V_ERRNO(EPERM);
                for (unsigned bits = 0; bits < (1u << 8); bits++)
                        for (size_t o = 0; o < sizeof other / sizeof other[0]; o++) {
                                uint64_t flags = other[o];
                                bool thread = bits & 1;
                                bool any_ns = false;
                                if (thread)
                                        flags |= CLONE_THREAD;
                                for (int i = 0; i < 7; i++)
                                        if (bits & (2u << i)) {
                                                flags |= ns[i];
                                                any_ns = true;
                                        }
                                uint32_t want = thread && !any_ns ? V_ALLOW : deny;
                                uint32_t got = verdict(p, X64, SYS_clone, flags, 0, 0);
                                if (got != want)
                                        fail_msg("clone flags 0x%llx: verdict 0x%x, wanted 0x%x",
                                                 (unsigned long long) flags, got, want);
                        }
        }
}

static void test_bpf_prlimit64(void **state) {
        static const uint64_t news[] = { 1, 0x1000, 0x7ffc00000000ULL, 1ULL << 32, UINT64_MAX };
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *p = mode ? &prog_kill : &prog_errno;
                assert_int_equal(verdict(p, X64, SYS_prlimit64, 0, RLIMIT_NOFILE, 0), V_ALLOW);
                for (size_t i = 0; i < sizeof news / sizeof news[0]; i++)
                        assert_int_equal(verdict(p, X64, SYS_prlimit64, 0, RLIMIT_NOFILE, news[i]),
                                         mode ? V_KILL : V_ERRNO(EPERM));
        }
}

/* The verdict of two stacked filters, as the kernel decides it (seccomp_run_filters):
 * the lowest action (as a signed number: KILL_PROCESS first, ALLOW last), and between
 * equal actions the newest filter's, so its errno. */
static uint32_t stacked(uint32_t older, uint32_t newer) {
        return (int32_t) (older & SECCOMP_RET_ACTION_FULL) < (int32_t) (newer & SECCOMP_RET_ACTION_FULL) ? older
                                                                                                         : newer;
}

static void check_two_parts(int nr, const uint64_t args[6]) {
        for (int mode = 0; mode < 2; mode++) {
                const struct sock_fprog *whole = mode ? &prog_kill : &prog_errno;
                const struct sock_fprog *late = mode ? &prog_late_kill : &prog_late_errno;
                struct seccomp_data d = { .nr = nr, .arch = X64 };
                memcpy(d.args, args, sizeof d.args);
                uint32_t want = bpf_run(whole, &d);
                uint32_t got = stacked(bpf_run(&prog_early, &d), bpf_run(late, &d));
                if (got != want)
                        fail_msg("%s mode, syscall %d (0x%llx 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx): the two parts say "
                                 "0x%x, the whole filter 0x%x",
                                 mode ? "kill" : "errno", nr, (unsigned long long) args[0],
                                 (unsigned long long) args[1], (unsigned long long) args[2],
                                 (unsigned long long) args[3], (unsigned long long) args[4],
                                 (unsigned long long) args[5], got, want);
        }
}

/* Every syscall number (and -1, and numbers past the table), each argument in turn set
 * to the values the conditional rules compare against and their neighbours, and the
 * conditional syscalls' first arguments exhaustively up to 4096 with high bits: the two
 * parts stacked decide exactly as the whole filter, in both modes. */
static void test_bpf_two_parts(void **state) {
        static const uint64_t values[] = {
                0,
                1,
                2,
                3,
                4,
                10,
                15,
                16,
                21,
                23,
                38,
                39,
                TCGETS,
                TIOCSTI,
                TIOCGPGRP,
                TIOCGWINSZ,
                FIONREAD,
                FIONBIO,
                FIONCLEX,
                FIOCLEX,
                SIGCHLD,
                CLONE_THREAD,
                CLONE_THREAD | CLONE_NEWNS,
                CLONE_THREAD | CLONE_NEWNET,
                CLONE_THREAD | CLONE_NEWUSER | CLONE_VM,
                0xffffffff,
                1ULL << 32,
                UINT64_MAX,
        };
        uint64_t args[6];

        assert_true(prog_late_errno.len < prog_errno.len / 4);
        for (int nr = -1; nr < 1024; nr++) {
                memset(args, 0, sizeof args);
                check_two_parts(nr, args);
                for (int a = 0; a < 6; a++)
                        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
                                memset(args, 0, sizeof args);
                                args[a] = values[i];
                                check_two_parts(nr, args);
                        }
                memset(args, 0, sizeof args);
                args[3] = args[4] = 1; /* sendto/recvfrom: flags and an address */
                check_two_parts(nr, args);
        }
        static const int conditional[] = { SYS_clone,  SYS_prlimit64,  SYS_prctl,  SYS_ioctl,   SYS_personality,
                                           SYS_socket, SYS_socketpair, SYS_sendto, SYS_recvfrom };
        for (size_t c = 0; c < sizeof conditional / sizeof conditional[0]; c++)
                for (unsigned a = 0; a < 3; a++)
                        for (uint64_t v = 0; v <= 4096; v++)
                                for (int hi = -1; hi < 32; hi += 4) {
                                        memset(args, 0, sizeof args);
                                        args[a] = hi < 0 ? v : v | (1ULL << (32 + hi));
                                        check_two_parts(conditional[c], args);
                                }
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_compile(void **state) {
        struct sock_fprog p1 = { 0 }, p2 = { 0 };
        scmp_filter_ctx ctx = NULL;

        for (int mode = POLICY_DENY_ERRNO; mode <= POLICY_DENY_KILL; mode++) {
                assert_int_equal(policy_seccomp_compile((PolicyDenyAction) mode, &p1), 0);
                assert_int_equal(policy_seccomp_compile((PolicyDenyAction) mode, &p2), 0);
                assert_true(p1.len > 0 && p1.len <= BPF_MAXINSNS);
                /* Deterministic: the same policy always yields the same program. */
                assert_int_equal(p1.len, p2.len);
                assert_memory_equal(p1.filter, p2.filter, p1.len * sizeof(struct sock_filter));
                policy_seccomp_fprog_free(&p1);
                policy_seccomp_fprog_free(&p2);
                assert_null(p1.filter);
                assert_int_equal(p1.len, 0);

                assert_int_equal(policy_seccomp_build((PolicyDenyAction) mode, &ctx), 0);
                assert_non_null(ctx);
                seccomp_release(ctx);
                ctx = NULL;
        }

        assert_int_equal(policy_seccomp_build((PolicyDenyAction) 42, &ctx), -EINVAL);
        assert_int_equal(policy_seccomp_build(POLICY_DENY_ERRNO, NULL), -EINVAL);
        assert_int_equal(policy_seccomp_compile(POLICY_DENY_ERRNO, NULL), -EINVAL);
        assert_int_equal(policy_seccomp_load(NULL), -EINVAL);
        assert_int_equal(policy_seccomp_load(&p1), -EINVAL);
        policy_seccomp_fprog_free(NULL);
}

static void test_clone3_enosys(void **state) {
        expect_ok(&prog_errno, child_clone3);
        expect_ok(&prog_kill, child_clone3); /* ENOSYS, not a kill, in kill mode too */
}

static void test_ioctl(void **state) {
        expect_ok(&prog_errno, child_ioctl_errno);
        expect_ok(&prog_kill, child_ioctl_allowed);
        expect_signal(&prog_kill, child_ioctl_tiocsti, SIGSYS);
}

static void test_prctl(void **state) {
        expect_ok(&prog_errno, child_prctl);
        expect_signal(&prog_kill, child_prctl_denied_only, SIGSYS);
}

static void test_xattr_unsupported(void **state) {
        expect_ok(&prog_errno, child_xattr);
        expect_ok(&prog_kill, child_xattr);
}

static void test_kill_mode(void **state) {
        expect_signal(&prog_kill, child_socket_only, SIGSYS);
        expect_signal(&prog_kill, child_socketpair_inet_only, SIGSYS);
        expect_signal(&prog_kill, child_recv_peek_only, SIGSYS);
        expect_ok(&prog_kill, child_fixed_eperm);
        expect_ok(&prog_errno, child_fixed_eperm);
        expect_signal(&prog_kill, child_fork_only, SIGSYS);
        expect_signal(&prog_kill, child_clone_namespace_thread, SIGSYS);
        expect_signal(&prog_kill, child_unlisted_only, SIGSYS);
        expect_signal(&prog_kill, child_prlimit_set_only, SIGSYS);
        /* What is allowed stays allowed. */
        expect_ok(&prog_kill, child_threads);
        expect_ok(&prog_kill, child_file_io);
        expect_ok(&prog_kill, child_signals_time);
        expect_ok(&prog_kill, child_identity);
}

static void test_x32_killed(void **state) {
        expect_signal(&prog_errno, child_x32, SIGSYS);
        expect_signal(&prog_kill, child_x32, SIGSYS);
}

static void test_i386_killed(void **state) {
        char msg[256];
        int status = run_child(NULL, child_int80_probe, msg, sizeof msg);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                print_message("int $0x80 does not work on this kernel (status 0x%x), skipping\n", (unsigned) status);
                skip();
        }
        expect_signal(&prog_errno, child_int80, SIGSYS);
}

/* On the kernel: every child of the errno-mode tests passes with the two parts loaded
 * one after the other, and the kill-mode ones die as with the whole kill filter. */
static void test_two_parts_on_the_kernel(void **state) {
        static const ChildFn errno_children[] = {
                child_sockets,         child_processes,   child_clone3,      child_threads, child_namespaces,
                child_other_processes, child_rlimits,     child_ioctl_errno, child_prctl,   child_personality,
                child_unlisted,        child_denied_misc, child_xattr,       child_file_io, child_memory,
                child_signals_time,    child_identity,    child_fixed_eperm,
        };
        static const ChildFn kill_children[] = {
                child_socket_only,
                child_socketpair_inet_only,
                child_recv_peek_only,
                child_fork_only,
                child_clone_namespace_thread,
                child_unlisted_only,
                child_prlimit_set_only,
                child_prctl_denied_only,
                child_ioctl_tiocsti,
                child_x32,
        };

        preload = &prog_early;
        for (size_t i = 0; i < sizeof errno_children / sizeof errno_children[0]; i++)
                expect_ok(&prog_late_errno, errno_children[i]);
        for (size_t i = 0; i < sizeof kill_children / sizeof kill_children[0]; i++)
                expect_signal(&prog_late_kill, kill_children[i], SIGSYS);
        expect_ok(&prog_late_kill, child_threads);
        expect_ok(&prog_late_kill, child_file_io);
        expect_ok(&prog_late_kill, child_xattr);
        expect_ok(&prog_late_kill, child_clone3);
        preload = NULL;
}

static void test_compile_parts(void **state) {
        struct sock_fprog p = { 0 };

        assert_int_equal(policy_seccomp_compile_early(NULL), -EINVAL);
        assert_int_equal(policy_seccomp_compile_late(POLICY_DENY_ERRNO, NULL), -EINVAL);
        assert_int_equal(policy_seccomp_compile_late((PolicyDenyAction) 42, &p), -EINVAL);
        /* Kill mode's late part is the whole kill filter. */
        assert_int_equal(prog_late_kill.len, prog_kill.len);
        assert_memory_equal(prog_late_kill.filter, prog_kill.filter, prog_kill.len * sizeof(struct sock_filter));
        print_message("filter sizes: whole %u, early %u, late %u instructions\n", prog_errno.len, prog_early.len,
                      prog_late_errno.len);
}

static int group_setup(void **state) {
        if (policy_seccomp_compile(POLICY_DENY_ERRNO, &prog_errno) < 0)
                return -1;
        if (policy_seccomp_compile(POLICY_DENY_KILL, &prog_kill) < 0)
                return -1;
        if (policy_seccomp_compile_early(&prog_early) < 0 ||
            policy_seccomp_compile_late(POLICY_DENY_ERRNO, &prog_late_errno) < 0 ||
            policy_seccomp_compile_late(POLICY_DENY_KILL, &prog_late_kill) < 0)
                return -1;
        return 0;
}

static int group_teardown(void **state) {
        policy_seccomp_fprog_free(&prog_errno);
        policy_seccomp_fprog_free(&prog_kill);
        policy_seccomp_fprog_free(&prog_early);
        policy_seccomp_fprog_free(&prog_late_errno);
        policy_seccomp_fprog_free(&prog_late_kill);
        return 0;
}

/* A test that is one child under the errno-mode filter, which must pass every check:
 * listed in main() as ERRNO_CHILD(name, child). */
static void errno_child_passes(void **state) {
        expect_ok(&prog_errno, *(ChildFn *) *state);
}
/* clang-format off */
#define ERRNO_CHILD(name, child) { #name, errno_child_passes, NULL, NULL, &(ChildFn){ child } }
/* clang-format on */

UNIT_MAIN(group_setup, group_teardown, TEST(test_compile), ERRNO_CHILD(test_sockets_denied, child_sockets),
          ERRNO_CHILD(test_processes_and_exec_denied, child_processes), TEST(test_clone3_enosys),
          ERRNO_CHILD(test_threads, child_threads), ERRNO_CHILD(test_namespaces_and_mounts_denied, child_namespaces),
          ERRNO_CHILD(test_other_processes_denied, child_other_processes),
          ERRNO_CHILD(test_rlimits_read_only, child_rlimits), TEST(test_ioctl), TEST(test_prctl),
          ERRNO_CHILD(test_personality, child_personality), ERRNO_CHILD(test_unlisted_enosys, child_unlisted),
          ERRNO_CHILD(test_denied_misc, child_denied_misc), TEST(test_xattr_unsupported),
          ERRNO_CHILD(test_file_io, child_file_io), ERRNO_CHILD(test_memory, child_memory),
          ERRNO_CHILD(test_signals_and_time, child_signals_time), ERRNO_CHILD(test_identity, child_identity),
          TEST(test_kill_mode), TEST(test_x32_killed), TEST(test_i386_killed), TEST(test_bpf_arches),
          TEST(test_bpf_prctl), TEST(test_bpf_ioctl), TEST(test_bpf_personality), TEST(test_bpf_clone),
          TEST(test_bpf_prlimit64), TEST(test_compile_parts), TEST(test_bpf_two_parts),
          TEST(test_two_parts_on_the_kernel))
