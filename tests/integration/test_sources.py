"""Invocations, the source registry and call quotas: read -> ID -> mount.

The chapter's sequence: invocation.open gives an ID, source.put registers bytes under
a source ID, execute names the IDs and the worker finds them under /inputs. Every
rejection happens before admission: no quota spent, no worker started.

The registry and quotas are the supervisor's (asan, the whole module); what a worker
finds under /inputs is mounted by each start mode's sandbox setup, also rootless
(start_mode, rootless: the tests that look there)."""
import hashlib
import json
import time

import msgpack
import pytest

from testlib import ok, raw_frame, sha, wait_idle, worker_pids_of
from testlib.waits import start_held

pytestmark = pytest.mark.asan

NORTHSTAR_CSV = "prototype,measured_runtime_hours\nA,9\nB,7.5\n"
NORTHSTAR_ORIGIN = "workbook.xlsx#Sheet1"

MEAN_FROM_CSV = """import csv
with open(input_files[%r], newline="") as f:
    rows = list(csv.DictReader(f))
measured_runtime_hours = [float(row["measured_runtime_hours"]) for row in rows]
sum(measured_runtime_hours) / len(measured_runtime_hours)
"""

# Prints what the worker sees: the two globals, the /inputs listing and a digest of
# every file (through the globals as well as through the listing).
PROBE = r"""import hashlib, json, os, stat
def _h(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
_listing = sorted(os.listdir("/inputs"))
print(json.dumps({
    "files": input_files,
    "assets": input_assets,
    "listing": _listing,
    "text_sha": {k: _h(v) for k, v in input_files.items()},
    "original_sha": {k: _h(v["original"]) for k, v in input_assets.items()},
    "asset_text_sha": {k: _h(v["text"]) for k, v in input_assets.items()},
    "stat": {n: [os.stat("/inputs/" + n).st_size, stat.S_IMODE(os.stat("/inputs/" + n).st_mode)]
             for n in _listing},
}, sort_keys=True))
"""

UNAVAILABLE_0 = "sourceIds[0] is not available to this call"


# ---- protocol helpers ----

def open_inv(c):
    r = c.call("invocation.open")
    assert r["type"] == "reply" and r["op"] == "invocation.open", r
    inv = r["invocation"]
    assert isinstance(inv, str) and len(inv) == 32 and all(ch in "0123456789abcdef" for ch in inv), inv
    return inv


def close_inv(c, inv):
    r = c.call("invocation.close", invocation=inv)
    assert r["type"] == "reply" and r["op"] == "invocation.close", r
    return r


def put_read(c, inv, sid, text, origin=None, expect="reply"):
    fields = {"invocation": inv, "sourceId": sid, "kind": "read_source", "text": text}
    if origin is not None:
        fields["origin"] = origin
    r = c.call("source.put", **fields)
    check_put(r, expect)
    if expect == "reply":
        data = text.encode("utf-8")
        assert r["sourceId"] == sid and r["kind"] == "read_source", r
        assert r["bytes"] == len(data) and r["sha256"] == sha(data), r
        assert "originalSha256" not in r
    return r


def put_attach(c, inv, sid, text, original, media_type="application/octet-stream", file_name="file.bin",
               expect="reply"):
    r = c.call("source.put", invocation=inv, sourceId=sid, kind="attachment", text=text, original=original,
               mediaType=media_type, fileName=file_name)
    check_put(r, expect)
    if expect == "reply":
        assert r["sourceId"] == sid and r["kind"] == "attachment", r
        assert r["bytes"] == len(text.encode("utf-8")) and r["sha256"] == sha(text), r
        assert r["originalBytes"] == len(original) and r["originalSha256"] == sha(original), r
    return r


def check_put(r, expect):
    if expect == "reply":
        assert r["type"] == "reply" and r["op"] == "source.put", r
    else:
        assert r["type"] == "error" and r["code"] == expect, r


def counters(c):
    r = c.call("status")
    assert r["type"] == "reply", r
    return r["admittedTotal"], r["startedTotal"]


def run_ok(c, code, source_ids=(), invocation=None):
    return ok(c.execute(code, source_ids, invocation))


def probe(c, source_ids=(), invocation=None):
    r = run_ok(c, PROBE, source_ids, invocation)
    return json.loads(r["stdout"]["text"]), r


def rejected(c, expected, code="1 + 1", source_ids=(), invocation=None):
    """An execute that must be answered with an error before admission: no progress,
    no admitted call, no worker started."""
    before = counters(c)
    progress = []
    r = c.execute(code, source_ids, invocation, progress=progress)
    assert r["type"] == "error", r
    assert r["code"] == expected, r
    assert progress == [], progress
    assert counters(c) == before, "a rejected call was admitted or started a worker"
    return r


def raw_call(c, msg, replace=()):
    """Send msg with byte substitutions in its encoding (to craft what msgpack-python
    will not pack, e.g. a str that is not UTF-8)."""
    rid = c.next_id
    c.next_id += 1
    body = msgpack.packb(dict(msg, id=rid), use_bin_type=True)
    for old, new in replace:
        assert body.count(old) == 1 and len(old) == len(new)
        body = body.replace(old, new)
    c.send_raw(raw_frame(body))
    return c.wait(rid)


# ---- supervisors (one per policy, shared by the module) ----

QUOTA_POLICY = "maxCalls: 3\ntimeoutMs: 1500\n"
TTL_POLICY = "invocationIdleTtlMs: 1000\n"
BOUNDS_POLICY = ("maxSourceBytes: 100\nmaxSourcesPerInvocation: 3\nmaxInvocationBytes: 250\n"
                 "maxInvocationsPerConnection: 2\n")


# ---- the chapter's sequence ----

