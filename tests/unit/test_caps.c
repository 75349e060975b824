/* SPDX-License-Identifier: MIT */
/* _cleanup_cap_free_ frees what cap_init() allocated. libcap's cap_free() takes the
 * object, not its address: handed &caps it refuses and frees nothing. Run under
 * LeakSanitizer (`make sanitize`), a wrong cleanup fails this test as a leak. */
#include "unit.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proc.h"
#include "worker/sandbox.h"

static void test_cleanup_frees(void **state) {
        for (int i = 0; i < 64; i++) {
                _cleanup_cap_free_ cap_t caps = cap_init();
                assert_non_null(caps);
                assert_int_equal(cap_clear(caps), 0);
        }
}

static void test_cleanup_accepts_null(void **state) {
        _cleanup_cap_free_ cap_t caps = NULL;
        assert_null(caps);
}

/* Whether a pre-started worker's lower priority can be undone for its call (zygote.c):
 * CAP_SYS_NICE, or an RLIMIT_NICE r that reaches the supervisor's nice (20 - r). */
static void test_nice_restorable(void **state) {
        (void) state;
        assert_true(proc_nice_restorable(0, true, 0));     /* root with every capability */
        assert_false(proc_nice_restorable(0, false, 0));   /* the unit without LimitNICE=, a pod */
        assert_true(proc_nice_restorable(0, false, 20));   /* LimitNICE=+0 */
        assert_false(proc_nice_restorable(0, false, 19));  /* down to 1 only */
        assert_true(proc_nice_restorable(5, false, 15));   /* Nice=5: down to 5 is enough */
        assert_false(proc_nice_restorable(-5, false, 20)); /* Nice=-5 needs 25 */
        assert_true(proc_nice_restorable(-5, false, 25));
        assert_true(proc_nice_restorable(19, false, 1));
        assert_true(proc_nice_restorable(0, false, RLIM_INFINITY));
}

static ino_t inode_of(int fd) {
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        return st.st_ino;
}

/* A child's mount namespace, through its pidfd (the ioctl of Linux 6.11) and through
 * /proc (pidfd -1, and older kernels): the same namespace, not ours, close-on-exec;
 * and nothing once the child is reaped. */
static void test_mount_namespace_of_a_child(void **state) {
        int ready[2], self, by_pidfd, by_proc, pidfd;
        char c;
        pid_t pid;

        (void) state;
        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (unshare(geteuid() == 0 ? CLONE_NEWNS : CLONE_NEWUSER | CLONE_NEWNS) < 0)
                        _exit(1);
                (void) !write(ready[1], "x", 1);
                pause();
                _exit(0);
        }
        close(ready[1]);
        assert_int_equal(read(ready[0], &c, 1), 1);
        close(ready[0]);
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        assert_true(pidfd >= 0);
        self = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        by_pidfd = proc_open_mount_namespace(pid, pidfd);
        by_proc = proc_open_mount_namespace(pid, -1);
        assert_true(self >= 0 && by_pidfd >= 0 && by_proc >= 0);
        assert_true(inode_of(by_pidfd) == inode_of(by_proc));
        assert_true(inode_of(by_pidfd) != inode_of(self));
        assert_int_equal(fcntl(by_pidfd, F_GETFD), FD_CLOEXEC);
        assert_int_equal(fcntl(by_proc, F_GETFD), FD_CLOEXEC);
        close(by_pidfd);
        close(by_proc);
        close(self);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_int_equal(proc_open_mount_namespace(pid, pidfd), -1);
        close(pidfd);
}

UNIT_MAIN(NULL, NULL, TEST(test_cleanup_frees), TEST(test_cleanup_accepts_null), TEST(test_nice_restorable),
          TEST(test_mount_namespace_of_a_child))
