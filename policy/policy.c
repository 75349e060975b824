/* SPDX-License-Identifier: MIT */
/* The reviewed configuration: defaults, a strict YAML overlay and the digest of
 * the effective values. Keys, ranges and the digest rule are documented in
 * docs/policy.md; the key table below is the single source of truth for the
 * ranges and for the digest's key order. */
#include "policy/policy.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "common/cleanup.h"
#include "common/sha256.h"

/* A policy document larger than this is refused (it is a few dozen lines). */
#define POLICY_DOCUMENT_MAX (1024 * 1024)

/* Upper bound for byte quantities that have no narrower natural limit: 1 TiB. */
#define BYTES_1T UINT64_C(1099511627776)
#define MIB(n) (UINT64_C(n) * 1024 * 1024)
#define GIB(n) (UINT64_C(n) * 1024 * 1024 * 1024)

/* Bytes reserved for a frame's envelope (type, ids, lengths) in the cross checks. */
#define POLICY_FRAME_OVERHEAD 4096

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && (uid_t) -1 > 0, "uid_t must be an unsigned 32-bit type");
_Static_assert(sizeof(gid_t) == sizeof(uint32_t) && (gid_t) -1 > 0, "gid_t must be an unsigned 32-bit type");

typedef enum KeyType {
        KEY_NAME,     /* 1..63 of [A-Za-z0-9_.-] */
        KEY_U32,      /* decimal integer stored in a uint32_t (also uid_t, gid_t) */
        KEY_U64,      /* decimal integer stored in a uint64_t */
        KEY_DENY,     /* errno | kill */
        KEY_START,    /* exec | zygote */
        KEY_CGROUPS,  /* auto | required | off */
        KEY_UID_LIST, /* sequence of uids */
        KEY_GID_LIST, /* sequence of gids */
        KEY_GROUP,    /* group name or gid */
        KEY_PACKAGES, /* sequence of names from the pythonPackages allow-list, stored as a bit mask */
} KeyType;

/* Table order is the canonical order of the digest lines. Never reorder:
 * that changes every digest. New keys go at the end. */
typedef enum KeyId {
        K_NAME,
        K_MAX_CALLS,
        K_TIMEOUT_MS,
        K_MAX_CODE_CHARACTERS,
        K_MAX_OUTPUT_CHARACTERS,
        K_MAX_RESULT_BYTES,
        K_MEMORY_BYTES,
        K_CPU_SECONDS,
        K_MAX_FILE_BYTES,
        K_MAX_OPEN_FILES,
        K_MAX_PROCESSES,
        K_TMP_BYTES,
        K_MAX_ARTIFACTS,
        K_MAX_ARTIFACT_BYTES,
        K_WORKER_UID,
        K_WORKER_GID,
        K_SECCOMP_DENY_ACTION,
        K_MAX_MESSAGE_BYTES,
        K_MAX_WORKER_MESSAGE_BYTES,
        K_MAX_CONNECTIONS,
        K_MAX_CONNECTION_OUTPUT_BYTES,
        K_ALLOWED_UIDS,
        K_ALLOWED_GIDS,
        K_SOCKET_GROUP,
        K_MAX_INVOCATIONS_PER_CONNECTION,
        K_MAX_SOURCES_PER_INVOCATION,
        K_MAX_SOURCE_BYTES,
        K_MAX_INVOCATION_BYTES,
        K_INVOCATION_IDLE_TTL_MS,
        K_MAX_ACTIVE_WORKERS,
        K_MAX_QUEUED_CALLS,
        K_HEARTBEAT_MS,
        K_MIN_AVAILABLE_MEMORY_BYTES,
        K_WORKER_START,
        K_ZYGOTE_MAX_CALLS,
        K_ZYGOTE_MAX_SECONDS,
        K_ZYGOTE_POOL_SIZE,
        K_IDLE_EXIT_SECONDS,
        K_CGROUPS,
        K_CPU_BANDWIDTH_PERCENT,
        K_PYTHON_PACKAGES,
        K_WORKER_HOST_ID_BASE,
        K_WORKER_HOST_ID_COUNT,
        K_UNREADY_AFTER_START_FAILURES,
        K_MAX_CONNECTIONS_PER_PEER,
        K_CONNECTION_IDLE_TIMEOUT_MS,
        _K_MAX,
} KeyId;

typedef struct KeyDef {
        const char *key;
        KeyType type;
        size_t offset; /* of the value (the array for lists) */
        uint64_t min, max;
        bool limit;   /* a limit of every call: reported in hello and in each result's evidence */
        bool restart; /* read once at start: a reload keeps the running value (policy_keep_restart_keys()) */
} KeyDef;

#define DEF(id, k, t, field, lo, hi)                                                                                   \
        [id] = { .key = k, .type = t, .offset = offsetof(Policy, field), .min = lo, .max = hi }
/* The same, for a key that is one of a call's limits (policy_limits()). */
/* The same, for a key that takes effect only at start. */
#define RESTART(id, k, t, field, lo, hi)                                                                               \
        [id] = { .key = k, .type = t, .offset = offsetof(Policy, field), .min = lo, .max = hi, .restart = true }
#define LIMIT(id, k, t, field, lo, hi)                                                                                 \
        [id] = { .key = k, .type = t, .offset = offsetof(Policy, field), .min = lo, .max = hi, .limit = true }
/* A call's limit that takes effect only at start. */
#define RESTART_LIMIT(id, k, t, field, lo, hi)                                                                         \
        [id] = { .key = k,                                                                                             \
                 .type = t,                                                                                            \
                 .offset = offsetof(Policy, field),                                                                    \
                 .min = lo,                                                                                            \
                 .max = hi,                                                                                            \
                 .limit = true,                                                                                        \
                 .restart = true }

