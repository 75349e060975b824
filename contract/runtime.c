/* SPDX-License-Identifier: MIT */
/* The embedded Python's runtime paths and each package's binds (contract/runtime.h), from
 * what the build defines. */
#include "contract/runtime.h"

#include <errno.h>
#include <string.h>

#if !defined(CODEINTERP_PY_RUNTIME) || !defined(CODEINTERP_PY_MASK)
#error "CODEINTERP_PY_RUNTIME and CODEINTERP_PY_MASK (':'-separated paths) must be defined by the build"
#endif

#if !defined(CODEINTERP_PY_PKG_NUMPY_BINDS) || !defined(CODEINTERP_PY_PKG_PANDAS_BINDS) ||                             \
        !defined(CODEINTERP_PY_PKG_MATPLOTLIB_BINDS) || !defined(CODEINTERP_PY_PKG_TABULATE_BINDS)
#error "CODEINTERP_PY_PKG_<NAME>_SITES, _BINDS and _MISSING must be defined by the build (cmake/python.cmake)"
#endif

const char runtime_binds[] = CODEINTERP_PY_RUNTIME;
const char runtime_masks[] = CODEINTERP_PY_MASK;

#define PACKAGE(name)                                                                                                  \
        {                                                                                                              \
                .sites = CODEINTERP_PY_PKG_##name##_SITES, .binds = CODEINTERP_PY_PKG_##name##_BINDS,                  \
                .preload = CODEINTERP_PY_PKG_##name##_PRELOAD, .env = CODEINTERP_PY_PKG_##name##_ENV,                  \
                .missing = CODEINTERP_PY_PKG_##name##_MISSING[0] ? CODEINTERP_PY_PKG_##name##_MISSING : NULL,          \
        }
const RuntimePackage runtime_packages[_POLICY_PACKAGE_MAX] = {
        [POLICY_PACKAGE_NUMPY] = PACKAGE(NUMPY),           [POLICY_PACKAGE_PANDAS] = PACKAGE(PANDAS),
        [POLICY_PACKAGE_MATPLOTLIB] = PACKAGE(MATPLOTLIB), [POLICY_PACKAGE_SCIPY] = PACKAGE(SCIPY),
        [POLICY_PACKAGE_SKLEARN] = PACKAGE(SKLEARN),       [POLICY_PACKAGE_STATSMODELS] = PACKAGE(STATSMODELS),
        [POLICY_PACKAGE_SYMPY] = PACKAGE(SYMPY),           [POLICY_PACKAGE_SEABORN] = PACKAGE(SEABORN),
        [POLICY_PACKAGE_OPENPYXL] = PACKAGE(OPENPYXL),     [POLICY_PACKAGE_TABULATE] = PACKAGE(TABULATE),
};

int runtime_packages_missing(uint32_t mask, PolicyPackage *ret_package) {
        for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++)
                if ((mask & POLICY_PACKAGE_BIT(p)) && runtime_packages[p].missing) {
                        *ret_package = p;
                        return 1;
                }
        return 0;
}

static const char *runtime_list(const RuntimePackage *p, RuntimeList which) {
        switch (which) {
        case RUNTIME_SITES:
                return p->sites;
        case RUNTIME_BINDS:
                return p->binds;
        case RUNTIME_PRELOAD:
                return p->preload;
        }
        return "";
}

int runtime_package_path_next(uint32_t mask, RuntimeList which, PolicyPackage *package, const char **cursor,
                              char ret_path[static PATH_MAX]) {
        int r;

        for (; *package < _POLICY_PACKAGE_MAX; (*package)++, *cursor = NULL) {
                if (!(mask & POLICY_PACKAGE_BIT(*package)))
                        continue;
                r = runtime_path_next(runtime_list(&runtime_packages[*package], which), cursor, ret_path);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Whether path is among the binds of an earlier package of mask. */
static int bound_before(uint32_t mask, PolicyPackage upto, const char *path) {
        PolicyPackage p = 0;
        const char *cursor = NULL;
        char other[PATH_MAX];
        int r;

        while ((r = runtime_package_path_next(mask, RUNTIME_BINDS, &p, &cursor, other)) > 0 && p < upto)
                if (strcmp(other, path) == 0)
                        return 1;
        return r < 0 && p < upto ? r : 0;
}

int runtime_package_bind_next(uint32_t mask, PolicyPackage *package, const char **cursor,
                              char ret_path[static PATH_MAX]) {
        int r;

        while ((r = runtime_package_path_next(mask, RUNTIME_BINDS, package, cursor, ret_path)) > 0) {
                r = bound_before(mask, *package, ret_path);
                if (r <= 0)
                        return r < 0 ? r : 1;
        }
        return r;
}

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
