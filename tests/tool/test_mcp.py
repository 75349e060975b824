"""`codeinterp mcp`: driven by the official MCP TypeScript client (tests/sdk-types/
mcp_client.mjs), and line by line for the JSON-RPC edge cases: malformed JSON, unknown
methods, bad arguments, notifications, the lifecycle and version negotiation, quota per
session."""
import json
import os
import select
import subprocess
import time

import pytest

from testlib import WAIT_LIMIT, Conn, running_supervisor, wait_for, wait_idle
from toolharness import CLIENT, GOLDEN_DIR, NORTHSTAR, SDK_DIR, require_node, status


@pytest.fixture
def msup(shared_supervisor):
    return shared_supervisor()

SECRETS = ("SECRET", "measured_runtime", "8.25", "runtimes", "9.0,7.5", "do-not-show", "ValueError", "time.sleep", "/inputs")


@pytest.fixture(scope="module")
def sdk_report(tmp_path_factory):
    """The official MCP client's session against `codeinterp mcp` (tests/sdk-types/
    mcp_client.mjs), and the supervisor's state once it is over."""
    require_node()
    src = tmp_path_factory.mktemp("mcp") / "runtimes.csv"
    src.write_text("9.0,7.5\n")
    with running_supervisor() as sup:
        out = subprocess.run(["node", os.path.join(SDK_DIR, "mcp_client.mjs"), CLIENT, sup.socket, str(src)],
                             capture_output=True, timeout=5 * WAIT_LIMIT)
        assert out.returncode == 0, out.stderr.decode()
        report = json.loads(out.stdout)
        # The cancelled call really was cancelled in the supervisor (it sleeps an hour).
        report["idleAfter"] = wait_idle(sup)["running"] == 0
    return report


def text_of(result):
    assert [c["type"] for c in result["content"]] == ["text"]
    return result["content"][0]["text"]


def test_sdk_lists_the_one_tool(sdk_report):
    with open(os.path.join(GOLDEN_DIR, "tool-mcp.json")) as f:
        golden = json.load(f)
    (t,) = sdk_report["tools"]
    assert t["name"] == "code_interpreter"
    assert t["inputSchema"] == golden["inputSchema"]
    assert t["outputSchema"] == golden["outputSchema"]
    assert t["title"] == "Python code interpreter"
    assert t["annotations"] == {"title": "Python code interpreter", "readOnlyHint": True, "destructiveHint": False,
                                "idempotentHint": True, "openWorldHint": False}
    assert t["description"] == (golden["description"] + "\n\nSources offered in this session (name them in "
                                "sourceIds):\n- runtimes: text, 8 bytes")
    assert sdk_report["server"]["name"] == "codeinterp"
    assert sdk_report["protocolVersion"] == "2025-11-25"  # the SDK's newest


def test_sdk_guidance_is_sent_once(sdk_report):
    """The guidance and the sources are in the tool's description; the instructions only
    point there."""
    (t,) = sdk_report["tools"]
    assert "Every call starts fresh" in t["description"]
    assert "Every call starts fresh" not in sdk_report["instructions"]
    assert "runtimes" not in sdk_report["instructions"]
    assert "code_interpreter" in sdk_report["instructions"] and "description" in sdk_report["instructions"]


