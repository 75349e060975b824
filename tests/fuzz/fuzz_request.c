/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the request decoder (the supervisor's first contact with
 * client bytes).
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "supervisor/protocol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static Policy policy;
        static int initialised;
        ProtoRequest req;
        ProtoError err;

        if (!initialised) {
                policy_init_defaults(&policy);
                initialised = 1;
        }
        if (proto_decode_request(data, size, &policy, &req, &err) == 0)
                proto_request_done(&req);
        else if (err.message[0] == 0 || memchr(err.message, 0, sizeof err.message) == NULL)
                __builtin_trap(); /* every rejection carries a message */
        return 0;
}
