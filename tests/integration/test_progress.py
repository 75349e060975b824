"""Progress events (supervisor/server.c progress_pack, supervisor/scheduler.c): their
phases and fields, that they go only to the caller's connection, and that neither they
nor the supervisor's log (default level, info) ever carry user content: code, output,
result values, source IDs and contents, file names and paths, exception types and
messages, summaries. All of it is packed and sent by the supervisor (asan)."""
import secrets
import signal
import time

import msgpack
import pytest

from testlib import WAIT_LIMIT, Conn
from testlib.waits import HOLD_POINT, HOLD_SETUP, start_held

pytestmark = pytest.mark.asan

PROGRESS_KEYS = {"id", "type", "callId", "phase", "elapsedMs", "queuePosition", "stdoutCharacters",
                 "stderrCharacters", "outcome"}
# Later additions (docs/protocol.md): sizes only.
PROGRESS_OPTIONAL_KEYS = {"stdoutOmittedCharacters", "stderrOmittedCharacters"}
# Sizes of /outputs: nil before the call has one (queued) or when the policy has none.
PROGRESS_NULLABLE_KEYS = {"artifacts", "artifactBytes"}
PHASES = ("requested", "queued", "started", "running", "finished")


def read_until(conn, done, frames, timeout=WAIT_LIMIT):
    """Read raw frames (bypassing Conn.backlog) into frames as (raw, decoded) until done."""
    end = time.monotonic() + timeout
    while not done(frames):
        assert time.monotonic() < end, "timed out; got %r" % [m for _, m in frames][-30:]
        raw = conn.recv_raw_frame()
        frames.append((raw, msgpack.unpackb(raw, raw=False)))
    return frames


def msgs(frames, rid=None, type=None, phase=None):
    return [m for _, m in frames if (rid is None or m.get("id") == rid) and
            (type is None or m.get("type") == type) and (phase is None or m.get("phase") == phase)]


def has_result(rid):
    return lambda frames: bool(msgs(frames, rid=rid, type="result"))


def execute(conn, code, **extra):
    fields = {"summary": "test", "code": code, "sourceIds": []}
    fields.update(extra)
    return conn.request("execute", **fields)


def check_progress_shape(m):
    assert PROGRESS_KEYS <= set(m) <= PROGRESS_KEYS | PROGRESS_OPTIONAL_KEYS | PROGRESS_NULLABLE_KEYS, m
    for k in set(m) & PROGRESS_NULLABLE_KEYS:
        assert m[k] is None or (isinstance(m[k], int) and not isinstance(m[k], bool) and m[k] >= 0), (k, m)
    assert m["type"] == "progress" and m["phase"] in PHASES, m
    for k in {"id", "callId", "elapsedMs", "stdoutCharacters", "stderrCharacters"} | (set(m) & PROGRESS_OPTIONAL_KEYS):
        assert isinstance(m[k], int) and not isinstance(m[k], bool) and m[k] >= 0, (k, m)
    assert m["queuePosition"] is None or (isinstance(m["queuePosition"], int) and m["queuePosition"] >= 1), m
    assert (m["outcome"] is not None) == (m["phase"] == "finished"), m


# Capacity 1 (so calls queue), fast heartbeats.
SHARED_POLICY = "maxActiveWorkers: 1\nheartbeatMs: 100\ntimeoutMs: 300000\n"


def release(call, frames):
    """call.release(), its callId taken from the frames read so far (read_until reads the
    raw frames: the HeldCall must not read the connection itself)."""
    call.seen(msgs(frames, rid=call.rid, type="progress")[0]["callId"]).release()


def running_frames(frames, rid, n=1, stdout=0):
    """done(frames) for read_until: n running heartbeats of rid, the last counting at
    least stdout characters."""
    def done(fs):
        rs = msgs(fs, rid=rid, phase="running")
        return len(rs) >= n and rs[-1]["stdoutCharacters"] >= stdout
    return done


