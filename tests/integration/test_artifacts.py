"""Artifacts: the files a call leaves in /outputs come back in the result, byte-exact,
with sha256 and a media type sniffed from the content; what does not fit is counted;
odd entries (symlinks, FIFOs, directories, sparse files, bad names, a file still being
written) neither hang nor crash the reader; progress carries only count and size.

Markers: the tmpfs is made by the supervisor and read back by it (asan), mounted by each
start mode's sandbox setup (start_mode) and, rootless, made by a helper and read without
CAP_DAC_OVERRIDE (rootless). The command's handling of what it receives is the client's
(reference configuration only)."""
import hashlib
import os

import pytest

from testlib import CLIENT, DAEMON, ROOTLESS_USER, WAIT_LIMIT, running_supervisor
from testlib.waits import start_held, wait_for

SMALL_POLICY = ("maxArtifacts: 3\nmaxArtifactBytes: 65536\nmaxResultBytes: 65536\n"
                "maxConnectionOutputBytes: 1048576\n")
DISABLED_POLICY = "maxArtifacts: 0\n"

# A 1x1 PNG made with zlib and struct (no imaging library needed in the worker).
PNG_CODE = r"""
import struct, zlib
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(b'\x00\xff\x00\x00')) + chunk(b'IEND', b''))
open('/outputs/dot.png', 'wb').write(png)
len(png)
"""


def run(sup, code, progress=None):
    c = sup.connect()
    try:
        r = c.execute(code, progress=progress)
    finally:
        c.close()
    assert r["type"] == "result", r
    return r


def run_ok(sup, code, progress=None):
    r = run(sup, code, progress)
    assert r["outcome"] == "ok", (r["outcome"], r.get("detail"), r.get("exception"))
    return r


def by_name(r):
    return {a["name"]: a for a in r["artifacts"]}