static const KeyDef keys[_K_MAX] = {
        DEF(K_NAME, "name", KEY_NAME, name, 1, POLICY_NAME_MAX - 1),
        LIMIT(K_MAX_CALLS, "maxCalls", KEY_U32, max_calls, 1, 100000),
        LIMIT(K_TIMEOUT_MS, "timeoutMs", KEY_U32, timeout_ms, 1, 86400000),
        LIMIT(K_MAX_CODE_CHARACTERS, "maxCodeCharacters", KEY_U32, max_code_characters, 1, 10000000),
        LIMIT(K_MAX_OUTPUT_CHARACTERS, "maxOutputCharacters", KEY_U32, max_output_characters, 0, 100000000),
        LIMIT(K_MAX_RESULT_BYTES, "maxResultBytes", KEY_U32, max_result_bytes, 4096, GIB(1)),
        LIMIT(K_MEMORY_BYTES, "memoryBytes", KEY_U64, memory_bytes, MIB(16), BYTES_1T),
        LIMIT(K_CPU_SECONDS, "cpuSeconds", KEY_U32, cpu_seconds, 1, 86400),
        LIMIT(K_MAX_FILE_BYTES, "maxFileBytes", KEY_U64, file_bytes, 0, BYTES_1T),
        LIMIT(K_MAX_OPEN_FILES, "maxOpenFiles", KEY_U32, open_files, 16, 65536),
        LIMIT(K_MAX_PROCESSES, "maxProcesses", KEY_U32, processes, 1, 4096),
        LIMIT(K_TMP_BYTES, "tmpBytes", KEY_U64, tmp_bytes, 4096, BYTES_1T),
        LIMIT(K_MAX_ARTIFACTS, "maxArtifacts", KEY_U32, max_artifacts, 0, 4096),
        LIMIT(K_MAX_ARTIFACT_BYTES, "maxArtifactBytes", KEY_U64, max_artifact_bytes, 4096, GIB(1)),
        RESTART(K_WORKER_UID, "workerUid", KEY_U32, worker_uid, 1, UINT32_MAX - 1),
        RESTART(K_WORKER_GID, "workerGid", KEY_U32, worker_gid, 1, UINT32_MAX - 1),
        DEF(K_SECCOMP_DENY_ACTION, "seccompDenyAction", KEY_DENY, seccomp_deny, 0, 0),
        LIMIT(K_MAX_MESSAGE_BYTES, "maxMessageBytes", KEY_U32, max_message_bytes, 8192, GIB(1)),
        DEF(K_MAX_WORKER_MESSAGE_BYTES, "maxWorkerMessageBytes", KEY_U32, max_worker_message_bytes, 4096, GIB(1)),
        DEF(K_MAX_CONNECTIONS, "maxConnections", KEY_U32, max_connections, 1, 65536),
        DEF(K_MAX_CONNECTION_OUTPUT_BYTES, "maxConnectionOutputBytes", KEY_U64, max_connection_output_bytes, 4096,
            BYTES_1T),
        DEF(K_ALLOWED_UIDS, "allowedUids", KEY_UID_LIST, allowed_uids, 0, UINT32_MAX - 1),
        DEF(K_ALLOWED_GIDS, "allowedGids", KEY_GID_LIST, allowed_gids, 0, UINT32_MAX - 1),
        RESTART(K_SOCKET_GROUP, "socketGroup", KEY_GROUP, socket_group, 0, UINT32_MAX - 1),
        DEF(K_MAX_INVOCATIONS_PER_CONNECTION, "maxInvocationsPerConnection", KEY_U32, max_invocations_per_connection, 1,
            4096),
        DEF(K_MAX_SOURCES_PER_INVOCATION, "maxSourcesPerInvocation", KEY_U32, max_sources_per_invocation, 0, 65536),
        LIMIT(K_MAX_SOURCE_BYTES, "maxSourceBytes", KEY_U64, max_source_bytes, 1, MIB(512)),
        DEF(K_MAX_INVOCATION_BYTES, "maxInvocationBytes", KEY_U64, max_invocation_bytes, 1, BYTES_1T),
        DEF(K_INVOCATION_IDLE_TTL_MS, "invocationIdleTtlMs", KEY_U32, invocation_ttl_ms, 1000, 604800000),
        DEF(K_MAX_ACTIVE_WORKERS, "maxActiveWorkers", KEY_U32, max_active_workers, 0, 4096),
        DEF(K_MAX_QUEUED_CALLS, "maxQueuedCalls", KEY_U32, max_queued_calls, 0, 1000000),
        DEF(K_HEARTBEAT_MS, "heartbeatMs", KEY_U32, heartbeat_ms, 10, 600000),
        DEF(K_MIN_AVAILABLE_MEMORY_BYTES, "minAvailableMemoryBytes", KEY_U64, min_available_memory_bytes, 0, BYTES_1T),
        RESTART(K_WORKER_START, "workerStart", KEY_START, worker_start, 0, 0),
        RESTART(K_ZYGOTE_MAX_CALLS, "zygoteMaxCalls", KEY_U32, zygote_max_calls, 1, 10000000),
        RESTART(K_ZYGOTE_MAX_SECONDS, "zygoteMaxSeconds", KEY_U32, zygote_max_seconds, 1, 604800),
        RESTART(K_ZYGOTE_POOL_SIZE, "zygotePoolSize", KEY_U32, zygote_pool_size, 0, POLICY_ZYGOTE_POOL_SIZE_MAX),
        DEF(K_IDLE_EXIT_SECONDS, "idleExitSeconds", KEY_U32, idle_exit_seconds, 0, 604800),
        RESTART(K_CGROUPS, "cgroups", KEY_CGROUPS, cgroups, 0, 0),
        /* The cgroup root opens the cpu hierarchy (v1) or enables the controller (v2)
         * only when it is on: read at start. 0 = off. */
        RESTART_LIMIT(K_CPU_BANDWIDTH_PERCENT, "cpuBandwidthPercent", KEY_U32, cpu_bandwidth_percent, 0,
                      POLICY_CPU_BANDWIDTH_PERCENT_MAX),
        /* The zygote imports them and the worker's root binds them: read at start only. */
        RESTART(K_PYTHON_PACKAGES, "pythonPackages", KEY_PACKAGES, python_packages, 0, 0),
        RESTART(K_WORKER_HOST_ID_BASE, "workerHostIdBase", KEY_U32, worker_host_id_base, 1, UINT32_MAX - 1),
        RESTART(K_WORKER_HOST_ID_COUNT, "workerHostIdCount", KEY_U32, worker_host_id_count, 1,
                POLICY_HOST_ID_COUNT_MAX),
        /* Read by status when it is asked: a reload changes it at once. */
        DEF(K_UNREADY_AFTER_START_FAILURES, "unreadyAfterStartFailures", KEY_U32, unready_after_start_failures, 0,
            1000000),
        /* Checked when a connection is accepted. */
        DEF(K_MAX_CONNECTIONS_PER_PEER, "maxConnectionsPerPeer", KEY_U32, max_connections_per_peer, 1, 65536),
        /* Read whenever a connection's idle timer is set again. */
        DEF(K_CONNECTION_IDLE_TIMEOUT_MS, "connectionIdleTimeoutMs", KEY_U32, connection_idle_timeout_ms, 100,
            604800000),
};

