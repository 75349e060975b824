/* SPDX-License-Identifier: MIT */
#include "client/tool.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/libcodeinterp.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

#define EXIT_USAGE 2
#define EXIT_CONNECT 12

static const struct {
        const char *name;
        ToolFormat format;
} formats[] = {
        { "codeinterp", TOOL_FORMAT_CODEINTERP },   { "openai", TOOL_FORMAT_OPENAI },
        { "anthropic", TOOL_FORMAT_ANTHROPIC },     { "mcp", TOOL_FORMAT_MCP },
        { "json-schema", TOOL_FORMAT_JSON_SCHEMA },
};

int tool_format_from_string(const char *s, ToolFormat *ret) {
        for (size_t i = 0; i < ELEMENTSOF(formats); i++)
                if (!strcmp(s, formats[i].name)) {
                        *ret = formats[i].format;
                        return 0;
                }
        return -EINVAL;
}

/* json-c represents null as a NULL pointer, hence the separate status. */
static int convert(const msgpack_object *o, json_object **ret) {
        json_object *j = NULL, *v;

        switch (o->type) {
        case MSGPACK_OBJECT_BOOLEAN:
                j = json_object_new_boolean(o->via.boolean);
                break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                j = json_object_new_uint64(o->via.u64);
                break;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                j = json_object_new_int64(o->via.i64);
                break;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                j = json_object_new_double(o->via.f64);
                break;
        case MSGPACK_OBJECT_STR:
                j = json_object_new_string_len(o->via.str.ptr, (int) o->via.str.size);
                break;
        case MSGPACK_OBJECT_ARRAY:
                j = json_object_new_array_ext((int) o->via.array.size);
                for (uint32_t i = 0; j && i < o->via.array.size; i++) {
                        v = NULL;
                        if (convert(&o->via.array.ptr[i], &v) < 0 || json_object_array_add(j, v) < 0) {
                                json_object_put(v);
                                json_object_put(j);
                                return -ENOMEM;
                        }
                }
                break;
        case MSGPACK_OBJECT_MAP:
                j = json_object_new_object();
                for (uint32_t i = 0; j && i < o->via.map.size; i++) {
                        const msgpack_object *key = &o->via.map.ptr[i].key;
                        _cleanup_free_ char *name =
                                mp_is_str(key) ? strndup(key->via.str.ptr, key->via.str.size) : strdup("?");
                        v = NULL;
                        if (!name || convert(&o->via.map.ptr[i].val, &v) < 0 ||
                            json_object_object_add(j, name, v) < 0) {
                                json_object_put(v);
                                json_object_put(j);
                                return -ENOMEM;
                        }
                }
                break;
        default: /* nil; bin (not in any tool definition) */
                *ret = NULL;
                return 0;
        }
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

json_object *tool_json_from_msgpack(const msgpack_object *o) {
        json_object *j;
        return convert(o, &j) < 0 ? NULL : j;
}

int tool_json_set(json_object *obj, const char *key, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(obj, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

/* ---- MCP: title, annotations, output schema and the structured result ---- */

/* A channel (docs/protocol.md "Channel objects"), or null when the call produced none. */
#define CHANNEL_SCHEMA(what)                                                                                           \
        "{\"type\": [\"object\", \"null\"], \"description\": \"" what                                                  \
        ": the kept text, and exact counts of what was produced and what was cut out of its middle at "                \
        "omittedAt (code points).\", \"properties\": {\"text\": {\"type\": \"string\"}, \"totalCharacters\": "         \
        "{\"type\": \"integer\", \"minimum\": 0}, \"omittedCharacters\": {\"type\": \"integer\", \"minimum\": 0}, "    \
        "\"omittedAt\": {\"type\": \"integer\", \"minimum\": 0}, \"replacedCharacters\": {\"type\": \"integer\", "     \
        "\"minimum\": 0}}, \"required\": [\"text\", \"totalCharacters\", \"omittedCharacters\", \"omittedAt\", "       \
        "\"replacedCharacters\"]}"

static const char *const outcomes[] = {
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

/* The structuredContent of every tools/call result (tool_structured_content()). */
/* clang-format off */
static const char output_schema[] =
        "{\"type\": \"object\", \"properties\": {"
        "\"outcome\": {\"type\": \"string\", \"enum\": [\"ok\", \"python_exception\", \"timeout\", \"cancelled\", "
        "\"invalid_input\", \"unavailable_source\", \"quota_exhausted\", \"resource_limit\", \"worker_error\", "
        "\"overloaded\", \"not_found\", \"permission_denied\"], \"description\": \"How the call ended (the first "
        "line of the text content).\"}, "
        "\"rejected\": {\"type\": \"boolean\", \"description\": \"true: the request was refused before any code "
        "ran (reason says why); the other fields are then absent.\"}, "
        "\"reason\": {\"type\": \"string\", \"description\": \"Why the request was refused (rejected only).\"}, "
        "\"limit\": {\"type\": [\"string\", \"null\"], \"description\": \"For resource_limit: memory, cpu, "
        "file_size or processes.\"}, "
        "\"detail\": {\"type\": [\"string\", \"null\"], \"description\": \"The runtime's explanation of a "
        "timeout, cancelled, worker_error or cpu limit (never program output).\"}, "
        "\"partial\": {\"type\": \"boolean\", \"description\": \"true: the process was stopped or died; the "
        "output is what had arrived by then.\"}, "
        "\"elapsedMs\": {\"type\": \"integer\", \"minimum\": 0}, "
        "\"stdout\": " CHANNEL_SCHEMA("What the code printed") ", "
        "\"stderr\": " CHANNEL_SCHEMA("What the code wrote to stderr") ", "
        "\"value\": " CHANNEL_SCHEMA("The repr() of the final expression's value (ok only)") ", "
        "\"exception\": {\"type\": [\"object\", \"null\"], \"description\": \"The uncaught exception.\", "
        "\"properties\": {\"type\": {\"type\": \"string\"}, "
        "\"message\": " CHANNEL_SCHEMA("str() of the exception") ", "
        "\"traceback\": " CHANNEL_SCHEMA("The traceback, user frames only") "}, "
        "\"required\": [\"type\", \"message\", \"traceback\"]}, "
        "\"artifacts\": {\"type\": [\"array\", \"null\"], \"description\": \"The files the code left in "
        "/outputs, in name order; their bytes are the image and resource content items (null: the call had no "
        "/outputs).\", \"items\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
        "\"mediaType\": {\"type\": \"string\"}, \"bytes\": {\"type\": \"integer\", \"minimum\": 0}, "
        "\"sha256\": {\"type\": \"string\", \"pattern\": \"^[0-9a-f]{64}$\"}}, "
        "\"required\": [\"name\", \"mediaType\", \"bytes\", \"sha256\"]}}, "
        "\"omittedArtifacts\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"Entries of "
        "/outputs not returned (never silent).\"}, "
        "\"omittedArtifactBytes\": {\"type\": \"integer\", \"minimum\": 0}, "
        "\"evidence\": {\"type\": [\"object\", \"null\"], \"description\": \"What identifies the call: the "
        "code's sha256 and length, the digests of the sources mounted, the runtime, the policy and the limits. It "
        "does not show that the inputs are true.\", \"properties\": {\"codeSha256\": {\"type\": \"string\"}, "
        "\"codeCharacters\": {\"type\": \"integer\"}, \"inputs\": {\"type\": \"array\"}, "
        "\"runtime\": {\"type\": \"object\"}, \"policy\": {\"type\": \"object\"}, "
        "\"limits\": {\"type\": \"object\"}}}"
        "}, \"required\": [\"outcome\", \"rejected\"]}";
/* clang-format on */

/* The code cannot change anything outside its fresh sandbox, which is thrown away:
 * read-only (so never destructive, and repeating a call changes nothing), and a closed
 * world (no network). */
static json_object *mcp_annotations(void) {
        json_object *a = json_object_new_object();

        if (!a || tool_json_set(a, "title", json_object_new_string(TOOL_TITLE)) < 0 ||
            tool_json_set(a, "readOnlyHint", json_object_new_boolean(true)) < 0 ||
            tool_json_set(a, "destructiveHint", json_object_new_boolean(false)) < 0 ||
            tool_json_set(a, "idempotentHint", json_object_new_boolean(true)) < 0 ||
            tool_json_set(a, "openWorldHint", json_object_new_boolean(false)) < 0) {
                json_object_put(a);
                return NULL;
        }
        return a;
}

static int set_null(json_object *o, const char *key) {
        return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
}

static int set_str_or_null(json_object *o, const char *key, const msgpack_object *v) {
        if (!mp_is_str(v))
                return set_null(o, key);
        return tool_json_set(o, key, json_object_new_string_len(v->via.str.ptr, (int) v->via.str.size));
}

static int set_uint(json_object *o, const char *key, const msgpack_object *v) {
        return tool_json_set(o, key, json_object_new_uint64(mp_is_uint(v) ? v->via.u64 : 0));
}

/* A channel map as the schema's channel: its text and counts; null when it is not one. */
static int set_channel(json_object *o, const char *key, const msgpack_object *ch) {
        static const char *const counts[] = { "totalCharacters", "omittedCharacters", "omittedAt",
                                              "replacedCharacters" };
        const msgpack_object *text = mp_map_get(ch, "text");
        json_object *c;

        if (!ch || ch->type != MSGPACK_OBJECT_MAP || !mp_is_str(text))
                return set_null(o, key);
        c = json_object_new_object();
        if (!c || tool_json_set(c, "text", json_object_new_string_len(text->via.str.ptr, (int) text->via.str.size)) < 0)
                goto oom;
        for (size_t i = 0; i < ELEMENTSOF(counts); i++)
                if (set_uint(c, counts[i], mp_map_get(ch, counts[i])) < 0)
                        goto oom;
        return tool_json_set(o, key, c);
oom:
        json_object_put(c);
        return -ENOMEM;
}

static int set_exception(json_object *o, const msgpack_object *exc) {
        const msgpack_object *type = mp_map_get(exc, "type");
        json_object *e;

        if (!exc || exc->type != MSGPACK_OBJECT_MAP || !mp_is_str(type))
                return set_null(o, "exception");
        e = json_object_new_object();
        if (!e || set_str_or_null(e, "type", type) < 0 || set_channel(e, "message", mp_map_get(exc, "message")) < 0 ||
            set_channel(e, "traceback", mp_map_get(exc, "traceback")) < 0) {
                json_object_put(e);
                return -ENOMEM;
        }
        return tool_json_set(o, "exception", e);
}

/* The artifacts that passed the checks the content items pass (ci_artifact_get(), a safe
 * name); any other entry is counted as omitted. */
static int set_artifacts(json_object *o, const msgpack_object *msg) {
        const msgpack_object *arr = mp_map_get(msg, "artifacts");
        uint64_t omitted =
                mp_is_uint(mp_map_get(msg, "omittedArtifacts")) ? mp_map_get(msg, "omittedArtifacts")->via.u64 : 0;
        uint64_t omitted_bytes = mp_is_uint(mp_map_get(msg, "omittedArtifactBytes"))
                                         ? mp_map_get(msg, "omittedArtifactBytes")->via.u64
                                         : 0;
        json_object *list = NULL;

        if (arr && arr->type == MSGPACK_OBJECT_ARRAY) {
                list = json_object_new_array();
                if (!list)
                        return -ENOMEM;
                for (uint32_t i = 0; i < arr->via.array.size; i++) {
                        CiArtifact a;
                        json_object *item;
                        if (ci_artifact_get(msg, i, &a) < 0 || !ci_artifact_name_safe(a.name, a.name_len)) {
                                const msgpack_object *b = mp_map_get(&arr->via.array.ptr[i], "bytes");
                                omitted++;
                                omitted_bytes += mp_is_uint(b) ? b->via.u64 : 0;
                                continue;
                        }
                        item = json_object_new_object();
                        if (!item ||
                            tool_json_set(item, "name", json_object_new_string_len(a.name, (int) a.name_len)) < 0 ||
                            tool_json_set(item, "mediaType",
                                          json_object_new_string_len(a.media_type, (int) a.media_type_len)) < 0 ||
                            tool_json_set(item, "bytes", json_object_new_uint64(a.len)) < 0 ||
                            tool_json_set(item, "sha256", json_object_new_string(a.sha256)) < 0 ||
                            json_object_array_add(list, item) < 0) {
                                json_object_put(item);
                                json_object_put(list);
                                return -ENOMEM;
                        }
                }
                if (tool_json_set(o, "artifacts", list) < 0)
                        return -ENOMEM;
        } else if (set_null(o, "artifacts") < 0)
                return -ENOMEM;
        if (tool_json_set(o, "omittedArtifacts", json_object_new_uint64(omitted)) < 0 ||
            tool_json_set(o, "omittedArtifactBytes", json_object_new_uint64(omitted_bytes)) < 0)
                return -ENOMEM;
        return 0;
}

int tool_structured_content(const msgpack_object *msg, json_object **ret) {
        const msgpack_object *outcome = mp_map_get(msg, "outcome"), *evidence = mp_map_get(msg, "evidence");
        bool rejected = mp_str_eq(mp_map_get(msg, "type"), "error");
        const char *name = NULL;
        json_object *o;
        int k;

        if (rejected)
                outcome = mp_map_get(msg, "code");
        else if (!mp_str_eq(mp_map_get(msg, "type"), "result"))
                return -EBADMSG;
        for (size_t i = 0; i < ELEMENTSOF(outcomes) && !name; i++)
                if (mp_str_eq(outcome, outcomes[i]))
                        name = outcomes[i];
        if (!name)
                return -EBADMSG; /* an outcome the schema does not know: no structured result */
        o = json_object_new_object();
        if (!o || tool_json_set(o, "outcome", json_object_new_string(name)) < 0 ||
            tool_json_set(o, "rejected", json_object_new_boolean(rejected)) < 0)
                goto oom;
        if (rejected) {
                const msgpack_object *m = mp_map_get(msg, "message");
                k = tool_json_set(o, "reason",
                                  mp_is_str(m) ? json_object_new_string_len(m->via.str.ptr, (int) m->via.str.size)
                                               : json_object_new_string(""));
        } else {
                const msgpack_object *partial = mp_map_get(msg, "partial");
                k = set_str_or_null(o, "limit", mp_map_get(msg, "limit"));
                if (k >= 0)
                        k = set_str_or_null(o, "detail", mp_map_get(msg, "detail"));
                if (k >= 0)
                        k = tool_json_set(o, "partial",
                                          json_object_new_boolean(partial && partial->type == MSGPACK_OBJECT_BOOLEAN &&
                                                                  partial->via.boolean));
                if (k >= 0)
                        k = set_uint(o, "elapsedMs", mp_map_get(msg, "elapsedMs"));
                if (k >= 0)
                        k = set_channel(o, "stdout", mp_map_get(msg, "stdout"));
                if (k >= 0)
                        k = set_channel(o, "stderr", mp_map_get(msg, "stderr"));
                if (k >= 0)
                        k = set_channel(o, "value", mp_map_get(msg, "result"));
                if (k >= 0)
                        k = set_exception(o, mp_map_get(msg, "exception"));
                if (k >= 0)
                        k = set_artifacts(o, msg);
                if (k >= 0)
                        k = evidence && evidence->type == MSGPACK_OBJECT_MAP
                                    ? tool_json_set(o, "evidence", tool_json_from_msgpack(evidence))
                                    : set_null(o, "evidence");
        }
        if (k < 0)
                goto oom;
        *ret = o;
        return 0;
oom:
        json_object_put(o);
        return -ENOMEM;
}

int tool_export(const msgpack_object *tool, ToolFormat fmt, const char *extra, json_object **ret) {
        const msgpack_object *name = mp_map_get(tool, "name"), *desc = mp_map_get(tool, "description"),
                             *guidance = mp_map_get(tool, "guidance"), *schema = mp_map_get(tool, "inputSchema");
        _cleanup_free_ char *full = NULL;
        json_object *obj;
        int k = 0;

        if (!mp_is_str(name) || !mp_is_str(desc) || !mp_is_str(guidance) || !schema ||
            schema->type != MSGPACK_OBJECT_MAP)
                return -EPROTO;
        if (fmt == TOOL_FORMAT_CODEINTERP || fmt == TOOL_FORMAT_JSON_SCHEMA) {
                obj = tool_json_from_msgpack(fmt == TOOL_FORMAT_CODEINTERP ? tool : schema);
                if (!obj)
                        return -ENOMEM;
                *ret = obj;
                return 0;
        }
        /* None of the three formats has a field for instructions to the model: the guidance
         * goes into the description, after a blank line. */
        if (asprintf(&full, "%.*s\n\n%.*s%s%s", (int) desc->via.str.size, desc->via.str.ptr,
                     (int) guidance->via.str.size, guidance->via.str.ptr, extra ? "\n\n" : "", extra ?: "") < 0) {
                full = NULL;
                return -ENOMEM;
        }
        obj = json_object_new_object();
        if (!obj)
                return -ENOMEM;
        if (fmt == TOOL_FORMAT_OPENAI)
                k = tool_json_set(obj, "type", json_object_new_string("function"));
        if (k >= 0)
                k = tool_json_set(obj, "name", json_object_new_string_len(name->via.str.ptr, (int) name->via.str.size));
        if (k >= 0)
                k = tool_json_set(obj, "description", json_object_new_string(full));
        if (k >= 0)
                k = tool_json_set(obj,
                                  fmt == TOOL_FORMAT_OPENAI      ? "parameters"
                                  : fmt == TOOL_FORMAT_ANTHROPIC ? "input_schema"
                                                                 : "inputSchema",
                                  tool_json_from_msgpack(schema));
        if (k >= 0 && fmt == TOOL_FORMAT_MCP) {
                json_object *schema_out = json_tokener_parse(output_schema);
                k = tool_json_set(obj, "title", json_object_new_string(TOOL_TITLE));
                if (k >= 0)
                        k = tool_json_set(obj, "annotations", mcp_annotations());
                if (k >= 0)
                        k = tool_json_set(obj, "outputSchema", schema_out);
                else
                        json_object_put(schema_out);
        }
        /* Strict mode would demand every property be required and no bounds OpenAI does not
         * support (maxLength, uniqueItems): the schema stays as it is, checked by codeinterpd. */
        if (k >= 0 && fmt == TOOL_FORMAT_OPENAI)
                k = tool_json_set(obj, "strict", json_object_new_boolean(false));
        if (k < 0) {
                json_object_put(obj);
                return k;
        }
        *ret = obj;
        return 0;
}

static void help(void) {
        printf("Usage: codeinterp [--socket PATH] tool [--format codeinterp|openai|anthropic|mcp|json-schema]\n"
               "\n"
               "Print the code_interpreter tool definition, with the supervisor's live bounds, in an\n"
               "agent runtime's format (default: codeinterp, the describe reply's own map).\n");
}

int tool_main(const char *socket, int argc, char **argv) {
        static const struct option options[] = {
                { "format", required_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        ToolFormat fmt = TOOL_FORMAT_CODEINTERP;
        CiClient *c;
        CiMessage m;
        json_object *out;
        int opt, k;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "+f:h", options, NULL)) >= 0)
                switch (opt) {
                case 'f':
                        if (tool_format_from_string(optarg, &fmt) < 0) {
                                fprintf(stderr,
                                        "codeinterp: unknown format \"%s\" (codeinterp, openai, "
                                        "anthropic, mcp, json-schema)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        if (optind != argc) {
                fprintf(stderr, "codeinterp: tool takes no arguments\n");
                return EXIT_USAGE;
        }
        k = ci_connect(socket, &c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        k = ci_describe(c, &m);
        ci_close(c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: describe failed: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        if (strcmp(ci_message_type(&m) ?: "", "reply") != 0) {
                const msgpack_object *code = ci_get(&m.unpacked.data, "code");
                char name[32] = "?";
                if (mp_is_str(code))
                        snprintf(name, sizeof name, "%.*s", (int) code->via.str.size, code->via.str.ptr);
                fprintf(stderr, "codeinterp: describe was refused: %s\n", name);
                ci_message_done(&m);
                return ci_outcome_exit_status(name);
        }
        k = tool_export(ci_get(&m.unpacked.data, "tool"), fmt, NULL, &out);
        ci_message_done(&m);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot export the tool: %s\n", strerror(-k));
                return EXIT_CONNECT;
        }
        const char *text = json_object_to_json_string_ext(out, TOOL_JSON_FLAGS);
        if (!text) {
                fprintf(stderr, "codeinterp: cannot export the tool: %s\n", strerror(ENOMEM));
                json_object_put(out);
                return EXIT_CONNECT;
        }
        printf("%s\n", text);
        json_object_put(out);
        return fflush(stdout) == 0 ? 0 : EXIT_CONNECT;
}
