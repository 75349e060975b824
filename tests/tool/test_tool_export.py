"""The one tool definition: the describe op, `codeinterp tool --format ...` compared with
the goldens in tests/golden/ (CODEINTERP_UPDATE_GOLDEN=1 rewrites them), and each export
type-checked against its vendor's SDK types (tests/sdk-types)."""
import json
import os
import re
import subprocess

import pytest

from toolharness import GOLDEN_DIR, SDK_DIR, UPDATE_GOLDEN, require_node



@pytest.fixture
def msup(shared_supervisor):
    return shared_supervisor()

FORMATS = ("codeinterp", "openai", "openai-chat", "anthropic", "mcp", "json-schema")
STRICT = ("openai", "openai-chat")
# Golden name: the arguments of `codeinterp tool`.
GOLDENS = dict([(f, ("--format", f)) for f in FORMATS] + [(f + "-strict", ("--format", f, "--strict")) for f in STRICT])


def tool(sup, fmt, *args):
    out = sup.cli("tool", "--format", fmt, *args)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode()


def function_of(export):
    """The function definition: Chat Completions nests it under "function"."""
    return export["function"] if "function" in export else export


@pytest.mark.parametrize("golden", sorted(GOLDENS))
def test_tool_matches_golden(msup, golden):
    out = msup.cli("tool", *GOLDENS[golden])
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    path = os.path.join(GOLDEN_DIR, "tool-%s.json" % golden)
    if UPDATE_GOLDEN:
        with open(path, "w") as f:
            f.write(text)
    with open(path) as f:
        assert text == f.read(), "regenerate with CODEINTERP_UPDATE_GOLDEN=1 make tool-test if intended"


def test_describe_op_carries_live_policy_bounds(make_supervisor):
    sup = make_supervisor("maxCodeCharacters: 1234\nmaxOutputCharacters: 800\nmaxCalls: 3\n")
    d = json.loads(sup.cli("describe").stdout)
    assert d["type"] == "reply" and d["op"] == "describe"
    t = d["tool"]
    assert t["name"] == "code_interpreter"
    schema = t["inputSchema"]
    assert schema["properties"]["code"]["maxLength"] == 1234
    assert schema["properties"]["sourceIds"]["maxItems"] == 4
    assert schema["required"] == ["summary", "code"]
    assert schema["additionalProperties"] is False
    assert "at most 800 characters: the first 600 and the last 200" in t["guidance"]
    assert "at most 3 calls per invocation" in t["guidance"]
    assert "code at most 1234 characters" in t["guidance"]
    # hello is still hello.
    h = json.loads(sup.cli("hello").stdout)
    assert h["op"] == "hello" and "tool" not in h


def test_source_id_pattern_matches_decoder(msup):
    """The schema's pattern accepts exactly what the supervisor's decoder accepts."""
    schema = json.loads(tool(msup, "json-schema"))
    pattern = re.compile(schema["properties"]["sourceIds"]["items"]["pattern"])
    conn = msup.connect()
    inv = conn.call("invocation.open")["invocation"]
    for sid, ok in [("runtimes", True), ("wb.xlsx", True), ("_a-1", True), ("a" * 64, True),
                    (".hidden", False), ("-x", False), ("a/b", False), ("a b", False), ("a" * 65, False),
                    ("é", False)]:
        assert bool(pattern.match(sid)) == ok, sid
        r = conn.call("source.put", invocation=inv, sourceId=sid, kind="read_source", text="x")
        assert (r["type"] == "reply") == ok, (sid, r)


def test_guidance_in_every_format(msup):
    guidance = json.loads(tool(msup, "codeinterp"))["guidance"]
    for fmt, key in (("openai", "parameters"), ("openai-chat", "parameters"), ("anthropic", "input_schema"),
                     ("mcp", "inputSchema")):
        t = function_of(json.loads(tool(msup, fmt)))
        assert t["name"] == "code_interpreter"
        assert t["description"].endswith("\n\n" + guidance)
        assert t["description"].count("Every call starts fresh") == 1
        assert t[key] == json.loads(tool(msup, "json-schema"))
    for words in ("never simulate", "starts fresh", "sourceIds", "input_files", "input_assets", "Not available: network access",
                  "package installation", "characters omitted", "codeinterp_numeric", "to_number(x)",
                  "MissingValueError", "NumericError", 'missing="omit"', "Aggregate(value, n, missing)"):
        assert words.lower() in guidance.lower(), words


def test_unknown_format_is_a_usage_error(msup):
    out = msup.cli("tool", "--format", "gemini")
    assert out.returncode == 2 and b"unknown format" in out.stderr


