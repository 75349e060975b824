/* SPDX-License-Identifier: MIT */
/* codeinterp exec: reads the options, the code (one step, or a chain of them) and the
 * files to mount, makes the calls over libcodeinterp (opening an invocation and putting
 * the sources first when there are any, or when a chain or --keep needs one) and prints
 * each result: as text, --json, --model-text or --cards, with --save and
 * --save-artifacts. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/lib/json.h"
#include "client/lib/libcodeinterp.h"
#include "client/replay.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

#define MAX_INPUT_FILE (256u << 20)
#define MAX_SOURCES 4 /* what execute accepts */
#define MAX_TEXTS 8
#define EXEC_GO (-1) /* exec_parse_argv: the options are read, go on */

static int read_file(const char *path, char **ret, size_t *ret_len) {
        return read_file_all(path, MAX_INPUT_FILE, ret, ret_len);
}

/* Print a fitted channel, marking the cut where it was made. */
static void print_channel(FILE *f, const msgpack_object *ch, const char *name) {
        const msgpack_object *text = ci_get(ch, "text");
        uint64_t omitted = cli_uint_or0(ci_get(ch, "omittedCharacters"));
        uint64_t omitted_bytes = cli_uint_or0(ci_get(ch, "omittedBytes"));
        uint64_t at = cli_uint_or0(ci_get(ch, "omittedAt"));
        const char *p;
        size_t n, split;

        if (!mp_is_str(text))
                return;
        p = text->via.str.ptr;
        n = text->via.str.size;
        split = n;
        if (omitted > 0) {
                /* omittedAt counts characters: find the byte offset. */
                uint64_t chars = 0;
                for (split = 0; split < n && chars < at; split++)
                        if (((uint8_t) p[split] & 0xC0) != 0x80 && ++chars == at) {
                                split++;
                                while (split < n && ((uint8_t) p[split] & 0xC0) == 0x80)
                                        split++;
                                break;
                        }
        }
        fwrite(p, 1, split, f);
        if (omitted > 0) {
                if (split > 0 && p[split - 1] != '\n')
                        fputc('\n', f);
                fprintf(f, "[... %s: %" PRIu64 " characters (%" PRIu64 " bytes) omitted ...]\n", name, omitted,
                        omitted_bytes);
                fwrite(p + split, 1, n - split, f);
        }
        fflush(f);
}

typedef struct ProgressState {
        bool live;
        bool shown;
        bool cards; /* --cards: one card line per message on stderr */
} ProgressState;

/* --cards: the user's progress card (ci_render_progress_card), one line each. */
static void print_card(const msgpack_object *m) {
        _cleanup_free_ char *card = NULL;
        if (ci_render_progress_card(m, &card) >= 0)
                fprintf(stderr, "%s\n", card);
}

static void on_progress(const msgpack_object *m, void *userdata) {
        ProgressState *st = userdata;
        char phase[32];

        if (st->cards)
                print_card(m);
        if (!st->live)
                return;
        cli_str_or(ci_get(m, "phase"), phase, sizeof phase, "?");
        fprintf(stderr, "\r\033[K[codeinterp] %s  %" PRIu64 " ms  stdout %" PRIu64 " chars  stderr %" PRIu64 " chars",
                phase, cli_uint_or0(ci_get(m, "elapsedMs")), cli_uint_or0(ci_get(m, "stdoutCharacters")),
                cli_uint_or0(ci_get(m, "stderrCharacters")));
        if (mp_is_uint(ci_get(m, "queuePosition")))
                fprintf(stderr, "  queue #%" PRIu64, cli_uint_or0(ci_get(m, "queuePosition")));
        fflush(stderr);
        st->shown = true;
}

typedef struct Mount {
        char *id;
        char *file;
        char *media_type;
        char *text_file;
        bool attachment;
} Mount;

static int parse_mount(char *arg, bool attachment, Mount *m) {
        char *eq = strchr(arg, '=');
        if (!eq || eq == arg || !eq[1])
                return -EINVAL;
        *eq = 0;
        m->id = arg;
        m->file = eq + 1;
        m->attachment = attachment;
        if (attachment) {
                char *colon = strrchr(m->file, ':');
                if (colon && strchr(colon, '/')) /* media types have a slash */
                        *colon = 0, m->media_type = colon + 1;
        }
        return 0;
}

