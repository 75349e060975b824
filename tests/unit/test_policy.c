/* SPDX-License-Identifier: MIT */
/* Policy: defaults, a full overlay, every error class, the digest, the shipped
 * example file, and random mutations (run under ASan/UBSan). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"

#include "common/cleanup.h"
#include "common/sha256.h"
#include "policy/policy.h"

#ifndef CODEINTERP_SOURCE_DIR
#error "compile with -DCODEINTERP_SOURCE_DIR=\"/path/to/source\""
#endif

/* The documented keys and ranges (docs/policy.md). `companion` is prepended to the
 * document when loading the bound values, to satisfy the cross-key checks; `alt` is
 * a valid non-default value for the key alone on top of the defaults. */
typedef struct TestKey {
        const char *key;
        bool integer;
        uint64_t min, max;
        const char *companion;
        const char *alt;
} TestKey;

static const TestKey test_keys[] = {
        { "name", false, 0, 0, NULL, "other.profile-2" },
        { "maxCalls", true, 1, 100000, "", "5" },
        { "timeoutMs", true, 1, 86400000, "", "1000" },
        { "maxCodeCharacters", true, 1, 10000000, "maxMessageBytes: 1073741824\n", "1000" },
        { "maxOutputCharacters", true, 0, 100000000, "", "100" },
        { "maxResultBytes", true, 4096, 1073741824, "maxConnectionOutputBytes: 1073741824\n", "65536" },
        { "memoryBytes", true, 16777216, 1099511627776, "", "268435456" },
        { "cpuSeconds", true, 1, 86400, "", "5" },
        { "maxFileBytes", true, 0, 1099511627776, "", "0" },
        { "maxOpenFiles", true, 16, 65536, "", "32" },
        { "maxProcesses", true, 1, 4096, "", "1" },
        { "tmpBytes", true, 4096, 1099511627776, "", "4096" },
        { "maxArtifacts", true, 0, 4096, "", "0" },
        { "maxArtifactBytes", true, 4096, 1073741824, "", "65536" },
        { "workerUid", true, 1, 4294967294, "", "1000" },
        { "workerGid", true, 1, 4294967294, "", "1000" },
        { "seccompDenyAction", false, 0, 0, NULL, "kill" },
        { "maxMessageBytes", true, 8192, 1073741824, "maxCodeCharacters: 1\nmaxSourceBytes: 1\n", "16777216" },
        { "maxWorkerMessageBytes", true, 4096, 1073741824, "", "65536" },
        { "maxConnections", true, 1, 65536, "maxConnectionsPerPeer: 1\n", "32" },
        { "maxConnectionOutputBytes", true, 4096, 1099511627776, "maxResultBytes: 4096\n", "1048576" },
        { "allowedUids", false, 0, 0, NULL, "[1000]" },
        { "allowedGids", false, 0, 0, NULL, "[100, 0]" },
        { "socketGroup", false, 0, 0, NULL, "4242" },
        { "maxInvocationsPerConnection", true, 1, 4096, "", "1" },
        { "maxSourcesPerInvocation", true, 0, 65536, "", "0" },
        { "maxSourceBytes", true, 1, 536870912, "maxMessageBytes: 1073741824\nmaxInvocationBytes: 1073741824\n",
          "1024" },
        { "maxInvocationBytes", true, 1, 1099511627776, "maxSourceBytes: 1\n", "67108864" },
        { "invocationIdleTtlMs", true, 1000, 604800000, "", "60000" },
        { "maxActiveWorkers", true, 0, 4096, "", "2" },
        { "maxQueuedCalls", true, 0, 1000000, "", "0" },
        { "heartbeatMs", true, 10, 600000, "", "500" },
        { "minAvailableMemoryBytes", true, 0, 1099511627776, "", "1073741824" },
        { "workerStart", false, 0, 0, NULL, "exec" },
        { "zygoteMaxCalls", true, 1, 10000000, "", "1" },
        { "zygoteMaxSeconds", true, 1, 604800, "", "60" },
        { "zygotePoolSize", true, 0, 64, "", "4" },
        { "idleExitSeconds", true, 0, 604800, "", "30" },
        { "cgroups", false, 0, 0, NULL, "off" },
        { "cpuBandwidthPercent", true, 0, 102400, "", "20" },
        { "pythonPackages", false, 0, 0, NULL, "[numpy]" },
        { "workerHostIdBase", true, 1, 4294967294, "workerHostIdCount: 1\n", "3000000000" },
        { "workerHostIdCount", true, 1, 1048576, "", "16" },
        { "unreadyAfterStartFailures", true, 0, 1000000, "", "0" },
        { "maxConnectionsPerPeer", true, 1, 65536, "maxConnections: 65536\n", "4" },
        { "connectionIdleTimeoutMs", true, 100, 604800000, "", "1000" },
};

/* Every key, non-default, mutually consistent; flow and block styles, comments, quoting. */
static const char full_doc[] = "# every key overridden\n"
                               "name: \"test-profile.v2\"\n"
                               "maxCalls: 5\n"
                               "timeoutMs: 12345\n"
                               "maxCodeCharacters: 1000\n"
                               "maxOutputCharacters: 500\n"
                               "maxResultBytes: 65536\n"
                               "memoryBytes: 268435456   # 256 MiB\n"
                               "cpuSeconds: 7\n"
                               "maxFileBytes: 1048576\n"
                               "maxOpenFiles: 128\n"
                               "maxProcesses: 8\n"
                               "tmpBytes: 8388608\n"
                               "maxArtifacts: 4\n"
                               "maxArtifactBytes: 1048576\n"
                               "workerUid: 1234\n"
                               "workerGid: 4321\n"
                               "seccompDenyAction: kill\n"
                               "maxMessageBytes: 2097152\n"
                               "maxWorkerMessageBytes: 524288\n"
                               "maxConnections: 8\n"
                               "maxConnectionOutputBytes: 4194304\n"
                               "allowedUids: [1000, 1001]\n"
                               "allowedGids:\n"
                               "  - 100\n"
                               "  - 200\n"
                               "  - 300\n"
                               "socketGroup: 4242\n"
                               "maxInvocationsPerConnection: 4\n"
                               "maxSourcesPerInvocation: 8\n"
                               "maxSourceBytes: 1048576\n"
                               "maxInvocationBytes: 2097152\n"
                               "invocationIdleTtlMs: 60000\n"
                               "maxActiveWorkers: 3\n"
                               "maxQueuedCalls: 32\n"
                               "heartbeatMs: 250\n"
                               "minAvailableMemoryBytes: 1073741824\n"
                               "workerStart: 'exec'\n"
                               "zygoteMaxCalls: 500\n"
                               "zygoteMaxSeconds: 600\n"
                               "zygotePoolSize: 5\n"
                               "idleExitSeconds: 90\n"
                               "cgroups: required\n"
                               "cpuBandwidthPercent: 50\n"
                               "pythonPackages: [matplotlib, numpy]\n"
                               "workerHostIdBase: 3000000000\n"
                               "workerHostIdCount: 1024\n"
                               "unreadyAfterStartFailures: 7\n"
                               "maxConnectionsPerPeer: 2\n"
                               "connectionIdleTimeoutMs: 5000\n";

