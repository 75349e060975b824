/* SPDX-License-Identifier: MIT */
#include "client/openmetrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "client/libcodeinterp.h"
#include "common/cleanup.h"

/* A status field that is an unsigned integer. */
static bool get_uint(const msgpack_object *map, const char *key, uint64_t *ret) {
        const msgpack_object *o = ci_get(map, key);

        if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return false;
        *ret = o->via.u64;
        return true;
}

static bool get_number(const msgpack_object *map, const char *key, double *ret) {
        const msgpack_object *o = ci_get(map, key);

        if (!o)
                return false;
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                *ret = (double) o->via.u64;
        else if (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32)
                *ret = o->via.f64;
        else
                return false;
        return true;
}

/* Milliseconds as seconds, exactly, in plain decimal: 1 -> "0.001", 1000 -> "1.0". */
static void format_ms_as_seconds(char buf[static 32], uint64_t ms) {
        size_t n;

        snprintf(buf, 32, "%" PRIu64 ".%03u", ms / 1000, (unsigned) (ms % 1000));
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.')
                buf[--n] = 0;
}

/* A histogram of the status reply ({leMs, counts, sumMs, count}) in seconds. */
static int write_histogram(FILE *f, const msgpack_object *status, const char *key, const char *name, const char *help) {
        const msgpack_object *h = ci_get(status, key), *le, *counts;
        uint64_t count, prev = 0;
        double sum_ms;
        char num[32];

        if (!h || h->type != MSGPACK_OBJECT_MAP)
                return -EINVAL;
        le = ci_get(h, "leMs");
        counts = ci_get(h, "counts");
        if (!le || !counts || le->type != MSGPACK_OBJECT_ARRAY || counts->type != MSGPACK_OBJECT_ARRAY ||
            le->via.array.size != counts->via.array.size || !get_uint(h, "count", &count) ||
            !get_number(h, "sumMs", &sum_ms))
                return -EINVAL;
        fprintf(f, "# TYPE %s histogram\n# UNIT %s seconds\n# HELP %s %s\n", name, name, name, help);
        for (uint32_t i = 0; i < le->via.array.size; i++) {
                const msgpack_object *b = &le->via.array.ptr[i], *n = &counts->via.array.ptr[i];
                if (b->type != MSGPACK_OBJECT_POSITIVE_INTEGER || n->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                    n->via.u64 < prev || n->via.u64 > count)
                        return -EINVAL;
                prev = n->via.u64;
                format_ms_as_seconds(num, b->via.u64);
                fprintf(f, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, num, n->via.u64);
        }
        fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, count);
        fprintf(f, "%s_sum %.6f\n%s_count %" PRIu64 "\n", name, sum_ms / 1000.0, name, count);
        return 0;
}

static void write_one(FILE *f, const char *name, const char *type, const char *help, uint64_t v) {
        fprintf(f, "# TYPE %s %s\n# HELP %s %s\n%s%s %" PRIu64 "\n", name, type, name, help, name,
                strcmp(type, "counter") == 0 ? "_total" : "", v);
}

static int write_all(FILE *f, const msgpack_object *status) {
        static const struct {
                const char *key, *name, *type, *help;
        } simple[] = {
                { "admittedTotal", "codeinterp_calls_admitted", "counter", "Calls admitted (queued)." },
                { "startedTotal", "codeinterp_workers_started", "counter", "Workers started for calls." },
                { "workerStartFailures", "codeinterp_worker_start_failures", "counter",
                  "Calls that ended because their worker could not be started." },
                { "queued", "codeinterp_queued_calls", "gauge", "Calls waiting in the queue." },
                { "running", "codeinterp_running_calls", "gauge", "Calls with a worker." },
                { "capacity", "codeinterp_capacity", "gauge", "Workers that may run at once." },
                { "connections", "codeinterp_connections", "gauge", "Open client connections." },
        };
        const msgpack_object *outcomes;
        uint64_t values[ELEMENTSOF(simple)];
        int k;

        if (!status || status->type != MSGPACK_OBJECT_MAP)
                return -EINVAL;
        outcomes = ci_get(status, "outcomes");
        if (!outcomes || outcomes->type != MSGPACK_OBJECT_MAP || outcomes->via.map.size == 0)
                return -EINVAL;
        for (uint32_t i = 0; i < outcomes->via.map.size; i++) {
                const msgpack_object_kv *kv = &outcomes->via.map.ptr[i];
                if (kv->key.type != MSGPACK_OBJECT_STR || kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                        return -EINVAL;
                /* Outcome names are [a-z_]: nothing to escape in a label value. */
                for (uint32_t j = 0; j < kv->key.via.str.size; j++) {
                        char c = kv->key.via.str.ptr[j];
                        if (!((c >= 'a' && c <= 'z') || c == '_'))
                                return -EINVAL;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(simple); i++)
                if (!get_uint(status, simple[i].key, &values[i]))
                        return -EINVAL;
        if (!ci_get(status, "queueWaitMs") || !ci_get(status, "runTimeMs"))
                return -EINVAL;

        fprintf(f, "# TYPE codeinterp_calls counter\n"
                   "# HELP codeinterp_calls Execute requests by outcome: finished calls, and refusals before "
                   "admission.\n");
        for (uint32_t i = 0; i < outcomes->via.map.size; i++) {
                const msgpack_object_kv *kv = &outcomes->via.map.ptr[i];
                fprintf(f, "codeinterp_calls_total{outcome=\"%.*s\"} %" PRIu64 "\n", (int) kv->key.via.str.size,
                        kv->key.via.str.ptr, kv->val.via.u64);
        }
        for (size_t i = 0; i < ELEMENTSOF(simple); i++)
                write_one(f, simple[i].name, simple[i].type, simple[i].help, values[i]);
        k = write_histogram(f, status, "queueWaitMs", "codeinterp_queue_wait_seconds",
                            "Time from admission to the worker's start (or to the end, for calls without a worker).");
        if (k < 0)
                return k;
        k = write_histogram(f, status, "runTimeMs", "codeinterp_run_time_seconds",
                            "Time from the worker's start to the call's end.");
        if (k < 0)
                return k;
        fputs("# EOF\n", f);
        return 0;
}

int ci_openmetrics_write(FILE *f, const msgpack_object *status) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *m;
        int k;

        /* Into memory first: a half-written exposition is worse than none. */
        m = open_memstream(&buf, &len);
        if (!m)
                return -ENOMEM;
        k = write_all(m, status);
        if (fclose(m) != 0 && k >= 0)
                k = -ENOMEM;
        if (k < 0)
                return k;
        if (fwrite(buf, 1, len, f) != len || fflush(f) != 0)
                return -EIO;
        return 0;
}