def test_sdk_structured_content_matches_the_output_schema(sdk_report):
    """Every result, rejections included, carries structuredContent, validated against
    the outputSchema by the SDK client (callTool()) and once more explicitly."""
    assert sdk_report["schemaErrors"] == {}
    for name in ("northstar", "source", "artifacts", "exception", "exited", "rejected", "after"):
        assert "structuredContent" in sdk_report[name], name
    s = sdk_report["northstar"]["structuredContent"]
    assert s["outcome"] == "ok" and s["rejected"] is False and s["partial"] is False
    assert s["value"] == {"text": "8.25", "totalCharacters": 4, "omittedCharacters": 0, "omittedAt": 4,
                          "replacedCharacters": 0}
    assert s["stdout"]["text"] == "" and s["exception"] is None and s["artifacts"] == []
    assert len(s["evidence"]["codeSha256"]) == 64 and s["evidence"]["inputs"] == []
    src = sdk_report["source"]["structuredContent"]["evidence"]["inputs"]
    assert [(i["sourceId"], i["bytes"]) for i in src] == [("runtimes", 8)]
    e = sdk_report["exception"]["structuredContent"]
    assert e["outcome"] == "python_exception" and e["exception"]["type"] == "ValueError"
    assert e["exception"]["message"]["text"] == "bad do-not-show" and e["value"] is None
    r = sdk_report["rejected"]["structuredContent"]
    assert r == {"outcome": "unavailable_source", "rejected": True, "reason": r["reason"]} and "not available" in r["reason"]
    x = sdk_report["exited"]["structuredContent"]
    assert x["outcome"] == "worker_error" and x["stdout"]["text"] == "bye\n"


def test_sdk_code_ending_its_process_is_not_called_a_sandbox_failure(sdk_report):
    t = text_of(sdk_report["exited"])
    assert sdk_report["exited"]["isError"] is True
    assert "The code ended its own process (exit status 3, as os._exit() does)" in t
    assert "sandbox failed" not in t and "calling again may work" not in t


def test_sdk_structured_artifacts_name_the_content(sdk_report):
    import base64
    import hashlib
    r = sdk_report["artifacts"]
    arts = r["structuredContent"]["artifacts"]
    assert [(a["name"], a["mediaType"]) for a in arts] == [("runtime table.csv", "text/csv"),
                                                            ("runtime.png", "image/png")]
    data = [base64.b64decode(r["content"][1]["resource"]["blob"]), base64.b64decode(r["content"][2]["data"])]
    assert [(a["bytes"], a["sha256"]) for a in arts] == [(len(d), hashlib.sha256(d).hexdigest()) for d in data]
    assert r["structuredContent"]["omittedArtifacts"] == 0


def test_sdk_northstar_and_source(sdk_report):
    assert sdk_report["northstar"]["isError"] is False
    assert "--- value (4 characters) ---\n8.25\n" in text_of(sdk_report["northstar"])
    assert sdk_report["source"]["isError"] is False
    assert "'9.0,7.5\\n'" in text_of(sdk_report["source"])