@pytest.mark.start_mode
@pytest.mark.rootless
def test_northstar_workbook_end_to_end(c):
    r = c.call("invocation.open")
    assert r["type"] == "reply", r
    inv = r["invocation"]
    assert len(inv) == 32 and inv == inv.lower() and int(inv, 16) >= 0
    assert r["maxCalls"] == 10 and r["idleTtlMs"] == 3600000
    assert open_inv(c) != inv, "invocation IDs must not repeat"

    put = put_read(c, inv, "runtimes", NORTHSTAR_CSV, origin=NORTHSTAR_ORIGIN)
    data = NORTHSTAR_CSV.encode()
    assert put["sha256"] == hashlib.sha256(data).hexdigest()

    r = run_ok(c, MEAN_FROM_CSV % "runtimes", ["runtimes"], inv)
    assert r["result"]["text"] == "8.25"
    assert r["stdout"]["text"] == "" and r["exception"] is None
    assert r["evidence"]["inputs"] == [
        {"sourceId": "runtimes", "kind": "read_source", "bytes": len(data), "sha256": sha(data)}]
    # The text file is the registered text, byte for byte.
    r = run_ok(c, "open(input_files['runtimes'], 'rb').read()", ["runtimes"], inv)
    assert r["result"]["text"] == repr(data)


@pytest.mark.start_mode
@pytest.mark.rootless
def test_anonymous_call_runs_and_sees_nothing(c):
    seen, r = probe(c)
    assert seen["files"] == {} and seen["assets"] == {} and seen["listing"] == []
    assert r["evidence"]["inputs"] == []


def test_source_ids_without_invocation_are_unavailable(c):
    inv = open_inv(c)
    put_read(c, inv, "runtimes", NORTHSTAR_CSV)
    # Registered on this connection, but the call names no invocation.
    r = rejected(c, "unavailable_source", MEAN_FROM_CSV % "runtimes", ["runtimes"])
    assert r["message"] == UNAVAILABLE_0


# ---- attachments and the /inputs mount ----

ORIGINAL = b"\x00\xffPK\x03\x04\x14\x00\x06\x00" + bytes(range(256)) + b"\r\n\x80\xfe\x00end"
CANONICAL = "prototype,measured_runtime_hours\r\nA,9\nÉ,7.5\n\u2603\n"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.mark.start_mode
@pytest.mark.rootless
def test_attachment_original_and_text_are_byte_identical(c):
    inv = open_inv(c)
    put_attach(c, inv, "wb.xlsx", CANONICAL, ORIGINAL, XLSX, "Northstar workbook.xlsx")
    seen, r = probe(c, ["wb.xlsx"], inv)
    assert seen["files"] == {"wb.xlsx": "/inputs/wb.xlsx.txt"}
    assert seen["assets"] == {"wb.xlsx": {"text": "/inputs/wb.xlsx.txt", "original": "/inputs/wb.xlsx.original",
                                          "mediaType": XLSX}}
    assert seen["listing"] == ["wb.xlsx.original", "wb.xlsx.txt"]
    assert seen["original_sha"] == {"wb.xlsx": sha(ORIGINAL)}
    assert seen["text_sha"] == {"wb.xlsx": sha(CANONICAL)}
    assert seen["asset_text_sha"] == {"wb.xlsx": sha(CANONICAL)}
    assert seen["stat"] == {"wb.xlsx.original": [len(ORIGINAL), 0o444],
                            "wb.xlsx.txt": [len(CANONICAL.encode()), 0o444]}
    assert r["evidence"]["inputs"] == [{
        "sourceId": "wb.xlsx", "kind": "attachment",
        "bytes": len(CANONICAL.encode()), "sha256": sha(CANONICAL),
        "originalBytes": len(ORIGINAL), "originalSha256": sha(ORIGINAL), "mediaType": XLSX}]
    # And the very bytes, not only their digest.
    r = run_ok(c, "open(input_assets['wb.xlsx']['original'], 'rb').read()", ["wb.xlsx"], inv)
    assert r["result"]["text"] == repr(ORIGINAL)
    r = run_ok(c, "open(input_files['wb.xlsx'], encoding='utf-8', newline='').read()", ["wb.xlsx"], inv)
    assert r["result"]["text"] == repr(CANONICAL)


def test_original_may_be_sent_as_str(c):
    inv = open_inv(c)
    r = c.call("source.put", invocation=inv, sourceId="notes", kind="attachment", text="canonical",
               original="orig\u00e9", mediaType="text/plain", fileName="notes.txt")
    assert r["type"] == "reply" and r["originalSha256"] == sha("orig\u00e9"), r
    seen, _ = probe(c, ["notes"], inv)
    assert seen["original_sha"] == {"notes": sha("orig\u00e9")}


@pytest.mark.start_mode
@pytest.mark.rootless
def test_empty_sources_mount_as_empty_files(c):
    inv = open_inv(c)
    put_read(c, inv, "empty", "")
    put_attach(c, inv, "blank", "", b"", "application/octet-stream", "blank")
    seen, r = probe(c, ["empty", "blank"], inv)
    assert seen["listing"] == ["blank.original", "blank.txt", "empty.txt"]
    assert seen["text_sha"] == {"empty": sha(b""), "blank": sha(b"")}
    assert [i["bytes"] for i in r["evidence"]["inputs"]] == [0, 0]


