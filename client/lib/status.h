/* SPDX-License-Identifier: MIT */
/* The status reply (docs/protocol.md#status) read for probes and scrapers: the
 * readiness the supervisor reports (`codeinterp status --ready`) and the metrics, in
 * Prometheus' text format 0.0.4 (`--prometheus`: node_exporter's textfile collector,
 * promtool) or in OpenMetrics 1.0.0 (`--openmetrics`). The one client file that knows
 * status's field names. Metric names and types: docs/operations.md#metrics. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum StatusFormat {
        STATUS_FORMAT_PROMETHEUS,  /* text 0.0.4: HELP and TYPE name the sample (`x_total`), no EOF */
        STATUS_FORMAT_OPENMETRICS, /* 1.0.0: families (`x` for `x_total`), UNIT, info, `# EOF` last */
} StatusFormat;

#define STATUS_CAUSE_MAX 32
#define STATUS_DETAIL_MAX 512

/* The supervisor's readiness decision: *ret_ready, and when not ready its cause
 * (notReadyCause, e.g. "zygote_down") and detail, NUL-terminated (detail shortened to
 * fit). -EBADMSG: status is not a status reply that carries them (an older
 * supervisor); nothing is set then. */
int status_readiness(const msgpack_object *status, bool *ret_ready, char ret_cause[static STATUS_CAUSE_MAX],
                     char ret_detail[static STATUS_DETAIL_MAX]);

/* Writes the exposition in format, whole or not at all: -EBADMSG when status lacks a
 * field (or has one of the wrong type) that the metrics need (nothing is written then),
 * -ENOMEM, -EIO when the write failed. */
int status_metrics_write(FILE *f, const msgpack_object *status, StatusFormat format);
