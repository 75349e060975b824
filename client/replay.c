/* SPDX-License-Identifier: MIT */
/* Replay records: codeinterp exec --save FILE writes one, codeinterp replay FILE
 * runs the call again and says whether the code, the inputs, the outcome and
 * every channel are identical. The record is one JSON object:
 *
 *   {"codeinterpReplay": 1, "summary": ..., "code": ..., "codeSha256": ...,
 *    "sources": [{"id", "kind", "file", "textFile", "mediaType", "fileName",
 *                 "bytes", "sha256", "originalBytes", "originalSha256"}, ...],
 *    "message": <the result or error message, as exec --json prints it>}
 *
 * Sources are recorded by file and digest, not by content: replay reads the
 * files again, so a changed file shows up as a differing input. The message's
 * artifacts (files the code left in /outputs) are in it as exec --json prints them,
 * data in base64; replay compares them whole (names, media types, sizes, digests,
 * bytes and the omitted counts) when the record has them. */
#include "client/replay.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/sha256.h"
#include "common/util.h"

#define REPLAY_VERSION 1
#define MAX_FILE (256u << 20) /* as exec's */
/* A record holds one message (the client takes up to 64 MiB) written as JSON,
 * where escapes and base64 make it larger. */
#define MAX_RECORD (256u << 20)
/* How deep the record's values may nest, in json-c's count (the record object
 * is the first level); a record written by exec --save nests about 6 deep. */
#define MAX_RECORD_DEPTH 64
#define MAX_SOURCES 8 /* what exec accepts on its command line */
#define EXIT_IDENTICAL 0
#define EXIT_DIFFERENT 1
#define EXIT_ERROR 2

static_assert(MAX_RECORD < INT_MAX, "json_tokener_parse_ex() takes an int length");

static inline void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

static inline void json_object_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

/* The digest and size of a file's bytes now. */
static int digest_file(const char *path, char hex[65], size_t *ret_len) {
        _cleanup_free_ char *data = NULL;
        size_t len;
        int k = read_file_all(path, MAX_FILE, &data, &len);

        if (k < 0)
                return k;
        sha256_hex(data, len, hex);
        *ret_len = len;
        return 0;
}

/* The digest of the canonical text as exec registered it: the --text file, the file
 * itself, or for a binary attachment without --text its description. */
static int digest_text(const ReplaySource *s, const char *file, const char *text_file, char hex[65], size_t *ret_len) {
        _cleanup_free_ char *data = NULL, *desc = NULL;
        size_t len, desc_len;
        int k;

        if (!s->attachment || text_file)
                return digest_file(text_file ?: file, hex, ret_len);
        k = read_file_all(file, MAX_FILE, &data, &len);
        if (k < 0)
                return k;
        k = ci_attachment_text(s->id, data, len, s->media_type, &desc, &desc_len);
        if (k < 0)
                return k;
        sha256_hex(desc ?: data, desc ? desc_len : len, hex);
        *ret_len = desc ? desc_len : len;
        return 0;
}

static void pack_str_or_nil(msgpack_packer *pk, const char *s) {
        if (s)
                mp_pack_cstr(pk, s);
        else
                msgpack_pack_nil(pk);
}

