/* SPDX-License-Identifier: MIT */
/* libFuzzer target for mp_validate() (common/mp.c), the walk that runs before msgpack-c
 * sees client or worker bytes. Any input is accepted or refused with -EBADMSG; what it
 * accepts, msgpack-c unpacks completely, ending exactly where mp_validate() said; and a
 * deeper nesting limit accepts whatever a shallower one does, ending at the same place.
 * (Unpacking only what mp_validate() accepted is the point: unchecked counts could make
 * msgpack-c allocate gigabytes.)
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
#include <errno.h>
#include <stdint.h>

#include "common/mp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t end8 = 0, end64 = 0, off = 0;
        msgpack_unpacked u;
        int r8, r64;

        r8 = mp_validate(data, size, 8, &end8);
        r64 = mp_validate(data, size, 64, &end64);
        if ((r8 != 0 && r8 != -EBADMSG) || (r64 != 0 && r64 != -EBADMSG))
                __builtin_trap();
        if (r8 != 0)
                return 0;
        if (r64 != 0 || end64 != end8 || end8 == 0 || end8 > size)
                __builtin_trap();

        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, (const char *) data, end8, &off) != MSGPACK_UNPACK_SUCCESS || off != end8)
                __builtin_trap();
        msgpack_unpacked_destroy(&u);
        return 0;
}
