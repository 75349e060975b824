/* SPDX-License-Identifier: MIT */
/* The reviewed configuration: the key table, the defaults, snapshots and the digest of
 * the effective values; the strict YAML overlay is read by policy/policy_load.c. Keys,
 * ranges and the digest rule are documented in docs/policy.md; the key table below is
 * the single source of truth for the ranges and for the digest's key order. */
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

#include "common/cleanup.h"
#include "common/sha256.h"
#include "policy/policy_keys.h"

/* Upper bound for byte quantities that have no narrower natural limit: 1 TiB. */
#define BYTES_1T UINT64_C(1099511627776)
#define MIB(n) (UINT64_C(n) * 1024 * 1024)
#define GIB(n) (UINT64_C(n) * 1024 * 1024 * 1024)

_Static_assert(sizeof(uid_t) == sizeof(uint32_t) && (uid_t) -1 > 0, "uid_t must be an unsigned 32-bit type");
_Static_assert(sizeof(gid_t) == sizeof(uint32_t) && (gid_t) -1 > 0, "gid_t must be an unsigned 32-bit type");

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

/* The table, for the loader (policy/policy_load.c). */
const KeyDef *const policy_key_defs = keys;

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

DEFINE_TRIVIAL_REF_UNREF_FUNC(PolicySnapshot, policy_snapshot, free);

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
