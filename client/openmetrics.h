/* SPDX-License-Identifier: MIT */
/* The status reply in the OpenMetrics text format (for node_exporter's textfile
 * collector). Metric names: docs/operations.md#metrics. */
#pragma once

#include <msgpack.h>
#include <stdio.h>

/* Writes the exposition, ending with "# EOF\n". -EINVAL: status is not a status reply
 * with the fields this format needs (nothing is written then); -EIO: a write failed. */
int ci_openmetrics_write(FILE *f, const msgpack_object *status);
