/* SPDX-License-Identifier: MIT */
/* libcodeinterp's reading of the status reply: readiness (status --ready) and the
 * metrics in the Prometheus and OpenMetrics text formats. */
#include "client/lib/status.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "client/lib/libcodeinterp.h"
#include "common/cleanup.h"
#include "common/mp.h"

/* ---- reading fields ---- */

static bool get_uint(const msgpack_object *map, const char *key, uint64_t *ret) {
        const msgpack_object *o = ci_get(map, key);

        if (!mp_is_uint(o))
                return false;
        *ret = o->via.u64;
        return true;
}

static bool get_bool(const msgpack_object *map, const char *key, bool *ret) {
        const msgpack_object *o = ci_get(map, key);

        if (!o || o->type != MSGPACK_OBJECT_BOOLEAN)
                return false;
        *ret = o->via.boolean;
        return true;
}

static bool get_number(const msgpack_object *map, const char *key, double *ret) {
        const msgpack_object *o = ci_get(map, key);

        if (mp_is_uint(o))
                *ret = (double) o->via.u64;
        else if (o && (o->type == MSGPACK_OBJECT_FLOAT64 || o->type == MSGPACK_OBJECT_FLOAT32))
                *ret = o->via.f64;
        else
                return false;
        return true;
}

/* A string field (or nil, when nil_ok) as a NUL-terminated copy in buf; false if it does
 * not fit or is neither. */
static bool get_str(const msgpack_object *map, const char *key, bool nil_ok, char *buf, size_t size) {
        const msgpack_object *o = ci_get(map, key);

        if (nil_ok && o && o->type == MSGPACK_OBJECT_NIL) {
                buf[0] = 0;
                return true;
        }
        if (!mp_is_str(o) || o->via.str.size >= size)
                return false;
        memcpy(buf, o->via.str.ptr, o->via.str.size);
        buf[o->via.str.size] = 0;
        return true;
}

int status_readiness(const msgpack_object *status, bool *ret_ready, char ret_cause[static STATUS_CAUSE_MAX],
                     char ret_detail[static STATUS_DETAIL_MAX]) {
        const msgpack_object *detail;
        bool ready;

        if (!get_bool(status, "ready", &ready))
                return -EBADMSG;
        if (ready) {
                *ret_ready = true;
                ret_cause[0] = ret_detail[0] = 0;
                return 0;
        }
        detail = ci_get(status, "notReadyDetail");
        if (!get_str(status, "notReadyCause", false, ret_cause, STATUS_CAUSE_MAX) || !mp_is_str(detail))
                return -EBADMSG;
        snprintf(ret_detail, STATUS_DETAIL_MAX, "%.*s", (int) detail->via.str.size, detail->via.str.ptr);
        *ret_ready = false;
        return 0;
}

/* ---- the metrics ----
 *
 * One table of families; each format writes a family's header its own way:
 *
 *                  Prometheus text 0.0.4                 OpenMetrics 1.0.0
 * counter x        # HELP x_total, # TYPE x_total counter # TYPE x counter, # HELP x
 * info x           # HELP x_info, # TYPE x_info gauge     # TYPE x info, # HELP x
 * unit u           (none)                                 # UNIT x u (x ends with _u)
 * end              (nothing)                              # EOF
 *
 * The samples are the same lines in both (x_total, x_info, x_bucket ...). */

typedef enum Kind {
        KIND_COUNTER,
        KIND_GAUGE,
        KIND_INFO,
        KIND_HISTOGRAM,
} Kind;

typedef struct Family {
        const char *name; /* the family: without _total, _info */
        Kind kind;
        const char *unit; /* OpenMetrics' UNIT, or NULL; the name ends with it */
        const char *help;
} Family;

