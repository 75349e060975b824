/* SPDX-License-Identifier: MIT */
#include "contract/runtime.h"

#include <errno.h>
#include <string.h>

#if !defined(CODEINTERP_PY_RUNTIME) || !defined(CODEINTERP_PY_MASK)
#error "CODEINTERP_PY_RUNTIME and CODEINTERP_PY_MASK (':'-separated paths) must be defined by the build"
#endif

const char runtime_binds[] = CODEINTERP_PY_RUNTIME;
const char runtime_masks[] = CODEINTERP_PY_MASK;

int runtime_path_next(const char *list, const char **cursor, char ret_path[static PATH_MAX]) {
        const char *p = *cursor ?: list, *end;
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
