/* SPDX-License-Identifier: MIT */
/* The embedded Python's runtime paths, chosen at configure time (cmake/python.cmake,
 * CODEINTERP_PY_RUNTIME): what a worker binds read-only into its root at the same
 * paths (worker/sandbox.c) and what codeinterpd --check-config reports. */
#pragma once

#include <limits.h>
#include <stdint.h>

#include "policy/policy.h"

/* The binds, in order, and the directories below them that the worker hides under an
 * empty read-only tmpfs (the interpreter's site-packages, when a bind contains it). */
extern const char runtime_binds[];
extern const char runtime_masks[];

/* The next path of list: 1 and the path in ret_path, 0 after the last, -EINVAL on a
 * malformed entry (empty, relative or too long). *cursor starts NULL. */
int runtime_path_next(const char *list, const char **cursor, char ret_path[static PATH_MAX]);

/* The pythonPackages allow-list as this build's interpreter has it (configure time,
 * cmake/python_packages.py): per package, the site directories its import needs on
 * sys.path, the read-only binds beyond runtime_binds, and the libraries to dlopen()
 * by their real path before the first import (their soname's symlink leads out of
 * the root: Debian's alternatives), the environment its import needs ("" when
 * missing); missing is NULL or why. */
typedef struct RuntimePackage {
        const char *sites;   /* ':'-separated */
        const char *binds;   /* ':'-separated */
        const char *preload; /* ':'-separated */
        const char *env;     /* ':'-separated NAME=VALUE: the worker's environment (MATPLOTLIBRC) */
        const char *missing; /* NULL when available */
} RuntimePackage;
extern const RuntimePackage runtime_packages[_POLICY_PACKAGE_MAX];

/* The first package of mask this build cannot provide: 1 and it in *ret_package, or 0. */
int runtime_packages_missing(uint32_t mask, PolicyPackage *ret_package);

/* Which list of a RuntimePackage. */
typedef enum RuntimeList {
        RUNTIME_SITES,
        RUNTIME_BINDS,
        RUNTIME_PRELOAD,
} RuntimeList;

/* The next path of list which of the packages in mask, in allow-list order (a path two
 * packages name comes twice): 1 and the path in ret_path, its package in *package; 0
 * after the last, -EINVAL on a malformed entry. *package and *cursor start at 0 and NULL. */
int runtime_package_path_next(uint32_t mask, RuntimeList which, PolicyPackage *package, const char **cursor,
                              char ret_path[static PATH_MAX]);

/* The next bind of the packages in mask, each path once, in allow-list order: 1 and
 * the path in ret_path, 0 after the last, -EINVAL on a malformed entry. *package and
 * *cursor start at 0 and NULL. */
int runtime_package_bind_next(uint32_t mask, PolicyPackage *package, const char **cursor,
                              char ret_path[static PATH_MAX]);
