"""Scheduler, cancellation and disconnection (supervisor/scheduler.c, supervisor/server.c):
capacity (maxActiveWorkers), fairness between invocations and connections, the cancel op
and its races with the deadline and with the result, the whole-call deadline while
queued, the memory gate (minAvailableMemoryBytes), and a 1,000-call soak that checks
the supervisor leaks nothing (fds, workers, mounts, zombies).

Everything is observed through the protocol (progress phases, results, the status op)
and /proc, never through timing alone."""
import os
import socket
import threading
import time

import pytest

from testlib import NORTHSTAR, WAIT_LIMIT, WORKER_START, Conn, check_northstar, proc, status, worker_pids_of
from testlib.frames import assert_one_outcome, call_id_of, count, drain, execute_frame, frame, of, one_result, pump
from testlib.waits import start_held, wait_call, wait_for, wait_idle, wait_running, wait_states

# All of it is the supervisor's scheduler (asan); how a worker is asked for differs
# between the start modes (start_mode: the tests where a call is cancelled or times out
# around its worker's start).
pytestmark = pytest.mark.asan


def sleep_code(seconds):
    return "import time; time.sleep(%s)" % seconds


def execute(conn, code, invocation=None):
    fields = {"summary": "test", "code": code, "sourceIds": []}
    if invocation is not None:
        fields["invocation"] = invocation
    return conn.request("execute", **fields)


# ---- supervisors ----

# Capacity 1, long deadline, fast heartbeats; shared by the tests that need a queue.
SUP1_POLICY = "maxActiveWorkers: 1\nheartbeatMs: 100\ntimeoutMs: 300000\n"


def held_calls(sup, n, conns=None, after="1"):
    """n held calls, each on a connection of its own (or on conns[i]), sent in order;
    their callIds are read (so each has been admitted) before the next is sent."""
    calls = []
    for i in range(n):
        call = start_held(sup, conns[i] if conns else sup.connect(), after=after)
        call.call_id
        calls.append(call)
    return calls


# ---- capacity ----

def test_capacity_one_runs_calls_one_at_a_time(shared_supervisor):
    """Three calls, each holding until released: the supervisor runs one, the others
    wait in the queue, and the next starts only once the running one has finished."""
    sup = shared_supervisor(SUP1_POLICY)
    before = status(sup)
    assert before["capacity"] == 1
    calls = held_calls(sup, 3)
    for i, call in enumerate(calls):
        want = ["queued"] * 3
        want[i] = "running"
        wait_states(sup, want[i:], "call %d of 3 running, the later ones queued" % (i + 1))
        call.release()
        assert call.result()["outcome"] == "ok"
    after = status(sup)
    assert after["maxRunningSeen"] == 1, after
    assert after["startedTotal"] - before["startedTotal"] == 3
    assert after["finishedTotal"] - before["finishedTotal"] == 3
    assert after["admittedTotal"] - before["admittedTotal"] == 3


def test_capacity_two_runs_two_at_once(make_supervisor):
    sup = make_supervisor("maxActiveWorkers: 2\nheartbeatMs: 100\n")
    assert status(sup)["capacity"] == 2
    calls = held_calls(sup, 3)
    wait_states(sup, ["running", "running", "queued"], "two running, one queued")
    st = status(sup)
    assert st["running"] == 2 and st["queued"] == 1, st
    assert st["maxRunningSeen"] == 2, st
    pids = sorted(c["workerPid"] for c in st["calls"][:2])
    assert sorted(worker_pids_of(sup)) == pids
    # The third starts only after one of the first two finished.
    calls[0].release()
    assert assert_ok(calls[0].result())
    wait_states(sup, ["running", "running"], "the third running once the first finished")
    for call in calls[1:]:
        call.release()
        assert_ok(call.result())
    st = status(sup)
    assert st["maxRunningSeen"] == 2, st  # never 3
    assert st["running"] == 0 and st["queued"] == 0 and st["startedTotal"] == 3


def assert_ok(r):
    assert r["type"] == "result" and r["outcome"] == "ok", r
    return r