def check_artifact(a, data, media_type):
    assert a["data"] == data
    assert isinstance(a["data"], bytes)
    assert a["bytes"] == len(data)
    assert a["sha256"] == hashlib.sha256(data).hexdigest()
    assert a["mediaType"] == media_type


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_text_and_binary_byte_exact(shared_supervisor):
    msup = shared_supervisor()
    progress = []
    r = run_ok(msup, "open('/outputs/notes.txt', 'w').write('h\\u00e9llo\\n')\n"
                 "open('/outputs/blob.bin', 'wb').write(bytes(range(256)) * 3)\n"
                 "open('/outputs/fake.png', 'w').write('just text, whatever the name says\\n')\n"
                 "open('/outputs/table.csv', 'w').write('x,y\\n1,2\\n3,4\\n')\n"
                 "open('/outputs/data.json', 'w').write('{\"a\": [1, 2]}')\n"
                 "None", progress)
    assert [a["name"] for a in r["artifacts"]] == sorted(["notes.txt", "blob.bin", "fake.png", "table.csv",
                                                         "data.json"])
    got = by_name(r)
    check_artifact(got["notes.txt"], "h\u00e9llo\n".encode(), "text/plain")
    check_artifact(got["blob.bin"], bytes(range(256)) * 3, "application/octet-stream")
    check_artifact(got["fake.png"], b"just text, whatever the name says\n", "text/plain")
    check_artifact(got["table.csv"], b"x,y\n1,2\n3,4\n", "text/csv")
    check_artifact(got["data.json"], b'{"a": [1, 2]}', "application/json")
    assert r["omittedArtifacts"] == 0 and r["omittedArtifactBytes"] == 0
    # Progress: count and size only, never names or bytes.
    fin = [p for p in progress if p["phase"] == "finished"]
    assert len(fin) == 1
    assert fin[0]["artifacts"] == 5
    assert fin[0]["artifactBytes"] == sum(a["bytes"] for a in r["artifacts"])
    for p in progress:
        flat = repr(p)
        assert "notes" not in flat and "blob" not in flat
        assert set(p) >= {"artifacts", "artifactBytes"}
        assert all(not isinstance(v, (bytes, list, dict)) for v in p.values()), p


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_png_sniffed(shared_supervisor):
    msup = shared_supervisor()
    r = run_ok(msup, PNG_CODE)
    (a,) = r["artifacts"]
    assert a["name"] == "dot.png" and a["mediaType"] == "image/png"
    assert a["data"].startswith(b"\x89PNG\r\n\x1a\n") and a["bytes"] == int(r["result"]["text"])


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_none_written(shared_supervisor):
    msup = shared_supervisor()
    r = run_ok(msup, "1 + 1")
    assert r["artifacts"] == [] and r["omittedArtifacts"] == 0 and r["omittedArtifactBytes"] == 0


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_only_what_is_left_is_seen(shared_supervisor):
    """An /outputs whose only inode is its root is not listed (the supervisor reads the
    tmpfs's inode count first): files written and removed leave nothing; a directory
    left alone, empty, is an entry, so the listing runs and counts it."""
    msup = shared_supervisor()
    gone = "import os\nfor n in ('a.txt', 'b.bin'):\n    open('/outputs/' + n, 'w').write('x' * 5000)\n" \
           "    os.remove('/outputs/' + n)\nos.mkdir('/outputs/d'); os.rmdir('/outputs/d')\nos.listdir('/outputs')"
    r = run_ok(msup, gone)
    assert r["result"]["text"] == "[]"
    assert r["artifacts"] == [] and r["omittedArtifacts"] == 0 and r["omittedArtifactBytes"] == 0
    r = run_ok(msup, "import os\nos.mkdir('/outputs/empty')\nos.listdir('/outputs')")
    assert r["result"]["text"] == "['empty']"
    assert r["artifacts"] == [] and r["omittedArtifacts"] == 1 and r["omittedArtifactBytes"] == 0


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_odd_entries(shared_supervisor):
    """A symlink (to a host path and to a file beside it), a FIFO, a directory with a file
    in it, a 16 MiB sparse file and a name that is not UTF-8: all counted, none followed."""
    msup = shared_supervisor()
    code = r"""
import os
out = {}
open('/outputs/real.txt', 'w').write('real\n')
for name, make in [('link', lambda: os.symlink('/etc/passwd', '/outputs/link')),
                   ('inner', lambda: os.symlink('real.txt', '/outputs/inner')),
                   ('fifo', lambda: os.mkfifo('/outputs/fifo')),
                   ('dir', lambda: (os.mkdir('/outputs/dir'), open('/outputs/dir/x.txt', 'w').write('x'))),
                   ('bad', lambda: open(b'/outputs/bad\xff.txt', 'w').write('bad')),
                   ('ctl', lambda: open('/outputs/ctl\x01', 'w').write('ctl'))]:
    try:
        make()
        out[name] = 'made'
    except OSError as e:
        out[name] = type(e).__name__
with open('/outputs/sparse', 'wb') as f:
    f.truncate(16 << 20)  # maxFileBytes; larger than the 8 MiB budget
sorted(out.items())
"""
    r = run_ok(msup, code)
    made = dict(eval(r["result"]["text"]))
    assert made["link"] == "made" and made["inner"] == "made" and made["dir"] == "made"
    assert made["bad"] == "made" and made["ctl"] == "made"
    # Landlock and the seccomp filter may refuse the FIFO; either way it is not returned.
    assert made["fifo"] in ("made", "PermissionError", "OSError")
    assert [a["name"] for a in r["artifacts"]] == ["real.txt"]
    check_artifact(r["artifacts"][0], b"real\n", "text/plain")
    entries = 6 + (made["fifo"] == "made")  # link, inner, dir, bad, ctl, sparse (+ fifo)
    assert r["omittedArtifacts"] == entries
    assert r["omittedArtifactBytes"] == (16 << 20) + 3 + 3


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_file_still_being_written(shared_supervisor):
    """A thread keeps appending when the code ends; the worker's exit stops it. What is
    returned is consistent: size, bytes and digest agree."""
    msup = shared_supervisor()
    code = r"""
import os, threading, time
f = open('/outputs/growing.log', 'w', buffering=1)
def spin():
    i = 0
    while True:
        f.write('line %d\n' % i)
        i += 1
        time.sleep(0.0005)  # keeps the file well within maxResultBytes
t = threading.Thread(target=spin, daemon=True)
t.start()
while os.path.getsize('/outputs/growing.log') == 0:  # it has written, and goes on
    time.sleep(0.001)
'left running'
"""
    r = run_ok(msup, code)
    (a,) = r["artifacts"]
    assert a["name"] == "growing.log" and a["bytes"] == len(a["data"]) > 0
    assert a["sha256"] == hashlib.sha256(a["data"]).hexdigest()
    assert a["data"].startswith(b"line 0\n")


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_kept_after_timeout():
    """A call killed at its deadline still returns what it wrote. The file must be
    written before the deadline: a machine too slow for that within timeoutMs gets the
    call again with twice the deadline, until it is (the stdout line says so)."""
    timeout_ms = 1500
    while True:
        with running_supervisor("timeoutMs: %d\n" % timeout_ms) as s:
            r = run(s, "open('/outputs/partial.txt', 'w').write('before\\n')\nprint('written', flush=True)\n"
                       "import time\ntime.sleep(3600)")
        assert r["outcome"] == "timeout", r
        if r["stdout"]["text"] == "written\n" or timeout_ms > WAIT_LIMIT * 1000:
            break
        timeout_ms *= 2
    (a,) = r["artifacts"]
    check_artifact(a, b"before\n", "text/plain")


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_too_many_files(shared_supervisor):
    """maxArtifacts + 1 inodes: the fourth file cannot be made, nor a hard link (tmpfs
    charges links to nr_inodes as well). The reader's own count bound, for more names
    than it keeps, is tests/unit/test_artifacts.c (test_collect_bounds)."""
    small = shared_supervisor(SMALL_POLICY)  # three files, 64 KiB, results of 64 KiB
    code = r"""
import os
for n in 'abc':
    open('/outputs/%s.txt' % n, 'w').write(n * 10)
try:
    open('/outputs/d.txt', 'w')
    fourth = 'made'
except OSError as e:
    fourth = e.errno
try:
    os.link('/outputs/c.txt', '/outputs/0-link.txt')
    link = 'made'
except OSError as e:
    link = e.errno
(fourth, link)
"""
    r = run_ok(small, code)
    fourth, link = eval(r["result"]["text"])
    assert fourth == 28 and link == 28  # ENOSPC
    assert [a["name"] for a in r["artifacts"]] == ["a.txt", "b.txt", "c.txt"]
    assert r["omittedArtifacts"] == 0 and r["omittedArtifactBytes"] == 0


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_too_many_bytes(shared_supervisor):
    """The tmpfs is maxArtifactBytes: a write past it fails; a sparse file larger than the
    budget is counted with its size, not read."""
    small = shared_supervisor(SMALL_POLICY)  # three files, 64 KiB, results of 64 KiB
    code = r"""
import errno
try:
    open('/outputs/big.bin', 'wb').write(b'x' * 200000)
    err = None
except OSError as e:
    err = e.errno
import os
os.unlink('/outputs/big.bin')
with open('/outputs/holes.bin', 'wb') as f:
    f.truncate(1 << 20)
open('/outputs/small.txt', 'w').write('fits\n')
err
"""
    r = run_ok(small, code)
    assert r["result"]["text"] == "28"  # ENOSPC
    assert [a["name"] for a in r["artifacts"]] == ["small.txt"]
    assert r["omittedArtifacts"] == 1 and r["omittedArtifactBytes"] == 1 << 20


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_over_max_result_bytes(shared_supervisor):
    """Three 20000-byte files against maxResultBytes 65536: taken in name order while the
    message fits; the rest are counted exactly, never silently dropped."""
    small = shared_supervisor(SMALL_POLICY)  # three files, 64 KiB, results of 64 KiB
    code = r"""
import os
for n in 'abc':
    open('/outputs/%s.bin' % n, 'wb').write(os.urandom(20000))
print('x' * 10000)
"""
    r = run_ok(small, code)
    names = [a["name"] for a in r["artifacts"]]
    assert names == ["a.bin", "b.bin"]
    assert r["omittedArtifacts"] == 1 and r["omittedArtifactBytes"] == 20000
    for a in r["artifacts"]:
        assert a["bytes"] == 20000 and a["sha256"] == hashlib.sha256(a["data"]).hexdigest()
    # The texts keep their place: stdout is whole.
    assert r["stdout"]["omittedCharacters"] == 0


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_result_frame_within_bound(shared_supervisor):
    small = shared_supervisor(SMALL_POLICY)  # three files, 64 KiB, results of 64 KiB
    import msgpack
    c = small.connect()
    try:
        rid = c.request("execute", summary="t", sourceIds=[],
                        code="import os\nfor n in 'abc':\n    open('/outputs/' + n, 'wb').write(os.urandom(21000))\n")
        while True:
            raw = c.recv_raw_frame()
            m = msgpack.unpackb(raw, raw=False)
            if m.get("id") == rid and m.get("type") == "result":
                break
    finally:
        c.close()
    assert len(raw) <= 65536
    assert len(m["artifacts"]) + m["omittedArtifacts"] == 3


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_disabled_has_no_outputs(shared_supervisor):
    disabled = shared_supervisor(DISABLED_POLICY)
    progress = []
    r = run_ok(disabled, r"""
import os
try:
    open('/outputs/x.txt', 'w').write('x')
    what = 'wrote'
except OSError as e:
    what = type(e).__name__
(what, os.listdir('/outputs') if os.path.isdir('/outputs') else None)
""", progress)
    what, listing = eval(r["result"]["text"])
    assert what != "wrote"
    assert listing in (None, [])
    assert r["artifacts"] is None and r["omittedArtifacts"] == 0 and r["omittedArtifactBytes"] == 0
    assert all(p["artifacts"] is None and p["artifactBytes"] is None for p in progress)