typedef enum FamilyId {
        F_READY,
        F_ZYGOTE_READY,
        F_ZYGOTES_STARTED,
        F_ZYGOTE_PAGES_AHEAD,
        F_WORKER_START_FAILURES_IN_ROW,
        F_WORKER_START_FAILURES,
        F_QUEUED,
        F_RUNNING,
        F_CAPACITY,
        F_CONNECTIONS,
        F_CONNECTIONS_REFUSED,
        F_CONNECTIONS_IDLE_CLOSED,
        F_CALLS,
        F_CALLS_ADMITTED,
        F_WORKERS_STARTED,
        F_WORKER_STARTS,
        F_MEMORY_GATE_HOLDING,
        F_MEMORY_GATE_HOLDS,
        F_MEMORY_GATE_HELD,
        F_UPTIME,
        F_START_TIME,
        F_BUILD,
        F_POLICY,
        F_QUEUE_WAIT,
        F_RUN_TIME,
        _F_MAX,
} FamilyId;

static const Family families[_F_MAX] = {
        [F_READY] = { "codeinterp_ready", KIND_GAUGE, NULL,
                      "1 when the supervisor is ready to serve calls (codeinterp status --ready), else 0." },
        [F_ZYGOTE_READY] = { "codeinterp_zygote_ready", KIND_GAUGE, NULL,
                             "1 while a zygote serves worker starts, else 0 (workerStart zygote only)." },
        [F_ZYGOTES_STARTED] = { "codeinterp_zygotes_started", KIND_COUNTER, NULL,
                                "Zygotes started: the first, restarts and replacements (workerStart zygote only)." },
        [F_ZYGOTE_PAGES_AHEAD] = { "codeinterp_zygote_pages_ahead", KIND_GAUGE, NULL,
                                   "Pages each new worker maps ahead of its preparation, learnt by the serving "
                                   "zygote; 0 when none or no zygote serves (workerStart zygote only)." },
        [F_WORKER_START_FAILURES_IN_ROW] = { "codeinterp_worker_start_failures_in_row", KIND_GAUGE, NULL,
                                             "Worker starts that failed in a row; 0 once one succeeds." },
        [F_WORKER_START_FAILURES] = { "codeinterp_worker_start_failures", KIND_COUNTER, NULL,
                                      "Calls that ended because their worker could not be started." },
        [F_QUEUED] = { "codeinterp_queued_calls", KIND_GAUGE, NULL, "Calls waiting in the queue for a worker." },
        [F_RUNNING] = { "codeinterp_running_calls", KIND_GAUGE, NULL, "Calls whose worker is starting or running." },
        [F_CAPACITY] = { "codeinterp_capacity", KIND_GAUGE, NULL,
                         "Workers that may run at once (maxActiveWorkers resolved)." },
        [F_CONNECTIONS] = { "codeinterp_connections", KIND_GAUGE, NULL, "Open client connections." },
        [F_CONNECTIONS_REFUSED] = { "codeinterp_connections_refused", KIND_COUNTER, NULL,
                                    "Connections refused when accepted, by reason: a peer not allowed, "
                                    "maxConnections, maxConnectionsPerPeer." },
        [F_CONNECTIONS_IDLE_CLOSED] = { "codeinterp_connections_idle_closed", KIND_COUNTER, NULL,
                                        "Connections closed after connectionIdleTimeoutMs without an invocation, "
                                        "a call or a frame." },
        [F_CALLS] = { "codeinterp_calls", KIND_COUNTER, NULL,
                      "Execute requests by outcome: finished calls, and refusals before admission." },
        [F_CALLS_ADMITTED] = { "codeinterp_calls_admitted", KIND_COUNTER, NULL, "Calls admitted into the queue." },
        [F_WORKERS_STARTED] = { "codeinterp_workers_started", KIND_COUNTER, NULL, "Workers started for calls." },
        [F_WORKER_STARTS] = { "codeinterp_worker_starts", KIND_COUNTER, NULL,
                              "Workers started for calls, by how the call got its worker: ready (pre-started "
                              "and prepared), preparing (pre-started, still preparing), cloned (none was "
                              "pre-started), exec (exec mode)." },
        [F_MEMORY_GATE_HOLDING] = { "codeinterp_memory_gate_holding", KIND_GAUGE, NULL,
                                    "1 while the memory gate (minAvailableMemoryBytes) holds queued calls back." },
        [F_MEMORY_GATE_HOLDS] = { "codeinterp_memory_gate_holds", KIND_COUNTER, NULL,
                                  "Times the memory gate began to hold queued calls back." },
        [F_MEMORY_GATE_HELD] = { "codeinterp_memory_gate_held_seconds", KIND_COUNTER, "seconds",
                                 "Time the memory gate has held queued calls back." },
        [F_UPTIME] = { "codeinterp_uptime_seconds", KIND_GAUGE, "seconds", "Time since the supervisor started." },
        [F_START_TIME] = { "codeinterp_start_time_seconds", KIND_GAUGE, "seconds",
                           "When the supervisor started, in seconds since the Unix epoch." },
        [F_BUILD] = { "codeinterp_build", KIND_INFO, NULL, "The supervisor's version and embedded Python." },
        [F_POLICY] = { "codeinterp_policy", KIND_INFO, NULL,
                       "The current policy: its name, sha256 digest and worker start mode." },
        [F_QUEUE_WAIT] = { "codeinterp_queue_wait_seconds", KIND_HISTOGRAM, "seconds",
                           "Time from admission to the worker's start (or to the end, for calls without a worker)." },
        [F_RUN_TIME] = { "codeinterp_run_time_seconds", KIND_HISTOGRAM, "seconds",
                         "Time from the worker's start to the call's end." },
};