int replay_save(const char *path, const char *summary, const char *code, size_t code_len, const ReplaySource *sources,
                size_t n_sources, const msgpack_object *message) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        MpWriter w;
        msgpack_unpacked up;
        char hex[65];
        int k;

        if (!path || !code || (!sources && n_sources > 0) || !message)
                return -EINVAL;
        mp_writer_init(&w, 0);
        msgpack_pack_map(&w.pk, 6);
        mp_pack_kv_uint(&w.pk, "codeinterpReplay", REPLAY_VERSION);
        mp_pack_kv_str(&w.pk, "summary", summary ?: "");
        mp_pack_cstr(&w.pk, "code");
        mp_pack_strn(&w.pk, code, code_len);
        sha256_hex(code, code_len, hex);
        mp_pack_kv_str(&w.pk, "codeSha256", hex);
        mp_pack_cstr(&w.pk, "sources");
        msgpack_pack_array(&w.pk, n_sources);
        for (size_t i = 0; i < n_sources; i++) {
                const ReplaySource *s = &sources[i];
                _cleanup_free_ char *file = realpath(s->file, NULL);
                _cleanup_free_ char *text_file = s->text_file ? realpath(s->text_file, NULL) : NULL;
                const char *base = strrchr(s->file, '/');
                char text_hex[65], orig_hex[65] = "";
                size_t text_len = 0, orig_len = 0;

                if (!file || (s->text_file && !text_file)) {
                        k = -errno;
                        goto finish;
                }
                k = digest_text(s, file, text_file, text_hex, &text_len);
                if (k >= 0 && s->attachment)
                        k = digest_file(file, orig_hex, &orig_len);
                if (k < 0)
                        goto finish;
                msgpack_pack_map(&w.pk, s->attachment ? 10 : 5);
                mp_pack_kv_str(&w.pk, "id", s->id);
                mp_pack_kv_str(&w.pk, "kind", s->attachment ? "attachment" : "read_source");
                mp_pack_kv_str(&w.pk, "file", file);
                mp_pack_kv_uint(&w.pk, "bytes", text_len);
                mp_pack_kv_str(&w.pk, "sha256", text_hex);
                if (s->attachment) {
                        mp_pack_cstr(&w.pk, "textFile");
                        pack_str_or_nil(&w.pk, text_file);
                        mp_pack_cstr(&w.pk, "mediaType");
                        pack_str_or_nil(&w.pk, s->media_type);
                        mp_pack_kv_str(&w.pk, "fileName", base ? base + 1 : s->file);
                        mp_pack_kv_uint(&w.pk, "originalBytes", orig_len);
                        mp_pack_kv_str(&w.pk, "originalSha256", orig_hex);
                }
        }
        mp_pack_cstr(&w.pk, "message");
        msgpack_pack_object(&w.pk, *message);

        if ((k = mp_writer_error(&w)) < 0)
                goto finish;
        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, w.sb.data, w.sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) {
                msgpack_unpacked_destroy(&up);
                k = -ENOMEM;
                goto finish;
        }
        k = -ENOMEM;
        if (asprintf(&tmp, "%s.tmp", path) >= 0 && (f = fopen(tmp, "we"))) {
                ci_json_write(f, &up.data);
                fputc('\n', f);
                k = fflush(f) == 0 && !ferror(f) ? 0 : -errno;
                if (k == 0 && rename(tmp, path) < 0)
                        k = -errno;
                if (k < 0)
                        (void) unlink(tmp);
        } else if (tmp)
                k = -errno;
        msgpack_unpacked_destroy(&up);
finish:
        mp_writer_done(&w);
        return k;
}

/* ---- replay ---- */

typedef struct Source {
        char *id;
        bool attachment;
        char *file, *text_file, *media_type, *file_name;
        const msgpack_object *rec; /* the record's entry */
        char *text, *original;     /* read now */
        size_t text_len, original_len;
        char text_hex[65], original_hex[65];
} Source;

static void source_done(Source *s) {
        free(s->id);
        free(s->file);
        free(s->text_file);
        free(s->media_type);
        free(s->file_name);
        free(s->text);
        free(s->original);
}

