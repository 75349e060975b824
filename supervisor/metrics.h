/* SPDX-License-Identifier: MIT */
/* Histograms for status: fixed buckets in milliseconds, so that every supervisor reports
 * the same boundaries and a scraper can add them up across hosts. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Upper bounds (inclusive, ms) of the finite buckets, ascending; a last bucket (+Inf)
 * takes the rest. docs/operations.md#metrics lists them. */
#define METRICS_BUCKETS_MS 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000
#define METRICS_N_BUCKETS 15

extern const uint64_t metrics_bucket_ms[METRICS_N_BUCKETS];

typedef struct Histogram {
        uint64_t buckets[METRICS_N_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
        uint64_t sum_usec;
        uint64_t count;
} Histogram;

void histogram_observe(Histogram *h, uint64_t usec);
/* Observations at or below bucket i (i == METRICS_N_BUCKETS: all of them). */
uint64_t histogram_cumulative(const Histogram *h, size_t i);