/* --save-artifacts: each artifact into dir, named on stderr with where it went; the
 * omitted ones counted. -EIO when any could not be saved (each says why). */
static int save_artifacts(const msgpack_object *m, int dir_fd, const char *dir) {
        size_t n = ci_artifact_count(m);
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                CiArtifact a;
                int k = ci_artifact_get(m, i, &a);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: artifact %zu is malformed (its size or sha256 does not match)\n",
                                i);
                        r = -EIO;
                        continue;
                }
                if (!ci_artifact_name_safe(a.name, a.name_len)) {
                        fprintf(stderr, "codeinterp: artifact %zu has a name that could leave \"%s\"; not saved\n", i,
                                dir);
                        r = -EIO;
                        continue;
                }
                k = ci_artifact_save(dir_fd, &a);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: cannot save artifact \"%.*s\" in \"%s\": %s\n", (int) a.name_len,
                                a.name, dir, strerror(-k));
                        r = -EIO;
                        continue;
                }
                fprintf(stderr, "codeinterp: saved %s/%.*s (%.*s, %zu bytes, sha256 %s)\n", dir, (int) a.name_len,
                        a.name, (int) a.media_type_len, a.media_type, a.len, a.sha256);
        }
        if (cli_uint_or0(ci_get(m, "omittedArtifacts")) > 0)
                fprintf(stderr, "codeinterp: %" PRIu64 " more entries of /outputs (%" PRIu64 " bytes) were omitted\n",
                        cli_uint_or0(ci_get(m, "omittedArtifacts")), cli_uint_or0(ci_get(m, "omittedArtifactBytes")));
        return r;
}

/* What the options asked for. */
typedef struct ExecArgs {
        const char *summary, *save_path, *artifacts_dir;
        const char *code_args[REPLAY_MAX_CALLS]; /* each -c */
        size_t n_code_args;
        bool json, model_text, cards;
        Mount mounts[MAX_SOURCES];
        size_t n_mounts;
        struct {
                char *id, *file;
        } texts[MAX_TEXTS];
        size_t n_texts;
        const char *keep[CI_KEEP_OUTPUTS_MAX]; /* --keep */
        size_t n_keep;
        bool keep_all; /* --keep-all */
} ExecArgs;

/* --source and --attach: one more mount, or EXIT_USAGE. */
static int exec_add_mount(ExecArgs *a, char *arg, bool attachment) {
        if (a->n_mounts == ELEMENTSOF(a->mounts)) {
                fprintf(stderr, "codeinterp: at most %d --source/--attach per call\n", MAX_SOURCES);
                return EXIT_USAGE;
        }
        if (parse_mount(arg, attachment, &a->mounts[a->n_mounts]) < 0) {
                fprintf(stderr, "codeinterp: bad --%s \"%s\" (want ID=FILE)\n", attachment ? "attach" : "source", arg);
                return EXIT_USAGE;
        }
        a->n_mounts++;
        return EXEC_GO;
}

/* --text ID=FILE: one more text, or EXIT_USAGE. */
static int exec_add_text(ExecArgs *a, char *arg) {
        char *eq = strchr(arg, '=');
        if (!eq || a->n_texts == ELEMENTSOF(a->texts)) {
                fprintf(stderr, "codeinterp: bad --text \"%s\" (want ID=FILE)\n", arg);
                return EXIT_USAGE;
        }
        *eq = 0;
        a->texts[a->n_texts].id = arg;
        a->texts[a->n_texts++].file = eq + 1;
        return EXEC_GO;
}

/* --keep NAME: one more name, or EXIT_USAGE. */
static int exec_add_keep(ExecArgs *a, const char *name) {
        if (a->n_keep == ELEMENTSOF(a->keep)) {
                fprintf(stderr, "codeinterp: at most %d --keep per call\n", CI_KEEP_OUTPUTS_MAX);
                return EXIT_USAGE;
        }
        a->keep[a->n_keep++] = name;
        return EXEC_GO;
}

/* -c CODE: one more step, or EXIT_USAGE. */
static int exec_add_code(ExecArgs *a, const char *code) {
        if (a->n_code_args == ELEMENTSOF(a->code_args)) {
                fprintf(stderr, "codeinterp: at most %d steps (-c or FILE) per exec\n", REPLAY_MAX_CALLS);
                return EXIT_USAGE;
        }
        a->code_args[a->n_code_args++] = code;
        return EXEC_GO;
}

