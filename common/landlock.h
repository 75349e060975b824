/* SPDX-License-Identifier: MIT */
/* The Landlock ABI this kernel offers, asked by the worker and the supervisor. */
#pragma once

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The Landlock ABI version this kernel offers, 0 if none (the worker then runs
 * without that layer). Asked by the worker before it builds its fence, and by the
 * supervisor for check-config and each result's evidence. */
static inline int landlock_abi(void) {
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : (int) abi;
}
