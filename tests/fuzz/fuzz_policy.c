/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the policy loader: any input yields 0 or -EINVAL, a failure
 * leaves the policy untouched and explains itself in one line, a success has a digest.
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static Policy defaults;
        static int initialized;
        char err[256];
        Policy p;
        int r;

        if (!initialized) {
                policy_init_defaults(&defaults);
                initialized = 1;
        }

        memcpy(&p, &defaults, sizeof(p));
        r = policy_load_string(&p, (const char *) data, size, err, sizeof(err));
        if (r == 0) {
                if (strlen(p.sha256) != 64)
                        __builtin_trap();
        } else {
                if (r != -EINVAL && r != -ENOMEM)
                        __builtin_trap();
                if (!memchr(err, '\0', sizeof(err)) || strchr(err, '\n'))
                        __builtin_trap();
                if (r == -EINVAL && err[0] == '\0')
                        __builtin_trap();
                if (memcmp(&p, &defaults, sizeof(p)) != 0)
                        __builtin_trap();
        }
        return 0;
}
