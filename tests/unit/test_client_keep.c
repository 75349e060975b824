/* SPDX-License-Identifier: MIT */
/* The client library against a fake supervisor. Kept outputs across the wire's two ends
 * (docs/protocol.md#kept-outputs): the client's ci_execute_keep_send() decoded by the
 * supervisor's proto_decode_request(), and a result packed by proto_pack_result() read
 * by ci_kept_*() and rendered by ci_render_model_text(). And a connection the
 * supervisor closed while it was idle: the next request goes over a new one. */
#include "proto_result.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/lib/libcodeinterp.h"
#include "common/mp.h"
#include "policy/policy.h"
#include "supervisor/protocol.h"

#define INV "0123456789abcdef0123456789abcdef"

static Policy policy;

static int setup(void **state) {
        (void) state;
        policy_init_defaults(&policy);
        return 0;
}

/* A listening socket at a fresh path, a client connected to it, the accepted end (the
 * listener stays, for a client that connects again). */
typedef struct Pair {
        char dir[64], path[96];
        int listen_fd, peer_fd;
        CiClient *client;
} Pair;

static void pair_open(Pair *p) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        snprintf(p->dir, sizeof p->dir, "/tmp/ci-keep-XXXXXX");
        assert_non_null(mkdtemp(p->dir));
        snprintf(p->path, sizeof p->path, "%s/s", p->dir);
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p->path);
        p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(p->listen_fd >= 0);
        assert_int_equal(bind(p->listen_fd, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(p->listen_fd, 1), 0);
        assert_int_equal(ci_connect(p->path, &p->client), 0);
        p->peer_fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(p->peer_fd >= 0);
}

static void pair_close(Pair *p) {
        ci_close(p->client);
        close(p->peer_fd);
        close(p->listen_fd);
        assert_int_equal(unlink(p->path) | rmdir(p->dir), 0);
}

static void read_full(int fd, void *buf, size_t len) {
        size_t off = 0;
        while (off < len) {
                ssize_t n = read(fd, (char *) buf + off, len - off);
                assert_true(n > 0);
                off += (size_t) n;
        }
}

/* The next frame the client sent, decoded as the supervisor does. */
static int recv_request(Pair *p, void **buf, ProtoRequest *req, ProtoError *err) {
        uint8_t hdr[4];
        uint32_t len;

        read_full(p->peer_fd, hdr, 4);
        len = (uint32_t) hdr[0] << 24 | (uint32_t) hdr[1] << 16 | (uint32_t) hdr[2] << 8 | hdr[3];
        *buf = malloc(len);
        assert_non_null(*buf);
        read_full(p->peer_fd, *buf, len);
        return proto_decode_request(*buf, len, &policy, req, err);
}