/* The options into a: EXEC_GO, or the status to exit with (0 after --help). */
static int exec_parse_argv(int argc, char **argv, ExecArgs *a) {
        enum {
                ARG_SUMMARY = 0x100,
                ARG_JSON,
                ARG_SOURCE,
                ARG_ATTACH,
                ARG_TEXT,
                ARG_SAVE,
                ARG_MODEL_TEXT,
                ARG_CARDS,
                ARG_SAVE_ARTIFACTS,
                ARG_KEEP,
                ARG_KEEP_ALL
        };
        static const struct option options[] = {
                { "summary", required_argument, NULL, ARG_SUMMARY },
                { "json", no_argument, NULL, ARG_JSON },
                { "source", required_argument, NULL, ARG_SOURCE },
                { "attach", required_argument, NULL, ARG_ATTACH },
                { "text", required_argument, NULL, ARG_TEXT },
                { "save", required_argument, NULL, ARG_SAVE },
                { "model-text", no_argument, NULL, ARG_MODEL_TEXT },
                { "cards", no_argument, NULL, ARG_CARDS },
                { "save-artifacts", required_argument, NULL, ARG_SAVE_ARTIFACTS },
                { "keep", required_argument, NULL, ARG_KEEP },
                { "keep-all", no_argument, NULL, ARG_KEEP_ALL },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int opt, k = EXEC_GO;

        a->summary = "codeinterp exec";
        optind = 1;
        while (k == EXEC_GO && (opt = getopt_long(argc, argv, "+c:h", options, NULL)) >= 0)
                switch (opt) {
                case 'c':
                        k = exec_add_code(a, optarg);
                        break;
                case ARG_SUMMARY:
                        a->summary = optarg;
                        break;
                case ARG_JSON:
                        a->json = true;
                        break;
                case ARG_MODEL_TEXT:
                        a->model_text = true;
                        break;
                case ARG_CARDS:
                        a->cards = true;
                        break;
                case ARG_SOURCE:
                case ARG_ATTACH:
                        k = exec_add_mount(a, optarg, opt == ARG_ATTACH);
                        break;
                case ARG_TEXT:
                        k = exec_add_text(a, optarg);
                        break;
                case ARG_SAVE:
                        a->save_path = optarg;
                        break;
                case ARG_SAVE_ARTIFACTS:
                        a->artifacts_dir = optarg;
                        break;
                case ARG_KEEP:
                        k = exec_add_keep(a, optarg);
                        break;
                case ARG_KEEP_ALL:
                        a->keep_all = true;
                        break;
                case 'h':
                        cli_exec_help();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        return k;
}

/* The steps of the chain: each code to run, in order. */
typedef struct Steps {
        char *code[REPLAY_MAX_CALLS];
        size_t len[REPLAY_MAX_CALLS];
        size_t n;
} Steps;

static void steps_done(Steps *st) {
        for (size_t i = 0; i < st->n; i++)
                free(st->code[i]);
}

/* The FILEs (- for standard input, at most once) left after the options, one step each.
 * 0 or EXIT_USAGE. */
static int exec_read_files(int argc, char **argv, Steps *st) {
        bool stdin_read = false;

        if (argc - optind > REPLAY_MAX_CALLS) {
                fprintf(stderr, "codeinterp: at most %d steps (-c or FILE) per exec\n", REPLAY_MAX_CALLS);
                return EXIT_USAGE;
        }
        for (int i = optind; i < argc; i++) {
                if (!strcmp(argv[i], "-") && stdin_read) {
                        fprintf(stderr, "codeinterp: - (standard input) can be one step only\n");
                        return EXIT_USAGE;
                }
                stdin_read = stdin_read || !strcmp(argv[i], "-");
                int k = read_file(argv[i], &st->code[st->n], &st->len[st->n]);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: cannot read \"%s\": %s\n", argv[i], strerror(-k));
                        return EXIT_USAGE;
                }
                st->n++;
        }
        return 0;
}

/* The code of each step: every -c CODE, or every FILE left after the options. 0 or
 * EXIT_USAGE. */
