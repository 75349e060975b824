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