static char *json_of(const msgpack_object *o) {
        static const msgpack_object nil = { .type = MSGPACK_OBJECT_NIL };
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return NULL;
        ci_json_write(f, o ?: &nil);
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Compare two objects by their JSON text (the record holds the JSON form). */
static bool same(const msgpack_object *a, const msgpack_object *b) {
        _cleanup_free_ char *ja = json_of(a), *jb = json_of(b);
        return ja && jb && strcmp(ja, jb) == 0;
}

static const char *str_or(const msgpack_object *o, char *buf, size_t n, const char *dflt) {
        if (!mp_is_str(o))
                return dflt;
        snprintf(buf, n, "%.*s", (int) o->via.str.size, o->via.str.ptr);
        return buf;
}

/* "ok", "resource_limit (memory)", "error invalid_input", ... */
static void outcome_of(const msgpack_object *m, char *buf, size_t n) {
        char a[48], b[48];

        if (mp_str_eq(ci_get(m, "type"), "error")) {
                snprintf(buf, n, "error %s", str_or(ci_get(m, "code"), a, sizeof a, "?"));
                return;
        }
        str_or(ci_get(m, "outcome"), a, sizeof a, "?");
        if (mp_is_str(ci_get(m, "limit")))
                snprintf(buf, n, "%s (%s)", a, str_or(ci_get(m, "limit"), b, sizeof b, "?"));
        else
                snprintf(buf, n, "%s", a);
}

/* evidence.inputs' entry for id in message m, or NULL. */
static const msgpack_object *evidence_input(const msgpack_object *m, const char *id) {
        const msgpack_object *inputs = ci_get(ci_get(m, "evidence"), "inputs");

        if (!inputs || inputs->type != MSGPACK_OBJECT_ARRAY)
                return NULL;
        for (uint32_t i = 0; i < inputs->via.array.size; i++)
                if (mp_str_eq(ci_get(&inputs->via.array.ptr[i], "sourceId"), id))
                        return &inputs->via.array.ptr[i];
        return NULL;
}

/* A digest: from the message's evidence if it has one, else dflt. */
static const char *digest_of(const msgpack_object *entry, const char *key, char buf[65], const char *dflt) {
        return str_or(ci_get(entry, key), buf, 65, dflt);
}

static void describe_channel(const msgpack_object *ch, char *buf, size_t n) {
        if (!ch || ch->type != MSGPACK_OBJECT_MAP) {
                snprintf(buf, n, "none");
                return;
        }
        const msgpack_object *total = ci_get(ch, "totalCharacters");
        if (mp_is_uint(total))
                snprintf(buf, n, "%" PRIu64 " characters", total->via.u64);
        else
                snprintf(buf, n, "a map");
}

/* A json-c value as a msgpack object in zone, the form replay compares with the
 * message it gets now: objects become maps (str keys, in the record's order),
 * arrays arrays, strings str (bytes as they are: base64 stays a string),
 * integers positive or negative integers (uint64 ids keep their range), other
 * numbers float64, booleans booleans, null nil. The tokener bounds the depth. */
static int mp_from_json(json_object *j, msgpack_zone *zone, msgpack_object *ret) {
        msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
        size_t n, i = 0;
        int k;

        switch (json_object_get_type(j)) {
        case json_type_null:
                break;
        case json_type_boolean:
                o.type = MSGPACK_OBJECT_BOOLEAN;
                o.via.boolean = json_object_get_boolean(j);
                break;
        case json_type_int:
                o.via.i64 = json_object_get_int64(j);
                if (o.via.i64 < 0)
                        o.type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
                else {
                        o.type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                        o.via.u64 = json_object_get_uint64(j); /* beyond INT64_MAX too */
                }
                break;
        case json_type_double:
                o.type = MSGPACK_OBJECT_FLOAT64;
                o.via.f64 = json_object_get_double(j);
                break;
        case json_type_string:
                n = (size_t) json_object_get_string_len(j);
                o.type = MSGPACK_OBJECT_STR;
                o.via.str.size = (uint32_t) n;
                o.via.str.ptr = msgpack_zone_malloc(zone, n + 1);
                if (!o.via.str.ptr)
                        return -ENOMEM;
                memcpy((char *) o.via.str.ptr, json_object_get_string(j), n + 1);
                break;
        case json_type_array:
                n = json_object_array_length(j);
                if (n > UINT32_MAX)
                        return -EBADMSG;
                o.type = MSGPACK_OBJECT_ARRAY;
                o.via.array.size = (uint32_t) n;
                if (n == 0)
                        break;
                o.via.array.ptr = msgpack_zone_malloc(zone, n * sizeof *o.via.array.ptr);
                if (!o.via.array.ptr)
                        return -ENOMEM;
                for (i = 0; i < n; i++) {
                        k = mp_from_json(json_object_array_get_idx(j, i), zone, &o.via.array.ptr[i]);
                        if (k < 0)
                                return k;
                }
                break;
        case json_type_object:
                n = (size_t) json_object_object_length(j);
                o.type = MSGPACK_OBJECT_MAP;
                o.via.map.size = (uint32_t) n;
                if (n == 0)
                        break;
                o.via.map.ptr = msgpack_zone_malloc(zone, n * sizeof *o.via.map.ptr);
                if (!o.via.map.ptr)
                        return -ENOMEM;
                json_object_object_foreach(j, key, val) {
                        msgpack_object_kv *kv = &o.via.map.ptr[i++];
                        size_t key_len = strlen(key);

                        kv->key.type = MSGPACK_OBJECT_STR;
                        kv->key.via.str.size = (uint32_t) key_len;
                        kv->key.via.str.ptr = msgpack_zone_malloc(zone, key_len + 1);
                        if (!kv->key.via.str.ptr)
                                return -ENOMEM;
                        memcpy((char *) kv->key.via.str.ptr, key, key_len + 1);
                        k = mp_from_json(val, zone, &kv->val);
                        if (k < 0)
                                return k;
                }
                break;
        }
        *ret = o;
        return 0;
}

/* The record: JSON (json-c's strict grammar, one value, surrounding whitespace
 * allowed) with the fields replay needs, as msgpack objects in zone. */
static int load_record(const char *path, msgpack_zone *zone, msgpack_object *ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *root = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len;
        int k = read_file_all(path, MAX_RECORD, &text, &len);

        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: cannot read \"%s\": %s\n", path, strerror(-k));
                return k;
        }
        tok = json_tokener_new_ex(MAX_RECORD_DEPTH);
        if (!tok) {
                fprintf(stderr, "codeinterp: replay: cannot read \"%s\": %s\n", path, strerror(ENOMEM));
                return -ENOMEM;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        /* The length includes the final NUL, so the tokener knows the input ends
         * there (a NUL before it ends the parse early and is caught below). */
        root = json_tokener_parse_ex(tok, text, (int) (len + 1));
        if (json_tokener_get_error(tok) != json_tokener_success || json_tokener_get_parse_end(tok) != len) {
                fprintf(stderr, "codeinterp: replay: \"%s\" is not JSON\n", path);
                return -EBADMSG;
        }
        k = mp_from_json(root, zone, ret);
        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: cannot read \"%s\": %s\n", path, strerror(-k));
                return k;
        }
        const msgpack_object *v = ci_get(ret, "codeinterpReplay");
        if (!mp_is_uint(v) || v->via.u64 != REPLAY_VERSION || !mp_is_str(ci_get(ret, "code")) ||
            !mp_is_str(ci_get(ret, "summary")) || !ci_get(ret, "sources") ||
            ci_get(ret, "sources")->type != MSGPACK_OBJECT_ARRAY || !ci_get(ret, "message") ||
            ci_get(ret, "message")->type != MSGPACK_OBJECT_MAP) {
                fprintf(stderr, "codeinterp: replay: \"%s\" is not a codeinterp replay record (version %d)\n", path,
                        REPLAY_VERSION);
                return -EBADMSG;
        }
        return 0;
}

