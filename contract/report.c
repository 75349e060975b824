/* SPDX-License-Identifier: MIT */
/* The worker's reports written (setup, ready, done) and the supervisor's bounded parser. */
#include "contract/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/mp.h"
#include "common/util.h"

#define EXC_TYPE_MAX_CHARS 256

static const char *const limit_names[] = {
        [REPORT_LIMIT_NONE] = NULL,
        [REPORT_LIMIT_MEMORY] = "memory",
        [REPORT_LIMIT_FILE_SIZE] = "file_size",
        [REPORT_LIMIT_PROCESSES] = "processes",
};

const char *report_limit_to_string(ReportLimit l) {
        if (l < 0 || l >= _REPORT_LIMIT_MAX)
                return NULL;
        return limit_names[l];
}

/* The length and the body in one writev(): the supervisor wakes once per report, not
 * once for the length and again for the body. A pipe write of up to PIPE_BUF bytes is
 * whole; what a longer one, a signal or a full pipe that user code made non-blocking
 * leaves is finished by write_full() (which waits for room on EAGAIN). */
static int send_frame(int fd, const MpWriter *w) {
        uint8_t hdr[4];
        ssize_t n;
        size_t body;
        int r;

        if (w->error < 0)
                return w->error;
        frame_put_len(hdr, (uint32_t) w->sb.size);
        struct iovec iov[2] = { { .iov_base = hdr, .iov_len = sizeof hdr },
                                { .iov_base = w->sb.data, .iov_len = w->sb.size } };
        n = writev(fd, iov, 2);
        if (n < 0) {
                if (errno != EINTR && errno != EAGAIN)
                        return -errno;
                n = 0;
        }
        if ((size_t) n < sizeof hdr) {
                r = write_full(fd, hdr + n, sizeof hdr - (size_t) n);
                if (r < 0)
                        return r;
                n = sizeof hdr;
        }
        body = (size_t) n - sizeof hdr;
        return write_full(fd, w->sb.data + body, w->sb.size - body);
}

int report_send_setup_error(int fd, SetupStage stage, int error) {
        MpWriter w;
        int r;

        mp_writer_init(&w, 0);
        msgpack_pack_map(&w.pk, 3);
        mp_pack_kv_str(&w.pk, "t", "setup");
        mp_pack_kv_str(&w.pk, "stage", setup_stage_to_string(stage));
        mp_pack_kv_int(&w.pk, "errno", abs(error));
        r = send_frame(fd, &w);
        mp_writer_done(&w);
        return r;
}

int report_send_ready(int fd) {
        MpWriter w;
        int r;

        mp_writer_init(&w, 0);
        msgpack_pack_map(&w.pk, 1);
        mp_pack_kv_str(&w.pk, "t", "ready");
        r = send_frame(fd, &w);
        mp_writer_done(&w);
        return r;
}

static void pack_fitted(msgpack_packer *pk, const char *key, const FitText *t) {
        mp_pack_cstr(pk, key);
        msgpack_pack_map(pk, FIT_TEXT_WIRE_FIELDS);
        fit_text_pack_fields(pk, t);
}

int report_send_done(int fd, const ReportRun *rep, uint64_t exc_ceiling) {
        MpWriter w;
        msgpack_packer *pk = &w.pk;
        FitText type = {}, msg = {}, tb = {};
        const char *limit = report_limit_to_string(rep->limit);
        int r = 0;

        mp_writer_init(&w, 0);
        msgpack_pack_map(pk, 4);
        mp_pack_kv_str(pk, "t", "done");
        mp_pack_kv_bool(pk, "hasResult", rep->has_result);
        mp_pack_kv_str(pk, "limit", limit);
        mp_pack_cstr(pk, "exception");
        if (rep->exception) {
                const char *t = rep->exc_type ? rep->exc_type : "BaseException";
                const char *m = rep->exc_message ? rep->exc_message : "";
                const char *b = rep->exc_traceback ? rep->exc_traceback : "";

                if ((r = fit_text_from_buffer(t, strlen(t), EXC_TYPE_MAX_CHARS, &type)) < 0 ||
                    (r = fit_text_from_buffer(m, strlen(m), exc_ceiling, &msg)) < 0 ||
                    (r = fit_text_from_buffer(b, strlen(b), exc_ceiling, &tb)) < 0)
                        goto out;
                msgpack_pack_map(pk, 3);
                mp_pack_cstr(pk, "type");
                mp_pack_strn(pk, type.text, type.text_bytes);
                pack_fitted(pk, "message", &msg);
                pack_fitted(pk, "traceback", &tb);
        } else
                msgpack_pack_nil(pk);
        r = send_frame(fd, &w);
out:
        fit_text_done(&type);
        fit_text_done(&msg);
        fit_text_done(&tb);
        mp_writer_done(&w);
        return r;
}

