/* SPDX-License-Identifier: MIT */
#include "unit.h"

#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"

static const char msg448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char msg896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                             "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

static void hex_of_chunked(const void *data, size_t len, const size_t *chunks, size_t n_chunks, char hex[65]) {
        const uint8_t *p = data;
        Sha256 s;
        uint8_t digest[32];
        size_t i = 0;

        sha256_init(&s);
        while (len > 0) {
                size_t c = chunks[i++ % n_chunks];
                if (c > len)
                        c = len;
                sha256_update(&s, p, c);
                p += c;
                len -= c;
        }
        sha256_final(&s, digest);
        sha256_to_hex(digest, hex);
}

static void test_sha256_empty(void **state) {
        char hex[65];

        sha256_hex("", 0, hex);
        assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        sha256_hex(NULL, 0, hex);
        assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_sha256_abc(void **state) {
        char hex[65];

        sha256_hex("abc", 3, hex);
        assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_sha256_448(void **state) {
        char hex[65];

        assert_int_equal(strlen(msg448), 56);
        sha256_hex(msg448, strlen(msg448), hex);
        assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_sha256_896(void **state) {
        char hex[65];

        assert_int_equal(strlen(msg896), 112);
        sha256_hex(msg896, strlen(msg896), hex);
        assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_sha256_million_a(void **state) {
        static const char expect[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
        char hex[65];
        char *a = malloc(1000000);

        assert_non_null(a);
        memset(a, 'a', 1000000);

        sha256_hex(a, 1000000, hex);
        assert_string_equal(hex, expect);

        /* The classic form: 1000 updates of 1000 bytes. */
        Sha256 s;
        uint8_t digest[32];
        sha256_init(&s);
        for (int i = 0; i < 1000; i++)
                sha256_update(&s, a, 1000);
        assert_int_equal(s.length, 1000000);
        sha256_final(&s, digest);
        sha256_to_hex(digest, hex);
        assert_string_equal(hex, expect);

        free(a);
}

/* Lengths around the padding boundaries (55/56 bytes: length fits / does not fit). */
static void test_sha256_padding_edges(void **state) {
        static const struct {
                size_t len;
                const char *hex;
        } v[] = {
                { 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
                { 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
                { 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34" },
                { 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
        };
        char a[64], hex[65];

        memset(a, 'a', sizeof(a));
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                sha256_hex(a, v[i].len, hex);
                assert_string_equal(hex, v[i].hex);
        }
}

static void test_sha256_incremental(void **state) {
        /* bytes(range(256)) * 5, hashed in odd chunk patterns. */
        static const char expect[] = "d414b085826eb06778483ba35564dc849e643359f69ed9747878ba6e54985bed";
        static const size_t pat1[] = { 1 };
        static const size_t pat2[] = { 3, 5, 7, 11, 13 };
        static const size_t pat3[] = { 63, 1, 65, 0, 127, 2 };
        static const size_t pat4[] = { 64 };
        static const size_t pat5[] = { 17, 200, 9, 31 };
        static const size_t pat6[] = { 1280 };
        uint8_t data[1280];
        char hex[65];

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t) (i & 0xff);

        sha256_hex(data, sizeof(data), hex);
        assert_string_equal(hex, expect);

#define CHECK_PATTERN(p)                                                                                               \
        do {                                                                                                           \
                hex_of_chunked(data, sizeof(data), p, sizeof(p) / sizeof(p[0]), hex);                                  \
                assert_string_equal(hex, expect);                                                                      \
        } while (0)
        CHECK_PATTERN(pat1);
        CHECK_PATTERN(pat2);
        CHECK_PATTERN(pat3);
        CHECK_PATTERN(pat4);
        CHECK_PATTERN(pat5);
        CHECK_PATTERN(pat6);
#undef CHECK_PATTERN

        /* The 896-bit vector in odd pieces. */
        hex_of_chunked(msg896, strlen(msg896), pat2, sizeof(pat2) / sizeof(pat2[0]), hex);
        assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_sha256_reuse_after_init(void **state) {
        Sha256 s;
        uint8_t d1[32], d2[32];

        sha256_init(&s);
        sha256_update(&s, "garbage", 7);
        sha256_final(&s, d1);

        sha256_init(&s);
        sha256_update(&s, "abc", 3);
        sha256_final(&s, d2);

        char hex[65];
        sha256_to_hex(d2, hex);
        assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_memory_not_equal(d1, d2, 32);
}

UNIT_MAIN(NULL, NULL, TEST(test_sha256_empty), TEST(test_sha256_abc), TEST(test_sha256_448), TEST(test_sha256_896),
          TEST(test_sha256_million_a), TEST(test_sha256_padding_edges), TEST(test_sha256_incremental),
          TEST(test_sha256_reuse_after_init))
