"""Scheduler, cancellation and disconnection (supervisor/scheduler.c, supervisor/server.c):
capacity (maxActiveWorkers), fairness between invocations and connections, the cancel op
and its races with the deadline and with the result, the whole-call deadline while
queued, the memory gate (minAvailableMemoryBytes), and a 1,000-call soak that checks
the supervisor leaks nothing (fds, workers, mounts, zombies).

Everything is observed through the protocol (progress phases, results, the status op)
and /proc, never through timing alone."""
import os
import select
import socket
import struct
import threading
import time

import msgpack
import pytest

from conftest import (NORTHSTAR, WORKER_START, Conn, check_northstar, pid_alive, running_supervisor, status,
                      wait_until, worker_pids_of)


def sleep_code(seconds):
    return "import time; time.sleep(%s)" % seconds


# ---- reading several connections in arrival order ----

class Ev:
    """One message as it arrived: receive time, index of the connection, the message."""

    __slots__ = ("t", "conn", "m")

    def __init__(self, t, conn, m):
        self.t, self.conn, self.m = t, conn, m

    def __repr__(self):
        m = self.m
        short = {k: m.get(k) for k in ("id", "type", "callId", "phase", "outcome", "op", "code", "state")
                 if m.get(k) is not None}
        return "<%.3f c%d %r>" % (self.t, self.conn, short)


def _read_some(conns, wait):
    out = []
    for i, c in enumerate(conns):
        while c.backlog:
            out.append(Ev(time.monotonic(), i, c.backlog.pop(0)))
    if out:
        return out
    socks = [c.sock for c in conns]
    ready, _, _ = select.select(socks, [], [], max(0.0, wait))
    for s in ready:
        i = socks.index(s)
        out.append(Ev(time.monotonic(), i, conns[i].recv()))
    return out


def pump(conns, done, events=None, timeout=30.0):
    """Read every message of conns, in arrival order, into events until done(events)."""
    events = [] if events is None else events
    deadline = time.monotonic() + timeout
    while not done(events):
        left = deadline - time.monotonic()
        assert left > 0, "timed out waiting; received so far: %r" % events[-40:]
        events.extend(_read_some(conns, min(left, 0.5)))
    return events


def drain(conns, seconds, events=None):
    """Read whatever arrives on conns during the next `seconds`."""
    events = [] if events is None else events
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        events.extend(_read_some(conns, end - time.monotonic()))
    return events


def of(events, conn=None, rid=None, type=None, phase=None, call_id=None):
    out = []
    for e in events:
        m = e.m
        if conn is not None and e.conn != conn:
            continue
        if rid is not None and m.get("id") != rid:
            continue
        if type is not None and m.get("type") != type:
            continue
        if phase is not None and m.get("phase") != phase:
            continue
        if call_id is not None and m.get("callId") != call_id:
            continue
        out.append(e)
    return out


def count(events, **kw):
    return len(of(events, **kw))


def execute(conn, code, invocation=None):
    fields = {"summary": "test", "code": code, "sourceIds": []}
    if invocation is not None:
        fields["invocation"] = invocation
    return conn.request("execute", **fields)