static void test_execute_keep_encodes(void **state) {
        static const char *const names[] = { "clean.csv", "plot.png" };
        static const char *const ids[] = { "out-1-raw.csv" };
        CiExecute x = {
                .summary = "s", .code = "1", .code_len = 1, .invocation = INV, .source_ids = ids, .n_source_ids = 1
        };
        CiKeep keep = { .names = names, .n_names = 2 };
        ProtoRequest req;
        ProtoError err;
        uint64_t id;
        void *buf;
        Pair p;
        (void) state;

        pair_open(&p);
        /* Names, in order. */
        assert_int_equal(ci_execute_keep_send(p.client, &x, &keep, &id), 0);
        assert_int_equal(recv_request(&p, &buf, &req, &err), 0);
        assert_int_equal(req.op, PROTO_OP_EXECUTE);
        assert_int_equal(req.id, id);
        assert_true(req.keep_requested && !req.keep_all);
        assert_int_equal(req.n_keep, 2);
        assert_memory_equal(req.keep[0].ptr, "clean.csv", 9);
        assert_memory_equal(req.keep[1].ptr, "plot.png", 8);
        assert_int_equal(req.n_source_ids, 1);
        proto_request_done(&req);
        free(buf);
        /* "all". */
        keep.all = true;
        assert_int_equal(ci_execute_keep_send(p.client, &x, &keep, &id), 0);
        assert_int_equal(recv_request(&p, &buf, &req, &err), 0);
        assert_true(req.keep_requested && req.keep_all && req.n_keep == 0);
        proto_request_done(&req);
        free(buf);
        /* No keep: the request ci_execute_send() makes, without keepOutputs. */
        assert_int_equal(ci_execute_keep_send(p.client, &x, NULL, &id), 0);
        assert_int_equal(recv_request(&p, &buf, &req, &err), 0);
        assert_false(req.keep_requested);
        proto_request_done(&req);
        free(buf);
        assert_int_equal(ci_execute_send(p.client, &x, &id), 0);
        assert_int_equal(recv_request(&p, &buf, &req, &err), 0);
        assert_false(req.keep_requested);
        proto_request_done(&req);
        free(buf);

        /* Refused here, nothing sent: no invocation; more than 16 names. */
        const char *many[CI_KEEP_OUTPUTS_MAX + 1];
        for (size_t i = 0; i < CI_KEEP_OUTPUTS_MAX + 1; i++)
                many[i] = "a";
        CiKeep too_many = { .names = many, .n_names = CI_KEEP_OUTPUTS_MAX + 1 };
        assert_int_equal(ci_execute_keep_send(p.client, &x, &too_many, &id), -EINVAL);
        CiMessage m = {};
        assert_int_equal(ci_execute_keep(p.client, &x, &too_many, NULL, NULL, &m), -EINVAL);
        CiExecute anon = x;
        anon.invocation = NULL;
        anon.n_source_ids = 0;
        assert_int_equal(ci_execute_keep_send(p.client, &anon, &keep, &id), -EINVAL);
        /* Sixteen go. */
        CiKeep sixteen = { .names = many, .n_names = CI_KEEP_OUTPUTS_MAX };
        assert_int_equal(ci_execute_keep_send(p.client, &x, &sixteen, &id), 0);
        /* The supervisor decodes that one (a repeated name: its invalid_input), and it is
         * the next frame: the refused ones sent nothing. */
        assert_int_equal(recv_request(&p, &buf, &req, &err), -EINVAL);
        assert_true(strstr(err.message, "keepOutputs[1] repeats keepOutputs[0]") != NULL);
        assert_int_equal(err.id, id);
        free(buf);
        pair_close(&p);
}

static void test_kept_read_and_rendered(void **state) {
        static const char sha[] = "5d0e0000000000000000000000000000000000000000000000000000000000ff";
        ProtoKept kept[] = PROTO_KEPT_ONE_REFUSED_ONE("summary.csv", "out-2-summary.csv", 33, sha, "plot.png");
        FitText out = {}, errt = {};
        ProtoResult r = {
                PROTO_RESULT_OK, .out = &out, .err = &errt, .has_kept = true, .kept = kept, .n_kept = 2,
        };
        msgpack_unpacked u;
        MpWriter w;
        CiKept k;
        char *text;
        (void) state;

        pack_result(&r, 1 << 20, &w, &u);
        assert_true(ci_kept_present(&u.data));
        assert_int_equal(ci_kept_count(&u.data), 2);
        assert_int_equal(ci_kept_get(&u.data, 0, &k), 0);
        assert_int_equal(k.name_len, 11);
        assert_memory_equal(k.name, "summary.csv", 11);
        assert_int_equal(k.source_id_len, 17);
        assert_memory_equal(k.source_id, "out-2-summary.csv", 17);
        assert_int_equal(k.bytes, 33);
        assert_string_equal(k.sha256, sha);
        assert_null(k.refused);
        assert_int_equal(ci_kept_get(&u.data, 1, &k), 0);
        assert_null(k.source_id);
        assert_int_equal(k.refused_len, strlen("max_source_bytes"));
        assert_memory_equal(k.refused, "max_source_bytes", k.refused_len);
        assert_int_equal(ci_kept_get(&u.data, 2, &k), -ENOENT);
        assert_int_equal(ci_render_model_text(&u.data, &text), 0);
        assert_non_null(strstr(text, "--- kept outputs (1 kept, 1 refused) ---\n"
                                     "summary.csv: out-2-summary.csv, 33 bytes, sha256 5d0e0000000000000000000000000000"
                                     "000000000000000000000000000000ff\n"
                                     "plot.png: not kept (max_source_bytes)\n"));
        free(text);
        packed_done(&w, &u);

        /* A malformed digest is refused by the reader. */
        kept[0].sha256 = "5D0E";
        pack_result(&r, 1 << 20, &w, &u);
        assert_int_equal(ci_kept_get(&u.data, 0, &k), -EBADMSG);
        assert_int_equal(ci_render_model_text(&u.data, &text), 0);
        assert_non_null(strstr(text, "summary.csv: out-2-summary.csv, 33 bytes, sha256 ?\n"));
        free(text);
        packed_done(&w, &u);

        /* Not asked for: nil, no section. */
        r.has_kept = false;
        pack_result(&r, 1 << 20, &w, &u);
        assert_false(ci_kept_present(&u.data));
        assert_int_equal(ci_kept_count(&u.data), 0);
        assert_int_equal(ci_kept_get(&u.data, 0, &k), -ENOENT);
        assert_int_equal(ci_render_model_text(&u.data, &text), 0);
        assert_null(strstr(text, "kept outputs"));
        free(text);
        packed_done(&w, &u);
}

