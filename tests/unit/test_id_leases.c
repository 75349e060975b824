/* SPDX-License-Identifier: MIT */
/* supervisor/id_leases.c: host ids leased between supervisors (two lease sets opened
 * here are two supervisors: OFD locks of two opens conflict within one process too),
 * blocks that overlap refused, and a dead holder's ids kept unused for the quarantine. */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/id_leases.h"

#define BASE 1000000u
#define COUNT 16u

static char dir[] = "/tmp/ci-leases-XXXXXX";

static int setup(void **state) {
        (void) state;
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        char cmd[64];

        (void) state;
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static IdLeases *open_block(uint32_t base, uint32_t count) {
        IdLeases *l = NULL;
        char why[512];

        assert_int_equal(id_leases_open(dir, base, count, &l, why, sizeof why), 0);
        return l;
}

static void test_leases_between_supervisors(void **state) {
        IdLeases *a = open_block(BASE, COUNT), *b = open_block(BASE, COUNT), *c = NULL;
        char why[512];

        (void) state;
        assert_true(id_lease_take(a, BASE + 5));
        assert_false(id_lease_take(b, BASE + 5));
        assert_true(id_lease_take(b, BASE + 6));
        assert_false(id_lease_take(a, BASE + COUNT)); /* not of the block */
        id_lease_drop(a, BASE + 5);
        assert_true(id_lease_take(b, BASE + 5)); /* given back: no quarantine */
        id_lease_drop(b, BASE + 5);
        id_lease_drop(b, BASE + 6);
        /* A block overlapping a live one without being the same is refused, naming it. */
        assert_int_equal(id_leases_open(dir, BASE + 8, COUNT, &c, why, sizeof why), -EEXIST);
        assert_non_null(strstr(why, "overlaps the block 1000000-1000015"));
        /* A disjoint one is not. */
        c = open_block(BASE + COUNT, COUNT);
        id_leases_free(c);
        id_leases_free(a);
        id_leases_free(b);
}

static void test_a_dead_holders_ids_wait(void **state) {
        IdLeases *a = open_block(BASE, COUNT), *b = open_block(BASE, COUNT);

        (void) state;
        assert_true(id_lease_take(a, BASE + 3));
        assert_true(id_lease_take(a, BASE + 4));
        id_lease_drop(a, BASE + 4);
        id_leases_free(a);                        /* dies holding BASE + 3: the kernel drops its lock */
        assert_false(id_lease_take(b, BASE + 3)); /* found orphaned: stamped */
        assert_false(id_lease_take(b, BASE + 3)); /* still within the quarantine */
        assert_true(id_lease_take(b, BASE + 4));  /* given back properly */
        id_leases_set_quarantine(b, 0);           /* the quarantine over */
        assert_true(id_lease_take(b, BASE + 3));
        id_lease_drop(b, BASE + 3);
        id_lease_drop(b, BASE + 4);
        id_leases_free(b);
        /* Given back: the next takes them at once. */
        a = open_block(BASE, COUNT);
        assert_true(id_lease_take(a, BASE + 3));
        id_lease_drop(a, BASE + 3);
        id_leases_free(a);
}

/* Past the quarantine, an id that is still a live process's uid (a worker the host froze
 * or stalled) is not leased: here a child of this test with that uid. */
static void test_a_dead_holders_live_worker_keeps_its_id(void **state) {
        IdLeases *a = open_block(BASE, COUNT), *b = open_block(BASE, COUNT);
        int ready[2], hold[2];
        pid_t pid;
        char c;

        (void) state;
        if (geteuid() != 0)
                skip(); /* setresuid to another uid needs root */
        assert_true(id_lease_take(a, BASE + 7));
        id_leases_free(a); /* dies holding it */
        assert_int_equal(pipe(ready), 0);
        assert_int_equal(pipe(hold), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(ready[0]);
                close(hold[1]);
                if (setresuid(BASE + 7, BASE + 7, BASE + 7) < 0)
                        _exit(1);
                if (write(ready[1], "r", 1) != 1)
                        _exit(1);
                _exit(read(hold[0], &c, 1) == 0 ? 0 : 1); /* until the test closes its end */
        }
        close(ready[1]);
        close(hold[0]);
        assert_int_equal(read(ready[0], &c, 1), 1); /* running as BASE + 7 */
        assert_false(id_lease_take(b, BASE + 7));   /* found orphaned: stamped */
        id_leases_set_quarantine(b, 0);             /* the margin over ... */
        assert_false(id_lease_take(b, BASE + 7));   /* ... but its process lives */
        close(hold[1]);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_true(id_lease_take(b, BASE + 7)); /* gone: free again */
        id_lease_drop(b, BASE + 7);
        close(ready[0]);
        id_leases_free(b);
}

static void set_file_size_limit(rlim_t bytes) {
        struct rlimit rl;

        assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
        rl.rlim_cur = bytes;
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* A record that cannot be written (here EFBIG: RLIMIT_FSIZE below the record; on a host,
 * a full /run): taking the id fails and gives its lock back; dropping it leaves the
 * record "leased", so the next holder waits out the quarantine rather than trusting it. */
static void test_records_that_cannot_be_written(void **state) {
        IdLeases *a = open_block(BASE, COUNT), *b = open_block(BASE, COUNT);
        struct rlimit saved;

        (void) state;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
        signal(SIGXFSZ, SIG_IGN);
        set_file_size_limit(8); /* the record of BASE + 0 only */
        assert_false(id_lease_take(a, BASE + 9));
        set_file_size_limit(saved.rlim_cur);
        assert_true(id_lease_take(b, BASE + 9)); /* a gave its lock back */
        set_file_size_limit(8);
        id_lease_drop(b, BASE + 9); /* the lock goes, the record stays "leased" */
        set_file_size_limit(saved.rlim_cur);
        assert_false(id_lease_take(a, BASE + 9)); /* taken for a dead holder's */
        id_leases_set_quarantine(a, 0);
        assert_true(id_lease_take(a, BASE + 9));
        id_lease_drop(a, BASE + 9);
        signal(SIGXFSZ, SIG_DFL);
        id_leases_free(a);
        id_leases_free(b);
}

static bool state_file_exists(uint32_t base, uint32_t count) {
        char path[128];

        snprintf(path, sizeof path, "%s/state-%u-%u", dir, (unsigned) base, (unsigned) count);
        return access(path, F_OK) == 0;
}

/* The last supervisor of a block to stop removes its state file when every id was given
 * back (test processes and supervisors with blocks of their own left one per block);
 * not while another supervisor of the block lives, nor while a record is not FREE. */
static void test_the_last_to_stop_removes_the_state_file(void **state) {
        const uint32_t base = BASE + 64;
        IdLeases *a = open_block(base, COUNT), *b = open_block(base, COUNT);

        (void) state;
        assert_true(id_lease_take(a, base + 1));
        id_lease_drop(a, base + 1);
        assert_true(state_file_exists(base, COUNT));
        id_leases_free(a); /* b lives */
        assert_true(state_file_exists(base, COUNT));
        assert_true(id_lease_take(b, base + 2));
        id_leases_free(b); /* stops holding base + 2 (as if it died): the record says so */
        assert_true(state_file_exists(base, COUNT));
        a = open_block(base, COUNT);
        id_leases_set_quarantine(a, 0);
        assert_false(id_lease_take(a, base + 2)); /* found orphaned: stamped */
        assert_true(id_lease_take(a, base + 2));
        id_lease_drop(a, base + 2);
        id_leases_free(a); /* every record FREE, nobody else: gone */
        assert_false(state_file_exists(base, COUNT));
        /* The next of the block starts from a new file. */
        b = open_block(base, COUNT);
        assert_true(id_lease_take(b, base + 2));
        id_lease_drop(b, base + 2);
        id_leases_free(b);
        assert_false(state_file_exists(base, COUNT));
}

UNIT_MAIN(setup, teardown, TEST(test_leases_between_supervisors), TEST(test_a_dead_holders_ids_wait),
          TEST(test_a_dead_holders_live_worker_keeps_its_id), TEST(test_records_that_cannot_be_written),
          TEST(test_the_last_to_stop_removes_the_state_file))
