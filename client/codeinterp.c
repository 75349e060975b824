/* SPDX-License-Identifier: MIT */
/* codeinterp: the command-line client. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/json.h"
#include "client/libcodeinterp.h"
#include "client/mcp.h"
#include "client/replay.h"
#include "client/status.h"
#include "client/tool.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

#define EXIT_USAGE 2
#define EXIT_CONNECT 12
#define EXIT_ARTIFACTS 13 /* the call ended ok, but --save-artifacts could not save every file */
#define EXIT_NOT_READY 14 /* status --ready: the supervisor answered that it is not ready */
#define MAX_INPUT_FILE (256u << 20)
#define MAX_SOURCES 4 /* what execute accepts */

static const char *arg_socket = NULL;

static void help(void) {
        printf("Usage: codeinterp [--socket PATH] COMMAND [OPTIONS]\n"
               "\n"
               "Talk to codeinterpd, which runs Python calculations in fresh sandboxed workers.\n"
               "\n"
               "Commands:\n"
               "  exec [OPTIONS] (-c CODE | FILE | -)   run code and print what it printed and its value\n"
               "      --summary TEXT       the user-visible one-line summary (default \"codeinterp exec\")\n"
               "      --json               print the result message as one JSON object, no progress\n"
               "      --source ID=FILE     register FILE's text as read_source ID and mount it\n"
               "      --attach ID=FILE[:MEDIA_TYPE]\n"
               "                           register FILE as attachment ID (original bytes + text)\n"
               "      --text ID=FILE       the canonical text for attachment ID (default: the file itself)\n"
               "      --model-text         print what the model sees: outcome, output, omissions (text)\n"
               "      --cards              print the user's progress cards on stderr (metadata only)\n"
               "      --save FILE          also write a replay record of the call to FILE (JSON)\n"
               "      --save-artifacts DIR write the files the code left in /outputs into DIR (new files\n"
               "                           only, never over existing ones); each is named on stderr\n"
               "  tool [--format F]        print the code_interpreter tool definition; F: codeinterp\n"
               "                           (default), openai, openai-chat, anthropic, mcp, json-schema\n"
               "      --strict             openai, openai-chat: OpenAI's strict mode and its schema rules\n"
               "      --source ID=FILE     list read_source ID in the description (as mcp does)\n"
               "      --attach ID=FILE[:MEDIA_TYPE]\n"
               "                           list attachment ID in the description (as mcp does)\n"
               "  mcp [--source ID=FILE] [--attach ID=FILE[:MEDIA_TYPE]]\n"
               "                           serve the tool over the Model Context Protocol on stdio\n"
               "  replay FILE              run a call saved with exec --save again and report whether the\n"
               "                           code, inputs, outcome and channels are identical (exit 0 identical,\n"
               "                           1 not, 2 error)\n"
               "  hello                    print the supervisor's versions, policy and limits (JSON)\n"
               "  describe                 print the describe reply: the tool definition (JSON)\n"
               "  status                   print the supervisor's counters and readiness (JSON)\n"
               "      --ready              say whether it is ready: exit 0 ready, 14 not ready (the cause is\n"
               "                           printed: zygote_down, worker_start_failures, shutting_down), 12 no\n"
               "                           answer, 11 permission_denied\n"
               "      --prometheus         the metrics in Prometheus' text format 0.0.4 (node_exporter's\n"
               "                           textfile collector, promtool check metrics)\n"
               "      --openmetrics        the metrics in the OpenMetrics 1.0.0 text format (ends with # EOF)\n"
               "\n"
               "  --socket PATH            the supervisor's socket (default $CODEINTERP_SOCKET, else\n"
               "                           " CI_DEFAULT_SOCKET ")\n"
               "  -h, --help               show this help\n"
               "\n"
               "Exit status: 0 ok, 1 python_exception, 2 usage error, 3 timeout, 4 cancelled,\n"
               "5 resource_limit, 6 invalid_input, 7 unavailable_source, 8 quota_exhausted,\n"
               "9 worker_error, 10 overloaded, 11 not_found or permission_denied, 12 no connection\n"
               "or a protocol failure, 13 ok but an artifact could not be saved (--save-artifacts),\n"
               "14 not ready (status --ready).\n");
}

