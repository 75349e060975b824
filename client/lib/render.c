/* SPDX-License-Identifier: MIT */
/* The two renderings of a call: the text the model sees, and the user's progress card.
 * The format is documented, with examples, in docs/client.md#rendering. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/libcodeinterp.h"
#include "client/lib/outcome_names.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

static uint64_t uint_or0(const msgpack_object *o) {
        return mp_is_uint(o) ? o->via.u64 : 0;
}

static bool is_map(const msgpack_object *o) {
        return o && o->type == MSGPACK_OBJECT_MAP;
}

/* Names the runtime defines (a closed set): only these are ever copied into a rendering
 * as words. Anything else is shown as "?", so a forged or garbled message cannot smuggle
 * text through a field that should hold a name. */
static const char *const outcome_names[] = {
        "ok",
        "python_exception",
        "timeout",
        "cancelled",
        "invalid_input",
        "unavailable_source",
        "quota_exhausted",
        "resource_limit",
        "worker_error",
        "overloaded",
        "not_found",
        "permission_denied",
};
static const char *const known_phases[] = { "requested", "queued", "started", "running", "finished" };
static const char *const known_limits[] = { "memory", "cpu", "file_size", "processes" };
/* The media types the supervisor's sniffer gives (supervisor/artifacts.c). */
static const char *const known_media_types[] = {
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/svg+xml",
        "application/pdf",
        "application/xml",
        "application/json",
        "text/csv",
        "text/plain",
        "application/octet-stream",
};

/* Why a file was not kept (docs/protocol.md#kept-outputs). */
static const char *const known_keep_refusals[] = {
        "not_produced",         "invalid_name",      "max_source_bytes", "max_sources_per_invocation",
        "max_invocation_bytes", "invocation_closed", "out_of_memory",
};

static const char *known_name(const msgpack_object *o, const char *const *names, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (mp_str_eq(o, names[i]))
                        return names[i];
        return NULL;
}

const char *client_outcome_name(const msgpack_object *o) {
        return known_name(o, outcome_names, ELEMENTSOF(outcome_names));
}

static const char *outcome_of(const msgpack_object *o) {
        return client_outcome_name(o);
}

/* Bytes of text up to code point offset at (or all of it). */
static size_t byte_offset(const char *p, size_t n, uint64_t at) {
        uint64_t chars = 0;
        size_t i;

        for (i = 0; i < n; i++)
                if (((uint8_t) p[i] & 0xC0) != 0x80) {
                        if (chars == at)
                                return i;
                        chars++;
                }
        return n;
}

/* One fitted channel as a section: a header with its size, the kept text, and the cut
 * marked in place with the exact number of characters left out. */
static void render_channel(FILE *f, const char *label, const msgpack_object *ch) {
        const msgpack_object *text = mp_map_get(ch, "text");
        uint64_t total = uint_or0(mp_map_get(ch, "totalCharacters"));
        uint64_t omitted = uint_or0(mp_map_get(ch, "omittedCharacters"));
        uint64_t replaced = uint_or0(mp_map_get(ch, "replacedCharacters"));
        const char *p = "";
        size_t n = 0, split;

        if (mp_is_str(text)) {
                p = text->via.str.ptr;
                n = text->via.str.size;
        }
        fprintf(f, "--- %s (%" PRIu64 " characters", label, total);
        if (omitted > 0)
                fprintf(f, "; %" PRIu64 " omitted where marked, not shown", omitted);
        if (replaced > 0)
                fprintf(f, "; %" PRIu64 " invalid UTF-8 sequences shown as U+FFFD", replaced);
        fputs(") ---\n", f);
        split = omitted > 0 ? byte_offset(p, n, uint_or0(mp_map_get(ch, "omittedAt"))) : n;
        fwrite(p, 1, split, f);
        if (omitted > 0) {
                if (split > 0 && p[split - 1] != '\n')
                        fputc('\n', f);
                fprintf(f, "[... %" PRIu64 " characters omitted ...]\n", omitted);
        }
        fwrite(p + split, 1, n - split, f);
        /* End the section on a line boundary (the marker already ends one). */
        char last = n > split ? p[n - 1] : omitted > 0 ? '\n' : split > 0 ? p[split - 1] : '\n';
        if (last != '\n')
                fputc('\n', f);
}

