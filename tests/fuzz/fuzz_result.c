/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what a client does with a supervisor's message (libcodeinterp):
 * the renderings and the artifact accessors. A client must survive a forged or garbled
 * result: names that escape a directory, sizes and digests that lie.
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/libcodeinterp.h"
#include "common/mp.h"
#include "common/sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        msgpack_unpacked u;
        char *text = NULL;

        if (mp_validate(data, size, 16, NULL) < 0)
                return 0;
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, (const char *) data, size, NULL) == MSGPACK_UNPACK_SUCCESS) {
                const msgpack_object *m = &u.data;
                if (ci_render_model_text(m, &text) >= 0)
                        free(text);
                text = NULL;
                if (ci_render_progress_card(m, &text) >= 0)
                        free(text);
                for (size_t i = 0, n = ci_artifact_count(m); i < n; i++) {
                        CiArtifact a;
                        char hex[65];
                        if (ci_artifact_get(m, i, &a) < 0)
                                continue;
                        /* What is accepted is consistent: the digest is the data's. */
                        sha256_hex(a.data, a.len, hex);
                        if (strcmp(hex, a.sha256) != 0)
                                __builtin_trap();
                        /* A safe name never leaves a directory. */
                        if (ci_artifact_name_safe(a.name, a.name_len) &&
                            (memchr(a.name, '/', a.name_len) || (a.name_len == 2 && !memcmp(a.name, "..", 2))))
                                __builtin_trap();
                }
        }
        msgpack_unpacked_destroy(&u);
        return 0;
}
