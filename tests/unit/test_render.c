/* SPDX-License-Identifier: MIT */
/* client/lib/render.c: the model-visible text and the progress card, from messages built
 * here, including forged ones that put secrets where names belong. */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/libcodeinterp.h"
#include "common/mp.h"

typedef struct Msg {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
} Msg;

static void msg_begin(Msg *m, size_t n) {
        msgpack_sbuffer_init(&m->sb);
        msgpack_packer_init(&m->pk, &m->sb, msgpack_sbuffer_write);
        msgpack_pack_map(&m->pk, n);
}

static const msgpack_object *msg_end(Msg *m) {
        msgpack_unpacked_init(&m->u);
        assert_int_equal(msgpack_unpack_next(&m->u, m->sb.data, m->sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        return &m->u.data;
}

static void msg_done(Msg *m) {
        msgpack_unpacked_destroy(&m->u);
        msgpack_sbuffer_destroy(&m->sb);
}

static void pack_channel(msgpack_packer *pk, const char *key, const char *text, uint64_t total, uint64_t omitted,
                         uint64_t at) {
        mp_pack_cstr(pk, key);
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "text", text);
        mp_pack_kv_uint(pk, "totalCharacters", total);
        mp_pack_kv_uint(pk, "omittedCharacters", omitted);
        mp_pack_kv_uint(pk, "omittedAt", at);
}

/* The message m holds, rendered as model text or as a progress card; m is done with.
 * noinline: GCC 12 otherwise reports a dangling pointer to the local it fills. */
__attribute__((noinline)) static char *msg_model_text(Msg *m) {
        char *s = NULL;
        assert_int_equal(ci_render_model_text(msg_end(m), &s), 0);
        msg_done(m);
        return s;
}

static char *msg_card(Msg *m) {
        char *s = NULL;
        assert_int_equal(ci_render_progress_card(msg_end(m), &s), 0);
        msg_done(m);
        return s;
}

/* m begun as a result with outcome, of n entries (type and outcome among them). */
static void pack_result_head(Msg *m, size_t n, const char *outcome) {
        msg_begin(m, n);
        mp_pack_kv_str(&m->pk, "type", "result");
        mp_pack_kv_str(&m->pk, "outcome", outcome);
}

/* m begun as an error reply to request 3. */
static void pack_error(Msg *m, const char *code, const char *message) {
        msg_begin(m, 4);
        mp_pack_kv_uint(&m->pk, "id", 3);
        mp_pack_kv_str(&m->pk, "type", "error");
        mp_pack_kv_str(&m->pk, "code", code);
        mp_pack_kv_str(&m->pk, "message", message);
}

/* A cancelled call with partial output: a runtime outcome, never Python output. */
static void test_cancelled(void **state) {
        Msg m;
        pack_result_head(&m, 7, "cancelled");
        mp_pack_kv_str(&m.pk, "detail", "cancelled by a cancel request");
        mp_pack_kv_bool(&m.pk, "partial", true);
        mp_pack_kv_uint(&m.pk, "elapsedMs", 1234);
        pack_channel(&m.pk, "stdout", "so far\n", 7, 0, 7);
        pack_channel(&m.pk, "stderr", "", 0, 0, 0);
        char *s = msg_model_text(&m);
        assert_string_equal(s, "outcome: cancelled\n"
                               "elapsed: 1234 ms\n"
                               "The runtime cancelled the call before it finished. This is not Python output.\n"
                               "detail: cancelled by a cancel request\n"
                               "Any output below is partial: what had arrived when the worker was stopped.\n"
                               "--- stdout (7 characters) ---\n"
                               "so far\n");
        free(s);
}

/* The cut is marked where omittedAt says, in characters (not bytes), with the exact count. */
static void test_omitted_multibyte(void **state) {
        Msg m;
        pack_result_head(&m, 4, "ok");
        pack_channel(&m.pk, "stdout", "ééé", 103, 100, 2); /* kept: "éé" + "é" */
        pack_channel(&m.pk, "result", "'x'", 3, 0, 3);
        char *s = msg_model_text(&m);
        assert_string_equal(s, "outcome: ok\n"
                               "elapsed: 0 ms\n"
                               "--- stdout (103 characters; 100 omitted where marked, not shown) ---\n"
                               "éé\n"
                               "[... 100 characters omitted ...]\n"
                               "é\n"
                               "--- value (3 characters) ---\n"
                               "'x'\n");
        free(s);
}

/* An error reply with code: no code ran, the reason, and the hint for that code. */
static void check_error_reply(const char *code, const char *hint) {
        Msg m;
        char *s;

        pack_error(&m, code, "the reason");
        s = msg_model_text(&m);
        assert_non_null(strstr(s, "No code ran"));
        assert_non_null(strstr(s, "reason: the reason\n"));
        assert_non_null(strstr(s, hint));
        assert_true(strncmp(s, "outcome: ", 9) == 0 && strncmp(s + 9, code, strlen(code)) == 0);
        free(s);
}

static void test_error_replies(void **state) {
        check_error_reply("quota_exhausted", "No more calls are allowed in this session");
        check_error_reply("unavailable_source", "Use only source ids this conversation offers.");
        check_error_reply("overloaded", "calling again later may work");
}

/* A reason longer than the 1024 bytes shown is cut before a code point, never inside
 * one: 1023 ASCII bytes and then "é" (2 bytes) leave 1023 bytes, valid UTF-8. */
static void test_cut_keeps_code_points_whole(void **state) {
        char reason[1100], *text;
        size_t at, n;
        Msg m;

        memset(reason, 'a', 1023);
        strcpy(reason + 1023, "\xc3\xa9 and more");
        pack_error(&m, "invalid_input", reason);
        text = msg_model_text(&m);
        assert_non_null(strstr(text, "reason: "));
        at = (size_t) (strstr(text, "reason: ") - text) + strlen("reason: ");
        n = strcspn(text + at, "\n");
        assert_int_equal(n, 1023);
        assert_int_equal(strspn(text + at, "a"), 1023);
        free(text);
}

static void test_worker_error(void **state) {
        Msg m;
        pack_result_head(&m, 3, "worker_error");
        mp_pack_kv_str(&m.pk, "detail", "could not start a worker");
        char *s = msg_model_text(&m);
        assert_non_null(strstr(s, "The sandbox failed, not the code"));
        assert_non_null(strstr(s, "detail: could not start a worker\n"));
        free(s);
}

/* A worker_error the code caused, as the supervisor reports it (detail and exit status),
 * says so; with a sandbox setup step reported, or no worker, it is the sandbox's. */
static char *worker_death(const char *detail, int code, int sig, bool setup_step) {
        Msg m;
        char *s;

        pack_result_head(&m, 5, "worker_error");
        mp_pack_kv_str(&m.pk, "detail", detail);
        mp_pack_cstr(&m.pk, "exitStatus");
        msgpack_pack_map(&m.pk, 2);
        mp_pack_cstr(&m.pk, "code");
        if (code >= 0)
                msgpack_pack_int(&m.pk, code);
        else
                msgpack_pack_nil(&m.pk);
        mp_pack_cstr(&m.pk, "signal");
        if (sig > 0)
                msgpack_pack_int(&m.pk, sig);
        else
                msgpack_pack_nil(&m.pk);
        mp_pack_cstr(&m.pk, "workerError");
        if (setup_step) {
                msgpack_pack_map(&m.pk, 2);
                mp_pack_kv_str(&m.pk, "stage", "seccomp");
                mp_pack_kv_int(&m.pk, "errno", 1);
        } else
                msgpack_pack_nil(&m.pk);
        s = msg_model_text(&m);
        return s;
}

static void test_worker_death_caused_by_the_code(void **state) {
        char *s = worker_death("the worker exited with status 3 without a result", 3, 0, false);
        assert_non_null(strstr(s, "The code ended its own process (exit status 3, as os._exit() does)"));
        assert_non_null(strstr(s, "Any output below is what the code wrote before its process ended.\n"));
        assert_null(strstr(s, "sandbox failed"));
        assert_null(strstr(s, "calling again may work"));
        free(s);
        s = worker_death("the worker died from signal 11 (SEGV)", -1, 11, false);
        assert_non_null(strstr(s, "The code's process was ended by signal 11, which the code sent itself"));
        assert_null(strstr(s, "sandbox failed"));
        free(s);
        s = worker_death("killed by the seccomp filter (a denied system call)", -1, 31, false);
        assert_non_null(strstr(s, "The sandbox's system-call filter ended the process"));
        assert_null(strstr(s, "sandbox failed"));
        free(s);
        /* A setup step reported, or a detail that is not the code's: the sandbox's. */
        s = worker_death("the worker exited with status 127 without a result", 127, 0, true);
        assert_non_null(strstr(s, "The sandbox failed, not the code; calling again may work."));
        assert_non_null(strstr(s, "Any output below is partial"));
        free(s);
        s = worker_death("the worker's report exceeded maxWorkerMessageBytes", -1, 9, false);
        assert_non_null(strstr(s, "The sandbox failed, not the code"));
        free(s);
        /* A detail that does not match the exit status is not believed. */
        s = worker_death("the worker exited with status 3 without a result", -1, 9, false);
        assert_non_null(strstr(s, "The sandbox failed, not the code"));
        free(s);
}

/* A forged progress message with secrets in every field, names included: the card shows
 * only numbers and known names. */
static void test_card_privacy(void **state) {
        Msg m;
        msg_begin(&m, 12);
        mp_pack_kv_str(&m.pk, "type", "progress");
        mp_pack_kv_str(&m.pk, "phase", "SECRET-PHASE");
        mp_pack_kv_str(&m.pk, "outcome", "SECRET-OUTCOME");
        mp_pack_kv_uint(&m.pk, "elapsedMs", 2500);
        mp_pack_kv_uint(&m.pk, "queuePosition", 3);
        mp_pack_kv_uint(&m.pk, "stdoutCharacters", 70000);
        mp_pack_kv_uint(&m.pk, "stdoutOmittedCharacters", 6000);
        mp_pack_kv_uint(&m.pk, "stderrCharacters", 5);
        mp_pack_kv_str(&m.pk, "code", "SECRET-CODE");
        mp_pack_kv_str(&m.pk, "summary", "SECRET-SUMMARY");
        mp_pack_kv_str(&m.pk, "detail", "SECRET-DETAIL /inputs/x.txt");
        mp_pack_cstr(&m.pk, "sourceIds");
        msgpack_pack_array(&m.pk, 1);
        mp_pack_cstr(&m.pk, "SECRET-ID");
        char *s = msg_card(&m);
        assert_string_equal(s, "code_interpreter: ? · 2.5 s · queue position 3 · stdout 70000 characters (6000 "
                               "omitted) · stderr 5 characters");
        free(s);

        /* A result: everything in it but the outcome and the sizes stays out. */
        pack_result_head(&m, 8, "python_exception");
        mp_pack_kv_str(&m.pk, "limit", "memory");
        mp_pack_kv_str(&m.pk, "detail", "SECRET-DETAIL");
        mp_pack_kv_uint(&m.pk, "elapsedMs", 40);
        pack_channel(&m.pk, "stdout", "SECRET-OUT", 10, 0, 10);
        pack_channel(&m.pk, "stderr", "SECRET-ERR", 10, 0, 10);
        mp_pack_cstr(&m.pk, "exception");
        msgpack_pack_map(&m.pk, 1);
        mp_pack_kv_str(&m.pk, "type", "SECRET-TYPE");
        s = msg_card(&m);
        assert_string_equal(s, "code_interpreter: finished: python_exception · 0.0 s · stdout 10 characters · "
                               "stderr 10 characters");
        free(s);
}

static void test_not_a_map(void **state) {
        msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
        char *s = NULL;
        assert_int_equal(ci_render_model_text(&nil, &s), -EINVAL);
        assert_int_equal(ci_render_progress_card(&nil, &s), -EINVAL);
        assert_null(s);
}

UNIT_MAIN(NULL, NULL, TEST(test_cancelled), TEST(test_omitted_multibyte), TEST(test_error_replies),
          TEST(test_worker_error), TEST(test_worker_death_caused_by_the_code), TEST(test_card_privacy),
          TEST(test_not_a_map), TEST(test_cut_keeps_code_points_whole));