def test_status_lists_each_calls_state(shared_supervisor):
    """status's calls: a queued call as queued without a pid; the running one, once its
    worker has reported its sandbox complete, as running with the worker's host pid
    (the pid its result names); a finished call no longer listed."""
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    blocker = start_held(sup, c)
    pid = blocker.wait_running()
    waiting = c.submit("1")
    w = c.call_id(waiting)
    wait_call(sup, w, "queued")
    calls = {m["callId"]: m for m in status(sup)["calls"]}
    b = blocker.call_id
    assert set(calls) == {b, w}, calls
    assert calls[w] == {"callId": w, "state": "queued", "workerPid": None}, calls
    assert calls[b] == {"callId": b, "state": "running", "workerPid": pid}, calls
    assert pid in worker_pids_of(sup)
    blocker.release()
    assert blocker.result()["exitStatus"]["pid"] == pid
    assert c.wait(waiting)["outcome"] == "ok"
    assert status(sup)["calls"] == []


# ---- fairness ----

@pytest.mark.parametrize("a_kind,b_kind,b_conn", [
    ("invocation", "invocation", "same"),
    ("invocation", "invocation", "other"),
    ("anonymous", "invocation", "same"),
    ("invocation", "anonymous", "same"),
    ("anonymous", "anonymous", "other"),
])
def test_fairness_new_group_is_served_before_a_busy_groups_backlog(shared_supervisor, a_kind, b_kind, b_conn):
    """Group A queues 8 calls, then group B queues 1: B is served in the next turn, not
    after A's backlog. A's first call holds the only slot until B is queued, then goes:
    the next to start must be B."""
    sup = shared_supervisor(SUP1_POLICY)
    c1 = sup.connect()
    c2 = c1 if b_conn == "same" else sup.connect()
    conns = [c1] if b_conn == "same" else [c1, c2]
    b_idx = 0 if b_conn == "same" else 1
    inv_a = c1.call("invocation.open")["invocation"] if a_kind == "invocation" else None
    inv_b = c2.call("invocation.open")["invocation"] if b_kind == "invocation" else None

    first = start_held(sup, c1, invocation=inv_a)
    first.wait_running()
    a_rids = [first.rid] + [execute(c1, "1", inv_a) for _ in range(7)]
    ev = pump(conns, lambda ev: all(count(ev, conn=0, rid=r, phase="queued") == 1 for r in a_rids))
    assert all(count(ev, conn=0, rid=r, type="error") == 0 for r in a_rids), ev
    b_rid = execute(c2, "1", inv_b)
    pump(conns, lambda ev: count(ev, conn=b_idx, rid=b_rid, phase="queued") == 1, ev)
    first.release()
    pump(conns, lambda ev: count(ev, conn=b_idx, rid=b_rid, type="result") == 1, ev)

    assert one_result(ev, b_idx, b_rid)["outcome"] == "ok"
    order = []
    for e in of(ev, phase="started"):
        if e.conn == b_idx and e.m["id"] == b_rid:
            order.append("B")
        elif e.conn == 0 and e.m["id"] in a_rids:
            order.append("A")
    assert order[:2] == ["A", "B"], "B waited behind %d of A's calls: %s" % (order.index("B") - 1, order)
    assert status(sup)["maxRunningSeen"] == 1
    # Closing the connections cancels A's backlog (checked in the disconnect test).


