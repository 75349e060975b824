/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the worker report parser: the report pipe is reachable from the
 * user's code, so every byte is hostile. Build:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -I. \
 *     -DCODEINTERP_PY_STDLIB='"/usr/lib/python3.11"' -DCODEINTERP_PY_LIBDIR='"/usr/lib/x86_64-linux-gnu"' \
 *     tests/fuzz/fuzz_report.c worker/report.c supervisor/fit.c common/mp.c common/util.c \
 *     worker/sandbox.c policy/seccomp.c -lmsgpackc -lseccomp -lcap -o /tmp/fuzz_report
 *   /tmp/fuzz_report -max_len=4096 */
#include <stddef.h>
#include <stdint.h>

#include "contract/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WorkerReport w;

        if (report_parse(data, size, 64, &w) == 0) {
                /* Whatever was accepted is consistent. */
                if (w.kind == REPORT_DONE && w.exception &&
                    (w.exc_message.text_chars + w.exc_message.omitted_chars != w.exc_message.total_chars ||
                     w.exc_message.text_chars > 64))
                        __builtin_trap();
                report_done(&w);
        }
        return 0;
}