static uint32_t *field_u32(Policy *p, const KeyDef *d) {
        return (uint32_t *) ((uint8_t *) p + d->offset);
}

static uint64_t *field_u64(Policy *p, const KeyDef *d) {
        return (uint64_t *) ((uint8_t *) p + d->offset);
}

static uint32_t get_u32(const Policy *p, const KeyDef *d) {
        return *(const uint32_t *) ((const uint8_t *) p + d->offset);
}

static uint64_t get_u64(const Policy *p, const KeyDef *d) {
        return *(const uint64_t *) ((const uint8_t *) p + d->offset);
}

size_t policy_limits(const Policy *p, PolicyLimit ret[static POLICY_MAX_LIMITS]) {
        size_t n = 0;

        for (size_t i = 0; i < _K_MAX; i++) {
                const KeyDef *d = &keys[i];
                if (!d->limit)
                        continue;
                assert(n < POLICY_MAX_LIMITS && (d->type == KEY_U32 || d->type == KEY_U64));
                ret[n++] = (PolicyLimit){ .key = d->key, .value = d->type == KEY_U32 ? get_u32(p, d) : get_u64(p, d) };
        }
        return n;
}

const char *policy_deny_action_to_string(PolicyDenyAction a) {
        switch (a) {
        case POLICY_DENY_ERRNO:
                return "errno";
        case POLICY_DENY_KILL:
                return "kill";
        }
        return NULL;
}

const char *policy_worker_start_to_string(PolicyWorkerStart s) {
        switch (s) {
        case POLICY_WORKER_START_EXEC:
                return "exec";
        case POLICY_WORKER_START_ZYGOTE:
                return "zygote";
        }
        return NULL;
}

const char *policy_cgroups_to_string(PolicyCgroups c) {
        switch (c) {
        case POLICY_CGROUPS_AUTO:
                return "auto";
        case POLICY_CGROUPS_REQUIRED:
                return "required";
        case POLICY_CGROUPS_OFF:
                return "off";
        }
        return NULL;
}

const char *policy_package_to_string(PolicyPackage p) {
        static const char *const names[_POLICY_PACKAGE_MAX] = {
                [POLICY_PACKAGE_NUMPY] = "numpy",           [POLICY_PACKAGE_PANDAS] = "pandas",
                [POLICY_PACKAGE_MATPLOTLIB] = "matplotlib", [POLICY_PACKAGE_SCIPY] = "scipy",
                [POLICY_PACKAGE_SKLEARN] = "sklearn",       [POLICY_PACKAGE_STATSMODELS] = "statsmodels",
                [POLICY_PACKAGE_SYMPY] = "sympy",           [POLICY_PACKAGE_SEABORN] = "seaborn",
                [POLICY_PACKAGE_OPENPYXL] = "openpyxl",     [POLICY_PACKAGE_TABULATE] = "tabulate",
        };
        return (unsigned) p < _POLICY_PACKAGE_MAX ? names[p] : NULL;
}

void policy_packages_format(uint32_t mask, char *buf, size_t size) {
        size_t n = 0;

        if (size == 0)
                return;
        buf[0] = 0;
        for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                int k;

                if (!(mask & POLICY_PACKAGE_BIT(p)))
                        continue;
                k = snprintf(buf + n, size - n, "%s%s", n > 0 ? ", " : "", policy_package_to_string(p));
                if (k < 0 || (size_t) k >= size - n)
                        return;
                n += (size_t) k;
        }
}

void policy_init_defaults(Policy *p) {
        if (!p)
                return;

        *p = (Policy){
                .name = "code_interpreter",

                .max_calls = 10,
                .timeout_ms = 30000,
                .max_code_characters = 20000,
                .max_output_characters = 64000,
                .max_result_bytes = 262144,

                .memory_bytes = UINT64_C(536870912),
                .cpu_seconds = 30,
                .file_bytes = UINT64_C(16777216),
                .open_files = 64,
                .processes = 64,
                .tmp_bytes = UINT64_C(16777216),
                .max_artifacts = 16,
                .max_artifact_bytes = UINT64_C(8388608),
                .worker_uid = 65534,
                .worker_gid = 65534,
                .seccomp_deny = POLICY_DENY_ERRNO,

                .max_message_bytes = 8388608,
                .max_worker_message_bytes = 1048576,
                .max_connections = 64,
                .max_connection_output_bytes = UINT64_C(16777216),

                .n_allowed_uids = 0,
                .n_allowed_gids = 0,
                .has_socket_group = false,

                .max_invocations_per_connection = 16,
                .max_sources_per_invocation = 64,
                .max_source_bytes = UINT64_C(4194304),
                .max_invocation_bytes = UINT64_C(33554432),
                .invocation_ttl_ms = 3600000,

                .max_active_workers = 0,
                .max_queued_calls = 256,
                .heartbeat_ms = 1000,
                .min_available_memory_bytes = 0,

                .worker_start = POLICY_WORKER_START_ZYGOTE,
                .zygote_max_calls = 10000,
                .zygote_max_seconds = 3600,
                .zygote_pool_size = 2,

                .idle_exit_seconds = 0,

                .cgroups = POLICY_CGROUPS_AUTO,
                .cpu_bandwidth_percent = 0,

                .python_packages = 0,

                .worker_host_id_base = POLICY_HOST_ID_BASE_DEFAULT,
                .worker_host_id_count = 65536,

                .unready_after_start_failures = 3,

                .max_connections_per_peer = 16,
                .connection_idle_timeout_ms = 30000,
        };
        policy_finalize(p);
}