def test_sdk_artifacts_as_image_and_resource(sdk_report):
    """An image comes back as MCP image content, anything else as an embedded resource;
    the text lists both with media type and size."""
    import base64
    r = sdk_report["artifacts"]
    assert r["isError"] is False
    assert [c["type"] for c in r["content"]] == ["text", "resource", "image"]  # name order
    text = r["content"][0]["text"]
    assert "--- files in /outputs (2 returned," in text
    assert "runtime.png: image/png," in text and "runtime table.csv: text/csv, 22 bytes" in text
    res = r["content"][1]["resource"]
    assert res["uri"] == "file:///outputs/runtime%20table.csv" and res["mimeType"] == "text/csv"
    assert base64.b64decode(res["blob"]) == b"run,hours\n1,9.0\n2,7.5\n"
    img = r["content"][2]
    assert img["mimeType"] == "image/png"
    assert base64.b64decode(img["data"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_sdk_python_exception_is_error(sdk_report):
    assert sdk_report["exception"]["isError"] is True
    t = text_of(sdk_report["exception"])
    assert t.startswith("outcome: python_exception\n") and "exception: ValueError" in t and "bad do-not-show" in t


def test_sdk_cancel_then_next_call(sdk_report):
    """A ping is answered while a call runs (the session would time out otherwise), and
    the aborted call is rejected by the client and cancelled in the supervisor."""
    assert sdk_report["pingMsWhileRunning"] >= 0
    assert sdk_report["cancel"]["resolved"] is False  # the client rejects the aborted call itself
    assert "cancels" in sdk_report["cancel"]["error"], sdk_report["cancel"]  # the abort's reason, not a timeout
    assert sdk_report["idleAfter"]
    assert sdk_report["after"]["isError"] is False
    assert "8.25" in text_of(sdk_report["after"])


def test_sdk_progress_is_metadata_only(sdk_report):
    progress = sdk_report["progress"]
    # Fast calls' progress may be dropped by the SDK (see mcp_client.mjs); the sleeper's is not.
    assert [p["message"].split(" · ")[0] for p in progress["sleeper"][:3]] == [
        "code_interpreter: requested", "code_interpreter: queued", "code_interpreter: started"]
    for name, events in progress.items():
        for p in events:
            assert p["message"].startswith("code_interpreter: "), p
            for s in SECRETS:
                assert s not in json.dumps(p), (name, s, p)


class RawMcp:
    """codeinterp mcp spoken to line by line."""

    def __init__(self, sup, *args, preexec_fn=None):
        self.p = subprocess.Popen([CLIENT, "--socket", sup.socket, "mcp", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec_fn)
        self.buf = b""
        self.changes = []

    def initialize(self, version="2025-11-25"):
        r = self.request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                           "clientInfo": {"name": "t", "version": "1"}})
        assert "result" in r, r
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r["result"]

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv(self, timeout=WAIT_LIMIT):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from codeinterp mcp"
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                assert chunk, "codeinterp mcp exited: %r" % self.p.stderr.read()
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, rid, method, params=None):
        """The answer to the request; notifications/tools/list_changed that come first
        are kept in self.changes."""
        m = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            m["params"] = params
        self.send(m)
        while True:
            r = self.recv()
            if r.get("method") != "notifications/tools/list_changed":
                return r
            self.changes.append(r)

    def call(self, rid, arguments, name="code_interpreter"):
        return self.request(rid, "tools/call", {"name": name, "arguments": arguments})

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(timeout=WAIT_LIMIT)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


@pytest.fixture
def raw(msup):
    r = RawMcp(msup)
    r.initialize()
    yield r
    if r.p.poll() is None:
        assert r.close() == 0


@pytest.mark.parametrize("asked,got", [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
                                       ("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
                                       ("1999-01-01", "2025-11-25"), ("2099-12-31", "2025-11-25"), (7, "2025-11-25")])
def test_initialize_negotiates_the_version(msup, asked, got):
    """The version asked for when supported, else the newest; the tool and its results
    carry what that version has (titles, outputSchema, structuredContent since
    2025-06-18; annotations since 2025-03-26). A second initialize is refused."""
    r = RawMcp(msup)
    try:
        res = r.initialize(asked)
        assert res["protocolVersion"] == got
        assert res["capabilities"] == {"tools": {"listChanged": True}}
        (t,) = r.request(1, "tools/list")["result"]["tools"]
        structured = got >= "2025-06-18"
        assert ("outputSchema" in t, "title" in t) == (structured, structured)
        assert ("annotations" in t) == (got >= "2025-03-26")
        res = r.call(2, {"summary": "s", "code": "6 * 7"})["result"]
        assert ("structuredContent" in res) == structured
        if structured:
            assert res["structuredContent"]["value"]["text"] == "42"
        again = r.request(3, "initialize", {"protocolVersion": got, "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "1"}})
        assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]
    finally:
        assert r.close() == 0


def test_requests_before_initialize_and_null_ids(msup):
    """MCP: nothing but pings before initialize, and a request's id is never null
    (JSON-RPC Invalid Request, -32600)."""
    r = RawMcp(msup)
    try:
        for rid, method in [(1, "tools/list"), (2, "tools/call"), ("three", "resources/list")]:
            assert r.request(rid, method) == {"jsonrpc": "2.0", "id": rid, "error": {
                "code": -32600, "message": "invalid request: the session is not initialized"}}
        assert r.request(4, "ping") == {"jsonrpc": "2.0", "id": 4, "result": {}}
        null_id = {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32600, "message": "invalid request: the id must be a string or an integer"}}
        assert r.request(None, "ping") == null_id
        assert r.request(None, "initialize", {"protocolVersion": "2025-11-25"}) == null_id
        r.initialize()  # the null-id initialize did not count
        assert r.request(None, "tools/list") == null_id
        assert "tools" in r.request(5, "tools/list")["result"]
    finally:
        assert r.close() == 0


def test_malformed_and_unknown(raw):
    raw.send_raw(b"{not json\n")
    assert raw.recv() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700,
                                                                  "message": "parse error: not one JSON value"}}
    raw.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"} trailing\n')
    assert raw.recv()["error"]["code"] == -32700
    raw.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "p\xffng"}\n')
    assert raw.recv()["error"]["code"] == -32700
    raw.send_raw(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n')
    assert raw.recv()["error"]["code"] == -32600
    raw.send({"jsonrpc": "1.0", "id": 2, "method": "ping"})
    assert raw.recv() == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "invalid request"}}
    assert raw.request(3, "resources/list")["error"]["code"] == -32601
    assert raw.request("four", "no/such/method")["error"] == {"code": -32601, "message": "method not found"}
    # Notifications get no answer, known or not: the next line answers the ping.
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    raw.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"x": 1}})
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    assert raw.request(5, "ping") == {"jsonrpc": "2.0", "id": 5, "result": {}}