/* The supervisor's parting frame: an error without an id, "closing": true (closing false:
 * a connection-level error after which the connection goes on). */
static void send_parting(int fd, bool closing) {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        uint8_t hdr[4];

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 5);
        mp_pack_kv_str(&pk, "type", "error");
        mp_pack_cstr(&pk, "id");
        msgpack_pack_nil(&pk);
        mp_pack_kv_str(&pk, "code", "overloaded");
        mp_pack_kv_str(&pk, "message", "connection closed: idle for connectionIdleTimeoutMs (100 ms)");
        mp_pack_cstr(&pk, "closing");
        if (closing)
                msgpack_pack_true(&pk);
        else
                msgpack_pack_false(&pk);
        hdr[0] = (uint8_t) (sb.size >> 24);
        hdr[1] = (uint8_t) (sb.size >> 16);
        hdr[2] = (uint8_t) (sb.size >> 8);
        hdr[3] = (uint8_t) sb.size;
        assert_int_equal(write(fd, hdr, 4), 4);
        assert_int_equal(write(fd, sb.data, sb.size), (ssize_t) sb.size);
        msgpack_sbuffer_destroy(&sb);
}

/* Whether a connection waits to be accepted (the client connected again). */
static bool connection_waiting(int listen_fd) {
        struct pollfd p = { .fd = listen_fd, .events = POLLIN };
        return poll(&p, 1, 0) == 1;
}

/* The next frame the client sent is execute request id. */
static void expect_execute(Pair *p, uint64_t id) {
        ProtoRequest req;
        ProtoError err;
        void *buf;

        assert_int_equal(recv_request(p, &buf, &req, &err), 0);
        assert_int_equal(req.op, PROTO_OP_EXECUTE);
        assert_int_equal(req.id, id);
        proto_request_done(&req);
        free(buf);
}

static void test_a_connection_closed_idle_is_replaced(void **state) {
        CiExecute x = { .summary = "s", .code = "1", .code_len = 1 };
        uint64_t id;
        Pair p;
        (void) state;

        /* Closed idle, with the parting error: the request goes over a new connection. */
        pair_open(&p);
        send_parting(p.peer_fd, true);
        close(p.peer_fd);
        assert_int_equal(ci_execute_send(p.client, &x, &id), 0);
        assert_true(connection_waiting(p.listen_fd));
        p.peer_fd = accept4(p.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(p.peer_fd >= 0);
        expect_execute(&p, id);
        /* Closed with nothing said (the supervisor stopped): a new one too. */
        close(p.peer_fd);
        assert_int_equal(ci_execute_send(p.client, &x, &id), 0);
        p.peer_fd = accept4(p.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(p.peer_fd >= 0);
        expect_execute(&p, id);
        /* Closed with something else left to read (here an error that is not a parting
         * one): that is the caller's, so no new connection; the send fails. */
        send_parting(p.peer_fd, false);
        close(p.peer_fd);
        p.peer_fd = -1;
        assert_int_equal(ci_execute_send(p.client, &x, &id), -EPIPE);
        assert_false(connection_waiting(p.listen_fd));
        /* Open and quiet: the same connection. */
        pair_close(&p);
        pair_open(&p);
        assert_int_equal(ci_execute_send(p.client, &x, &id), 0);
        assert_false(connection_waiting(p.listen_fd));
        expect_execute(&p, id);
        pair_close(&p);
}

UNIT_MAIN(setup, NULL, TEST(test_a_connection_closed_idle_is_replaced), TEST(test_execute_keep_encodes),
          TEST(test_kept_read_and_rendered));