def test_chat_completions_format(msup):
    chat = json.loads(tool(msup, "openai-chat"))
    responses = json.loads(tool(msup, "openai"))
    assert list(chat) == ["type", "function"] and chat["type"] == "function"
    assert chat["function"] == {k: v for k, v in responses.items() if k != "type"}


def test_strict_schema(msup):
    """--strict: every object closed with all its properties required, sourceIds nullable
    instead of optional, no keyword strict mode leaves unsupported; the rest as it was."""
    plain = json.loads(tool(msup, "json-schema"))
    for fmt in STRICT:
        f = function_of(json.loads(tool(msup, fmt, "--strict")))
        assert f["strict"] is True and f["description"] == function_of(json.loads(tool(msup, fmt)))["description"]
        p = f["parameters"]
        assert p["required"] == ["summary", "code", "sourceIds"] and p["additionalProperties"] is False
        assert p["properties"]["sourceIds"]["type"] == ["array", "null"]
        assert p["properties"]["sourceIds"]["maxItems"] == plain["properties"]["sourceIds"]["maxItems"]
        assert p["properties"]["sourceIds"]["items"]["pattern"] == plain["properties"]["sourceIds"]["items"]["pattern"]
        for word in ("minLength", "maxLength", "uniqueItems", "default"):
            assert word not in json.dumps(p), word
    for args in (("codeinterp", "--strict"), ("anthropic", "--strict"), ("mcp", "--strict")):
        out = msup.cli("tool", "--format", *args)
        assert out.returncode == 2 and b"--strict is for the openai" in out.stderr


SOURCES_TEXT = ("\n\nSources offered in this session (name them in sourceIds):\n- runtimes: text, 8 bytes\n"
                "- plot: attachment, image/png, 9 bytes\n- blob: attachment, application/octet-stream, 0 bytes")


def test_sources_listed_in_the_description(msup, tmp_path):
    """--source/--attach list the sources offered after the guidance, as codeinterp mcp
    does; the files are only read for their sizes."""
    (tmp_path / "runtimes.csv").write_text("9.0,7.5\n")
    (tmp_path / "p.png").write_bytes(b"\x89PNG....\n")
    (tmp_path / "b").write_bytes(b"")
    args = ("--source", "runtimes=%s" % (tmp_path / "runtimes.csv"), "--attach", "plot=%s:image/png" % (tmp_path / "p.png"),
            "--attach", "blob=%s" % (tmp_path / "b"))
    for fmt in ("openai", "openai-chat", "anthropic", "mcp"):
        plain = function_of(json.loads(tool(msup, fmt)))
        with_sources = function_of(json.loads(tool(msup, fmt, *args)))
        assert with_sources["description"] == plain["description"] + SOURCES_TEXT
    for bad in (("--format", "codeinterp", "--source", "a=%s" % (tmp_path / "b")),
                ("--format", "json-schema", "--source", "a=%s" % (tmp_path / "b")),
                ("--format", "mcp", "--source", ".hidden=%s" % (tmp_path / "b")),
                ("--format", "mcp", "--source", "nofile"),
                ("--format", "mcp", "--source", "a=%s" % (tmp_path / "missing")),
                ("--format", "mcp", "--source", "a=%s" % tmp_path)):
        out = msup.cli("tool", *bad)
        assert out.returncode == 2 and out.stdout == b"", (bad, out)


def test_mcp_server_lists_sources_as_tool_does(msup, tmp_path):
    from test_mcp import RawMcp
    (tmp_path / "runtimes.csv").write_text("9.0,7.5\n")
    (tmp_path / "p.png").write_bytes(b"\x89PNG....\n")
    (tmp_path / "b").write_bytes(b"")
    args = ("--source", "runtimes=%s" % (tmp_path / "runtimes.csv"), "--attach", "plot=%s:image/png" % (tmp_path / "p.png"),
            "--attach", "blob=%s" % (tmp_path / "b"))
    r = RawMcp(msup, *args)
    try:
        r.initialize()
        (served,) = r.request(1, "tools/list")["result"]["tools"]
    finally:
        assert r.close() == 0
    assert served == json.loads(tool(msup, "mcp", *args))


def node(script, *args):
    return subprocess.run(["node", "--input-type=module", "-e", script, *args], capture_output=True, timeout=300,
                          cwd=SDK_DIR)


