/* SPDX-License-Identifier: MIT */
/* Worker reports (contract/report.c): what the worker sends, and the supervisor's
 * parser, which treats every byte as untrusted (user code can write to the pipe). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
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

static int send_done_wide(int fd, void *arg) {
        return report_send_done(fd, arg, 20000);
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

/* A done report with a traceback of tb_len characters, sent into a pipe of pipe_size
 * bytes that holds filler_len bytes already and that user code made non-blocking: what
 * does not fit waits for room (the writer is seen in poll() before the pipe is
 * drained), and the frame arrives whole, after the filler. */
static void send_into_a_full_pipe(int pipe_size, size_t filler_len, size_t tb_len) {
        static char filler[8192], tb[20000], got[65536];
        ReportRun rep = { .exception = true, .exc_type = "ValueError", .exc_message = "m", .exc_traceback = tb };
        WorkerReport w;
        size_t n = 0;
        int p[2], status;
        pid_t pid;

        assert_true(filler_len <= sizeof filler && tb_len < sizeof tb);
        memset(filler, 'f', sizeof filler);
        memset(tb, 't', tb_len);
        tb[tb_len] = 0;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, pipe_size), pipe_size);
        assert_int_equal(write(p[1], filler, filler_len), (ssize_t) filler_len);
        assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(report_send_done(p[1], &rep, sizeof tb) == 0 ? 0 : 1);
        close(p[1]);
        for (;;) { /* waiting for room: in poll() (x86_64: 7), or done already */
                char path[64], line[64] = "";
                snprintf(path, sizeof path, "/proc/%d/syscall", (int) pid);
                FILE *f = fopen(path, "re");
                if (f) {
                        if (!fgets(line, sizeof line, f))
                                line[0] = 0;
                        fclose(f);
                }
                if (strncmp(line, "7 ", 2) == 0 || !f)
                        break;
                usleep(1000);
        }
        for (ssize_t k; (k = read(p[0], got + n, sizeof got - n)) > 0;)
                n += (size_t) k;
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_true(n > filler_len + 4 + tb_len);
        assert_memory_equal(got, filler, filler_len);
        assert_int_equal(frame_get_len((uint8_t *) got + filler_len) + 4, n - filler_len);
        assert_int_equal(report_parse((uint8_t *) got + filler_len + 4, n - filler_len - 4, sizeof tb, &w), 0);
        assert_int_equal(w.kind, REPORT_DONE);
        assert_int_equal(w.exc_traceback.total_chars, tb_len);
        report_done(&w);
}

/* The three ways a frame longer than PIPE_BUF meets a full non-blocking pipe: nothing
 * fits (EAGAIN); a free page takes the length and part of the body; the last page's
 * 1-3 free bytes take part of the length (the kernel fills them first). */
static void test_frame_into_a_full_pipe(void **state) {
        uint8_t buf[65536];
        size_t tb_len = 12000, frame;
        ReportRun rep = { .exception = true, .exc_type = "ValueError", .exc_message = "m" };
        char tb[20000];

        send_into_a_full_pipe(4096, 4096, tb_len);
        send_into_a_full_pipe(8192, 4096, tb_len);
        /* A traceback length whose frame ends 1-3 bytes into a page. */
        for (;; tb_len++) {
                memset(tb, 't', tb_len);
                tb[tb_len] = 0;
                rep.exc_traceback = tb;
                frame = capture(send_done_wide, &rep, buf, sizeof buf);
                if ((frame & 4095) >= 1 && (frame & 4095) <= 3)
                        break;
        }
        send_into_a_full_pipe(4096, 4096 - (frame & 4095), tb_len);
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

UNIT_MAIN(NULL, NULL, TEST(test_round_trip), TEST(test_frame_into_a_full_pipe), TEST(test_rejects),
          TEST(test_mutations))