@pytest.mark.start_mode
def test_phases_arrive_in_order_with_heartbeats(shared_supervisor, shared_conn):
    """The code holds until two heartbeats have come."""
    pconn = shared_conn
    call = start_held(shared_supervisor(), pconn)
    rid = call.rid
    frames = []
    read_until(pconn, running_frames(frames, rid, 2), frames)
    release(call, frames)
    read_until(pconn, has_result(rid), frames)
    ms = [m for _, m in frames]
    assert all(m["id"] == rid for m in ms), ms
    assert ms[-1]["type"] == "result" and ms[-1]["outcome"] == "ok", ms[-1]
    prog = ms[:-1]
    assert all(m["type"] == "progress" for m in prog), ms
    for m in prog:
        check_progress_shape(m)
    phases = [m["phase"] for m in prog]
    assert phases[:3] == ["requested", "queued", "started"], phases
    assert phases[-1] == "finished", phases
    middle = phases[3:-1]
    assert set(middle) <= {"running"}, phases
    # At most one heartbeat per 100 ms (timers never fire early): not one per few ms.
    assert 2 <= len(middle) <= ms[-1]["timing"]["runMs"] // 100 + 2, phases
    assert {m["callId"] for m in ms} == {ms[-1]["callId"]}
    assert prog[-1]["outcome"] == "ok"
    for m in prog[:2]:
        assert isinstance(m["queuePosition"], int) and m["queuePosition"] >= 1, m
    for m in prog[2:]:
        assert m["queuePosition"] is None, m
    elapsed = [m["elapsedMs"] for m in prog]
    assert elapsed == sorted(elapsed), elapsed
    assert elapsed[-1] <= ms[-1]["timing"]["elapsedMs"] + 1


def test_finished_carries_each_outcome(shared_conn):
    pconn = shared_conn
    rid = execute(pconn, "raise ValueError('x')")
    frames = read_until(pconn, has_result(rid), [])
    res = msgs(frames, rid=rid, type="result")[0]
    fin = msgs(frames, rid=rid, phase="finished")
    assert res["outcome"] == "python_exception"
    assert len(fin) == 1 and fin[0]["outcome"] == "python_exception", fin
    assert fin[0]["phase"] == "finished" and msgs(frames)[-1] is res
    assert all(m["outcome"] is None for m in msgs(frames, rid=rid, type="progress") if m["phase"] != "finished")


def test_stdout_and_stderr_characters_grow(shared_supervisor, shared_conn):
    """Five steps of output, each held until a heartbeat has counted it."""
    pconn = shared_conn
    code = (HOLD_SETUP + "import sys\n"
            "for i in range(5):\n"
            "    print('x' * 10, flush=True)\n"
            "    sys.stderr.write('yy\\n'); sys.stderr.flush()\n"
            "    " + HOLD_POINT)
    call = start_held(shared_supervisor(), pconn, code=code)
    rid = call.rid
    frames = []
    for step in range(1, 6):
        read_until(pconn, lambda fs: any(m["stdoutCharacters"] == 11 * step and m["stderrCharacters"] == 3 * step
                                         for m in msgs(fs, rid=rid, phase="running")), frames)
        release(call, frames)
    read_until(pconn, has_result(rid), frames)
    res = msgs(frames, rid=rid, type="result")[0]
    assert res["outcome"] == "ok"
    assert res["stdout"]["totalCharacters"] == 55 and res["stderr"]["totalCharacters"] == 15
    running = msgs(frames, rid=rid, phase="running")
    out = [m["stdoutCharacters"] for m in running]
    err = [m["stderrCharacters"] for m in running]
    assert out == sorted(out) and err == sorted(err), (out, err)
    assert {11, 22, 33, 44, 55} <= set(out) and {3, 6, 9, 12, 15} <= set(err), (out, err)
    assert max(out) <= 55 and max(err) <= 15
    fin = msgs(frames, rid=rid, phase="finished")[0]
    assert (fin["stdoutCharacters"], fin["stderrCharacters"]) == (55, 15), fin  # the final counts


def test_queue_positions(shared_supervisor, shared_conn):
    """queuePosition: 1 + the queued calls that arrived earlier. The blocker holds the
    only worker slot until all three have been queued."""
    pconn = shared_conn
    blocker = start_held(shared_supervisor(), pconn)
    rids = [execute(pconn, "1") for _ in range(3)]
    frames = read_until(pconn, lambda f: all(msgs(f, rid=r, phase="queued") for r in rids), [])
    release(blocker, frames)
    read_until(pconn, lambda f: all(msgs(f, rid=r, type="result") for r in [blocker.rid] + rids), frames)
    assert [m["queuePosition"] for m in msgs(frames, rid=blocker.rid, type="progress")][:2] == [1, 1]
    for k, rid in enumerate(rids):
        pos = [m["queuePosition"] for m in msgs(frames, rid=rid, type="progress")]
        assert pos[:2] == [k + 1, k + 1], (k, pos)
        assert all(p is None for p in pos[2:]), pos
    started = [m["id"] for _, m in frames if m.get("phase") == "started"]
    assert started == [blocker.rid] + rids, started