static int exec_read_code(const ExecArgs *a, int argc, char **argv, Steps *st) {
        if (a->n_code_args > 0 && optind != argc) {
                fprintf(stderr, "codeinterp: give either -c CODE or a FILE, not both\n");
                return EXIT_USAGE;
        }
        if (a->n_code_args == 0 && optind == argc) {
                fprintf(stderr, "codeinterp: exec needs -c CODE, a FILE, or - for standard input\n");
                return EXIT_USAGE;
        }
        if (optind != argc)
                return exec_read_files(argc, argv, st);
        for (; st->n < a->n_code_args; st->n++) {
                st->code[st->n] = strdup(a->code_args[st->n]);
                if (!st->code[st->n]) {
                        fprintf(stderr, "codeinterp: %s\n", strerror(ENOMEM));
                        return EXIT_USAGE;
                }
                st->len[st->n] = strlen(a->code_args[st->n]);
        }
        return 0;
}

/* Each --text to the --attach of its ID. 0 or EXIT_USAGE. */
static int exec_match_texts(ExecArgs *a) {
        for (size_t i = 0; i < a->n_texts; i++) {
                bool found = false;
                for (size_t j = 0; j < a->n_mounts; j++)
                        if (a->mounts[j].attachment && !strcmp(a->mounts[j].id, a->texts[i].id)) {
                                a->mounts[j].text_file = a->texts[i].file;
                                found = true;
                        }
                if (!found) {
                        fprintf(stderr, "codeinterp: --text %s names no --attach\n", a->texts[i].id);
                        return EXIT_USAGE;
                }
        }
        return 0;
}

/* An error reply to a step before the call: named on stderr; its code decides the status. */
static int exec_refused(const CiMessage *rep, const char *what) {
        char code_buf[32], msg[512];
        cli_str_or(ci_get(&rep->unpacked.data, "code"), code_buf, sizeof code_buf, "?");
        fprintf(stderr, "codeinterp: %s (%s): %s\n", what, code_buf,
                cli_str_or(ci_get(&rep->unpacked.data, "message"), msg, sizeof msg, ""));
        return ci_outcome_exit_status(code_buf);
}

/* One mount's file (and its text) put as a source of the invocation. 0 or the status. */
static int exec_put_source(CiClient *c, const char *inv, const Mount *m) {
        _cleanup_free_ char *data = NULL, *text = NULL;
        size_t data_len, text_len = 0;
        CiMessage rep;
        int k, status = 0;

        k = read_file(m->file, &data, &data_len);
        if (k >= 0 && m->text_file)
                k = read_file(m->text_file, &text, &text_len);
        else if (k >= 0 && m->attachment)
                k = ci_attachment_text(m->id, data, data_len, m->media_type, &text, &text_len);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot read the file for %s: %s\n", m->id, strerror(-k));
                return EXIT_USAGE;
        }
        const char *base = strrchr(m->file, '/');
        CiSource s = {
                .id = m->id,
                .attachment = m->attachment,
                .text = m->text_file || text ? text : data,
                .text_len = m->text_file || text ? text_len : data_len,
                .original = data,
                .original_len = data_len,
                .media_type = m->media_type,
                .file_name = base ? base + 1 : m->file,
        };
        k = ci_source_put(c, inv, &s, &rep);
        if (k < 0) {
                fprintf(stderr, "codeinterp: source.put failed: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        if (strcmp(ci_message_type(&rep) ?: "", "reply") != 0) {
                char what[256];
                snprintf(what, sizeof what, "source %s rejected", m->id);
                status = exec_refused(&rep, what);
        }
        ci_message_done(&rep);
        return status;
}

/* With mounts, a chain or --keep: an invocation opened (*opened), each mount put as its
 * source, its ID in ids. 0 or the status to exit with. */
static int exec_open_sources(CiClient *c, const ExecArgs *a, size_t n_steps, char *inv, const char **ids,
                             bool *opened) {
        CiMessage err = {};
        int k, status;

        /* Kept outputs are an invocation's sources: --keep needs one too, and so do the
         * calls of a chain (they share it). */
        if (a->n_mounts == 0 && a->n_keep == 0 && !a->keep_all && n_steps == 1)
                return 0;
        k = ci_invocation_open(c, inv, &err);
        if (k < 0) {
                if (err.buf)
                        status = exec_refused(&err, "invocation.open failed");
                else {
                        fprintf(stderr, "codeinterp: invocation.open failed: %s\n", strerror(-k));
                        status = EXIT_CONNECT;
                }
                ci_message_done(&err);
                return status;
        }
        for (size_t i = 0; i < a->n_mounts; i++) {
                status = exec_put_source(c, inv, &a->mounts[i]);
                if (status != 0)
                        return status;
                ids[i] = a->mounts[i].id;
        }
        *opened = true;
        return 0;
}