static int load_source(const msgpack_object *rec, Source *s) {
        s->rec = rec;
        if (rec->type != MSGPACK_OBJECT_MAP || !mp_is_str(ci_get(rec, "id")) || !mp_is_str(ci_get(rec, "file")))
                return -EBADMSG;
        s->id = mp_strdup(ci_get(rec, "id"));
        s->attachment = mp_str_eq(ci_get(rec, "kind"), "attachment");
        s->file = mp_strdup(ci_get(rec, "file"));
        s->text_file = mp_is_str(ci_get(rec, "textFile")) ? mp_strdup(ci_get(rec, "textFile")) : NULL;
        s->media_type = mp_is_str(ci_get(rec, "mediaType")) ? mp_strdup(ci_get(rec, "mediaType")) : NULL;
        s->file_name = mp_is_str(ci_get(rec, "fileName")) ? mp_strdup(ci_get(rec, "fileName")) : NULL;
        if (!s->id || !s->file)
                return -ENOMEM;
        return 0;
}

static int read_source(Source *s) {
        int k;

        if (s->attachment) {
                k = read_file_all(s->file, MAX_FILE, &s->original, &s->original_len);
                if (k < 0)
                        return k;
                sha256_hex(s->original, s->original_len, s->original_hex);
        }
        if (s->attachment && !s->text_file) {
                /* The same canonical text exec chose: the bytes, or for binary ones a
                 * description. */
                k = ci_attachment_text(s->id, s->original, s->original_len, s->media_type, &s->text, &s->text_len);
                if (k == 0)
                        k = read_file_all(s->file, MAX_FILE, &s->text, &s->text_len);
        } else
                k = read_file_all(s->text_file ?: s->file, MAX_FILE, &s->text, &s->text_len);
        if (k < 0)
                return k;
        sha256_hex(s->text, s->text_len, s->text_hex);
        return 0;
}

