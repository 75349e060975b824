/* SPDX-License-Identifier: MIT */
#include "contract/runtime.h"

#include <errno.h>
#include <string.h>

#ifndef CODEINTERP_PY_RUNTIME
#error "CODEINTERP_PY_RUNTIME (':'-separated paths) must be defined by the build"
#endif

static const char runtime_paths[] = CODEINTERP_PY_RUNTIME;

int runtime_path_next(const char **cursor, char ret_path[static PATH_MAX]) {
        const char *p = *cursor ?: runtime_paths, *end;
        size_t len;

        if (!*p)
                return 0;
        end = strchrnul(p, ':');
        len = (size_t) (end - p);
        if (len == 0 || len >= PATH_MAX || p[0] != '/')
                return -EINVAL;
        memcpy(ret_path, p, len);
        ret_path[len] = 0;
        *cursor = *end ? end + 1 : end;
        return 1;
}
