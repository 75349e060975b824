/* SPDX-License-Identifier: MIT */
#include "unit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "contract/fit.h"

#define T_MIN(a, b) ((a) < (b) ? (a) : (b))
#define T_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---------------------------------------------------------------------------------------
 * Reference decoder: non-streaming, table driven, written independently of fit.c.
 * Mirrors Python's bytes.decode("utf-8", "replace"). */

typedef struct RefRow {
        uint8_t lead_lo, lead_hi;
        unsigned len;
        uint8_t second_lo, second_hi;
} RefRow;

static const RefRow ref_rows[] = {
        { 0x00, 0x7F, 1, 0x00, 0x00 }, { 0xC2, 0xDF, 2, 0x80, 0xBF }, { 0xE0, 0xE0, 3, 0xA0, 0xBF },
        { 0xE1, 0xEC, 3, 0x80, 0xBF }, { 0xED, 0xED, 3, 0x80, 0x9F }, { 0xEE, 0xEF, 3, 0x80, 0xBF },
        { 0xF0, 0xF0, 4, 0x90, 0xBF }, { 0xF1, 0xF3, 4, 0x80, 0xBF }, { 0xF4, 0xF4, 4, 0x80, 0x8F },
};

typedef struct RefDecoded {
        uint32_t *cps;
        size_t n;
        uint64_t bytes; /* UTF-8 length of cps */
        uint64_t replaced;
        bool trailing_incomplete; /* the last U+FFFD stands for a prefix cut off by the end */
} RefDecoded;