def test_matplotlib_savefig():
    """plt.savefig('/outputs/runtime.png') returns a PNG, under packaging/policy-data.yaml
    (the scientific stack, test_datastack.py)."""
    from test_datastack import data_policy, require_stack
    require_stack()
    with running_supervisor(data_policy()) as s:
        r = run_ok(s, "import matplotlib.pyplot as plt\n"
                  "plt.plot([1, 2, 3], [1, 4, 9])\nplt.savefig('/outputs/runtime.png')\n")
    (a,) = r["artifacts"]
    assert a["name"] == "runtime.png" and a["mediaType"] == "image/png"
    assert a["data"].startswith(b"\x89PNG\r\n\x1a\n")
    assert a["bytes"] == len(a["data"]) and a["sha256"] == hashlib.sha256(a["data"]).hexdigest()


# ---- codeinterp exec --save-artifacts / --json ----

SAVE_CODE = ("open('/outputs/plot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(range(40)))\n"
             "open('/outputs/notes.txt', 'w').write('n\\n')\n")


def test_cli_save_artifacts(shared_supervisor, tmp_path):
    msup = shared_supervisor()
    out = tmp_path / "out"
    out.mkdir()
    r = msup.cli("exec", "--save-artifacts", str(out), "-c", SAVE_CODE)
    assert r.returncode == 0, r.stderr
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    assert (out / "plot.png").read_bytes() == png
    assert (out / "notes.txt").read_bytes() == b"n\n"
    err = r.stderr.decode()
    assert "saved %s/plot.png (image/png, %d bytes, sha256 %s)" % (out, len(png), hashlib.sha256(png).hexdigest()) \
        in err
    # Never over an existing file: the second run refuses both, exit 13, files unchanged.
    r = msup.cli("exec", "--save-artifacts", str(out), "-c", SAVE_CODE.replace("'n", "'changed"))
    assert r.returncode == 13, r.stderr
    assert r.stderr.decode().count("File exists") == 2
    assert (out / "notes.txt").read_bytes() == b"n\n"


