"""Kept outputs: files that flow from one call to the next, by ID (issue 22).

An execute with keepOutputs makes the named /outputs artifacts sources of its
invocation, out-<call>-<name>; a later call mounts one only by naming that ID (a
read-only copy under /inputs), its evidence says which call produced the bytes, and the
kept sources obey the registry's bounds and end with the invocation, like any other.

The registry is the supervisor's (asan); what a worker finds under /inputs is mounted
by each start mode's sandbox setup (start_mode: the chain and the read-only copy)."""
import os

import msgpack
import pytest

from testlib import MUST_SANDBOX, PYTHON, WAIT_LIMIT, Conn, ok, sha

pytestmark = pytest.mark.asan

UNAVAILABLE_0 = "sourceIds[0] is not available to this call"

# Call 1 of the chain: a raw table with a bad row.
WRITE_CSV = """rows = ["city,temp_c", "Oslo,3.5", "Lima,19", "Bad,n/a", "Cairo,24.25"]
with open("/outputs/raw.csv", "w") as f:
    f.write("\\n".join(rows) + "\\n")
"""

# Call 2: clean it, reading the kept copy; reports the digest of what it saw.
CLEAN_CSV = """import csv, hashlib
path = "/inputs/out-1-raw.csv"
assert input_files == {"out-1-raw.csv": path}, input_files
data = open(path, "rb").read()
print(hashlib.sha256(data).hexdigest())
rows = list(csv.DictReader(data.decode().splitlines()))
good = []
for row in rows:
    try:
        good.append((row["city"], float(row["temp_c"])))
    except ValueError:
        pass
with open("/outputs/clean.csv", "w") as f:
    f.write("city,temp_c\\n" + "".join("%s,%s\\n" % r for r in good))
len(good)
"""

# Call 3: plot the clean table.
PLOT = """import csv, hashlib
import matplotlib.pyplot as plt
data = open("/inputs/out-2-clean.csv", "rb").read()
print(hashlib.sha256(data).hexdigest())
rows = list(csv.DictReader(data.decode().splitlines()))
fig, ax = plt.subplots()
ax.bar([r["city"] for r in rows], [float(r["temp_c"]) for r in rows])
fig.savefig("/outputs/temps.png")
len(rows)
"""

BOUNDS_POLICY = "maxSourceBytes: 100\nmaxSourcesPerInvocation: 4\nmaxInvocationBytes: 250\n"

# The chain plots with matplotlib: the data policy as shipped, with room for an exec-mode
# worker's first import of it (test_datastack.py does the same).
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(ROOT, "packaging", "policy-data.yaml")) as _f:
    DATA_POLICY = _f.read() + "timeoutMs: 120000\n"


def require_matplotlib():
    if not PYTHON.get("packages", {}).get("matplotlib"):
        if MUST_SANDBOX and PYTHON.get("interpreter") == "/usr/bin/python3":
            pytest.fail("this build's Python lacks matplotlib, but CODEINTERP_MUST_SANDBOX=1 with /usr/bin/python3")
        pytest.skip("this build's Python lacks matplotlib (BUILD/python.json)")


def open_inv(c):
    r = c.call("invocation.open")
    assert r["type"] == "reply", r
    return r["invocation"]


def run(c, code, source_ids=(), invocation=None, keep=None, progress=None):
    fields = {}
    if keep is not None:
        fields["keepOutputs"] = keep
    rid = c.submit(code, source_ids, invocation, **fields)
    return c.wait(rid, types=("error", "result"), progress=progress)


def counters(c):
    r = c.call("status")
    return r["admittedTotal"], r["startedTotal"]


def rejected(c, expected, code="1", source_ids=(), invocation=None, keep=None):
    """Answered with an error before admission: no progress, nothing admitted or started."""
    before = counters(c)
    progress = []
    r = run(c, code, source_ids, invocation, keep, progress)
    assert r["type"] == "error" and r["code"] == expected, r
    assert progress == [], progress
    assert counters(c) == before
    return r


def artifact(r, name):
    (a,) = [a for a in r["artifacts"] if a["name"] == name]
    return a


def write_files(files):
    """Code writing {name: size} into /outputs (bytes of 'x')."""
    return "".join("open('/outputs/%s', 'wb').write(b'x' * %d)\n" % (n, s) for n, s in files.items()) + "1"


