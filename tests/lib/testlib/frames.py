"""Frames and the messages they carry: building raw frames, and reading the messages of
one or several connections in arrival order (the scheduler's and the fault suite's
views of "exactly one outcome per call")."""
import select
import struct
import time

import msgpack

from .env import WAIT_LIMIT

FINAL = ("result", "error")


def raw_frame(body):
    """body behind its 4-byte big-endian length."""
    return struct.pack(">I", len(body)) + body


def frame(obj):
    """obj packed as msgpack (bytes as bin) behind its length."""
    return raw_frame(msgpack.packb(obj, use_bin_type=True))


def execute_frame(rid, code, summary="test", source_ids=(), **fields):
    m = {"op": "execute", "id": rid, "summary": summary, "code": code, "sourceIds": list(source_ids)}
    m.update(fields)
    return frame(m)


def recv_result_frame(conn, rid):
    """(raw bytes, decoded message) of the next result or error frame for rid; progress
    messages are skipped. Bypasses Conn.backlog: call it on a fresh connection."""
    while True:
        raw = conn.recv_raw_frame()
        m = msgpack.unpackb(raw, raw=False)
        if m.get("id") == rid and m.get("type") in FINAL:
            return raw, m


def describe(m):
    """One line for a final message: type/outcome: detail."""
    return "%s/%s: %s" % (m.get("type"), m.get("outcome") or m.get("code"), m.get("detail") or m.get("message"))


# ---- several connections, in arrival order ----

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


def pump(conns, done, events=None, timeout=WAIT_LIMIT):
    """Read every message of conns, in arrival order, into events until done(events)."""
    events = [] if events is None else events
    deadline = time.monotonic() + timeout
    while not done(events):
        left = deadline - time.monotonic()
        assert left > 0, "waited %.0f s (the wait limit); received so far: %r" % (timeout, events[-40:])
        events.extend(_read_some(conns, min(left, 0.5)))
    return events


def drain(conns, seconds, events=None):
    """Read whatever arrives on conns during the next `seconds` (a check that nothing
    more comes: it can only pass wrongly on a slow machine, never fail wrongly)."""
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


# ---- exactly one outcome per request id ----

class Outcomes:
    """What collect_outcomes() saw: finals[(conn index, rid)] is the one final message,
    progress[(conn index, rid)] the progress messages, anonymous the errors with id nil,
    closed the connections the supervisor closed."""

    def __init__(self):
        self.finals = {}
        self.progress = {}
        self.anonymous = []
        self.closed = set()

    def get(self, i, rid):
        return self.finals[(i, rid)]


def collect_outcomes(conns, ids, timeout=WAIT_LIMIT, grace=0.3, allow_eof=False, context=None):
    """Read every frame of conns until each request id in ids[i] (the ids sent on
    conns[i]) has a final `result` or `error`, then `grace` seconds more (a second final
    would show there; a slow machine can only hide one, never invent one). Fails if an
    id gets two finals, or if some id has none by the timeout (or when its connection is
    closed first, unless allow_eof). context() is added to a failure's message (the
    supervisor's log)."""
    out = Outcomes()
    others = [[] for _ in conns]
    want = {(i, rid) for i, rs in enumerate(ids) for rid in rs}
    sent = set(want)
    deadline = time.monotonic() + timeout
    grace_end = None

    def take(i, m):
        key = (i, m.get("id"))
        if m.get("type") == "progress":
            out.progress.setdefault(key, []).append(m)
            return
        if m.get("type") not in FINAL or (m.get("id") is not None and key not in sent):
            others[i].append(m)  # replies and other requests' messages: left for Conn.wait
            return
        if m.get("id") is None:
            out.anonymous.append((i, m))
            return
        assert key not in out.finals, "request %r on conn %d got two outcomes:\n%r\n%r" % (
            key[1], i, out.finals[key], m)
        out.finals[key] = m
        want.discard(key)

    for i, c in enumerate(conns):
        while c.backlog:
            take(i, c.backlog.pop(0))
    while True:
        now = time.monotonic()
        if not want and grace_end is None:
            grace_end = now + grace
        if grace_end is not None and now >= grace_end:
            break
        if now >= deadline:
            raise AssertionError("no outcome within %.0f s (the wait limit) for (conn, request id) %r; got %r\n%s" % (
                timeout, sorted(want),
                {k: (v["type"], v.get("outcome") or v.get("code")) for k, v in out.finals.items()},
                context() if context else ""))
        live = [c.sock for i, c in enumerate(conns) if i not in out.closed]
        if not live:
            break
        end = grace_end if grace_end is not None else deadline
        ready, _, _ = select.select(live, [], [], max(0.0, min(end - now, 0.5)))
        for sock in ready:
            i = [c.sock for c in conns].index(sock)
            try:
                m = conns[i].recv()
            except (EOFError, ConnectionResetError):
                out.closed.add(i)
                continue
            take(i, m)
    for i, c in enumerate(conns):
        c.backlog = others[i] + c.backlog
    left = sorted(k for k in want if k[0] in out.closed)
    if left and not allow_eof:
        raise AssertionError("connection closed before (conn, request id) %r got an outcome\n%s" % (
            left, context() if context else ""))
    return out
