/* SPDX-License-Identifier: MIT */
/* Request decoding and validation (supervisor/protocol.c) and the msgpack
 * pre-validator (common/mp.c), on hand-built frames. */
#include "proto_result.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/mp.h"
#include "supervisor/protocol.h"

static Policy policy;

static int setup(void **state) {
        policy_init_defaults(&policy);
        return 0;
}

/* Build a map from alternating key / value-spec arguments:
 *   "s:text" string, "u:123" uint, "b:" bytes "x", "a:N" array of N valid source ids,
 *   "A" array given by the next argument (NULL-terminated char ** list of strings). */
static void pack_request(msgpack_sbuffer *sb, int n, ...) {
        msgpack_packer pk;
        va_list ap;

        msgpack_sbuffer_init(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, (size_t) n);
        va_start(ap, n);
        for (int i = 0; i < n; i++) {
                const char *key = va_arg(ap, const char *);
                const char *spec = va_arg(ap, const char *);
                mp_pack_cstr(&pk, key);
                if (spec[0] == 's')
                        mp_pack_cstr(&pk, spec + 2);
                else if (spec[0] == 'u')
                        msgpack_pack_uint64(&pk, strtoull(spec + 2, NULL, 10));
                else if (spec[0] == 'b') {
                        msgpack_pack_bin(&pk, 1);
                        msgpack_pack_bin_body(&pk, "x", 1);
                } else if (spec[0] == 'A') {
                        const char *const *list = va_arg(ap, const char *const *);
                        size_t len = 0;
                        while (list[len])
                                len++;
                        msgpack_pack_array(&pk, len);
                        for (size_t j = 0; j < len; j++)
                                mp_pack_cstr(&pk, list[j]);
                } else if (spec[0] == 'n')
                        msgpack_pack_nil(&pk);
        }
        va_end(ap);
}

static int decode(const msgpack_sbuffer *sb, ProtoRequest *req, ProtoError *err) {
        return proto_decode_request(sb->data, sb->size, &policy, req, err);
}

static void decoded_done(ProtoRequest *req, msgpack_sbuffer *sb) {
        proto_request_done(req);
        msgpack_sbuffer_destroy(sb);
}

static const char *const no_ids[] = { NULL };

static void expect_invalid(msgpack_sbuffer *sb, const char *needle) {
        ProtoRequest req;
        ProtoError err;
        assert_int_equal(decode(sb, &req, &err), -EINVAL);
        assert_int_equal(err.code, OUTCOME_INVALID_INPUT);
        if (needle && !strstr(err.message, needle))
                fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
        msgpack_sbuffer_destroy(sb);
}

static void test_execute_ok(void **state) {
        static const char *const ids[] = { "northstar", "a.b-c_1", NULL };
        msgpack_sbuffer sb;
        ProtoRequest req;
        ProtoError err;

        pack_request(&sb, 6, "op", "s:execute", "id", "u:7", "summary", "s:mean", "code", "s:sum([9.0, 7.5]) / 2",
                     "sourceIds", "A", ids, "invocation", "s:0123456789abcdef0123456789abcdef");
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_int_equal(req.op, PROTO_OP_EXECUTE);
        assert_int_equal(req.id, 7);
        assert_int_equal(req.code_chars, 19);
        assert_int_equal(req.n_source_ids, 2);
        assert_memory_equal(req.source_ids[1].ptr, "a.b-c_1", 7);
        assert_int_equal(req.invocation.len, 32);
        decoded_done(&req, &sb);
}