def frame(obj):
    body = msgpack.packb(obj, use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def exec_frame(rid, code):
    return frame({"op": "execute", "id": rid, "summary": "test", "code": code, "sourceIds": []})


def wait_idle(sup, timeout=5.0):
    """Until the supervisor runs and queues nothing (a previous test's calls are gone)."""
    last = {}

    def idle():
        last.update(status(sup))
        return last["running"] == 0 and last["queued"] == 0

    assert wait_until(idle, timeout, 0.05), "supervisor not idle: %r" % last
    assert wait_until(lambda: not worker_pids_of(sup), timeout), worker_pids_of(sup)
    return last


def call_id_of(events, conn, rid):
    ids = {e.m["callId"] for e in of(events, conn=conn, rid=rid) if e.m.get("type") in ("progress", "result")}
    assert len(ids) == 1, (rid, ids, events)
    return ids.pop()


def one_result(events, conn, rid):
    rs = of(events, conn=conn, rid=rid, type="result")
    assert len(rs) == 1, "expected exactly one result for request %d: %r" % (rid, rs)
    return rs[0].m


def assert_one_outcome(events, conn, rid):
    """Exactly one finished progress and one result, and they agree on the outcome."""
    r = one_result(events, conn, rid)
    fin = of(events, conn=conn, rid=rid, type="progress", phase="finished")
    assert len(fin) == 1, fin
    assert fin[0].m["outcome"] == r["outcome"], (fin, r["outcome"])
    return r


# ---- supervisors ----

SUP1_POLICY = "maxActiveWorkers: 1\nheartbeatMs: 100\ntimeoutMs: 30000\n"


@pytest.fixture(scope="module")
def sup1():
    """Capacity 1, long deadline, fast heartbeats; shared by the tests that need a queue."""
    with running_supervisor(SUP1_POLICY) as s:
        yield s


@pytest.fixture
def idle1(sup1):
    wait_idle(sup1)
    yield sup1
    for c in sup1.conns:
        try:
            c.close()
        except OSError:
            pass
    sup1.conns.clear()


# ---- capacity ----

def test_capacity_one_runs_calls_one_at_a_time(idle1):
    sup = idle1
    before = status(sup)
    assert before["capacity"] == 1
    cs = [sup.connect() for _ in range(3)]
    rids = [execute(c, sleep_code(0.4)) for c in cs]
    ev = pump(cs, lambda ev: count(ev, type="result") == 3)

    spans = []
    for i, rid in enumerate(rids):
        r = assert_one_outcome(ev, i, rid)
        assert r["outcome"] == "ok", r
        st = of(ev, conn=i, rid=rid, phase="started")
        fin = of(ev, conn=i, rid=rid, phase="finished")
        assert len(st) == 1, st
        spans.append((st[0].t, fin[0].t, i))
    spans.sort()
    # A call starts only after the previous one finished (0.4 s sleeps: running at once
    # would overlap by ~0.4 s; the 50 ms allow for reading three sockets in some order).
    for (s0, f0, i0), (s1, f1, i1) in zip(spans, spans[1:]):
        assert s1 >= f0 - 0.05, "call on connection %d started before the one on %d finished: %r" % (i1, i0, spans)
    # Two of the three waited in the queue for the others.
    queued_ms = sorted(one_result(ev, i, rid)["timing"]["queueMs"] for i, rid in enumerate(rids))
    assert queued_ms[1] >= 350 and queued_ms[2] >= 750, queued_ms

    after = status(sup)
    assert after["maxRunningSeen"] == 1, after
    assert after["startedTotal"] - before["startedTotal"] == 3
    assert after["finishedTotal"] - before["finishedTotal"] == 3
    assert after["admittedTotal"] - before["admittedTotal"] == 3


def test_capacity_two_runs_two_at_once(make_supervisor):
    sup = make_supervisor("maxActiveWorkers: 2\nheartbeatMs: 100\n")
    cs = [sup.connect() for _ in range(3)]
    watcher = sup.connect()
    assert watcher.call("status")["capacity"] == 2
    rids = [execute(c, sleep_code(0.6)) for c in cs]

    ev = pump(cs, lambda ev: count(ev, phase="started") >= 2)
    # Two started, none finished yet: both run at this moment.
    assert count(ev, phase="started") == 2 and count(ev, phase="finished") == 0, ev
    st = watcher.call("status")
    assert st["running"] == 2 and st["queued"] == 1, st
    assert st["maxRunningSeen"] == 2, st
    # (A zygote's pre-started worker takes its ci-worker name a moment after "started".)
    assert wait_until(lambda: len(worker_pids_of(sup)) == 2, 5.0), worker_pids_of(sup)

    pump(cs, lambda ev: count(ev, type="result") == 3, ev)
    for i, rid in enumerate(rids):
        assert assert_one_outcome(ev, i, rid)["outcome"] == "ok"
    # The third started only after one of the first two finished.
    starts = sorted((of(ev, conn=i, phase="started")[0].t, i) for i in range(3))
    first_finish = min(of(ev, conn=i, phase="finished")[0].t for _, i in starts[:2])
    assert starts[2][0] >= first_finish - 0.05, ev
    st = watcher.call("status")
    assert st["maxRunningSeen"] == 2, st  # never 3
    assert st["running"] == 0 and st["queued"] == 0 and st["startedTotal"] == 3


def test_status_lists_each_calls_state(idle1):
    """status's calls: a queued call as queued without a pid; the running one, once its
    worker has reported its sandbox complete, as running with the worker's host pid
    (the pid its result names); a finished call no longer listed."""
    sup = idle1
    c = sup.connect()
    blocker = execute(c, "print('in', flush=True)\n" + sleep_code(30))
    waiting = execute(c, "1")
    ev = pump([c], lambda ev: any(e.m.get("stdoutCharacters", 0) >= 3 for e in of(ev, rid=blocker, phase="running"))
              and count(ev, rid=waiting, phase="queued") == 1)
    calls = {m["callId"]: m for m in status(sup)["calls"]}
    b, w = call_id_of(ev, 0, blocker), call_id_of(ev, 0, waiting)
    assert set(calls) == {b, w}, calls
    assert calls[w] == {"callId": w, "state": "queued", "workerPid": None}, calls
    assert calls[b]["state"] == "running" and calls[b]["workerPid"] in worker_pids_of(sup), calls
    c.request("cancel", callId=b)
    ev = pump([c], lambda ev: count(ev, type="result") == 2, ev)
    assert one_result(ev, 0, blocker)["exitStatus"]["pid"] == calls[b]["workerPid"]
    assert status(sup)["calls"] == []


# ---- fairness ----

@pytest.mark.parametrize("a_kind,b_kind,b_conn", [
    ("invocation", "invocation", "same"),
    ("invocation", "invocation", "other"),
    ("anonymous", "invocation", "same"),
    ("invocation", "anonymous", "same"),
    ("anonymous", "anonymous", "other"),
])
def test_fairness_new_group_is_served_before_a_busy_groups_backlog(idle1, a_kind, b_kind, b_conn):
    """Group A queues 8 calls, then group B queues 1: B is served in the next turn, not
    after A's backlog (at most one A call, the one already running, starts before B)."""
    sup = idle1
    c1 = sup.connect()
    c2 = c1 if b_conn == "same" else sup.connect()
    conns = [c1] if b_conn == "same" else [c1, c2]
    b_idx = 0 if b_conn == "same" else 1
    inv_a = c1.call("invocation.open")["invocation"] if a_kind == "invocation" else None
    inv_b = c2.call("invocation.open")["invocation"] if b_kind == "invocation" else None

    a_rids = [execute(c1, sleep_code(0.2), inv_a) for _ in range(8)]
    ev = pump(conns, lambda ev: all(count(ev, conn=0, rid=r, phase="queued") == 1 for r in a_rids))
    assert all(count(ev, conn=0, rid=r, type="error") == 0 for r in a_rids), ev
    b_rid = execute(c2, sleep_code(0.2), inv_b)
    pump(conns, lambda ev: count(ev, conn=b_idx, rid=b_rid, type="result") == 1, ev)

    assert one_result(ev, b_idx, b_rid)["outcome"] == "ok"
    order = []
    for e in of(ev, phase="started"):
        if e.conn == b_idx and e.m["id"] == b_rid:
            order.append("B")
        elif e.conn == 0 and e.m["id"] in a_rids:
            order.append("A")
    assert "B" in order, ev
    a_before_b = order.index("B")
    assert a_before_b <= 1, "B waited behind %d of A's calls: %s" % (a_before_b, order)
    assert status(sup)["maxRunningSeen"] == 1
    # Closing the connections cancels A's backlog (checked in the disconnect test).


def test_anonymous_calls_of_one_connection_form_one_group(idle1):
    """The other side of fairness: a connection's anonymous calls share one group, so a
    later anonymous call on the same connection waits its turn (arrival order)."""
    sup = idle1
    c = sup.connect()
    rids = [execute(c, sleep_code(0.1)) for _ in range(4)]
    ev = pump([c], lambda ev: count(ev, type="result") == 4)
    started = [e.m["id"] for e in of(ev, phase="started")]
    assert started == rids, started
    for rid in rids:
        assert assert_one_outcome(ev, 0, rid)["outcome"] == "ok"


def connect_as(sup, uid):
    """A connection whose peer credentials (SO_PEERCRED: the effective uid at connect())
    are uid: the socket is opened with that effective uid, then root is taken back."""
    os.chmod(sup.dir, 0o711)
    os.chmod(sup.socket, 0o666)
    os.seteuid(uid)
    try:
        c = Conn(sup.socket)
    finally:
        os.seteuid(0)
    sup.conns.append(c)
    return c


def test_fairness_least_recently_served_uid_comes_first(make_supervisor):
    """The outer level: a uid that has not been served goes before another uid's groups,
    even groups of that uid that were never served themselves."""
    sup = make_supervisor("maxActiveWorkers: 1\nallowedUids: [0, 65534]\n")
    root = sup.connect()
    nobody = connect_as(sup, 65534)
    assert nobody.call("hello")["type"] == "reply"
    inv_x = root.call("invocation.open")["invocation"]
    inv_y = root.call("invocation.open")["invocation"]
    blocker = execute(root, sleep_code(0.3))
    x = execute(root, sleep_code(0.05), inv_x)
    y = execute(root, sleep_code(0.05), inv_y)
    ev = pump([root, nobody], lambda ev: count(ev, conn=0, rid=y, phase="queued") == 1 and
              count(ev, conn=0, rid=blocker, phase="started") == 1)
    z = execute(nobody, sleep_code(0.05))
    pump([root, nobody], lambda ev: count(ev, type="result") == 4, ev)
    names = {(0, blocker): "blocker", (0, x): "x", (0, y): "y", (1, z): "z"}
    order = [names[(e.conn, e.m["id"])] for e in of(ev, phase="started")]
    assert "call %d admitted (uid 65534," % call_id_of(ev, 1, z) in sup.read_log()
    assert order == ["blocker", "z", "x", "y"], order
    for (i, rid) in names:
        assert assert_one_outcome(ev, i, rid)["outcome"] == "ok"


# ---- cancel ----

def test_cancel_queued_call_never_starts_a_worker(idle1):
    sup = idle1
    c = sup.connect()
    blocker = execute(c, sleep_code(30))
    target = execute(c, "print('must not run')")
    ev = pump([c], lambda ev: count(ev, rid=blocker, phase="started") == 1 and
              count(ev, rid=target, phase="queued") == 1)
    target_call = call_id_of(ev, 0, target)
    blocker_call = call_id_of(ev, 0, blocker)
    before = status(sup)
    assert before["running"] == 1 and before["queued"] == 1, before

    cid = c.request("cancel", callId=target_call)
    pump([c], lambda ev: count(ev, rid=target, type="result") == 1 and count(ev, rid=cid) == 1, ev)
    rep = of(ev, rid=cid)[0]
    assert rep.m["type"] == "reply" and rep.m["op"] == "cancel", rep.m
    assert rep.m["callId"] == target_call and rep.m["state"] == "queued", rep.m
    res_ev = of(ev, rid=target, type="result")[0]
    assert ev.index(rep) < ev.index(res_ev), "the cancel reply must come before the result: %r" % ev

    r = assert_one_outcome(ev, 0, target)
    assert r["outcome"] == "cancelled", r
    assert r["detail"] == "cancelled while queued"
    assert r["partial"] is False
    assert r["timing"]["workerStarted"] is False and r["timing"]["runMs"] == 0
    assert r["exitStatus"] is None
    assert r["stdout"]["text"] == ""
    phases = [e.m["phase"] for e in of(ev, rid=target, type="progress")]
    assert phases == ["requested", "queued", "finished"], phases
    after = status(sup)
    assert after["startedTotal"] == before["startedTotal"], (before, after)
    assert after["queued"] == 0 and after["running"] == 1, after

    # The blocker is still running; cancel it too (running cancel, see below).
    cid2 = c.request("cancel", callId=blocker_call)
    pump([c], lambda ev: count(ev, rid=blocker, type="result") == 1, ev)
    assert of(ev, rid=cid2)[0].m["state"] == "running"
    assert one_result(ev, 0, blocker)["outcome"] == "cancelled"
    drain([c], 0.3, ev)
    assert count(ev, rid=target, type="result") == 1 and count(ev, rid=blocker, type="result") == 1
    assert status(sup)["startedTotal"] == before["startedTotal"]


def test_cancel_running_call_kills_the_worker_and_keeps_partial_output(idle1):
    sup = idle1
    c = sup.connect()
    rid = execute(c, "print('partial', flush=True)\nimport time\ntime.sleep(30)\nprint('never')")
    # Wait until the supervisor has the output (a heartbeat shows 8 stdout characters).
    ev = pump([c], lambda ev: any(e.m.get("stdoutCharacters", 0) >= 8 for e in of(ev, rid=rid, phase="running")))
    call = call_id_of(ev, 0, rid)
    workers = worker_pids_of(sup)
    assert len(workers) == 1, workers
    t0 = time.monotonic()
    cid = c.request("cancel", callId=call)
    pump([c], lambda ev: count(ev, rid=rid, type="result") == 1 and count(ev, rid=cid) == 1, ev)
    took = time.monotonic() - t0
    rep = of(ev, rid=cid)[0]
    assert rep.m["type"] == "reply" and rep.m["state"] == "running" and rep.m["callId"] == call, rep.m
    assert ev.index(rep) < ev.index(of(ev, rid=rid, type="result")[0]), ev

    r = assert_one_outcome(ev, 0, rid)
    assert r["outcome"] == "cancelled", r
    assert r["detail"] == "cancelled while running"
    assert r["partial"] is True
    assert r["stdout"]["text"] == "partial\n"
    assert r["result"] is None and r["exception"] is None
    assert r["timing"]["workerStarted"] is True
    assert r["exitStatus"]["signal"] == 9 and r["exitStatus"]["code"] is None, r["exitStatus"]
    assert took < 2.0, took
    pid = r["exitStatus"]["pid"]
    assert pid == workers[0], (pid, workers)
    assert wait_until(lambda: not pid_alive(pid), 1.0), "worker %d still alive after the cancel" % pid
    assert not worker_pids_of(sup)

    drain([c], 0.3, ev)
    assert count(ev, rid=rid, type="result") == 1
    # Cancelling it again: it has finished.
    e = c.call("cancel", callId=call)
    assert e["type"] == "error" and e["code"] == "not_found", e


def test_cancel_finished_or_unknown_call_is_not_found(idle1):
    sup = idle1
    c = sup.connect()
    p = []
    r = c.execute("1 + 1", progress=p)
    assert r["outcome"] == "ok"
    for call in (r["callId"], r["callId"] + 1000000, 0, 2 ** 63):
        e = c.call("cancel", callId=call)
        assert e["type"] == "error" and e["code"] == "not_found", (call, e)
    # The connection still works.
    assert c.execute(NORTHSTAR)["result"]["text"] == "8.25"


def test_cancel_from_another_connection_is_not_found(idle1):
    sup = idle1
    owner, other = sup.connect(), sup.connect()
    running = execute(owner, sleep_code(30))
    queued = execute(owner, sleep_code(30))
    ev = pump([owner], lambda ev: count(ev, rid=running, phase="started") == 1 and
              count(ev, rid=queued, phase="queued") == 1)
    for rid in (running, queued):
        call = call_id_of(ev, 0, rid)
        e = other.call("cancel", callId=call)
        assert e["type"] == "error" and e["code"] == "not_found", e
    drain([owner], 0.3, ev)
    assert count(ev, type="result") == 0, "a foreign cancel ended a call: %r" % ev
    st = status(sup)
    assert st["running"] == 1 and st["queued"] == 1, st
    # The owner can.
    for rid in (queued, running):
        assert owner.call("cancel", callId=call_id_of(ev, 0, rid))["type"] == "reply"
    pump([owner], lambda ev: count(ev, type="result") == 2, ev)
    assert {one_result(ev, 0, rid)["outcome"] for rid in (running, queued)} == {"cancelled"}


# ---- races ----

def _predicted_call_id(sup):
    """The next callId: callIds count admitted calls (nothing is refused here)."""
    return status(sup)["admittedTotal"] + 1


@pytest.mark.parametrize("queued", [False, True], ids=["free-slot", "behind-blocker"])
def test_cancel_right_after_execute(idle1, queued):
    """The cancel is in the same write as the execute, or follows it within
    milliseconds: before or while the worker is being set up."""
    sup = idle1
    c = sup.connect()
    blocker = None
    if queued:
        blocker = execute(c, sleep_code(30))
        pump([c], lambda ev: count(ev, rid=blocker, phase="started") == 1)
    for delay in (None, 0, 0.001, 0.003, 0.01, 0.03, 0.1):
        call = _predicted_call_id(sup)
        rid, cid = c.next_id, c.next_id + 1
        c.next_id += 2
        cancel = frame({"op": "cancel", "id": cid, "callId": call})
        if delay is None:
            c.send_raw(exec_frame(rid, sleep_code(30)) + cancel)
        else:
            c.send_raw(exec_frame(rid, sleep_code(30)))
            time.sleep(delay)
            c.send_raw(cancel)
        ev = pump([c], lambda ev: count(ev, rid=rid, type="result") == 1 and count(ev, rid=cid) == 1)
        drain([c], 0.2, ev)
        assert call_id_of(ev, 0, rid) == call, "callId prediction failed: %r" % ev
        rep = of(ev, rid=cid)
        assert len(rep) == 1 and rep[0].m["type"] == "reply", (delay, rep)
        assert rep[0].m["state"] == ("queued" if queued else "running"), (delay, rep[0].m)
        r = assert_one_outcome(ev, 0, rid)
        assert r["outcome"] == "cancelled", (delay, r)
        assert r["timing"]["workerStarted"] is (not queued), (delay, r["timing"])
        if queued:
            assert count(ev, rid=rid, phase="started") == 0
        else:
            assert r["partial"] is True
            pid = r["exitStatus"]["pid"]
            assert wait_until(lambda: not pid_alive(pid), 1.0), (delay, pid)
    if queued:
        st = status(sup)
        assert st["running"] == 1 and st["queued"] == 0, st  # only the blocker is left
    c.close()  # ends the blocker
    assert wait_idle(sup)["running"] == 0


@pytest.fixture(scope="module")
def sup_deadline300():
    with running_supervisor("maxActiveWorkers: 2\ntimeoutMs: 300\nheartbeatMs: 50\n") as s:
        yield s


@pytest.mark.parametrize("queued", [False, True], ids=["running", "queued"])
def test_cancel_at_the_deadline_gives_exactly_one_outcome(sup_deadline300, queued):
    """cancel arrives around the 300 ms deadline: the call ends exactly once, as timeout
    or cancelled; a cancel that finds it finished gets not_found after the result."""
    sup = sup_deadline300
    c = sup.connect()
    try:
        seen = set()
        for offset in (0.25, 0.28, 0.29, 0.295, 0.3, 0.302, 0.305, 0.31, 0.32, 0.35):
            rids = []
            data = b""
            if queued:  # two blockers fill both slots; the target waits behind them
                for _ in range(2):
                    rids.append(c.next_id)
                    data += exec_frame(c.next_id, sleep_code(5))
                    c.next_id += 1
            rid = c.next_id
            c.next_id += 1
            t0 = time.monotonic()
            c.send_raw(data + exec_frame(rid, sleep_code(5)))
            ev = pump([c], lambda ev: count(ev, rid=rid, phase="queued") == 1)
            call = call_id_of(ev, 0, rid)
            time.sleep(max(0.0, t0 + offset - time.monotonic()))
            cid = c.request("cancel", callId=call)
            pump([c], lambda ev: count(ev, rid=rid, type="result") == 1 and count(ev, rid=cid) == 1 and
                 all(count(ev, rid=b, type="result") == 1 for b in rids), ev)
            drain([c], 0.2, ev)

            r = assert_one_outcome(ev, 0, rid)
            for b in rids:
                assert assert_one_outcome(ev, 0, b)["outcome"] == "timeout"
            assert r["outcome"] in ("timeout", "cancelled"), (offset, r)
            resp = of(ev, rid=cid)
            assert len(resp) == 1, resp
            resp = resp[0]
            res_ev = of(ev, rid=rid, type="result")[0]
            if resp.m["type"] == "error":
                assert resp.m["code"] == "not_found", resp.m
                assert r["outcome"] == "timeout", (offset, r)
                assert ev.index(res_ev) < ev.index(resp), "not_found before the result: %r" % ev
            else:
                assert resp.m["type"] == "reply" and resp.m["callId"] == call, resp.m
                assert ev.index(resp) < ev.index(res_ev), ev
            if r["outcome"] == "cancelled":
                assert resp.m["type"] == "reply"
                assert r["timing"]["elapsedMs"] < 1000
            else:
                assert r["timing"]["elapsedMs"] >= 300
                assert "deadline" in r["detail"], r["detail"]
            if not r["timing"]["workerStarted"]:
                assert r["exitStatus"] is None and count(ev, rid=rid, phase="started") == 0
            seen.add((resp.m["type"], r["outcome"], r["timing"]["workerStarted"]))
        print("cancel-vs-deadline cases seen:", sorted(seen))
        assert wait_until(lambda: not worker_pids_of(sup), 2.0)
        st = status(sup)
        assert st["running"] == 0 and st["queued"] == 0, st
        assert st["admittedTotal"] == st["finishedTotal"], st
    finally:
        c.close()


def test_cancel_while_the_result_is_being_sent(idle1):
    """A quick call and a cancel sent a few ms later: either the cancel wins (reply, then
    a cancelled result) or the result was first (result, then not_found). Never both."""
    sup = idle1
    c = sup.connect()
    for delay in (0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3):
        call = _predicted_call_id(sup)
        rid = c.next_id
        c.next_id += 1
        c.send_raw(exec_frame(rid, "6 * 7"))
        time.sleep(delay)
        cid = c.request("cancel", callId=call)
        ev = pump([c], lambda ev: count(ev, rid=rid, type="result") == 1 and count(ev, rid=cid) == 1)
        drain([c], 0.15, ev)
        assert call_id_of(ev, 0, rid) == call
        r = assert_one_outcome(ev, 0, rid)
        resp = of(ev, rid=cid)[0]
        res_ev = of(ev, rid=rid, type="result")[0]
        if resp.m["type"] == "error":
            assert resp.m["code"] == "not_found"
            assert r["outcome"] == "ok" and r["result"]["text"] == "42", r
            assert ev.index(res_ev) < ev.index(resp)
        else:
            assert resp.m["type"] == "reply"
            assert r["outcome"] == "cancelled", r
            assert ev.index(resp) < ev.index(res_ev)
    # After the result has arrived, a cancel is not_found and no second result follows.
    r = c.execute("6 * 7")
    e = c.call("cancel", callId=r["callId"])
    assert e["code"] == "not_found"
    ev = drain([c], 0.3)
    assert count(ev, type="result") == 0, ev


# ---- disconnection ----

def test_disconnect_cancels_running_and_queued_calls_promptly(idle1):
    sup = idle1
    c = Conn(sup.socket)
    rids = [execute(c, sleep_code(60)) for _ in range(3)]
    ev = pump([c], lambda ev: count(ev, rid=rids[0], phase="started") == 1 and
              all(count(ev, rid=r, phase="queued") == 1 for r in rids))
    calls = [call_id_of(ev, 0, r) for r in rids]
    assert wait_until(lambda: len(worker_pids_of(sup)) == 1, 5.0)
    workers = worker_pids_of(sup)
    assert len(workers) == 1, workers
    before = status(sup)
    assert before["running"] == 1 and before["queued"] == 2, before
    conns_before = before["connections"]  # c and status()'s own

    t0 = time.monotonic()
    c.close()
    assert wait_until(lambda: not pid_alive(workers[0]), 1.0), "worker survived its connection"
    gone = time.monotonic() - t0
    assert gone < 1.0, gone
    after = {}

    def settled():
        after.update(status(sup))
        return after["running"] == 0 and after["queued"] == 0
    assert wait_until(settled, 1.0), after
    assert after["connections"] == conns_before - 1, (before, after)
    assert after["finishedTotal"] - before["finishedTotal"] == 3, (before, after)
    assert after["startedTotal"] == before["startedTotal"], "a queued call started after its connection closed"
    assert not worker_pids_of(sup)
    log = sup.read_log()
    assert "call %d finished: cancelled (worker started)" % calls[0] in log, log[-2000:]
    for call in calls[1:]:
        assert "call %d finished: cancelled (no worker)" % call in log, log[-2000:]
    check_northstar(sup)


# ---- the deadline while queued ----

def test_deadline_passes_while_queued(make_supervisor):
    """timeoutMs counts from admission: calls stuck behind a call that runs until its own
    deadline time out in the queue, without a worker."""
    sup = make_supervisor("maxActiveWorkers: 1\ntimeoutMs: 800\nheartbeatMs: 100\n")
    c = sup.connect()
    # The holder and three waiting calls in one write. (The holder's deadline is only a
    # few ms before the waiting calls' (starting the holder's worker delays reading the
    # next frames): the first of them may still get a worker for its last milliseconds,
    # but the slot is then busy again until that worker is reaped, and the later ones,
    # admitted microseconds apart, time out in the queue.)
    rids = list(range(1, 5))
    c.next_id = 5
    late = "print('late', flush=True)\n" + sleep_code(5)
    c.send_raw(exec_frame(1, sleep_code(5)) + b"".join(exec_frame(r, late) for r in rids[1:]))
    ev = pump([c], lambda ev: count(ev, type="result") == 4, timeout=10)

    holder = assert_one_outcome(ev, 0, 1)
    assert holder["outcome"] == "timeout" and holder["partial"] is True, holder
    assert holder["timing"]["workerStarted"] is True
    assert "running" in holder["detail"]
    assert 800 <= holder["timing"]["elapsedMs"] < 2000, holder["timing"]

    queued_timeouts = 0
    for rid in rids[1:]:
        r = assert_one_outcome(ev, 0, rid)
        assert r["outcome"] == "timeout", r
        t = r["timing"]
        assert 800 <= t["elapsedMs"] < 2000, t
        if not t["workerStarted"]:
            queued_timeouts += 1
            assert "queued" in r["detail"], r["detail"]
            assert t["queueMs"] == t["elapsedMs"] and t["runMs"] == 0, t
            assert r["exitStatus"] is None and r["partial"] is False
            assert r["stdout"]["text"] == ""
            assert count(ev, rid=rid, phase="started") == 0
    assert queued_timeouts >= 2, ev
    last = one_result(ev, 0, rids[-1])
    assert last["timing"]["workerStarted"] is False, last["timing"]
    st = c.call("status")
    assert st["running"] == 0 and st["queued"] == 0, st
    assert st["maxRunningSeen"] == 1


# ---- the memory gate ----

def test_memory_gate_holds_calls_in_the_queue(make_supervisor):
    sup = make_supervisor("minAvailableMemoryBytes: 1099511627776\ntimeoutMs: 1000\nheartbeatMs: 100\n")
    c = sup.connect()
    p = []
    rid = execute(c, "print('must not run')")
    time.sleep(0.5)
    st = status(sup)
    assert st["queued"] == 1 and st["running"] == 0 and st["startedTotal"] == 0, st
    assert not worker_pids_of(sup)
    r = c.wait(rid, types=("result", "error"), progress=p)
    assert r["type"] == "result" and r["outcome"] == "timeout", r
    assert "queued" in r["detail"]
    t = r["timing"]
    assert t["workerStarted"] is False and t["runMs"] == 0, t
    assert t["queueMs"] == t["elapsedMs"] and 1000 <= t["elapsedMs"] < 3000, t
    assert r["exitStatus"] is None
    assert [m["phase"] for m in p] == ["requested", "queued", "finished"], p
    st = status(sup)
    assert st["startedTotal"] == 0 and st["queued"] == 0 and st["finishedTotal"] == 1, st


# ---- soak ----

def _fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def _mount_count():
    with open("/proc/self/mountinfo") as f:
        return sum(1 for _ in f)


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _zombies(sup):
    out = []
    for child in _children(sup.proc.pid):
        if _state(child) == "Z":
            out.append(child)
        for grandchild in _children(child):  # the zygote's pool
            if _state(grandchild) == "Z":
                out.append(grandchild)
    return out


def test_soak_1000_calls_from_4_clients_leaves_nothing_behind(make_supervisor):
    total = 1000 if WORKER_START == "zygote" else 200
    clients, window = 4, 24
    sup = make_supervisor()
    pid = sup.proc.pid
    check_northstar(sup)  # warm up: the zygote and its pool exist, lazy fds are open

    base = status(sup)

    def stable_fds():  # no client connected: the supervisor's own constant set
        a = _fd_count(pid)
        time.sleep(0.2)
        return a == _fd_count(pid) and a
    fds_before = wait_until(stable_fds, 3.0)
    assert fds_before
    mounts_before = _mount_count()

    per = total // clients
    errors = []
    got = [dict() for _ in range(clients)]

    def client(k):
        try:
            c = Conn(sup.socket, 60)
            want = {}
            sent = 0
            while sent < per or want:
                while sent < per and len(want) < window:
                    n = k * per + sent
                    rid = c.request("execute", summary="soak", code="n = %d\nn * 3 + 1" % n, sourceIds=[])
                    want[rid] = n
                    sent += 1
                m = c.recv()
                if m["type"] == "progress":
                    continue
                rid = m.get("id")
                if m["type"] != "result" or rid not in want and rid not in got[k]:
                    errors.append((k, m))
                    continue
                got[k].setdefault(rid, []).append(m)
                n = want.pop(rid, None)
                if n is None:
                    errors.append((k, "second result", m))
                elif m["outcome"] != "ok" or m["result"]["text"] != str(n * 3 + 1):
                    errors.append((k, n, m["outcome"], m.get("detail"), m.get("result")))
            # Anything more for these calls would be a second result.
            c.sock.settimeout(0.3)
            try:
                while True:
                    m = c.recv()
                    if m["type"] != "progress":
                        errors.append((k, "late", m))
            except (socket.timeout, TimeoutError):
                pass
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(170)
    took = time.monotonic() - t0
    assert not any(t.is_alive() for t in threads), "clients did not finish in time"
    assert not errors, errors[:10]
    for k in range(clients):
        assert len(got[k]) == per and all(len(v) == 1 for v in got[k].values())

    assert wait_until(lambda: not worker_pids_of(sup), 3.0), worker_pids_of(sup)
    after = wait_idle(sup)
    assert after["finishedTotal"] - base["finishedTotal"] == per * clients, (base, after)
    assert after["admittedTotal"] - base["admittedTotal"] == per * clients
    assert after["startedTotal"] - base["startedTotal"] == per * clients
    assert after["maxRunningSeen"] <= after["capacity"]
    assert wait_until(lambda: _fd_count(pid) == fds_before, 3.0), \
        "supervisor fds: %d before, %d after (%s)" % (fds_before, _fd_count(pid),
                                                      sorted(os.listdir("/proc/%d/fd" % pid), key=int))
    assert wait_until(lambda: _mount_count() == mounts_before, 2.0), (mounts_before, _mount_count())
    assert wait_until(lambda: not _zombies(sup), 2.0), _zombies(sup)
    assert sup.proc.poll() is None
    check_northstar(sup)
    print("soak: %d calls in %.1f s (%s)" % (per * clients, took, WORKER_START))