/* --keep, --keep-all: what became of each file, on stderr. The IDs name the bytes the
 * call kept (their digests); the invocation ends with this command. */
static void exec_print_kept(const msgpack_object *m) {
        for (size_t i = 0; i < ci_kept_count(m); i++) {
                CiKept k;
                if (ci_kept_get(m, i, &k) < 0) {
                        fprintf(stderr, "codeinterp: keptOutputs[%zu] is malformed\n", i);
                        continue;
                }
                if (!ci_artifact_name_safe(k.name, k.name_len)) {
                        k.name = "?";
                        k.name_len = 1;
                }
                if (k.refused)
                        fprintf(stderr, "codeinterp: %.*s not kept: %.*s\n", (int) k.name_len, k.name,
                                (int) MIN(k.refused_len, 64u), k.refused);
                else
                        fprintf(stderr, "codeinterp: kept %.*s as %.*s (%" PRIu64 " bytes, sha256 %s)\n",
                                (int) k.name_len, k.name, (int) MIN(k.source_id_len, 64u), k.source_id, k.bytes,
                                k.sha256);
        }
}

/* --save: the record of the calls so far (res[0..n-1]), rewritten after each call. 0 or
 * EXIT_USAGE. */
static int exec_save_record(const ExecArgs *a, const Steps *st, const CiKeep *keep, const CiMessage *res, size_t n) {
        ReplaySource rs[MAX_SOURCES];
        ReplayCall calls[REPLAY_MAX_CALLS];

        for (size_t i = 0; i < a->n_mounts; i++)
                rs[i] = (ReplaySource){ a->mounts[i].id, a->mounts[i].attachment, a->mounts[i].file,
                                        a->mounts[i].text_file, a->mounts[i].media_type };
        for (size_t i = 0; i < n; i++)
                calls[i] = (ReplayCall){ a->summary, st->code[i], st->len[i], keep, &res[i].unpacked.data };
        int k = replay_save(a->save_path, rs, a->n_mounts, calls, n);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot save the record to \"%s\": %s\n", a->save_path, strerror(-k));
                return EXIT_USAGE;
        }
        return 0;
}

/* --model-text: the text the model sees. The status of the outcome (or the error's code). */
static int exec_print_model_text(const CiMessage *res) {
        _cleanup_free_ char *text = NULL;
        const msgpack_object *m = &res->unpacked.data;
        const char *type = ci_message_type(res) ?: "";
        char outcome[32];

        cli_str_or(ci_get(m, !strcmp(type, "error") ? "code" : "outcome"), outcome, sizeof outcome, "?");
        int status = ci_outcome_exit_status(outcome);
        if (ci_render_model_text(m, &text) < 0)
                return EXIT_CONNECT;
        fputs(text, stdout);
        return status;
}

/* An error message instead of a result: as JSON, or named on stderr. Its code's status. */
static int exec_print_error(const msgpack_object *m, bool json) {
        char outcome[32], buf[1024];
        cli_str_or(ci_get(m, "code"), outcome, sizeof outcome, "?");
        if (json) {
                ci_json_write(stdout, m);
                fputc('\n', stdout);
        } else
                fprintf(stderr, "codeinterp: %s: %s\n", outcome, cli_str_or(ci_get(m, "message"), buf, sizeof buf, ""));
        return ci_outcome_exit_status(outcome);
}

/* A result as text: the channels, the value, what /outputs held, and an outcome that is not
 * ok named on stderr. */