def test_progress_goes_only_to_the_callers_connection(shared_supervisor, shared_conn):
    """Another connection of the same peer gets none of it: its next reply (sent after
    all of the call's messages) is the first thing it reads."""
    pconn = shared_conn
    other = Conn(shared_supervisor().socket)
    try:
        assert other.call("hello")["type"] == "reply"
        call = start_held(shared_supervisor(), pconn, before="print('a', flush=True)")
        frames = read_until(pconn, running_frames([], call.rid, 1, 2), [])
        release(call, frames)
        read_until(pconn, has_result(call.rid), frames)
        assert len(msgs(frames, type="progress")) >= 5
        rid = other.request("status")
        first = other.recv()
        assert first.get("id") == rid and first["type"] == "reply", first
    finally:
        other.close()


# ---- privacy ----

def _canaries():
    """Distinct markers, each with an ASCII core (searched for) and, where the field
    allows it, a non-ASCII tail (so the UTF-8 bytes differ from the text)."""
    tok = secrets.token_hex(4)
    core = {name: "cnry%s%s" % (name, tok) for name in (
        "Comment", "Literal", "Stdout", "Stderr", "Result", "SrcId", "SrcText", "Origin", "AttId", "AttText",
        "AttOrig", "FileName", "MediaType", "TmpPath", "ExcType", "ExcMsg", "Summary", "Partial", "BadSrc",
        "StdoutExc")}
    full = dict(core)
    for name in ("Comment", "Literal", "Stdout", "Stderr", "Result", "SrcText", "Origin", "AttText", "AttOrig",
                 "FileName", "ExcMsg", "Summary", "Partial", "StdoutExc"):
        full[name] = core[name] + "_\u00df\u03c0\u20ac\U0001f426"
    return core, full


def _rev(s):
    """A Python literal whose reversal is s: the code names the marker without containing it."""
    return repr(s[::-1]) + "[::-1]"


def _find_canaries(data, core, full):
    """Names of the markers whose core or UTF-8 full form occurs in data (bytes)."""
    found = []
    for name in core:
        if core[name].encode() in data or full[name].encode("utf-8") in data:
            found.append(name)
    return found