def test_bad_tool_calls(raw):
    assert raw.request(1, "tools/call")["error"]["code"] == -32602
    assert raw.call(2, {"summary": "s", "code": "1"}, name="python")["error"]["code"] == -32602
    assert raw.request(3, "tools/call", {"name": "code_interpreter", "arguments": [1]})["error"]["code"] == -32602
    for rid, args, outcome in [
            (4, {"summary": "s", "code": 5}, "invalid_input"),
            (5, {"code": "1"}, "invalid_input"),
            (6, {"summary": "s", "code": "1", "packages": ["numpy"]}, "invalid_input"),
            (7, {"summary": "s", "code": "1", "sourceIds": "runtimes"}, "invalid_input"),
            (8, {"summary": "s", "code": "   "}, "invalid_input"),
            (9, {"summary": "s", "code": "1", "sourceIds": ["a", "b", "c", "d", "e"]}, "invalid_input"),
            (10, {"summary": "s", "code": "1", "sourceIds": ["../etc/passwd"]}, "invalid_input"),
            (11, {"summary": "s", "code": "1", "sourceIds": ["nope"]}, "unavailable_source")]:
        r = raw.call(rid, args)
        assert r["id"] == rid and r["result"]["isError"] is True, r
        assert text_of(r["result"]).startswith("outcome: %s\nNo code ran" % outcome), r
    # Still serving.
    r = raw.call(12, {"summary": "s", "code": NORTHSTAR})
    assert r["result"]["isError"] is False and "8.25" in text_of(r["result"])


def test_progress_notifications_are_metadata_only(raw):
    raw.send({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
              "params": {"name": "code_interpreter", "_meta": {"progressToken": "tok"},
                         "arguments": {"summary": "SECRET-SUMMARY", "code": "print('SECRET-OUT')\n"
                                       "raise ValueError('SECRET-EXC')"}}})
    notes = []
    while True:
        m = raw.recv()
        if "id" in m:
            break
        notes.append(m)
    assert m["id"] == "c1" and m["result"]["isError"] is True and "SECRET-EXC" in text_of(m["result"])
    phases = [n["params"]["message"].split(" · ")[0] for n in notes]
    assert [p for p in phases if p != "code_interpreter: running"] == [  # heartbeats only if slow
        "code_interpreter: requested", "code_interpreter: queued", "code_interpreter: started",
        "code_interpreter: finished: python_exception"]
    assert [n["params"]["progress"] for n in notes] == list(range(1, len(notes) + 1))
    for n in notes:
        assert n["method"] == "notifications/progress" and n["params"]["progressToken"] == "tok"
        assert "SECRET" not in json.dumps(n) and "ValueError" not in json.dumps(n)
    assert "stdout 11 characters" in notes[-1]["params"]["message"]
    # Without a progress token, no notifications: the next line is the answer.
    r = raw.call("c2", {"summary": "s", "code": "1"})
    assert r["id"] == "c2"