/* A channel that exists and has something in it (or had, before fitting). */
static bool channel_nonempty(const msgpack_object *ch) {
        return is_map(ch) && uint_or0(mp_map_get(ch, "totalCharacters")) > 0;
}

/* At most max bytes of s, never half a code point: a cut inside a multi-byte sequence
 * backs up to its lead byte (the Python client's rendering does the same). */
static void write_utf8_prefix(FILE *f, const char *s, size_t len, size_t max) {
        size_t n = MIN(len, max);

        if (n < len)
                while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
                        n--;
        fwrite(s, 1, n, f);
}

static void render_str_field(FILE *f, const msgpack_object *o) {
        if (mp_is_str(o))
                write_utf8_prefix(f, o->via.str.ptr, o->via.str.size, 1024);
}

static void render_error(FILE *f, const msgpack_object *m) {
        const char *code = outcome_of(mp_map_get(m, "code"));
        static const struct {
                const char *code, *hint;
        } hints[] = {
                { "invalid_input", "Correct the arguments (see the tool's input schema) and call again." },
                { "unavailable_source", "Use only source ids this conversation offers." },
                { "quota_exhausted", "No more calls are allowed in this session; answer without the tool." },
                { "overloaded", "The service is busy; calling again later may work." },
                { "worker_error", "The sandbox failed, not the code; calling again may work." },
                { "cancelled", "The service is shutting down." },
                { "not_found", "The session's invocation is gone (closed or expired)." },
        };

        fprintf(f, "outcome: %s\n", code ?: "?");
        fputs("No code ran: the request was rejected before execution.\n", f);
        fputs("reason: ", f);
        render_str_field(f, mp_map_get(m, "message"));
        fputc('\n', f);
        for (size_t i = 0; code && i < ELEMENTSOF(hints); i++)
                if (!strcmp(code, hints[i].code))
                        fprintf(f, "%s\n", hints[i].hint);
}

/* The files the code left in /outputs: name, media type and size of each (never their
 * bytes), then the exact count of what was omitted. Nothing when the call had no
 * /outputs or left nothing there. */
static void render_artifacts(FILE *f, const msgpack_object *m) {
        const msgpack_object *arr = mp_map_get(m, "artifacts");
        uint64_t omitted = uint_or0(mp_map_get(m, "omittedArtifacts"));
        uint64_t omitted_bytes = uint_or0(mp_map_get(m, "omittedArtifactBytes"));
        uint64_t total = 0;
        uint32_t n;

        if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || (arr->via.array.size == 0 && omitted == 0))
                return;
        n = arr->via.array.size;
        for (uint32_t i = 0; i < n; i++)
                total += uint_or0(mp_map_get(&arr->via.array.ptr[i], "bytes"));
        fprintf(f, "--- files in /outputs (%" PRIu32 " returned, %" PRIu64 " bytes", n, total);
        if (omitted > 0)
                fprintf(f, "; %" PRIu64 " omitted, %" PRIu64 " bytes", omitted, omitted_bytes);
        fputs(") ---\n", f);
        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *a = &arr->via.array.ptr[i], *name = mp_map_get(a, "name");
                const char *mt =
                        known_name(mp_map_get(a, "mediaType"), known_media_types, ELEMENTSOF(known_media_types));
                if (mp_is_str(name) && ci_artifact_name_safe(name->via.str.ptr, name->via.str.size))
                        fwrite(name->via.str.ptr, 1, name->via.str.size, f);
                else
                        fputc('?', f);
                fprintf(f, ": %s, %" PRIu64 " bytes\n", mt ?: "?", uint_or0(mp_map_get(a, "bytes")));
        }
        if (omitted > 0)
                fprintf(f, "[... %" PRIu64 " more entries of /outputs (%" PRIu64 " bytes) omitted ...]\n", omitted,
                        omitted_bytes);
}

/* A source ID as the supervisor gives them: 1..64 of A-Z a-z 0-9 _ - ., not starting
 * with . or -. */