# ---- the chain ----

@pytest.mark.start_mode
def test_three_call_chain_digests_end_to_end(shared_supervisor, connect):
    require_matplotlib()
    sup = shared_supervisor(DATA_POLICY)
    c = Conn(sup.socket, max(WAIT_LIMIT, 120))
    inv = open_inv(c)
    progress = []

    r1 = ok(run(c, WRITE_CSV, [], inv, ["raw.csv"], progress))
    raw = artifact(r1, "raw.csv")
    assert raw["sha256"] == sha(raw["data"])
    assert r1["keptOutputs"] == [
        {"name": "raw.csv", "sourceId": "out-1-raw.csv", "bytes": len(raw["data"]), "sha256": raw["sha256"]}]
    assert r1["evidence"]["inputs"] == []

    r2 = ok(run(c, CLEAN_CSV, ["out-1-raw.csv"], inv, ["clean.csv"], progress), "3")
    # What the worker read == what call 1 wrote == what the registry kept == evidence.
    assert r2["stdout"]["text"].strip() == raw["sha256"]
    assert r2["evidence"]["inputs"] == [{
        "sourceId": "out-1-raw.csv", "kind": "output", "bytes": len(raw["data"]), "sha256": raw["sha256"],
        "mediaType": "text/csv", "producedBy": {"call": 1, "sha256": raw["sha256"]}}]
    clean = artifact(r2, "clean.csv")
    assert clean["data"] == b"city,temp_c\nOslo,3.5\nLima,19.0\nCairo,24.25\n"
    (k2,) = r2["keptOutputs"]
    assert k2 == {"name": "clean.csv", "sourceId": "out-2-clean.csv", "bytes": len(clean["data"]),
                  "sha256": sha(clean["data"])}

    r3 = ok(run(c, PLOT, ["out-2-clean.csv"], inv, "all", progress), "3")
    assert r3["stdout"]["text"].strip() == k2["sha256"]
    (inp,) = r3["evidence"]["inputs"]
    assert inp["producedBy"] == {"call": 2, "sha256": k2["sha256"]} and inp["sha256"] == k2["sha256"]
    png = artifact(r3, "temps.png")
    assert png["data"].startswith(b"\x89PNG\r\n\x1a\n") and png["mediaType"] == "image/png"
    assert r3["keptOutputs"] == [
        {"name": "temps.png", "sourceId": "out-3-temps.png", "bytes": len(png["data"]), "sha256": sha(png["data"])}]

    # The image is a source too, mounted byte for byte.
    r4 = ok(run(c, "import hashlib; hashlib.sha256(open('/inputs/out-3-temps.png','rb').read()).hexdigest()",
                ["out-3-temps.png"], inv))
    assert r4["result"]["text"] == repr(sha(png["data"]))
    assert r4["keptOutputs"] is None

    # Progress carries metadata only: never a kept ID or an artifact name.
    assert progress
    for m in progress:
        body = msgpack.packb(m, use_bin_type=True)
        for word in (b"out-", b"raw.csv", b"clean.csv", b"temps.png", b"keptOutputs"):
            assert word not in body, (word, m)
    c.close()


@pytest.mark.start_mode
def test_kept_copy_is_read_only_and_source_unchanged(c):
    inv = open_inv(c)
    r1 = ok(run(c, "open('/outputs/t.txt','w').write('original\\n')", [], inv, ["t.txt"]))
    digest = r1["keptOutputs"][0]["sha256"]
    code = """import errno, shutil
try:
    open("/inputs/out-1-t.txt", "a").write("changed")
    print("written")
except OSError as e:
    print(errno.errorcode[e.errno])
shutil.copyfile("/inputs/out-1-t.txt", "/tmp/t.txt")
open("/tmp/t.txt", "a").write("changed")
open("/tmp/t.txt").read()
"""
    r2 = ok(run(c, code, ["out-1-t.txt"], inv))
    assert r2["stdout"]["text"] == "EROFS\n"
    assert r2["result"]["text"] == repr("original\nchanged")
    r3 = ok(run(c, "open('/inputs/out-1-t.txt').read()", ["out-1-t.txt"], inv))
    assert r3["result"]["text"] == repr("original\n")
    assert r3["evidence"]["inputs"][0]["sha256"] == digest


