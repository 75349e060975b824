/* SPDX-License-Identifier: MIT */
/* The code_interpreter tool definition (the supervisor's describe reply) exported in each
 * agent runtime's format; `codeinterp tool` (docs/client.md#codeinterp-tool). */
#pragma once

#include <json-c/json.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum ToolFormat {
        TOOL_FORMAT_CODEINTERP,  /* the describe reply's tool map as it is */
        TOOL_FORMAT_OPENAI,      /* {"type": "function", "name", "description", "parameters", "strict"} */
        TOOL_FORMAT_OPENAI_CHAT, /* {"type": "function", "function": {"name", "description", "parameters", "strict"}} */
        TOOL_FORMAT_ANTHROPIC,   /* {"name", "description", "input_schema"} */
        TOOL_FORMAT_MCP,         /* {"name", "description", "inputSchema", "title", "annotations", "outputSchema"} */
        TOOL_FORMAT_JSON_SCHEMA, /* the bare input schema */
} ToolFormat;

/* The tool's title (MCP: the tool's title and its annotations' title). */
#define TOOL_TITLE "Python code interpreter"

/* Output flags for every JSON this command prints. */
#define TOOL_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

int tool_format_from_string(const char *s, ToolFormat *ret);

/* msgpack to json-c (strings must be valid UTF-8 for json-c to print them faithfully; nil
 * and bin become null). NULL on ENOMEM, and for nil. */
json_object *tool_json_from_msgpack(const msgpack_object *o);
/* obj[key] = v, taking v also on failure; -ENOMEM when v is NULL (json-c would store a
 * NULL value as JSON null) or the add fails. */
int tool_json_set(json_object *obj, const char *key, json_object *v);

/* tool_export() flags. STRICT: the openai formats in OpenAI's strict mode ("strict": true,
 * and the schema rewritten as strict mode requires). Ignored by the other formats. */
#define TOOL_EXPORT_STRICT 1u

/* Build the export of the describe reply's "tool" map. The description is the tool's
 * description, a blank line, its guidance, and, when extra is not NULL, a blank line and
 * extra (the list of the sources offered, tool_write_sources()). -EPROTO if tool lacks a
 * field. */
int tool_export(const msgpack_object *tool, ToolFormat fmt, unsigned flags, const char *extra, json_object **ret);

/* A source offered to the model: `--source ID=FILE` (text) or `--attach
 * ID=FILE[:MEDIA_TYPE]` (attachment), shared by `codeinterp tool` and `codeinterp mcp`. */
#define TOOL_MAX_SOURCES 16
typedef struct ToolSource {
        char *id;
        char *file;
        char *media_type; /* attachments; NULL: application/octet-stream */
        bool attachment;
        bool output; /* a file an earlier call of the session kept (mcp: kept outputs) */
        size_t bytes;
} ToolSource;

/* Split arg (modified) into s. -EINVAL when it has no ID or no FILE. */
int tool_parse_source(char *arg, bool attachment, ToolSource *s);
/* An id the supervisor accepts: ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$ (the schema's pattern). */
bool tool_source_id_valid(const char *id);
/* The list of the sources offered, as the description ends: "Sources offered in this
 * session (name them in sourceIds):" and a line per source with its kind, media type and
 * size, or the sentence saying there are none. */
void tool_write_sources(FILE *f, const ToolSource *sources, size_t n);

/* The MCP structuredContent of a call (the export's outputSchema, docs/client.md): for a
 * "result" message its outcome, limit, detail, partial, elapsedMs, the stdout, stderr and
 * value channels, the exception, the artifacts' names, media types, sizes and digests with
 * the omitted counts, and the evidence; for an "error" message (rejected) its code as the
 * outcome and its message as the reason. -EBADMSG for another message or an outcome the
 * schema does not know (then there is no structured result), -ENOMEM. */
int tool_structured_content(const msgpack_object *msg, json_object **ret);

/* `codeinterp [--socket P] tool [--format F]`: argv[0] is "tool". Returns the exit status. */
int tool_main(const char *socket, int argc, char **argv);