static void exec_print_result(const msgpack_object *m, const char *outcome, bool artifacts_saved) {
        char buf[1024];

        print_channel(stdout, ci_get(m, "stdout"), "stdout");
        print_channel(stderr, ci_get(m, "stderr"), "stderr");
        const msgpack_object *exc = ci_get(m, "exception");
        if (exc && exc->type == MSGPACK_OBJECT_MAP)
                print_channel(stderr, ci_get(exc, "traceback"), "traceback");
        const msgpack_object *r = ci_get(m, "result");
        if (r && r->type == MSGPACK_OBJECT_MAP) {
                print_channel(stdout, r, "result");
                fputc('\n', stdout);
        }
        if (!artifacts_saved && (ci_artifact_count(m) > 0 || cli_uint_or0(ci_get(m, "omittedArtifacts")) > 0))
                fprintf(stderr,
                        "codeinterp: the code left %zu files in /outputs (%" PRIu64 " more omitted); "
                        "--save-artifacts DIR writes them\n",
                        ci_artifact_count(m), cli_uint_or0(ci_get(m, "omittedArtifacts")));
        exec_print_kept(m);
        if (strcmp(outcome, "ok") != 0 && strcmp(outcome, "python_exception") != 0) {
                char limit[32];
                fprintf(stderr, "codeinterp: %s", outcome);
                if (mp_is_str(ci_get(m, "limit")))
                        fprintf(stderr, " (%s)", cli_str_or(ci_get(m, "limit"), limit, sizeof limit, ""));
                if (mp_is_str(ci_get(m, "detail")))
                        fprintf(stderr, ": %s", cli_str_or(ci_get(m, "detail"), buf, sizeof buf, ""));
                fputc('\n', stderr);
        }
        fflush(stdout);
}

/* The reply to the call, printed as the options ask. The status to exit with. */
static int exec_report(const ExecArgs *a, const CiMessage *res, int artifacts_fd) {
        const msgpack_object *m = &res->unpacked.data;
        char outcome[32];
        int status;

        if (a->cards && !strcmp(ci_message_type(res) ?: "", "result"))
                print_card(m);
        bool artifacts_failed = artifacts_fd >= 0 && save_artifacts(m, artifacts_fd, a->artifacts_dir) < 0;
        if (a->model_text)
                status = exec_print_model_text(res);
        else if (!strcmp(ci_message_type(res) ?: "", "error"))
                status = exec_print_error(m, a->json);
        else {
                cli_str_or(ci_get(m, "outcome"), outcome, sizeof outcome, "?");
                status = ci_outcome_exit_status(outcome);
                if (a->json) {
                        ci_json_write(stdout, m);
                        fputc('\n', stdout);
                } else
                        exec_print_result(m, outcome, artifacts_fd >= 0);
        }
        return artifacts_failed && status == 0 ? EXIT_ARTIFACTS : status;
}

/* What a chain's calls share: the connection, the invocation and each answer. */
typedef struct Chain {
        CiClient *c;
        const char *socket_path;
        const char *inv;               /* NULL: no invocation (one step without sources or --keep) */
        const char *const *registered; /* the --source/--attach IDs */
        const CiKeep *keep;            /* NULL: no --keep */
        int artifacts_fd;
        CiMessage res[REPLAY_MAX_CALLS];
        size_t n_done; /* how many of res[] hold an answer */
} Chain;

/* Whether the chain goes on after this answer: a result whose outcome is ok. */
static bool exec_answer_ok(const CiMessage *res, char *outcome, size_t n) {
        bool error = !strcmp(ci_message_type(res) ?: "", "error");
        cli_str_or(ci_get(&res->unpacked.data, error ? "code" : "outcome"), outcome, n, "?");
        return !error && !strcmp(outcome, "ok");
}

/* The sourceIds of call i: the sources, then what call i-1 kept. 0 or the status. */
static int exec_step_ids(const Chain *ch, const ExecArgs *a, size_t i, size_t n, ReplayChainIds *ids) {
        int k = replay_chain_ids(ch->registered, a->n_mounts, i > 0 ? &ch->res[i - 1].unpacked.data : NULL, ids);
        if (k == -E2BIG) {
                fprintf(stderr,
                        "codeinterp: call %zu of %zu would mount %zu sources (the sources and the files call %zu "
                        "kept), an execute names at most %d: keep fewer files (--keep NAME)\n",
                        i + 1, n, ids->wanted, i, REPLAY_MAX_SOURCE_IDS);
                return EXIT_USAGE;
        }
        if (k < 0) {
                fprintf(stderr, "codeinterp: the keptOutputs of call %zu are malformed\n", i);
                return EXIT_CONNECT;
        }
        return 0;
}

/* Call i of the chain's n: sent, answered, recorded (--save, the calls so far) and
 * printed. The status it gives; *stop when the chain ends here. */
