/* SPDX-License-Identifier: MIT */
/* _cleanup_cap_free_ frees what cap_init() allocated. libcap's cap_free() takes the
 * object, not its address: handed &caps it refuses and frees nothing. Run under
 * LeakSanitizer (`make sanitize`), a wrong cleanup fails this test as a leak. */
#include "unit.h"

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

UNIT_MAIN(NULL, NULL, TEST(test_cleanup_frees), TEST(test_cleanup_accepts_null), TEST(test_nice_restorable))