def test_cli_save_artifacts_never_follows_a_symlink(shared_supervisor, tmp_path):
    msup = shared_supervisor()
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "target"
    (out / "notes.txt").symlink_to(target)
    r = msup.cli("exec", "--save-artifacts", str(out), "-c", SAVE_CODE)
    assert r.returncode == 13
    assert not target.exists()
    assert (out / "plot.png").exists()


def test_cli_save_artifacts_bad_dir(shared_supervisor, tmp_path):
    msup = shared_supervisor()
    r = msup.cli("exec", "--save-artifacts", str(tmp_path / "missing"), "-c", SAVE_CODE)
    assert r.returncode == 2 and b"cannot open the artifacts directory" in r.stderr


def test_cli_json_carries_base64_and_digests(shared_supervisor):
    msup = shared_supervisor()
    import base64
    import json
    r = msup.cli("exec", "--json", "-c", SAVE_CODE)
    assert r.returncode == 0
    m = json.loads(r.stdout)
    got = {a["name"]: a for a in m["artifacts"]}
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
    assert base64.b64decode(got["plot.png"]["data"]) == png
    assert got["plot.png"]["sha256"] == hashlib.sha256(png).hexdigest()
    assert got["plot.png"]["mediaType"] == "image/png" and got["plot.png"]["bytes"] == len(png)
    assert m["omittedArtifacts"] == 0


