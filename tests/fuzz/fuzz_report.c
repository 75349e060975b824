/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the worker report parser: the report pipe is reachable from the
 * user's code, so every byte is hostile.
 * Built with -DCODEINTERP_FUZZ=ON (tests/fuzz/CMakeLists.txt); run by make fuzz-smoke. */
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