static const char *sample_suffix(Kind kind) {
        return kind == KIND_COUNTER ? "_total" : kind == KIND_INFO ? "_info" : "";
}

static void write_header(FILE *f, StatusFormat fmt, FamilyId id) {
        const Family *fam = &families[id];
        static const char *const om_type[] = { "counter", "gauge", "info", "histogram" };
        static const char *const prom_type[] = { "counter", "gauge", "gauge", "histogram" };

        if (fmt == STATUS_FORMAT_PROMETHEUS) {
                const char *sfx = sample_suffix(fam->kind);
                fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", fam->name, sfx, fam->help, fam->name, sfx,
                        prom_type[fam->kind]);
                return;
        }
        fprintf(f, "# TYPE %s %s\n", fam->name, om_type[fam->kind]);
        if (fam->unit)
                fprintf(f, "# UNIT %s %s\n", fam->name, fam->unit);
        fprintf(f, "# HELP %s %s\n", fam->name, fam->help);
}

/* A family of one unlabelled sample. */
static void write_uint(FILE *f, StatusFormat fmt, FamilyId id, uint64_t v) {
        write_header(f, fmt, id);
        fprintf(f, "%s%s %" PRIu64 "\n", families[id].name, sample_suffix(families[id].kind), v);
}

/* Milliseconds as seconds, exactly, in plain decimal: 1 -> "0.001", 1000 -> "1.0". */
static void format_ms_as_seconds(char buf[static 32], uint64_t ms) {
        size_t n;

        snprintf(buf, 32, "%" PRIu64 ".%03u", ms / 1000, (unsigned) (ms % 1000));
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '0' && buf[n - 2] != '.')
                buf[--n] = 0;
}

static void write_ms_as_seconds(FILE *f, StatusFormat fmt, FamilyId id, uint64_t ms) {
        char num[32];

        format_ms_as_seconds(num, ms);
        write_header(f, fmt, id);
        fprintf(f, "%s%s %s\n", families[id].name, sample_suffix(families[id].kind), num);
}

/* A label value, escaped as both formats want (backslash, double quote, newline). */
static void write_label_value(FILE *f, const char *s) {
        for (; *s; s++) {
                if (*s == '\\' || *s == '"')
                        fputc('\\', f);
                if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
}

/* An info family: one sample of value 1 with these labels (names, then values). */
static void write_info(FILE *f, StatusFormat fmt, FamilyId id, size_t n, const char *const names[],
                       const char *const values[]) {
        write_header(f, fmt, id);
        fprintf(f, "%s_info{", families[id].name);
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s%s=\"", i ? "," : "", names[i]);
                write_label_value(f, values[i]);
                fputc('"', f);
        }
        fputs("} 1\n", f);
}

/* A histogram of the status reply ({leMs, counts, sumMs, count}) in seconds; checked
 * before anything is written. */
