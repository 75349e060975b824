/* SPDX-License-Identifier: MIT */
/* Worker -> supervisor reports on the report pipe (WORKER_FD_REPORT), and the supervisor's
 * bounded, validating parser. Each report is a 4-byte big-endian length and one
 * msgpack map:
 *   {"t": "setup", "stage": <stage name>, "errno": <int>}
 *   {"t": "ready"}   the sandbox is complete and CPython ready: the code runs next
 *   {"t": "done", "hasResult": bool, "limit": nil|"memory"|"file_size"|"processes",
 *    "exception": nil | {"type": str,
 *                        "message": {"text", "totalCharacters", "totalBytes", "omittedCharacters", "omittedBytes"},
 *                        "traceback": {same}}}
 * A worker sends "setup" (and exits), or "ready" and then "done". "ready" is written
 * before any user code exists, so the first frame on the pipe is always the worker's
 * own; the supervisor takes it off as it arrives (the worker is confined from then on:
 * status shows its pid) and what follows is read as before. The worker fits exception
 * strings itself (it is the only place they exist); the supervisor checks the shape and
 * that the counts are consistent, and treats anything else (garbage, a second report,
 * an oversized frame) as worker_error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/fit.h"
#include "contract/stage.h"

/* Which resource limit ended the code, when an exception was the limit's doing. */
typedef enum ReportLimit {
        REPORT_LIMIT_NONE,
        REPORT_LIMIT_MEMORY,    /* MemoryError */
        REPORT_LIMIT_FILE_SIZE, /* OSError with errno EFBIG */
        REPORT_LIMIT_PROCESSES, /* thread creation failed (RLIMIT_NPROC) */
        _REPORT_LIMIT_MAX,
} ReportLimit;

/* What the worker reports when its code has run (the worker side's input). */
typedef struct ReportRun {
        bool exception;
        bool has_result;
        ReportLimit limit;
        const char *exc_type; /* NULL when !exception */
        const char *exc_message;
        const char *exc_traceback;
} ReportRun;

typedef enum ReportKind {
        REPORT_SETUP_ERROR,
        REPORT_READY,
        REPORT_DONE,
} ReportKind;

typedef struct WorkerReport {
        ReportKind kind;
        /* setup error */
        char stage[32];
        int error;
        /* done */
        bool has_result;
        ReportLimit limit;
        bool exception;
        char *exc_type; /* fitted to 256 characters */
        FitText exc_message;
        FitText exc_traceback;
} WorkerReport;

/* Worker side. Each writes one frame to fd; -errno on failure. */
int report_send_setup_error(int fd, SetupStage stage, int error);
int report_send_ready(int fd);
int report_send_done(int fd, const ReportRun *r, uint64_t exc_ceiling);

/* Supervisor side: parse one frame body (without the length prefix). -EBADMSG if malformed. */
int report_parse(const void *buf, size_t len, uint64_t exc_ceiling, WorkerReport *ret);
void report_done(WorkerReport *r);

/* "memory", "file_size", "processes"; NULL for none or out of range. */
const char *report_limit_to_string(ReportLimit l);