@pytest.mark.start_mode
@pytest.mark.rootless
def test_only_the_calls_sources_are_mounted(c):
    inv = open_inv(c)
    put_read(c, inv, "alpha", "alpha text\n", origin="https://example.org/a")
    put_attach(c, inv, "beta", "beta text\n", b"\xffbeta original", "text/csv", "beta.csv")
    put_read(c, inv, "gamma", "gamma text\n")

    seen, r = probe(c, ["beta"], inv)
    assert seen["listing"] == ["beta.original", "beta.txt"]
    assert seen["files"] == {"beta": "/inputs/beta.txt"}
    assert list(seen["assets"]) == ["beta"] and seen["assets"]["beta"]["mediaType"] == "text/csv"
    assert [i["sourceId"] for i in r["evidence"]["inputs"]] == ["beta"]

    seen, r = probe(c, ["gamma", "alpha"], inv)
    assert seen["listing"] == ["alpha.txt", "gamma.txt"]
    assert seen["files"] == {"alpha": "/inputs/alpha.txt", "gamma": "/inputs/gamma.txt"}
    assert seen["assets"] == {}
    assert seen["text_sha"] == {"alpha": sha("alpha text\n"), "gamma": sha("gamma text\n")}
    # evidence.inputs follows the order of sourceIds.
    assert [i["sourceId"] for i in r["evidence"]["inputs"]] == ["gamma", "alpha"]
    assert [i["kind"] for i in r["evidence"]["inputs"]] == ["read_source", "read_source"]

    # In the invocation but naming nothing: nothing mounted.
    seen, r = probe(c, [], inv)
    assert seen["listing"] == [] and seen["files"] == {} and seen["assets"] == {}
    assert r["evidence"]["inputs"] == []


@pytest.mark.start_mode
@pytest.mark.rootless
def test_four_sources_and_longest_id(c):
    inv = open_inv(c)
    long_id = "L" * 63 + "x"  # 64 characters: the maximum
    ids = ["s1", "s_2", "s-3", long_id]
    for i, sid in enumerate(ids):
        put_attach(c, inv, sid, "text %d" % i, b"\x00orig %d" % i, "application/x-test", "f%d" % i)
    seen, r = probe(c, ids, inv)
    assert seen["listing"] == sorted([sid + ".txt" for sid in ids] + [sid + ".original" for sid in ids])
    assert seen["original_sha"] == {sid: sha(b"\x00orig %d" % i) for i, sid in enumerate(ids)}
    assert [i["sourceId"] for i in r["evidence"]["inputs"]] == ids


@pytest.mark.start_mode
@pytest.mark.rootless
def test_large_source_is_mounted_intact(c):
    inv = open_inv(c)
    line = "prototype-%06d,%d.5\n"
    text = "".join(line % (i, i % 97) for i in range(150000))  # ~2.8 MB, under maxSourceBytes
    data = text.encode()
    assert len(data) < 4194304
    put_read(c, inv, "big", text)
    seen, r = probe(c, ["big"], inv)
    assert seen["text_sha"] == {"big": sha(data)}
    assert seen["stat"]["big.txt"][0] == len(data)
    assert r["evidence"]["inputs"][0]["bytes"] == len(data)


@pytest.mark.start_mode
@pytest.mark.rootless
def test_mounted_copies_are_read_only(c):
    inv = open_inv(c)
    put_attach(c, inv, "wb", CANONICAL, ORIGINAL, "text/csv", "wb.csv")
    before = sha(CANONICAL)

    # Overwrite, uncaught: the call fails with the OS's refusal.
    r = c.execute("open(input_files['wb'], 'w').write('tampered')", ["wb"], inv)
    assert r["type"] == "result" and r["outcome"] == "python_exception", r
    assert r["exception"]["type"] in ("PermissionError", "OSError"), r["exception"]
    # Delete, uncaught.
    r = c.execute("import os\nos.remove(input_assets['wb']['original'])", ["wb"], inv)
    assert r["type"] == "result" and r["outcome"] == "python_exception", r
    assert r["exception"]["type"] in ("PermissionError", "OSError"), r["exception"]

    # Every other way of changing /inputs, caught and reported.
    attempts = r"""import errno, json, os
results = {}
def attempt(name, f):
    try:
        f()
        results[name] = "succeeded"
    except OSError as e:
        results[name] = errno.errorcode.get(e.errno, str(e.errno))
p = input_files["wb"]
o = input_assets["wb"]["original"]
attempt("truncate", lambda: open(p, "r+b").truncate(0))
attempt("append", lambda: open(o, "ab").write(b"x"))
attempt("unlink", lambda: os.unlink(p))
attempt("rename", lambda: os.rename(p, "/inputs/other.txt"))
attempt("chmod", lambda: os.chmod(p, 0o666))
attempt("create", lambda: open("/inputs/new.txt", "w").write("x"))
attempt("mkdir", lambda: os.mkdir("/inputs/d"))
attempt("symlink", lambda: os.symlink("/tmp", "/inputs/link"))
results["ST_RDONLY"] = bool(os.statvfs("/inputs").f_flag & os.ST_RDONLY)
print(json.dumps(results, sort_keys=True))
"""
    r = run_ok(c, attempts, ["wb"], inv)
    results = json.loads(r["stdout"]["text"])
    assert results.pop("ST_RDONLY") is True, "/inputs is not mounted read-only"
    assert len(results) == 8
    for name, outcome in results.items():
        assert outcome in ("EROFS", "EACCES", "EPERM"), (name, outcome)

    # The next call's view is unchanged.
    seen, r = probe(c, ["wb"], inv)
    assert seen["text_sha"] == {"wb": before}
    assert seen["original_sha"] == {"wb": sha(ORIGINAL)}
    assert seen["listing"] == ["wb.original", "wb.txt"]
    assert r["evidence"]["inputs"][0]["sha256"] == before


@pytest.mark.start_mode
@pytest.mark.rootless
def test_writes_to_tmp_do_not_leak_into_the_next_call(c):
    inv = open_inv(c)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    run_ok(c, "import shutil\nshutil.copyfile(input_files['wb'], '/tmp/copy.txt')\n"
              "open('/tmp/copy.txt', 'a').write('C,1000\\n')", ["wb"], inv)
    r = run_ok(c, "import os\n(os.path.exists('/tmp/copy.txt'), open(input_files['wb']).read())", ["wb"], inv)
    assert r["result"]["text"] == repr((False, NORTHSTAR_CSV))


# ---- rejections before admission ----