def test_kept_even_when_the_code_fails(c):
    inv = open_inv(c)
    r = run(c, "open('/outputs/partial.txt','w').write('so far')\nraise ValueError('later')", [], inv,
            ["partial.txt", "never.txt"])
    assert r["type"] == "result" and r["outcome"] == "python_exception", r
    assert r["keptOutputs"] == [
        {"name": "partial.txt", "sourceId": "out-1-partial.txt", "bytes": 6, "sha256": sha("so far")},
        {"name": "never.txt", "refused": "not_produced"}]
    # Without /outputs files at all, and with "all": nothing to keep.
    r = ok(run(c, "1", [], inv, "all"))
    assert r["keptOutputs"] == []
    r = ok(run(c, "1", [], inv, []))
    assert r["keptOutputs"] == []


def test_kept_before_the_result_is_fitted(c):
    """Files too large for maxResultBytes (256 KiB by default) are omitted from the
    result's artifacts but still kept, named intact, and mounted whole."""
    inv = open_inv(c)
    code = ("open('/outputs/big1.bin','wb').write(bytes(range(256)) * 800)\n"
            "open('/outputs/big2.bin','wb').write(b'y' * 204800)\n1")
    r = ok(run(c, code, [], inv, "all"))
    assert r["omittedArtifacts"] >= 1 and len(r["artifacts"]) <= 1, (r["omittedArtifacts"], len(r["artifacts"]))
    assert r["keptOutputs"] == [
        {"name": "big1.bin", "sourceId": "out-1-big1.bin", "bytes": 204800, "sha256": sha(bytes(range(256)) * 800)},
        {"name": "big2.bin", "sourceId": "out-1-big2.bin", "bytes": 204800, "sha256": sha(b"y" * 204800)}]
    r = ok(run(c, "import hashlib; hashlib.sha256(open('/inputs/out-1-big1.bin','rb').read()).hexdigest()",
               ["out-1-big1.bin"], inv))
    assert r["result"]["text"] == repr(sha(bytes(range(256)) * 800))


# ---- bounds: the registry's, as for registered sources ----

def test_caps_refuse_what_does_not_fit(shared_supervisor, connect):
    c = connect(shared_supervisor(BOUNDS_POLICY))
    inv = open_inv(c)
    r = ok(run(c, write_files({"big.bin": 101, "a.bin": 100, "b.bin": 100, "c.bin": 60}), [], inv, "all"))
    assert r["keptOutputs"] == [
        {"name": "a.bin", "sourceId": "out-1-a.bin", "bytes": 100, "sha256": sha(b"x" * 100)},
        {"name": "b.bin", "sourceId": "out-1-b.bin", "bytes": 100, "sha256": sha(b"x" * 100)},
        {"name": "big.bin", "refused": "max_source_bytes"},
        {"name": "c.bin", "refused": "max_invocation_bytes"}]
    # A refused one is no source; the kept ones are.
    r = rejected(c, "unavailable_source", "1", ["out-1-c.bin"], inv)
    assert r["message"] == UNAVAILABLE_0
    ok(run(c, "len(open('/inputs/out-1-a.bin','rb').read())", ["out-1-a.bin"], inv), "100")
    # The source count: registered and kept sources share maxSourcesPerInvocation (4).
    r = c.call("source.put", invocation=inv, sourceId="note", kind="read_source", text="n")
    assert r["type"] == "reply", r
    r = ok(run(c, write_files({"d.bin": 1, "e.bin": 1}), [], inv, ["e.bin", "d.bin"]))
    assert r["keptOutputs"] == [{"name": "e.bin", "sourceId": "out-3-e.bin", "bytes": 1, "sha256": sha(b"x")},
                                {"name": "d.bin", "refused": "max_sources_per_invocation"}]
    r = c.call("source.put", invocation=inv, sourceId="more", kind="read_source", text="m")
    assert r["type"] == "error" and r["code"] == "invalid_input" and "maxSourcesPerInvocation" in r["message"], r


def test_names_that_cannot_be_ids_are_refused(c):
    inv = open_inv(c)
    long_name = "n" * 58  # out-1- + 58 = 64: fits
    code = ("open('/outputs/with space.txt','w').write('a')\n"
            "open('/outputs/%s','w').write('b')\n1" % long_name)
    r = ok(run(c, code, [], inv, "all"))
    assert r["keptOutputs"] == [
        {"name": long_name, "sourceId": "out-1-" + long_name, "bytes": 1, "sha256": sha("b")},
        {"name": "with space.txt", "refused": "invalid_name"}]


