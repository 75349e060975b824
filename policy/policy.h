/* SPDX-License-Identifier: MIT */
/* The reviewed configuration. Pure data: defaults equal the reviewed profile,
 * policy_load_file() overlays a YAML file, and the digest of the effective
 * values goes into every result's evidence. Documented key by key in docs/policy.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define POLICY_MAX_PEERS 32
#define POLICY_NAME_MAX 64
/* The default block of workers' host ids: high above login.defs' UID_MAX and the usual
 * /etc/subuid ranges, below 2^31 (ids that read as negative in signed code) and clear of
 * systemd's container (0x80000-0x6fffffff) and foreign (0x7ffe0000-0x7ffeffff) ranges. */
#define POLICY_HOST_ID_BASE_DEFAULT 0x7ff00000U
#define POLICY_HOST_ID_COUNT_MAX 1048576
#define POLICY_CPU_BANDWIDTH_PERCENT_MAX 102400 /* cpuBandwidthPercent: 1024 CPUs */

typedef enum PolicyDenyAction {
        POLICY_DENY_ERRNO, /* denied syscalls fail with EPERM (or ENOSYS when unknown) */
        POLICY_DENY_KILL,  /* denied syscalls kill the worker */
} PolicyDenyAction;

typedef enum PolicyWorkerStart {
        POLICY_WORKER_START_EXEC,   /* exec a fresh worker binary, initialise CPython per call */
        POLICY_WORKER_START_ZYGOTE, /* clone from a pre-initialised interpreter */
} PolicyWorkerStart;

typedef enum PolicyCgroups {
        POLICY_CGROUPS_AUTO,     /* a cgroup per worker when the hierarchy is writable, else none */
        POLICY_CGROUPS_REQUIRED, /* refuse to start without one */
        POLICY_CGROUPS_OFF,      /* never */
} PolicyCgroups;

/* The pythonPackages allow-list: the packages a policy may make importable (read-only,
 * bound into the worker's root; docs/policy.md). New entries go at the end, after the
 * packages they import (the zygote preloads them in this order), and in the same order
 * as ALLOW in cmake/python_packages.py. */
typedef enum PolicyPackage {
        POLICY_PACKAGE_NUMPY,
        POLICY_PACKAGE_PANDAS,
        POLICY_PACKAGE_MATPLOTLIB,
        POLICY_PACKAGE_SCIPY,
        POLICY_PACKAGE_SKLEARN, /* scikit-learn */
        POLICY_PACKAGE_STATSMODELS,
        POLICY_PACKAGE_SYMPY,
        POLICY_PACKAGE_SEABORN,
        POLICY_PACKAGE_OPENPYXL,
        POLICY_PACKAGE_TABULATE,
        _POLICY_PACKAGE_MAX,
} PolicyPackage;
#define POLICY_PACKAGE_BIT(p) (UINT32_C(1) << (p))

/* The most workers a zygote keeps pre-started (zygotePoolSize's range): the zygote's
 * pool array is this long (worker/zygote.c). */
#define POLICY_ZYGOTE_POOL_SIZE_MAX 64