static bool source_id_safe(const msgpack_object *o) {
        if (!mp_is_str(o) || o->via.str.size == 0 || o->via.str.size > 64 || o->via.str.ptr[0] == '.' ||
            o->via.str.ptr[0] == '-')
                return false;
        for (size_t i = 0; i < o->via.str.size; i++) {
                char c = o->via.str.ptr[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.'))
                        return false;
        }
        return true;
}

static bool sha256_safe(const msgpack_object *o) {
        if (!mp_is_str(o) || o->via.str.size != 64)
                return false;
        for (size_t i = 0; i < 64; i++) {
                char c = o->via.str.ptr[i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                        return false;
        }
        return true;
}

static void render_safe(FILE *f, const msgpack_object *o, bool safe) {
        if (safe)
                fwrite(o->via.str.ptr, 1, o->via.str.size, f);
        else
                fputc('?', f);
}

/* An entry's refused, nil when absent or nil (kept). */
static const msgpack_object *kept_refused(const msgpack_object *k) {
        const msgpack_object *r = mp_map_get(k, "refused");
        return r && r->type != MSGPACK_OBJECT_NIL ? r : NULL;
}

/* The files kept as sources of the invocation (keptOutputs): per file asked for, its
 * source ID, size and digest, or why it was not kept. Nothing when the call asked for none. */
static void render_kept(FILE *f, const msgpack_object *m) {
        const msgpack_object *arr = mp_map_get(m, "keptOutputs");
        uint32_t n, kept = 0;

        if (!arr || arr->type != MSGPACK_OBJECT_ARRAY)
                return;
        n = arr->via.array.size;
        for (uint32_t i = 0; i < n; i++)
                kept += !kept_refused(&arr->via.array.ptr[i]);
        fprintf(f, "--- kept outputs (%" PRIu32 " kept, %" PRIu32 " refused) ---\n", kept, n - kept);
        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *k = &arr->via.array.ptr[i], *name = mp_map_get(k, "name");
                const msgpack_object *refused = kept_refused(k);

                render_safe(f, name, mp_is_str(name) && ci_artifact_name_safe(name->via.str.ptr, name->via.str.size));
                if (refused) {
                        const char *why = known_name(refused, known_keep_refusals, ELEMENTSOF(known_keep_refusals));
                        fprintf(f, ": not kept (%s)\n", why ?: "?");
                        continue;
                }
                fputs(": ", f);
                render_safe(f, mp_map_get(k, "sourceId"), source_id_safe(mp_map_get(k, "sourceId")));
                fprintf(f, ", %" PRIu64 " bytes, sha256 ", uint_or0(mp_map_get(k, "bytes")));
                render_safe(f, mp_map_get(k, "sha256"), sha256_safe(mp_map_get(k, "sha256")));
                fputc('\n', f);
        }
}

/* How a worker_error came about when the code itself ended its process: the supervisor's
 * detail (docs/operations.md, "Other worker_error details") together with the exit
 * status it describes, and no sandbox setup step reported. Anything else is left to
 * the sandbox (DEATH_NONE). */
typedef enum CodeDeath {
        DEATH_NONE,
        DEATH_EXIT,    /* exited without a result (os._exit()) */
        DEATH_SIGNAL,  /* a signal nobody outside sent: the code's own, or a crash in native code */
        DEATH_SECCOMP, /* a system call the filter kills for */
} CodeDeath;

static bool str_starts(const msgpack_object *o, const char *prefix) {
        size_t n = strlen(prefix);
        return mp_is_str(o) && o->via.str.size >= n && !memcmp(o->via.str.ptr, prefix, n);
}

static CodeDeath code_death(const msgpack_object *m, uint64_t *num) {
        const msgpack_object *es = mp_map_get(m, "exitStatus"), *detail = mp_map_get(m, "detail");
        const msgpack_object *we = mp_map_get(m, "workerError");

        if (!mp_str_eq(mp_map_get(m, "outcome"), "worker_error") || is_map(we) || !is_map(es))
                return DEATH_NONE;
        if (str_starts(detail, "killed by the seccomp filter"))
                return DEATH_SECCOMP;
        if (str_starts(detail, "the worker died from signal ") && mp_is_uint(mp_map_get(es, "signal"))) {
                *num = mp_map_get(es, "signal")->via.u64;
                return DEATH_SIGNAL;
        }
        if (str_starts(detail, "the worker exited with status ") && mp_is_uint(mp_map_get(es, "code"))) {
                *num = mp_map_get(es, "code")->via.u64;
                return DEATH_EXIT;
        }
        return DEATH_NONE;
}

/* What ended the call, in a sentence for the model (none for ok and python_exception).
 * True when the runtime, not the code, ended it. */
static bool render_explanation(FILE *f, const char *outcome, CodeDeath death, uint64_t num) {
        bool runtime = false;

        if (!outcome)
                fputs("The runtime sent an outcome this client does not know.\n", f);
        else if (!strcmp(outcome, "timeout")) {
                fputs("The runtime stopped the call because its deadline passed. This is not Python output.\n", f);
                runtime = true;
        } else if (!strcmp(outcome, "cancelled")) {
                fputs("The runtime cancelled the call before it finished. This is not Python output.\n", f);
                runtime = true;
        } else if (death == DEATH_EXIT)
                fprintf(f,
                        "The code ended its own process (exit status %" PRIu64 ", as os._exit() does) before a "
                        "result was sent. The sandbox did not fail: the same code will end the same way. This is not "
                        "Python output.\n",
                        num);
        else if (death == DEATH_SIGNAL)
                fprintf(f,
                        "The code's process was ended by signal %" PRIu64 ", which the code sent itself (os.kill(), "
                        "os.abort(), signal.raise_signal()) or caused by crashing in native code. The sandbox did not "
                        "fail: the same code will most likely end the same way. This is not Python output.\n",
                        num);
        else if (death == DEATH_SECCOMP)
                fputs("The sandbox's system-call filter ended the process: the code (or a library it used) made a "
                      "system call that is not allowed here. The sandbox did not fail: the same code will end the "
                      "same way. This is not Python output.\n",
                      f);
        else if (!strcmp(outcome, "worker_error")) {
                fputs("The sandbox failed, not the code; calling again may work. This is not Python output.\n", f);
                runtime = true;
        } else if (!strcmp(outcome, "resource_limit"))
                fputs("A sandbox limit ended the code.\n", f);
        return runtime;
}

/* The exception's type, the channels, the value, or a word that there were none. */
static void render_output(FILE *f, const msgpack_object *m, const char *outcome) {
        const msgpack_object *out = mp_map_get(m, "stdout"), *err = mp_map_get(m, "stderr");
        const msgpack_object *value = mp_map_get(m, "result"), *exc = mp_map_get(m, "exception");

        if (is_map(exc)) {
                const msgpack_object *type = mp_map_get(exc, "type");
                fputs("exception: ", f);
                if (mp_is_str(type))
                        write_utf8_prefix(f, type->via.str.ptr, type->via.str.size, 256);
                fputc('\n', f);
        }
        if (channel_nonempty(out))
                render_channel(f, "stdout", out);
        if (channel_nonempty(err))
                render_channel(f, "stderr", err);
        if (is_map(exc)) {
                if (is_map(mp_map_get(exc, "message")))
                        render_channel(f, "exception message", mp_map_get(exc, "message"));
                if (channel_nonempty(mp_map_get(exc, "traceback")))
                        render_channel(f, "traceback", mp_map_get(exc, "traceback"));
        }
        if (is_map(value))
                render_channel(f, "value", value);
        if (!channel_nonempty(out) && !channel_nonempty(err) && !is_map(value) && !is_map(exc))
                fputs(outcome && !strcmp(outcome, "ok") ? "(no output and no value: end the code with an expression "
                                                          "or print() to see a result)\n"
                                                        : "(no output)\n",
                      f);
}

static void render_result(FILE *f, const msgpack_object *m) {
        const char *outcome = outcome_of(mp_map_get(m, "outcome"));
        const char *limit = known_name(mp_map_get(m, "limit"), known_limits, ELEMENTSOF(known_limits));
        const msgpack_object *detail = mp_map_get(m, "detail"), *partial = mp_map_get(m, "partial");
        uint64_t num = 0;
        CodeDeath death = code_death(m, &num);

        fprintf(f, "outcome: %s", outcome ?: "?");
        if (limit)
                fprintf(f, " (%s)", limit);
        fputc('\n', f);
        fprintf(f, "elapsed: %" PRIu64 " ms\n", uint_or0(mp_map_get(m, "elapsedMs")));
        bool runtime = render_explanation(f, outcome, death, num);
        if (mp_is_str(detail)) {
                fputs("detail: ", f);
                render_str_field(f, detail);
                fputc('\n', f);
        }
        if (death != DEATH_NONE)
                fputs("Any output below is what the code wrote before its process ended.\n", f);
        else if (runtime || (partial && partial->type == MSGPACK_OBJECT_BOOLEAN && partial->via.boolean))
                fputs("Any output below is partial: what had arrived when the worker was stopped.\n", f);

        render_output(f, m, outcome);
        render_artifacts(f, m);
        render_kept(f, m);
}

static int finish(FILE *f, char **buf, char **ret) {
        int k = ferror(f) ? -ENOMEM : 0;

        if (fclose(f) != 0 && k == 0)
                k = -ENOMEM;
        if (k < 0) {
                free(*buf);
                return k;
        }
        *ret = *buf;
        return 0;
}

/* body's text about m into a new string: 0, -EINVAL (m is not a map) or -ENOMEM. */
static int render(const msgpack_object *m, void (*body)(FILE *f, const msgpack_object *m), char **ret) {
        char *buf = NULL;
        size_t len;
        FILE *f;

        if (!is_map(m))
                return -EINVAL;
        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        body(f, m);
        return finish(f, &buf, ret);
}

static void model_text(FILE *f, const msgpack_object *m) {
        if (mp_str_eq(mp_map_get(m, "type"), "error"))
                render_error(f, m);
        else
                render_result(f, m);
}

int ci_render_model_text(const msgpack_object *m, char **ret) {
        return render(m, model_text, ret);
}

static void card_sizes(FILE *f, const char *name, uint64_t chars, uint64_t omitted) {
        fprintf(f, " · %s %" PRIu64 " characters", name, chars);
        if (omitted > 0)
                fprintf(f, " (%" PRIu64 " omitted)", omitted);
}

static void card_files(FILE *f, uint64_t n, uint64_t bytes, uint64_t omitted) {
        fprintf(f, " · files %" PRIu64 " (%" PRIu64 " bytes)", n, bytes);
        if (omitted > 0)
                fprintf(f, " (%" PRIu64 " omitted)", omitted);
}

static void progress_card(FILE *f, const msgpack_object *m) {
        uint64_t ms = uint_or0(mp_map_get(m, "elapsedMs"));
        fputs("code_interpreter: ", f);
        if (mp_str_eq(mp_map_get(m, "type"), "result")) {
                const msgpack_object *out = mp_map_get(m, "stdout"), *err = mp_map_get(m, "stderr");
                fprintf(f, "finished: %s", outcome_of(mp_map_get(m, "outcome")) ?: "?");
                fprintf(f, " · %" PRIu64 ".%01" PRIu64 " s", ms / 1000, ms % 1000 / 100);
                card_sizes(f, "stdout", uint_or0(mp_map_get(out, "totalCharacters")),
                           uint_or0(mp_map_get(out, "omittedCharacters")));
                card_sizes(f, "stderr", uint_or0(mp_map_get(err, "totalCharacters")),
                           uint_or0(mp_map_get(err, "omittedCharacters")));
                const msgpack_object *arr = mp_map_get(m, "artifacts");
                uint64_t omitted = uint_or0(mp_map_get(m, "omittedArtifacts")), bytes = 0;
                uint32_t n = arr && arr->type == MSGPACK_OBJECT_ARRAY ? arr->via.array.size : 0;
                for (uint32_t i = 0; i < n; i++)
                        bytes += uint_or0(mp_map_get(&arr->via.array.ptr[i], "bytes"));
                if (n > 0 || omitted > 0)
                        card_files(f, n, bytes, omitted);
        } else {
                const char *phase = known_name(mp_map_get(m, "phase"), known_phases, ELEMENTSOF(known_phases));
                const char *outcome = outcome_of(mp_map_get(m, "outcome"));
                fputs(phase ?: "?", f);
                if (outcome)
                        fprintf(f, ": %s", outcome);
                fprintf(f, " · %" PRIu64 ".%01" PRIu64 " s", ms / 1000, ms % 1000 / 100);
                if (mp_is_uint(mp_map_get(m, "queuePosition")))
                        fprintf(f, " · queue position %" PRIu64, uint_or0(mp_map_get(m, "queuePosition")));
                card_sizes(f, "stdout", uint_or0(mp_map_get(m, "stdoutCharacters")),
                           uint_or0(mp_map_get(m, "stdoutOmittedCharacters")));
                card_sizes(f, "stderr", uint_or0(mp_map_get(m, "stderrCharacters")),
                           uint_or0(mp_map_get(m, "stderrOmittedCharacters")));
                if (uint_or0(mp_map_get(m, "artifacts")) > 0)
                        card_files(f, uint_or0(mp_map_get(m, "artifacts")), uint_or0(mp_map_get(m, "artifactBytes")),
                                   0);
        }
}

int ci_render_progress_card(const msgpack_object *m, char **ret) {
        return render(m, progress_card, ret);
}