def _strings_in(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings_in(k)
            yield from _strings_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings_in(v)


# The calls' programs (str.format templates): each marker is named by _rev(), reversed,
# so that the code itself does not contain it.
OK_CODE = """\
# {comment}
import sys, time
literal = {literal}
sid = {sid}
aid = {aid}
src_path = input_files[sid]
assert src_path == '/inputs/' + sid + '.txt', src_path
src_text = open(src_path, encoding='utf-8').read()
att = open('/inputs/' + aid + '.original', 'rb').read()
assert src_text == {src_text}
assert att == {att_orig}.encode()
assert input_assets[aid]['original'] == '/inputs/' + aid + '.original'
assert open(input_assets[aid]['text'], encoding='utf-8').read() == {att_text}
tmp = '/tmp/' + {tmp}
open(tmp, 'w').write(src_text)
for i in range(3):
    print({stdout}, i, flush=True)
    sys.stderr.write({stderr} + '\\n'); sys.stderr.flush()
    time.sleep(0.15)
{result} + ' ' + tmp"""

EXC_CODE = """\
# {comment}
import time
class {exc_type}(Exception):
    pass
print({stdout}, flush=True)
time.sleep(0.3)
raise {exc_type}({exc_msg})"""


def test_progress_and_log_carry_no_user_content(make_supervisor):
    core, full = _canaries()
    sup = make_supervisor("heartbeatMs: 50\ntimeoutMs: 30000\n")
    # Longer than the calls' deadline: a call that does not start in time still ends
    # with a result, whose detail (and the supervisor's log) then says why.
    c = Conn(sup.socket)
    frames = []

    def call(op, **fields):
        rid = c.request(op, **fields)
        read_until(c, lambda f: msgs(f, rid=rid, type="reply") or msgs(f, rid=rid, type="error"), frames)
        return (msgs(frames, rid=rid, type="reply") or msgs(frames, rid=rid, type="error"))[0]

    inv = call("invocation.open")["invocation"]
    r = call("source.put", invocation=inv, sourceId=core["SrcId"], kind="read_source", text=full["SrcText"],
             origin=full["Origin"])
    assert r["type"] == "reply", r
    r = call("source.put", invocation=inv, sourceId=core["AttId"], kind="attachment", text=full["AttText"],
             original=full["AttOrig"].encode(), mediaType="text/" + core["MediaType"], fileName=full["FileName"])
    assert r["type"] == "reply", r

    ok_code = OK_CODE.format(
        comment=full["Comment"], literal=repr(full["Literal"]), sid=_rev(core["SrcId"]), aid=_rev(core["AttId"]),
        src_text=_rev(full["SrcText"]), att_orig=_rev(full["AttOrig"]), att_text=_rev(full["AttText"]),
        tmp=_rev(core["TmpPath"]), stdout=_rev(full["Stdout"]), stderr=_rev(full["Stderr"]),
        result=_rev(full["Result"]))
    exc_code = EXC_CODE.format(comment=full["Comment"], exc_type=core["ExcType"], stdout=_rev(full["StdoutExc"]),
                               exc_msg=_rev(full["ExcMsg"]))
    partial_code = "\n".join([
        "import time",
        "print(%s, flush=True)" % _rev(full["Partial"]),
        "time.sleep(30)",
    ])
    ok = execute(c, ok_code, summary=full["Summary"], invocation=inv, sourceIds=[core["SrcId"], core["AttId"]])
    read_until(c, has_result(ok), frames)
    exc = execute(c, exc_code, summary=full["Summary"], invocation=inv)
    read_until(c, has_result(exc), frames)
    part = execute(c, partial_code, summary=full["Summary"], invocation=inv)
    read_until(c, lambda f: any(m["stdoutCharacters"] > 0 for m in msgs(f, rid=part, phase="running")) or
               has_result(part)(f), frames)
    assert not has_result(part)(frames), msgs(frames, rid=part)
    call_id = msgs(frames, rid=part, phase="started")[0]["callId"]
    assert call("cancel", callId=call_id)["type"] == "reply"
    read_until(c, has_result(part), frames)
    bad = call("execute", summary=full["Summary"], code="1", sourceIds=[core["BadSrc"]], invocation=inv)
    assert bad["type"] == "error" and bad["code"] == "unavailable_source", bad

    # The markers did reach the places where they belong (the scan below is not vacuous).
    r_ok = msgs(frames, rid=ok, type="result")[0]
    assert r_ok["outcome"] == "ok", (r_ok["exception"] or {}).get("traceback", {}).get("text")
    assert full["Stdout"] in r_ok["stdout"]["text"] and full["Stderr"] in r_ok["stderr"]["text"]
    assert full["Result"] in r_ok["result"]["text"] and core["TmpPath"] in r_ok["result"]["text"]
    assert [i["sourceId"] for i in r_ok["evidence"]["inputs"]] == [core["SrcId"], core["AttId"]]
    r_exc = msgs(frames, rid=exc, type="result")[0]
    assert r_exc["outcome"] == "python_exception", r_exc
    assert core["ExcType"] in r_exc["exception"]["type"]
    assert full["ExcMsg"] in r_exc["exception"]["message"]["text"]
    assert full["StdoutExc"] in r_exc["stdout"]["text"]
    r_part = msgs(frames, rid=part, type="result")[0]
    assert r_part["outcome"] == "cancelled" and full["Partial"] in r_part["stdout"]["text"], r_part

    # ... and the scanner finds them where they belong: in the results' raw bytes.
    in_results = set()
    for raw, m in frames:
        if m.get("type") == "result":
            in_results.update(_find_canaries(raw, core, full))
    expected = {"Stdout", "Stderr", "Result", "TmpPath", "SrcId", "AttId", "MediaType", "ExcType", "ExcMsg",
                "StdoutExc", "Partial"}
    assert expected <= in_results, expected - in_results

    progress = [(raw, m) for raw, m in frames if m.get("type") == "progress"]
    phases = {m["phase"] for _, m in progress}
    assert phases == set(PHASES), phases
    assert any(m["stdoutCharacters"] > 0 and m["stderrCharacters"] > 0 for _, m in progress)
    for raw, m in progress:
        check_progress_shape(m)
        leaked = _find_canaries(raw, core, full)
        text = "\n".join(_strings_in(m)).encode("utf-8")
        leaked += _find_canaries(text, core, full)
        assert not leaked, "progress message carries %s: %r" % (sorted(set(leaked)), m)

    # The log, complete: stop the supervisor first (the fixture still checks its exit).
    c.close()
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.proc.wait(WAIT_LIMIT) == 0
    with open(sup.log_path, "rb") as f:
        log = f.read()
    assert b"admitted" in log and b"finished" in log, log  # info level is what we scan
    for n, line in enumerate(log.splitlines()):
        leaked = _find_canaries(line, core, full)
        assert not leaked, "log line %d carries %s: %r" % (n + 1, leaked, line)