# ---- expiry, other invocations, the reserved prefix ----

def test_kept_sources_end_with_the_invocation(c):
    inv = open_inv(c)
    ok(run(c, "open('/outputs/x.txt','w').write('x')", [], inv, ["x.txt"]))
    ok(run(c, "open('/inputs/out-1-x.txt').read()", ["out-1-x.txt"], inv), "'x'")
    other = open_inv(c)
    # Another invocation of the same connection: unknown there.
    r = rejected(c, "unavailable_source", "1", ["out-1-x.txt"], other)
    assert r["message"] == UNAVAILABLE_0
    # Closed: gone.
    assert c.call("invocation.close", invocation=inv)["type"] == "reply"
    rejected(c, "unavailable_source", "1", ["out-1-x.txt"], inv)
    # A new invocation that produces its own call 1 gets its own bytes, not the old ones.
    inv2 = open_inv(c)
    ok(run(c, "open('/outputs/x.txt','w').write('new')", [], inv2, ["x.txt"]))
    ok(run(c, "open('/inputs/out-1-x.txt').read()", ["out-1-x.txt"], inv2), "'new'")


def test_foreign_connection_cannot_mount(shared_supervisor, connect):
    sup = shared_supervisor()
    c1, c2 = connect(sup), connect(sup)
    inv = open_inv(c1)
    ok(run(c1, "open('/outputs/x.txt','w').write('secret')", [], inv, ["x.txt"]))
    r = rejected(c2, "unavailable_source", "1", ["out-1-x.txt"], inv)
    assert r["message"] == UNAVAILABLE_0
    inv2 = open_inv(c2)
    rejected(c2, "unavailable_source", "1", ["out-1-x.txt"], inv2)


def test_out_prefix_is_reserved(c):
    inv = open_inv(c)
    for kind, extra in (("read_source", {}),
                        ("attachment", {"original": b"o", "mediaType": "text/plain", "fileName": "f"})):
        r = c.call("source.put", invocation=inv, sourceId="out-1-x.txt", kind=kind, text="t", **extra)
        assert r["type"] == "error" and r["code"] == "invalid_input", r
        assert "reserved for kept outputs" in r["message"], r
    # Not a prefix: allowed.
    r = c.call("source.put", invocation=inv, sourceId="output", kind="read_source", text="t")
    assert r["type"] == "reply", r


# ---- the request field ----

def test_keep_needs_an_invocation(c):
    for keep in (["a"], "all", []):
        r = rejected(c, "invalid_input", "1", [], None, keep)
        assert "needs an \"invocation\"" in r["message"], r


@pytest.mark.parametrize("keep, words", [
    ("some", "must be \"all\" or an array"),
    (3, "must be \"all\" or an array"),
    ({"a": 1}, "must be \"all\" or an array"),
    (["x%d" % i for i in range(17)], "at most 16"),
    (["a", "a"], "keepOutputs[1] repeats keepOutputs[0]"),
    ([""], "keepOutputs[0] is not a name"),
    (["a/b"], "keepOutputs[0] is not a name"),
    (["ok", ".hidden"], "keepOutputs[1] is not a name"),
    (["-x"], "keepOutputs[0] is not a name"),
    (["n" * 59], "keepOutputs[0] is not a name"),
    ([1], "keepOutputs[0] is not a name"),
])
def test_keep_schema_errors(c, keep, words):
    inv = open_inv(c)
    r = rejected(c, "invalid_input", "1", [], inv, keep)
    assert words in r["message"], r


def test_keep_sixteen_names_accepted(c):
    inv = open_inv(c)
    names = ["f%02d.txt" % i for i in range(16)]
    r = ok(run(c, "open('/outputs/f00.txt','w').write('0')\n1", [], inv, names))
    assert [k["name"] for k in r["keptOutputs"]] == names
    assert r["keptOutputs"][0]["sourceId"] == "out-1-f00.txt"
    assert all(k == {"name": k["name"], "refused": "not_produced"} for k in r["keptOutputs"][1:])