def fake_result(artifacts):
    """A result as the supervisor would send it, with these artifacts (forged)."""
    return {"type": "result", "callId": 1, "outcome": "ok", "limit": None, "detail": None, "partial": False,
            "stdout": None, "stderr": None, "result": None, "exception": None, "elapsedMs": 1,
            "artifacts": artifacts, "omittedArtifacts": 0, "omittedArtifactBytes": 0}


def run_against_fake(tmp_path, messages, *args):
    """codeinterp exec against a fake supervisor that answers with messages."""
    import socket
    import subprocess
    import threading
    import msgpack
    import struct
    path = str(tmp_path / "fake.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(WAIT_LIMIT)

    def serve():
        conn, _ = server.accept()
        with conn:
            hdr = conn.recv(4, socket.MSG_WAITALL)
            body = conn.recv(struct.unpack(">I", hdr)[0], socket.MSG_WAITALL)
            rid = msgpack.unpackb(body, raw=False)["id"]
            for m in messages:
                b = msgpack.packb(dict(m, id=rid), use_bin_type=True)
                conn.sendall(struct.pack(">I", len(b)) + b)
            conn.recv(1)

    t = threading.Thread(target=serve)
    t.start()
    try:
        return subprocess.run([CLIENT, "--socket", path, "exec"] + list(args) + ["-c", "1"],
                              capture_output=True, timeout=WAIT_LIMIT)
    finally:
        t.join(WAIT_LIMIT)
        server.close()


def test_cli_refuses_names_that_escape_and_wrong_digests(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    good = b"fine\n"

    def art(name, data, sha=None):
        return {"name": name, "mediaType": "text/plain", "bytes": len(data),
                "sha256": sha or hashlib.sha256(data).hexdigest(), "data": data}
    r = run_against_fake(tmp_path, [fake_result([art("../escape.txt", b"x"), art("..", b"x"), art("", b"x"),
                                                 art("bad\x1b.txt", b"x"), art("wrong.txt", b"x", "0" * 64),
                                                 art("ok.txt", good)])],
                         "--save-artifacts", str(out))
    assert r.returncode == 13, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ok.txt"]
    assert (out / "ok.txt").read_bytes() == good
    assert not (tmp_path / "escape.txt").exists()
    err = r.stderr.decode()
    assert err.count("could leave") == 4 and err.count("malformed") == 1
    assert "\x1b" not in err


def guidance(sup):
    c = sup.connect()
    try:
        r = c.call("describe")
    finally:
        c.close()
    assert r["type"] == "reply", r
    return r["tool"]["guidance"]


@pytest.mark.asan
def test_guidance_names_outputs_only_when_the_policy_has_it(shared_supervisor):
    disabled = shared_supervisor(DISABLED_POLICY)
    msup = shared_supervisor()
    on = guidance(msup)
    assert "write it to /outputs (top level, at most 16 files and 8388608 bytes in all)" in on
    assert "files handed back" not in on
    off = guidance(disabled)
    assert "/outputs" not in off and "and files handed back after the call." in off


def test_cli_partly_written_file_is_removed(tmp_path):
    """A directory that fills up while an artifact is written (a 16 KiB tmpfs): the
    command says so, exits 13, and leaves no truncated file behind."""
    import subprocess
    out = tmp_path / "small"
    out.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(out)], check=True)
    try:
        big = bytes(range(256)) * 400  # 100 KiB
        small = b"fits\n"
        r = run_against_fake(tmp_path, [fake_result([
            {"name": "big.bin", "mediaType": "application/octet-stream", "bytes": len(big),
             "sha256": hashlib.sha256(big).hexdigest(), "data": big},
            {"name": "small.txt", "mediaType": "text/plain", "bytes": len(small),
             "sha256": hashlib.sha256(small).hexdigest(), "data": small}])],
            "--save-artifacts", str(out))
        assert r.returncode == 13, r.stderr
        assert b'cannot save artifact "big.bin"' in r.stderr and b"No space left on device" in r.stderr
        assert sorted(p.name for p in out.iterdir()) == ["small.txt"]
    finally:
        subprocess.run(["umount", str(out)], check=True)