static int write_histogram(FILE *f, StatusFormat fmt, const msgpack_object *status, const char *key, FamilyId id) {
        const msgpack_object *h = ci_get(status, key), *le, *counts;
        const char *name = families[id].name;
        uint64_t count, prev = 0;
        double sum_ms;
        char num[32];

        if (!h || h->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        le = ci_get(h, "leMs");
        counts = ci_get(h, "counts");
        if (!le || !counts || le->type != MSGPACK_OBJECT_ARRAY || counts->type != MSGPACK_OBJECT_ARRAY ||
            le->via.array.size != counts->via.array.size || !get_uint(h, "count", &count) ||
            !get_number(h, "sumMs", &sum_ms) || sum_ms < 0)
                return -EBADMSG;
        for (uint32_t i = 0; i < le->via.array.size; i++) {
                const msgpack_object *b = &le->via.array.ptr[i], *n = &counts->via.array.ptr[i];
                if (!mp_is_uint(b) || !mp_is_uint(n) || n->via.u64 < prev || n->via.u64 > count ||
                    (i > 0 && b->via.u64 <= le->via.array.ptr[i - 1].via.u64))
                        return -EBADMSG;
                prev = n->via.u64;
        }
        write_header(f, fmt, id);
        for (uint32_t i = 0; i < le->via.array.size; i++) {
                format_ms_as_seconds(num, le->via.array.ptr[i].via.u64);
                fprintf(f, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name, num, counts->via.array.ptr[i].via.u64);
        }
        fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, count);
        fprintf(f, "%s_sum %.6f\n%s_count %" PRIu64 "\n", name, sum_ms / 1000.0, name, count);
        return 0;
}

/* A map of names to counts (outcomes, connectionsRefused): the names are [a-z_], nothing
 * to escape in a label value. */
static int check_counts(const msgpack_object *counts) {
        if (!counts || counts->type != MSGPACK_OBJECT_MAP || counts->via.map.size == 0)
                return -EBADMSG;
        for (uint32_t i = 0; i < counts->via.map.size; i++) {
                const msgpack_object_kv *kv = &counts->via.map.ptr[i];
                if (!mp_is_str(&kv->key) || !mp_is_uint(&kv->val) || kv->key.via.str.size == 0)
                        return -EBADMSG;
                for (uint32_t j = 0; j < kv->key.via.str.size; j++) {
                        char c = kv->key.via.str.ptr[j];
                        if (!((c >= 'a' && c <= 'z') || c == '_'))
                                return -EBADMSG;
                }
        }
        return 0;
}

/* A counter family with one label: a sample per name of a map that check_counts() passed. */
static void write_counts(FILE *f, StatusFormat fmt, FamilyId id, const char *label, const msgpack_object *counts) {
        write_header(f, fmt, id);
        for (uint32_t i = 0; i < counts->via.map.size; i++) {
                const msgpack_object_kv *kv = &counts->via.map.ptr[i];
                fprintf(f, "%s_total{%s=\"%.*s\"} %" PRIu64 "\n", families[id].name, label, (int) kv->key.via.str.size,
                        kv->key.via.str.ptr, kv->val.via.u64);
        }
}

