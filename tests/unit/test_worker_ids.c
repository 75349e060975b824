/* SPDX-License-Identifier: MIT */
/* supervisor/worker_ids.c: the block check (host users and groups, subuid/subgid files
 * written here, the supervisor's own id map), the order ids are given in, exhaustion,
 * and quarantine: an id whose worker may still live comes back only once no child of
 * this process is mapped to it (a real child in a user namespace, mapped as a worker). */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/userns.h"
#include "supervisor/worker_ids.h"

static const char *write_tmp(char *path, const char *text) {
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        return path;
}

static void test_check(void **state) {
        char why[256], subuid[] = "/tmp/ci-subuid-XXXXXX", subgid[] = "/tmp/ci-subgid-XXXXXX";

        write_tmp(subuid, "# a comment\nalice:100000:65536\nmalformed line\nbob:165536:65536\n");
        write_tmp(subgid, "alice:100000:65536\n");
        /* The default block is free on a normal host. */
        assert_int_equal(worker_ids_check(POLICY_HOST_ID_BASE_DEFAULT, 65536, subuid, subgid, why, sizeof why), 0);
        assert_string_equal(why, "");
        assert_int_equal(worker_ids_check(65534, 1, subuid, subgid, why, sizeof why), -EEXIST); /* nobody */
        assert_non_null(strstr(why, "65534"));
        /* bob's subordinate range, by one id at either end. */
        assert_int_equal(worker_ids_check(231071, 2, subuid, subgid, why, sizeof why), -EEXIST);
        assert_non_null(strstr(why, "bob's range 165536-231071"));
        assert_int_equal(worker_ids_check(231072, 1000, subuid, subgid, why, sizeof why), 0);
        assert_int_equal(worker_ids_check(90000, 10001, subuid, subgid, why, sizeof why), -EEXIST);
        assert_non_null(strstr(why, "alice"));
        /* A missing file holds no range. */
        assert_int_equal(worker_ids_check(100000, 10, "/nonexistent/subuid", "/nonexistent/subgid", why, sizeof why),
                         0);
        unlink(subuid);
        unlink(subgid);
}

static void test_order_and_exhaustion(void **state) {
        Policy p;
        WorkerIds *ids;
        WorkerId a, b, c, d;

        policy_init_defaults(&p);
        p.worker_host_id_base = 3000000000U;
        p.worker_host_id_count = 3;
        assert_int_equal(worker_ids_new(&p, NULL, &ids), 0);
        assert_int_equal(worker_id_acquire(ids, &a), 0);
        assert_int_equal(worker_id_acquire(ids, &b), 0);
        assert_int_equal(a.slot, 0);
        assert_int_equal(a.uid, 3000000000U);
        assert_int_equal(a.gid, 3000000000U);
        assert_int_equal(b.uid, 3000000001U);
        /* A freed id is given after the others: b's successor first. */
        worker_id_release(ids, a.slot);
        assert_int_equal(worker_id_acquire(ids, &c), 0);
        assert_int_equal(c.slot, 2);
        assert_int_equal(worker_id_acquire(ids, &d), 0);
        assert_int_equal(d.slot, 0);
        assert_int_equal(worker_ids_in_use(ids), 3);
        assert_int_equal(worker_id_acquire(ids, &a), -EUSERS);
        worker_id_release(ids, b.slot);
        worker_id_release(ids, b.slot); /* twice is once */
        assert_int_equal(worker_ids_in_use(ids), 2);
        assert_false(worker_id_of_slot(ids, 3, &a));
        worker_ids_free(ids);
}

/* A child in its own user namespace, mapped as a worker of the slot would be. */
static pid_t mapped_child(const WorkerId *id) {
        int sync[2];
        pid_t pid;
        char c;

        assert_int_equal(pipe(sync), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(sync[1]);
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(1);
                /* Wait for the map, then to be killed. */
                if (read(sync[0], &c, 1) < 0)
                        _exit(1);
                pause();
                _exit(0);
        }
        close(sync[0]);
        /* Wait until the child has its namespace (its uid_map changes from the parent's). */
        for (int i = 0; i < 1000; i++) {
                char path[64], buf[128] = "";
                FILE *f;
                snprintf(path, sizeof path, "/proc/%d/uid_map", (int) pid);
                if ((f = fopen(path, "re"))) {
                        size_t n = fread(buf, 1, sizeof buf - 1, f);
                        buf[n] = 0;
                        fclose(f);
                }
                if (buf[0] == 0 && userns_write_id_maps(pid, 65534, id->uid, 65534, id->gid) == 0)
                        break;
                usleep(1000);
        }
        close(sync[1]);
        return pid;
}

static bool gone(pid_t pid) {
        return waitpid(pid, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static void test_quarantine(void **state) {
        Policy p;
        WorkerIds *ids;
        WorkerId a, b, c;
        pid_t pid_a, pid_c;

        if (geteuid() != 0) {
                skip();
                return;
        }
        policy_init_defaults(&p);
        p.worker_host_id_count = 3;
        assert_int_equal(worker_ids_new(&p, NULL, &ids), 0);
        assert_int_equal(worker_id_acquire(ids, &a), 0);
        assert_int_equal(worker_id_acquire(ids, &b), 0);
        assert_int_equal(worker_id_acquire(ids, &c), 0);
        pid_a = mapped_child(&a);
        pid_c = mapped_child(&c);
        /* A child in our own namespace (the zygote is one) "maps" every id: no worker. */
        pid_t plain = fork();
        assert_true(plain >= 0);
        if (plain == 0) {
                pause();
                _exit(0);
        }
        /* a's and b's workers are nobody's (b has none left); c's is still served. */
        worker_id_quarantine(ids, a.slot);
        worker_id_quarantine(ids, b.slot);
        assert_int_equal(worker_ids_in_use(ids), 3);
        /* With no id free, an acquire sweeps: a's child is killed and reaped, a and b free. */
        assert_int_equal(worker_id_acquire(ids, &b), 0);
        assert_int_equal(worker_ids_in_use(ids), 2);
        assert_true(gone(pid_a));
        assert_false(gone(pid_c)); /* not quarantined: left alone */
        assert_false(gone(plain));
        kill(plain, SIGKILL);
        assert_int_equal(waitpid(plain, NULL, 0), plain);
        kill(pid_c, SIGKILL);
        assert_int_equal(waitpid(pid_c, NULL, 0), pid_c);
        worker_ids_free(ids);
}

UNIT_MAIN(NULL, NULL, TEST(test_check), TEST(test_order_and_exhaustion), TEST(test_quarantine))