/* Open an invocation and register the sources (if any), then execute. 0, or the
 * exit status EXIT_ERROR after saying why. */
static int run_call(CiClient *c, const char *summary, const char *code, size_t code_len, Source *sources, size_t n,
                    CiMessage *ret) {
        char inv[CI_INVOCATION_ID_MAX + 1], code_buf[32], msg[512];
        const char *ids[MAX_SOURCES];
        CiExecute x = { .summary = summary, .code = code, .code_len = code_len };
        int k;

        if (n > 0) {
                CiMessage err = {};
                k = ci_invocation_open(c, inv, &err);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: replay: invocation.open failed: %s\n",
                                err.buf ? str_or(ci_get(&err.unpacked.data, "code"), code_buf, sizeof code_buf, "?")
                                        : strerror(-k));
                        ci_message_done(&err);
                        return EXIT_ERROR;
                }
                for (size_t i = 0; i < n; i++) {
                        Source *s = &sources[i];
                        CiSource cs = {
                                .id = s->id,
                                .attachment = s->attachment,
                                .text = s->text,
                                .text_len = s->text_len,
                                .original = s->original,
                                .original_len = s->original_len,
                                .media_type = s->media_type,
                                .file_name = s->file_name,
                        };
                        CiMessage rep;

                        k = ci_source_put(c, inv, &cs, &rep);
                        if (k < 0) {
                                fprintf(stderr, "codeinterp: replay: source.put failed: %s\n", strerror(-k));
                                return EXIT_ERROR;
                        }
                        if (strcmp(ci_message_type(&rep) ?: "", "reply") != 0) {
                                fprintf(stderr, "codeinterp: replay: source %s rejected (%s): %s\n", s->id,
                                        str_or(ci_get(&rep.unpacked.data, "code"), code_buf, sizeof code_buf, "?"),
                                        str_or(ci_get(&rep.unpacked.data, "message"), msg, sizeof msg, ""));
                                ci_message_done(&rep);
                                return EXIT_ERROR;
                        }
                        ci_message_done(&rep);
                        ids[i] = s->id;
                }
                x.invocation = inv;
                x.source_ids = ids;
                x.n_source_ids = n;
        }
        k = ci_execute(c, &x, NULL, NULL, ret);
        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: lost the supervisor: %s\n", strerror(-k));
                return EXIT_ERROR;
        }
        return 0;
}

typedef struct Report {
        char differing[512];
        bool different;
} Report;