static int read_file(const char *path, char **ret, size_t *ret_len) {
        return read_file_all(path, MAX_INPUT_FILE, ret, ret_len);
}

static const char *str_or(const msgpack_object *o, char *buf, size_t n, const char *dflt) {
        if (!mp_is_str(o))
                return dflt;
        snprintf(buf, n, "%.*s", (int) o->via.str.size, o->via.str.ptr);
        return buf;
}

static uint64_t uint_or0(const msgpack_object *o) {
        return mp_is_uint(o) ? o->via.u64 : 0;
}

/* Print a fitted channel, marking the cut where it was made. */
static void print_channel(FILE *f, const msgpack_object *ch, const char *name) {
        const msgpack_object *text = ci_get(ch, "text");
        uint64_t omitted = uint_or0(ci_get(ch, "omittedCharacters"));
        uint64_t omitted_bytes = uint_or0(ci_get(ch, "omittedBytes"));
        uint64_t at = uint_or0(ci_get(ch, "omittedAt"));
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
        str_or(ci_get(m, "phase"), phase, sizeof phase, "?");
        fprintf(stderr, "\r\033[K[codeinterp] %s  %" PRIu64 " ms  stdout %" PRIu64 " chars  stderr %" PRIu64 " chars",
                phase, uint_or0(ci_get(m, "elapsedMs")), uint_or0(ci_get(m, "stdoutCharacters")),
                uint_or0(ci_get(m, "stderrCharacters")));
        if (mp_is_uint(ci_get(m, "queuePosition")))
                fprintf(stderr, "  queue #%" PRIu64, uint_or0(ci_get(m, "queuePosition")));
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
        if (uint_or0(ci_get(m, "omittedArtifacts")) > 0)
                fprintf(stderr, "codeinterp: %" PRIu64 " more entries of /outputs (%" PRIu64 " bytes) were omitted\n",
                        uint_or0(ci_get(m, "omittedArtifacts")), uint_or0(ci_get(m, "omittedArtifactBytes")));
        return r;
}