static int write_all(FILE *f, const msgpack_object *status, StatusFormat fmt) {
        static const struct {
                const char *key;
                FamilyId id;
        } uints[] = {
                { "workerStartFailuresInRow", F_WORKER_START_FAILURES_IN_ROW },
                { "workerStartFailures", F_WORKER_START_FAILURES },
                { "queued", F_QUEUED },
                { "running", F_RUNNING },
                { "capacity", F_CAPACITY },
                { "connections", F_CONNECTIONS },
                { "connectionsIdleClosed", F_CONNECTIONS_IDLE_CLOSED },
                { "admittedTotal", F_CALLS_ADMITTED },
                { "startedTotal", F_WORKERS_STARTED },
                { "memoryGateHolds", F_MEMORY_GATE_HOLDS },
        };
        uint64_t values[ELEMENTSOF(uints)], zygote_generation, pages_ahead, held_ms, uptime_ms, start_ms;
        char zygote_state[16], version[64], python[64], policy_name[64], sha256[65], worker_start[16];
        const msgpack_object *outcomes = ci_get(status, "outcomes"), *refused = ci_get(status, "connectionsRefused");
        const msgpack_object *by_how = ci_get(status, "workersStartedBy");
        bool ready, zygote_ready, gate_holding;
        int k;

        if (!status || status->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        for (size_t i = 0; i < ELEMENTSOF(uints); i++)
                if (!get_uint(status, uints[i].key, &values[i]))
                        return -EBADMSG;
        if (!get_bool(status, "ready", &ready) || !get_bool(status, "zygoteReady", &zygote_ready) ||
            !get_bool(status, "memoryGateHolding", &gate_holding) ||
            !get_uint(status, "zygoteGeneration", &zygote_generation) ||
            !get_uint(status, "zygotePagesAhead", &pages_ahead) || !get_uint(status, "memoryGateHeldMs", &held_ms) ||
            !get_uint(status, "uptimeMs", &uptime_ms) || !get_uint(status, "startTimeUnixMs", &start_ms) ||
            !get_str(status, "zygoteState", true, zygote_state, sizeof zygote_state) ||
            !get_str(status, "version", false, version, sizeof version) ||
            !get_str(status, "python", false, python, sizeof python) ||
            !get_str(status, "policyName", false, policy_name, sizeof policy_name) ||
            !get_str(status, "policySha256", false, sha256, sizeof sha256) ||
            !get_str(status, "workerStart", false, worker_start, sizeof worker_start))
                return -EBADMSG;
        if ((k = check_counts(outcomes)) < 0 || (k = check_counts(refused)) < 0 || (k = check_counts(by_how)) < 0)
                return k;

        write_uint(f, fmt, F_READY, ready);
        if (zygote_state[0]) { /* zygote mode */
                write_uint(f, fmt, F_ZYGOTE_READY, zygote_ready);
                write_uint(f, fmt, F_ZYGOTES_STARTED, zygote_generation);
                write_uint(f, fmt, F_ZYGOTE_PAGES_AHEAD, pages_ahead);
        }
        for (size_t i = 0; i < ELEMENTSOF(uints); i++)
                write_uint(f, fmt, uints[i].id, values[i]);
        write_counts(f, fmt, F_CONNECTIONS_REFUSED, "reason", refused);
        write_counts(f, fmt, F_CALLS, "outcome", outcomes);
        write_counts(f, fmt, F_WORKER_STARTS, "worker", by_how);
        write_uint(f, fmt, F_MEMORY_GATE_HOLDING, gate_holding);
        write_ms_as_seconds(f, fmt, F_MEMORY_GATE_HELD, held_ms);
        write_ms_as_seconds(f, fmt, F_UPTIME, uptime_ms);
        write_ms_as_seconds(f, fmt, F_START_TIME, start_ms);
        write_info(f, fmt, F_BUILD, 2, (const char *const[]){ "version", "python_version" },
                   (const char *const[]){ version, python });
        write_info(f, fmt, F_POLICY, 3, (const char *const[]){ "name", "sha256", "worker_start" },
                   (const char *const[]){ policy_name, sha256, worker_start });
        if ((k = write_histogram(f, fmt, status, "queueWaitMs", F_QUEUE_WAIT)) < 0 ||
            (k = write_histogram(f, fmt, status, "runTimeMs", F_RUN_TIME)) < 0)
                return k;
        if (fmt == STATUS_FORMAT_OPENMETRICS)
                fputs("# EOF\n", f);
        return 0;
}

int status_metrics_write(FILE *f, const msgpack_object *status, StatusFormat format) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *m;
        int k;

        /* Into memory first: a half-written exposition is worse than none. */
        m = open_memstream(&buf, &len);
        if (!m)
                return -ENOMEM;
        k = write_all(m, status, format);
        if (fclose(m) != 0 && k >= 0)
                k = -ENOMEM;
        if (k < 0)
                return k;
        if (fwrite(buf, 1, len, f) != len || fflush(f) != 0)
                return -EIO;
        return 0;
}