uint32_t policy_active_workers(const Policy *p) {
        long n;

        if (p && p->max_active_workers > 0)
                return p->max_active_workers;
        n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
                return 1;
        return (uint32_t) MIN(n, (long) keys[K_MAX_ACTIVE_WORKERS].max);
}

static size_t key_size(const KeyDef *d) {
        switch (d->type) {
        case KEY_NAME:
                return POLICY_NAME_MAX;
        case KEY_U32:
                return sizeof(uint32_t);
        case KEY_U64:
                return sizeof(uint64_t);
        case KEY_DENY:
                return sizeof(PolicyDenyAction);
        case KEY_START:
                return sizeof(PolicyWorkerStart);
        case KEY_CGROUPS:
                return sizeof(PolicyCgroups);
        case KEY_UID_LIST:
        case KEY_GID_LIST:
                return sizeof(uint32_t) * POLICY_MAX_PEERS;
        case KEY_GROUP:
                return sizeof(gid_t);
        case KEY_PACKAGES:
                return sizeof(uint32_t);
        }
        return 0;
}

int policy_keep_restart_keys(Policy *p, const Policy *running,
                             const char *ret_changed[static POLICY_MAX_RESTART_KEYS]) {
        int n = 0;

        for (size_t i = 0; i < _K_MAX; i++) {
                const KeyDef *d = &keys[i];
                size_t size = key_size(d);
                bool differ;

                if (!d->restart)
                        continue;
                /* Only the U32, START, CGROUPS, PACKAGES and GROUP types are restart keys. */
                differ = memcmp((const uint8_t *) p + d->offset, (const uint8_t *) running + d->offset, size) != 0;
                if (d->type == KEY_GROUP)
                        differ = p->has_socket_group != running->has_socket_group ||
                                 (p->has_socket_group && p->socket_group != running->socket_group);
                if (!differ)
                        continue;
                memcpy((uint8_t *) p + d->offset, (const uint8_t *) running + d->offset, size);
                if (d->type == KEY_GROUP)
                        p->has_socket_group = running->has_socket_group;
                assert(n < POLICY_MAX_RESTART_KEYS);
                ret_changed[n++] = d->key;
        }
        if (n > 0)
                policy_finalize(p);
        return n;
}

bool policy_key_needs_restart(const char *key) {
        for (size_t i = 0; i < _K_MAX; i++)
                if (strcmp(keys[i].key, key) == 0)
                        return keys[i].restart;
        return false;
}

/* ---- snapshots ---- */

int policy_snapshot_new(const Policy *p, PolicySnapshot **ret) {
        PolicySnapshot *s = malloc(sizeof *s);

        if (!s)
                return -ENOMEM;
        s->n_ref = 1;
        s->policy = *p;
        *ret = s;
        return 0;
}

PolicySnapshot *policy_snapshot_ref(PolicySnapshot *s) {
        if (s)
                s->n_ref++;
        return s;
}

PolicySnapshot *policy_snapshot_unref(PolicySnapshot *s) {
        if (s && --s->n_ref == 0)
                free(s);
        return NULL;
}

/* ---- digest ---- */

typedef struct Canon {
        char data[8192]; /* worst case is about 3.5 KiB: 46 keys, two full id lists */
        size_t n;
} Canon;