static void test_execute_rejections(void **state) {
        static const char *const five[] = { "a", "b", "c", "d", "e", NULL };
        static const char *const dup[] = { "a", "b", "a", NULL };
        static const char *const bad[][2] = { { "../x", NULL }, { "a/b", NULL }, { ".hidden", NULL }, { "", NULL },
                                              { "-x", NULL },   { "é", NULL },   { "a b", NULL } };
        msgpack_sbuffer sb;

        pack_request(&sb, 4, "op", "s:execute", "id", "u:1", "summary", "s:x", "sourceIds", "A", no_ids);
        expect_invalid(&sb, "code");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:", "sourceIds", "A", no_ids);
        expect_invalid(&sb, "empty");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s: \n\t ", "sourceIds", "A",
                     no_ids);
        expect_invalid(&sb, "empty");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "b:", "sourceIds", "A", no_ids);
        expect_invalid(&sb, "string");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "u:5", "sourceIds", "A", no_ids);
        expect_invalid(&sb, "string");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", five);
        expect_invalid(&sb, "at most 4");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", dup);
        expect_invalid(&sb, "repeats");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A",
                             bad[i]);
                expect_invalid(&sb, "not a valid source ID");
        }
        pack_request(&sb, 4, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1");
        expect_invalid(&sb, "sourceIds");
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "s:a");
        expect_invalid(&sb, "array");
        /* The fields the caller may never set. */
        static const char *const forbidden[] = { "packages", "cwd", "env", "network", "timeoutMs", "paths" };
        for (size_t i = 0; i < ELEMENTSOF(forbidden); i++) {
                pack_request(&sb, 6, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A",
                             no_ids, forbidden[i], "s:x");
                expect_invalid(&sb, forbidden[i]);
        }
}

static void test_code_characters(void **state) {
        Policy saved = policy;
        msgpack_sbuffer sb;
        ProtoRequest req;
        ProtoError err;

        policy.max_code_characters = 10;
        /* 10 two-byte characters: 20 bytes, 10 characters: accepted. */
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:éééééééééé", "sourceIds", "A",
                     no_ids);
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_int_equal(req.code_chars, 10);
        decoded_done(&req, &sb);
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:ééééééééééé", "sourceIds",
                     "A", no_ids);
        expect_invalid(&sb, "maxCodeCharacters");
        /* Invalid UTF-8 in a string is not text. */
        pack_request(&sb, 5, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:a\xff", "sourceIds", "A",
                     no_ids);
        expect_invalid(&sb, "UTF-8");
        policy = saved;
}

static void test_envelope(void **state) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        ProtoRequest req;
        ProtoError err;

        pack_request(&sb, 1, "op", "s:hello");
        expect_invalid(&sb, "id");
        pack_request(&sb, 2, "op", "s:frobnicate", "id", "u:9");
        assert_int_equal(decode(&sb, &req, &err), -EINVAL);
        assert_true(err.has_id);
        assert_int_equal(err.id, 9);
        assert_non_null(strstr(err.message, "unknown op"));
        msgpack_sbuffer_destroy(&sb);
        pack_request(&sb, 3, "op", "s:hello", "id", "u:1", "op", "s:hello");
        expect_invalid(&sb, "duplicate");
        pack_request(&sb, 2, "op", "s:hello", "id", "u:1");
        assert_int_equal(decode(&sb, &req, &err), 0);
        proto_request_done(&req);
        /* Trailing bytes after the map. */
        msgpack_sbuffer_write(&sb, "\x01", 1);
        expect_invalid(&sb, "trailing");
        /* Not a map. */
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 0);
        expect_invalid(&sb, "map");
        /* Empty frame, garbage. */
        msgpack_sbuffer_init(&sb);
        expect_invalid(&sb, "msgpack");
        msgpack_sbuffer_init(&sb);
        msgpack_sbuffer_write(&sb, "\xc1\xc1", 2);
        expect_invalid(&sb, "msgpack");
}

