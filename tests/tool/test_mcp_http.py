"""`codeinterp mcp --http`: the Streamable HTTP transport, driven by the official MCP
TypeScript client (tests/sdk-types/mcp_http_client.mjs) and request by request for what a
client can get wrong: the token, the Origin, the size, the session, the JSON, the limits.
Last, the SDK through nginx with TLS, configured by the block docs/deployment.md shows."""
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from testlib import CLIENT, WAIT_LIMIT, running_supervisor, status, wait_for, wait_idle
from testlib.waits import held, release
from toolharness import ROOT, SDK_DIR, require_node

NORTHSTAR = "measured_runtime_hours = [9.0, 7.5]\nsum(measured_runtime_hours) / len(measured_runtime_hours)"
VERSION = "2025-11-25"


@pytest.fixture(scope="module")
def sup():
    with running_supervisor() as s:
        yield s


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (secrets.token_urlsafe(36) + "\n").encode())
    os.close(fd)
    return str(path)


class HttpServer:
    """`codeinterp mcp --http 127.0.0.1:0`; its stderr is collected line by line, so a
    test can wait for a log line (the port it listens on, a session ending)."""

    def __init__(self, sup, token_file, *args):
        self.token = open(token_file).read().strip()
        self.proc = subprocess.Popen([CLIENT, "--socket", sup.socket, "mcp", "--http", "127.0.0.1:0",
                                      "--token-file", token_file, *args], stdin=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        m = self.wait_log(r"listening on http://127\.0\.0\.1:(\d+)/mcp")
        self.port = int(m.group(1))
        self.url = "http://127.0.0.1:%d/mcp" % self.port

    def _read(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)  # end of stderr
            self.cond.notify_all()

    def wait_log(self, pattern):
        deadline = time.monotonic() + WAIT_LIMIT
        with self.cond:
            while True:
                for line in self.lines:
                    if line is None:
                        raise AssertionError("the server exited: %s" % "".join(filter(None, self.lines)))
                    m = re.search(pattern, line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                assert left > 0, "waited for %r in %r" % (pattern, self.lines)
                self.cond.wait(left)

    def request(self, method, body=None, headers=None, auth=True):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if auth:
            h["Authorization"] = "Bearer " + self.token
        h.update(headers or {})
        h = {k: v for k, v in h.items() if v is not None}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT_LIMIT)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, "/mcp", body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, r.headers, json.loads(data) if data else None
        finally:
            c.close()

    def post(self, msg, session=None, **headers):
        headers = {k.replace("_", "-"): v for k, v in headers.items()}
        if session:
            headers["Mcp-Session-Id"] = session
        return self.request("POST", msg, headers)

    def initialize(self):
        st, hd, body = self.post(rpc(0, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                                        "clientInfo": {"name": "t", "version": "1"}}))
        assert st == 200, body
        assert body["result"]["protocolVersion"] == VERSION
        sid = hd["Mcp-Session-Id"]
        assert re.fullmatch(r"[0-9a-f]{64}", sid)
        return sid

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=WAIT_LIMIT)
        self.reader.join(WAIT_LIMIT)
        assert rc == 0, "".join(filter(None, self.lines))