def test_unknown_source_id(c):
    inv = open_inv(c)
    put_read(c, inv, "known", "k")
    r = rejected(c, "unavailable_source", source_ids=["nope"], invocation=inv)
    assert r["message"] == UNAVAILABLE_0
    r = rejected(c, "unavailable_source", source_ids=["known", "nope"], invocation=inv)
    assert r["message"] == "sourceIds[1] is not available to this call"
    # IDs are case-sensitive.
    rejected(c, "unavailable_source", source_ids=["KNOWN"], invocation=inv)
    run_ok(c, "1", ["known"], inv)


def test_closed_invocation(c):
    inv = open_inv(c)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)
    close_inv(c, inv)
    r = rejected(c, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv)
    assert r["message"] == UNAVAILABLE_0
    rejected(c, "not_found", "1 + 1", [], inv)
    r = c.call("invocation.close", invocation=inv)
    assert r["type"] == "error" and r["code"] == "not_found", r
    put_read(c, inv, "other", "x", expect="not_found")
    # The connection itself is fine: a new invocation works.
    inv2 = open_inv(c)
    put_read(c, inv2, "wb", NORTHSTAR_CSV)
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv2)["result"]["text"] == "8.25"


@pytest.mark.parametrize("inv", ["0" * 32, "F" * 32, "abc", "x" * 64])
def test_unknown_invocation(c, inv):
    r = rejected(c, "unavailable_source", source_ids=["wb"], invocation=inv)
    assert r["message"] == UNAVAILABLE_0
    rejected(c, "not_found", invocation=inv)
    r = c.call("invocation.close", invocation=inv)
    assert r["type"] == "error" and r["code"] == "not_found", r
    put_read(c, inv, "wb", "x", expect="not_found")


def test_invocation_id_too_long_or_empty_is_invalid(c):
    for inv in ("x" * 65, ""):
        rejected(c, "invalid_input", source_ids=["wb"], invocation=inv)
        r = c.call("invocation.close", invocation=inv)
        assert r["type"] == "error" and r["code"] == "invalid_input", r


def test_foreign_invocation_looks_unknown(shared_supervisor, connect):
    dsup = shared_supervisor()
    a = connect(dsup)
    b = connect(dsup)
    inv_a = open_inv(a)
    put_read(a, inv_a, "wb", NORTHSTAR_CSV)

    foreign = rejected(b, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv_a)
    inv_b = open_inv(b)
    unknown_id = rejected(b, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv_b)
    unknown_inv = rejected(b, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], "0" * 32)
    # Nothing in the answer tells a foreign ID from an unknown one.
    assert foreign["message"] == unknown_id["message"] == unknown_inv["message"]

    nf_foreign = rejected(b, "not_found", "1", [], inv_a)
    nf_unknown = rejected(b, "not_found", "1", [], "0" * 32)
    assert nf_foreign["message"] == nf_unknown["message"]

    p_foreign = b.call("source.put", invocation=inv_a, sourceId="evil", kind="read_source", text="x")
    p_unknown = b.call("source.put", invocation="0" * 32, sourceId="evil", kind="read_source", text="x")
    assert p_foreign["code"] == p_unknown["code"] == "not_found"
    assert p_foreign["message"] == p_unknown["message"]

    c_foreign = b.call("invocation.close", invocation=inv_a)
    c_unknown = b.call("invocation.close", invocation="0" * 32)
    assert c_foreign["code"] == c_unknown["code"] == "not_found"
    assert c_foreign["message"] == c_unknown["message"]

    # B's attempts changed nothing for A: still open, "evil" not registered.
    assert run_ok(a, MEAN_FROM_CSV % "wb", ["wb"], inv_a)["result"]["text"] == "8.25"
    rejected(a, "unavailable_source", "1", ["evil"], inv_a)


def test_source_of_another_invocation_on_the_same_connection(c):
    inv1 = open_inv(c)
    inv2 = open_inv(c)
    put_read(c, inv1, "wb", NORTHSTAR_CSV)
    r = rejected(c, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv2)
    assert r["message"] == UNAVAILABLE_0
    # The same ID in two invocations names two different sources.
    put_read(c, inv2, "wb", "prototype,measured_runtime_hours\nC,1\n")
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv1)["result"]["text"] == "8.25"
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv2)["result"]["text"] == "1.0"
    # Closing one leaves the other.
    close_inv(c, inv2)
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv1)["result"]["text"] == "8.25"


@pytest.mark.parametrize("bad", ["../x", "a/b", ".hidden", "", "x" * 300, "x" * 65, "\u00e9", "-x", "a b",
                                 "a\x00b", "wb\n", "/", "..", "."])
def test_malformed_source_ids_are_invalid(c, bad):
    inv = open_inv(c)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    rejected(c, "invalid_input", source_ids=[bad], invocation=inv)
    rejected(c, "invalid_input", source_ids=["wb", bad], invocation=inv)
    rejected(c, "invalid_input", source_ids=[bad])
    # Nor can such an ID be registered.
    put_read(c, inv, bad, "x", expect="invalid_input")


def test_source_ids_duplicate_and_fifth_are_invalid(c):
    inv = open_inv(c)
    for sid in "abcde":
        put_read(c, inv, sid, sid)
    rejected(c, "invalid_input", source_ids=["a", "a"], invocation=inv)
    rejected(c, "invalid_input", source_ids=["a", "b", "a"], invocation=inv)
    rejected(c, "invalid_input", source_ids=list("abcde"), invocation=inv)
    rejected(c, "invalid_input", source_ids=["a", 1], invocation=inv)
    seen, _ = probe(c, list("abcd"), inv)
    assert seen["listing"] == ["a.txt", "b.txt", "c.txt", "d.txt"]


