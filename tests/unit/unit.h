/* SPDX-License-Identifier: MIT */
/* What every cmocka unit test under tests/unit starts with: cmocka's headers in the order
 * cmocka needs them, and the test binary's main(). */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

/* One test of UNIT_MAIN's list, without per-test setup or teardown. */
#define TEST(f) cmocka_unit_test(f)

/* main(): the tests given (TEST(...) or other cmocka_unit_test... entries) run as one group, with group
 * setup and teardown (either NULL); the exit status is the number that failed. */
#define UNIT_MAIN(group_setup, group_teardown, ...)                                                                    \
        int main(void) {                                                                                               \
                const struct CMUnitTest tests[] = { __VA_ARGS__ };                                                     \
                return cmocka_run_group_tests(tests, group_setup, group_teardown);                                     \
        }