typedef struct Policy {
        char name[POLICY_NAME_MAX]; /* name: "code_interpreter" */

        /* The call contract (the chapter's reviewed profile). */
        uint32_t max_calls;             /* maxCalls: 10, per invocation */
        uint32_t timeout_ms;            /* timeoutMs: 30000, from admission, includes queueing */
        uint32_t max_code_characters;   /* maxCodeCharacters: 20000 Unicode characters */
        uint32_t max_output_characters; /* maxOutputCharacters: 64000 per channel */
        uint32_t max_result_bytes;      /* maxResultBytes: 262144, whole encoded result message */

        /* Sandbox limits. */
        uint64_t memory_bytes;         /* memoryBytes: RLIMIT_AS, 536870912 */
        uint32_t cpu_seconds;          /* cpuSeconds: RLIMIT_CPU (soft = hard), 30 */
        uint64_t file_bytes;           /* maxFileBytes: RLIMIT_FSIZE, 16777216 */
        uint32_t open_files;           /* maxOpenFiles: RLIMIT_NOFILE, 64 */
        uint32_t processes;            /* maxProcesses: RLIMIT_NPROC (threads), 16 */
        uint64_t tmp_bytes;            /* tmpBytes: size of the /tmp tmpfs, 16777216 */
        uint32_t max_artifacts;        /* maxArtifacts: files kept from /outputs, 16; 0 = no /outputs */
        uint64_t max_artifact_bytes;   /* maxArtifactBytes: size of the /outputs tmpfs, 8388608 */
        uid_t worker_uid;              /* workerUid: the uid the worker has inside its user namespace, 65534 */
        gid_t worker_gid;              /* workerGid: the gid inside, 65534 */
        PolicyDenyAction seccomp_deny; /* seccompDenyAction: errno | kill; errno */

        /* Supervisor bounds. */
        uint32_t max_message_bytes;           /* maxMessageBytes: one client frame, 8388608 */
        uint32_t max_worker_message_bytes;    /* maxWorkerMessageBytes: one worker report, 1048576 */
        uint32_t max_connections;             /* maxConnections: 64 */
        uint64_t max_connection_output_bytes; /* maxConnectionOutputBytes: unsent replies per connection, 16777216 */
        uint32_t max_connections_per_peer;    /* maxConnectionsPerPeer: open connections of one peer uid, 16;
                                               * at most maxConnections */
        uint32_t connection_idle_timeout_ms;  /* connectionIdleTimeoutMs: a connection without an invocation or
                                               * a call, and silent this long, is closed; 30000 */

        /* Peers. Empty allowed lists mean: the supervisor's own uid and root. */
        uid_t allowed_uids[POLICY_MAX_PEERS]; /* allowedUids: [] */
        size_t n_allowed_uids;
        gid_t allowed_gids[POLICY_MAX_PEERS]; /* allowedGids: [] */
        size_t n_allowed_gids;
        bool has_socket_group; /* socketGroup: group name or gid; socket becomes 0660 */
        gid_t socket_group;

        /* Invocations and sources. */
        uint32_t max_invocations_per_connection; /* maxInvocationsPerConnection: 16 */
        uint32_t max_sources_per_invocation;     /* maxSourcesPerInvocation: 64 */
        uint64_t max_source_bytes;               /* maxSourceBytes: 4194304, per source (text + original) */
        uint64_t max_invocation_bytes;           /* maxInvocationBytes: 33554432, all sources of one invocation */
        uint32_t invocation_ttl_ms;              /* invocationIdleTtlMs: 3600000 */

        /* Scheduler. */
        uint32_t max_active_workers;         /* maxActiveWorkers: 0 = number of online CPUs */
        uint32_t max_queued_calls;           /* maxQueuedCalls: 256, process-wide */
        uint32_t heartbeat_ms;               /* heartbeatMs: 1000, running progress interval */
        uint64_t min_available_memory_bytes; /* minAvailableMemoryBytes: 0 = no memory gate */

        /* Worker start. */
        PolicyWorkerStart worker_start; /* workerStart: exec | zygote; zygote */
        uint32_t zygote_max_calls;      /* zygoteMaxCalls: 10000, then a new zygote replaces it */
        uint32_t zygote_max_seconds;    /* zygoteMaxSeconds: 3600 */
        uint32_t zygote_pool_size;      /* zygotePoolSize: 2 workers kept pre-started, 0 = none; at most
                                         * POLICY_ZYGOTE_POOL_SIZE_MAX */

        /* Socket activation. */
        uint32_t idle_exit_seconds; /* idleExitSeconds: 0 = never; exit when idle this long (activated socket only) */

        /* Per-worker cgroups. */
        PolicyCgroups cgroups;          /* cgroups: auto | required | off; auto */
        uint32_t cpu_bandwidth_percent; /* cpuBandwidthPercent: each worker's CPU cap, % of one CPU; 0 = off */

        /* The scientific stack. */
        uint32_t python_packages; /* pythonPackages: POLICY_PACKAGE_BIT() of each listed package; [] */

        /* The host ids of workers: each live worker has one of its own (supervisor/worker_ids.h). */
        uint32_t worker_host_id_base;  /* workerHostIdBase: first host uid and gid of the block, 0x7ff00000 */
        uint32_t worker_host_id_count; /* workerHostIdCount: ids in the block (live workers at most), 65536 */

        /* Readiness (status, `codeinterp status --ready`). */
        uint32_t unready_after_start_failures; /* unreadyAfterStartFailures: worker starts failed in a row that
                                                * make the supervisor not ready, 3; 0 = never */

        char sha256[65]; /* hex digest of the effective values, filled by policy_finalize() */
} Policy;