@pytest.fixture
def server(sup, token_file):
    started = []

    def start(*args):
        s = HttpServer(sup, token_file, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.stop()
    wait_idle(sup)


def rpc(id, method, params=None):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    return m


def tool_call(id, code):
    return rpc(id, "tools/call", {"name": "code_interpreter",
                                  "arguments": {"summary": "t", "code": code, "sourceIds": []}})


def sdk(url, token_file, mode, session=None, env=None):
    require_node()
    args = ["node", os.path.join(SDK_DIR, "mcp_http_client.mjs"), url, token_file, mode] + ([session] if session else [])
    out = subprocess.run(args, capture_output=True, timeout=5 * WAIT_LIMIT, env=env)
    assert out.returncode == 0, out.stderr.decode()
    return json.loads(out.stdout)


def connections(sup):
    return status(sup)["connections"]


def test_sdk_initializes_lists_calls_and_resumes(sup, server, token_file):
    srv = server()
    r = sdk(srv.url, token_file, "new")
    assert r["server"]["name"] == "codeinterp"
    assert r["protocolVersion"] == VERSION
    assert [t["name"] for t in r["tools"]] == ["code_interpreter"]
    assert r["northstar"]["isError"] is False
    assert r["northstar"]["structuredContent"]["value"]["text"] == "8.25"
    # The node process has gone; the session has not: a new client resumes it.
    again = sdk(srv.url, token_file, "resume", r["sessionId"])
    assert again["sessionId"] == r["sessionId"]
    assert again["northstar"]["structuredContent"]["value"]["text"] == "8.25"


def test_idle_session_expires_and_the_sdk_starts_a_new_one(sup, server, token_file):
    # Long enough that the SDK's requests, a few milliseconds apart, never meet it on a busy
    # machine; the test waits for the server's log line, not for the time.
    srv = server("--idle-timeout", "3")
    r = sdk(srv.url, token_file, "new")
    sid = r["sessionId"]
    srv.wait_log(r"session %s ended \(idle\)" % sid[:8])
    st, _, body = srv.post(rpc(1, "ping"), session=sid)
    assert st == 404 and body["error"]["code"] == -32001
    gone = sdk(srv.url, token_file, "expired", sid)
    assert gone["oldSession"]["ok"] is False and gone["oldSession"]["code"] == 404, gone["oldSession"]
    assert gone["sessionId"] != sid
    assert gone["northstar"]["structuredContent"]["value"]["text"] == "8.25"


def test_token_is_required(server):
    srv = server()
    init = rpc(0, "initialize", {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    st, hd, _ = srv.request("POST", init, auth=False)
    assert st == 401 and hd["WWW-Authenticate"] == "Bearer"
    wrong = srv.token[:-1] + ("a" if srv.token[-1] != "a" else "b")
    for value in ("Bearer " + wrong, "Bearer " + srv.token[:-1], "Basic " + srv.token, srv.token):
        st, hd, _ = srv.request("POST", init, {"Authorization": value}, auth=False)
        assert st == 401 and hd["WWW-Authenticate"] == "Bearer", value
    # Also a request in an existing session, and a DELETE.
    sid = srv.initialize()
    st, _, _ = srv.request("POST", rpc(1, "ping"), {"Mcp-Session-Id": sid}, auth=False)
    assert st == 401
    st, _, _ = srv.request("DELETE", None, {"Mcp-Session-Id": sid}, auth=False)
    assert st == 401
    assert srv.post(rpc(2, "ping"), session=sid)[0] == 200


def test_origin_is_checked(server):
    srv = server("--allow-origin", "https://agent.example")
    sid = srv.initialize()
    st, _, body = srv.post(rpc(1, "ping"), session=sid, Origin="http://evil.example")
    assert st == 403, body
    st, _, body = srv.post(rpc(1, "ping"), session=sid, Origin="https://agent.example")
    assert st == 200 and body["result"] == {}
    plain = server()
    st, _, _ = plain.post(rpc(1, "ping"), Origin="http://localhost")  # no --allow-origin: none is
    assert st == 403


def test_request_size_is_bounded(server):
    srv = server("--max-body", "2048")
    sid = srv.initialize()
    st, _, body = srv.post(tool_call(1, "x = '%s'" % ("a" * 4096)), session=sid)
    assert st == 413, body
    # Without a Content-Length (chunked): counted as it arrives.
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=WAIT_LIMIT)
    c.request("POST", "/mcp", body=iter([b"[" + b" " * 1500, b" " * 1500 + b"]"]), encode_chunked=True,
              headers={"Content-Type": "application/json", "Authorization": "Bearer " + srv.token,
                       "Mcp-Session-Id": sid, "Transfer-Encoding": "chunked"})
    assert c.getresponse().status == 413
    c.close()
    assert srv.post(rpc(2, "ping"), session=sid)[0] == 200


def test_sessions_are_required_and_known(server):
    srv = server()
    st, _, body = srv.post(rpc(1, "tools/list"))
    assert st == 400 and body["error"]["code"] == -32600
    st, _, body = srv.post(rpc(1, "tools/list"), session="0" * 64)
    assert st == 404 and body["error"]["code"] == -32001 and body["id"] == 1
    st, _, _ = srv.request("DELETE", None, {"Mcp-Session-Id": "0" * 64})
    assert st == 404
    # An initialize that fails keeps no session, and is answered.
    st, hd, body = srv.post({"jsonrpc": "2.0", "method": "initialize", "params": {}})
    assert st == 400 and body["error"]["code"] == -32600 and "Mcp-Session-Id" not in hd
    st, hd, body = srv.post({"jsonrpc": "2.0", "id": None, "method": "initialize", "params": {}})
    assert st == 400 and body["error"]["code"] == -32600 and "Mcp-Session-Id" not in hd
    srv.wait_log(r"ended \(not initialized\)")


def test_bad_requests_get_their_status(server):
    srv = server()
    sid = srv.initialize()
    st, _, body = srv.post('{"jsonrpc": "2.0", "id": 1, "method": "ping"', session=sid)
    assert st == 400 and body == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": body["error"]["message"]}}
    st, _, body = srv.post(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}', session=sid)
    assert st == 400 and body["error"]["code"] == -32700
    st, _, body = srv.post([rpc(1, "ping")], session=sid)  # batches are not part of MCP since 2025-06-18
    assert st == 400 and body["error"]["code"] == -32600
    st, _, body = srv.post(rpc(1, "nope"), session=sid)
    assert st == 200 and body["error"]["code"] == -32601
    st, _, _ = srv.post(rpc(1, "ping"), session=sid, Content_Type="text/plain")
    assert st == 415
    st, _, _ = srv.post(rpc(1, "ping"), session=sid, Accept="text/html")
    assert st == 406
    st, _, body = srv.post(rpc(1, "ping"), session=sid, MCP_Protocol_Version="1999-01-01")
    assert st == 400 and body["error"]["code"] == -32600
    st, _, body = srv.post(rpc(1, "ping"), session=sid, MCP_Protocol_Version=VERSION)
    assert st == 200
    st, hd, _ = srv.request("GET", None, {"Mcp-Session-Id": sid})  # no SSE stream is offered
    assert st == 405 and "POST" in hd["Allow"]
    st, _, _ = srv.request("PUT", "{}", {"Mcp-Session-Id": sid})
    assert st == 405
    # A notification and a response are accepted with no body.
    st, _, body = srv.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
    assert st == 202 and body is None
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=WAIT_LIMIT)
    c.request("POST", "/elsewhere", body="{}", headers={"Authorization": "Bearer " + srv.token})
    assert c.getresponse().status == 404
    c.close()
    assert srv.post(rpc(2, "ping"), session=sid)[0] == 200


def test_too_many_sessions(sup, server):
    srv = server("--max-sessions", "2")
    a = srv.initialize()
    srv.initialize()
    st, _, body = srv.post(rpc(0, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                                 "clientInfo": {"name": "t", "version": "1"}}))
    assert st == 503 and body["error"]["code"] == -32000 and "too many sessions" in body["error"]["message"]
    assert srv.request("DELETE", None, {"Mcp-Session-Id": a})[0] == 204
    srv.initialize()