def test_connection_close_closes_its_invocations(shared_supervisor, connect):
    dsup = shared_supervisor()
    a = connect(dsup)
    inv = open_inv(a)
    put_read(a, inv, "wb", NORTHSTAR_CSV)
    # A call of A's that is still running ends with the connection.
    rid = a.request("execute", summary="t", code="import time\ntime.sleep(30)", sourceIds=["wb"], invocation=inv)
    progress = []
    while not any(m.get("phase") == "started" for m in progress):
        m = a.recv()
        assert m.get("id") == rid and m.get("type") == "progress", m
        progress.append(m)
    a.close()
    wait_idle(dsup)  # the call ended with its connection (and its worker was reaped)
    assert worker_pids_of(dsup) == []

    b = connect(dsup)
    r = rejected(b, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv)
    assert r["message"] == UNAVAILABLE_0
    rejected(b, "not_found", "1", [], inv)


def test_invocation_close_cancels_only_its_own_calls(shared_supervisor, c):
    """Two calls run, one per invocation of one connection; the second holds until the
    first invocation has been closed."""
    sup = shared_supervisor()
    inv1 = open_inv(c)
    inv2 = open_inv(c)
    st = c.call("status")
    if st["capacity"] < 2:
        pytest.skip("needs two worker slots")
    r1 = c.request("execute", summary="t", code="import time\ntime.sleep(3600)", sourceIds=[], invocation=inv1)
    second = start_held(sup, c, after="'done'", invocation=inv2)
    second.wait_running()
    rc = c.request("invocation.close", invocation=inv1)
    assert c.wait(rc)["type"] == "reply"
    first = c.wait(r1, types=("result", "error"))
    assert first["type"] == "result" and first["outcome"] == "cancelled", first
    second.release()
    r2 = second.result()
    assert r2["type"] == "result" and r2["outcome"] == "ok", r2
    assert r2["result"]["text"] == "'done'"


# ---- source.put schema ----

def test_duplicate_source_put_keeps_the_original(c):
    inv = open_inv(c)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    put_read(c, inv, "wb", "prototype,measured_runtime_hours\nZ,1000\n", expect="invalid_input")
    put_attach(c, inv, "wb", "other", b"\x00other", expect="invalid_input")
    r = run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)
    assert r["result"]["text"] == "8.25"
    assert r["evidence"]["inputs"] == [{"sourceId": "wb", "kind": "read_source",
                                        "bytes": len(NORTHSTAR_CSV), "sha256": sha(NORTHSTAR_CSV)}]


BASE_READ = {"sourceId": "wb", "kind": "read_source", "text": NORTHSTAR_CSV}
BASE_ATTACH = {"sourceId": "wb", "kind": "attachment", "text": NORTHSTAR_CSV, "original": b"\x00\xff",
               "mediaType": "text/csv", "fileName": "wb.csv"}


def variant(base, **changes):
    d = dict(base)
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


@pytest.mark.parametrize("fields", [
    variant(BASE_READ, original=b"\x00\xff"),
    variant(BASE_READ, mediaType="text/csv"),
    variant(BASE_READ, fileName="wb.csv"),
    variant(BASE_READ, path="/etc/passwd"),
    variant(BASE_READ, path="/etc/passwd", text=None),
    variant(BASE_READ, text=None),
    variant(BASE_READ, text=b"bytes are not text"),
    variant(BASE_READ, text=5),
    variant(BASE_READ, kind="file"),
    variant(BASE_READ, kind=None),
    variant(BASE_READ, sourceId=None),
    variant(BASE_READ, origin=7),
    variant(BASE_READ, origin="x" * 2049),
    variant(BASE_READ, url="https://example.org/wb.xlsx"),
    variant(BASE_ATTACH, origin=NORTHSTAR_ORIGIN),
    variant(BASE_ATTACH, original=None),
    variant(BASE_ATTACH, mediaType=None),
    variant(BASE_ATTACH, fileName=None),
    variant(BASE_ATTACH, text=None),
    variant(BASE_ATTACH, path="/etc/passwd"),
    variant(BASE_ATTACH, original=5),
    variant(BASE_ATTACH, mediaType="t/" + "x" * 126),
    variant(BASE_ATTACH, fileName="f" * 256),
], ids=lambda f: ",".join("%s=%s" % (k, str(v)[:12]) for k, v in sorted(f.items(), key=str)
                          if k not in ("sourceId",)))
def test_source_put_schema_violations(c, fields):
    inv = open_inv(c)
    r = c.call("source.put", invocation=inv, **fields)
    assert r["type"] == "error" and r["code"] == "invalid_input", r
    # Nothing was registered: the ID is unavailable, and free to be put properly.
    rejected(c, "unavailable_source", "1", ["wb"], inv)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)["result"]["text"] == "8.25"


def test_source_put_bounds_that_pass(c):
    inv = open_inv(c)
    put_read(c, inv, "o", "x", origin="o" * 2048)
    put_attach(c, inv, "m", "x", b"y", "t/" + "x" * 125, "f" * 255)
    seen, _ = probe(c, ["m"], inv)
    assert seen["assets"]["m"]["mediaType"] == "t/" + "x" * 125


@pytest.mark.parametrize("field", ["text", "mediaType", "fileName", "origin"])
def test_source_put_invalid_utf8_is_invalid(c, field):
    inv = open_inv(c)
    if field == "origin":
        msg = variant(BASE_READ, origin="@@@@")
    else:
        msg = variant(BASE_ATTACH, **{field: "@@@@"})
    msg = dict(msg, op="source.put", invocation=inv)
    r = raw_call(c, msg, [(b"@@@@", b"\xff\xfe\x80\xc0")])
    assert r["type"] == "error" and r["code"] == "invalid_input", r
    rejected(c, "unavailable_source", "1", ["wb"], inv)


