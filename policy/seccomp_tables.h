/* SPDX-License-Identifier: MIT */
/* The worker's seccomp tables (policy/seccomp_tables.c), read by the filter builder
 * (policy/seccomp.c) and by nothing else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Answered with a fixed errno in both modes (never killed). */
typedef struct SeccompFixedErrno {
        int nr;
        int error;
} SeccompFixedErrno;

extern const int seccomp_allow[]; /* allowed unconditionally */
extern const int seccomp_deny[];  /* dangerous: EPERM, or kill in kill mode */
extern const SeccompFixedErrno seccomp_unsupported[];
extern const int seccomp_late[]; /* denied to the call, used between a worker's two filters */
extern const size_t seccomp_allow_count, seccomp_deny_count, seccomp_unsupported_count, seccomp_late_count;

/* Each syscall in exactly one table (the conditional ones included), each a real x86_64
 * number; the late ones listed once, each in a table but not the allow table, none
 * personality. 0, -EINVAL (a pseudo-syscall, or a late one that cannot be) or
 * -ENOTUNIQ. */
int seccomp_tables_check(void);
/* nr is in seccomp_late[]. */
bool seccomp_is_late(int nr);