def test_session_call_limit(server):
    srv = server("--session-calls", "1")
    sid = srv.initialize()
    st, _, body = srv.post(tool_call(1, NORTHSTAR), session=sid)
    assert st == 200 and body["result"]["structuredContent"]["value"]["text"] == "8.25"
    st, _, body = srv.post(tool_call(2, NORTHSTAR), session=sid)
    assert st == 200 and body["id"] == 2 and body["error"]["code"] == -32000
    assert "--session-calls" in body["error"]["message"]
    other = srv.initialize()
    assert "result" in srv.post(tool_call(3, NORTHSTAR), session=other)[2]


def test_delete_ends_the_session_and_its_invocation(sup, server):
    srv = server()
    # The server's check at start (a session opened and closed) may not have been seen
    # closing yet: wait until only status's own connection is open.
    before = wait_for(lambda: connections(sup) == 1 and 1, "the supervisor to have no other connection")
    sid = srv.initialize()
    # The session's invocation lives on its own supervisor connection.
    wait_for(lambda: connections(sup) == before + 1, "the session's connection")
    assert srv.request("DELETE", None, {"Mcp-Session-Id": sid})[0] == 204
    srv.wait_log(r"session %s ended \(deleted\)" % sid[:8])
    wait_for(lambda: connections(sup) == before, "the session's connection to close")
    assert srv.post(rpc(1, "ping"), session=sid)[0] == 404


def test_client_gone_mid_call_wedges_nothing(sup, server):
    """A client that hangs up while its call runs: the server goes on serving, and
    ending the session cancels the call."""
    srv = server()
    sid = srv.initialize()
    body = json.dumps(tool_call(1, held())).encode()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT_LIMIT)
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\n"
              b"Mcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s" % (srv.token.encode(), sid.encode(), len(body), body))
    wait_for(lambda: status(sup)["running"] == 1, "the call to run")
    s.close()
    other = srv.initialize()
    assert srv.post(tool_call(2, NORTHSTAR), session=other)[2]["result"]["isError"] is False
    assert srv.post(rpc(3, "ping"), session=sid)[0] == 200
    assert srv.request("DELETE", None, {"Mcp-Session-Id": sid})[0] == 204
    wait_idle(sup)


