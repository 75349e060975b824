/* SPDX-License-Identifier: MIT */
/* Worker reports (contract/report.c): what the worker sends, and the supervisor's
 * parser, which treats every byte as untrusted (user code can write to the pipe). */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "contract/report.h"

/* Capture one frame written by a report_send_* function through a pipe. */
static size_t capture(int (*send)(int, void *), void *arg, uint8_t *buf, size_t cap) {
        int p[2];
        ssize_t n;

        assert_int_equal(pipe(p), 0);
        assert_int_equal(send(p[1], arg), 0);
        close(p[1]);
        n = read(p[0], buf, cap);
        close(p[0]);
        assert_true(n >= 4);
        assert_int_equal(frame_get_len(buf) + 4, (uint32_t) n);
        return (size_t) n;
}

static int send_done(int fd, void *arg) {
        return report_send_done(fd, arg, 10);
}

static int send_setup(int fd, void *arg) {
        return report_send_setup_error(fd, SETUP_STAGE_SECCOMP, EPERM);
}

static int send_ready(int fd, void *arg) {
        return report_send_ready(fd);
}

static void test_round_trip(void **state) {
        uint8_t buf[65536];
        char big[64];
        ReportRun rep = { .exception = true, .limit = REPORT_LIMIT_MEMORY };
        WorkerReport w;
        size_t n;

        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        rep.exc_type = "MemoryError";
        rep.exc_message = big; /* 63 characters, ceiling 10 */
        rep.exc_traceback = "Traceback\n";
        n = capture(send_done, &rep, buf, sizeof buf);
        assert_int_equal(report_parse(buf + 4, n - 4, 10, &w), 0);
        assert_int_equal(w.kind, REPORT_DONE);
        assert_true(w.exception);
        assert_int_equal(w.limit, REPORT_LIMIT_MEMORY);
        assert_string_equal(w.exc_type, "MemoryError");
        assert_int_equal(w.exc_message.total_chars, 63);
        assert_int_equal(w.exc_message.text_chars + w.exc_message.omitted_chars, 63);
        assert_int_equal(w.exc_message.text_chars, 10);
        report_done(&w);

        n = capture(send_setup, NULL, buf, sizeof buf);
        assert_int_equal(report_parse(buf + 4, n - 4, 10, &w), 0);
        assert_int_equal(w.kind, REPORT_SETUP_ERROR);
        assert_string_equal(w.stage, "seccomp");
        assert_int_equal(w.error, EPERM);
        report_done(&w);

        n = capture(send_ready, NULL, buf, sizeof buf);
        assert_int_equal(n, 13); /* runner.c's REPORT_READY_SLACK holds it */
        assert_int_equal(report_parse(buf + 4, n - 4, 10, &w), 0);
        assert_int_equal(w.kind, REPORT_READY);
        report_done(&w);
}

static void test_rejects(void **state) {
        static const struct {
                const char *bytes;
                size_t len;
        } bad[] = {
                { "", 0 },
                { "\x90", 1 },               /* array */
                { "\x81\xa1t\xa4nope", 7 },  /* unknown kind */
                { "\x81\xa1t\xa5setup", 8 }, /* setup without stage */
                { "\x81\xa1t\xa4"
                  "done",
                  7 },                                 /* done without fields */
                { "\xdd\x7f\xff\xff\xff", 5 },         /* huge declared array */
                { "\x81\xa1t\xa5setup\x01", 9 },       /* trailing byte */
                { "\x82\xa1t\xa5ready\xa1x\xc0", 11 }, /* ready with another field */
        };
        WorkerReport w;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
                assert_int_equal(report_parse(bad[i].bytes, bad[i].len, 10, &w), -EBADMSG);
}

/* Random mutations of a valid frame: never a crash, never a leak (ASan). */
static void test_mutations(void **state) {
        uint8_t buf[4096], m[4096];
        ReportRun rep = { .exception = true,
                          .exc_type = "ValueError",
                          .exc_message = "bad value é",
                          .exc_traceback = "Traceback (most recent call last):\n  File \"<code>\"\n" };
        unsigned seed = 7;
        size_t n = capture(send_done, &rep, buf, sizeof buf) - 4;

        for (int i = 0; i < 50000; i++) {
                WorkerReport w;
                size_t len = n;
                memcpy(m, buf + 4, n);
                for (int k = 0; k < 1 + (int) (rand_r(&seed) % 3); k++)
                        m[rand_r(&seed) % n] = (uint8_t) rand_r(&seed);
                if (rand_r(&seed) % 4 == 0)
                        len = rand_r(&seed) % (n + 1);
                if (report_parse(m, len, 10, &w) == 0)
                        report_done(&w);
        }
}

UNIT_MAIN(NULL, NULL, TEST(test_round_trip), TEST(test_rejects), TEST(test_mutations))
