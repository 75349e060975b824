/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the zygote's control messages (contract/zygote_proto.c): what
 * the supervisor believes of a zygote's answer, and the zygote of a request. The
 * first input byte is the number of descriptors that came with the message (mod 8),
 * the rest the datagram. An accepted message is one of the six kinds with fields in
 * range and exactly the descriptors its kind carries; anything else is refused.
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contract/zygote_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ZygoteMsg m = {};
        size_t n_fds, len;

        if (size == 0)
                return 0;
        n_fds = data[0] % 8;
        len = size - 1;
        memcpy(&m, data + 1, len < sizeof m ? len : sizeof m);
        if (zygote_msg_validate(&m, len, n_fds) < 0)
                return 0;
        if (len != sizeof m || m.magic != ZYGOTE_MAGIC)
                abort();
        /* Only READY says how many pages a new worker maps ahead, and within its bound. */
        if (m.kind == ZYGOTE_MSG_READY ? m.pages_ahead > ZYGOTE_PAGES_AHEAD_MAX : m.pages_ahead != 0)
                abort();
        switch (m.kind) {
        case ZYGOTE_MSG_READY:
        case ZYGOTE_MSG_IDLE:
        case ZYGOTE_MSG_EXITING:
                if (n_fds != 0 || m.token != 0 || m.uid != 0 || m.slot != 0 || m.n_cgroup_fds != 0)
                        abort();
                break;
        case ZYGOTE_MSG_SLOT:
                if (n_fds != m.n_cgroup_fds || n_fds > ZYGOTE_CGROUP_FDS_MAX || m.token != 0 || m.uid == 0 ||
                    m.gid == 0)
                        abort();
                break;
        case ZYGOTE_MSG_SPAWN:
                if (m.n_cgroup_fds > ZYGOTE_CGROUP_FDS_MAX || n_fds != _SPAWN_FD_MAX + m.n_cgroup_fds || m.token == 0 ||
                    m.uid == 0 || m.gid == 0)
                        abort();
                break;
        case ZYGOTE_MSG_SPAWNED:
                if (m.error < 0 || m.error > ZYGOTE_ERRNO_MAX || (m.error == 0) != (m.pid > 0) ||
                    n_fds != (m.error == 0 ? 1u : 0u) || m.uid != 0 || m.n_cgroup_fds != 0)
                        abort();
                break;
        default:
                abort();
        }
        return 0;
}