def test_cancelled_call_answers_its_post(sup, server):
    srv = server()
    sid = srv.initialize()
    result = {}

    def call():
        result["r"] = srv.post(tool_call(7, held()), session=sid)

    t = threading.Thread(target=call)
    t.start()
    wait_for(lambda: status(sup)["running"] == 1, "the call to run")
    st, _, body = srv.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}},
                           session=sid)
    assert st == 202
    t.join(WAIT_LIMIT)
    st, _, body = result["r"]
    assert st == 200 and body["id"] == 7 and body["error"]["code"] == -32800
    wait_idle(sup)


def test_supervisor_lost_ends_its_sessions_not_the_server(token_file):
    """The supervisor goes away while a call runs: the call's POST is answered, the
    session ends (404 from then on), and the server still answers."""
    with running_supervisor() as own:
        srv = HttpServer(own, token_file)
        try:
            sid = srv.initialize()
            result = {}
            t = threading.Thread(target=lambda: result.update(
                r=srv.post(tool_call(1, held()), session=sid)))
            t.start()
            wait_for(lambda: status(own)["running"] == 1, "the call to run")
            assert own.stop() == 0
            t.join(WAIT_LIMIT)
            st, _, body = result["r"]
            # A supervisor stopping cancels its calls and answers them before it closes.
            assert st == 200 and body["id"] == 1, body
            assert body["result"]["isError"] is True and body["result"]["structuredContent"]["outcome"] == "cancelled"
            srv.wait_log(r"session %s ended \(supervisor lost\)" % sid[:8])
            assert srv.post(rpc(2, "ping"), session=sid)[0] == 404
            st, _, body = srv.post(rpc(0, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                                         "clientInfo": {"name": "t", "version": "1"}}))
            assert st == 503 and body["error"]["code"] == -32603  # no supervisor to open a session on
        finally:
            srv.stop()


