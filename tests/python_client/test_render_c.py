"""The Python rendering against the C one (libcodeinterp, `codeinterp exec --model-text
--cards`), on the same messages: results and progress recorded from a real supervisor,
some edited into outcomes that are hard to provoke, replayed to the C client by a fake
supervisor. Skips when that codeinterp has no --model-text. The C client is
$CODEINTERP_CLI, else $CODEINTERP_BUILD/bin/codeinterp."""
import os
import socket
import subprocess
import tempfile
import threading

import pytest

from codeinterp import Result
from codeinterp.connection import Connection, encode_frame
from codeinterp.errors import error_from_message
from codeinterp.records import Progress, from_wire
from suite import SMALL_POLICY
from testlib import WAIT_LIMIT

CLI = os.environ.get("CODEINTERP_CLI") or os.path.join(os.environ["CODEINTERP_BUILD"], "bin", "codeinterp")


@pytest.fixture(scope="module")
def cli():
    try:
        helptext = subprocess.run([CLI, "exec", "--help"], capture_output=True, timeout=WAIT_LIMIT)
    except OSError as e:
        pytest.skip("no codeinterp client: %s" % e)
    if b"--model-text" not in helptext.stdout + helptext.stderr:
        pytest.skip("%s has no --model-text (the C renderer is not on this branch yet)" % CLI)
    return CLI


def c_render(cli, messages):
    """Run `codeinterp exec --model-text --cards` against a fake supervisor that answers
    its execute with messages (their ids set to the request's); returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fake.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        server.settimeout(WAIT_LIMIT)

        def serve():
            with Connection.from_socket(server.accept()[0]) as conn:
                rid = conn.recv()["id"]
                conn.send_raw(b"".join(encode_frame(dict(m, id=rid)) for m in messages))
                try:
                    conn.recv()  # until the client goes
                except EOFError:
                    pass

        t = threading.Thread(target=serve)
        t.start()
        try:
            out = subprocess.run([cli, "--socket", path, "exec", "--model-text", "--cards", "-c", "1"],
                                 capture_output=True, timeout=WAIT_LIMIT)
        finally:
            t.join(30)
            server.close()
    return out.stdout.decode(), out.stderr.decode()


def recorded(client, small_client):
    """(progress messages, result) pairs from real calls, plus edited results."""
    calls = []

    def run(c, code):
        progress = []
        r = c.execute(code, "render", on_progress=progress.append)
        calls.append(([p.raw for p in progress], dict(r.raw)))
        return calls[-1][1]

    run(client, "sum([9.0, 7.5]) / 2")
    run(client, "x = 1")
    run(client, "import os, sys\nprint('out')\nsys.stderr.write('err')\nsys.stderr.flush()\nos.write(1, b'\\xff')\n'v'")
    run(client, "print('before')\n{}['missing']")
    run(client, "raise ValueError()")
    run(client, "class \u00c4rger(Exception): pass\nraise \u00c4rger('\u00fcbel')")
    files = run(client, "open('/outputs/plot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(40))\n"
                        "open('/outputs/t.txt', 'w').write('x')\nimport os\nos.mkdir('/outputs/d')\nprint('saved')")
    # A forged name and media type are not copied into the text.
    forged = [dict(a) for a in files["artifacts"]]
    forged[0].update(name="evil\x1b[2Jname", mediaType="text/html; x")
    calls.append(([], dict(files, artifacts=forged)))
    # Kept outputs: kept, refused, and forged entries (a name, an ID, a digest, a reason
    # that are not what the supervisor sends show as "?").
    with client.invocation() as inv:
        progress = []
        r = inv.execute("open('/outputs/t.csv', 'w').write('a,b\\n1,2\\n')\nopen('/outputs/a b', 'w').write('x')",
                        "render", on_progress=progress.append, keep_outputs="all")
        kept = dict(r.raw)
        assert [k.refused for k in r.kept_outputs or ()] == ["invalid_name", None], r.kept_outputs
        calls.append(([p.raw for p in progress], kept))
        r = inv.execute("print(open('/inputs/out-1-t.csv').read())", "render", ["out-1-t.csv"],
                        keep_outputs=["none.txt"])
        calls.append(([], dict(r.raw)))
    calls.append(([], dict(kept, keptOutputs=[
        {"name": "evil\x1b[2J", "sourceId": "out-1-x\nid", "bytes": 3, "sha256": "not hex"},
        {"name": "t.csv", "refused": "because\nI said so"},
        {"name": "t.csv", "refused": None, "sourceId": "out-1-t.csv", "bytes": 1, "sha256": "a" * 64}])))
    calls.append(([], dict(kept, keptOutputs=[])))
    run(small_client, "print(''.join(str(i % 10) for i in range(300)), end='')\n'\u00e9' * 150")
    run(small_client, "print('x' * 99)\nprint('\u00e9' * 300)")
    # The code ending its own process: an exit status, a crash (a forced SIGSEGV).
    run(client, "import os\nprint('bye', flush=True)\nos._exit(3)")
    run(client, "import os\nos.abort()")
    timeout = run(small_client, "import time\nprint('working', flush=True)\ntime.sleep(60)")
    for edit in ({"outcome": "cancelled", "detail": "cancelled while running"},
                 {"outcome": "worker_error", "detail": "the worker died from signal 31", "partial": True,
                  "workerError": {"stage": "seccomp", "errno": 1}},
                 {"outcome": "worker_error", "detail": "killed by the seccomp filter (a denied system call)",
                  "partial": True, "workerError": None,
                  "exitStatus": dict(timeout["exitStatus"] or {}, code=None, signal=31)},
                 {"outcome": "worker_error", "detail": "the worker exited with status 3 without a result",
                  "partial": True, "workerError": None, "exitStatus": dict(timeout["exitStatus"] or {}, code=None,
                                                                          signal=9)},
                 {"outcome": "resource_limit", "limit": "cpu", "detail": "CPU time limit (30 s) reached",
                  "partial": False},
                 {"outcome": "not-an-outcome", "limit": "not-a-limit", "partial": False}):
        calls.append(([], dict(timeout, **edit)))
    return calls


def test_model_text_and_cards_match_the_c_renderer(cli, shared_supervisor):
    client = shared_supervisor().client()
    small_client = shared_supervisor(SMALL_POLICY).client()
    for progress, raw in recorded(client, small_client):
        r = from_wire(Result, raw)
        out, err = c_render(cli, progress + [raw])
        assert out == r.model_text(), (out, r.model_text())
        cards = [from_wire(Progress, p).card() for p in progress] + [r.card()]
        assert err.splitlines() == cards


@pytest.mark.parametrize("code,message", [
    ("invalid_input", "code has 17 characters, more than maxCodeCharacters (10)"),
    ("unavailable_source", "sourceIds[0] is not available to this call"),
    ("quota_exhausted", "the invocation has spent its 10 calls"),
    ("permission_denied", "peer uid 1000 is not allowed"),
    ("something_new", "a code this client does not know"),
])
def test_rejection_text_matches_the_c_renderer(cli, code, message):
    m = {"id": 1, "type": "error", "code": code, "message": message}
    out, _ = c_render(cli, [m])
    assert out == error_from_message(m).model_text()