static unsigned ref_cp_len(uint32_t cp) {
        return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

static void ref_decode(const uint8_t *in, size_t n, RefDecoded *ret) {
        RefDecoded d = { .cps = malloc((n + 1) * sizeof(uint32_t)) };
        size_t i = 0;

        assert_non_null(d.cps);
        while (i < n) {
                const RefRow *row = NULL;
                for (size_t r = 0; r < sizeof(ref_rows) / sizeof(ref_rows[0]); r++)
                        if (in[i] >= ref_rows[r].lead_lo && in[i] <= ref_rows[r].lead_hi)
                                row = &ref_rows[r];

                uint32_t cp = 0xFFFD;
                size_t used = 1;
                bool good = false;
                d.trailing_incomplete = false;

                if (row) {
                        size_t k = 1;
                        while (k < row->len && i + k < n) {
                                uint8_t lo = k == 1 ? row->second_lo : 0x80, hi = k == 1 ? row->second_hi : 0xBF;
                                if (in[i + k] < lo || in[i + k] > hi)
                                        break;
                                k++;
                        }
                        used = k;
                        if (k == row->len) {
                                good = true;
                                static const uint8_t lead_mask[5] = { 0, 0x7F, 0x1F, 0x0F, 0x07 };
                                cp = in[i] & lead_mask[row->len];
                                for (size_t j = 1; j < k; j++)
                                        cp = cp * 64 + (in[i + j] & 0x3F);
                        } else if (i + k == n)
                                d.trailing_incomplete = true;
                }
                if (!good)
                        d.replaced++;
                d.cps[d.n++] = cp;
                d.bytes += ref_cp_len(cp);
                i += used;
        }
        *ret = d;
}

/* Encode cps[from, to) as UTF-8 into out (which must be large enough); returns length. */
static size_t ref_encode(const uint32_t *cps, size_t from, size_t to, char *out) {
        size_t o = 0;

        for (size_t i = from; i < to; i++) {
                uint32_t c = cps[i];
                switch (ref_cp_len(c)) {
                case 1:
                        out[o++] = (char) c;
                        break;
                case 2:
                        out[o++] = (char) (0xC0 | c >> 6);
                        out[o++] = (char) (0x80 | (c & 0x3F));
                        break;
                case 3:
                        out[o++] = (char) (0xE0 | c >> 12);
                        out[o++] = (char) (0x80 | (c >> 6 & 0x3F));
                        out[o++] = (char) (0x80 | (c & 0x3F));
                        break;
                default:
                        out[o++] = (char) (0xF0 | c >> 18);
                        out[o++] = (char) (0x80 | (c >> 12 & 0x3F));
                        out[o++] = (char) (0x80 | (c >> 6 & 0x3F));
                        out[o++] = (char) (0x80 | (c & 0x3F));
                        break;
                }
        }
        return o;
}

/* Well-formed UTF-8 (U+0000 allowed) with exactly `chars` code points. */
static void assert_valid_utf8(const char *s, size_t len, uint64_t chars) {
        RefDecoded d;

        ref_decode((const uint8_t *) s, len, &d);
        assert_int_equal(d.replaced, 0);
        assert_int_equal(d.n, chars);
        assert_int_equal(d.bytes, len);
        free(d.cps);
}

static void assert_invariants(const FitText *t) {
        assert_non_null(t->text);
        assert_int_equal(t->text[t->text_bytes], '\0');
        assert_int_equal(t->total_chars, t->text_chars + t->omitted_chars);
        assert_int_equal(t->total_bytes, (uint64_t) t->text_bytes + t->omitted_bytes);
        assert_true(t->omitted_at <= t->text_chars);
        if (t->omitted_chars == 0) {
                assert_int_equal(t->omitted_bytes, 0);
                assert_int_equal(t->omitted_at, t->text_chars);
        } else
                assert_true(t->omitted_bytes >= t->omitted_chars);
        assert_true(t->replaced <= t->total_chars);
        assert_valid_utf8(t->text, t->text_bytes, t->text_chars);
}

/* ---------------------------------------------------------------------------------------
 * Helpers */

static FitText fit_one(const void *buf, size_t len, uint64_t ceiling) {
        FitText t = {};

        assert_int_equal(fit_text_from_buffer(buf, len, ceiling, &t), 0);
        assert_invariants(&t);
        return t;
}

static FitText fit_bytewise(const void *buf, size_t len, uint64_t ceiling) {
        FitStream *s = NULL;
        FitText t = {};
        const uint8_t *p = buf;

        assert_int_equal(fit_stream_new(ceiling, &s), 0);
        for (size_t i = 0; i < len; i++)
                assert_int_equal(fit_stream_feed(s, p + i, 1), 0);
        assert_int_equal(fit_stream_finish(s, &t), 0);
        fit_stream_free(s);
        assert_invariants(&t);
        return t;
}

static FitText fit_split(const void *buf, size_t len, size_t at, uint64_t ceiling) {
        FitStream *s = NULL;
        FitText t = {};
        const uint8_t *p = buf;

        assert_int_equal(fit_stream_new(ceiling, &s), 0);
        assert_int_equal(fit_stream_feed(s, p, at), 0);
        assert_int_equal(fit_stream_feed(s, NULL, 0), 0);
        assert_int_equal(fit_stream_feed(s, p + at, len - at), 0);
        assert_int_equal(fit_stream_finish(s, &t), 0);
        fit_stream_free(s);
        assert_invariants(&t);
        return t;
}

static void assert_fit_equal(const FitText *a, const FitText *b) {
        assert_int_equal(a->text_bytes, b->text_bytes);
        assert_memory_equal(a->text, b->text, a->text_bytes + 1);
        assert_int_equal(a->text_chars, b->text_chars);
        assert_int_equal(a->total_chars, b->total_chars);
        assert_int_equal(a->total_bytes, b->total_bytes);
        assert_int_equal(a->omitted_chars, b->omitted_chars);
        assert_int_equal(a->omitted_bytes, b->omitted_bytes);
        assert_int_equal(a->replaced, b->replaced);
        assert_int_equal(a->omitted_at, b->omitted_at);
}

/* What t keeps: chars code points in bytes bytes. */
static void assert_kept(const FitText *t, uint64_t chars, size_t bytes) {
        assert_int_equal(t->text_chars, chars);
        assert_int_equal(t->text_bytes, bytes);
}

/* What t omits: chars code points of bytes bytes, cut at character at of the text. */
static void assert_omitted(const FitText *t, uint64_t chars, uint64_t bytes, uint64_t at) {
        assert_int_equal(t->omitted_chars, chars);
        assert_int_equal(t->omitted_bytes, bytes);
        assert_int_equal(t->omitted_at, at);
}

static char *repeat(const char *unit, size_t times, const char *suffix, size_t *ret_len) {
        size_t u = strlen(unit), sl = strlen(suffix);
        char *s = malloc(u * times + sl + 1);

        assert_non_null(s);
        for (size_t i = 0; i < times; i++)
                memcpy(s + i * u, unit, u);
        memcpy(s + u * times, suffix, sl + 1);
        *ret_len = u * times + sl;
        return s;
}

/* ---------------------------------------------------------------------------------------
 * ASCII and ceilings */

/* ASCII in, fitted to ceiling, keeps text with the omission at omitted_at: every count
 * follows (one byte a character, nothing replaced). */
static void check_ascii(const char *in, uint64_t ceiling, const char *text, uint64_t omitted_at) {
        FitText t = fit_one(in, strlen(in), ceiling);

        assert_string_equal(t.text, text);
        assert_kept(&t, strlen(text), strlen(text));
        assert_int_equal(t.total_chars, strlen(in));
        assert_int_equal(t.total_bytes, strlen(in));
        assert_omitted(&t, strlen(in) - strlen(text), strlen(in) - strlen(text), omitted_at);
        assert_int_equal(t.replaced, 0);
        fit_text_done(&t);
}

static void test_fit_ascii_under(void **state) {
        FitText t = fit_one("hello", 5, 10);

        check_ascii("hello", 10, "hello", 5); /* nothing omitted: the empty run is at the end */
        fit_text_done(&t);
        fit_text_done(&t); /* zeroed: harmless */
}

static void test_fit_ascii_at_ceiling(void **state) {
        check_ascii("0123456789", 10, "0123456789", 10);
        /* One more character tips it over: head 8, tail 2. */
        check_ascii("0123456789X", 10, "012345679X", 8);
}

static void test_fit_ascii_over(void **state) {
        const char *abc = "abcdefghijklmnopqrstuvwxyz";
        FitText t = fit_one(abc, 26, 8);

        check_ascii(abc, 8, "abcdefyz", 6); /* head 6, tail 2 */
        FitText b = fit_bytewise(abc, 26, 8);
        assert_fit_equal(&t, &b);
        fit_text_done(&b);
        fit_text_done(&t);
}

static void test_fit_ceiling_zero(void **state) {
        FitText t = fit_one("abc\xc3\xa9", 5, 0);

        assert_string_equal(t.text, "");
        assert_kept(&t, 0, 0);
        assert_int_equal(t.total_chars, 4);
        assert_int_equal(t.total_bytes, 5);
        assert_omitted(&t, 4, 5, 0);
        fit_text_done(&t);

        check_ascii("", 0, "", 0);
}

static void test_fit_small_ceilings(void **state) {
        /* ceiling 1: head 1, tail 0. */
        check_ascii("abc", 1, "a", 1);
        check_ascii("a", 1, "a", 1);
        /* ceiling 3: head 3, tail 0. */
        check_ascii("abcdef", 3, "abc", 3);
        /* ceiling 4: head 3, tail 1. */
        check_ascii("abcdef", 4, "abcf", 3);
        /* Empty input, huge ceiling. */
        check_ascii("", UINT64_MAX, "", 0);
        check_ascii("xyz", UINT64_MAX, "xyz", 3);
}

/* ---------------------------------------------------------------------------------------
 * Multibyte */

static void test_fit_multibyte_e_acute(void **state) {
        size_t len;
        _cleanup_free_ char *in = repeat("\xc3\xa9", 70000, "\n", &len);
        _cleanup_(fit_text_done) FitText t = fit_one(in, len, 64000);

        assert_int_equal(t.total_chars, 70001);
        assert_int_equal(t.total_bytes, 140001);
        assert_kept(&t, 64000, 48000 * 2 + 15999 * 2 + 1);
        assert_omitted(&t, 6001, 12002, 48000); /* head 48000 é, tail 15999 é + '\n' */
        assert_int_equal(t.replaced, 0);
        assert_int_equal(t.text[t.text_bytes - 1], '\n');

        /* Odd chunking splits é across feeds. */
        _cleanup_(fit_text_done) FitText b = fit_split(in, len, 12345, 64000);
        assert_fit_equal(&t, &b);
}

static void test_fit_four_byte_tail(void **state) {
        /* U+1F600 x 10 with ceiling 4: head 3, tail 1; omitted 6 x 4 bytes. */
        size_t len;
        _cleanup_free_ char *in = repeat("\xf0\x9f\x98\x80", 10, "", &len);
        _cleanup_(fit_text_done) FitText t = fit_one(in, len, 4);

        assert_kept(&t, 4, 16);
        assert_omitted(&t, 6, 24, 3);

        _cleanup_(fit_text_done) FitText b = fit_bytewise(in, len, 4);
        assert_fit_equal(&t, &b);
}

static void test_fit_nul_bytes(void **state) {
        FitText t = fit_one("a\0b\0", 4, 10);

        assert_kept(&t, 4, 4);
        assert_memory_equal(t.text, "a\0b\0", 5);
        assert_int_equal(t.replaced, 0);
        fit_text_done(&t);

        /* NULs in the tail ring too. */
        t = fit_one("\0\0\0\0\0\0\0\0x", 9, 4);
        assert_int_equal(t.text_bytes, 4);
        assert_memory_equal(t.text, "\0\0\0x", 5);
        assert_int_equal(t.omitted_chars, 5);
        fit_text_done(&t);
}

/* ---------------------------------------------------------------------------------------
 * Invalid UTF-8, checked against Python's bytes.decode("utf-8", "replace"). */

#define R "\xef\xbf\xbd" /* U+FFFD */

typedef struct InvalidCase {
        const char *in;
        size_t in_len;
        const char *out;
        size_t out_len;
        uint64_t replaced;
} InvalidCase;

#define CASE(i, o, r)                                                                                                  \
        { i, sizeof(i) - 1, o, sizeof(o) - 1, r }

static const InvalidCase invalid_cases[] = {
        /* Expected results taken from CPython 3 `b.decode("utf-8", "replace")`. */
        CASE("\x80", R, 1),       /* lone continuation */
        CASE("\xbf\x80", R R, 2), /* two lone continuations */
        CASE("a\x80z", "a" R "z", 1),
        CASE("\xc2", R, 1),       /* truncated 2-byte at end */
        CASE("\xe0\x80", R R, 2), /* E0 needs A0..BF: overlong */
        CASE("\xe0\xa0", R, 1),   /* truncated 3-byte */
        CASE("\xe0\xa0"
             "A",
             R "A", 1),
        CASE("\xe2\x82"
             "A",
             R "A", 1),
        CASE("\xf0\x90\x80", R, 1), /* truncated 4-byte at end */
        CASE("\xf0\x90\x80"
             "A",
             R "A", 1),
        CASE("\xf0\x80\x80\x80", R R R R, 4),            /* overlong 4-byte */
        CASE("\xed\xa0\x80", R R R, 3),                  /* surrogate U+D800 */
        CASE("\xed\xbf\xbf", R R R, 3),                  /* surrogate U+DFFF */
        CASE("\xed\x9f\xbf", "\xed\x9f\xbf", 0),         /* U+D7FF is fine */
        CASE("\xf4\x90\x80\x80", R R R R, 4),            /* U+110000 */
        CASE("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", 0), /* U+10FFFF is fine */
        CASE("\xc0\xaf", R R, 2),                        /* overlong '/' */
        CASE("\xc1\xbf", R R, 2),
        CASE("\xf5\x80\x80\x80", R R R R, 4), /* F5..FF never start anything */
        CASE("\xff\xfe", R R, 2),
        CASE("\xf8\x88\x80\x80\x80", R R R R R, 5),
        CASE("\xe1\x80\xe1\x80\x80", R "\xe1\x80\x80", 1), /* truncated, then valid U+1000 */
        CASE("\xe1\x80\xc3\xa9", R "\xc3\xa9", 1),
        CASE("\xf1\x80\x80\xe1\x80\xc2", R R R, 3),
        CASE("\xef\xbf\xbd", R, 0), /* a literal U+FFFD is not a substitution */
        CASE("\xc2\x41\x42", R "AB", 1),
        CASE("\xf0\x9f\x98", R, 1),
        CASE("\xf0\x9f\x98\x80\x80", "\xf0\x9f\x98\x80" R, 1),
        CASE("\x00\xc3\x00", "\x00" R "\x00", 1),
};

static void check_invalid_case(const InvalidCase *c, uint64_t ceiling) {
        FitText one = fit_one(c->in, c->in_len, ceiling);

        if (ceiling >= c->out_len) {
                assert_int_equal(one.text_bytes, c->out_len);
                assert_memory_equal(one.text, c->out, c->out_len);
        }
        assert_int_equal(one.total_bytes, c->out_len);
        assert_int_equal(one.replaced, c->replaced);

        FitText bw = fit_bytewise(c->in, c->in_len, ceiling);
        assert_fit_equal(&one, &bw);
        fit_text_done(&bw);

        for (size_t at = 0; at <= c->in_len; at++) {
                FitText sp = fit_split(c->in, c->in_len, at, ceiling);
                assert_fit_equal(&one, &sp);
                fit_text_done(&sp);
        }

        /* The reference decoder agrees as well. */
        RefDecoded d;
        ref_decode((const uint8_t *) c->in, c->in_len, &d);
        assert_int_equal(d.bytes, c->out_len);
        assert_int_equal(d.replaced, c->replaced);
        free(d.cps);

        fit_text_done(&one);
}

static void test_fit_invalid_sequences(void **state) {
        for (size_t i = 0; i < sizeof(invalid_cases) / sizeof(invalid_cases[0]); i++) {
                check_invalid_case(&invalid_cases[i], 1000);
                check_invalid_case(&invalid_cases[i], 2);
                check_invalid_case(&invalid_cases[i], 0);
        }
}

static void test_fit_invalid_concatenated(void **state) {
        /* All cases back to back, in one feed and one byte at a time. */
        char in[512], out[512];
        size_t il = 0, ol = 0;
        uint64_t replaced = 0;

        for (size_t i = 0; i < sizeof(invalid_cases) / sizeof(invalid_cases[0]); i++) {
                const InvalidCase *c = &invalid_cases[i];
                memcpy(in + il, c->in, c->in_len);
                il += c->in_len;
                memcpy(out + ol, c->out, c->out_len);
                ol += c->out_len;
                replaced += c->replaced;
                /* A separator keeps each case's truncation from joining the next case. */
                in[il++] = '|';
                out[ol++] = '|';
        }

        FitText t = fit_one(in, il, 100000);
        assert_int_equal(t.text_bytes, ol);
        assert_memory_equal(t.text, out, ol);
        assert_int_equal(t.replaced, replaced);

        FitText b = fit_bytewise(in, il, 100000);
        assert_fit_equal(&t, &b);
        fit_text_done(&b);
        fit_text_done(&t);
}

static void test_fit_truncated_at_finish(void **state) {
        FitStream *s = NULL;
        FitText t = {};

        assert_int_equal(fit_stream_new(100, &s), 0);
        assert_int_equal(fit_stream_feed(s, "abc\xe2", 4), 0);
        /* The pending partial sequence is not counted yet. */
        assert_int_equal(fit_stream_chars(s), 3);
        assert_int_equal(fit_stream_bytes(s), 3);
        assert_int_equal(fit_stream_feed(s, "\x82", 1), 0);
        assert_int_equal(fit_stream_chars(s), 3);
        assert_int_equal(fit_stream_finish(s, &t), 0);
        assert_invariants(&t);
        assert_string_equal(t.text, "abc" R);
        assert_int_equal(t.text_chars, 4);
        assert_int_equal(t.total_bytes, 6);
        assert_int_equal(t.replaced, 1);

        /* Finishing again gives the same; feeding a finished stream is refused. */
        FitText again = {};
        assert_int_equal(fit_stream_finish(s, &again), 0);
        assert_fit_equal(&t, &again);
        assert_int_equal(fit_stream_feed(s, "x", 1), -EINVAL);

        fit_text_done(&again);
        fit_text_done(&t);
        fit_stream_free(s);
        fit_stream_free(NULL);
}

static void test_fit_stream_progress(void **state) {
        FitStream *s = NULL;
        FitText t = {};

        assert_int_equal(fit_stream_new(2, &s), 0); /* head 2, tail 0 */
        assert_int_equal(fit_stream_chars(s), 0);
        assert_int_equal(fit_stream_feed(s, "\xc3\xa9\xc3", 3), 0);
        assert_int_equal(fit_stream_chars(s), 1);
        assert_int_equal(fit_stream_bytes(s), 2);
        assert_int_equal(fit_stream_feed(s, "\xa9xyz", 4), 0);
        assert_int_equal(fit_stream_chars(s), 5);
        assert_int_equal(fit_stream_bytes(s), 7);
        assert_int_equal(fit_stream_finish(s, &t), 0);
        assert_string_equal(t.text, "\xc3\xa9\xc3\xa9");
        assert_omitted(&t, 3, 3, 2);
        fit_text_done(&t);
        fit_stream_free(s);
}

static void test_fit_large_stream(void **state) {
        /* Far more input than the ceiling, in uneven chunks: counts stay exact and the
         * kept text is what a short run of the same periodic input keeps. */
        static const char unit[] = "line \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \x80\n"; /* 11 chars, 19 bytes */
        enum { REPS = 200000, COPIES = 200 };
        const size_t ul = sizeof(unit) - 1;
        size_t len;
        _cleanup_free_ char *buf = repeat(unit, COPIES, "", &len);
        FitStream *s = NULL;
        _cleanup_(fit_text_done) FitText t = {};

        assert_int_equal(ul, 17);
        assert_int_equal(fit_stream_new(1000, &s), 0);
        for (size_t fed = 0, total = ul * REPS, k = 0; fed < total; k++) {
                size_t n = T_MIN((k * 7919) % (ul * (COPIES - 1)) + 1, total - fed);
                assert_int_equal(fit_stream_feed(s, buf + fed % ul, n), 0);
                fed += n;
        }
        assert_int_equal(fit_stream_finish(s, &t), 0);
        fit_stream_free(s);
        assert_invariants(&t);

        assert_int_equal(t.total_chars, 11ULL * REPS);
        assert_int_equal(t.total_bytes, 19ULL * REPS);
        assert_int_equal(t.replaced, REPS);
        assert_int_equal(t.text_chars, 1000);
        assert_int_equal(t.omitted_chars, 11ULL * REPS - 1000);
        assert_int_equal(t.omitted_at, 750);

        _cleanup_(fit_text_done) FitText ref = fit_one(buf, len, 1000);
        assert_int_equal(ref.text_bytes, t.text_bytes);
        assert_memory_equal(ref.text, t.text, t.text_bytes);
        assert_int_equal(t.omitted_bytes - ref.omitted_bytes, 19ULL * (REPS - COPIES));
}

/* ---------------------------------------------------------------------------------------
 * Shrinking and budgets */

static void test_fit_shrink_basic(void **state) {
        size_t len;
        _cleanup_free_ char *in = repeat("\xc3\xa9", 1000, "", &len);
        _cleanup_(fit_text_done) FitText t = fit_one(in, len, 400); /* head 300 é, tail 100 é */

        assert_int_equal(t.text_bytes, 800);
        assert_int_equal(fit_text_shrink(&t, 800), 0); /* already fits */
        assert_int_equal(t.text_bytes, 800);

        assert_int_equal(fit_text_shrink(&t, 401), 0);
        assert_invariants(&t);
        assert_true(t.text_bytes <= 401);
        /* 301 / 100 byte shares, rounded down to whole é: 150 + 50 characters. */
        assert_int_equal(t.text_chars, 200);
        assert_omitted(&t, 800, 1600, 150);
        assert_int_equal(t.total_chars, 1000);

        assert_int_equal(fit_text_shrink(&t, 0), 0);
        assert_invariants(&t);
        assert_int_equal(t.text_bytes, 0);
        assert_string_equal(t.text, "");
        assert_omitted(&t, 1000, 2000, 0);
}

static void test_fit_shrink_nothing_omitted(void **state) {
        FitText t = fit_one("0123456789abcdefghij", 20, 100);

        assert_int_equal(t.omitted_at, 20);
        assert_int_equal(fit_text_shrink(&t, 8), 0);
        assert_invariants(&t);
        /* Cut from the middle, 6 : 2. */
        assert_string_equal(t.text, "012345ij");
        assert_int_equal(t.omitted_at, 6);
        assert_int_equal(t.omitted_chars, 12);
        fit_text_done(&t);
}

static void test_fit_shrink_lopsided(void **state) {
        /* ceiling 1: all kept text is head, the run is at the end; shrinking cuts the head. */
        FitText t = fit_one("abcdef", 6, 1);
        assert_int_equal(fit_text_shrink(&t, 0), 0);
        assert_invariants(&t);
        assert_int_equal(t.omitted_chars, 6);
        fit_text_done(&t);

        /* A short head leaves its unused share to the tail. */
        t = fit_one("ab", 2, 100);
        assert_int_equal(fit_text_shrink(&t, 1), 0);
        assert_invariants(&t);
        assert_string_equal(t.text, "a");
        fit_text_done(&t);
}

static void check_budget_sizes(size_t a, size_t b, size_t c, size_t budget, size_t ea, size_t eb, size_t ec) {
        char *buf = malloc(T_MAX(a, T_MAX(b, c)) + 1);
        FitText ta, tb, tc;

        assert_non_null(buf);
        memset(buf, 'x', T_MAX(a, T_MAX(b, c)));
        ta = fit_one(buf, a, UINT64_MAX);
        tb = fit_one(buf, b, UINT64_MAX);
        tc = fit_one(buf, c, UINT64_MAX);

        FitText *const texts[] = { &ta, NULL, &tb, &tc };
        assert_int_equal(fit_texts_to_budget(texts, 4, budget), 0);
        assert_invariants(&ta);
        assert_invariants(&tb);
        assert_invariants(&tc);
        assert_int_equal(ta.text_bytes, ea);
        assert_int_equal(tb.text_bytes, eb);
        assert_int_equal(tc.text_bytes, ec);
        assert_int_equal(ta.total_bytes, a);
        assert_int_equal(tb.total_bytes, b);
        assert_int_equal(tc.total_bytes, c);

        fit_text_done(&ta);
        fit_text_done(&tb);
        fit_text_done(&tc);
        free(buf);
}

static void test_fit_texts_to_budget(void **state) {
        /* Fits already: untouched. */
        check_budget_sizes(100, 1000, 5000, 10000, 100, 1000, 5000);
        /* Level 950: the small one is untouched. */
        check_budget_sizes(100, 1000, 5000, 2000, 100, 950, 950);
        /* Level 1000 with nothing to spare: only the largest gives. */
        check_budget_sizes(100, 1000, 5000, 2100, 100, 1000, 1000);
        check_budget_sizes(100, 1000, 5000, 3000, 100, 1000, 1900);
        /* Remainder goes to the first texts above the level: 1001 = 333 * 3 + 2. */
        check_budget_sizes(500, 500, 500, 1001, 334, 334, 333);
        /* Zero budget empties everything. */
        check_budget_sizes(100, 1000, 5000, 0, 0, 0, 0);

        assert_int_equal(fit_texts_to_budget(NULL, 0, 0), 0);
}

/* ---------------------------------------------------------------------------------------
 * Randomized property test */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void) {
        /* xorshift64* */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545F4914F6CDD1DULL;
}

