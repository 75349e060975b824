/* SPDX-License-Identifier: MIT */
/* The replay record, written and read back: codeinterp exec --save FILE writes one,
 * codeinterp replay FILE reads it (client/replay.c runs and compares). One JSON object:
 *
 *   version 1 (one call without keepOutputs):
 *   {"codeinterpReplay": 1, "summary": ..., "code": ..., "codeSha256": ...,
 *    "sources": [{"id", "kind", "file", "textFile", "mediaType", "fileName",
 *                 "bytes", "sha256", "originalBytes", "originalSha256"}, ...],
 *    "message": <the result or error message, as exec --json prints it>}
 *
 *   version 2 (a chain of calls in one invocation, or a call with keepOutputs):
 *   {"codeinterpReplay": 2, "sources": [...as version 1...],
 *    "calls": [{"summary", "code", "codeSha256", "keepOutputs": "all" | [names]
 *               (absent when none), "message"}, ...]}
 *
 * Sources are recorded by file and digest, not by content: replay reads the files
 * again, so a changed file shows up as a differing input. A message's artifacts are in
 * it as exec --json prints them, data in base64. */
#include "client/replay.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/replay_internal.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/sha256.h"
#include "common/util.h"

#define MAX_FILE (256u << 20) /* as exec's */
/* A record holds up to REPLAY_MAX_CALLS messages (the client takes up to 64 MiB each)
 * written as JSON, where escapes and base64 make them larger; replay reads 256 MiB. */
#define MAX_RECORD (256u << 20)
/* How deep the record's values may nest, in json-c's count (the record object is the
 * first level); a record written by exec --save nests about 8 deep. */
#define MAX_RECORD_DEPTH 64

static_assert(MAX_RECORD < INT_MAX, "json_tokener_parse_ex() takes an int length");

static inline void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

static inline void json_object_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

/* ---- writing ---- */

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

/* One source's entry: its files (absolute) and the digests of what they hold now. */
static int pack_source(msgpack_packer *pk, const ReplaySource *s) {
        _cleanup_free_ char *file = realpath(s->file, NULL);
        _cleanup_free_ char *text_file = s->text_file ? realpath(s->text_file, NULL) : NULL;
        const char *base = strrchr(s->file, '/');
        char text_hex[65], orig_hex[65] = "";
        size_t text_len = 0, orig_len = 0;
        int k;

        if (!file || (s->text_file && !text_file))
                return -errno;
        k = digest_text(s, file, text_file, text_hex, &text_len);
        if (k >= 0 && s->attachment)
                k = digest_file(file, orig_hex, &orig_len);
        if (k < 0)
                return k;
        msgpack_pack_map(pk, s->attachment ? 10 : 5);
        mp_pack_kv_str(pk, "id", s->id);
        mp_pack_kv_str(pk, "kind", s->attachment ? "attachment" : "read_source");
        mp_pack_kv_str(pk, "file", file);
        mp_pack_kv_uint(pk, "bytes", text_len);
        mp_pack_kv_str(pk, "sha256", text_hex);
        if (s->attachment) {
                mp_pack_cstr(pk, "textFile");
                pack_str_or_nil(pk, text_file);
                mp_pack_cstr(pk, "mediaType");
                pack_str_or_nil(pk, s->media_type);
                mp_pack_kv_str(pk, "fileName", base ? base + 1 : s->file);
                mp_pack_kv_uint(pk, "originalBytes", orig_len);
                mp_pack_kv_str(pk, "originalSha256", orig_hex);
        }
        return 0;
}

static int pack_sources(msgpack_packer *pk, const ReplaySource *sources, size_t n) {
        mp_pack_cstr(pk, "sources");
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++) {
                int k = pack_source(pk, &sources[i]);
                if (k < 0)
                        return k;
        }
        return 0;
}

/* summary, code and codeSha256: the fields a call has in either version. */
static void pack_call_head(msgpack_packer *pk, const ReplayCall *call) {
        char hex[65];

        mp_pack_kv_str(pk, "summary", call->summary ?: "");
        mp_pack_cstr(pk, "code");
        mp_pack_strn(pk, call->code, call->code_len);
        sha256_hex(call->code, call->code_len, hex);
        mp_pack_kv_str(pk, "codeSha256", hex);
}

