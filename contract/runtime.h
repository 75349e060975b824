/* SPDX-License-Identifier: MIT */
/* The embedded Python's runtime paths, chosen at configure time (cmake/python.cmake,
 * CODEINTERP_PY_RUNTIME): what a worker binds read-only into its root at the same
 * paths (worker/sandbox.c) and what codeinterpd --check-config reports. */
#pragma once

#include <limits.h>

/* The binds, in order, and the directories below them that the worker hides under an
 * empty read-only tmpfs (the interpreter's site-packages, when a bind contains it). */
extern const char runtime_binds[];
extern const char runtime_masks[];

/* The next path of list: 1 and the path in ret_path, 0 after the last, -EINVAL on a
 * malformed entry (empty, relative or too long). *cursor starts NULL. */
int runtime_path_next(const char *list, const char **cursor, char ret_path[static PATH_MAX]);
