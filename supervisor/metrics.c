/* SPDX-License-Identifier: MIT */
/* The status histograms' fixed buckets (metrics.h). */
#include "supervisor/metrics.h"

const uint64_t metrics_bucket_ms[METRICS_N_BUCKETS] = { METRICS_BUCKETS_MS };

_Static_assert(sizeof((uint64_t[]){ METRICS_BUCKETS_MS }) / sizeof(uint64_t) == METRICS_N_BUCKETS,
               "METRICS_N_BUCKETS must count METRICS_BUCKETS_MS");

void histogram_observe(Histogram *h, uint64_t usec) {
        size_t i = 0;

        /* A value lands in the first bucket whose bound it does not exceed. */
        while (i < METRICS_N_BUCKETS && usec > metrics_bucket_ms[i] * 1000)
                i++;
        h->buckets[i]++;
        h->sum_usec += usec;
        h->count++;
}

uint64_t histogram_cumulative(const Histogram *h, size_t i) {
        uint64_t n = 0;

        for (size_t k = 0; k <= i && k <= METRICS_N_BUCKETS; k++)
                n += h->buckets[k];
        return n;
}
