"""Core slice: the codeinterp command-line client, and codeinterpd's own lifecycle
(policy errors at start, SIGTERM while a call runs)."""
import hashlib
import json
import os
import signal
import subprocess
import tempfile

import pytest

from testlib import CLIENT, DAEMON, NORTHSTAR, WAIT_LIMIT, proc, require_sandbox, worker_pids_of

# The command is a client of the protocol: it runs in the reference configuration. The
# supervisor's start and stop paths run against the ASan build (asan), and shutdown
# with a running worker in both start modes (start_mode).


def text(b):
    return b.decode("utf-8")


def printed(out):
    """What a codeinterp command (a CompletedProcess) printed, having exited 0."""
    assert out.returncode == 0, out.stderr
    return text(out.stdout)


# ---- codeinterp exec ----

def test_exec_northstar(shared_supervisor):
    msup = shared_supervisor()
    assert printed(msup.cli("exec", "-c", NORTHSTAR)) == "8.25\n"


def test_exec_prints_stdout_then_value(shared_supervisor):
    msup = shared_supervisor()
    assert printed(msup.cli("exec", "-c", "print('hello')\n6 * 7")) == "hello\n42\n"


def test_exec_suppressed_value_prints_nothing(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "-c", "6 * 7;")
    assert out.returncode == 0
    assert out.stdout == b""


def test_exec_json(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "--json", "-c", NORTHSTAR)
    assert out.returncode == 0, out.stderr
    s = text(out.stdout)
    assert s.endswith("\n") and s.count("\n") == 1  # one object on one line
    obj = json.loads(s)
    assert isinstance(obj, dict)
    assert obj["type"] == "result"
    assert obj["outcome"] == "ok"
    assert obj["result"]["text"] == "8.25"
    assert obj["evidence"]["policy"]["name"] == "code_interpreter"


def test_exec_python_exception(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "-c", "print('before')\n1 / 0")
    assert out.returncode == 1
    assert text(out.stdout) == "before\n"
    err = text(out.stderr)
    assert "Traceback (most recent call last):" in err
    assert "ZeroDivisionError: division by zero" in err
    assert "Traceback" not in text(out.stdout)


def test_exec_python_exception_json(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "--json", "-c", "1 / 0")
    assert out.returncode == 1
    obj = json.loads(text(out.stdout))
    assert obj["outcome"] == "python_exception"
    assert obj["exception"]["type"] == "ZeroDivisionError"


def test_exec_stderr_passes_through(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "-c", "import sys\nprint('to-stderr', file=sys.stderr)")
    assert out.returncode == 0
    assert "to-stderr\n" in text(out.stderr)
    assert out.stdout == b""


def test_exec_timeout(shared_supervisor):
    timeout_sup = shared_supervisor("timeoutMs: 1000\n")
    out = timeout_sup.cli("exec", "-c", "print('spinning', flush=True)\nwhile True:\n    pass")
    assert out.returncode == 3
    assert text(out.stdout) == "spinning\n"
    assert "timeout" in text(out.stderr)


def test_exec_from_file(shared_supervisor):
    msup = shared_supervisor()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(NORTHSTAR)
    try:
        out = msup.cli("exec", f.name)
    finally:
        os.unlink(f.name)
    assert printed(out) == "8.25\n"


def test_exec_from_stdin(shared_supervisor):
    msup = shared_supervisor()
    assert printed(msup.cli("exec", "-", input=NORTHSTAR.encode())) == "8.25\n"


def test_exec_big_output_marks_omission(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "-c", "print('é' * 70000)")
    assert out.returncode == 0, out.stderr
    marker = "[... stdout: 6001 characters (12002 bytes) omitted ...]"
    # The head (48000), the marker on its own line, the tail (15999 + the newline).
    assert text(out.stdout) == "é" * 48000 + "\n" + marker + "\n" + "é" * 15999 + "\n"