/* Fill *p with the reviewed profile's defaults (and compute the digest). */
void policy_init_defaults(Policy *p);

/* Overlay the YAML document in `data` on *p. On failure returns -EINVAL (or -ENOMEM)
 * and writes a one-line message naming the offending key into err. *p is only
 * modified on success. */
int policy_load_string(Policy *p, const char *data, size_t len, char *err, size_t errlen);

/* Read the file and call policy_load_string(). -errno if the file cannot be read. */
int policy_load_file(Policy *p, const char *path, char *err, size_t errlen);

/* Recompute p->sha256 from the effective values (canonical "key=value\n" lines in key order). */
void policy_finalize(Policy *p);

/* Number of workers that may be alive at once (resolves 0 to the online CPU count). */
uint32_t policy_active_workers(const Policy *p);

/* A call's limits, in the key table's order: the one list that hello and every
 * result's evidence report (the table marks which keys are limits). */
#define POLICY_MAX_LIMITS 24
typedef struct PolicyLimit {
        const char *key; /* the policy key, which is also the wire name */
        uint64_t value;
} PolicyLimit;
size_t policy_limits(const Policy *p, PolicyLimit ret[static POLICY_MAX_LIMITS]);

/* Reload: keys that are read once at start (workerStart, workerUid, workerGid, the host id block,
 * socketGroup, the zygote keys, cgroups, cpuBandwidthPercent, pythonPackages) keep their running
 * values. Copies each such key that differs from running into p, names it in ret_changed,
 * recomputes the digest if any did, and returns how many. */
#define POLICY_MAX_RESTART_KEYS 18
int policy_keep_restart_keys(Policy *p, const Policy *running, const char *ret_changed[static POLICY_MAX_RESTART_KEYS]);
bool policy_key_needs_restart(const char *key);

/* A policy shared by reference: the supervisor's current policy, and the one each call
 * was admitted under, which stays alive (and unchanged) until the call is freed. */
typedef struct PolicySnapshot {
        unsigned n_ref;
        Policy policy;
} PolicySnapshot;
/* A snapshot (one reference) holding a copy of *p. */
int policy_snapshot_new(const Policy *p, PolicySnapshot **ret);
PolicySnapshot *policy_snapshot_ref(PolicySnapshot *s);
PolicySnapshot *policy_snapshot_unref(PolicySnapshot *s);

const char *policy_deny_action_to_string(PolicyDenyAction a);
const char *policy_worker_start_to_string(PolicyWorkerStart s);
const char *policy_cgroups_to_string(PolicyCgroups c);
const char *policy_package_to_string(PolicyPackage p);
/* The packages of mask as "numpy, pandas" (allow-list order; "" when none). */
/* The names in mask, in allow-list order, joined with ", ": the whole allow-list fits in
 * POLICY_PACKAGES_NAMES_MAX (test_policy checks it). */
#define POLICY_PACKAGES_NAMES_MAX 160
void policy_packages_format(uint32_t mask, char *buf, size_t size);