static int cmd_exec(int argc, char **argv) {
        enum {
                ARG_SUMMARY = 0x100,
                ARG_JSON,
                ARG_SOURCE,
                ARG_ATTACH,
                ARG_TEXT,
                ARG_SAVE,
                ARG_MODEL_TEXT,
                ARG_CARDS,
                ARG_SAVE_ARTIFACTS
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
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *summary = "codeinterp exec", *code_arg = NULL, *save_path = NULL, *artifacts_dir = NULL;
        _cleanup_close_ int artifacts_fd = -1;
        bool json = false, model_text = false;
        Mount mounts[MAX_SOURCES] = {};
        size_t n_mounts = 0;
        struct {
                char *id, *file;
        } texts[8] = {};
        size_t n_texts = 0;
        _cleanup_free_ char *code = NULL;
        size_t code_len;
        CiClient *c = NULL;
        CiMessage res = {};
        char inv[CI_INVOCATION_ID_MAX + 1];
        ProgressState ps = {};
        int opt, k, status;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "+c:h", options, NULL)) >= 0)
                switch (opt) {
                case 'c':
                        code_arg = optarg;
                        break;
                case ARG_SUMMARY:
                        summary = optarg;
                        break;
                case ARG_JSON:
                        json = true;
                        break;
                case ARG_MODEL_TEXT:
                        model_text = true;
                        break;
                case ARG_CARDS:
                        ps.cards = true;
                        break;
                case ARG_SOURCE:
                case ARG_ATTACH:
                        if (n_mounts == ELEMENTSOF(mounts)) {
                                fprintf(stderr, "codeinterp: at most %d --source/--attach per call\n", MAX_SOURCES);
                                return EXIT_USAGE;
                        }
                        if (parse_mount(optarg, opt == ARG_ATTACH, &mounts[n_mounts]) < 0) {
                                fprintf(stderr, "codeinterp: bad --%s \"%s\" (want ID=FILE)\n",
                                        opt == ARG_ATTACH ? "attach" : "source", optarg);
                                return EXIT_USAGE;
                        }
                        n_mounts++;
                        break;
                case ARG_TEXT: {
                        char *eq = strchr(optarg, '=');
                        if (!eq || n_texts == ELEMENTSOF(texts)) {
                                fprintf(stderr, "codeinterp: bad --text \"%s\" (want ID=FILE)\n", optarg);
                                return EXIT_USAGE;
                        }
                        *eq = 0;
                        texts[n_texts].id = optarg;
                        texts[n_texts++].file = eq + 1;
                        break;
                }
                case ARG_SAVE:
                        save_path = optarg;
                        break;
                case ARG_SAVE_ARTIFACTS:
                        artifacts_dir = optarg;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        if (code_arg) {
                if (optind != argc) {
                        fprintf(stderr, "codeinterp: give either -c CODE or a FILE, not both\n");
                        return EXIT_USAGE;
                }
                code = strdup(code_arg);
                code_len = strlen(code_arg);
        } else if (optind + 1 == argc) {
                k = read_file(argv[optind], &code, &code_len);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: cannot read \"%s\": %s\n", argv[optind], strerror(-k));
                        return EXIT_USAGE;
                }
        } else {
                fprintf(stderr, "codeinterp: exec needs -c CODE, a FILE, or - for standard input\n");
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < n_texts; i++) {
                bool found = false;
                for (size_t j = 0; j < n_mounts; j++)
                        if (mounts[j].attachment && !strcmp(mounts[j].id, texts[i].id)) {
                                mounts[j].text_file = texts[i].file;
                                found = true;
                        }
                if (!found) {
                        fprintf(stderr, "codeinterp: --text %s names no --attach\n", texts[i].id);
                        return EXIT_USAGE;
                }
        }

        /* The directory is opened before the call: a wrong one costs no call. */
        if (artifacts_dir) {
                artifacts_fd = open(artifacts_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (artifacts_fd < 0) {
                        fprintf(stderr, "codeinterp: cannot open the artifacts directory \"%s\": %s\n", artifacts_dir,
                                strerror(errno));
                        return EXIT_USAGE;
                }
        }

        k = ci_connect(arg_socket, &c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }

        const char *ids[MAX_SOURCES];
        CiExecute x = { .summary = summary, .code = code, .code_len = code_len };
        if (n_mounts > 0) {
                CiMessage err = {};
                k = ci_invocation_open(c, inv, &err);
                if (k < 0) {
                        char code_buf[32], msg[512];
                        status = EXIT_CONNECT;
                        if (err.buf) {
                                str_or(ci_get(&err.unpacked.data, "code"), code_buf, sizeof code_buf, "?");
                                fprintf(stderr, "codeinterp: invocation.open failed (%s): %s\n", code_buf,
                                        str_or(ci_get(&err.unpacked.data, "message"), msg, sizeof msg, ""));
                                status = ci_outcome_exit_status(code_buf);
                        } else
                                fprintf(stderr, "codeinterp: invocation.open failed: %s\n", strerror(-k));
                        ci_message_done(&err);
                        ci_close(c);
                        return status;
                }
                for (size_t i = 0; i < n_mounts; i++) {
                        _cleanup_free_ char *data = NULL, *text = NULL;
                        size_t data_len, text_len = 0;
                        CiMessage rep;
                        Mount *m = &mounts[i];

                        k = read_file(m->file, &data, &data_len);
                        if (k >= 0 && m->text_file)
                                k = read_file(m->text_file, &text, &text_len);
                        else if (k >= 0 && m->attachment)
                                k = ci_attachment_text(m->id, data, data_len, m->media_type, &text, &text_len);
                        if (k < 0) {
                                fprintf(stderr, "codeinterp: cannot read the file for %s: %s\n", m->id, strerror(-k));
                                ci_close(c);
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
                                ci_close(c);
                                return EXIT_CONNECT;
                        }
                        if (strcmp(ci_message_type(&rep) ?: "", "reply") != 0) {
                                char code_buf[32], msg[512];
                                str_or(ci_get(&rep.unpacked.data, "code"), code_buf, sizeof code_buf, "?");
                                fprintf(stderr, "codeinterp: source %s rejected (%s): %s\n", m->id, code_buf,
                                        str_or(ci_get(&rep.unpacked.data, "message"), msg, sizeof msg, ""));
                                status = ci_outcome_exit_status(code_buf);
                                ci_message_done(&rep);
                                ci_close(c);
                                return status;
                        }
                        ci_message_done(&rep);
                        ids[i] = m->id;
                }
                x.invocation = inv;
                x.source_ids = ids;
                x.n_source_ids = n_mounts;
        }

        ps.live = !json && !model_text && !ps.cards && isatty(STDERR_FILENO);
        k = ci_execute(c, &x, on_progress, &ps, &res);
        if (ps.shown)
                fputs("\r\033[K", stderr);
        ci_close(c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: lost the supervisor: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }

        const msgpack_object *m = &res.unpacked.data;
        char outcome[32], buf[1024];
        if (save_path) {
                ReplaySource rs[MAX_SOURCES];
                for (size_t i = 0; i < n_mounts; i++)
                        rs[i] = (ReplaySource){ mounts[i].id, mounts[i].attachment, mounts[i].file, mounts[i].text_file,
                                                mounts[i].media_type };
                k = replay_save(save_path, summary, code, code_len, rs, n_mounts, m);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: cannot save the record to \"%s\": %s\n", save_path, strerror(-k));
                        ci_message_done(&res);
                        return EXIT_USAGE;
                }
        }
        if (ps.cards && !strcmp(ci_message_type(&res) ?: "", "result"))
                print_card(m);
        bool artifacts_failed = artifacts_fd >= 0 && save_artifacts(m, artifacts_fd, artifacts_dir) < 0;
        if (model_text) {
                _cleanup_free_ char *text = NULL;
                const char *type = ci_message_type(&res) ?: "";
                str_or(ci_get(m, !strcmp(type, "error") ? "code" : "outcome"), outcome, sizeof outcome, "?");
                status = ci_outcome_exit_status(outcome);
                if (ci_render_model_text(m, &text) < 0)
                        status = EXIT_CONNECT;
                else
                        fputs(text, stdout);
                ci_message_done(&res);
                return artifacts_failed && status == 0 ? EXIT_ARTIFACTS : status;
        }
        if (!strcmp(ci_message_type(&res) ?: "", "error")) {
                str_or(ci_get(m, "code"), outcome, sizeof outcome, "?");
                if (json) {
                        ci_json_write(stdout, m);
                        fputc('\n', stdout);
                } else
                        fprintf(stderr, "codeinterp: %s: %s\n", outcome,
                                str_or(ci_get(m, "message"), buf, sizeof buf, ""));
                status = ci_outcome_exit_status(outcome);
                ci_message_done(&res);
                return artifacts_failed && status == 0 ? EXIT_ARTIFACTS : status;
        }
        str_or(ci_get(m, "outcome"), outcome, sizeof outcome, "?");
        status = ci_outcome_exit_status(outcome);
        if (json) {
                ci_json_write(stdout, m);
                fputc('\n', stdout);
                ci_message_done(&res);
                return artifacts_failed && status == 0 ? EXIT_ARTIFACTS : status;
        }

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
        if (artifacts_fd < 0 && (ci_artifact_count(m) > 0 || uint_or0(ci_get(m, "omittedArtifacts")) > 0))
                fprintf(stderr,
                        "codeinterp: the code left %zu files in /outputs (%" PRIu64 " more omitted); "
                        "--save-artifacts DIR writes them\n",
                        ci_artifact_count(m), uint_or0(ci_get(m, "omittedArtifacts")));
        if (strcmp(outcome, "ok") != 0 && strcmp(outcome, "python_exception") != 0) {
                char limit[32];
                fprintf(stderr, "codeinterp: %s", outcome);
                if (mp_is_str(ci_get(m, "limit")))
                        fprintf(stderr, " (%s)", str_or(ci_get(m, "limit"), limit, sizeof limit, ""));
                if (mp_is_str(ci_get(m, "detail")))
                        fprintf(stderr, ": %s", str_or(ci_get(m, "detail"), buf, sizeof buf, ""));
                fputc('\n', stderr);
        }
        fflush(stdout);
        ci_message_done(&res);
        return artifacts_failed && status == 0 ? EXIT_ARTIFACTS : status;
}

