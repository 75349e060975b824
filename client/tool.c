/* SPDX-License-Identifier: MIT */
/* `codeinterp tool`: the describe reply's tool exported in each agent runtime's format
 * (tool.h), with the sources offered in its description; mcp.c uses the same export. */
#include "client/tool.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/lib/libcodeinterp.h"
#include "client/lib/outcome_names.h"
#include "common/cleanup.h"
#include "common/mp.h"
#include "common/util.h"

#define EXIT_USAGE 2
#define EXIT_CONNECT 12

static const NameValue formats[] = {
        { "codeinterp", TOOL_FORMAT_CODEINTERP },
        { "openai", TOOL_FORMAT_OPENAI },
        { "openai-chat", TOOL_FORMAT_OPENAI_CHAT },
        { "anthropic", TOOL_FORMAT_ANTHROPIC },
        { "mcp", TOOL_FORMAT_MCP },
        { "json-schema", TOOL_FORMAT_JSON_SCHEMA },
};

int tool_format_from_string(const char *s, ToolFormat *ret) {
        int f = name_to_value(formats, ELEMENTSOF(formats), s);

        if (f < 0)
                return f;
        *ret = (ToolFormat) f;
        return 0;
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

/* a[] += v, taking v also on failure. */
static int arr_add(json_object *a, json_object *v) {
        if (!a || !v || json_object_array_add(a, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
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
        name = client_outcome_name(outcome);
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

/* json-c's object key lookup, NULL when obj is not an object or has no key. */
static json_object *get(json_object *obj, const char *key) {
        json_object *v = NULL;
        return obj && json_object_is_type(obj, json_type_object) && json_object_object_get_ex(obj, key, &v) ? v : NULL;
}

static bool array_has_string(json_object *a, const char *s) {
        for (size_t i = 0, n = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0; i < n;
             i++)
                if (!strcmp(json_object_get_string(json_object_array_get_idx(a, i)) ?: "", s))
                        return true;
        return false;
}

/* Schema s rewritten, in place, for OpenAI's strict mode (the rules the openai SDK's
 * toStrictJsonSchema() enforces, and the keywords Structured Outputs supports): every
 * object closed (additionalProperties false) with all its properties required, a
 * property that was optional made nullable (its type as an array with "null"), and
 * the keywords strict mode does not support (minLength, maxLength, uniqueItems,
 * default) left out. The supervisor checks the bounds either way. */
static int strict_schema(json_object *s) {
        static const char *const unsupported[] = { "minLength", "maxLength", "uniqueItems", "default" };
        json_object *props = get(s, "properties"), *required, *items = get(s, "items");
        int k;

        if (!s || !json_object_is_type(s, json_type_object))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
                json_object_object_del(s, unsupported[i]);
        if (props && json_object_is_type(props, json_type_object)) {
                json_object *old = get(s, "required");
                required = json_object_new_array();
                if (!required)
                        return -ENOMEM;
                json_object_object_foreach(props, key, val) {
                        json_object *type = get(val, "type");
                        if (!array_has_string(old, key) && type && json_object_is_type(type, json_type_string)) {
                                json_object *types = json_object_new_array();
                                if (arr_add(types, json_object_get(type)) < 0 ||
                                    arr_add(types, json_object_new_string("null")) < 0 ||
                                    tool_json_set(val, "type", types) < 0) {
                                        json_object_put(required);
                                        return -ENOMEM;
                                }
                        }
                        if ((k = strict_schema(val)) < 0 || (k = arr_add(required, json_object_new_string(key))) < 0) {
                                json_object_put(required);
                                return k;
                        }
                }
                if (tool_json_set(s, "required", required) < 0)
                        return -ENOMEM;
        }
        if (json_object_is_type(get(s, "type"), json_type_string) &&
            !strcmp(json_object_get_string(get(s, "type")), "object") &&
            tool_json_set(s, "additionalProperties", json_object_new_boolean(false)) < 0)
                return -ENOMEM;
        return strict_schema(items);
}

int tool_export(const msgpack_object *tool, ToolFormat fmt, unsigned flags, const char *extra, json_object **ret) {
        const msgpack_object *name = mp_map_get(tool, "name"), *desc = mp_map_get(tool, "description"),
                             *guidance = mp_map_get(tool, "guidance"), *schema = mp_map_get(tool, "inputSchema");
        bool openai = fmt == TOOL_FORMAT_OPENAI || fmt == TOOL_FORMAT_OPENAI_CHAT;
        bool strict = openai && (flags & TOOL_EXPORT_STRICT);
        _cleanup_free_ char *full = NULL;
        json_object *obj, *fn, *params = NULL;
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
        /* None of the tool formats has a field for instructions to the model: the guidance
         * goes into the description, after a blank line. */
        if (asprintf(&full, "%.*s\n\n%.*s%s%s", (int) desc->via.str.size, desc->via.str.ptr,
                     (int) guidance->via.str.size, guidance->via.str.ptr, extra ? "\n\n" : "", extra ?: "") < 0) {
                full = NULL;
                return -ENOMEM;
        }
        params = tool_json_from_msgpack(schema);
        if (!params)
                return -ENOMEM;
        if (strict && (k = strict_schema(params)) < 0) {
                json_object_put(params);
                return k;
        }
        obj = json_object_new_object();
        if (!obj) {
                json_object_put(params);
                return -ENOMEM;
        }
        fn = obj;
        if (openai)
                k = tool_json_set(obj, "type", json_object_new_string("function"));
        /* Chat Completions nests the function: {"type": "function", "function": {...}}. */
        if (k >= 0 && fmt == TOOL_FORMAT_OPENAI_CHAT) {
                fn = json_object_new_object();
                k = tool_json_set(obj, "function", fn);
        }
        if (k >= 0)
                k = tool_json_set(fn, "name", json_object_new_string_len(name->via.str.ptr, (int) name->via.str.size));
        if (k >= 0)
                k = tool_json_set(fn, "description", json_object_new_string(full));
        if (k >= 0)
                k = tool_json_set(fn,
                                  openai                         ? "parameters"
                                  : fmt == TOOL_FORMAT_ANTHROPIC ? "input_schema"
                                                                 : "inputSchema",
                                  params);
        else
                json_object_put(params);
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
        /* Without --strict the schema stays as the supervisor states it (optional
         * sourceIds, the string and array bounds), which strict mode would refuse. */
        if (k >= 0 && openai)
                k = tool_json_set(fn, "strict", json_object_new_boolean(strict));
        if (k < 0) {
                json_object_put(obj);
                return k;
        }
        *ret = obj;
        return 0;
}

/* ---- codeinterp tool ---- */

bool tool_source_id_valid(const char *id) {
        size_t n = strlen(id);

        if (n < 1 || n > 64 || !(isalnum((unsigned char) id[0]) || id[0] == '_'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || strchr("_.-", id[i])))
                        return false;
        return true;
}

void tool_write_sources(FILE *f, const ToolSource *sources, size_t n) {
        if (n == 0) {
                fputs("No sources are offered in this session: leave sourceIds empty.", f);
                return;
        }
        fputs("Sources offered in this session (name them in sourceIds):", f);
        for (size_t i = 0; i < n; i++)
                if (sources[i].output)
                        fprintf(f, "\n- %s: a file an earlier call kept, %zu bytes, mounted at /inputs/%s",
                                sources[i].id, sources[i].bytes, sources[i].id);
                else if (sources[i].attachment)
                        fprintf(f, "\n- %s: attachment, %s, %zu bytes", sources[i].id,
                                sources[i].media_type ?: "application/octet-stream", sources[i].bytes);
                else
                        fprintf(f, "\n- %s: text, %zu bytes", sources[i].id, sources[i].bytes);
}

int tool_parse_source(char *arg, bool attachment, ToolSource *s) {
        char *eq = strchr(arg, '=');

        if (!eq || eq == arg || !eq[1])
                return -EINVAL;
        *eq = 0;
        *s = (ToolSource){ .id = arg, .file = eq + 1, .attachment = attachment };
        if (attachment) {
                char *colon = strrchr(s->file, ':');
                if (colon && strchr(colon, '/'))
                        *colon = 0, s->media_type = colon + 1;
        }
        return 0;
}

static void help(void) {
        printf("Usage: codeinterp [--socket PATH] tool [--format FORMAT] [--strict]\n"
               "                  [--source ID=FILE ...] [--attach ID=FILE[:MEDIA_TYPE] ...]\n"
               "\n"
               "Print the code_interpreter tool definition, with the supervisor's live bounds, in an\n"
               "agent runtime's format. FORMAT: codeinterp (default: the describe reply's own map),\n"
               "openai (Responses API), openai-chat (Chat Completions), anthropic, mcp, json-schema.\n"
               "\n"
               "  --strict             openai and openai-chat: strict mode, with the schema OpenAI's\n"
               "                       strict mode accepts (every property required, sourceIds\n"
               "                       nullable, no length or uniqueness keywords)\n"
               "  --source ID=FILE     list FILE as a text source offered under ID in the description\n"
               "  --attach ID=FILE[:MEDIA_TYPE]\n"
               "                       the same for an attachment (as codeinterp mcp lists them); the\n"
               "                       files are read for their sizes only: register them with the\n"
               "                       calls that name them\n");
}

/* Each --source and --attach file's size, and the text they add to the description into
 * *extra. 0 or the status to exit with. */
static int tool_read_sources(ToolSource *sources, size_t n_sources, char **extra) {
        for (size_t i = 0; i < n_sources; i++) {
                struct stat st;
                _cleanup_close_ int fd = open(sources[i].file, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                        fprintf(stderr, "codeinterp: cannot read \"%s\": %s\n", sources[i].file,
                                fd < 0 || errno ? strerror(errno) : "not a regular file");
                        return EXIT_USAGE;
                }
                sources[i].bytes = (size_t) st.st_size;
        }
        if (n_sources > 0) {
                size_t len;
                FILE *f = open_memstream(extra, &len);
                if (!f) {
                        fprintf(stderr, "codeinterp: %s\n", strerror(ENOMEM));
                        return EXIT_CONNECT;
                }
                tool_write_sources(f, sources, n_sources);
                if (fclose(f) != 0) {
                        fprintf(stderr, "codeinterp: %s\n", strerror(ENOMEM));
                        return EXIT_CONNECT;
                }
        }
        return 0;
}

/* The describe reply's tool in fmt (with extra in its description), printed. The status to exit with. */
static int tool_fetch_and_print(const char *socket, ToolFormat fmt, unsigned flags, const char *extra) {
        CiClient *c;
        CiMessage m;
        json_object *out;
        int k;

        k = ci_connect(socket, &c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: cannot connect to the supervisor at %s: %s\n", ci_socket_path(socket),
                        strerror(-k));
                return EXIT_CONNECT;
        }
        k = ci_describe(c, &m);
        ci_close(c);
        if (k < 0) {
                fprintf(stderr, "codeinterp: describe failed (the supervisor at %s): %s\n", ci_socket_path(socket),
                        strerror(-k));
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
        k = tool_export(ci_get(&m.unpacked.data, "tool"), fmt, flags, extra, &out);
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

int tool_main(const char *socket, int argc, char **argv) {
        static const struct option options[] = {
                { "format", required_argument, NULL, 'f' }, { "strict", no_argument, NULL, 'S' },
                { "source", required_argument, NULL, 's' }, { "attach", required_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' },         {},
        };
        ToolFormat fmt = TOOL_FORMAT_CODEINTERP;
        ToolSource sources[TOOL_MAX_SOURCES];
        size_t n_sources = 0;
        unsigned flags = 0;
        _cleanup_free_ char *extra = NULL;
        int opt, k;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "+f:h", options, NULL)) >= 0)
                switch (opt) {
                case 'f':
                        if (tool_format_from_string(optarg, &fmt) < 0) {
                                fprintf(stderr,
                                        "codeinterp: unknown format \"%s\" (codeinterp, openai, openai-chat, "
                                        "anthropic, mcp, json-schema)\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'S':
                        flags |= TOOL_EXPORT_STRICT;
                        break;
                case 's':
                case 'a':
                        if (n_sources == TOOL_MAX_SOURCES ||
                            tool_parse_source(optarg, opt == 'a', &sources[n_sources]) < 0 ||
                            !tool_source_id_valid(sources[n_sources].id)) {
                                fprintf(stderr,
                                        "codeinterp: bad or too many --source/--attach \"%s\" (ID=FILE, at "
                                        "most %d; an ID is 1 to 64 of A-Z a-z 0-9 _ . -, not starting with . or -)\n",
                                        optarg, TOOL_MAX_SOURCES);
                                return EXIT_USAGE;
                        }
                        n_sources++;
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
        if ((flags & TOOL_EXPORT_STRICT) && fmt != TOOL_FORMAT_OPENAI && fmt != TOOL_FORMAT_OPENAI_CHAT) {
                fprintf(stderr, "codeinterp: --strict is for the openai and openai-chat formats\n");
                return EXIT_USAGE;
        }
        if (n_sources > 0 && (fmt == TOOL_FORMAT_CODEINTERP || fmt == TOOL_FORMAT_JSON_SCHEMA)) {
                fprintf(stderr, "codeinterp: --source and --attach need a format with a description (openai, "
                                "openai-chat, anthropic, mcp)\n");
                return EXIT_USAGE;
        }
        k = tool_read_sources(sources, n_sources, &extra);
        if (k != 0)
                return k;
        return tool_fetch_and_print(socket, fmt, flags, extra);
}