static int exec_step(Chain *ch, const ExecArgs *a, const Steps *st, size_t i, bool *stop) {
        ProgressState ps = { .cards = a->cards,
                             .live = !a->json && !a->model_text && !a->cards && isatty(STDERR_FILENO) };
        ReplayChainIds ids;
        char outcome[32];
        int k, status;

        *stop = true;
        if (st->n > 1 && !a->json)
                fprintf(stderr, "codeinterp: call %zu of %zu\n", i + 1, st->n);
        status = exec_step_ids(ch, a, i, st->n, &ids);
        if (status != 0)
                return status;
        CiExecute x = { .summary = a->summary,
                        .code = st->code[i],
                        .code_len = st->len[i],
                        .invocation = ch->inv,
                        .source_ids = ids.ids,
                        .n_source_ids = ids.n };
        k = ci_execute_keep(ch->c, &x, ch->keep, on_progress, &ps, &ch->res[i]);
        if (ps.shown)
                fputs("\r\033[K", stderr);
        if (k < 0) {
                fprintf(stderr, "codeinterp: lost the supervisor at %s: %s\n", ci_socket_path(ch->socket_path),
                        strerror(-k));
                return EXIT_CONNECT;
        }
        ch->n_done = i + 1;
        status = a->save_path ? exec_save_record(a, st, ch->keep, ch->res, i + 1) : 0;
        if (status != 0)
                return status;
        status = exec_report(a, &ch->res[i], ch->artifacts_fd);
        *stop = !exec_answer_ok(&ch->res[i], outcome, sizeof outcome);
        if (*stop && i + 1 < st->n)
                fprintf(stderr, "codeinterp: the chain stopped at call %zu of %zu (%s); %zu call%s not run\n", i + 1,
                        st->n, outcome, st->n - i - 1, st->n - i - 1 == 1 ? "" : "s");
        return status;
}

/* The options, the code and the files read; the artifacts directory opened. 0, or the
 * status to exit with (0 after --help: *done). */
static int exec_prepare(int argc, char **argv, ExecArgs *a, Steps *st, int *artifacts_fd, bool *done) {
        int k = exec_parse_argv(argc, argv, a);

        *done = k != EXEC_GO;
        if (k != EXEC_GO)
                return k;
        k = exec_read_code(a, argc, argv, st);
        if (k == 0)
                k = exec_match_texts(a);
        if (k != 0)
                return k;
        /* The directory is opened before the call: a wrong one costs no call. */
        if (a->artifacts_dir) {
                *artifacts_fd = open(a->artifacts_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (*artifacts_fd < 0) {
                        fprintf(stderr, "codeinterp: cannot open the artifacts directory \"%s\": %s\n",
                                a->artifacts_dir, strerror(errno));
                        return EXIT_USAGE;
                }
        }
        return 0;
}

int exec_main(const char *socket_path, int argc, char **argv) {
        ExecArgs a = {};
        _cleanup_(steps_done) Steps st = {};
        _cleanup_close_ int artifacts_fd = -1;
        char inv[CI_INVOCATION_ID_MAX + 1];
        const char *ids[MAX_SOURCES];
        bool opened = false, done, stop = false;
        int k, status, artifacts_status = 0;

        status = exec_prepare(argc, argv, &a, &st, &artifacts_fd, &done);
        if (done || status != 0)
                return status;
        Chain ch = { .socket_path = socket_path, .registered = ids, .artifacts_fd = artifacts_fd };
        k = ci_connect(socket_path, &ch.c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor at %s: %s\n", ci_socket_path(socket_path),
                        strerror(-k));
                return EXIT_CONNECT;
        }
        status = exec_open_sources(ch.c, &a, st.n, inv, ids, &opened);
        ch.inv = opened ? inv : NULL;
        CiKeep keep = { .all = a.keep_all, .names = a.keep, .n_names = a.n_keep };
        ch.keep = a.keep_all || a.n_keep ? &keep : NULL;
        /* A call that ends ok but could not save its artifacts (13) does not stop the
         * chain; the status is then 13 unless a later call stops it with its own. */
        for (size_t i = 0; status == 0 && !stop && i < st.n; i++) {
                k = exec_step(&ch, &a, &st, i, &stop);
                if (stop)
                        status = k;
                else if (k != 0)
                        artifacts_status = k;
        }
        if (status == 0)
                status = artifacts_status;
        ci_close(ch.c);
        for (size_t i = 0; i < ch.n_done; i++)
                ci_message_done(&ch.res[i]);
        return status;
}
