/* SPDX-License-Identifier: MIT */
/* The status reply across the wire's two ends: packed by the supervisor
 * (proto_pack_status(), supervisor/protocol.c) and read by the client's
 * client/lib/status.c, readiness and both metrics formats; neither side's field names
 * appear here. */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/status.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "contract/zygote_proto.h"
#include "policy/policy.h"
#include "supervisor/metrics.h"
#include "supervisor/protocol.h"

typedef struct Packed {
        MpWriter w;
        msgpack_unpacked u;
} Packed;

static uint64_t outcomes[_OUTCOME_MAX];
static uint64_t conns_refused[_PROTO_CONN_REFUSED_MAX];
static uint64_t started_by_how[_WORKER_HOW_MAX];
static Histogram queue_wait, run_time;

static ProtoStatus base_status(void) {
        memset(outcomes, 0, sizeof outcomes);
        outcomes[OUTCOME_OK] = 3;
        outcomes[OUTCOME_TIMEOUT] = 1;
        memset(conns_refused, 0, sizeof conns_refused);
        conns_refused[PROTO_CONN_REFUSED_MAX_CONNECTIONS_PER_PEER] = 184;
        conns_refused[PROTO_CONN_REFUSED_PEER_NOT_ALLOWED] = 2;
        memset(started_by_how, 0, sizeof started_by_how);
        started_by_how[WORKER_HOW_READY] = 3;
        started_by_how[WORKER_HOW_CLONED] = 1;
        memset(&queue_wait, 0, sizeof queue_wait);
        memset(&run_time, 0, sizeof run_time);
        histogram_observe(&queue_wait, 200);     /* 0.2 ms */
        histogram_observe(&queue_wait, 40000);   /* 40 ms */
        histogram_observe(&run_time, 7000);      /* 7 ms */
        histogram_observe(&run_time, 400000000); /* 400 s: +Inf */
        return (ProtoStatus){
                .not_ready = PROTO_READY,
                .queued = 1,
                .running = 2,
                .capacity = 2,
                .admitted_total = 4,
                .started_total = 4,
                .finished_total = 4,
                .connections = 17,
                .connections_refused = conns_refused,
                .connections_idle_closed = 5,
                .started_by_how = started_by_how,
                .worker_start = "zygote",
                .zygote_pid = 42,
                .zygote_generation = 3,
                .zygote_ready = true,
                .zygote_state = PROTO_ZYGOTE_READY,
                .memory_gate_holds = 2,
                .memory_gate_held_ms = 1503,
                .uptime_ms = 61001,
                .start_time_unix_ms = 1700000000123,
                .outcomes = outcomes,
                .queue_wait = &queue_wait,
                .run_time = &run_time,
                .policy_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                .policy_name = "code_interpreter",
        };
}