static void test_source_put(void **state) {
        msgpack_sbuffer sb;
        ProtoRequest req;
        ProtoError err;

        pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:runtimes", "kind",
                     "s:read_source", "text", "s:A,9\nB,7.5\n");
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_false(req.attachment);
        decoded_done(&req, &sb);
        pack_request(&sb, 9, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:wb", "kind",
                     "s:attachment", "text", "s:A,9", "original", "b:", "mediaType", "s:text/csv", "fileName",
                     "s:wb.csv");
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_true(req.attachment);
        assert_int_equal(req.original.len, 1);
        decoded_done(&req, &sb);
        pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:../x", "kind",
                     "s:read_source", "text", "s:x");
        expect_invalid(&sb, "sourceId");
        pack_request(&sb, 7, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:x", "kind",
                     "s:read_source", "text", "s:x", "original", "b:");
        expect_invalid(&sb, "attachments only");
        pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:x", "kind",
                     "s:file", "text", "s:x");
        expect_invalid(&sb, "kind");
        pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", "s:x", "kind",
                     "s:read_source", "path", "s:/etc/passwd");
        expect_invalid(&sb, "path");
}

static void test_mp_validate(void **state) {
        static const struct {
                const char *bytes;
                size_t len;
                int ok;
        } cases[] = {
                { "\x80", 1, 1 },                                      /* {} */
                { "\x81\xa1k\x01", 4, 1 },                             /* {"k": 1} */
                { "\x81\xa1k", 3, 0 },                                 /* value missing */
                { "\xdd\x7f\xff\xff\xff", 5, 0 },                      /* array32 of 2^31 elements in 5 bytes */
                { "\xdf\x00\x00\x00\x10", 5, 0 },                      /* map32 of 16 pairs, nothing behind */
                { "\xdb\xff\xff\xff\xff", 5, 0 },                      /* str32 longer than the frame */
                { "\xc1", 1, 0 },                                      /* never-used byte */
                { "\x91\x91\x91\x91\x91\x91\x91\x91\x91\x01", 10, 0 }, /* 9 deep > 8 */
                { "\x91\x91\x91\x91\x91\x91\x91\x91\x01", 9, 1 },      /* 8 deep */
                { "\xd4\x01\x02", 3, 1 },                              /* fixext1 */
                { "\xc7\x02\x01\xaa\xbb", 5, 1 },                      /* ext8 */
                { "\xc7\x05\x01\xaa", 4, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t end = 0;
                int r = mp_validate(cases[i].bytes, cases[i].len, 8, &end);
                if ((r == 0) != cases[i].ok)
                        fail_msg("case %zu: got %d", i, r);
                if (r == 0)
                        assert_int_equal(end, cases[i].len);
        }
}

/* Random mutations of valid frames never crash and never leak (ASan in CI). */
static void test_mutations(void **state) {
        static const char *const ids[] = { "a", "b", NULL };
        msgpack_sbuffer sb;
        unsigned seed = 12345;

        pack_request(&sb, 6, "op", "s:execute", "id", "u:7", "summary", "s:mean", "code", "s:sum([9.0, 7.5]) / 2",
                     "sourceIds", "A", ids, "invocation", "s:0123456789abcdef0123456789abcdef");
        for (int i = 0; i < 20000; i++) {
                uint8_t buf[256];
                size_t len = sb.size < sizeof buf ? sb.size : sizeof buf;
                ProtoRequest req;
                ProtoError err;

                memcpy(buf, sb.data, len);
                for (int m = 0; m < 1 + (int) (rand_r(&seed) % 4); m++)
                        buf[rand_r(&seed) % len] = (uint8_t) rand_r(&seed);
                if (rand_r(&seed) % 5 == 0)
                        len = rand_r(&seed) % (len + 1);
                if (proto_decode_request(buf, len, &policy, &req, &err) == 0)
                        proto_request_done(&req);
                else
                        assert_true(err.message[0] != 0);
        }
        msgpack_sbuffer_destroy(&sb);
}

/* The tool schema's source-id pattern (PROTO_SOURCE_ID_PATTERN, also a POSIX ERE) accepts
 * exactly what proto_source_id_valid() accepts: every string of up to 3 characters over an
 * alphabet with every class of character, and the length bounds. */
static void test_source_id_pattern(void **state) {
        static const char alphabet[] = "aZ9_.-/ é";
        const size_t n = sizeof alphabet - 1;
        char s[80];
        regex_t re;

        assert_int_equal(regcomp(&re, PROTO_SOURCE_ID_PATTERN, REG_EXTENDED | REG_NOSUB), 0);
        for (size_t len = 1; len <= 3; len++) {
                size_t count = 1;
                for (size_t i = 0; i < len; i++)
                        count *= n;
                for (size_t v = 0; v < count; v++) {
                        size_t x = v;
                        for (size_t i = 0; i < len; i++, x /= n)
                                s[i] = alphabet[x % n];
                        s[len] = 0;
                        assert_int_equal(regexec(&re, s, 0, NULL, 0) == 0, proto_source_id_valid(s, len));
                }
        }
        memset(s, 'a', sizeof s);
        for (size_t len = 60; len < sizeof s; len++) {
                s[len] = 0;
                assert_int_equal(regexec(&re, s, 0, NULL, 0) == 0, proto_source_id_valid(s, len));
                s[len] = 'a';
        }
        regfree(&re);
}

/* A result with artifacts over maxResultBytes: kept whole in name order while they fit,
 * a later smaller one still comes, the rest counted exactly; the message fits. */
static Artifact make_artifact(const char *name, size_t len) {
        Artifact a = { .name = strdup(name), .media_type = "application/octet-stream", .len = len };
        a.data = malloc(len);
        assert_non_null(a.name);
        assert_non_null(a.data);
        memset(a.data, 'x', len);
        strcpy(a.sha256, "0000000000000000000000000000000000000000000000000000000000000000");
        return a;
}

static void pack_with(ArtifactSet *set, size_t max_bytes, msgpack_unpacked *u, MpWriter *w) {
        ProtoResult r = { PROTO_RESULT_OK, .artifacts = set };

        pack_result(&r, max_bytes, w, u);
        assert_true(w->sb.size <= max_bytes);
}

static void test_artifacts_fitting(void **state) {
        ArtifactSet set = { .items = calloc(3, sizeof(Artifact)), .n = 3, .omitted = 1, .omitted_bytes = 7 };
        msgpack_unpacked u;
        MpWriter w;
        const msgpack_object *arr;
        (void) state;

        assert_non_null(set.items);
        set.items[0] = make_artifact("a", 30000);
        set.items[1] = make_artifact("b", 30000);
        set.items[2] = make_artifact("c", 100);
        pack_with(&set, 40000, &u, &w);
        arr = mp_map_get(&u.data, "artifacts");
        assert_int_equal(arr->via.array.size, 2);
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[0], "name"), "a"));
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[1], "name"), "c"));
        assert_int_equal(mp_map_get(&arr->via.array.ptr[0], "data")->via.bin.size, 30000);
        assert_int_equal(mp_map_get(&u.data, "omittedArtifacts")->via.u64, 2);
        assert_int_equal(mp_map_get(&u.data, "omittedArtifactBytes")->via.u64, 7 + 30000);
        packed_done(&w, &u);

        /* Fitting changed the set (b is counted now); at 8 KiB a goes too, c stays. */
        assert_int_equal(set.n, 2);
        pack_with(&set, 8192, &u, &w);
        arr = mp_map_get(&u.data, "artifacts");
        assert_int_equal(arr->via.array.size, 1);
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[0], "name"), "c"));
        assert_int_equal(mp_map_get(&u.data, "omittedArtifacts")->via.u64, 3);
        assert_int_equal(mp_map_get(&u.data, "omittedArtifactBytes")->via.u64, 7 + 60000);
        packed_done(&w, &u);
        artifact_set_done(&set);

        /* No /outputs: nil and zero counts. */
        pack_with(NULL, 8192, &u, &w);
        assert_int_equal(mp_map_get(&u.data, "artifacts")->type, MSGPACK_OBJECT_NIL);
        assert_int_equal(mp_map_get(&u.data, "omittedArtifacts")->via.u64, 0);
        packed_done(&w, &u);
}