@pytest.mark.rootless
def test_check_config_reports_outputs():
    """As the suite's user: root, or rootless (where the mount comes from a helper)."""
    import shutil
    import subprocess
    import tempfile
    prefix = []
    if ROOTLESS_USER:
        prefix = ["setpriv", "--reuid", ROOTLESS_USER, "--regid", ROOTLESS_USER, "--clear-groups", "--"]
    out = subprocess.run(prefix + [DAEMON, "--check-config"], capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert "/outputs tmpfs: can be made (16 files, 8388608 bytes)" in out.stdout, out.stdout
    d = tempfile.mkdtemp(prefix="codeinterp-test-")  # readable by that user (0755, 0644)
    try:
        os.chmod(d, 0o755)
        p = os.path.join(d, "p.yaml")
        with open(p, "w") as f:
            f.write("maxArtifacts: 0\n")
        os.chmod(p, 0o644)
        out = subprocess.run(prefix + [DAEMON, "--check-config", "--policy", p], capture_output=True, text=True,
                             timeout=WAIT_LIMIT)
    finally:
        shutil.rmtree(d)
    assert "/outputs tmpfs: off (maxArtifacts: 0)" in out.stdout, out.stdout


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_running_progress_counts_what_exists(shared_supervisor):
    """While the code runs, progress reads the tmpfs's own counters: entries and the
    bytes allocated (whole pages), no names. The code holds after making two entries
    until a heartbeat has counted them."""
    sup = shared_supervisor("heartbeatMs: 50\n")
    call = start_held(sup, before="open('/outputs/early.txt', 'w').write('x' * 5000)\nimport os\n"
                                  "os.mkdir('/outputs/d')")
    progress = []

    def counted():
        m = call.conn.wait(call.rid, types=("progress", "result", "error"))
        assert m["type"] == "progress", m
        progress.append(m)
        return m["phase"] == "running" and m["artifacts"] == 2

    wait_for(counted, "a heartbeat counting the two entries")
    running = [p for p in progress if p["phase"] == "running"]
    assert all(p["artifacts"] <= 2 for p in running if p["artifacts"] is not None), running
    assert running[-1]["artifactBytes"] >= 8192, running[-1]
    call.release()
    r = call.result(progress)
    assert r["outcome"] == "ok", r
    fin = [p for p in progress if p["phase"] == "finished"][0]
    assert fin["artifacts"] == 2 and fin["artifactBytes"] == 5000