/* A version 2 call: the head, keepOutputs when one was sent, the message. */
static void pack_call(msgpack_packer *pk, const ReplayCall *call) {
        msgpack_pack_map(pk, call->keep ? 5 : 4);
        pack_call_head(pk, call);
        if (call->keep) {
                mp_pack_cstr(pk, "keepOutputs");
                if (call->keep->all)
                        mp_pack_cstr(pk, "all");
                else {
                        msgpack_pack_array(pk, call->keep->n_names);
                        for (size_t i = 0; i < call->keep->n_names; i++)
                                mp_pack_cstr(pk, call->keep->names[i]);
                }
        }
        mp_pack_cstr(pk, "message");
        msgpack_pack_object(pk, *call->message);
}

/* The packed record as one line of JSON in path, through path.tmp and a rename. */
static int write_json(const char *path, const MpWriter *w) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        msgpack_unpacked up;
        int k;

        msgpack_unpacked_init(&up);
        if (msgpack_unpack_next(&up, w->sb.data, w->sb.size, NULL) != MSGPACK_UNPACK_SUCCESS) {
                msgpack_unpacked_destroy(&up);
                return -ENOMEM;
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
        return k;
}

int replay_save(const char *path, const ReplaySource *sources, size_t n_sources, const ReplayCall *calls,
                size_t n_calls) {
        MpWriter w;
        int k;

        if (!path || (!sources && n_sources > 0) || !calls || n_calls == 0 || n_calls > REPLAY_MAX_CALLS)
                return -EINVAL;
        for (size_t i = 0; i < n_calls; i++)
                if (!calls[i].code || !calls[i].message)
                        return -EINVAL;
        bool chain = n_calls > 1 || calls[0].keep;
        mp_writer_init(&w, 0);
        msgpack_pack_map(&w.pk, chain ? 3 : 6);
        mp_pack_kv_uint(&w.pk, "codeinterpReplay", chain ? 2 : 1);
        if (!chain)
                pack_call_head(&w.pk, &calls[0]);
        k = pack_sources(&w.pk, sources, n_sources);
        if (k >= 0 && chain) {
                mp_pack_cstr(&w.pk, "calls");
                msgpack_pack_array(&w.pk, n_calls);
                for (size_t i = 0; i < n_calls; i++)
                        pack_call(&w.pk, &calls[i]);
        } else if (k >= 0) {
                mp_pack_cstr(&w.pk, "message");
                msgpack_pack_object(&w.pk, *calls[0].message);
        }
        if (k >= 0)
                k = mp_writer_error(&w);
        if (k >= 0)
                k = write_json(path, &w);
        mp_writer_done(&w);
        return k;
}

/* ---- reading ---- */

/* A copy of s[0..n] (its NUL included) in zone, as a msgpack string of n bytes. */
static int zone_str(msgpack_zone *zone, const char *s, size_t n, msgpack_object *ret) {
        char *p = msgpack_zone_malloc(zone, n + 1);

        if (!p)
                return -ENOMEM;
        memcpy(p, s, n + 1);
        ret->type = MSGPACK_OBJECT_STR;
        ret->via.str.size = (uint32_t) n;
        ret->via.str.ptr = p;
        return 0;
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
                k = zone_str(zone, json_object_get_string(j), (size_t) json_object_get_string_len(j), &o);
                if (k < 0)
                        return k;
                break;
        case json_type_array:
                n = json_object_array_length(j);
                if (n > UINT32_MAX)
                        return -EBADMSG;
                o.type = MSGPACK_OBJECT_ARRAY;
                o.via.array.size = (uint32_t) n;
                if (n > 0 && !(o.via.array.ptr = msgpack_zone_malloc(zone, n * sizeof *o.via.array.ptr)))
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
                if (n > 0 && !(o.via.map.ptr = msgpack_zone_malloc(zone, n * sizeof *o.via.map.ptr)))
                        return -ENOMEM;
                json_object_object_foreach(j, key, val) {
                        msgpack_object_kv *kv = &o.via.map.ptr[i++];

                        k = zone_str(zone, key, strlen(key), &kv->key);
                        if (k < 0)
                                return k;
                        k = mp_from_json(val, zone, &kv->val);
                        if (k < 0)
                                return k;
                }
                break;
        }
        *ret = o;
        return 0;
}

/* The file as JSON (json-c's strict grammar, one value, surrounding whitespace allowed),
 * as msgpack objects in zone. */
static int parse_record(const char *path, msgpack_zone *zone, msgpack_object *ret) {
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
        if (k < 0)
                fprintf(stderr, "codeinterp: replay: cannot read \"%s\": %s\n", path, strerror(-k));
        return k;
}

