/* SPDX-License-Identifier: MIT */
/* The policy's key table as the loader sees it: each key's type, range and field in Policy
 * (the table itself is in policy/policy.c, the loader in policy/policy_load.c). Private to
 * policy/. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* A policy document larger than this is refused (it is a few dozen lines). */
#define POLICY_DOCUMENT_MAX (1024 * 1024)

/* Bytes reserved for a frame's envelope (type, ids, lengths) in the cross checks. */
#define POLICY_FRAME_OVERHEAD 4096

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

/* keys[] of policy/policy.c, indexed by KeyId. */
extern const KeyDef *const policy_key_defs;

static inline uint32_t *field_u32(Policy *p, const KeyDef *d) {
        return (uint32_t *) ((uint8_t *) p + d->offset);
}

static inline uint64_t *field_u64(Policy *p, const KeyDef *d) {
        return (uint64_t *) ((uint8_t *) p + d->offset);
}

static inline uint32_t get_u32(const Policy *p, const KeyDef *d) {
        return *(const uint32_t *) ((const uint8_t *) p + d->offset);
}

static inline uint64_t get_u64(const Policy *p, const KeyDef *d) {
        return *(const uint64_t *) ((const uint8_t *) p + d->offset);
}
