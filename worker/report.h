/* SPDX-License-Identifier: MIT */
/* Worker -> supervisor reports on the status pipe (fd 3), and the supervisor's
 * bounded, validating parser. Each report is a 4-byte big-endian length and one
 * msgpack map:
 *   {"t": "setup", "stage": <stage name>, "errno": <int>}
 *   {"t": "done", "hasResult": bool, "limit": nil|"memory"|"file_size"|"processes",
 *    "exception": nil | {"type": str,
 *                        "message": {"text", "totalCharacters", "totalBytes", "omittedCharacters", "omittedBytes"},
 *                        "traceback": {same}}}
 * The worker fits exception strings itself (it is the only place they exist); the
 * supervisor checks the shape and that the counts are consistent, and treats anything
 * else (garbage, a second report, an oversized frame) as worker_error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "supervisor/fit.h"
#include "worker/pyrun.h"
#include "worker/sandbox.h"

#define REPORT_FD 3
#define REPORT_RESULT_FD 4
#define REPORT_PLAN_FD 5

typedef enum ReportKind {
        REPORT_SETUP_ERROR,
        REPORT_DONE,
} ReportKind;

typedef struct WorkerReport {
        ReportKind kind;
        /* setup error */
        char stage[32];
        int error;
        /* done */
        bool has_result;
        PyrunLimit limit;
        bool exception;
        char *exc_type; /* fitted to 256 characters */
        FitText exc_message;
        FitText exc_traceback;
} WorkerReport;

/* Worker side. Both write one frame to fd; -errno on failure. */
int report_send_setup_error(int fd, SandboxStage stage, int error);
int report_send_done(int fd, const PyrunReport *r, uint64_t exc_ceiling);

/* Supervisor side: parse one frame body (without the length prefix). -EBADMSG if malformed. */
int report_parse(const void *buf, size_t len, uint64_t exc_ceiling, WorkerReport *ret);
void report_done(WorkerReport *r);

const char *pyrun_limit_to_string(PyrunLimit l);
