/* SPDX-License-Identifier: MIT */
/* codeinterp replay FILE: registers the record's sources again in a fresh invocation,
 * runs the recorded call (or each call of a recorded chain, with its keepOutputs and the
 * sources the call before it kept) and says, call by call, whether the code, the inputs,
 * the outcome, every channel, the artifacts and the kept files are identical. The record
 * itself (its format, writing and reading it) is client/replay_record.c's. */
#include "client/replay.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/replay_internal.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/sha256.h"
#include "common/util.h"

#define MAX_FILE (256u << 20) /* as exec's */
#define MAX_SOURCES 8         /* registered sources a record may hold */
#define EXIT_IDENTICAL 0
#define EXIT_DIFFERENT 1
#define EXIT_ERROR 2

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

/* A source of the record: its entry read (the files are read by read_source()). */
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

/* The record's sources into sources (*n of them), each file read. 0, or -1 after saying why. */
static int load_sources(const msgpack_object *recs, Source *sources, size_t *n) {
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

int replay_chain_ids(const char *const *registered, size_t n, const msgpack_object *prev, ReplayChainIds *ret) {
        size_t n_kept = 0;

        *ret = (ReplayChainIds){};
        for (size_t i = 0; i < n; i++) {
                if (ret->n < REPLAY_MAX_SOURCE_IDS)
                        ret->ids[ret->n++] = registered[i];
                ret->wanted++;
        }
        for (size_t i = 0; prev && i < ci_kept_count(prev); i++) {
                CiKept kept;
                if (ci_kept_get(prev, i, &kept) < 0 || kept.refused)
                        continue;
                if (kept.source_id_len > REPLAY_SOURCE_ID_MAX || memchr(kept.source_id, 0, kept.source_id_len))
                        return -EBADMSG;
                if (ret->n < REPLAY_MAX_SOURCE_IDS) {
                        char *slot = ret->kept[n_kept++];
                        memcpy(slot, kept.source_id, kept.source_id_len);
                        slot[kept.source_id_len] = 0;
                        ret->ids[ret->n++] = slot;
                }
                ret->wanted++;
        }
        return ret->wanted > REPLAY_MAX_SOURCE_IDS ? -E2BIG : 0;
}

/* An invocation opened and the sources registered in it. 0, or EXIT_ERROR after saying why. */
static int register_sources(CiClient *c, char inv[static CI_INVOCATION_ID_MAX + 1], const Source *sources, size_t n) {
        char code_buf[32], msg[512];
        CiMessage err = {};
        int k = ci_invocation_open(c, inv, &err);

        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: invocation.open failed: %s\n",
                        err.buf ? str_or(ci_get(&err.unpacked.data, "code"), code_buf, sizeof code_buf, "?")
                                : strerror(-k));
                ci_message_done(&err);
                return EXIT_ERROR;
        }
        for (size_t i = 0; i < n; i++) {
                const Source *s = &sources[i];
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
        }
        return 0;
}

/* Each recorded call again, in order, into now[]: a version 1 record as exec ran it (an
 * invocation only with sources), a version 2 one in one invocation, each call with its
 * keepOutputs and naming the sources, then what the call before it kept. A call whose
 * outcome is not ok does not stop the others: they run and are compared. 0, or EXIT_ERROR
 * after saying why. */
static int run_calls(CiClient *c, const Record *rec, const Source *sources, size_t n, CiMessage *now) {
        char inv[CI_INVOCATION_ID_MAX + 1];
        const char *registered[MAX_SOURCES];
        int k;

        if ((n > 0 || rec->version == 2) && register_sources(c, inv, sources, n) != 0)
                return EXIT_ERROR;
        for (size_t i = 0; i < n; i++)
                registered[i] = sources[i].id;
        for (size_t i = 0; i < rec->n_calls; i++) {
                const RecordCall *call = &rec->calls[i];
                _cleanup_free_ char *summary = mp_strdup(call->summary);
                ReplayChainIds ids;

                if (!summary)
                        return EXIT_ERROR;
                k = replay_chain_ids(registered, n, i > 0 ? &now[i - 1].unpacked.data : NULL, &ids);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: replay: call %zu would name %zu sources, at most %d\n", i + 1,
                                ids.wanted, REPLAY_MAX_SOURCE_IDS);
                        return EXIT_ERROR;
                }
                CiExecute x = { .summary = summary,
                                .code = call->code->via.str.ptr,
                                .code_len = call->code->via.str.size,
                                .invocation = n > 0 || rec->version == 2 ? inv : NULL,
                                .source_ids = ids.ids,
                                .n_source_ids = ids.n };
                k = ci_execute_keep(c, &x, call->has_keep ? &call->keep : NULL, NULL, NULL, &now[i]);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: replay: lost the supervisor: %s\n", strerror(-k));
                        return EXIT_ERROR;
                }
        }
        return 0;
}