@pytest.mark.parametrize("problem", ["mode", "short", "missing"])
def test_token_file_is_checked(sup, tmp_path, problem):
    path = tmp_path / "token"
    path.write_text(("x" * 20 if problem == "short" else secrets.token_hex(24)) + "\n")
    os.chmod(path, 0o644 if problem == "mode" else 0o600)
    args = [CLIENT, "--socket", sup.socket, "mcp", "--http", "127.0.0.1:0"]
    if problem != "missing":
        args += ["--token-file", str(path)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_LIMIT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert {"mode": "only its owner can read", "short": "at least 32", "missing": "needs --token-file"}[problem] \
        in out.stderr


def nginx_snippet():
    with open(os.path.join(ROOT, "docs", "deployment.md")) as f:
        doc = f.read()
    m = re.search(r"<!-- nginx-mcp: the test reads the next block -->\n```nginx\n(.*?)```", doc, re.S)
    assert m, "docs/deployment.md has lost its nginx block"
    return m.group(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sdk_through_nginx_tls(sup, server, token_file, tmp_path):
    for tool in ("nginx", "openssl"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            pytest.fail("%s is not installed (scripts/install-deps.sh installs it)" % tool)
    srv = server()
    crt, key = tmp_path / "mcp.crt", tmp_path / "mcp.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True, timeout=WAIT_LIMIT)
    port = free_port()
    block = nginx_snippet()
    block, n1 = re.subn(r"listen 443 ssl;", "listen 127.0.0.1:%d ssl;" % port, block)
    block, n2 = re.subn(r"ssl_certificate /\S+;", "ssl_certificate %s;" % crt, block)
    block, n3 = re.subn(r"ssl_certificate_key /\S+;", "ssl_certificate_key %s;" % key, block)
    block, n4 = re.subn(r"proxy_pass http://127\.0\.0\.1:8080;", "proxy_pass http://127.0.0.1:%d;" % srv.port, block)
    assert (n1, n2, n3, n4) == (1, 1, 1, 1), block
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    conf = prefix / "nginx.conf"
    conf.write_text("daemon off;\nmaster_process off;\npid %s/nginx.pid;\nerror_log stderr;\n"
                    "events {}\nhttp {\n access_log off;\n client_body_temp_path %s/body;\n proxy_temp_path %s/proxy;\n"
                    " fastcgi_temp_path %s/fcgi;\n uwsgi_temp_path %s/uwsgi;\n scgi_temp_path %s/scgi;\n%s}\n"
                    % ((prefix,) * 6 + (block,)))
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    proc = subprocess.Popen([nginx, "-e", "stderr", "-p", str(prefix), "-c", str(conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def listening():
            assert proc.poll() is None, proc.stdout.read().decode()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except ConnectionRefusedError:
                return False

        wait_for(listening, "nginx to listen")
        env = dict(os.environ, NODE_EXTRA_CA_CERTS=str(crt))
        url = "https://127.0.0.1:%d/mcp" % port
        r = sdk(url, token_file, "new", env=env)
        assert r["northstar"]["structuredContent"]["value"]["text"] == "8.25"
        again = sdk(url, token_file, "resume", r["sessionId"], env=env)
        assert again["northstar"]["structuredContent"]["value"]["text"] == "8.25"
        # Without the certificate trusted, the SDK refuses the connection.
        out = subprocess.run(["node", os.path.join(SDK_DIR, "mcp_http_client.mjs"), url, token_file, "new"],
                             capture_output=True, timeout=5 * WAIT_LIMIT)
        assert out.returncode != 0
    finally:
        proc.terminate()
        proc.wait(WAIT_LIMIT)
        proc.stdout.close()


@pytest.mark.parametrize("case", ["no supervisor", "bad address", "port in use", "stray option"])
def test_start_failures_are_said(sup, tmp_path, token_file, case):
    sock, address = sup.socket, "127.0.0.1:0"
    if case == "no supervisor":
        sock = str(tmp_path / "none.sock")
    elif case == "bad address":
        address = "127.0.0.1"
    held = socket.socket()
    if case == "port in use":
        held.bind(("127.0.0.1", 0))
        held.listen()
        address = "127.0.0.1:%d" % held.getsockname()[1]
    args = [CLIENT, "--socket", sock, "mcp", "--http", address, "--token-file", token_file]
    if case == "stray option":
        args = [CLIENT, "--socket", sock, "mcp", "--max-sessions", "2"]  # without --http
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_LIMIT, stdin=subprocess.DEVNULL)
    finally:
        held.close()
    want = {"no supervisor": (12, "cannot connect to the supervisor"), "bad address": (2, "ADDRESS:PORT"),
            "port in use": (2, "cannot listen on"), "stray option": (2, "go with --http")}[case]
    assert (out.returncode, want[1] in out.stderr) == (want[0], True), out.stderr


def test_concurrent_calls_get_their_own_answers(sup, server):
    """Calls running at once in one session, over separate connections: each POST gets
    the result of its own call (answers are routed by JSON-RPC id). The first call
    released finishes first, while the later POST waits on."""
    srv = server()
    sid = srv.initialize()
    results = {}
    codes = {"first": held(after="'first'"), "second": held(after="'second'")}

    def post(name):
        results[name] = srv.post(tool_call(name, codes[name]), session=sid)

    threads = {n: threading.Thread(target=post, args=(n,)) for n in codes}
    threads["first"].start()
    wait_for(lambda: status(sup)["running"] == 1, "the first call to run")
    threads["second"].start()
    # Both confined and running (each with its worker's pid), in the order posted.
    wait_for(lambda: [c["state"] for c in status(sup)["calls"]] == ["running", "running"], "both calls to run")
    first, second = status(sup)["calls"]  # in callId order
    release(first["workerPid"])
    threads["first"].join(WAIT_LIMIT)
    assert "first" in results and "second" not in results, results
    release(second["workerPid"])
    threads["second"].join(WAIT_LIMIT)
    for name in codes:
        st, _, body = results[name]
        assert st == 200 and body["id"] == name, body
        assert body["result"]["structuredContent"]["value"]["text"] == repr(name)


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + b"X-Filler: " + b"a" * 70000 + b"\r\n\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
], ids=["garbage", "huge-header", "short-body", "bad-chunk", "negative-length"])
def test_malformed_http_leaves_the_server_serving(server, raw):
    srv = server()
    sid = srv.initialize()
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT_LIMIT)
    try:
        try:
            s.sendall(raw.replace(b"Host: x\r\n", b"Host: x\r\nAuthorization: Bearer %s\r\n" % srv.token.encode()))
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # refused and closed before it was all sent (EPIPE, ECONNRESET, ENOTCONN)
        # While that connection is open (or after the server closed it: a half-closed
        # one with a body still owed is closed by the HTTP connection timeout), others
        # are served.
        st, _, body = srv.post(rpc(1, "ping"), session=sid)
        assert st == 200 and body["result"] == {}
    finally:
        s.close()
    st, _, body = srv.post(rpc(2, "ping"), session=sid)
    assert st == 200 and body["result"] == {}
