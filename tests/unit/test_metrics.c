/* SPDX-License-Identifier: MIT */
/* The status histograms (supervisor/metrics.c) and the journal entry of a log message
 * with fields (common/log.c). */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "supervisor/metrics.h"

/* A value on a bound belongs to that bucket (le: less or equal); one microsecond more to the next. */
static void test_histogram_bounds(void **state) {
        Histogram h = {};

        histogram_observe(&h, 0);
        histogram_observe(&h, 1000);      /* 1 ms: le 1 */
        histogram_observe(&h, 1001);      /* le 5 */
        histogram_observe(&h, 60000000);  /* 60 s: le 60000 */
        histogram_observe(&h, 300000001); /* over the last bound: +Inf only */
        assert_int_equal(h.count, 5);
        assert_int_equal(h.sum_usec, 1000 + 1001 + 60000000 + UINT64_C(300000001));
        assert_int_equal(histogram_cumulative(&h, 0), 2);
        assert_int_equal(histogram_cumulative(&h, 1), 3);
        assert_int_equal(metrics_bucket_ms[12], 30000);
        assert_int_equal(histogram_cumulative(&h, 12), 3);
        assert_int_equal(metrics_bucket_ms[13], 60000);
        assert_int_equal(histogram_cumulative(&h, 13), 4);
        assert_int_equal(histogram_cumulative(&h, METRICS_N_BUCKETS - 1), 4);
        assert_int_equal(histogram_cumulative(&h, METRICS_N_BUCKETS), 5);
        for (size_t i = 1; i < METRICS_N_BUCKETS; i++)
                assert_true(metrics_bucket_ms[i] > metrics_bucket_ms[i - 1]);
}

static bool iov_is(const struct iovec *v, const char *s) {
        return v->iov_len == strlen(s) && memcmp(v->iov_base, s, v->iov_len) == 0;
}

static void test_journal_fields(void **state) {
        const char *const fields[] = { "CALL_ID=7", "OUTCOME=ok", "ELAPSED_MS=12", "PEER_UID=1000", NULL };
        struct iovec iov[5 + LOG_MAX_FIELDS];
        char buf[512];
        int n;

        log_set_prefix("codeinterpd");
        n = log_journal_fields(LOG_INFO, "supervisor/server.c", 42, "call 7 finished: ok (worker started)", fields, buf,
                               sizeof buf, iov, ELEMENTSOF(iov));
        assert_int_equal(n, 9);
        assert_true(iov_is(&iov[0], "MESSAGE=call 7 finished: ok (worker started)"));
        assert_true(iov_is(&iov[1], "PRIORITY=6"));
        assert_true(iov_is(&iov[2], "CODE_FILE=supervisor/server.c"));
        assert_true(iov_is(&iov[3], "CODE_LINE=42"));
        assert_true(iov_is(&iov[4], "SYSLOG_IDENTIFIER=codeinterpd"));
        for (int i = 0; i < 4; i++)
                assert_true(iov_is(&iov[5 + i], fields[i]));

        /* Without fields: the five fixed items. Too small a buffer or array: -ENOBUFS, never a cut entry. */
        assert_int_equal(log_journal_fields(LOG_ERR, "f.c", 1, "m", NULL, buf, sizeof buf, iov, ELEMENTSOF(iov)), 5);
        assert_int_equal(log_journal_fields(LOG_ERR, "f.c", 1, "m", fields, buf, 20, iov, ELEMENTSOF(iov)), -ENOBUFS);
        assert_int_equal(log_journal_fields(LOG_ERR, "f.c", 1, "m", fields, buf, sizeof buf, iov, 6), -ENOBUFS);
}

/* journald's native protocol: KEY=value lines, and a value with a newline as KEY, newline,
 * its length in 64-bit little endian, the value, newline. */
static void test_journal_datagram(void **state) {
        struct iovec iov[] = { { (void *) "MESSAGE=two\nlines", 17 }, { (void *) "PRIORITY=6", 10 } };
        static const char want[] = "MESSAGE\n\x09\0\0\0\0\0\0\0two\nlines\nPRIORITY=6\n";
        char buf[64];

        assert_int_equal(log_journal_datagram(iov, 2, buf, sizeof buf), sizeof want - 1);
        assert_memory_equal(buf, want, sizeof want - 1);
        assert_int_equal(log_journal_datagram(&iov[1], 1, buf, sizeof buf), 11);
        assert_memory_equal(buf, "PRIORITY=6\n", 11);
        /* Too small a buffer, or an item without '=': 0, never a cut datagram. */
        assert_int_equal(log_journal_datagram(iov, 2, buf, sizeof want - 2), 0);
        assert_int_equal(log_journal_datagram(&iov[1], 1, buf, 10), 0);
        iov[1] = (struct iovec){ (void *) "PRIORITY", 8 };
        assert_int_equal(log_journal_datagram(iov, 2, buf, sizeof buf), 0);
}

UNIT_MAIN(NULL, NULL, TEST(test_histogram_bounds), TEST(test_journal_fields), TEST(test_journal_datagram))