def test_source_put_invalid_utf8_text_in_a_long_string(c):
    inv = open_inv(c)
    text = "prototype,measured_runtime_hours\nA,9\nB,7.5\n" * 20 + "@@@@"
    msg = dict(variant(BASE_READ, text=text), op="source.put", invocation=inv)
    # An overlong encoding and a lone surrogate, both not UTF-8.
    for bad in (b"\xc0\xaf\x41\x41", b"\xed\xa0\x80\x41"):
        r = raw_call(c, msg, [(b"@@@@", bad)])
        assert r["type"] == "error" and r["code"] == "invalid_input", r
    rejected(c, "unavailable_source", "1", ["wb"], inv)


# ---- quotas (maxCalls: 3, timeoutMs: 1500) ----

def test_fourth_call_is_quota_exhausted(shared_supervisor, connect):
    qsup = shared_supervisor(QUOTA_POLICY)
    c = connect(qsup)
    r = c.call("invocation.open")
    assert r["type"] == "reply" and r["maxCalls"] == 3, r
    inv = r["invocation"]
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    for _ in range(3):
        assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)["result"]["text"] == "8.25"
    r = rejected(c, "quota_exhausted", MEAN_FROM_CSV % "wb", ["wb"], inv)
    assert "3" in r["message"]
    rejected(c, "quota_exhausted", "1", [], inv)
    # Source checks come first: an unknown ID is still unavailable_source.
    rejected(c, "unavailable_source", "1", ["nope"], inv)
    # The invocation itself is still open: sources can be added, but no call runs.
    put_read(c, inv, "more", "x")
    rejected(c, "quota_exhausted", "1", ["more"], inv)

    # Quotas are per invocation: a second one on the same connection has its own.
    inv2 = open_inv(c)
    put_read(c, inv2, "wb", NORTHSTAR_CSV)
    for _ in range(3):
        run_ok(c, "1", ["wb"], inv2)
    rejected(c, "quota_exhausted", "1", ["wb"], inv2)
    # Calls without an invocation have no quota.
    for _ in range(4):
        run_ok(c, "1")


def test_failed_calls_spend_quota(shared_supervisor, connect):
    qsup = shared_supervisor(QUOTA_POLICY)
    c = connect(qsup)
    inv = open_inv(c)
    r = c.execute("while True:\n    pass", [], inv)
    assert r["type"] == "result" and r["outcome"] == "timeout", r
    r = c.execute("1 / 0", [], inv)
    assert r["type"] == "result" and r["outcome"] == "python_exception", r
    assert r["exception"]["type"] == "ZeroDivisionError"
    run_ok(c, "1", [], inv)
    rejected(c, "quota_exhausted", "1", [], inv)


def test_cancelled_call_spends_quota(shared_supervisor, connect):
    # The default deadline: the cancel, however slow, comes first.
    c = connect(shared_supervisor("maxCalls: 3\n"))
    inv = open_inv(c)
    rid = c.request("execute", summary="t", code="import time\ntime.sleep(3600)", sourceIds=[], invocation=inv)
    r = c.call("cancel", callId=c.call_id(rid))
    assert r["type"] == "reply", r
    r = c.wait(rid, types=("result", "error"))
    assert r["type"] == "result" and r["outcome"] == "cancelled", r
    run_ok(c, "1", [], inv)
    run_ok(c, "2", [], inv)
    rejected(c, "quota_exhausted", "1", [], inv)


def test_rejected_calls_do_not_spend_quota(shared_supervisor, connect):
    qsup = shared_supervisor(QUOTA_POLICY)
    c = connect(qsup)
    inv = open_inv(c)
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    for _ in range(4):
        rejected(c, "unavailable_source", "1", ["nope"], inv)
    rejected(c, "invalid_input", "1", ["wb", "wb"], inv)
    rejected(c, "invalid_input", "1", ["../wb"], inv)
    rejected(c, "invalid_input", "   \n", ["wb"], inv)
    rejected(c, "invalid_input", "1", ["a", "b", "c", "d", "e"], inv)
    for _ in range(3):
        assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)["result"]["text"] == "8.25"
    rejected(c, "quota_exhausted", "1", ["wb"], inv)


def test_quotas_are_per_invocation_across_connections(shared_supervisor, connect):
    qsup = shared_supervisor(QUOTA_POLICY)
    a = connect(qsup)
    b = connect(qsup)
    inv_a = open_inv(a)
    inv_b = open_inv(b)
    for _ in range(3):
        run_ok(a, "1", [], inv_a)
    rejected(a, "quota_exhausted", "1", [], inv_a)
    # B names A's exhausted invocation: it does not exist for B.
    rejected(b, "not_found", "1", [], inv_a)
    for _ in range(3):
        run_ok(b, "1", [], inv_b)
    rejected(b, "quota_exhausted", "1", [], inv_b)


def test_default_quota_is_ten(c):
    inv = open_inv(c)
    for i in range(10):
        assert run_ok(c, "%d * 2" % i, [], inv)["result"]["text"] == str(i * 2)
    r = rejected(c, "quota_exhausted", "1", [], inv)
    assert "10" in r["message"]


# ---- registry bounds (maxSourceBytes 100, maxSourcesPerInvocation 3,
#      maxInvocationBytes 250, maxInvocationsPerConnection 2) ----

def test_oversized_source_is_rejected_others_still_work(shared_supervisor, connect):
    bsup = shared_supervisor(BOUNDS_POLICY)
    c = connect(bsup)
    inv = open_inv(c)
    put_read(c, inv, "small", "s" * 40)
    put_read(c, inv, "big", "b" * 101, expect="invalid_input")
    put_read(c, inv, "big", "\u00e9" * 51, expect="invalid_input")  # 51 characters, 102 bytes
    # Text and original together count.
    put_attach(c, inv, "pair", "t" * 50, b"\x00" * 51, expect="invalid_input")
    put_attach(c, inv, "pair", "t" * 50, b"\x00" * 50)  # exactly 100: fits
    seen, r = probe(c, ["small", "pair"], inv)
    assert seen["text_sha"] == {"small": sha("s" * 40), "pair": sha("t" * 50)}
    assert seen["original_sha"] == {"pair": sha(b"\x00" * 50)}
    rejected(c, "unavailable_source", "1", ["big"], inv)