static size_t rng_below(size_t n) {
        return n == 0 ? 0 : (size_t) (rng() % n);
}

static size_t random_input(uint8_t *out, size_t max) {
        static const uint8_t interesting[] = {
                0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFE, 0xFF,
        };
        size_t len = rng_below(max + 1), n = 0;

        while (n < len) {
                switch (rng_below(5)) {
                case 0:
                        out[n++] = (uint8_t) rng_below(0x80);
                        break;
                case 1:
                        out[n++] = interesting[rng_below(sizeof(interesting))];
                        break;
                case 2:
                        out[n++] = (uint8_t) rng();
                        break;
                default: {
                        /* A valid character (sometimes with its end chopped off). */
                        uint32_t cp;
                        do
                                cp = (uint32_t) rng_below(0x110000);
                        while (cp >= 0xD800 && cp <= 0xDFFF);
                        char enc[4];
                        size_t el = ref_encode(&cp, 0, 1, enc);
                        if (rng_below(4) == 0)
                                el = rng_below(el) + 1;
                        for (size_t i = 0; i < el && n < len; i++)
                                out[n++] = (uint8_t) enc[i];
                        break;
                }
                }
        }
        return n;
}

static void test_fit_random(void **state) {
        enum { ITER = 4000, MAXLEN = 300 };
        uint8_t in[MAXLEN];
        char expect[MAXLEN * 3 + 1];

        for (int iter = 0; iter < ITER; iter++) {
                size_t len = random_input(in, MAXLEN);
                uint64_t ceiling;
                switch (rng_below(8)) {
                case 0:
                        ceiling = rng_below(5);
                        break;
                case 1:
                        ceiling = UINT64_MAX - rng_below(3);
                        break;
                default:
                        ceiling = rng_below(len + 5);
                        break;
                }

                RefDecoded d;
                ref_decode(in, len, &d);

                /* Feed in random chunks, checking the progress counters on the way. */
                FitStream *s = NULL;
                assert_int_equal(fit_stream_new(ceiling, &s), 0);
                size_t fed = 0;
                while (fed < len) {
                        size_t n = rng_below(len - fed + 1);
                        if (rng_below(3) == 0)
                                n = T_MIN(n, 3);
                        assert_int_equal(fit_stream_feed(s, in + fed, n), 0);
                        fed += n;

                        RefDecoded pd;
                        ref_decode(in, fed, &pd);
                        assert_int_equal(fit_stream_chars(s), pd.n - pd.trailing_incomplete);
                        assert_int_equal(fit_stream_bytes(s), pd.bytes - 3 * pd.trailing_incomplete);
                        free(pd.cps);
                }
                FitText t = {};
                assert_int_equal(fit_stream_finish(s, &t), 0);
                fit_stream_free(s);
                assert_invariants(&t);

                /* Against the reference: head + tail of the fully decoded text. */
                uint64_t tail = ceiling / 4, head = ceiling - tail;
                size_t h, tl;
                if (d.n <= ceiling) {
                        h = d.n;
                        tl = 0;
                } else {
                        h = (size_t) head;
                        tl = (size_t) tail;
                }
                size_t el = ref_encode(d.cps, 0, h, expect);
                el += ref_encode(d.cps, d.n - tl, d.n, expect + el);

                assert_int_equal(t.total_chars, d.n);
                assert_int_equal(t.total_bytes, d.bytes);
                assert_int_equal(t.replaced, d.replaced);
                assert_kept(&t, h + tl, el);
                assert_memory_equal(t.text, expect, el);
                assert_int_equal(t.omitted_chars, d.n - h - tl);
                assert_int_equal(t.omitted_at, d.n - h - tl > 0 ? h : h + tl);

                /* One feed gives the same. */
                FitText one = fit_one(in, len, ceiling);
                assert_fit_equal(&t, &one);
                fit_text_done(&one);

                /* Shrink: still head + tail of the decoded text, the run only widens. */
                if (t.text_bytes > 0) {
                        uint64_t old_at = t.omitted_at, old_tail = t.text_chars - t.omitted_at;
                        bool had_run = t.omitted_chars > 0;
                        size_t max_bytes = rng_below(t.text_bytes);

                        assert_int_equal(fit_text_shrink(&t, max_bytes), 0);
                        assert_invariants(&t);
                        assert_true(t.text_bytes <= max_bytes);
                        assert_true(t.text_bytes + 6 >= max_bytes);
                        assert_true(t.omitted_chars > 0);
                        assert_int_equal(t.total_chars, d.n);
                        assert_int_equal(t.total_bytes, d.bytes);

                        size_t a = (size_t) t.omitted_at, b = (size_t) (t.text_chars - t.omitted_at);
                        if (had_run) {
                                assert_true(a <= old_at);
                                assert_true(b <= old_tail);
                        }
                        el = ref_encode(d.cps, 0, a, expect);
                        el += ref_encode(d.cps, d.n - b, d.n, expect + el);
                        assert_int_equal(t.text_bytes, el);
                        assert_memory_equal(t.text, expect, el);
                }

                fit_text_done(&t);
                free(d.cps);
        }
}

