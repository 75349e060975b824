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

FORMATS = ("codeinterp", "openai", "anthropic", "mcp", "json-schema")


def tool(sup, fmt):
    out = sup.cli("tool", "--format", fmt)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_tool_matches_golden(msup, fmt):
    text = tool(msup, fmt)
    path = os.path.join(GOLDEN_DIR, "tool-%s.json" % fmt)
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
    for fmt, key in (("openai", "parameters"), ("anthropic", "input_schema"), ("mcp", "inputSchema")):
        t = json.loads(tool(msup, fmt))
        assert t["name"] == "code_interpreter"
        assert t["description"].endswith("\n\n" + guidance)
        assert t[key] == json.loads(tool(msup, "json-schema"))
    for words in ("never simulate", "starts fresh", "sourceIds", "input_files", "input_assets", "Not available: network access",
                  "package installation", "characters omitted", "codeinterp_numeric", "to_number(x)",
                  "MissingValueError", "NumericError", 'missing="omit"', "Aggregate(value, n, missing)"):
        assert words.lower() in guidance.lower(), words


def test_unknown_format_is_a_usage_error(msup):
    out = msup.cli("tool", "--format", "gemini")
    assert out.returncode == 2 and b"unknown format" in out.stderr


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
    golden = {f: open(os.path.join(GOLDEN_DIR, "tool-%s.json" % f)).read() for f in FORMATS}
    good = HEADER + """
const openaiTool: OpenAI.Responses.FunctionTool = %s;
const openaiRequest: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
  model: "gpt-4.1", input: "mean of 9 and 7.5", tools: [openaiTool] };
const anthropicTool: Anthropic.Tool = %s;
const anthropicRequest: Anthropic.MessageCreateParamsNonStreaming = {
  model: "claude-sonnet-4-5", max_tokens: 1024, messages: [{ role: "user", content: "mean of 9 and 7.5" }],
  tools: [anthropicTool] };
const mcpTool: McpTool = %s;
const mcpList: { tools: McpTool[] } = { tools: [mcpTool] };
export { openaiRequest, anthropicRequest, mcpList };
""" % (golden["openai"], golden["anthropic"], golden["mcp"])
    out = _tsc("exports.ts", good)
    assert out.returncode == 0, (out.stdout + out.stderr).decode()

    # The check can fail: each format assigned to another vendor's type is refused.
    bad = HEADER + """
const a: OpenAI.Responses.FunctionTool = %s;
const b: Anthropic.Tool = %s;
export { a, b };
""" % (golden["anthropic"], golden["openai"])
    out = _tsc("mixed.ts", bad)
    assert out.returncode != 0
    errors = out.stdout.decode()
    # One error for each of the two assignments (the literals start on lines 5 and 6).
    lines = [ln for ln in errors.splitlines() if "error TS" in ln]
    assert len(lines) == 2 and "FunctionTool" in lines[0] and '"function"' in lines[1], errors