def test_cancel_by_notification_and_ping_meanwhile(msup, raw):
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "code_interpreter", "_meta": {"progressToken": 7},
                         "arguments": {"summary": "s", "code": "import time\ntime.sleep(3600)"}}})
    while True:  # progress until the worker runs
        m = raw.recv()
        assert m["method"] == "notifications/progress" and m["params"]["progressToken"] == 7
        if "started" in m["params"]["message"]:
            break
    assert raw.request(2, "ping")["result"] == {}
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "x"}})
    wait_for(lambda: status(msup)["running"] == 0, "the call cancelled in the supervisor")
    # The cancelled request gets no response; the next request is answered.
    r = raw.call(3, {"summary": "s", "code": "6 * 7"})
    assert r["id"] == 3 and "42" in text_of(r["result"])


def test_quota_counts_per_session(make_supervisor):
    sup = make_supervisor("maxCalls: 2\n")
    first = RawMcp(sup)
    first.initialize()
    for rid in (1, 2):
        assert first.call(rid, {"summary": "s", "code": "1"})["result"]["isError"] is False
    r = first.call(3, {"summary": "s", "code": "1"})
    assert r["result"]["isError"] is True and text_of(r["result"]).startswith("outcome: quota_exhausted\n")
    assert first.close() == 0
    # A new session is a new invocation.
    second = RawMcp(sup)
    second.initialize()
    assert second.call(1, {"summary": "s", "code": "1"})["result"]["isError"] is False
    assert second.close() == 0


def test_kept_outputs_become_the_sessions_sources(msup):
    """Every file a call leaves in /outputs is kept as a source of the session: the
    result names its ID, the tool's description lists it (and the client is told the
    list changed), a later call mounts it by that ID; another session cannot."""
    r = RawMcp(msup)
    r.initialize()
    res = r.call(1, {"summary": "s", "code": "open('/outputs/clean.csv', 'w').write('a,b\\n1,2\\n')\n'done'"})
    assert res["result"]["isError"] is False, res
    text = res["result"]["content"][0]["text"]  # and the file itself, as a resource
    assert "out-1-clean.csv" in text, text
    (t,) = r.request(2, "tools/list")["result"]["tools"]
    assert [c["method"] for c in r.changes] == ["notifications/tools/list_changed"], r.changes  # after the result
    assert "- out-1-clean.csv: a file an earlier call kept, 8 bytes, mounted at /inputs/out-1-clean.csv" \
        in t["description"], t["description"]
    res = r.call(3, {"summary": "s", "code": "open('/inputs/out-1-clean.csv').read()",
                     "sourceIds": ["out-1-clean.csv"]})
    assert res["result"]["isError"] is False and res["result"]["structuredContent"]["value"]["text"] == \
        "'a,b\\n1,2\\n'", res
    # A call that leaves nothing changes nothing.
    r.call(4, {"summary": "s", "code": "1"})
    r.request(5, "ping")
    assert len(r.changes) == 1, r.changes
    other = RawMcp(msup)
    other.initialize()
    res = other.call(1, {"summary": "s", "code": "1", "sourceIds": ["out-1-clean.csv"]})
    assert res["result"]["isError"] is True and text_of(res["result"]).startswith("outcome: unavailable_source"), res
    (t,) = other.request(2, "tools/list")["result"]["tools"]
    assert "out-1-clean.csv" not in t["description"]
    assert other.close() == 0
    assert r.close() == 0