static const msgpack_object *pack(Packed *p, const ProtoStatus *st) {
        mp_writer_init(&p->w, 0);
        assert_int_equal(proto_pack_status(&p->w, 7, st), 0);
        msgpack_unpacked_init(&p->u);
        assert_int_equal(msgpack_unpack_next(&p->u, p->w.sb.data, p->w.sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        return &p->u.data;
}

static void packed_done(Packed *p) {
        msgpack_unpacked_destroy(&p->u);
        mp_writer_done(&p->w);
}

/* The exposition as a NUL-terminated string (free it), or the error. */
static int render(const msgpack_object *o, StatusFormat fmt, char **ret) {
        size_t len = 0;
        FILE *f = open_memstream(ret, &len);
        int k;

        assert_non_null(f);
        k = status_metrics_write(f, o, fmt);
        assert_int_equal(fclose(f), 0);
        return k;
}

static void assert_has(const char *text, const char *line) {
        if (!strstr(text, line))
                fail_msg("missing %s in:\n%s", line, text);
}

static void assert_lacks(const char *text, const char *line) {
        if (strstr(text, line))
                fail_msg("unexpected %s in:\n%s", line, text);
}

static void assert_has_all(const char *text, const char *const *lines, size_t n) {
        for (size_t i = 0; i < n; i++)
                assert_has(text, lines[i]);
}

static void assert_lacks_all(const char *text, const char *const *lines, size_t n) {
        for (size_t i = 0; i < n; i++)
                assert_lacks(text, lines[i]);
}

static void test_readiness(void **state) {
        char cause[STATUS_CAUSE_MAX], detail[STATUS_DETAIL_MAX];
        ProtoStatus st = base_status();
        Packed p;
        bool ready = false;

        assert_int_equal(status_readiness(pack(&p, &st), &ready, cause, detail), 0);
        assert_true(ready);
        assert_string_equal(cause, "");
        packed_done(&p);

        static const struct {
                ProtoNotReady why;
                const char *cause;
        } causes[] = {
                { PROTO_NOT_READY_SHUTTING_DOWN, "shutting_down" },
                { PROTO_NOT_READY_ZYGOTE_DOWN, "zygote_down" },
                { PROTO_NOT_READY_WORKER_START_FAILURES, "worker_start_failures" },
        };
        for (size_t i = 0; i < sizeof causes / sizeof causes[0]; i++) {
                st.not_ready = causes[i].why;
                st.not_ready_detail = "3 worker starts failed in a row";
                assert_int_equal(status_readiness(pack(&p, &st), &ready, cause, detail), 0);
                assert_false(ready);
                assert_string_equal(cause, causes[i].cause);
                assert_string_equal(detail, "3 worker starts failed in a row");
                packed_done(&p);
        }
}

static void test_prometheus_format(void **state) {
        static const char *const has[] = {
                /* HELP and TYPE name the sample; info metrics are gauges; no OpenMetrics lines. */
                "# TYPE codeinterp_calls_total counter\n",
                "# HELP codeinterp_calls_total Execute requests by outcome",
                "codeinterp_calls_total{outcome=\"ok\"} 3\n",
                "codeinterp_calls_total{outcome=\"timeout\"} 1\n",
                "# TYPE codeinterp_build_info gauge\n",
                "# TYPE codeinterp_policy_info gauge\n",
                "codeinterp_policy_info{name=\"code_interpreter\",sha256=\"0123456789abcdef0123456789abcdef"
                "0123456789abcdef0123456789abcdef\",worker_start=\"zygote\"} 1\n",
                "# TYPE codeinterp_memory_gate_held_seconds_total counter\n",
                "codeinterp_memory_gate_held_seconds_total 1.503\n",
                "codeinterp_uptime_seconds 61.001\n",
                "codeinterp_start_time_seconds 1700000000.123\n",
                "codeinterp_ready 1\n",
                "codeinterp_zygote_ready 1\n",
                "codeinterp_zygotes_started_total 3\n",
                "codeinterp_queued_calls 1\n",
                /* Connections: open now, refused by reason (every reason, 0 included), closed idle. */
                "codeinterp_connections 17\n",
                "# TYPE codeinterp_connections_refused_total counter\n",
                "codeinterp_connections_refused_total{reason=\"peer_not_allowed\"} 2\n",
                "codeinterp_connections_refused_total{reason=\"max_connections\"} 0\n",
                "codeinterp_connections_refused_total{reason=\"max_connections_per_peer\"} 184\n",
                "# TYPE codeinterp_connections_idle_closed_total counter\n",
                "codeinterp_connections_idle_closed_total 5\n",
                /* Workers started, by how the call got its worker (every way, 0 included). */
                "# TYPE codeinterp_worker_starts_total counter\n",
                "codeinterp_worker_starts_total{worker=\"ready\"} 3\n",
                "codeinterp_worker_starts_total{worker=\"preparing\"} 0\n",
                "codeinterp_worker_starts_total{worker=\"cloned\"} 1\n",
                "codeinterp_worker_starts_total{worker=\"exec\"} 0\n",
                /* Histograms in seconds, cumulative, +Inf = count. */
                "# TYPE codeinterp_queue_wait_seconds histogram\n",
                "codeinterp_queue_wait_seconds_bucket{le=\"0.001\"} 1\n",
                "codeinterp_queue_wait_seconds_bucket{le=\"0.05\"} 2\n",
                "codeinterp_run_time_seconds_bucket{le=\"300.0\"} 1\n",
                "codeinterp_run_time_seconds_bucket{le=\"+Inf\"} 2\n",
                "codeinterp_run_time_seconds_count 2\n",
        };
        static const char *const lacks[] = {
                "# UNIT",
                "# EOF",
                " info\n",
        };
        ProtoStatus st = base_status();
        char *text = NULL;
        Packed p;

        assert_int_equal(render(pack(&p, &st), STATUS_FORMAT_PROMETHEUS, &text), 0);
        assert_has_all(text, has, ELEMENTSOF(has));
        assert_lacks_all(text, lacks, ELEMENTSOF(lacks));
        free(text);
        packed_done(&p);
}

static void test_openmetrics_format(void **state) {
        static const char *const has[] = {
                /* Families without their suffix; the samples keep theirs. */
                "# TYPE codeinterp_calls counter\n# HELP codeinterp_calls ",
                "codeinterp_calls_total{outcome=\"ok\"} 3\n",
                "# TYPE codeinterp_connections_refused counter\n",
                "codeinterp_connections_refused_total{reason=\"max_connections_per_peer\"} 184\n",
                "# TYPE codeinterp_build info\n",
                "codeinterp_build_info{version=\"",
                "# TYPE codeinterp_uptime_seconds gauge\n# UNIT codeinterp_uptime_seconds seconds\n",
                "# TYPE codeinterp_memory_gate_held_seconds counter\n"
                "# UNIT codeinterp_memory_gate_held_seconds seconds\n",
                "# UNIT codeinterp_run_time_seconds seconds\n",
        };
        ProtoStatus st = base_status();
        char *text = NULL;
        Packed p;

        assert_int_equal(render(pack(&p, &st), STATUS_FORMAT_OPENMETRICS, &text), 0);
        assert_has_all(text, has, ELEMENTSOF(has));
        assert_lacks(text, "_total counter");
        /* # EOF once, last. */
        size_t n = strlen(text);
        assert_true(n > 6 && strcmp(text + n - 6, "# EOF\n") == 0);
        assert_ptr_equal(strstr(text, "# EOF"), text + n - 6);
        free(text);
        packed_done(&p);
}

static void test_exec_mode_has_no_zygote_metrics(void **state) {
        ProtoStatus st = base_status();
        char *text = NULL;
        Packed p;

        st.worker_start = "exec";
        st.zygote_pid = 0;
        st.zygote_generation = 0;
        st.zygote_ready = false;
        st.zygote_state = PROTO_ZYGOTE_NONE;
        assert_int_equal(render(pack(&p, &st), STATUS_FORMAT_PROMETHEUS, &text), 0);
        assert_lacks(text, "codeinterp_zygote");
        assert_has(text, "worker_start=\"exec\"");
        free(text);
        packed_done(&p);
}

static void test_label_values_are_escaped(void **state) {
        ProtoStatus st = base_status();
        char *text = NULL;
        Packed p;

        st.policy_name = "a\"b\\c\nd";
        assert_int_equal(render(pack(&p, &st), STATUS_FORMAT_PROMETHEUS, &text), 0);
        assert_has(text, "codeinterp_policy_info{name=\"a\\\"b\\\\c\\nd\",");
        free(text);
        packed_done(&p);
}

/* A reply that is not a status reply (an older supervisor's lacks fields the same way):
 * nothing is written, -EBADMSG; a failed write is -EIO. */
static void test_errors(void **state) {
        char cause[STATUS_CAUSE_MAX], detail[STATUS_DETAIL_MAX];
        ProtoStatus st = base_status();
        Policy pol;
        Packed p;
        char *text = NULL;
        bool ready;
        FILE *full;

        policy_init_defaults(&pol);
        mp_writer_init(&p.w, 0);
        assert_int_equal(proto_pack_hello(&p.w, 1, &pol, CGROUP_NONE, false), 0);
        msgpack_unpacked_init(&p.u);
        assert_int_equal(msgpack_unpack_next(&p.u, p.w.sb.data, p.w.sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        assert_int_equal(render(&p.u.data, STATUS_FORMAT_PROMETHEUS, &text), -EBADMSG);
        assert_string_equal(text, "");
        free(text);
        assert_int_equal(render(&p.u.data, STATUS_FORMAT_OPENMETRICS, &text), -EBADMSG);
        free(text);
        assert_int_equal(status_readiness(&p.u.data, &ready, cause, detail), -EBADMSG);
        packed_done(&p);

        full = fopen("/dev/full", "we");
        assert_non_null(full);
        assert_int_equal(status_metrics_write(full, pack(&p, &st), STATUS_FORMAT_PROMETHEUS), -EIO);
        fclose(full);
        packed_done(&p);
}

UNIT_MAIN(NULL, NULL, TEST(test_readiness), TEST(test_prometheus_format), TEST(test_openmetrics_format),
          TEST(test_exec_mode_has_no_zygote_metrics), TEST(test_label_values_are_escaped), TEST(test_errors))