static void verdict(Report *r, const char *name, bool identical, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static void verdict(Report *r, const char *name, bool identical, const char *fmt, ...) {
        va_list ap;

        printf("%-10s %s", name, identical ? "identical" : "DIFFERS");
        if (fmt) {
                fputs(": ", stdout);
                va_start(ap, fmt);
                vprintf(fmt, ap);
                va_end(ap);
        }
        fputc('\n', stdout);
        if (!identical) {
                size_t len = strlen(r->differing);
                snprintf(r->differing + len, sizeof r->differing - len, "%s%s", r->different ? ", " : "", name);
                r->different = true;
        }
}

/* Informational: runtime, policy and limits are reported, not judged. */
static void note(const char *name, const msgpack_object *rec, const msgpack_object *now) {
        _cleanup_free_ char *a = json_of(rec), *b = json_of(now);

        if (!a || !b)
                return;
        if (strcmp(a, b) == 0)
                printf("%-10s same: %s\n", name, a);
        else
                printf("%-10s not the same (noted, not judged): recorded %s, replayed %s\n", name, a, b);
}

static void compare(const msgpack_object *record, const Source *sources, size_t n, const msgpack_object *now,
                    Report *r) {
        const msgpack_object *was = ci_get(record, "message");
        const msgpack_object *code = ci_get(record, "code");
        char rec_hex[65], now_hex[65], hex[65], a[128], b[128];

        /* The code: what the record says was run, against what was run now. */
        sha256_hex(code->via.str.ptr, code->via.str.size, hex);
        digest_of(ci_get(was, "evidence"), "codeSha256", rec_hex,
                  str_or(ci_get(record, "codeSha256"), a, sizeof a, "(none)"));
        digest_of(ci_get(now, "evidence"), "codeSha256", now_hex, hex);
        if (strcmp(rec_hex, now_hex) == 0)
                verdict(r, "code", true, "sha256 %s", now_hex);
        else
                verdict(r, "code", false, "sha256 %s recorded, %s replayed (the record's code was changed?)", rec_hex,
                        now_hex);

        for (size_t i = 0; i < n; i++) {
                const Source *s = &sources[i];
                const msgpack_object *ew = evidence_input(was, s->id), *en = evidence_input(now, s->id);
                char name[96], rec_o[65], now_o[65];
                bool ok;

                snprintf(name, sizeof name, "input %s", s->id);
                digest_of(ew, "sha256", rec_hex, str_or(ci_get(s->rec, "sha256"), a, sizeof a, "(none)"));
                digest_of(en, "sha256", now_hex, s->text_hex);
                ok = strcmp(rec_hex, now_hex) == 0;
                if (s->attachment) {
                        digest_of(ew, "originalSha256", rec_o,
                                  str_or(ci_get(s->rec, "originalSha256"), b, sizeof b, "(none)"));
                        digest_of(en, "originalSha256", now_o, s->original_hex);
                        ok = ok && strcmp(rec_o, now_o) == 0;
                }
                if (ok)
                        verdict(r, name, true, "sha256 %s", now_hex);
                else if (s->attachment)
                        verdict(r, name, false,
                                "text sha256 %s recorded, %s replayed; original sha256 %s recorded, %s replayed (files "
                                "%s, %s)",
                                rec_hex, now_hex, rec_o, now_o, s->file, s->text_file ?: s->file);
                else
                        verdict(r, name, false, "sha256 %s recorded, %s replayed (file %s)", rec_hex, now_hex, s->file);
        }

        outcome_of(was, a, sizeof a);
        outcome_of(now, b, sizeof b);
        if (strcmp(a, b) == 0)
                verdict(r, "outcome", true, "%s", a);
        else
                verdict(r, "outcome", false, "%s recorded, %s replayed", a, b);

        static const char *const channels[] = { "stdout", "stderr", "result", "exception" };
        for (size_t i = 0; i < ELEMENTSOF(channels); i++) {
                const msgpack_object *cw = ci_get(was, channels[i]), *cn = ci_get(now, channels[i]);
                if (same(cw, cn))
                        verdict(r, channels[i], true, NULL);
                else if (!strcmp(channels[i], "exception"))
                        verdict(r, channels[i], false, "%s recorded, %s replayed",
                                str_or(ci_get(cw, "type"), a, sizeof a, "none"),
                                str_or(ci_get(cn, "type"), b, sizeof b, "none"));
                else {
                        describe_channel(cw, a, sizeof a);
                        describe_channel(cn, b, sizeof b);
                        if (strcmp(a, b) == 0)
                                verdict(r, channels[i], false, "%s each, not the same", a);
                        else
                                verdict(r, channels[i], false, "%s recorded, %s replayed", a, b);
                }
        }

        /* Records made before artifacts existed have none: nothing to judge. */
        if (ci_get(was, "artifacts")) {
                const msgpack_object *aw = ci_get(was, "artifacts"), *an = ci_get(now, "artifacts");
                uint32_t nw = aw->type == MSGPACK_OBJECT_ARRAY ? aw->via.array.size : 0;
                uint32_t nn = an && an->type == MSGPACK_OBJECT_ARRAY ? an->via.array.size : 0;
                if (same(aw, an) && same(ci_get(was, "omittedArtifacts"), ci_get(now, "omittedArtifacts")) &&
                    same(ci_get(was, "omittedArtifactBytes"), ci_get(now, "omittedArtifactBytes")))
                        verdict(r, "artifacts", true, NULL);
                else if (nw == nn)
                        verdict(r, "artifacts", false, "%" PRIu32 " files each, not the same", nw);
                else
                        verdict(r, "artifacts", false, "%" PRIu32 " files recorded, %" PRIu32 " replayed", nw, nn);
        }

        static const char *const notes[] = { "runtime", "policy", "limits" };
        for (size_t i = 0; i < ELEMENTSOF(notes); i++)
                note(notes[i], ci_get(ci_get(was, "evidence"), notes[i]), ci_get(ci_get(now, "evidence"), notes[i]));
}

static void replay_help(void) {
        printf("Usage: codeinterp replay FILE\n"
               "\n"
               "Run the call recorded by \"codeinterp exec --save FILE\" again and report whether the code\n"
               "digest, each input digest, the outcome, every channel (stdout, stderr, result,\n"
               "exception) and the files left in /outputs are identical. Runtime, policy and limits are shown, not "
               "judged.\n"
               "Exit status: 0 identical, 1 not identical, 2 error.\n");
}

/* The record's sources into sources (*n of them), each file read. 0, or -1 after saying why. */
static int load_sources(const msgpack_object *record, Source *sources, size_t *n) {
        const msgpack_object *recs = ci_get(record, "sources");
        int k;

        if (recs->via.array.size > MAX_SOURCES) {
                fprintf(stderr, "codeinterp: replay: more than %d sources in the record\n", MAX_SOURCES);
                return -1;
        }
        for (uint32_t i = 0; i < recs->via.array.size; i++) {
                Source *s = &sources[(*n)++];
                k = load_source(&recs->via.array.ptr[i], s);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: replay: source %" PRIu32 " of the record is malformed\n", i + 1);
                        return -1;
                }
                k = read_source(s);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: replay: cannot read the file for input %s (%s): %s\n", s->id,
                                s->file, strerror(-k));
                        return -1;
                }
        }
        return 0;
}