/* hello, describe, status: the reply as JSON (status: or what `how` asks for). */
typedef enum StatusHow {
        STATUS_JSON,
        STATUS_READY,
        STATUS_PROMETHEUS,
        STATUS_OPENMETRICS,
} StatusHow;

static int print_status(const CiMessage *m, StatusHow how) {
        char cause[STATUS_CAUSE_MAX], detail[STATUS_DETAIL_MAX];
        bool ready;
        int k;

        if (how == STATUS_READY) {
                k = status_readiness(&m->unpacked.data, &ready, cause, detail);
                if (k < 0) {
                        fprintf(stderr, "codeinterp: the status reply says nothing of readiness (an older "
                                        "supervisor?)\n");
                        return EXIT_CONNECT;
                }
                if (ready)
                        puts("ready");
                else
                        printf("not ready (%s): %s\n", cause, detail);
                return fflush(stdout) == 0 ? (ready ? 0 : EXIT_NOT_READY) : EXIT_CONNECT;
        }
        k = status_metrics_write(stdout, &m->unpacked.data,
                                 how == STATUS_PROMETHEUS ? STATUS_FORMAT_PROMETHEUS : STATUS_FORMAT_OPENMETRICS);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot write the metrics: %s\n",
                        k == -EBADMSG ? "the status reply lacks a field they need (an older supervisor?)"
                                      : strerror(-k));
                return EXIT_CONNECT;
        }
        return 0;
}