/* Byte copies, so that "unchanged" can be checked with memcmp, padding included. */
static void policy_copy(Policy *dst, const Policy *src) {
        memcpy(dst, src, sizeof(*dst));
}

static int load(Policy *p, const char *doc, char *err, size_t errlen) {
        return policy_load_string(p, doc, strlen(doc), err, errlen);
}

static bool is_hex64(const char *s) {
        if (strlen(s) != 64)
                return false;
        for (size_t i = 0; i < 64; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* The integer fields of a Policy: the reviewed profile's value (policy_init_defaults) and
 * full_doc's, written out here rather than read from policy.c's key table. FULL_ONLY:
 * checked in the full document only. */
typedef struct FieldValues {
        const char *name;
        size_t offset, size;
        bool has_default;
        uint64_t def, full;
} FieldValues;

#define FIELD(f, d, v)                                                                                                 \
        { #f, offsetof(Policy, f), sizeof(((Policy *) NULL)->f), true, d, v }
#define FULL_ONLY(f, v)                                                                                                \
        { #f, offsetof(Policy, f), sizeof(((Policy *) NULL)->f), false, 0, v }

static const FieldValues field_values[] = {
        FIELD(max_calls, 10, 5),
        FIELD(timeout_ms, 30000, 12345),
        FIELD(max_code_characters, 20000, 1000),
        FIELD(max_output_characters, 64000, 500),
        FIELD(max_result_bytes, 262144, 65536),
        FIELD(memory_bytes, 536870912, 268435456),
        FIELD(cpu_seconds, 30, 7),
        FIELD(file_bytes, 16777216, 1048576),
        FIELD(open_files, 64, 128),
        FIELD(processes, 64, 8),
        FIELD(tmp_bytes, 16777216, 8388608),
        FULL_ONLY(max_artifacts, 4),
        FULL_ONLY(max_artifact_bytes, 1048576),
        FIELD(worker_uid, 65534, 1234),
        FIELD(worker_gid, 65534, 4321),
        FULL_ONLY(worker_host_id_base, 3000000000U),
        FULL_ONLY(worker_host_id_count, 1024),
        FULL_ONLY(cpu_bandwidth_percent, 50),
        FIELD(seccomp_deny, POLICY_DENY_ERRNO, POLICY_DENY_KILL),
        FIELD(max_message_bytes, 8388608, 2097152),
        FIELD(max_worker_message_bytes, 1048576, 524288),
        FIELD(max_connections, 64, 8),
        FIELD(max_connection_output_bytes, 16777216, 4194304),
        FIELD(n_allowed_uids, 0, 2),
        FIELD(n_allowed_gids, 0, 3),
        FIELD(has_socket_group, false, true),
        FULL_ONLY(socket_group, 4242),
        FIELD(max_invocations_per_connection, 16, 4),
        FIELD(max_sources_per_invocation, 64, 8),
        FIELD(max_source_bytes, 4194304, 1048576),
        FIELD(max_invocation_bytes, 33554432, 2097152),
        FIELD(invocation_ttl_ms, 3600000, 60000),
        FIELD(max_active_workers, 0, 3),
        FIELD(max_queued_calls, 256, 32),
        FIELD(heartbeat_ms, 1000, 250),
        FIELD(min_available_memory_bytes, 0, 1073741824),
        FIELD(worker_start, POLICY_WORKER_START_ZYGOTE, POLICY_WORKER_START_EXEC),
        FIELD(zygote_max_calls, 10000, 500),
        FIELD(zygote_max_seconds, 3600, 600),
        FULL_ONLY(zygote_pool_size, 5),
        FULL_ONLY(idle_exit_seconds, 90),
        FIELD(unready_after_start_failures, 3, 7),
        FIELD(max_connections_per_peer, 16, 2),
        FIELD(connection_idle_timeout_ms, 30000, 5000),
        FULL_ONLY(python_packages,
                  POLICY_PACKAGE_BIT(POLICY_PACKAGE_NUMPY) | POLICY_PACKAGE_BIT(POLICY_PACKAGE_MATPLOTLIB)),
};

static uint64_t field_get(const Policy *p, const FieldValues *f) {
        const uint8_t *at = (const uint8_t *) p + f->offset;
        uint32_t u32;
        uint16_t u16;
        uint64_t u64;

        switch (f->size) {
        case 1:
                return *at;
        case 2:
                memcpy(&u16, at, sizeof u16);
                return u16;
        case 4:
                memcpy(&u32, at, sizeof u32);
                return u32;
        case 8:
                memcpy(&u64, at, sizeof u64);
                return u64;
        }
        fail_msg("%s: a field of %zu bytes", f->name, f->size);
        return 0;
}

/* Every field of field_values has its default (defaults) or its full_doc value. */
static void assert_fields(const Policy *p, bool defaults) {
        for (size_t i = 0; i < ELEMENTSOF(field_values); i++) {
                const FieldValues *f = &field_values[i];
                uint64_t got, want = defaults ? f->def : f->full;

                if (defaults && !f->has_default)
                        continue;
                got = field_get(p, f);
                if (got != want)
                        fail_msg("%s is %" PRIu64 ", not %" PRIu64, f->name, got, want);
        }
}

static void test_defaults(void **state) {
        Policy p;

        policy_init_defaults(&p);

        /* The reviewed profile. */
        assert_string_equal(p.name, "code_interpreter");
        assert_fields(&p, true);
        assert_true(is_hex64(p.sha256));
}

/* The defaults must pass the loader's own checks: an empty overlay is accepted and changes nothing. */
static void test_empty_documents(void **state) {
        static const char *const docs[] = {
                "", "\n\n", "# only a comment\n", "# one\n\n   # two\n", "---\n", "---\n...\n", "--- # c\n", "{}\n",
        };
        Policy d, p;
        char err[256];

        policy_init_defaults(&d);
        for (size_t i = 0; i < ELEMENTSOF(docs); i++) {
                policy_copy(&p, &d);
                assert_int_equal(load(&p, docs[i], err, sizeof(err)), 0);
                assert_string_equal(err, "");
                assert_string_equal(p.sha256, d.sha256);
                assert_string_equal(p.name, "code_interpreter");
        }

        policy_copy(&p, &d);
        assert_int_equal(policy_load_string(&p, NULL, 0, err, sizeof(err)), 0);
        assert_string_equal(p.sha256, d.sha256);
}

static void test_full_override(void **state) {
        Policy p, d;
        char err[256];

        policy_init_defaults(&d);
        policy_copy(&p, &d);
        assert_int_equal(load(&p, full_doc, err, sizeof(err)), 0);

        assert_string_equal(p.name, "test-profile.v2");
        assert_fields(&p, false);
        assert_int_equal(p.allowed_uids[0], 1000);
        assert_int_equal(p.allowed_uids[1], 1001);
        assert_int_equal(p.allowed_gids[0], 100);
        assert_int_equal(p.allowed_gids[1], 200);
        assert_int_equal(p.allowed_gids[2], 300);

        assert_true(is_hex64(p.sha256));
        assert_string_not_equal(p.sha256, d.sha256);
        assert_int_equal(policy_active_workers(&p), 3);

        /* Every documented key appears in the full document. */
        for (size_t i = 0; i < ELEMENTSOF(test_keys); i++) {
                char needle[64];
                snprintf(needle, sizeof(needle), "\n%s:", test_keys[i].key);
                assert_non_null(strstr(full_doc, needle));
        }
}

/* A second document overlays the first: keys it doesn't name keep their values. */
static void test_overlay(void **state) {
        Policy p;
        char err[256];

        policy_init_defaults(&p);
        assert_int_equal(load(&p, "maxCalls: 3\nallowedUids: [1, 2]\n", err, sizeof(err)), 0);
        assert_int_equal(load(&p, "timeoutMs: 500\nallowedUids: []\n", err, sizeof(err)), 0);
        assert_int_equal(p.max_calls, 3);
        assert_int_equal(p.timeout_ms, 500);
        assert_int_equal(p.n_allowed_uids, 0);
        assert_int_equal(p.max_code_characters, 20000);
}

/* Quoting is allowed for strings; keys may be quoted; flow mappings are mappings. */
static void test_styles(void **state) {
        Policy p;
        char err[256];

        policy_init_defaults(&p);
        assert_int_equal(load(&p, "{\"maxCalls\": 7, name: 'a.b_c-9', seccompDenyAction: \"kill\"}", err, sizeof(err)),
                         0);
        assert_int_equal(p.max_calls, 7);
        assert_string_equal(p.name, "a.b_c-9");
        assert_int_equal(p.seccomp_deny, POLICY_DENY_KILL);

        /* Maximum name length: 63. */
        policy_init_defaults(&p);
        assert_int_equal(
                load(&p, "name: 123456789012345678901234567890123456789012345678901234567890123\n", err, sizeof(err)),
                0);
        assert_int_equal(strlen(p.name), 63);

        /* 32 peers is the maximum. */
        policy_init_defaults(&p);
        assert_int_equal(load(&p,
                              "allowedUids: [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,"
                              "27,28,29,30,4294967294]\n",
                              err, sizeof(err)),
                         0);
        assert_int_equal(p.n_allowed_uids, 32);
        assert_int_equal(p.allowed_uids[31], 4294967294u);

        /* A socket group by name. */
        {
                struct group *g = getgrgid(getgid());
                if (g && g->gr_name && strlen(g->gr_name) < 200) {
                        char doc[256];
                        snprintf(doc, sizeof(doc), "socketGroup: %s\n", g->gr_name);
                        policy_init_defaults(&p);
                        if (strspn(g->gr_name, "0123456789") != strlen(g->gr_name)) {
                                assert_int_equal(load(&p, doc, err, sizeof(err)), 0);
                                assert_true(p.has_socket_group);
                                assert_int_equal(p.socket_group, getgid());
                        }
                }
        }
}

/* k at value (with its companion keys) loads; what names the bound in a failure. */
static void bound_accepted(const Policy *d, const TestKey *k, uint64_t value, const char *what) {
        char doc[512], err[256];
        Policy p;

        snprintf(doc, sizeof(doc), "%s%s: %" PRIu64 "\n", k->companion, k->key, value);
        policy_copy(&p, d);
        if (load(&p, doc, err, sizeof(err)) != 0)
                fail_msg("%s of %s rejected: %s", what, k->key, err);
}

/* k at value is refused, naming the key, and the policy is untouched. */
static void bound_refused(const Policy *d, const TestKey *k, uint64_t value) {
        char doc[512], err[256];
        Policy p;

        snprintf(doc, sizeof(doc), "%s: %" PRIu64 "\n", k->key, value);
        policy_copy(&p, d);
        assert_int_equal(load(&p, doc, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, k->key));
        assert_non_null(strstr(err, "out of range"));
        assert_memory_equal(&p, d, sizeof(p));
}

static void test_ranges(void **state) {
        Policy d;

        policy_init_defaults(&d);
        for (size_t i = 0; i < ELEMENTSOF(test_keys); i++) {
                const TestKey *k = &test_keys[i];

                if (!k->integer)
                        continue;
                /* Both bounds are accepted; one past either is refused. */
                bound_accepted(&d, k, k->min, "min");
                bound_accepted(&d, k, k->max, "max");
                if (k->min > 0)
                        bound_refused(&d, k, k->min - 1);
                bound_refused(&d, k, k->max + 1);
        }
}

typedef struct ErrorCase {
        const char *doc;
        size_t len; /* 0: strlen(doc) */
        const char *want1;
        const char *want2;
} ErrorCase;

static const ErrorCase error_cases[] = {
        /* unknown and duplicate keys */
        { "maxCalls: 5\nbogusKey: 1\n", 0, "line 2:", "unknown key 'bogusKey'" },
        { "maxcalls: 5\n", 0, "line 1:", "unknown key 'maxcalls'" },
        { "\"maxCalls\\0x\": 5\n", 0, "line 1:", "unknown key 'maxCalls?x'" },
        { "maxCalls: 5\ntimeoutMs: 100\nmaxCalls: 6\n", 0, "line 3: maxCalls:", "duplicate key (first set on line 1)" },
        { "allowedUids: []\nallowedUids: []\n", 0, "line 2: allowedUids:", "duplicate" },
        /* wrong types */
        { "timeoutMs: [1, 2]\n", 0, "line 1: timeoutMs:", "got a sequence" },
        { "timeoutMs:\n  a: 1\n", 0, "line 2: timeoutMs:", "got a mapping" },
        { "name: [a]\n", 0, "name:", "got a sequence" },
        { "seccompDenyAction: {a: b}\n", 0, "seccompDenyAction:", "got a mapping" },
        { "allowedUids: 1000\n", 0, "allowedUids:", "expected a sequence" },
        { "allowedUids:\n", 0, "allowedUids:", "expected a sequence" },
        { "allowedUids: [[1]]\n", 0, "allowedUids:", "got a sequence" },
        { "allowedGids: [{a: 1}]\n", 0, "allowedGids:", "got a mapping" },
        { "socketGroup: [1]\n", 0, "socketGroup:", "got a sequence" },
        { "? [a]\n: 1\n", 0, "line 1:", "expected a key, got a sequence" },
        { "maxCalls: 5\n? {a: 1}\n: 1\n", 0, "line 2:", "after key maxCalls" },
        /* malformed integers */
        { "maxCalls: -1\n", 0, "maxCalls:", "expected a decimal integer, got '-1'" },
        { "maxCalls: +5\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 0x10\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 1e3\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 1_0\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 010\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 00\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 1.5\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: 5 5\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls:\n", 0, "maxCalls:", "got ''" },
        { "maxCalls: ~\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: null\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: true\n", 0, "maxCalls:", "decimal integer" },
        { "maxCalls: \"10\"\n", 0, "maxCalls:", "quoted" },
        { "maxCalls: '10'\n", 0, "maxCalls:", "quoted" },
        { "maxCalls: |\n  10\n", 0, "maxCalls:", "quoted" },
        { "allowedUids: [-1]\n", 0, "allowedUids:", "decimal integer" },
        { "allowedUids: [\"1\"]\n", 0, "allowedUids:", "quoted" },
        /* overflow and range */
        { "maxCalls: 99999999999999999999999999\n", 0, "maxCalls:", "out of range" },
        { "memoryBytes: 18446744073709551616\n", 0, "memoryBytes:", "out of range" },
        { "memoryBytes: 18446744073709551615\n", 0, "memoryBytes:", "out of range" },
        { "maxCalls: 4294967306\n", 0, "maxCalls:", "out of range" },
        { "workerUid: 0\n", 0, "workerUid:", "out of range 1..4294967294" },
        { "workerGid: 0\n", 0, "workerGid:", "out of range" },
        { "workerHostIdBase: 0\n", 0, "workerHostIdBase:", "out of range" },
        { "workerHostIdBase: 4294967000\n", 0, "workerHostIdCount", "must be at most 4294967295" },
        { "allowedUids: [4294967295]\n", 0, "allowedUids:", "out of range" },
        { "allowedGids: [1, 2, 1]\n", 0, "allowedGids:", "duplicate entry 1" },
        { "allowedUids: [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]\n",
          0, "allowedUids:", "more than 32 entries" },
        { "socketGroup: 4294967295\n", 0, "socketGroup:", "out of range" },
        /* strings and enums */
        { "name: \"\"\n", 0, "name:", "1..63 characters" },
        { "name:\n", 0, "name:", "1..63 characters" },
        { "name: 1234567890123456789012345678901234567890123456789012345678901234\n", 0, "name:", "1..63" },
        { "name: a b\n", 0, "name:", "outside [A-Za-z0-9_.-]" },
        { "name: \"a/b\"\n", 0, "name:", "outside" },
        { "name: \"a\\nb\"\n", 0, "name:", "'a?b'" },
        { "name: \"a\\0b\"\n", 0, "name:", "outside" },
        { "name: \"\xc3\xa9t\xc3\xa9\"\n", 0, "name:", "outside" },
        { "seccompDenyAction: maybe\n", 0, "seccompDenyAction:", "expected errno or kill, got 'maybe'" },
        { "seccompDenyAction: Errno\n", 0, "seccompDenyAction:", "expected errno or kill" },
        { "seccompDenyAction: errno2\n", 0, "seccompDenyAction:", "expected errno or kill" },
        { "workerStart: fork\n", 0, "workerStart:", "expected exec or zygote" },
        { "workerStart: \"\"\n", 0, "workerStart:", "expected exec or zygote" },
        { "cgroups: v3\n", 0, "cgroups:", "expected auto, required or off" },
        { "pythonPackages: numpy\n", 0, "pythonPackages:", "expected a sequence of package names, got a scalar" },
        { "pythonPackages: [torch]\n", 0, "pythonPackages:",
          "'torch' is not in the allow-list (numpy, pandas, matplotlib, scipy, sklearn, statsmodels, sympy, seaborn, "
          "openpyxl, tabulate)" },
        { "pythonPackages: [pip]\n", 0, "pythonPackages:", "'pip' is not in the allow-list" },
        { "pythonPackages: [numpy, numpy]\n", 0, "pythonPackages:", "duplicate entry numpy" },
        { "pythonPackages: [[numpy]]\n", 0, "pythonPackages:", "expected a package name, got a sequence" },
        { "pythonPackages: [Numpy]\n", 0, "pythonPackages:", "'Numpy' is not in the allow-list" },
        { "socketGroup: no-such-group-zq9\n", 0, "socketGroup:", "unknown group 'no-such-group-zq9'" },
        { "socketGroup: \"bad name\"\n", 0, "socketGroup:", "invalid group name" },
        { "socketGroup: -x\n", 0, "socketGroup:", "invalid group name" },
        { "socketGroup:\n", 0, "socketGroup:", "invalid group name" },
        /* anchors, aliases, tags */
        { "maxCalls: &a 5\n", 0, "maxCalls:", "anchors are not allowed" },
        { "maxCalls: 5\ntimeoutMs: *a\n", 0, "line 2: timeoutMs:", "aliases are not allowed" },
        { "maxCalls: !!int 5\n", 0, "maxCalls:", "tags are not allowed" },
        { "name: !local x\n", 0, "name:", "tags are not allowed" },
        { "allowedUids: !!seq [1]\n", 0, "allowedUids:", "tags" },
        { "allowedUids: [&x 1]\n", 0, "allowedUids:", "anchors" },
        { "allowedUids: &l [1]\n", 0, "allowedUids:", "anchors" },
        { "maxCalls: 5\n&k timeoutMs: 5\n", 0, "line 2: timeoutMs:", "anchors are not allowed" },
        { "maxCalls: 5\n!!str timeoutMs: 5\n", 0, "line 2: timeoutMs:", "tags are not allowed" },
        { "maxCalls: 5\n*k : 5\n", 0, "line 2:", "aliases are not allowed (after key maxCalls)" },
        { "!!map\nmaxCalls: 5\n", 0, "line 1:", "tags are not allowed" },
        { "&root\nmaxCalls: 5\n", 0, "line 1:", "anchors are not allowed" },
        /* document shape */
        { "- a\n- b\n", 0, "line 1:", "must be a mapping" },
        { "hello\n", 0, "line 1:", "must be a mapping" },
        { "~\n", 0, "line 1:", "must be a mapping" },
        { "maxCalls: 5\n---\ntimeoutMs: 5\n", 0, "line 2:", "only one YAML document" },
        { "---\n---\n", 0, "line 2:", "only one YAML document" },
        /* YAML syntax errors */
        { "maxCalls: 5\nallowedUids: [1,\n", 0, "YAML syntax error", "after key allowedUids" },
        { "maxCalls: 5\n  timeoutMs: 1\n", 0, "line 1: maxCalls:", "got '5 timeoutMs'" },
        { "maxCalls: 5\n timeoutMs: 1\nname: x\n", 0, "line 1: maxCalls:", "decimal integer" },
        { "maxCalls: 5\nname: [x\ntimeoutMs: 1\n", 0, "name:", "" },
        { "maxCalls: 5\n\tname: x\n", 0, "line 2:", "YAML syntax error" },
        { "maxCalls: \"5\n", 0, "YAML syntax error", "after key maxCalls" },
        { "maxCalls: 5\nname: x\n\xff\n", 0, "line 3:", "YAML syntax error" },
        { "maxCalls: 5\n\0", 13, "line 2:", "YAML syntax error" },
        { "maxCalls: 5\ntimeoutMs: 7: 8\n", 0, "line 2:", "after key timeoutMs" },
        { "{maxCalls: 5", 0, "YAML syntax error", "after key maxCalls" },
        /* cross-key checks */
        { "maxCodeCharacters: 5000000\n", 0, "line 1: maxCodeCharacters:", "maxMessageBytes" },
        { "maxMessageBytes: 1048576\n", 0, "line 1: maxMessageBytes:", "maxSourceBytes" },
        { "maxMessageBytes: 65536\n", 0, "line 1: maxMessageBytes:", "maxCodeCharacters" },
        { "maxSourceBytes: 67108864\nmaxMessageBytes: 1073741824\n", 0,
          "line 1: maxSourceBytes:", "maxInvocationBytes" },
        { "maxInvocationBytes: 1024\n", 0, "line 1: maxInvocationBytes:", "maxSourceBytes" },
        { "maxConnectionOutputBytes: 65536\n", 0, "line 1: maxConnectionOutputBytes:", "maxResultBytes" },
        { "maxResultBytes: 33554432\n", 0, "line 1: maxResultBytes:", "maxConnectionOutputBytes" },
        { "maxConnectionsPerPeer: 100\n", 0,
          "line 1: maxConnectionsPerPeer:", "maxConnectionsPerPeer (100) must be at most maxConnections" },
        { "maxConnectionsPerPeer: 4\ntimeoutMs: 5\nmaxConnections: 3\n", 0,
          "line 3: maxConnections:", "maxConnectionsPerPeer (4) must be at most maxConnections (3)" },
        { "connectionIdleTimeoutMs: 99\n", 0, "connectionIdleTimeoutMs:", "out of range 100..604800000" },
};

static void check_error_case(const Policy *before, const ErrorCase *c) {
        size_t len = c->len ?: strlen(c->doc);
        char err[256];
        Policy p;
        int r;

        policy_copy(&p, before);
        memset(err, 'X', sizeof(err));
        r = policy_load_string(&p, c->doc, len, err, sizeof(err));
        if (r != -EINVAL)
                fail_msg("document %s: expected -EINVAL, got %d (%s)", c->doc, r, err);
        if (!strstr(err, c->want1) || (c->want2 && !strstr(err, c->want2)))
                fail_msg("document %s: message '%s' lacks '%s' / '%s'", c->doc, err, c->want1, c->want2);
        assert_null(strchr(err, '\n'));
        assert_memory_equal(&p, before, sizeof(p));
}

static void test_errors(void **state) {
        Policy d, f;
        char err[256];

        policy_init_defaults(&d);
        policy_copy(&f, &d);
        assert_int_equal(load(&f, full_doc, err, sizeof(err)), 0);

        /* Against the defaults and against a non-default policy: never modified. */
        for (size_t i = 0; i < ELEMENTSOF(error_cases); i++) {
                check_error_case(&d, &error_cases[i]);
                /* The full profile lowers maxMessageBytes, so the cross checks name different keys there. */
                if (!strstr(error_cases[i].want1, "Bytes:") && !strstr(error_cases[i].want1, "Characters:"))
                        check_error_case(&f, &error_cases[i]);
        }
        /* A file that lowers maxConnections below the default maxConnectionsPerPeer and does
         * not set that: the share is the whole (a file from before the key still loads). */
        {
                Policy q;
                char e[256];
                policy_copy(&q, &d);
                assert_int_equal(
                        policy_load_string(&q, "maxConnections: 8\n", strlen("maxConnections: 8\n"), e, sizeof e), 0);
                assert_int_equal(q.max_connections_per_peer, 8);
        }
}

/* A valid prefix followed by an error leaves no partial update behind. */
static void test_atomic(void **state) {
        Policy d, p;
        char err[256];

        policy_init_defaults(&d);
        policy_copy(&p, &d);
        assert_int_equal(load(&p, "maxCalls: 3\nname: changed\nallowedUids: [5]\nbogus: 1\n", err, sizeof(err)),
                         -EINVAL);
        assert_memory_equal(&p, &d, sizeof(p));
        assert_int_equal(p.max_calls, 10);
}

static void test_err_buffer(void **state) {
        Policy d, p;
        char small[12];

        policy_init_defaults(&d);
        policy_copy(&p, &d);
        assert_int_equal(load(&p, "bogusKeyWithALongName: 1\n", NULL, 0), -EINVAL);
        assert_memory_equal(&p, &d, sizeof(p));

        memset(small, 'X', sizeof(small));
        assert_int_equal(load(&p, "bogusKeyWithALongName: 1\n", small, sizeof(small)), -EINVAL);
        assert_int_equal(strlen(small), sizeof(small) - 1);
        assert_string_equal(small, "line 1: unk");

        memset(small, 'X', sizeof(small));
        assert_int_equal(load(&p, "bogusKeyWithALongName: 1\n", small, 1), -EINVAL);
        assert_int_equal(small[0], '\0');
        assert_int_equal(small[1], 'X');
}

static void test_too_large(void **state) {
        _cleanup_free_ char *big = NULL;
        size_t n = 1024 * 1024 + 1;
        Policy d, p;
        char err[256];

        big = malloc(n);
        assert_non_null(big);
        memset(big, '\n', n);
        policy_init_defaults(&d);
        policy_copy(&p, &d);
        assert_int_equal(policy_load_string(&p, big, n, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "larger than"));
        assert_memory_equal(&p, &d, sizeof(p));
        /* Just below the limit: only blank lines, accepted. */
        assert_int_equal(policy_load_string(&p, big, n - 1, err, sizeof(err)), 0);
}

/* The canonical form, spelled out: a change here changes every policy digest. */
/* A reload keeps the running value of every key read only at start, names it, and
 * recomputes the digest; the other keys take the new values. */
static void test_keep_restart_keys(void **state) {
        const char *changed[POLICY_MAX_RESTART_KEYS];
        Policy running, p, want;
        char err[256];

        policy_init_defaults(&running);
        policy_copy(&p, &running);
        assert_int_equal(policy_keep_restart_keys(&p, &running, changed), 0);
        assert_memory_equal(&p, &running, sizeof p);

        assert_int_equal(load(&p, full_doc, err, sizeof(err)), 0);
        assert_int_equal(policy_keep_restart_keys(&p, &running, changed), 12);
        assert_string_equal(changed[0], "workerUid");
        assert_string_equal(changed[1], "workerGid");
        assert_string_equal(changed[2], "socketGroup");
        assert_string_equal(changed[3], "workerStart");
        assert_string_equal(changed[4], "zygoteMaxCalls");
        assert_string_equal(changed[5], "zygoteMaxSeconds");
        assert_string_equal(changed[6], "zygotePoolSize");
        assert_string_equal(changed[7], "cgroups");
        assert_string_equal(changed[8], "cpuBandwidthPercent");
        assert_int_equal(p.cpu_bandwidth_percent, 0);
        assert_string_equal(changed[9], "pythonPackages");
        assert_int_equal(p.python_packages, 0);
        assert_string_equal(changed[10], "workerHostIdBase");
        assert_string_equal(changed[11], "workerHostIdCount");
        assert_int_equal(p.cgroups, running.cgroups);
        assert_int_equal(p.worker_uid, running.worker_uid);
        assert_int_equal(p.worker_start, running.worker_start);
        assert_false(p.has_socket_group);
        assert_int_equal(p.zygote_pool_size, running.zygote_pool_size);
        /* The reloadable keys keep the file's values, and the digest is that of what is in effect. */
        assert_int_equal(p.timeout_ms, 12345);
        assert_int_equal(p.idle_exit_seconds, 90);
        policy_copy(&want, &p);
        policy_finalize(&want);
        assert_string_equal(p.sha256, want.sha256);
        assert_true(policy_key_needs_restart("workerStart"));
        assert_false(policy_key_needs_restart("timeoutMs"));
        assert_false(policy_key_needs_restart("idleExitSeconds"));
        assert_true(policy_key_needs_restart("cpuBandwidthPercent"));
        assert_false(policy_key_needs_restart("unreadyAfterStartFailures"));
        assert_int_equal(p.unready_after_start_failures, 7);
}

static void test_snapshot(void **state) {
        PolicySnapshot *s = NULL, *r;
        Policy p;

        policy_init_defaults(&p);
        assert_int_equal(policy_snapshot_new(&p, &s), 0);
        assert_int_equal(s->n_ref, 1);
        r = policy_snapshot_ref(s);
        assert_ptr_equal(r, s);
        assert_int_equal(s->n_ref, 2);
        assert_string_equal(s->policy.sha256, p.sha256);
        assert_null(policy_snapshot_unref(s));
        assert_int_equal(r->n_ref, 1);
        assert_null(policy_snapshot_unref(r));
        assert_null(policy_snapshot_unref(NULL));
        assert_null(policy_snapshot_ref(NULL));
}

static void test_digest_known_answer(void **state) {
        static const char canonical[] = "name=code_interpreter\n"
                                        "maxCalls=10\n"
                                        "timeoutMs=30000\n"
                                        "maxCodeCharacters=20000\n"
                                        "maxOutputCharacters=64000\n"
                                        "maxResultBytes=262144\n"
                                        "memoryBytes=536870912\n"
                                        "cpuSeconds=30\n"
                                        "maxFileBytes=16777216\n"
                                        "maxOpenFiles=64\n"
                                        "maxProcesses=64\n"
                                        "tmpBytes=16777216\n"
                                        "maxArtifacts=16\n"
                                        "maxArtifactBytes=8388608\n"
                                        "workerUid=65534\n"
                                        "workerGid=65534\n"
                                        "seccompDenyAction=errno\n"
                                        "maxMessageBytes=8388608\n"
                                        "maxWorkerMessageBytes=1048576\n"
                                        "maxConnections=64\n"
                                        "maxConnectionOutputBytes=16777216\n"
                                        "allowedUids=\n"
                                        "allowedGids=\n"
                                        "socketGroup=\n"
                                        "maxInvocationsPerConnection=16\n"
                                        "maxSourcesPerInvocation=64\n"
                                        "maxSourceBytes=4194304\n"
                                        "maxInvocationBytes=33554432\n"
                                        "invocationIdleTtlMs=3600000\n"
                                        "maxActiveWorkers=0\n"
                                        "maxQueuedCalls=256\n"
                                        "heartbeatMs=1000\n"
                                        "minAvailableMemoryBytes=0\n"
                                        "workerStart=zygote\n"
                                        "zygoteMaxCalls=10000\n"
                                        "zygoteMaxSeconds=3600\n"
                                        "zygotePoolSize=2\n"
                                        "idleExitSeconds=0\n"
                                        "cgroups=auto\n"
                                        "cpuBandwidthPercent=0\n"
                                        "pythonPackages=\n"
                                        "workerHostIdBase=2146435072\n"
                                        "workerHostIdCount=65536\n"
                                        "unreadyAfterStartFailures=3\n"
                                        "maxConnectionsPerPeer=16\n"
                                        "connectionIdleTimeoutMs=30000\n";
        char want[65];
        Policy p;
        char err[256];

        policy_init_defaults(&p);
        sha256_hex(canonical, strlen(canonical), want);
        assert_string_equal(p.sha256, want);

        /* Lists are sorted, comma-separated; the socket group is the resolved gid; the
         * packages are in allow-list order. */
        assert_int_equal(load(&p,
                              "allowedUids: [1001, 5]\nallowedGids: [7]\nsocketGroup: 42\n"
                              "pythonPackages: [matplotlib, numpy, pandas]\n",
                              err, sizeof(err)),
                         0);
        {
                char c2[sizeof(canonical) + 64], *s;
                size_t n = 0;
                const char *line = canonical;

                while ((s = strchr(line, '\n'))) {
                        size_t l = (size_t) (s - line) + 1;
                        if (strncmp(line, "allowedUids=", 12) == 0)
                                n += (size_t) sprintf(c2 + n, "allowedUids=5,1001\n");
                        else if (strncmp(line, "allowedGids=", 12) == 0)
                                n += (size_t) sprintf(c2 + n, "allowedGids=7\n");
                        else if (strncmp(line, "socketGroup=", 12) == 0)
                                n += (size_t) sprintf(c2 + n, "socketGroup=42\n");
                        else if (strncmp(line, "pythonPackages=", 15) == 0)
                                n += (size_t) sprintf(c2 + n, "pythonPackages=numpy,pandas,matplotlib\n");
                        else {
                                memcpy(c2 + n, line, l);
                                n += l;
                        }
                        line = s + 1;
                }
                sha256_hex(c2, n, want);
                assert_string_equal(p.sha256, want);
        }
}

static void test_digest(void **state) {
        Policy d, d2, p, q;
        char doc[256], err[256];

        policy_init_defaults(&d);
        policy_init_defaults(&d2);
        assert_string_equal(d.sha256, d2.sha256);

        /* Recomputing is idempotent. */
        policy_copy(&p, &d);
        policy_finalize(&p);
        assert_string_equal(p.sha256, d.sha256);

        /* Each key alone changes the digest, deterministically; distinct keys give distinct digests. */
        char seen[ELEMENTSOF(test_keys)][65];
        for (size_t i = 0; i < ELEMENTSOF(test_keys); i++) {
                snprintf(doc, sizeof(doc), "%s: %s\n", test_keys[i].key, test_keys[i].alt);
                policy_copy(&p, &d);
                if (load(&p, doc, err, sizeof(err)) != 0)
                        fail_msg("%s: %s", doc, err);
                assert_string_not_equal(p.sha256, d.sha256);
                policy_copy(&q, &d);
                assert_int_equal(load(&q, doc, err, sizeof(err)), 0);
                assert_string_equal(p.sha256, q.sha256);
                memcpy(seen[i], p.sha256, 65);
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(seen[i], seen[j]);
        }

        /* Restating a default keeps the digest. */
        policy_copy(&p, &d);
        assert_int_equal(load(&p, "maxCalls: 10\nname: code_interpreter\nworkerStart: zygote\nallowedUids: []\n", err,
                              sizeof(err)),
                         0);
        assert_string_equal(p.sha256, d.sha256);

        /* A field changed directly is picked up by policy_finalize(). */
        policy_copy(&p, &d);
        p.timeout_ms++;
        policy_finalize(&p);
        assert_string_not_equal(p.sha256, d.sha256);

        /* The peer lists are sets. */
        policy_copy(&p, &d);
        policy_copy(&q, &d);
        assert_int_equal(load(&p, "allowedUids: [3, 1, 2]\n", err, sizeof(err)), 0);
        assert_int_equal(load(&q, "allowedUids: [1, 2, 3]\n", err, sizeof(err)), 0);
        assert_string_equal(p.sha256, q.sha256);

        /* The same ids as uids or as gids are different policies. */
        policy_copy(&q, &d);
        assert_int_equal(load(&q, "allowedGids: [1, 2, 3]\n", err, sizeof(err)), 0);
        assert_string_not_equal(p.sha256, q.sha256);
}

/* packaging/policy-data.yaml: the reviewed profile with every package of the allow-list. */
static void test_data_policy_file(void **state) {
        Policy p;
        char err[256];

        policy_init_defaults(&p);
        if (policy_load_file(&p, CODEINTERP_SOURCE_DIR "/packaging/policy-data.yaml", err, sizeof(err)) != 0)
                fail_msg("policy-data.yaml: %s", err);
        assert_int_equal(p.python_packages, POLICY_PACKAGE_BIT(_POLICY_PACKAGE_MAX) - 1);
        assert_int_equal(p.timeout_ms, 30000);
        assert_int_equal(p.memory_bytes, 536870912);
        assert_int_equal(p.seccomp_deny, POLICY_DENY_ERRNO);
}

static void test_packaging_file(void **state) {
        const char *path = CODEINTERP_SOURCE_DIR "/packaging/policy.yaml";
        _cleanup_free_ char *text = NULL;
        Policy d, p;
        char err[256];
        FILE *f;
        long n;

        policy_init_defaults(&d);
        policy_copy(&p, &d);
        if (policy_load_file(&p, path, err, sizeof(err)) != 0)
                fail_msg("%s: %s", path, err);
        /* It lists the defaults. */
        assert_string_equal(p.sha256, d.sha256);

        /* It mentions every key (socketGroup commented out: unset by default); so does the documentation. */
        f = fopen(path, "re");
        assert_non_null(f);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        assert_true(n > 0);
        rewind(f);
        text = calloc(1, (size_t) n + 1);
        assert_non_null(text);
        assert_int_equal(fread(text, 1, (size_t) n, f), (size_t) n);
        fclose(f);
        for (size_t i = 0; i < ELEMENTSOF(test_keys); i++) {
                char needle[64];
                snprintf(needle, sizeof(needle), "%s:", test_keys[i].key);
                if (!strstr(text, needle))
                        fail_msg("packaging/policy.yaml lacks %s", test_keys[i].key);
        }

        {
                const char *docpath = CODEINTERP_SOURCE_DIR "/docs/policy.md";
                _cleanup_free_ char *doc = NULL;

                f = fopen(docpath, "re");
                assert_non_null(f);
                assert_int_equal(fseek(f, 0, SEEK_END), 0);
                n = ftell(f);
                rewind(f);
                doc = calloc(1, (size_t) n + 1);
                assert_non_null(doc);
                assert_int_equal(fread(doc, 1, (size_t) n, f), (size_t) n);
                fclose(f);
                for (size_t i = 0; i < ELEMENTSOF(test_keys); i++) {
                        char needle[64];
                        snprintf(needle, sizeof(needle), "`%s`", test_keys[i].key);
                        if (!strstr(doc, needle))
                                fail_msg("docs/policy.md lacks %s", needle);
                }
        }
}

static void test_load_file_errors(void **state) {
        char path[] = "/tmp/test_policy.XXXXXX";
        _cleanup_free_ char *big = NULL;
        Policy d, p;
        char err[256];
        int fd;

        policy_init_defaults(&d);
        policy_copy(&p, &d);
        assert_int_equal(policy_load_file(&p, "/nonexistent/policy.yaml", err, sizeof(err)), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/policy.yaml"));
        assert_int_equal(policy_load_file(&p, "/", err, sizeof(err)), -EISDIR);
        assert_memory_equal(&p, &d, sizeof(p));

        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "maxCalls: 4\n", 12), 12);
        assert_int_equal(policy_load_file(&p, path, err, sizeof(err)), 0);
        assert_int_equal(p.max_calls, 4);

        big = calloc(1, 1024 * 1024 + 16);
        assert_non_null(big);
        memset(big, '#', 1024 * 1024 + 16);
        assert_int_equal(pwrite(fd, big, 1024 * 1024 + 16, 0), 1024 * 1024 + 16);
        policy_copy(&p, &d);
        assert_int_equal(policy_load_file(&p, path, err, sizeof(err)), -EFBIG);
        assert_memory_equal(&p, &d, sizeof(p));
        close(fd);
        unlink(path);
}

static void test_active_workers(void **state) {
        Policy p;
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        policy_init_defaults(&p);
        assert_int_equal(policy_active_workers(&p), n < 1 ? 1 : (n > 4096 ? 4096 : n));
        p.max_active_workers = 3;
        assert_int_equal(policy_active_workers(&p), 3);
}

static void test_to_string(void **state) {
        assert_string_equal(policy_deny_action_to_string(POLICY_DENY_ERRNO), "errno");
        assert_string_equal(policy_deny_action_to_string(POLICY_DENY_KILL), "kill");
        assert_null(policy_deny_action_to_string((PolicyDenyAction) 42));
        assert_string_equal(policy_worker_start_to_string(POLICY_WORKER_START_EXEC), "exec");
        assert_string_equal(policy_worker_start_to_string(POLICY_WORKER_START_ZYGOTE), "zygote");
        assert_null(policy_worker_start_to_string((PolicyWorkerStart) 42));
        assert_string_equal(policy_cgroups_to_string(POLICY_CGROUPS_AUTO), "auto");
        assert_string_equal(policy_cgroups_to_string(POLICY_CGROUPS_REQUIRED), "required");
        assert_string_equal(policy_cgroups_to_string(POLICY_CGROUPS_OFF), "off");
        assert_null(policy_cgroups_to_string((PolicyCgroups) 42));
        assert_string_equal(policy_package_to_string(POLICY_PACKAGE_PANDAS), "pandas");
        assert_null(policy_package_to_string(_POLICY_PACKAGE_MAX));
        {
                char buf[64];
                policy_packages_format(0, buf, sizeof buf);
                assert_string_equal(buf, "");
                policy_packages_format(POLICY_PACKAGE_BIT(POLICY_PACKAGE_MATPLOTLIB) |
                                               POLICY_PACKAGE_BIT(POLICY_PACKAGE_NUMPY),
                                       buf, sizeof buf);
                assert_string_equal(buf, "numpy, matplotlib");
        }
        {
                char all[POLICY_PACKAGES_NAMES_MAX];
                size_t want = 0;

                for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++)
                        want += strlen(policy_package_to_string(p)) + (p > 0 ? 2 : 0);
                policy_packages_format(POLICY_PACKAGE_BIT(_POLICY_PACKAGE_MAX) - 1, all, sizeof all);
                assert_int_equal(strlen(all), want);
                assert_true(strlen(all) < sizeof all);
        }
}

/* Random byte and line mutations of a valid document: never crash, always 0 or -EINVAL,
 * a failure leaves the policy untouched and explains itself in one line. */
static void test_mutations(void **state) {
        static const char alphabet[] = ":-[]{},&*!#|>?'\"\n\t 0123456789abcXYZ%@`~\\\xff\xc3";
        size_t base_len = strlen(full_doc);
        unsigned seed = 0x5eed;
        Policy d;
        unsigned ok = 0, failed = 0;

        policy_init_defaults(&d);
        srand(seed);

        for (int iter = 0; iter < 5000; iter++) {
                char buf[4096], err[256];
                size_t n = base_len;
                int ops = 1 + rand() % 4;
                Policy p;
                int r;

                policy_copy(&p, &d);
                memcpy(buf, full_doc, n);
                for (int o = 0; o < ops; o++) {
                        size_t pos = n > 0 ? (size_t) rand() % n : 0;
                        switch (rand() % 6) {
                        case 0: /* replace a byte */
                                if (n > 0)
                                        buf[pos] = alphabet[rand() % (int) (sizeof(alphabet) - 1)];
                                break;
                        case 1: /* insert a byte */
                                if (n + 1 < sizeof(buf)) {
                                        memmove(buf + pos + 1, buf + pos, n - pos);
                                        buf[pos] = alphabet[rand() % (int) (sizeof(alphabet) - 1)];
                                        n++;
                                }
                                break;
                        case 2: /* delete a run */
                                if (n > 0) {
                                        size_t k = (size_t) (1 + rand() % 8);
                                        k = MIN(k, n - pos);
                                        memmove(buf + pos, buf + pos + k, n - pos - k);
                                        n -= k;
                                }
                                break;
                        case 3: /* duplicate a run */
                                if (n > 0) {
                                        size_t k = (size_t) (1 + rand() % 40);
                                        k = MIN(k, n - pos);
                                        if (n + k < sizeof(buf)) {
                                                memmove(buf + pos + k, buf + pos, n - pos);
                                                n += k;
                                        }
                                }
                                break;
                        case 4: /* truncate */
                                n = pos;
                                break;
                        default: /* random byte anywhere in 0..255 */
                                if (n > 0)
                                        buf[pos] = (char) (rand() & 0xff);
                                break;
                        }
                }

                memset(err, 'X', sizeof(err));
                r = policy_load_string(&p, buf, n, err, sizeof(err));
                if (r == 0) {
                        Policy q;

                        policy_copy(&q, &d);
                        ok++;
                        assert_true(is_hex64(p.sha256));
                        assert_non_null(memchr(err, '\0', sizeof(err)));
                        assert_int_equal(policy_load_string(&q, buf, n, err, sizeof(err)), 0);
                        assert_string_equal(p.sha256, q.sha256);
                } else {
                        failed++;
                        assert_int_equal(r, -EINVAL);
                        assert_non_null(memchr(err, '\0', sizeof(err)));
                        assert_true(strlen(err) > 0);
                        assert_null(strchr(err, '\n'));
                        assert_memory_equal(&p, &d, sizeof(p));
                }
        }
        /* Both outcomes are exercised. */
        assert_true(ok > 100);
        assert_true(failed > 100);
}

UNIT_MAIN(NULL, NULL, TEST(test_defaults), TEST(test_empty_documents), TEST(test_full_override), TEST(test_overlay),
          TEST(test_styles), TEST(test_ranges), TEST(test_errors), TEST(test_atomic), TEST(test_err_buffer),
          TEST(test_too_large), TEST(test_keep_restart_keys), TEST(test_snapshot), TEST(test_digest_known_answer),
          TEST(test_digest), TEST(test_packaging_file), TEST(test_data_policy_file), TEST(test_load_file_errors),
          TEST(test_active_workers), TEST(test_to_string), TEST(test_mutations))