def test_exec_invalid_input_exit_status(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("exec", "-c", "   \n")
    assert out.returncode == 6
    assert "invalid_input" in text(out.stderr)


def test_exec_usage_errors(shared_supervisor):
    msup = shared_supervisor()
    assert msup.cli("exec").returncode == 2
    assert msup.cli("exec", "-c", "1", "extra-file").returncode == 2
    assert msup.cli("frobnicate").returncode == 2


def test_exec_keep(shared_supervisor):
    msup = shared_supervisor()
    code = "open('/outputs/a.csv','w').write('x,y\\n1,2\\n')\nopen('/outputs/b c','w').write('z')"
    out = msup.cli("exec", "--keep", "a.csv", "--keep", "gone.txt", "-c", code)
    assert out.returncode == 0, out.stderr
    digest = hashlib.sha256(b"x,y\n1,2\n").hexdigest()
    assert ("codeinterp: kept a.csv as out-1-a.csv (8 bytes, sha256 %s)\n" % digest) in text(out.stderr)
    assert "codeinterp: gone.txt not kept: not_produced\n" in text(out.stderr)
    out = msup.cli("exec", "--keep-all", "--json", "-c", code)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["keptOutputs"] == [
        {"name": "a.csv", "sourceId": "out-1-a.csv", "bytes": 8, "sha256": digest},
        {"name": "b c", "refused": "invalid_name"}]
    out = msup.cli("exec", "--keep-all", "--model-text", "-c", code)
    assert "--- kept outputs (1 kept, 1 refused) ---\n" in text(out.stdout)
    # The command checks the count; the supervisor the names.
    out = msup.cli("exec", *sum((["--keep", "f%d" % i] for i in range(17)), []), "-c", "1")
    assert out.returncode == 2 and "at most 16 --keep" in text(out.stderr)
    out = msup.cli("exec", "--keep", "../x", "-c", "1")
    assert out.returncode == 6 and "keepOutputs[0] is not a name that can be kept" in text(out.stderr)


def test_exec_no_supervisor():
    out = subprocess.run([CLIENT, "--socket", "/nonexistent/ci.sock", "exec",
                          "-c", "1"], capture_output=True, timeout=WAIT_LIMIT)
    assert out.returncode == 12
    assert b"cannot connect" in out.stderr


def test_hello_command(shared_supervisor):
    msup = shared_supervisor()
    out = msup.cli("hello")
    assert out.returncode == 0
    obj = json.loads(text(out.stdout))
    assert obj["protocol"] == 1


# ---- codeinterpd: policy errors at start ----

@pytest.mark.asan
@pytest.mark.parametrize("policy, key", [
    ("maxCals: 10\n", "maxCals"),
    ("timeoutMs: 0\n", "timeoutMs"),
    ("timeoutMs: soon\n", "timeoutMs"),
    ("workerUid: 0\n", "workerUid"),
    ("seccompDenyAction: maybe\n", "seccompDenyAction"),
    ("memoryBytes: [1, 2]\n", "memoryBytes"),
    ("timeoutMs: 1000\ntimeoutMs: 2000\n", "timeoutMs"),
    ("maxCodeCharacters: 10000000\n", "maxCodeCharacters"),  # cross-key: maxMessageBytes too small
])
def test_policy_error_refuses_to_start(policy, key):
    require_sandbox()
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    try:
        sock = os.path.join(d, "ci.sock")
        pol = os.path.join(d, "policy.yaml")
        with open(pol, "w") as f:
            f.write(policy)
        p = subprocess.Popen([DAEMON, "--socket", sock, "--policy", pol], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(timeout=WAIT_LIMIT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("codeinterpd started with an invalid policy")
        assert p.returncode != 0
        assert key in err.decode(errors="replace"), err
        assert not os.path.exists(sock)
    finally:
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)


@pytest.mark.asan
def test_missing_policy_file_refuses_to_start():
    require_sandbox()
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    try:
        sock = os.path.join(d, "ci.sock")
        out = subprocess.run([DAEMON, "--socket", sock, "--policy", os.path.join(d, "absent.yaml")],
                             capture_output=True, timeout=WAIT_LIMIT)
        assert out.returncode != 0
        assert b"absent.yaml" in out.stderr
        assert not os.path.exists(sock)
    finally:
        os.rmdir(d)


# ---- codeinterpd: SIGTERM while a call runs ----

@pytest.mark.asan
@pytest.mark.start_mode
def test_sigterm_cancels_running_call(make_supervisor):
    s = make_supervisor("heartbeatMs: 50\nmaxActiveWorkers: 1\n")
    c = s.connect()
    rid = c.request("execute", summary="sleep", code="print('ready', flush=True)\nimport time\ntime.sleep(30)",
                    sourceIds=[])
    # A second call waits in the queue behind it (one worker at a time).
    queued = c.request("execute", summary="queued", code="import time\ntime.sleep(30)", sourceIds=[])
    # Wait until the code itself is running (its first output has arrived).
    while True:
        m = c.wait(rid, types=("progress", "result", "error"))
        assert m["type"] == "progress", m
        if m["phase"] == "running" and m["stdoutCharacters"] >= 6:
            break
    workers = worker_pids_of(s)
    assert len(workers) == 1
    s.proc.send_signal(signal.SIGTERM)
    r = c.wait(rid, types=("result", "error"))
    assert r["type"] == "result", r
    assert r["outcome"] == "cancelled"
    assert "shutting down" in r["detail"]
    assert r["partial"] is True
    assert r["stdout"]["text"] == "ready\n"
    assert r["timing"]["elapsedMs"] < 30000  # cut short: the code sleeps 30 s
    q = c.wait(queued, types=("result", "error"))
    assert q["type"] == "result" and q["outcome"] == "cancelled", q
    assert q["timing"]["workerStarted"] is False
    assert s.proc.wait(timeout=WAIT_LIMIT) == 0
    assert not os.path.exists(s.socket)
    for pid in set(workers) | {r["exitStatus"].get("pid") or 0} - {0}:
        assert proc.wait_exit(pid), "worker %d survived" % pid


@pytest.mark.asan
def test_sigterm_idle_exits_zero(make_supervisor):
    s = make_supervisor()
    c = s.connect()
    assert c.call("hello")["type"] == "reply"
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=WAIT_LIMIT) == 0
    assert not os.path.exists(s.socket)
    # The open connection is closed, not left hanging.
    assert c.sock.recv(1) == b""


# ---- attachments whose bytes are not text ----

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x00binary"


def test_exec_binary_attachment_without_text(shared_supervisor, tmp_path):
    """An attachment whose bytes are not UTF-8 and that has no --text: its canonical
    text is a one-line description; the original bytes arrive untouched."""
    msup = shared_supervisor()
    f = tmp_path / "chart.png"
    f.write_bytes(PNG)
    code = ("a = input_assets['img']\n"
            "print(open(a['text']).read())\n"
            "print(open(a['original'], 'rb').read() == %r)\n"
            "print(input_files['img'] == a['text'] == '/inputs/img.txt')\n"
            "a['mediaType']" % PNG)
    out = msup.cli("exec", "--json", "--attach", "img=%s:image/png" % f, "-c", code)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["outcome"] == "ok", r
    desc = "[binary attachment: image/png, %d bytes; the original bytes are /inputs/img.original]" % len(PNG)
    assert r["stdout"]["text"] == desc + "\nTrue\nTrue\n"
    assert r["result"]["text"] == "'image/png'"
    inp = r["evidence"]["inputs"][0]
    assert inp["bytes"] == len(desc) and inp["originalBytes"] == len(PNG)


def test_exec_utf8_attachment_is_its_own_text(shared_supervisor, tmp_path):
    msup = shared_supervisor()
    f = tmp_path / "notes.txt"
    f.write_text("héllo\n")
    out = msup.cli("exec", "--attach", "n=%s:text/plain" % f, "-c", "open(input_assets['n']['text']).read()")
    assert printed(out) == "'héllo\\n'\n"


def test_replay_of_a_binary_attachment_is_identical(shared_supervisor, tmp_path):
    msup = shared_supervisor()
    f = tmp_path / "chart.png"
    f.write_bytes(PNG)
    rec = tmp_path / "call.json"
    out = msup.cli("exec", "--json", "--save", str(rec), "--attach", "img=%s:image/png" % f,
                      "-c", "len(open('/inputs/img.original', 'rb').read())")
    assert out.returncode == 0, out.stderr
    again = msup.cli("replay", str(rec))
    assert again.returncode == 0, (again.stdout, again.stderr)


def test_exec_out_of_memory_sends_a_request_whole_or_not_at_all(shared_supervisor, tmp_path):
    """codeinterp exec with a 3.6 MB source under an address-space limit (RLIMIT_AS),
    swept in 1 MiB steps from the least it starts with: it either runs the call with
    the whole source, or stops with a clear "Cannot allocate memory" message and a
    failure status. A request that could not be packed whole (source.put, execute) is
    not sent; before, msgpack's failed writes left holes in the frame it sent. The
    supervisor is unharmed."""
    msup = shared_supervisor()
    import resource
    f = tmp_path / "big.txt"
    f.write_text("abcdefg\n" * (450 << 10))
    code = "len(open('/inputs/big.txt').read())"
    args = [CLIENT, "--socket", msup.socket]

    def limited(mib, *extra):
        def lower():
            resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
        return subprocess.run(args + list(extra), capture_output=True, timeout=WAIT_LIMIT, preexec_fn=lower)

    start = next(m for m in range(1, 256) if limited(m, "hello").returncode == 0)
    kinds = {}
    for mib in range(start, start + 24):
        out = limited(mib, "exec", "--source", "big=%s" % f, "-c", code)
        if out.returncode == 0:
            assert text(out.stdout) == "%d\n" % (450 << 13), out
            kinds.setdefault("ran", []).append(mib)
        else:
            assert out.returncode in (2, 12), out  # usage/input error, or the call could not be made
            assert b"Cannot allocate memory" in out.stderr, out
            kinds.setdefault(out.stderr.split(b":")[1].strip().decode(), []).append(mib)
    assert "ran" in kinds and "source.put failed" in kinds, kinds
    assert msup.cli("exec", "-c", "1").returncode == 0