def test_too_many_sources_earlier_ones_still_work(shared_supervisor, connect):
    bsup = shared_supervisor(BOUNDS_POLICY)
    c = connect(bsup)
    inv = open_inv(c)
    for sid in ("one", "two", "three"):
        put_read(c, inv, sid, sid)
    r = put_read(c, inv, "four", "four", expect="invalid_input")
    assert "maxSourcesPerInvocation" in r["message"]
    seen, _ = probe(c, ["one", "two", "three"], inv)
    assert seen["text_sha"] == {sid: sha(sid) for sid in ("one", "two", "three")}
    rejected(c, "unavailable_source", "1", ["four"], inv)
    # The bound is per invocation.
    inv2 = open_inv(c)
    put_read(c, inv2, "four", "four")


def test_invocation_bytes_bound(shared_supervisor, connect):
    bsup = shared_supervisor(BOUNDS_POLICY)
    c = connect(bsup)
    inv = open_inv(c)
    put_read(c, inv, "a", "a" * 100)
    put_read(c, inv, "b", "b" * 100)
    r = put_read(c, inv, "c", "c" * 60, expect="invalid_input")  # 260 > 250
    assert "maxInvocationBytes" in r["message"]
    put_read(c, inv, "c", "c" * 50)  # exactly 250
    seen, _ = probe(c, ["a", "b", "c"], inv)
    assert seen["text_sha"] == {"a": sha("a" * 100), "b": sha("b" * 100), "c": sha("c" * 50)}


def test_too_many_invocations(shared_supervisor, connect):
    bsup = shared_supervisor(BOUNDS_POLICY)
    c = connect(bsup)
    inv1 = open_inv(c)
    inv2 = open_inv(c)
    r = c.call("invocation.open")
    assert r["type"] == "error" and r["code"] == "invalid_input", r
    # The existing ones still work, and so do calls without an invocation.
    put_read(c, inv1, "wb", "x")
    run_ok(c, "1", ["wb"], inv1)
    run_ok(c, "1", [], inv2)
    run_ok(c, "1")
    # The bound is per connection.
    d = connect(bsup)
    open_inv(d)
    open_inv(d)
    # Closing one makes room.
    close_inv(c, inv2)
    inv3 = open_inv(c)
    assert inv3 not in (inv1, inv2)
    r = c.call("invocation.open")
    assert r["type"] == "error" and r["code"] == "invalid_input", r


# ---- idle TTL (invocationIdleTtlMs: 1000) ----
# The idle timer is armed with sd-event accuracy, so it fires some time after the TTL;
# the tests poll with a probe that does not count as activity (a duplicate source.put
# fails before touching the invocation). Time is bracketed on this side's clock, which
# is the supervisor's (CLOCK_MONOTONIC): an activity happened after its request was
# sent and before its answer arrived; a probe was processed before its answer arrived.
# Only what those brackets prove is asserted: a slow machine makes a check weaker (or
# makes the test start over), never wrong.

TTL = 1.0


def alive(c, inv):
    r = c.call("source.put", invocation=inv, sourceId="probe", kind="read_source", text="p")
    assert r["type"] == "error" and r["code"] in ("invalid_input", "not_found"), r
    return r["code"] == "invalid_input"


def test_idle_ttl_expires_invocation(shared_supervisor, connect):
    c = connect(shared_supervisor(TTL_POLICY))
    r = c.call("invocation.open")
    assert r["idleTtlMs"] == 1000, r
    inv = r["invocation"]
    put_read(c, inv, "wb", NORTHSTAR_CSV)
    # A file kept from a call is a source of the invocation like the others, and goes
    # with it (docs/protocol.md, "Kept outputs").
    rid = c.submit("open('/outputs/x.txt', 'w').write('x')", [], inv, keepOutputs=["x.txt"])
    assert ok(c.wait(rid, types=("error", "result")))["keptOutputs"][0]["sourceId"] == "out-1-x.txt"
    sent = time.monotonic()
    put_read(c, inv, "probe", "p")  # the last activity: processed after `sent`
    # A probe answered before sent + TTL was processed before the invocation could
    # expire: it must find it alive. (Answered later, it proves nothing.)
    still = alive(c, inv)
    if time.monotonic() < sent + TTL:
        assert still, "expired before invocationIdleTtlMs"
    while alive(c, inv):
        time.sleep(0.05)
    # Found expired: the answer came at least a TTL after the activity was sent.
    assert time.monotonic() - sent >= TTL
    r = rejected(c, "unavailable_source", MEAN_FROM_CSV % "wb", ["wb"], inv)
    assert r["message"] == UNAVAILABLE_0
    r = rejected(c, "unavailable_source", "1", ["out-1-x.txt"], inv)
    assert r["message"] == UNAVAILABLE_0
    rejected(c, "not_found", "1", [], inv)
    r = c.call("invocation.close", invocation=inv)
    assert r["type"] == "error" and r["code"] == "not_found", r
    # The connection is fine.
    inv2 = open_inv(c)
    put_read(c, inv2, "wb", NORTHSTAR_CSV)
    assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv2)["result"]["text"] == "8.25"