static int parse_fitted(const msgpack_object *map, const char *key, uint64_t ceiling, FitText *ret) {
        const msgpack_object *o = mp_map_get(map, key);
        const char *text;
        uint32_t len;
        uint64_t chars, total_chars, total_bytes, omitted_chars, omitted_bytes;
        FitText t = {};

        if (!o || o->type != MSGPACK_OBJECT_MAP)
                return -EBADMSG;
        if (mp_get_str(o, "text", &text, &len) < 0 || mp_get_uint(o, "totalCharacters", &total_chars) < 0 ||
            mp_get_uint(o, "totalBytes", &total_bytes) < 0 || mp_get_uint(o, "omittedCharacters", &omitted_chars) < 0 ||
            mp_get_uint(o, "omittedBytes", &omitted_bytes) < 0)
                return -EBADMSG;
        /* The text must be valid UTF-8 within the ceiling, and the counts must add up. */
        if (utf8_count(text, len, &chars) < 0 || chars > ceiling || chars + omitted_chars != total_chars ||
            (uint64_t) len + omitted_bytes != total_bytes)
                return -EBADMSG;
        t.text = malloc((size_t) len + 1);
        if (!t.text)
                return -ENOMEM;
        memcpy(t.text, text, len);
        t.text[len] = 0;
        t.text_bytes = len;
        t.text_chars = chars;
        t.total_chars = total_chars;
        t.total_bytes = total_bytes;
        t.omitted_chars = omitted_chars;
        t.omitted_bytes = omitted_bytes;
        /* The worker keeps head and tail like every channel; where exactly the cut is
         * cannot be checked, so it is placed by the same rule. */
        t.omitted_at = omitted_chars ? ceiling - ceiling / 4 : chars;
        if (t.omitted_at > chars)
                t.omitted_at = chars;
        *ret = t;
        return 0;
}

/* A setup report: the stage that failed and its errno. 0 or -EBADMSG. */
static int parse_setup(const msgpack_object *root, WorkerReport *rep) {
        const char *stage;
        uint32_t slen;
        uint64_t e;

        if (mp_get_str(root, "stage", &stage, &slen) < 0 || slen == 0 || slen >= sizeof rep->stage ||
            mp_get_uint(root, "errno", &e) < 0 || e > 4095)
                return -EBADMSG;
        for (uint32_t i = 0; i < slen; i++)
                if (!((stage[i] >= 'a' && stage[i] <= 'z') || stage[i] == '_'))
                        return -EBADMSG;
        rep->kind = REPORT_SETUP_ERROR;
        memcpy(rep->stage, stage, slen);
        rep->error = (int) e;
        return 0;
}

/* A done report: the limit that ended the code and its exception. 0 or < 0. */
static int parse_done(const msgpack_object *root, uint64_t exc_ceiling, WorkerReport *rep) {
        const msgpack_object *exc, *lim;
        int r;

        rep->kind = REPORT_DONE;
        if (mp_get_bool(root, "hasResult", &rep->has_result) < 0)
                return -EBADMSG;
        lim = mp_map_get(root, "limit");
        if (!lim)
                return -EBADMSG;
        if (lim->type == MSGPACK_OBJECT_NIL)
                rep->limit = REPORT_LIMIT_NONE;
        else if (mp_str_eq(lim, "memory"))
                rep->limit = REPORT_LIMIT_MEMORY;
        else if (mp_str_eq(lim, "file_size"))
                rep->limit = REPORT_LIMIT_FILE_SIZE;
        else if (mp_str_eq(lim, "processes"))
                rep->limit = REPORT_LIMIT_PROCESSES;
        else
                return -EBADMSG;
        exc = mp_map_get(root, "exception");
        if (!exc)
                return -EBADMSG;
        if (exc->type == MSGPACK_OBJECT_MAP) {
                const char *ty;
                uint32_t tylen;
                uint64_t chars;

                rep->exception = true;
                if (mp_get_str(exc, "type", &ty, &tylen) < 0 || utf8_count(ty, tylen, &chars) < 0 ||
                    chars > EXC_TYPE_MAX_CHARS)
                        return -EBADMSG;
                rep->exc_type = strndup(ty, tylen);
                if (!rep->exc_type)
                        return -ENOMEM;
                if ((r = parse_fitted(exc, "message", exc_ceiling, &rep->exc_message)) < 0 ||
                    (r = parse_fitted(exc, "traceback", exc_ceiling, &rep->exc_traceback)) < 0)
                        return r;
        } else if (exc->type != MSGPACK_OBJECT_NIL)
                return -EBADMSG;
        else if (rep->limit != REPORT_LIMIT_NONE)
                return -EBADMSG;
        return 0;
}

int report_parse(const void *buf, size_t len, uint64_t exc_ceiling, WorkerReport *ret) {
        msgpack_unpacked u;
        const msgpack_object *root, *t;
        WorkerReport rep = {};
        size_t off = 0;
        int r = -EBADMSG;

        msgpack_unpacked_init(&u);
        if (mp_validate(buf, len, 4, NULL) < 0 || msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
            off != len)
                goto out;
        root = &u.data;
        t = mp_map_get(root, "t");
        if (mp_str_eq(t, "setup")) {
                if (parse_setup(root, &rep) < 0)
                        goto out;
        } else if (mp_str_eq(t, "ready")) {
                if (root->via.map.size != 1)
                        goto out;
                rep.kind = REPORT_READY;
        } else if (mp_str_eq(t, "done")) {
                if ((r = parse_done(root, exc_ceiling, &rep)) < 0)
                        goto out;
        } else
                goto out;

        *ret = rep;
        rep = (WorkerReport){};
        r = 0;
out:
        report_done(&rep);
        msgpack_unpacked_destroy(&u);
        return r;
}

void report_done(WorkerReport *r) {
        free(r->exc_type);
        r->exc_type = NULL;
        fit_text_done(&r->exc_message);
        fit_text_done(&r->exc_traceback);
}