static int cmd_simple(const char *what, StatusHow how) {
        CiClient *c;
        CiMessage m;
        int k = ci_connect(arg_socket, &c);

        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        k = !strcmp(what, "hello")      ? ci_hello(c, &m)
            : !strcmp(what, "describe") ? ci_describe(c, &m)
                                        : ci_status(c, &m);
        ci_close(c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: %s failed: %s\n", what, strerror(-k));
                return EXIT_CONNECT;
        }
        if (how != STATUS_JSON && strcmp(ci_message_type(&m) ?: "", "reply") == 0) {
                k = print_status(&m, how);
                ci_message_done(&m);
                return k;
        }
        ci_json_write(stdout, &m.unpacked.data);
        fputc('\n', stdout);
        /* An error reply is printed like a reply, named on stderr, and its code decides the
         * status (a refused peer: permission_denied, 11). */
        if (!strcmp(ci_message_type(&m) ?: "", "error")) {
                char code_buf[32], msg[512];
                str_or(ci_get(&m.unpacked.data, "code"), code_buf, sizeof code_buf, "?");
                fprintf(stderr, "codeinterp: %s was refused (%s): %s\n", what, code_buf,
                        str_or(ci_get(&m.unpacked.data, "message"), msg, sizeof msg, ""));
                k = ci_outcome_exit_status(code_buf);
        } else
                k = 0;
        ci_message_done(&m);
        return k;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int opt;

        while ((opt = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (opt) {
                case 's':
                        arg_socket = optarg;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        if (optind >= argc) {
                help();
                return EXIT_USAGE;
        }
        const char *cmd = argv[optind];
        if (!strcmp(cmd, "exec"))
                return cmd_exec(argc - optind, argv + optind);
        if (!strcmp(cmd, "status") && argc - optind == 2) {
                static const struct {
                        const char *flag;
                        StatusHow how;
                } hows[] = {
                        { "--ready", STATUS_READY },
                        { "--prometheus", STATUS_PROMETHEUS },
                        { "--openmetrics", STATUS_OPENMETRICS },
                };
                for (size_t i = 0; i < ELEMENTSOF(hows); i++)
                        if (!strcmp(argv[optind + 1], hows[i].flag))
                                return cmd_simple(cmd, hows[i].how);
        }
        if (argc - optind > 1 && (!strcmp(cmd, "hello") || !strcmp(cmd, "describe") || !strcmp(cmd, "status"))) {
                fprintf(stderr, "codeinterp: unexpected argument \"%s\" after %s; see --help\n", argv[optind + 1], cmd);
                return EXIT_USAGE;
        }
        if (!strcmp(cmd, "hello") || !strcmp(cmd, "describe") || !strcmp(cmd, "status"))
                return cmd_simple(cmd, STATUS_JSON);
        if (!strcmp(cmd, "tool"))
                return tool_main(arg_socket, argc - optind, argv + optind);
        if (!strcmp(cmd, "mcp"))
                return mcp_main(arg_socket, argc - optind, argv + optind);
        if (!strcmp(cmd, "replay"))
                return replay_main(arg_socket, argc - optind, argv + optind);
        fprintf(stderr, "codeinterp: unknown command \"%s\"; see --help\n", cmd);
        return EXIT_USAGE;
}