def test_activity_keeps_invocation_alive(shared_supervisor, connect):
    """Activity every half TTL for three TTLs: still alive at the end, well past when an
    untouched timer would have fired. Two activities happened at most the time from the
    first one's request to the second one's answer apart. When that span reached the
    TTL on a slow machine, the invocation may rightly have expired: the test starts over
    (up to five times)."""
    c = connect(shared_supervisor(TTL_POLICY))
    for _ in range(5):
        inv = open_inv(c)
        put_read(c, inv, "probe", "p")
        prev_sent = time.monotonic()
        put_read(c, inv, "wb", NORTHSTAR_CSV)
        longest = 0.0
        for i in range(6):
            time.sleep(TTL / 2)
            sent = time.monotonic()
            if i % 2:
                run_ok(c, "1", ["wb"], inv)  # an admitted execute is activity
            else:
                put_read(c, inv, "s%d" % i, "x")
            longest = max(longest, time.monotonic() - prev_sent)
            prev_sent = sent
        still = alive(c, inv)
        longest = max(longest, time.monotonic() - prev_sent)
        if longest < TTL:
            assert still, "expired although no two activities were a TTL apart"
            assert run_ok(c, MEAN_FROM_CSV % "wb", ["wb"], inv)["result"]["text"] == "8.25"
            return
    pytest.fail("five attempts, each with two activities stretched a TTL apart by the machine")


def test_expiry_cancels_running_call(shared_supervisor, connect):
    c = connect(shared_supervisor(TTL_POLICY))
    inv = open_inv(c)
    r = c.execute("import time\ntime.sleep(3600)", [], inv)
    assert r["type"] == "result" and r["outcome"] == "cancelled", r
    rejected(c, "not_found", "1", [], inv)


# ---- the CLI ----

@pytest.fixture
def tmp(tmp_path):
    def write(name, data):
        p = tmp_path / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return str(p)
    return write


def test_cli_source(shared_supervisor, tmp):
    dsup = shared_supervisor()
    path = tmp("runtimes.csv", NORTHSTAR_CSV)
    out = dsup.cli("exec", "--source", "runtimes=" + path, "-c", MEAN_FROM_CSV % "runtimes")
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"8.25\n"


def test_cli_source_json_evidence(shared_supervisor, tmp):
    dsup = shared_supervisor()
    path = tmp("runtimes.csv", NORTHSTAR_CSV)
    out = dsup.cli("exec", "--json", "--source", "runtimes=" + path, "-c", MEAN_FROM_CSV % "runtimes")
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    assert m["result"]["text"] == "8.25"
    assert m["evidence"]["inputs"] == [{"sourceId": "runtimes", "kind": "read_source",
                                        "bytes": len(NORTHSTAR_CSV), "sha256": sha(NORTHSTAR_CSV)}]


def test_cli_attach_with_media_type(shared_supervisor, tmp):
    dsup = shared_supervisor()
    path = tmp("wb.csv", NORTHSTAR_CSV)
    out = dsup.cli("exec", "--attach", "wb=%s:text/csv" % path, "-c", PROBE)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["assets"] == {"wb": {"text": "/inputs/wb.txt", "original": "/inputs/wb.original",
                                     "mediaType": "text/csv"}}
    assert seen["files"] == {"wb": "/inputs/wb.txt"}
    assert seen["original_sha"] == {"wb": sha(NORTHSTAR_CSV)}
    assert seen["text_sha"] == {"wb": sha(NORTHSTAR_CSV)}


def test_cli_attach_binary_with_text(shared_supervisor, tmp):
    dsup = shared_supervisor()
    binp = tmp("wb.xlsx", ORIGINAL)
    txtp = tmp("wb.csv", CANONICAL)
    out = dsup.cli("exec", "--attach", "wb=" + binp, "--text", "wb=" + txtp, "-c", PROBE)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["original_sha"] == {"wb": sha(ORIGINAL)}
    assert seen["text_sha"] == {"wb": sha(CANONICAL)}
    assert seen["listing"] == ["wb.original", "wb.txt"]
    assert seen["assets"]["wb"]["mediaType"] == "application/octet-stream"


def test_cli_source_and_attach_together(shared_supervisor, tmp):
    dsup = shared_supervisor()
    a = tmp("runtimes.csv", NORTHSTAR_CSV)
    b = tmp("wb.xlsx", ORIGINAL)
    t = tmp("wb.csv", CANONICAL)
    out = dsup.cli("exec", "--source", "runtimes=" + a, "--attach", "wb=%s:%s" % (b, XLSX), "--text", "wb=" + t,
                      "--json", "-c", PROBE)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    seen = json.loads(m["stdout"]["text"])
    assert seen["listing"] == ["runtimes.txt", "wb.original", "wb.txt"]
    assert [i["sourceId"] for i in m["evidence"]["inputs"]] == ["runtimes", "wb"]
    assert m["evidence"]["inputs"][1]["originalSha256"] == sha(ORIGINAL)
    assert m["evidence"]["inputs"][1]["mediaType"] == XLSX


def test_cli_rejects_non_utf8_text(shared_supervisor, tmp):
    dsup = shared_supervisor()
    binp = tmp("wb.xlsx", ORIGINAL)
    out = dsup.cli("exec", "--source", "wb=" + binp, "-c", "1")
    assert out.returncode == 6, (out.returncode, out.stderr)
    assert b"invalid_input" in out.stderr
    # An attachment without --text whose bytes are not UTF-8 gets a one-line canonical
    # text instead (test_cli.py checks it); only a read_source must be text.
    out = dsup.cli("exec", "--attach", "wb=" + binp, "-c", "open(input_files['wb']).read()[:19]")
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert out.stdout == b"'[binary attachment:'\n"


def test_cli_bad_source_arguments(shared_supervisor, tmp):
    dsup = shared_supervisor()
    path = tmp("runtimes.csv", NORTHSTAR_CSV)
    out = dsup.cli("exec", "--source", "../x=" + path, "-c", "1")
    assert out.returncode == 6, (out.returncode, out.stderr)
    out = dsup.cli("exec", "--text", "wb=" + path, "-c", "1")
    assert out.returncode == 2, (out.returncode, out.stderr)
    out = dsup.cli("exec", "--source", "wb=/nonexistent/file.csv", "-c", "1")
    assert out.returncode == 2, (out.returncode, out.stderr)