static void test_fit_random_budget(void **state) {
        enum { ITER = 1000, MAXLEN = 300 };
        uint8_t in[MAXLEN];

        for (int iter = 0; iter < ITER; iter++) {
                FitText t[3];
                size_t orig[3], sum = 0;

                for (int i = 0; i < 3; i++) {
                        size_t len = random_input(in, MAXLEN);
                        t[i] = fit_one(in, len, rng_below(len + 5));
                        orig[i] = t[i].text_bytes;
                        sum += orig[i];
                }
                size_t budget = rng_below(sum + 10);
                FitText *const texts[] = { &t[0], &t[1], &t[2] };
                assert_int_equal(fit_texts_to_budget(texts, 3, budget), 0);

                size_t after = 0, max_untouched = 0, min_shrunk_orig = SIZE_MAX, min_shrunk_final = SIZE_MAX;
                for (int i = 0; i < 3; i++) {
                        assert_invariants(&t[i]);
                        after += t[i].text_bytes;
                        if (t[i].text_bytes == orig[i])
                                max_untouched = T_MAX(max_untouched, orig[i]);
                        else {
                                min_shrunk_orig = T_MIN(min_shrunk_orig, orig[i]);
                                min_shrunk_final = T_MIN(min_shrunk_final, t[i].text_bytes);
                        }
                }
                assert_true(after <= budget || (sum <= budget && after == sum));
                if (min_shrunk_orig != SIZE_MAX) {
                        /* Largest first, and nobody is cut far below the others' level. */
                        assert_true(max_untouched <= min_shrunk_orig);
                        assert_true(min_shrunk_final + 6 >= max_untouched);
                        assert_true(after + 6 * 3 >= budget);
                }

                for (int i = 0; i < 3; i++)
                        fit_text_done(&t[i]);
        }
}