def test_binary_attachment(msup, tmp_path):
    """--attach with bytes that are not UTF-8: the original is mounted as it is, with the
    one-line canonical text exec gives it (docs/client.md, exec --attach)."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / "plot.png").write_bytes(png)
    r = RawMcp(msup, "--attach", "plot=%s:image/png" % (tmp_path / "plot.png"))
    try:
        r.initialize()
        (t,) = r.request(1, "tools/list")["result"]["tools"]
        assert t["description"].endswith("\n- plot: attachment, image/png, %d bytes" % len(png))
        res = r.call(2, {"summary": "s", "code": "import hashlib\na = input_assets['plot']\n"
                                                 "(hashlib.sha256(open(a['original'], 'rb').read()).hexdigest(), "
                                                 "open(a['text']).read(), a['mediaType'])", "sourceIds": ["plot"]})
        assert res["result"]["isError"] is False, res
        import hashlib
        value = res["result"]["structuredContent"]["value"]["text"]
        assert value == repr((hashlib.sha256(png).hexdigest(), "[binary attachment: image/png, %d bytes; the original "
                              "bytes are /inputs/plot.original]" % len(png), "image/png")), value
    finally:
        assert r.close() == 0


def test_bad_command_line(msup, tmp_path):
    out = subprocess.run([CLIENT, "--socket", msup.socket, "mcp", "--source", "x=%s" % (tmp_path / "missing")],
                         capture_output=True, timeout=WAIT_LIMIT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and b"cannot read" in out.stderr
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok")
    out = subprocess.run([CLIENT, "--socket", msup.socket, "mcp", "--source", ".hidden=%s" % bad],
                         capture_output=True, timeout=WAIT_LIMIT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and b"refused" in out.stderr
    out = subprocess.run([CLIENT, "--socket", "/nonexistent/sock", "mcp"], capture_output=True, timeout=WAIT_LIMIT,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 12


def test_hostile_lines_do_not_break_the_server(raw):
    """Whatever arrives, every request line gets one answer and the server keeps serving."""
    lines = [
        b"[" * 100000,                                   # nesting far past the parser's depth
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}',   # id must be a string or an integer
        b'{"jsonrpc": "2.0", "id": 1, "method": 7}',
        b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "code"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}',
        b'\x00\x01\x02',
        b'"just a string"',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "code_interpreter", '
        b'"arguments": {"summary": "s\\u0000x", "code": "1"}}}',
        b"{" + b'"k": "' + b"x" * (2 << 20) + b'"',       # 2 MiB, unterminated
    ]
    for line in lines:
        raw.send_raw(line + b"\n")
        m = raw.recv()
        assert m["jsonrpc"] == "2.0" and ("error" in m or "result" in m), (line[:80], m)
        if "result" in m and "content" in m["result"]:
            assert m["result"]["isError"] is True
    # A line beyond the 32 MiB bound is skipped to its end and answered once.
    raw.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "' + b"x" * (33 << 20) + b'"}\n')
    assert raw.recv()["error"] == {"code": -32700, "message": "parse error: message too long"}
    assert raw.request(99, "ping") == {"jsonrpc": "2.0", "id": 99, "result": {}}


class FakeSupervisor:
    """A socket that speaks codeinterpd's framing (4-byte length, msgpack) to one client
    connection after another: describe is the real supervisor's, execute is answered by
    on_execute(request) -> result map, every other request with an empty reply."""

    def __init__(self, sup, path, on_execute):
        import socket
        import threading
        real = Conn(sup.socket)
        self.describe = real.call("describe")
        real.close()
        assert self.describe["type"] == "reply", self.describe
        self.on_execute = on_execute
        self.socket = str(path)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.socket)
        self.server.listen(4)
        self.server.settimeout(0.2)
        self.stopping = False
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self):
        import socket
        while not self.stopping:
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(WAIT_LIMIT)
                try:
                    self._one(conn)
                except (OSError, ValueError):
                    pass  # the client went away mid-frame (it may be under a memory limit)

    def _one(self, conn):
        import struct
        import msgpack
        def exactly(n):
            buf = b""
            while len(buf) < n:
                chunk = conn.recv(min(n - len(buf), 1 << 20))
                if not chunk:
                    return None
                buf += chunk
            return buf
        while True:
            hdr = exactly(4)
            if hdr is None:
                return
            body = exactly(struct.unpack(">I", hdr)[0])
            if body is None:
                return
            m = msgpack.unpackb(body, raw=False)
            if m["op"] == "describe":
                reply = dict(self.describe, id=m["id"])
            elif m["op"] == "invocation.open":
                reply = {"id": m["id"], "type": "reply", "op": "invocation.open", "invocation": "f" * 32,
                         "maxCalls": 10, "idleTtlMs": 3600000}
            elif m["op"] == "execute":
                reply = dict(self.on_execute(m), id=m["id"])
            else:
                reply = {"id": m["id"], "type": "reply", "op": m["op"]}
            b = msgpack.packb(reply, use_bin_type=True)
            conn.sendall(struct.pack(">I", len(b)) + b)

    def close(self):
        self.stopping = True
        self.thread.join(30)
        self.server.close()


def artifact(name, mt, data, sha=None):
    import hashlib
    return {"name": name, "mediaType": mt, "bytes": len(data), "sha256": sha or hashlib.sha256(data).hexdigest(),
            "data": data}


def fake_result(artifacts):
    return {"type": "result", "callId": 1, "outcome": "ok", "limit": None, "detail": None, "partial": False,
            "stdout": None, "stderr": None, "result": None, "exception": None, "elapsedMs": 1,
            "artifacts": artifacts, "omittedArtifacts": 0, "omittedArtifactBytes": 0}


def test_forged_artifacts_are_left_out(msup, tmp_path):
    """Against a fake supervisor whose result carries forged artifacts: an entry whose
    digest does not match its bytes and one whose name could leave a directory are not
    passed on; an SVG (it may carry script) is a resource, never image content."""
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    png = b"\x89PNG\r\n\x1a\n" + bytes(8)
    result = fake_result([artifact("../x.png", "image/png", png), artifact("bad.png", "image/png", png, "0" * 64),
                          artifact("ok.png", "image/png", png), artifact("s.svg", "image/svg+xml", svg)])
    fake = FakeSupervisor(msup, tmp_path / "fake.sock", lambda m: result)
    r = RawMcp(fake)
    try:
        r.request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}})
        res = r.call(2, {"summary": "s", "code": "1", "sourceIds": []})["result"]
    finally:
        r.close()
        fake.close()
    kinds = [(c["type"], c.get("mimeType") or c.get("resource", {}).get("uri")) for c in res["content"]]
    assert kinds == [("text", None), ("image", "image/png"), ("resource", "file:///outputs/s.svg")], kinds
    text = res["content"][0]["text"]
    assert "?: image/png" in text  # the unsafe name is not shown either
    # The structured result lists what was attached, and counts the rest as omitted.
    s = res["structuredContent"]
    assert [a["name"] for a in s["artifacts"]] == ["ok.png", "s.svg"]
    assert s["omittedArtifacts"] == 2 and s["omittedArtifactBytes"] == 2 * len(png)
    assert s["stdout"] is None and s["evidence"] is None


def vm_size_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1])
    raise AssertionError("no VmSize")


def test_out_of_memory_answers_every_request_and_never_alters_one(msup, tmp_path):
    """codeinterp mcp under an address-space limit (RLIMIT_AS), swept in 1 MiB steps
    from what it maps once started to where everything fits, against a fake supervisor.
    Each session: a call with a 1.8 MB code argument (small result), a call whose
    result carries a 6 MiB PNG, and a ping. At every limit each request gets exactly
    one answer: complete (the image attached and intact), or the text alone saying
    the artifacts are not attached, or a JSON-RPC "out of memory" error (with id null
    when the request's line itself could not be read; "could not be received" when
    the result did not fit). A code argument reaches the supervisor whole or not at all
    (json-c 0.16 drops what it cannot store and parses on). The session goes on: the
    ping is answered, and it ends cleanly at end of input. The sweep must reach each
    kind of answer."""
    import base64
    import hashlib
    import resource
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(6 << 20)
    # Many short segments between escapes: the tokener appends them one by one.
    big_code = "x = 1\n" * (300 << 10) + "'\u00e9'"
    big_sha = hashlib.sha256(big_code.encode()).hexdigest()
    received = []

    def on_execute(m):
        if m["code"] == "plot()":
            return fake_result([artifact("plot.png", "image/png", png)])
        received.append(hashlib.sha256(m["code"].encode()).hexdigest())
        return fake_result([])

    fake = FakeSupervisor(msup, tmp_path / "fake.sock", on_execute)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}

    def session(limit_kb):
        def lower():
            resource.setrlimit(resource.RLIMIT_AS, (limit_kb << 10, limit_kb << 10))
        r = RawMcp(fake, preexec_fn=lower if limit_kb else None)
        try:
            got = [r.request(1, "initialize", init)]
            base = vm_size_kb(r.p.pid)
            got.append(r.call(2, {"summary": "s", "code": big_code, "sourceIds": []}))
            got.append(r.call(3, {"summary": "s", "code": "plot()", "sourceIds": []}))
            got.append(r.request(4, "ping"))
        finally:
            rc = r.close()
        return got, rc, base

    def kind(answer, rid):
        if "error" in answer and answer["error"]["code"] == -32600:  # the initialize was not read
            assert answer["error"]["message"] == "invalid request: the session is not initialized", answer
            return "not initialized"
        if "error" in answer:
            assert answer["error"]["code"] == -32603 and "out of memory" in answer["error"]["message"], answer
            if answer["id"] is None:
                return "line not read"
            assert answer["id"] == rid, answer
            return "result lost" if "could not be received" in answer["error"]["message"] else "error"
        assert answer["id"] == rid, answer
        assert answer["result"]["structuredContent"]["outcome"] == "ok", answer["result"].keys()
        content = answer["result"]["content"]
        assert content[0]["type"] == "text" and isinstance(content[0]["text"], str), content
        if len(content) == 2:
            assert content[1]["type"] == "image" and content[1]["mimeType"] == "image/png", content[1].keys()
            assert base64.b64decode(content[1]["data"]) == png
            return "complete"
        assert len(content) == 1, content
        if content[0]["text"].endswith("the artifacts are not attached: out of memory)"):
            return "text only"
        return "complete"

    try:
        got, rc, base = session(0)
        assert rc == 0 and kind(got[1], 2) == "complete" and kind(got[2], 3) == "complete"
        kinds = {2: {}, 3: {}}
        for extra_mb in range(0, 48):
            got, rc, _ = session(base + (extra_mb << 10))
            assert rc == 0, (extra_mb, rc)
            assert got[0]["id"] in (1, None) and ("result" in got[0] or kind(got[0], 1)), got[0]
            for rid in (2, 3):
                kinds[rid].setdefault(kind(got[rid - 1], rid), []).append(extra_mb)
            assert got[3] == {"jsonrpc": "2.0", "id": 4, "result": {}} or kind(got[3], 4) == "line not read", got[3]
        assert received and all(c == big_sha for c in received), "a code argument reached the supervisor altered"
        assert set(kinds[2]) - {"not initialized"} == {"line not read", "complete"}, kinds
        assert {"result lost", "text only", "complete"} <= set(kinds[3]), kinds
        print("answers by MiB above the started server's size:", kinds)
    finally:
        fake.close()