def test_anonymous_calls_of_one_connection_form_one_group(shared_supervisor):
    """The other side of fairness: a connection's anonymous calls share one group, so a
    later anonymous call on the same connection waits its turn (arrival order)."""
    sup = shared_supervisor(SUP1_POLICY)
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
    even groups of that uid that were never served themselves. The blocker holds the
    only slot until all three wait."""
    sup = make_supervisor("maxActiveWorkers: 1\nallowedUids: [0, 65534]\n")
    root = sup.connect()
    nobody = connect_as(sup, 65534)
    assert nobody.call("hello")["type"] == "reply"
    inv_x = root.call("invocation.open")["invocation"]
    inv_y = root.call("invocation.open")["invocation"]
    blocker = start_held(sup, root)
    blocker.wait_running()
    x = execute(root, sleep_code(0.05), inv_x)
    y = execute(root, sleep_code(0.05), inv_y)
    ev = pump([root, nobody], lambda ev: count(ev, conn=0, rid=y, phase="queued") == 1 and
              count(ev, conn=0, rid=x, phase="queued") == 1)
    z = execute(nobody, sleep_code(0.05))
    pump([root, nobody], lambda ev: count(ev, conn=1, rid=z, phase="queued") == 1, ev)
    blocker.release()
    pump([root, nobody], lambda ev: count(ev, type="result") == 4, ev)
    names = {(0, blocker.rid): "blocker", (0, x): "x", (0, y): "y", (1, z): "z"}
    order = [names[(e.conn, e.m["id"])] for e in of(ev, phase="started")]
    assert "call %d admitted (uid 65534," % call_id_of(ev, 1, z) in sup.read_log()
    assert order == ["blocker", "z", "x", "y"], order
    for (i, rid) in names:
        assert assert_one_outcome(ev, i, rid)["outcome"] == "ok"


# ---- cancel ----

def test_cancel_queued_call_never_starts_a_worker(shared_supervisor):
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    blocker = execute(c, sleep_code(3600))
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
    assert r["timing"]["worker"] is None  # no worker, so no way it came
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


@pytest.mark.start_mode
def test_cancel_running_call_kills_the_worker_and_keeps_partial_output(shared_supervisor):
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    rid = execute(c, "print('partial', flush=True)\nimport time\ntime.sleep(3600)\nprint('never')")
    # Wait until the supervisor has the output (a heartbeat shows 8 stdout characters).
    ev = pump([c], lambda ev: any(e.m.get("stdoutCharacters", 0) >= 8 for e in of(ev, rid=rid, phase="running")))
    call = call_id_of(ev, 0, rid)
    pid = wait_running(sup, call)
    cid = c.request("cancel", callId=call)
    pump([c], lambda ev: count(ev, rid=rid, type="result") == 1 and count(ev, rid=cid) == 1, ev)
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
    assert r["exitStatus"]["pid"] == pid, (r["exitStatus"], pid)
    # A call finishes once its worker is reaped.
    assert not proc.alive(pid), "worker %d still alive after the cancel" % pid
    assert not worker_pids_of(sup)

    drain([c], 0.3, ev)
    assert count(ev, rid=rid, type="result") == 1
    # Cancelling it again: it has finished.
    e = c.call("cancel", callId=call)
    assert e["type"] == "error" and e["code"] == "not_found", e


def test_cancel_finished_or_unknown_call_is_not_found(shared_supervisor):
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    p = []
    r = c.execute("1 + 1", progress=p)
    assert r["outcome"] == "ok"
    for call in (r["callId"], r["callId"] + 1000000, 0, 2 ** 63):
        e = c.call("cancel", callId=call)
        assert e["type"] == "error" and e["code"] == "not_found", (call, e)
    # The connection still works.
    assert c.execute(NORTHSTAR)["result"]["text"] == "8.25"


def test_cancel_from_another_connection_is_not_found(shared_supervisor):
    sup = shared_supervisor(SUP1_POLICY)
    owner, other = sup.connect(), sup.connect()
    running = execute(owner, sleep_code(3600))
    queued = execute(owner, sleep_code(3600))
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


@pytest.mark.start_mode
@pytest.mark.parametrize("queued", [False, True], ids=["free-slot", "behind-blocker"])
def test_cancel_right_after_execute(shared_supervisor, queued):
    """The cancel is in the same write as the execute, or follows it within
    milliseconds: before or while the worker is being set up (the delays only vary
    where the cancel lands; every outcome they can give is checked)."""
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    blocker = None
    if queued:
        blocker = execute(c, sleep_code(3600))
        pump([c], lambda ev: count(ev, rid=blocker, phase="started") == 1)
    for delay in (None, 0, 0.001, 0.003, 0.01, 0.03, 0.1):
        call = _predicted_call_id(sup)
        rid, cid = c.next_id, c.next_id + 1
        c.next_id += 2
        cancel = frame({"op": "cancel", "id": cid, "callId": call})
        if delay is None:
            c.send_raw(execute_frame(rid, sleep_code(3600)) + cancel)
        else:
            c.send_raw(execute_frame(rid, sleep_code(3600)))
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
            assert not proc.alive(r["exitStatus"]["pid"]), (delay, r["exitStatus"])  # reaped before the result
    if queued:
        st = status(sup)
        assert st["running"] == 1 and st["queued"] == 0, st  # only the blocker is left
    c.close()  # ends the blocker
    assert wait_idle(sup)["running"] == 0


@pytest.mark.start_mode
@pytest.mark.parametrize("queued", [False, True], ids=["running", "queued"])
def test_cancel_at_the_deadline_gives_exactly_one_outcome(shared_supervisor, queued):
    """cancel arrives around the 300 ms deadline: the call ends exactly once, as timeout
    or cancelled; a cancel that finds it finished gets not_found after the result. (The
    offsets only vary where the cancel lands; every outcome they can give is checked.)"""
    sup = shared_supervisor("maxActiveWorkers: 2\ntimeoutMs: 300\nheartbeatMs: 50\n")
    c = sup.connect()
    try:
        seen = set()
        for offset in (0.25, 0.28, 0.29, 0.295, 0.3, 0.302, 0.305, 0.31, 0.32, 0.35):
            rids = []
            data = b""
            if queued:  # two blockers fill both slots; the target waits behind them
                for _ in range(2):
                    rids.append(c.next_id)
                    data += execute_frame(c.next_id, sleep_code(5))
                    c.next_id += 1
            rid = c.next_id
            c.next_id += 1
            t0 = time.monotonic()
            c.send_raw(data + execute_frame(rid, sleep_code(5)))
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
                assert r["timing"]["elapsedMs"] < 5000  # before the code's own end
            else:
                assert r["timing"]["elapsedMs"] >= 300
                assert "deadline" in r["detail"], r["detail"]
            if not r["timing"]["workerStarted"]:
                assert r["exitStatus"] is None and count(ev, rid=rid, phase="started") == 0
            seen.add((resp.m["type"], r["outcome"], r["timing"]["workerStarted"]))
        print("cancel-vs-deadline cases seen:", sorted(seen))
        st = wait_idle(sup)
        assert not worker_pids_of(sup)
        assert st["running"] == 0 and st["queued"] == 0, st
        assert st["admittedTotal"] == st["finishedTotal"], st
    finally:
        c.close()


def test_cancel_while_the_result_is_being_sent(shared_supervisor):
    """A quick call and a cancel sent a few ms later: either the cancel wins (reply, then
    a cancelled result) or the result was first (result, then not_found). Never both."""
    sup = shared_supervisor(SUP1_POLICY)
    c = sup.connect()
    for delay in (0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3):
        call = _predicted_call_id(sup)
        rid = c.next_id
        c.next_id += 1
        c.send_raw(execute_frame(rid, "6 * 7"))
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

@pytest.mark.start_mode
def test_disconnect_cancels_running_and_queued_calls_promptly(shared_supervisor):
    """Closing the connection kills its running worker (sleeping for an hour: nothing
    else would end it) and drops its queued calls, which never start."""
    sup = shared_supervisor(SUP1_POLICY)
    c = Conn(sup.socket)
    rids = [execute(c, sleep_code(3600)) for _ in range(3)]
    ev = pump([c], lambda ev: count(ev, rid=rids[0], phase="started") == 1 and
              all(count(ev, rid=r, phase="queued") == 1 for r in rids))
    calls = [call_id_of(ev, 0, r) for r in rids]
    worker = wait_running(sup, calls[0])
    before = status(sup)
    assert before["running"] == 1 and before["queued"] == 2, before
    conns_before = before["connections"]  # c and status()'s own

    c.close()
    assert proc.wait_exit(worker), "worker survived its connection"
    after = wait_idle(sup)
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
    c.send_raw(execute_frame(1, sleep_code(5)) + b"".join(execute_frame(r, late) for r in rids[1:]))
    ev = pump([c], lambda ev: count(ev, type="result") == 4)

    holder = assert_one_outcome(ev, 0, 1)
    assert holder["outcome"] == "timeout" and holder["partial"] is True, holder
    assert holder["timing"]["workerStarted"] is True
    assert "running" in holder["detail"]
    # Never early (the supervisor's clock); before the code's own end.
    assert 800 <= holder["timing"]["elapsedMs"] < 5000, holder["timing"]

    queued_timeouts = 0
    for rid in rids[1:]:
        r = assert_one_outcome(ev, 0, rid)
        assert r["outcome"] == "timeout", r
        t = r["timing"]
        assert 800 <= t["elapsedMs"] < 5000, t
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
    """A gate no machine passes: the call waits in the queue until its deadline. Its
    result and progress say it never got a worker; status, asked before the deadline
    could have passed, says it is queued."""
    sup = make_supervisor("minAvailableMemoryBytes: 1099511627776\ntimeoutMs: 1000\nheartbeatMs: 100\n")
    c = sup.connect()
    p = []
    sent = time.monotonic()
    rid = execute(c, "print('must not run')")
    call = c.call_id(rid)
    st = status(sup)
    if time.monotonic() < sent + 1.0:  # answered before the call could time out
        assert st["queued"] == 1 and st["running"] == 0 and st["startedTotal"] == 0, st
        assert st["calls"] == [{"callId": call, "state": "queued", "workerPid": None}], st
    assert not worker_pids_of(sup)
    r = c.wait(rid, types=("result", "error"), progress=p)
    assert r["type"] == "result" and r["outcome"] == "timeout", r
    assert "queued" in r["detail"]
    t = r["timing"]
    assert t["workerStarted"] is False and t["runMs"] == 0 and t["worker"] is None, t
    assert t["queueMs"] == t["elapsedMs"] and t["elapsedMs"] >= 1000, t
    assert r["exitStatus"] is None
    assert [m["phase"] for m in p] == ["requested", "queued", "finished"], p
    st = status(sup)
    assert st["startedTotal"] == 0 and st["queued"] == 0 and st["finishedTotal"] == 1, st


# ---- soak ----

def _zombies(sup):
    out = []
    for child in proc.children(sup.proc.pid):
        if proc.state(child) == "Z":
            out.append(child)
        for grandchild in proc.children(child):  # the zygote's pool
            if proc.state(grandchild) == "Z":
                out.append(grandchild)
    return out


def _settled_fds(pid):
    """The supervisor's descriptor count once two readings 0.2 s apart agree (a closed
    connection is noticed a moment after the client closes it)."""
    def stable():
        a = proc.fd_count(pid)
        time.sleep(0.2)
        return a == proc.fd_count(pid) and a
    return wait_for(stable, "a stable descriptor count")


@pytest.mark.slow
@pytest.mark.start_mode
def test_soak_1000_calls_from_4_clients_leaves_nothing_behind(make_supervisor):
    total = 1000 if WORKER_START == "zygote" else 200
    clients, window = 4, 24
    sup = make_supervisor()
    pid = sup.proc.pid
    check_northstar(sup)  # warm up: the zygote and its pool exist, lazy fds are open

    base = status(sup)
    fds_before = _settled_fds(pid)
    mounts_before = proc.host_mounts()

    per = total // clients
    errors = []
    got = [dict() for _ in range(clients)]

    def client(k):
        try:
            c = Conn(sup.socket)
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
            # Anything more for these calls would be a second result (a slow machine
            # can only hide one here, never invent one).
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
        t.join(10 * WAIT_LIMIT)
    took = time.monotonic() - t0
    assert not any(t.is_alive() for t in threads), "clients did not finish in time"
    assert not errors, errors[:10]
    for k in range(clients):
        assert len(got[k]) == per and all(len(v) == 1 for v in got[k].values())

    after = wait_idle(sup)
    assert not worker_pids_of(sup)
    assert after["finishedTotal"] - base["finishedTotal"] == per * clients, (base, after)
    assert after["admittedTotal"] - base["admittedTotal"] == per * clients
    assert after["startedTotal"] - base["startedTotal"] == per * clients
    assert after["maxRunningSeen"] <= after["capacity"]
    wait_for(lambda: proc.fd_count(pid) == fds_before, lambda: "supervisor fds: %d before, %d after (%s)" % (
        fds_before, proc.fd_count(pid), proc.fd_targets(pid)))
    assert proc.host_mounts() == mounts_before, proc.host_mounts() ^ mounts_before
    wait_for(lambda: not _zombies(sup), lambda: "no zombies: %r" % _zombies(sup))
    assert sup.proc.poll() is None
    check_northstar(sup)
    print("soak: %d calls in %.1f s (%s)" % (per * clients, took, WORKER_START))