int replay_main(const char *socket, int argc, char **argv) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                {},
        };
        msgpack_zone *zone = NULL;
        msgpack_object record;
        Source sources[MAX_SOURCES] = {};
        size_t n = 0;
        CiClient *c = NULL;
        CiMessage now = {};
        Report report = {};
        _cleanup_free_ char *summary = NULL;
        int opt, k, status = EXIT_ERROR;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (opt) {
                case 'h':
                        replay_help();
                        return 0;
                default:
                        return EXIT_ERROR;
                }
        if (optind + 1 != argc) {
                fprintf(stderr, "codeinterp: replay needs one FILE (a record from exec --save)\n");
                return EXIT_ERROR;
        }

        zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
        if (!zone)
                return EXIT_ERROR;
        if (load_record(argv[optind], zone, &record) < 0)
                goto finish;

        if (load_sources(&record, sources, &n) < 0)
                goto finish;

        k = ci_connect(socket, &c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: cannot connect to the supervisor at %s: %s\n",
                        ci_socket_path(socket), strerror(-k));
                goto finish;
        }
        const msgpack_object *code = ci_get(&record, "code");
        summary = mp_strdup(ci_get(&record, "summary"));
        if (!summary)
                goto finish;
        if (run_call(c, summary, code->via.str.ptr, code->via.str.size, sources, n, &now) != 0)
                goto finish;

        compare(&record, sources, n, &now.unpacked.data, &report);
        if (report.different)
                printf("replay: NOT identical: %s\n", report.differing);
        else
                printf("replay: identical\n");
        fflush(stdout);
        status = report.different ? EXIT_DIFFERENT : EXIT_IDENTICAL;

finish:
        ci_message_done(&now);
        ci_close(c);
        for (size_t i = 0; i < n; i++)
                source_done(&sources[i]);
        msgpack_zone_free(zone);
        return status;
}
