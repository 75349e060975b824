/* SPDX-License-Identifier: MIT */
/* _cleanup_cap_free_ frees what cap_init() allocated. libcap's cap_free() takes the
 * object, not its address: handed &caps it refuses and frees nothing. Run under
 * LeakSanitizer (`make sanitize`), a wrong cleanup fails this test as a leak. */
#include "unit.h"

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

UNIT_MAIN(NULL, NULL, TEST(test_cleanup_frees), TEST(test_cleanup_accepts_null))