typedef struct Report {
        char differing[2048];
        bool different;
        char prefix[32]; /* "call 2 " in a chain's summary line, else "" */
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
                snprintf(r->differing + len, sizeof r->differing - len, "%s%s%s", r->different ? ", " : "", r->prefix,
                         name);
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

/* The code: what the record says was run, against what was run now. */
static void compare_code(const RecordCall *call, const msgpack_object *now, Report *r) {
        const msgpack_object *was = call->message;
        char rec_hex[65], now_hex[65], hex[65], a[128];

        sha256_hex(call->code->via.str.ptr, call->code->via.str.size, hex);
        digest_of(ci_get(was, "evidence"), "codeSha256", rec_hex, str_or(call->code_sha256, a, sizeof a, "(none)"));
        digest_of(ci_get(now, "evidence"), "codeSha256", now_hex, hex);
        if (strcmp(rec_hex, now_hex) == 0)
                verdict(r, "code", true, "sha256 %s", now_hex);
        else
                verdict(r, "code", false, "sha256 %s recorded, %s replayed (the record's code was changed?)", rec_hex,
                        now_hex);
}

/* Each registered source: what was mounted then against what was mounted now. */
static void compare_inputs(const msgpack_object *was, const Source *sources, size_t n, const msgpack_object *now,
                           Report *r) {
        char rec_hex[65], now_hex[65], a[128], b[128];

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
}

/* The outcome and each channel object whole. */
static void compare_channels(const msgpack_object *was, const msgpack_object *now, Report *r) {
        static const char *const channels[] = { "stdout", "stderr", "result", "exception" };
        char a[128], b[128];

        outcome_of(was, a, sizeof a);
        outcome_of(now, b, sizeof b);
        if (strcmp(a, b) == 0)
                verdict(r, "outcome", true, "%s", a);
        else
                verdict(r, "outcome", false, "%s recorded, %s replayed", a, b);

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
}

static uint32_t array_size(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size : 0;
}

/* The files left in /outputs; records made before artifacts existed have none: nothing
 * to judge. */
static void compare_artifacts(const msgpack_object *was, const msgpack_object *now, Report *r) {
        const msgpack_object *aw = ci_get(was, "artifacts"), *an = ci_get(now, "artifacts");
        uint32_t nw = array_size(aw), nn = array_size(an);

        if (!aw)
                return;
        if (same(aw, an) && same(ci_get(was, "omittedArtifacts"), ci_get(now, "omittedArtifacts")) &&
            same(ci_get(was, "omittedArtifactBytes"), ci_get(now, "omittedArtifactBytes")))
                verdict(r, "artifacts", true, NULL);
        else if (nw == nn)
                verdict(r, "artifacts", false, "%" PRIu32 " files each, not the same", nw);
        else
                verdict(r, "artifacts", false, "%" PRIu32 " files recorded, %" PRIu32 " replayed", nw, nn);
}

/* keptOutputs whole (names, source IDs, bytes, sha256, refusals), for a call that asked. */
static void compare_kept(const RecordCall *call, const msgpack_object *now, Report *r) {
        const msgpack_object *kw = ci_get(call->message, "keptOutputs"), *kn = ci_get(now, "keptOutputs");
        uint32_t nw = array_size(kw), nn = array_size(kn);

        if (!call->has_keep)
                return;
        if (same(kw, kn))
                verdict(r, "kept outputs", true, "%" PRIu32 " entries", nw);
        else if (nw == nn)
                verdict(r, "kept outputs", false, "%" PRIu32 " entries each, not the same", nw);
        else
                verdict(r, "kept outputs", false, "%" PRIu32 " entries recorded, %" PRIu32 " replayed", nw, nn);
}

static bool is_kept_input(const msgpack_object *entry) {
        const msgpack_object *id = ci_get(entry, "sourceId");
        return mp_is_str(id) && id->via.str.size > 4 && memcmp(id->via.str.ptr, "out-", 4) == 0;
}

/* One kept file a call mounted (sourceId out-...): its sha256 and producedBy. */
static void compare_kept_input(const msgpack_object *ew, const msgpack_object *en, const char *id, Report *r) {
        char name[96], rec_hex[65], now_hex[65];
        uint64_t rec_call = cli_uint_or0(ci_get(ci_get(ew, "producedBy"), "call"));
        uint64_t now_call = cli_uint_or0(ci_get(ci_get(en, "producedBy"), "call"));

        snprintf(name, sizeof name, "kept input %s", id);
        if (!ew || !en) {
                verdict(r, name, false, "%s", ew ? "not mounted in the replay" : "not mounted when recorded");
                return;
        }
        digest_of(ew, "sha256", rec_hex, "(none)");
        digest_of(en, "sha256", now_hex, "(none)");
        if (strcmp(rec_hex, now_hex) == 0 && same(ci_get(ew, "producedBy"), ci_get(en, "producedBy")))
                verdict(r, name, true, "sha256 %s, produced by call %" PRIu64, now_hex, now_call);
        else
                verdict(r, name, false,
                        "sha256 %s recorded, %s replayed; produced by call %" PRIu64 " recorded, %" PRIu64 " replayed",
                        rec_hex, now_hex, rec_call, now_call);
}

/* Every kept file mounted then or now. */
static void compare_kept_inputs(const msgpack_object *was, const msgpack_object *now, Report *r) {
        const msgpack_object *iw = ci_get(ci_get(was, "evidence"), "inputs");
        const msgpack_object *in = ci_get(ci_get(now, "evidence"), "inputs");
        char id[REPLAY_SOURCE_ID_MAX + 1];

        for (uint32_t i = 0; i < array_size(iw); i++)
                if (is_kept_input(&iw->via.array.ptr[i])) {
                        str_or(ci_get(&iw->via.array.ptr[i], "sourceId"), id, sizeof id, "?");
                        compare_kept_input(&iw->via.array.ptr[i], evidence_input(now, id), id, r);
                }
        for (uint32_t i = 0; i < array_size(in); i++)
                if (is_kept_input(&in->via.array.ptr[i])) {
                        str_or(ci_get(&in->via.array.ptr[i], "sourceId"), id, sizeof id, "?");
                        if (!evidence_input(was, id))
                                compare_kept_input(NULL, &in->via.array.ptr[i], id, r);
                }
}

/* One call: its verdicts, then runtime, policy and limits noted. */
static void compare_call(const RecordCall *call, const Source *sources, size_t n, const msgpack_object *now,
                         Report *r) {
        static const char *const notes[] = { "runtime", "policy", "limits" };
        const msgpack_object *was = call->message;

        compare_code(call, now, r);
        compare_inputs(was, sources, n, now, r);
        compare_kept_inputs(was, now, r);
        compare_channels(was, now, r);
        compare_artifacts(was, now, r);
        compare_kept(call, now, r);
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
               "A chain (exec with several steps, or --keep) is replayed call by call in one invocation, each\n"
               "with its keepOutputs and the files the call before it kept; each call is reported under\n"
               "\"== call K of N ==\", with its kept outputs and the kept inputs it mounted (sha256,\n"
               "producedBy). A call that is not ok does not stop the replay of the ones after it.\n"
               "Exit status: 0 identical, 1 not identical, 2 error.\n");
}

