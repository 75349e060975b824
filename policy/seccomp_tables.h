/* SPDX-License-Identifier: MIT */
/* The worker's seccomp tables (policy/seccomp_tables.c), read by the filter builder
 * (policy/seccomp.c) and by nothing else. */
#pragma once

#include <stddef.h>

/* Answered with a fixed errno in both modes (never killed). */
typedef struct SeccompFixedErrno {
        int nr;
        int error;
} SeccompFixedErrno;

extern const int seccomp_allow[]; /* allowed unconditionally */
extern const int seccomp_deny[];  /* dangerous: EPERM, or kill in kill mode */
extern const SeccompFixedErrno seccomp_unsupported[];
extern const size_t seccomp_allow_count, seccomp_deny_count, seccomp_unsupported_count;

/* Each syscall in exactly one table (the conditional ones included), each a real x86_64
 * number. 0, -EINVAL (a pseudo-syscall) or -ENOTUNIQ. */
int seccomp_tables_check(void);