def test_strict_exports_pass_the_openai_sdk_strict_check():
    """The openai SDK's own strict-mode transform (toStrictJsonSchema, what its zod helpers
    send) finds nothing to change in the strict exports' parameters, and refuses the plain
    ones (an optional property that is not nullable)."""
    require_node()
    script = """
import { toStrictJsonSchema } from "openai/lib/transform";
import { isDeepStrictEqual } from "node:util";
import { readFileSync } from "node:fs";
const out = {};
for (const path of process.argv.slice(1)) {
  const t = JSON.parse(readFileSync(path, "utf8"));
  const params = (t.function ?? t).parameters;
  try {
    out[path] = isDeepStrictEqual(toStrictJsonSchema(params), params) ? "unchanged" : "changed";
  } catch (e) {
    out[path] = "refused: " + e.message;
  }
}
console.log(JSON.stringify(out));
"""
    paths = {g: os.path.join(GOLDEN_DIR, "tool-%s.json" % g) for g in ("openai", "openai-chat", "openai-strict",
                                                                      "openai-chat-strict")}
    out = node(script, *paths.values())
    assert out.returncode == 0, out.stderr.decode()
    verdict = json.loads(out.stdout)
    assert verdict[paths["openai-strict"]] == verdict[paths["openai-chat-strict"]] == "unchanged", verdict
    for g in ("openai", "openai-chat"):
        assert verdict[paths[g]].startswith("refused: ") and "sourceIds" in verdict[paths[g]], verdict


def _tsc(ts_name, body):
    build = os.path.join(SDK_DIR, "build")
    os.makedirs(build, exist_ok=True)
    with open(os.path.join(build, ts_name), "w") as f:
        f.write(body)
    with open(os.path.join(build, "tsconfig.json"), "w") as f:
        json.dump({"compilerOptions": {"strict": True, "noEmit": True, "skipLibCheck": True, "target": "es2022",
                                       "module": "nodenext", "moduleResolution": "nodenext", "types": []},
                   "files": [ts_name]}, f)
    return subprocess.run(["node", os.path.join(SDK_DIR, "node_modules", "typescript", "bin", "tsc"), "-p", build],
                          capture_output=True, timeout=300, cwd=SDK_DIR)


HEADER = """import type OpenAI from "openai";
import type Anthropic from "@anthropic-ai/sdk";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
"""


def test_exports_typecheck_against_vendor_sdks():
    """Each golden export, as a literal, assigned to its SDK's tool type and used in a request."""
    require_node()
    golden = {f: open(os.path.join(GOLDEN_DIR, "tool-%s.json" % f)).read() for f in GOLDENS}
    good = HEADER + """
const openaiTool: OpenAI.Responses.FunctionTool = %s;
const openaiStrictTool: OpenAI.Responses.FunctionTool = %s;
const openaiRequest: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
  model: "gpt-4.1", input: "mean of 9 and 7.5", tools: [openaiTool, openaiStrictTool] };
const chatTool: OpenAI.Chat.ChatCompletionTool = %s;
const chatStrictTool: OpenAI.Chat.ChatCompletionTool = %s;
const chatRequest: OpenAI.Chat.ChatCompletionCreateParamsNonStreaming = {
  model: "gpt-4.1", messages: [{ role: "user", content: "mean of 9 and 7.5" }], tools: [chatTool, chatStrictTool] };
const anthropicTool: Anthropic.Tool = %s;
const anthropicRequest: Anthropic.MessageCreateParamsNonStreaming = {
  model: "claude-sonnet-4-5", max_tokens: 1024, messages: [{ role: "user", content: "mean of 9 and 7.5" }],
  tools: [anthropicTool] };
const mcpTool: McpTool = %s;
const mcpList: { tools: McpTool[] } = { tools: [mcpTool] };
export { openaiRequest, chatRequest, anthropicRequest, mcpList };
""" % (golden["openai"], golden["openai-strict"], golden["openai-chat"], golden["openai-chat-strict"],
       golden["anthropic"], golden["mcp"])
    out = _tsc("exports.ts", good)
    assert out.returncode == 0, (out.stdout + out.stderr).decode()

    # The check can fail: each format assigned to another vendor's type is refused.
    bad = HEADER + """
const a: OpenAI.Responses.FunctionTool = %s;
const b: Anthropic.Tool = %s;
const c: OpenAI.Chat.ChatCompletionTool = %s;
export { a, b, c };
""" % (golden["anthropic"], golden["openai"], golden["openai"])
    out = _tsc("mixed.ts", bad)
    assert out.returncode != 0
    errors = out.stdout.decode()
    # One error for each of the three assignments.
    lines = [ln for ln in errors.splitlines() if "error TS" in ln]
    assert len(lines) == 3 and "FunctionTool" in lines[0] and '"function"' in lines[1], errors