/* Every call compared, then the verdict line. The exit status. */
static int report_calls(const Record *rec, const Source *sources, size_t n, const CiMessage *now) {
        Report report = {};

        for (size_t i = 0; i < rec->n_calls; i++) {
                if (rec->version == 2) {
                        printf("== call %zu of %zu ==\n", i + 1, rec->n_calls);
                        snprintf(report.prefix, sizeof report.prefix, "call %zu ", i + 1);
                }
                compare_call(&rec->calls[i], sources, n, &now[i].unpacked.data, &report);
        }
        if (report.different)
                printf("replay: NOT identical: %s\n", report.differing);
        else
                printf("replay: identical\n");
        fflush(stdout);
        return report.different ? EXIT_DIFFERENT : EXIT_IDENTICAL;
}

int replay_main(const char *socket, int argc, char **argv) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                {},
        };
        msgpack_zone *zone = NULL;
        Record rec = {};
        Source sources[MAX_SOURCES] = {};
        size_t n = 0;
        CiClient *c = NULL;
        CiMessage now[REPLAY_MAX_CALLS] = {};
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
        if (replay_load_record(argv[optind], zone, &rec) < 0 || load_sources(rec.sources, sources, &n) < 0)
                goto finish;

        k = ci_connect(socket, &c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: replay: cannot connect to the supervisor at %s: %s\n",
                        ci_socket_path(socket), strerror(-k));
                goto finish;
        }
        if (run_calls(c, &rec, sources, n, now) == 0)
                status = report_calls(&rec, sources, n, now);

finish:
        for (size_t i = 0; i < ELEMENTSOF(now); i++)
                ci_message_done(&now[i]);
        ci_close(c);
        for (size_t i = 0; i < n; i++)
                source_done(&sources[i]);
        msgpack_zone_free(zone);
        return status;
}