#define INV "s:0123456789abcdef0123456789abcdef"

static void test_keep_outputs(void **state) {
        static const char *const names[] = { "clean.csv", "plot.png", NULL };
        static const char *const dup[] = { "a", "b", "a", NULL };
        static const char *const seventeen[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i",
                                                 "j", "k", "l", "m", "n", "o", "p", "q", NULL };
        static const char *const sixteen[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i",
                                               "j", "k", "l", "m", "n", "o", "p", NULL };
        static const char *const bad[][2] = { { "", NULL },   { "a/b", NULL }, { ".x", NULL },
                                              { "-x", NULL }, { "é", NULL },   { "a b", NULL } };
        /* out-1- and 58 characters make a 64-character ID: the longest name; 59 is not. */
        static const char *const longest[] = { "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn", NULL };
        static const char *const too_long[] = { "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn", NULL };
        msgpack_sbuffer sb;
        ProtoRequest req;
        ProtoError err;
        (void) state;

        /* Absent: nothing requested. */
        pack_request(&sb, 6, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV);
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_false(req.keep_requested);
        assert_int_equal(req.n_keep, 0);
        decoded_done(&req, &sb);
        /* Names, in order. */
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", names);
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_true(req.keep_requested);
        assert_false(req.keep_all);
        assert_int_equal(req.n_keep, 2);
        assert_int_equal(req.keep[1].len, 8);
        assert_memory_equal(req.keep[1].ptr, "plot.png", 8);
        decoded_done(&req, &sb);
        /* "all"; an empty array; sixteen names; the longest name. */
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "s:all");
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_true(req.keep_requested && req.keep_all);
        decoded_done(&req, &sb);
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", no_ids);
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_true(req.keep_requested && !req.keep_all && req.n_keep == 0);
        decoded_done(&req, &sb);
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", sixteen);
        assert_int_equal(decode(&sb, &req, &err), 0);
        assert_int_equal(req.n_keep, 16);
        decoded_done(&req, &sb);
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", longest);
        assert_int_equal(decode(&sb, &req, &err), 0);
        decoded_done(&req, &sb);

        /* Without an invocation. */
        pack_request(&sb, 6, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "keepOutputs", "s:all");
        expect_invalid(&sb, "needs an \"invocation\"");
        pack_request(&sb, 6, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "keepOutputs", "A", names);
        expect_invalid(&sb, "needs an \"invocation\"");
        /* Not "all" or an array; too many; repeated; names that cannot be kept. */
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "s:ALL");
        expect_invalid(&sb, "must be \"all\" or an array");
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "u:1");
        expect_invalid(&sb, "must be \"all\" or an array");
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "n");
        expect_invalid(&sb, "must be \"all\" or an array");
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", seventeen);
        expect_invalid(&sb, "at most 16");
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", dup);
        expect_invalid(&sb, "keepOutputs[2] repeats keepOutputs[0]");
        pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A", no_ids,
                     "invocation", INV, "keepOutputs", "A", too_long);
        expect_invalid(&sb, "keepOutputs[0] is not a name that can be kept");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                pack_request(&sb, 7, "op", "s:execute", "id", "u:1", "summary", "s:x", "code", "s:1", "sourceIds", "A",
                             no_ids, "invocation", INV, "keepOutputs", "A", bad[i]);
                expect_invalid(&sb, "keepOutputs[0] is not a name that can be kept");
        }
        /* keepOutputs is an execute field only. */
        pack_request(&sb, 4, "op", "s:invocation.close", "id", "u:1", "invocation", INV, "keepOutputs", "s:all");
        expect_invalid(&sb, "keepOutputs");
}