static void test_fit_bad_args(void **state) {
        FitStream *s = NULL;

        assert_int_equal(fit_stream_new(10, NULL), -EINVAL);
        assert_int_equal(fit_stream_new(10, &s), 0);
        assert_int_equal(fit_stream_feed(s, NULL, 1), -EINVAL);
        assert_int_equal(fit_stream_finish(s, NULL), -EINVAL);
        fit_stream_free(s);
        assert_int_equal(fit_text_from_buffer("x", 1, 1, NULL), -EINVAL);
        assert_int_equal(fit_text_shrink(NULL, 0), -EINVAL);
        fit_text_done(NULL);
}

UNIT_MAIN(NULL, NULL, TEST(test_fit_ascii_under), TEST(test_fit_ascii_at_ceiling), TEST(test_fit_ascii_over),
          TEST(test_fit_ceiling_zero), TEST(test_fit_small_ceilings), TEST(test_fit_multibyte_e_acute),
          TEST(test_fit_four_byte_tail), TEST(test_fit_nul_bytes), TEST(test_fit_invalid_sequences),
          TEST(test_fit_invalid_concatenated), TEST(test_fit_truncated_at_finish), TEST(test_fit_stream_progress),
          TEST(test_fit_large_stream), TEST(test_fit_shrink_basic), TEST(test_fit_shrink_nothing_omitted),
          TEST(test_fit_shrink_lopsided), TEST(test_fit_texts_to_budget), TEST(test_fit_random),
          TEST(test_fit_random_budget), TEST(test_fit_bad_args))