static void canon_printf(Canon *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void canon_printf(Canon *c, const char *fmt, ...) {
        va_list ap;
        int k;

        if (c->n >= sizeof(c->data))
                return;
        va_start(ap, fmt);
        k = vsnprintf(c->data + c->n, sizeof(c->data) - c->n, fmt, ap);
        va_end(ap);
        if (k < 0)
                return;
        c->n = MIN(c->n + (size_t) k, sizeof(c->data));
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return (x > y) - (x < y);
}

static void canon_id_list(Canon *c, const uint32_t *ids, size_t n) {
        uint32_t sorted[POLICY_MAX_PEERS];

        n = MIN(n, (size_t) POLICY_MAX_PEERS);
        memcpy(sorted, ids, n * sizeof(uint32_t));
        qsort(sorted, n, sizeof(uint32_t), cmp_u32);
        for (size_t i = 0; i < n; i++)
                canon_printf(c, "%s%" PRIu32, i > 0 ? "," : "", sorted[i]);
}

void policy_finalize(Policy *p) {
        Canon c = { .n = 0 };

        if (!p)
                return;

        for (size_t i = 0; i < _K_MAX; i++) {
                const KeyDef *d = &keys[i];
                const char *s;

                canon_printf(&c, "%s=", d->key);
                switch (d->type) {
                case KEY_NAME:
                        canon_printf(&c, "%.*s", POLICY_NAME_MAX - 1, p->name);
                        break;
                case KEY_U32:
                        canon_printf(&c, "%" PRIu32, get_u32(p, d));
                        break;
                case KEY_U64:
                        canon_printf(&c, "%" PRIu64, get_u64(p, d));
                        break;
                case KEY_DENY:
                        s = policy_deny_action_to_string(p->seccomp_deny);
                        canon_printf(&c, "%s", s ?: "invalid");
                        break;
                case KEY_START:
                        s = policy_worker_start_to_string(p->worker_start);
                        canon_printf(&c, "%s", s ?: "invalid");
                        break;
                case KEY_CGROUPS:
                        s = policy_cgroups_to_string(p->cgroups);
                        canon_printf(&c, "%s", s ?: "invalid");
                        break;
                case KEY_UID_LIST:
                        canon_id_list(&c, p->allowed_uids, p->n_allowed_uids);
                        break;
                case KEY_GID_LIST:
                        canon_id_list(&c, p->allowed_gids, p->n_allowed_gids);
                        break;
                case KEY_GROUP:
                        if (p->has_socket_group)
                                canon_printf(&c, "%" PRIu32, (uint32_t) p->socket_group);
                        break;
                case KEY_PACKAGES: {
                        unsigned n = 0;
                        for (PolicyPackage k = 0; k < _POLICY_PACKAGE_MAX; k++)
                                if (p->python_packages & POLICY_PACKAGE_BIT(k))
                                        canon_printf(&c, "%s%s", n++ > 0 ? "," : "", policy_package_to_string(k));
                        break;
                }
                }
                canon_printf(&c, "\n");
        }

        sha256_hex(c.data, c.n, p->sha256);
}

/* ---- loading ---- */

typedef struct Loader {
        yaml_parser_t parser;
        yaml_event_t ev;
        Policy policy;        /* the copy being built */
        size_t lines[_K_MAX]; /* line where each key was set, 0 = not in this document */
        const char *data;
        size_t len;
        size_t n_lines;       /* lines in the document: libyaml reports end of stream one line further */
        const char *last_key; /* for syntax errors: the last key seen */
        char *err;
        size_t errlen;
} Loader;

/* A short, printable, single-line rendering of untrusted text for messages. */
static const char *sanitize(const char *s, size_t n, char buf[static 48]) {
        size_t k = 0;

        for (size_t i = 0; i < n && k < 40; i++) {
                unsigned char ch = (unsigned char) s[i];
                buf[k++] = (ch >= 0x20 && ch < 0x7f) ? (char) ch : '?';
        }
        if (n > 40) {
                memcpy(buf + k, "...", 3);
                k += 3;
        }
        buf[k] = '\0';
        return buf;
}

static int fail(Loader *l, size_t line, const char *key, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(Loader *l, size_t line, const char *key, const char *fmt, ...) {
        va_list ap;
        size_t n = 0;
        int k;

        if (!l->err || l->errlen == 0)
                return -EINVAL;
        l->err[0] = '\0';

        if (line > 0)
                k = snprintf(l->err, l->errlen, "line %zu: ", MIN(line, l->n_lines));
        else
                k = 0;
        if (k > 0)
                n = MIN((size_t) k, l->errlen - 1);
        if (key) {
                k = snprintf(l->err + n, l->errlen - n, "%s: ", key);
                if (k > 0)
                        n = MIN(n + (size_t) k, l->errlen - 1);
        }
        va_start(ap, fmt);
        (void) vsnprintf(l->err + n, l->errlen - n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static size_t line_of_offset(const Loader *l, size_t offset) {
        size_t line = 1;

        offset = MIN(offset, l->len);
        for (size_t i = 0; i < offset; i++)
                if (l->data[i] == '\n')
                        line++;
        return line;
}

static int syntax_error(Loader *l) {
        const yaml_parser_t *y = &l->parser;
        const char *problem = y->problem ?: "malformed document";
        char ctx[128] = "";
        size_t line;

        if (y->error == YAML_MEMORY_ERROR) {
                if (l->err && l->errlen > 0)
                        snprintf(l->err, l->errlen, "out of memory while parsing the policy");
                return -ENOMEM;
        }

        if (y->error == YAML_READER_ERROR)
                line = line_of_offset(l, y->problem_offset);
        else
                line = y->problem_mark.line + 1;

        if (l->last_key)
                snprintf(ctx, sizeof(ctx), " (after key %s)", l->last_key);

        return fail(l, line, NULL, "YAML syntax error: %s%s", problem, ctx);
}

static int next_event(Loader *l) {
        yaml_event_delete(&l->ev);
        if (!yaml_parser_parse(&l->parser, &l->ev))
                return syntax_error(l);
        return 0;
}

static size_t ev_line(const yaml_event_t *ev) {
        return ev->start_mark.line + 1;
}

static const char *event_kind(yaml_event_type_t t) {
        switch (t) {
        case YAML_SCALAR_EVENT:
                return "a scalar";
        case YAML_SEQUENCE_START_EVENT:
                return "a sequence";
        case YAML_MAPPING_START_EVENT:
                return "a mapping";
        case YAML_ALIAS_EVENT:
                return "an alias";
        default:
                return "nothing";
        }
}

/* Anchors, aliases and tags are refused everywhere: the policy is plain data. */
static int check_node(Loader *l, const char *key) {
        const yaml_event_t *ev = &l->ev;
        const yaml_char_t *anchor = NULL, *tag = NULL;

        switch (ev->type) {
        case YAML_ALIAS_EVENT:
                return fail(l, ev_line(ev), key, "aliases are not allowed");
        case YAML_SCALAR_EVENT:
                anchor = ev->data.scalar.anchor;
                tag = ev->data.scalar.tag;
                break;
        case YAML_SEQUENCE_START_EVENT:
                anchor = ev->data.sequence_start.anchor;
                tag = ev->data.sequence_start.tag;
                break;
        case YAML_MAPPING_START_EVENT:
                anchor = ev->data.mapping_start.anchor;
                tag = ev->data.mapping_start.tag;
                break;
        default:
                break;
        }
        if (anchor)
                return fail(l, ev_line(ev), key, "anchors are not allowed");
        if (tag)
                return fail(l, ev_line(ev), key, "tags are not allowed");
        return 0;
}

/* Decimal only: no sign, no leading zeros (YAML 1.1 would read 010 as octal), no
 * underscores, no exponent. Returns -ERANGE on overflow. */
static int parse_decimal(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        if (n == 0 || (n > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                unsigned d;

                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                d = (unsigned) (s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static int scalar_integer(Loader *l, const KeyDef *d, uint64_t min, uint64_t max, uint64_t *ret) {
        const yaml_event_t *ev = &l->ev;
        const char *s = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        char buf[48];
        uint64_t v;
        int r;

        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return fail(l, ev_line(ev), d->key, "expected an unquoted decimal integer, got a quoted string");
        r = parse_decimal(s, n, &v);
        if (r == -ERANGE || (r >= 0 && (v < min || v > max)))
                return fail(l, ev_line(ev), d->key, "value %s out of range %" PRIu64 "..%" PRIu64, sanitize(s, n, buf),
                            min, max);
        if (r < 0)
                return fail(l, ev_line(ev), d->key, "expected a decimal integer, got '%s'", sanitize(s, n, buf));
        *ret = v;
        return 0;
}

static int resolve_group(const char *name, gid_t *ret) {
        long sz = sysconf(_SC_GETGR_R_SIZE_MAX);

        if (sz <= 0)
                sz = 4096;
        for (;;) {
                _cleanup_free_ char *buf = malloc((size_t) sz);
                struct group grp, *result = NULL;
                int r;

                if (!buf)
                        return -ENOMEM;
                r = getgrnam_r(name, &grp, buf, (size_t) sz, &result);
                if (r == ERANGE && sz < 1024 * 1024) {
                        sz *= 2;
                        continue;
                }
                if (r == ENOMEM)
                        return -ENOMEM;
                if (r != 0 || !result)
                        return -ENOENT;
                *ret = grp.gr_gid;
                return 0;
        }
}

static bool valid_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
}

static int parse_group(Loader *l, const KeyDef *d) {
        const yaml_event_t *ev = &l->ev;
        const char *s = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        char buf[48], name[256];
        bool digits = n > 0;
        gid_t gid;
        int r;

        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        digits = false;

        if (digits && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
                uint64_t v;

                r = scalar_integer(l, d, d->min, d->max, &v);
                if (r < 0)
                        return r;
                l->policy.socket_group = (gid_t) v;
                l->policy.has_socket_group = true;
                return 0;
        }

        if (n == 0 || n >= sizeof(name) || s[0] == '-')
                return fail(l, ev_line(ev), d->key, "invalid group name '%s'", sanitize(s, n, buf));
        for (size_t i = 0; i < n; i++)
                if (!valid_name_char(s[i]))
                        return fail(l, ev_line(ev), d->key, "invalid group name '%s'", sanitize(s, n, buf));
        memcpy(name, s, n);
        name[n] = '\0';

        r = resolve_group(name, &gid);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(l, ev_line(ev), d->key, "unknown group '%s'", name);
        if (gid == (gid_t) -1)
                return fail(l, ev_line(ev), d->key, "group '%s' has an invalid gid", name);
        l->policy.socket_group = gid;
        l->policy.has_socket_group = true;
        return 0;
}

/* A sequence's entries, one scalar at a time: sequence_start() checks that the loader
 * stands at a sequence (of `entries`, for the message), then each sequence_next()
 * leaves the next entry in l->ev and returns 1, or returns 0 at the sequence's end. An
 * entry that is not a scalar fails as not being `entry`. */
static int sequence_start(Loader *l, const KeyDef *d, const char *entries) {
        if (l->ev.type != YAML_SEQUENCE_START_EVENT)
                return fail(l, ev_line(&l->ev), d->key, "expected a sequence of %s, got %s", entries,
                            event_kind(l->ev.type));
        return 0;
}

static int sequence_next(Loader *l, const KeyDef *d, const char *entry) {
        int r = next_event(l);

        if (r < 0)
                return r;
        if (l->ev.type == YAML_SEQUENCE_END_EVENT)
                return 0;
        r = check_node(l, d->key);
        if (r < 0)
                return r;
        if (l->ev.type != YAML_SCALAR_EVENT)
                return fail(l, ev_line(&l->ev), d->key, "expected %s, got %s", entry, event_kind(l->ev.type));
        return 1;
}

static int parse_id_list(Loader *l, const KeyDef *d, uint32_t *ids, size_t *n_ids) {
        uint32_t tmp[POLICY_MAX_PEERS];
        size_t n = 0;
        int r;

        r = sequence_start(l, d, "integers");
        if (r < 0)
                return r;
        while ((r = sequence_next(l, d, "an integer list entry")) > 0) {
                uint64_t v;

                if (n >= POLICY_MAX_PEERS)
                        return fail(l, ev_line(&l->ev), d->key, "more than %d entries", POLICY_MAX_PEERS);
                r = scalar_integer(l, d, d->min, d->max, &v);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (tmp[i] == v)
                                return fail(l, ev_line(&l->ev), d->key, "duplicate entry %" PRIu64, v);
                tmp[n++] = (uint32_t) v;
        }
        if (r < 0)
                return r;

        memcpy(ids, tmp, n * sizeof(uint32_t));
        *n_ids = n;
        return 0;
}

/* A sequence of allow-listed package names, each at most once. */
static int parse_packages(Loader *l, const KeyDef *d) {
        uint32_t mask = 0;
        int r;

        r = sequence_start(l, d, "package names");
        if (r < 0)
                return r;
        while ((r = sequence_next(l, d, "a package name")) > 0) {
                const char *s = (const char *) l->ev.data.scalar.value;
                size_t n = l->ev.data.scalar.length;
                char buf[48];
                PolicyPackage p;

                for (p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                        const char *name = policy_package_to_string(p);
                        if (strlen(name) == n && memcmp(s, name, n) == 0)
                                break;
                }
                if (p == _POLICY_PACKAGE_MAX) {
                        char all[POLICY_PACKAGES_NAMES_MAX];
                        policy_packages_format(POLICY_PACKAGE_BIT(_POLICY_PACKAGE_MAX) - 1, all, sizeof all);
                        return fail(l, ev_line(&l->ev), d->key, "'%s' is not in the allow-list (%s)",
                                    sanitize(s, n, buf), all);
                }
                if (mask & POLICY_PACKAGE_BIT(p))
                        return fail(l, ev_line(&l->ev), d->key, "duplicate entry %s", policy_package_to_string(p));
                mask |= POLICY_PACKAGE_BIT(p);
        }
        if (r < 0)
                return r;
        l->policy.python_packages = mask;
        return 0;
}

static int parse_name(Loader *l, const KeyDef *d, const char *s, size_t n) {
        const yaml_event_t *ev = &l->ev;
        char buf[48];

        if (n < d->min || n > d->max)
                return fail(l, ev_line(ev), d->key, "must be %" PRIu64 "..%" PRIu64 " characters long", d->min, d->max);
        for (size_t i = 0; i < n; i++)
                if (!valid_name_char(s[i]))
                        return fail(l, ev_line(ev), d->key, "'%s' contains a character outside [A-Za-z0-9_.-]",
                                    sanitize(s, n, buf));
        memset(l->policy.name, 0, sizeof(l->policy.name));
        memcpy(l->policy.name, s, n);
        return 0;
}

static int parse_integer(Loader *l, const KeyDef *d) {
        uint64_t v;
        int r = scalar_integer(l, d, d->min, d->max, &v);

        if (r < 0)
                return r;
        if (d->type == KEY_U32)
                *field_u32(&l->policy, d) = (uint32_t) v;
        else
                *field_u64(&l->policy, d) = v;
        return 0;
}

/* One of two words: the first gives value a, the second b. */
static int parse_choice(Loader *l, const KeyDef *d, const char *s, size_t n, const char *a, const char *b, int *ret) {
        char buf[48];

        if (strlen(a) == n && memcmp(s, a, n) == 0)
                *ret = 0;
        else if (strlen(b) == n && memcmp(s, b, n) == 0)
                *ret = 1;
        else
                return fail(l, ev_line(&l->ev), d->key, "expected %s or %s, got '%s'", a, b, sanitize(s, n, buf));
        return 0;
}

static int parse_value(Loader *l, const KeyDef *d) {
        const yaml_event_t *ev = &l->ev;
        const char *s;
        size_t n;
        int r, choice;

        r = next_event(l);
        if (r < 0)
                return r;
        r = check_node(l, d->key);
        if (r < 0)
                return r;

        if (d->type == KEY_UID_LIST)
                return parse_id_list(l, d, l->policy.allowed_uids, &l->policy.n_allowed_uids);
        if (d->type == KEY_GID_LIST)
                return parse_id_list(l, d, l->policy.allowed_gids, &l->policy.n_allowed_gids);
        if (d->type == KEY_PACKAGES)
                return parse_packages(l, d);

        if (ev->type != YAML_SCALAR_EVENT)
                return fail(l, ev_line(ev), d->key, "expected a scalar value, got %s", event_kind(ev->type));
        s = (const char *) ev->data.scalar.value;
        n = ev->data.scalar.length;

        switch (d->type) {
        case KEY_NAME:
                return parse_name(l, d, s, n);
        case KEY_U32:
        case KEY_U64:
                return parse_integer(l, d);
        case KEY_DENY:
                if ((r = parse_choice(l, d, s, n, "errno", "kill", &choice)) < 0)
                        return r;
                l->policy.seccomp_deny = choice ? POLICY_DENY_KILL : POLICY_DENY_ERRNO;
                return 0;
        case KEY_START:
                if ((r = parse_choice(l, d, s, n, "exec", "zygote", &choice)) < 0)
                        return r;
                l->policy.worker_start = choice ? POLICY_WORKER_START_ZYGOTE : POLICY_WORKER_START_EXEC;
                return 0;
        case KEY_CGROUPS:
                for (PolicyCgroups c = POLICY_CGROUPS_AUTO; c <= POLICY_CGROUPS_OFF; c++) {
                        const char *name = policy_cgroups_to_string(c);
                        if (strlen(name) == n && memcmp(s, name, n) == 0) {
                                l->policy.cgroups = c;
                                return 0;
                        }
                }
                {
                        char buf[48];
                        return fail(l, ev_line(ev), d->key, "expected auto, required or off, got '%s'",
                                    sanitize(s, n, buf));
                }
        case KEY_GROUP:
                return parse_group(l, d);
        case KEY_UID_LIST:
        case KEY_GID_LIST:
        case KEY_PACKAGES:
                break;
        }
        return fail(l, ev_line(ev), d->key, "internal error: unhandled key type");
}

static const KeyDef *find_key(const char *s, size_t n) {
        for (size_t i = 0; i < _K_MAX; i++)
                if (strlen(keys[i].key) == n && memcmp(keys[i].key, s, n) == 0)
                        return &keys[i];
        return NULL;
}

static int parse_mapping(Loader *l) {
        int r;

        for (;;) {
                const KeyDef *d;
                const char *s;
                size_t n, line, id;
                char buf[48];

                r = next_event(l);
                if (r < 0)
                        return r;
                if (l->ev.type == YAML_MAPPING_END_EVENT)
                        return 0;
                line = ev_line(&l->ev);
                if (l->ev.type == YAML_ALIAS_EVENT)
                        return fail(l, line, NULL, "aliases are not allowed%s%s%s", l->last_key ? " (after key " : "",
                                    l->last_key ?: "", l->last_key ? ")" : "");
                if (l->ev.type != YAML_SCALAR_EVENT)
                        return fail(l, line, NULL, "expected a key, got %s%s%s%s", event_kind(l->ev.type),
                                    l->last_key ? " (after key " : "", l->last_key ?: "", l->last_key ? ")" : "");

                s = (const char *) l->ev.data.scalar.value;
                n = l->ev.data.scalar.length;
                r = check_node(l, sanitize(s, n, buf));
                if (r < 0)
                        return r;
                d = find_key(s, n);
                if (!d)
                        return fail(l, line, NULL, "unknown key '%s'", sanitize(s, n, buf));
                id = (size_t) (d - keys);
                if (l->lines[id] > 0)
                        return fail(l, line, d->key, "duplicate key (first set on line %zu)", l->lines[id]);
                l->lines[id] = line;
                l->last_key = d->key;

                r = parse_value(l, d);
                if (r < 0)
                        return r;
        }
}

/* Names the key of the pair that was set later in this document (its line),
 * since that is where the inconsistency was introduced. */
static int fail_pair(Loader *l, KeyId a, KeyId b, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_pair(Loader *l, KeyId a, KeyId b, const char *fmt, ...) {
        KeyId k = l->lines[b] > l->lines[a] ? b : a;
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return fail(l, l->lines[k], keys[k].key, "%s", msg);
}

static int check_cross(Loader *l) {
        const Policy *p = &l->policy;
        uint64_t need;

        /* An exec request carries the code as UTF-8, at most 4 bytes per character. */
        need = (uint64_t) p->max_code_characters * 4 + POLICY_FRAME_OVERHEAD;
        if (need > p->max_message_bytes)
                return fail_pair(l, K_MAX_MESSAGE_BYTES, K_MAX_CODE_CHARACTERS,
                                 "maxMessageBytes (%" PRIu32 ") must be at least maxCodeCharacters * 4 + %d (%" PRIu64
                                 ")",
                                 p->max_message_bytes, POLICY_FRAME_OVERHEAD, need);

        /* A source.put carries one source: its text and original together are at most maxSourceBytes. */
        need = p->max_source_bytes + POLICY_FRAME_OVERHEAD;
        if (need > p->max_message_bytes)
                return fail_pair(l, K_MAX_MESSAGE_BYTES, K_MAX_SOURCE_BYTES,
                                 "maxMessageBytes (%" PRIu32 ") must be at least maxSourceBytes + %d (%" PRIu64 ")",
                                 p->max_message_bytes, POLICY_FRAME_OVERHEAD, need);

        if (p->max_source_bytes > p->max_invocation_bytes)
                return fail_pair(l, K_MAX_INVOCATION_BYTES, K_MAX_SOURCE_BYTES,
                                 "maxInvocationBytes (%" PRIu64 ") must be at least maxSourceBytes (%" PRIu64 ")",
                                 p->max_invocation_bytes, p->max_source_bytes);

        /* One complete result must fit in a connection's reply queue. */
        if (p->max_result_bytes > p->max_connection_output_bytes)
                return fail_pair(l, K_MAX_CONNECTION_OUTPUT_BYTES, K_MAX_RESULT_BYTES,
                                 "maxConnectionOutputBytes (%" PRIu64 ") must be at least maxResultBytes (%" PRIu32 ")",
                                 p->max_connection_output_bytes, p->max_result_bytes);

        /* One peer's share of the connections: below the whole, so one peer cannot take them all.
         * Not set in the file, it is the default or the whole, whichever is smaller (a
         * file from before the key that lowers maxConnections keeps loading). */
        if (l->lines[K_MAX_CONNECTIONS_PER_PEER] == 0 && p->max_connections_per_peer > p->max_connections)
                l->policy.max_connections_per_peer = p->max_connections;
        if (p->max_connections_per_peer > p->max_connections)
                return fail_pair(l, K_MAX_CONNECTIONS, K_MAX_CONNECTIONS_PER_PEER,
                                 "maxConnectionsPerPeer (%" PRIu32 ") must be at most maxConnections (%" PRIu32 ")",
                                 p->max_connections_per_peer, p->max_connections);

        /* The last host id of the block must be a real id: (uid_t) -1 means "no change". */
        if ((uint64_t) p->worker_host_id_base + p->worker_host_id_count > UINT32_MAX)
                return fail_pair(l, K_WORKER_HOST_ID_COUNT, K_WORKER_HOST_ID_BASE,
                                 "workerHostIdBase + workerHostIdCount (%" PRIu64 ") must be at most %" PRIu32,
                                 (uint64_t) p->worker_host_id_base + p->worker_host_id_count, UINT32_MAX);
        return 0;
}

static bool is_null_scalar(const yaml_event_t *ev) {
        return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.length == 0 &&
               ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.anchor && !ev->data.scalar.tag;
}

static int load_document(Loader *l) {
        int r;

        r = next_event(l);
        if (r < 0)
                return r;
        if (l->ev.type != YAML_STREAM_START_EVENT)
                return fail(l, ev_line(&l->ev), NULL, "malformed YAML stream");

        r = next_event(l);
        if (r < 0)
                return r;
        if (l->ev.type == YAML_STREAM_END_EVENT)
                return 0; /* empty, or only comments */
        if (l->ev.type != YAML_DOCUMENT_START_EVENT)
                return fail(l, ev_line(&l->ev), NULL, "malformed YAML stream");

        r = next_event(l);
        if (r < 0)
                return r;
        if (is_null_scalar(&l->ev)) {
                /* "---" alone: an empty document, keep everything. */
        } else {
                r = check_node(l, NULL);
                if (r < 0)
                        return r;
                if (l->ev.type != YAML_MAPPING_START_EVENT)
                        return fail(l, ev_line(&l->ev), NULL,
                                    "the document must be a mapping of keys to values, got %s", event_kind(l->ev.type));
                r = parse_mapping(l);
                if (r < 0)
                        return r;
        }

        r = next_event(l);
        if (r < 0)
                return r;
        if (l->ev.type != YAML_DOCUMENT_END_EVENT)
                return fail(l, ev_line(&l->ev), NULL, "malformed YAML document");

        r = next_event(l);
        if (r < 0)
                return r;
        if (l->ev.type != YAML_STREAM_END_EVENT)
                return fail(l, ev_line(&l->ev), NULL, "only one YAML document is allowed");
        return 0;
}

int policy_load_string(Policy *p, const char *data, size_t len, char *err, size_t errlen) {
        Loader *l;
        int r;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!p || (!data && len > 0))
                return -EINVAL;

        if (len > POLICY_DOCUMENT_MAX) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "policy document larger than %d bytes", POLICY_DOCUMENT_MAX);
                return -EINVAL;
        }

        /* The loader is a few KiB (parser state, the policy copy): keep it off the stack. */
        l = calloc(1, sizeof(Loader));
        if (!l)
                return -ENOMEM;
        l->policy = *p;
        l->data = data ?: "";
        l->len = len;
        l->n_lines = line_of_offset(l, len) - (len > 0 && l->data[len - 1] == '\n');
        l->n_lines = MAX(l->n_lines, (size_t) 1);
        l->err = err;
        l->errlen = errlen;

        if (!yaml_parser_initialize(&l->parser)) {
                free(l);
                return -ENOMEM;
        }
        yaml_parser_set_input_string(&l->parser, (const unsigned char *) l->data, len);

        r = load_document(l);
        if (r >= 0)
                r = check_cross(l);
        if (r >= 0) {
                policy_finalize(&l->policy);
                *p = l->policy;
        }

        yaml_event_delete(&l->ev);
        yaml_parser_delete(&l->parser);
        free(l);
        return r < 0 ? r : 0;
}

int policy_load_file(Policy *p, const char *path, char *err, size_t errlen) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, cap = POLICY_DOCUMENT_MAX + 1;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!p || !path)
                return -EINVAL;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;
                if (err && errlen > 0)
                        snprintf(err, errlen, "cannot open %s: %m", path);
                return r;
        }

        buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        while (n < cap) {
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0) {
                        int r = -errno;
                        if (r == -EINTR)
                                continue;
                        if (err && errlen > 0)
                                snprintf(err, errlen, "cannot read %s: %m", path);
                        return r;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        if (n > POLICY_DOCUMENT_MAX) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "%s: policy file larger than %d bytes", path, POLICY_DOCUMENT_MAX);
                return -EFBIG;
        }

        return policy_load_string(p, buf, n, err, errlen);
}