static void test_out_prefix_reserved(void **state) {
        static const char *const ids[] = { "out-", "out-1-x.csv", "out-anything", NULL };
        msgpack_sbuffer sb;
        ProtoRequest req;
        ProtoError err;
        (void) state;

        for (size_t i = 0; ids[i]; i++) {
                char spec[80];
                snprintf(spec, sizeof spec, "s:%s", ids[i]);
                pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", spec, "kind",
                             "s:read_source", "text", "s:x");
                expect_invalid(&sb, "reserved for kept outputs");
        }
        /* Only the exact prefix is reserved. */
        static const char *const fine[] = { "s:out", "s:output", "s:Out-1-x", "s:outs-1", NULL };
        for (size_t i = 0; fine[i]; i++) {
                pack_request(&sb, 6, "op", "s:source.put", "id", "u:1", "invocation", "s:00", "sourceId", fine[i],
                             "kind", "s:read_source", "text", "s:x");
                assert_int_equal(decode(&sb, &req, &err), 0);
                decoded_done(&req, &sb);
        }
}

static void test_kept_outputs_packed(void **state) {
        static const char sha_a[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        ProtoKept kept[] = PROTO_KEPT_ONE_REFUSED_ONE("clean.csv", "out-2-clean.csv", 42, sha_a, "big.bin");
        ProtoSourceInfo src = { .id = "out-1-raw.csv",
                                .output = true,
                                .produced_by = 1,
                                .text_bytes = 9,
                                .text_sha256 = sha_a,
                                .media_type = "text/csv" };
        ProtoResult r = {
                PROTO_RESULT_OK, .sources = &src, .n_sources = 1, .has_kept = true, .kept = kept, .n_kept = 2,
        };
        const msgpack_object *arr, *in, *by;
        msgpack_unpacked u;
        MpWriter w;
        (void) state;

        pack_result(&r, 1 << 20, &w, &u);
        arr = mp_map_get(&u.data, "keptOutputs");
        assert_non_null(arr);
        assert_int_equal(arr->type, MSGPACK_OBJECT_ARRAY);
        assert_int_equal(arr->via.array.size, 2);
        assert_int_equal(arr->via.array.ptr[0].via.map.size, 4);
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[0], "name"), "clean.csv"));
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[0], "sourceId"), "out-2-clean.csv"));
        assert_int_equal(mp_map_get(&arr->via.array.ptr[0], "bytes")->via.u64, 42);
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[0], "sha256"), sha_a));
        assert_int_equal(arr->via.array.ptr[1].via.map.size, 2);
        assert_true(mp_str_eq(mp_map_get(&arr->via.array.ptr[1], "refused"), "max_source_bytes"));
        in = &mp_map_get(mp_map_get(&u.data, "evidence"), "inputs")->via.array.ptr[0];
        assert_int_equal(in->via.map.size, 6);
        assert_true(mp_str_eq(mp_map_get(in, "kind"), "output"));
        assert_true(mp_str_eq(mp_map_get(in, "mediaType"), "text/csv"));
        by = mp_map_get(in, "producedBy");
        assert_non_null(by);
        assert_int_equal(mp_map_get(by, "call")->via.u64, 1);
        assert_true(mp_str_eq(mp_map_get(by, "sha256"), sha_a));
        packed_done(&w, &u);

        /* Not requested: nil. */
        r.has_kept = false;
        r.n_sources = 0;
        pack_result(&r, 1 << 20, &w, &u);
        assert_int_equal(mp_map_get(&u.data, "keptOutputs")->type, MSGPACK_OBJECT_NIL);
        packed_done(&w, &u);

        /* Every refusal has a wire name of its own. */
        for (int i = 0; i < _PROTO_KEEP_MAX; i++) {
                assert_non_null(proto_keep_refusal_to_string((ProtoKeepRefusal) i));
                for (int j = 0; j < i; j++)
                        assert_string_not_equal(proto_keep_refusal_to_string((ProtoKeepRefusal) i),
                                                proto_keep_refusal_to_string((ProtoKeepRefusal) j));
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_execute_ok),          cmocka_unit_test(test_execute_rejections),
                cmocka_unit_test(test_code_characters),     cmocka_unit_test(test_envelope),
                cmocka_unit_test(test_source_put),          cmocka_unit_test(test_mp_validate),
                cmocka_unit_test(test_mutations),           cmocka_unit_test(test_source_id_pattern),
                cmocka_unit_test(test_artifacts_fitting),   cmocka_unit_test(test_keep_outputs),
                cmocka_unit_test(test_out_prefix_reserved), cmocka_unit_test(test_kept_outputs_packed),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