static bool is_map(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_MAP;
}

static bool is_array(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_ARRAY;
}

/* A string without a NUL inside (the name is sent as a C string). */
static bool is_cstr(const msgpack_object *o) {
        return mp_is_str(o) && memchr(o->via.str.ptr, 0, o->via.str.size) == NULL;
}

/* keepOutputs: "all" or an array of at most CI_KEEP_OUTPUTS_MAX strings (mp_from_json's
 * strings end in a NUL). The supervisor checks the names themselves. */
static const char *read_keep(const msgpack_object *keep, RecordCall *call) {
        call->has_keep = true;
        call->keep.names = call->keep_names;
        if (mp_str_eq(keep, "all")) {
                call->keep.all = true;
                return NULL;
        }
        if (!is_array(keep))
                return "keepOutputs is neither \"all\" nor an array";
        if (keep->via.array.size > CI_KEEP_OUTPUTS_MAX)
                return "keepOutputs has more than 16 names";
        for (uint32_t i = 0; i < keep->via.array.size; i++) {
                if (!is_cstr(&keep->via.array.ptr[i]))
                        return "keepOutputs holds something that is not a name";
                call->keep_names[call->keep.n_names++] = keep->via.array.ptr[i].via.str.ptr;
        }
        return NULL;
}

/* One call of either version: its map (version 1: the record itself) checked. NULL or
 * what is wrong with it. */
static const char *read_call(const msgpack_object *o, unsigned version, RecordCall *call) {
        if (!is_map(o))
                return "it is not an object";
        call->summary = ci_get(o, "summary");
        call->code = ci_get(o, "code");
        call->code_sha256 = mp_is_str(ci_get(o, "codeSha256")) ? ci_get(o, "codeSha256") : NULL;
        call->message = ci_get(o, "message");
        if (!mp_is_str(call->summary))
                return "it has no summary";
        if (!mp_is_str(call->code))
                return "it has no code";
        if (!is_map(call->message))
                return "it has no message";
        if (version == 2 && ci_get(o, "keepOutputs"))
                return read_keep(ci_get(o, "keepOutputs"), call);
        return NULL;
}

/* Version 2's calls: an array of 1 to REPLAY_MAX_CALLS calls. NULL or what is wrong
 * (in buf). */
static const char *read_calls(const msgpack_object *calls, Record *ret, char *buf, size_t n) {
        const char *why;

        if (!is_array(calls))
                return "\"calls\" is not an array";
        if (calls->via.array.size == 0)
                return "\"calls\" is empty";
        if (calls->via.array.size > REPLAY_MAX_CALLS) {
                snprintf(buf, n, "\"calls\" has %" PRIu32 " calls, at most %d are replayed", calls->via.array.size,
                         REPLAY_MAX_CALLS);
                return buf;
        }
        for (uint32_t i = 0; i < calls->via.array.size; i++) {
                why = read_call(&calls->via.array.ptr[i], 2, &ret->calls[i]);
                if (why) {
                        snprintf(buf, n, "call %" PRIu32 " of the record: %s", i + 1, why);
                        return buf;
                }
        }
        ret->n_calls = calls->via.array.size;
        return NULL;
}

int replay_load_record(const char *path, msgpack_zone *zone, Record *ret) {
        msgpack_object rec;
        const char *why = NULL;
        char buf[128];
        int k = parse_record(path, zone, &rec);

        if (k < 0)
                return k;
        const msgpack_object *v = ci_get(&rec, "codeinterpReplay");
        if (!is_map(&rec) || !mp_is_uint(v) || (v->via.u64 != 1 && v->via.u64 != 2)) {
                fprintf(stderr, "codeinterp: replay: \"%s\" is not a codeinterp replay record (version 1 or 2)\n",
                        path);
                return -EBADMSG;
        }
        ret->version = (unsigned) v->via.u64;
        ret->sources = ci_get(&rec, "sources");
        if (!is_array(ret->sources))
                why = "\"sources\" is not an array";
        else if (ret->version == 1) {
                why = read_call(&rec, 1, &ret->calls[0]);
                ret->n_calls = 1;
        } else
                why = read_calls(ci_get(&rec, "calls"), ret, buf, sizeof buf);
        if (why) {
                fprintf(stderr, "codeinterp: replay: \"%s\" is not a codeinterp replay record (version %u): %s\n", path,
                        ret->version, why);
                return -EBADMSG;
        }
        return 0;
}
