"""Connections are shared: no client holds them all (docs/policy.md, "Connections").

- maxConnectionsPerPeer: one uid's share of maxConnections. A connection past it is
  answered overloaded, naming the key, and closed; other uids still connect and call.
  200 idle connections from root leave a call of nobody's served.
- The policy refuses a share larger than the whole, at --check-policy, naming both keys.
- connectionIdleTimeoutMs: a connection without an invocation or a call, silent that
  long, is told so (an overloaded error with a nil id) and closed: one that never spoke,
  one that did (the timer runs from its last frame), one whose invocation has ended,
  one whose call has finished; never one whose call runs, or whose invocation is open,
  however long. These tests are about time: they sleep past the timeout (300 ms) and
  check that it was not early, never that it was punctual.

The other uid is nobody (nogroup), allowed by allowedUids, on a socket of group
nogroup (mode 0660): the reference configuration only, as root (a rootless
supervisor cannot give its socket to nogroup)."""
import grp
import json
import os
import pwd
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from testlib import DAEMON, ROOTLESS, SOURCE_ROOT, WAIT_LIMIT, Conn, ok, proc, start_held, status, wait_for
from testlib.waits import sleep_past

# The accept path and the per-connection state are the supervisor's code.
pytestmark = pytest.mark.asan

PER_PEER_MESSAGE = "too many connections from this peer (maxConnectionsPerPeer)"
GLOBAL_MESSAGE = "too many connections (maxConnections)"

# The other uid runs Debian's python3 (with python3-msgpack) and the codeinterp package
# from the source tree.
PEER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PYTHON_DIR = os.path.join(SOURCE_ROOT, "python")

# A client of another uid, driven line by line on its stdin (one JSON command per line,
# one JSON answer per line): {"op": "connect"} opens a connection and answers its index;
# {"conn": i, "msg": {...}} sends a request on connection i and answers the reply, error
# or result for its id (or an error with a nil id).
PEER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from codeinterp import Connection
conns = []
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        if cmd.get("op") == "connect":
            conns.append(Connection(sys.argv[2], float(sys.argv[3])))
            out = len(conns) - 1
        else:
            c = conns[cmd["conn"]]
            c.send(cmd["msg"])
            while True:
                m = c.recv()
                if m.get("id") in (cmd["msg"]["id"], None) and m.get("type") in ("reply", "error", "result"):
                    break
            out = m
    except Exception as e:
        out = {"exception": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(out), flush=True)
"""


def nobody():
    return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid


class Peer:
    """PEER running as nobody:nogroup against sup."""

    def __init__(self, sup):
        uid, gid = nobody()
        self.proc = subprocess.Popen([PEER_PYTHON, "-c", PEER, PYTHON_DIR, sup.socket, str(WAIT_LIMIT)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     user=uid, group=gid, extra_groups=[])
        self.next_id = 1

    def ask(self, cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the peer client died (exit status %r)" % self.proc.poll()
        return json.loads(line)

    def connect(self):
        i = self.ask({"op": "connect"})
        assert isinstance(i, int), i
        return i

    def call(self, conn, op, **fields):
        msg = dict(fields, op=op, id=self.next_id)
        self.next_id += 1
        return self.ask({"conn": conn, "msg": msg})

    def execute(self, conn, code):
        return self.call(conn, "execute", summary="peer", code=code, sourceIds=[])

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=WAIT_LIMIT)


@pytest.fixture
def shared_with_nobody(make_supervisor):
    """make_supervisor(policy) for a supervisor that root and nobody may use."""
    if ROOTLESS:
        pytest.skip("the supervisor gives its socket to nogroup: run as root")
    uid, gid = nobody()

    def make(policy):
        s = make_supervisor("allowedUids: [0, %d]\nsocketGroup: %d\n" % (uid, gid) + policy)
        os.chmod(s.dir, 0o711)  # the harness's directory is 0700: let nobody reach the socket
        return s

    return make


def settled(sup):
    """Until the supervisor has freed every connection but the one asking (the start-up
    probe's is freed a turn after it is accepted)."""
    wait_for(lambda: status(sup)["connections"] == 1, "the start-up probe's connection to be freed")


def first_conns(sup, n):
    """n connections of root that the supervisor has accepted (each answered a hello),
    retried while it still frees the connections of the start-up probe."""
    held = []

    def more():
        c = Conn(sup.socket)
        r = c.call("hello")
        if r.get("type") == "reply":
            held.append(c)
        else:
            c.close()
        return len(held) == n

    wait_for(more, "%d accepted connections" % n)
    return held


def refused(conn):
    """The one message of a connection refused at accept (an error with a nil id), after
    which the supervisor closes it."""
    m = conn.recv()
    assert m.get("type") == "error" and m.get("id") is None and m.get("closing") is True, m
    assert_eof(conn.sock)
    return m


def assert_eof(sock):
    sock.settimeout(WAIT_LIMIT)
    try:
        data = sock.recv(1)
    except ConnectionResetError:
        return
    except socket.timeout:
        pytest.fail("the supervisor kept the connection open")
    assert data == b"", "unexpected data: %r" % data


def test_per_peer_cap_names_its_limit_and_leaves_room_for_others(shared_with_nobody):
    s = shared_with_nobody("maxConnections: 3\nmaxConnectionsPerPeer: 2\n")
    mine = first_conns(s, 2)
    # Root's third: its share is spent, the whole is not.
    m = refused(Conn(s.socket))
    assert (m["code"], m["message"]) == ("overloaded", PER_PEER_MESSAGE), m
    # nobody still gets in, and is served.
    peer = Peer(s)
    try:
        theirs = peer.connect()
        assert peer.call(theirs, "hello")["type"] == "reply"
        assert ok(peer.execute(theirs, "6 * 7"))["result"]["text"] == "42"
        # Now the whole is spent as well: the answer names maxConnections.
        m = refused(Conn(s.socket))
        assert (m["code"], m["message"]) == ("overloaded", GLOBAL_MESSAGE), m
        # Counted by reason (root cannot ask now: its share is spent).
        st = peer.call(theirs, "status")
        assert st["connectionsRefused"] == {"peer_not_allowed": 0, "max_connections": 1,
                                            "max_connections_per_peer": 1}, st
    finally:
        peer.close()
    # Root's connections were never touched.
    for c in mine:
        assert c.call("hello")["type"] == "reply"
    # One of root's closed: its share has room again.
    mine.pop().close()
    first_conns(s, 1)


def test_a_closed_connections_room_is_free_for_the_next_at_once(make_supervisor):
    """A client that closes a connection and opens the next at once is not refused: the
    supervisor may see the new connection before the hang-up of the old one (both in one
    event-loop turn, the accept first), and a connection whose client has hung up does
    not count against maxConnections or maxConnectionsPerPeer. Made certain by stopping
    the supervisor (SIGSTOP) while the client opens the next connection (the kernel
    queues it on the listening socket) and then closes the old one, at the limit of both
    keys: the supervisor, continued, finds both in one turn, the new one first."""
    s = make_supervisor("maxConnections: 2\nmaxConnectionsPerPeer: 2\n")
    held = first_conns(s, 1)[0]
    for i in range(20):
        c = Conn(s.socket)
        assert c.call("hello")["type"] == "reply", i
        s.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: proc.state(s.proc.pid) == "T", "codeinterpd to stop")
        after = Conn(s.socket)
        after.send({"op": "hello", "id": 1})
        c.close()
        s.proc.send_signal(signal.SIGCONT)
        r = after.recv()
        assert r.get("type") == "reply", (i, r)
        after.close()
    assert held.call("hello")["type"] == "reply"
    held.close()


class Idle:
    """n connections that send nothing, and what the supervisor does with each: the bytes
    it sent, and whether it has closed it."""

    def __init__(self, path, n):
        self.socks, self.data, self.eof = [], [], []
        for _ in range(n):
            x = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            # Blocking: a full backlog (128) makes a non-blocking connect fail with EAGAIN,
            # a blocking one wait until the supervisor has accepted some (for at most
            # WAIT_LIMIT: SO_SNDTIMEO bounds the wait, which then fails with EAGAIN).
            x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(WAIT_LIMIT), 0))
            x.connect(path)
            x.setblocking(False)
            self.socks.append(x)
            self.data.append(b"")
            self.eof.append(False)

    def read(self):
        """Read what has arrived on each, without waiting; the indexes of the closed ones."""
        for i, x in enumerate(self.socks):
            while not self.eof[i]:
                try:
                    d = x.recv(65536)
                except BlockingIOError:
                    break
                except ConnectionResetError:
                    d = b""
                self.data[i] += d
                self.eof[i] = not d
        return [i for i, e in enumerate(self.eof) if e]

    def close(self):
        for x in self.socks:
            x.close()


def test_200_idle_connections_of_one_uid_do_not_stop_another_uids_calls(shared_with_nobody):
    """Root opens 200 connections and says nothing on them (the idle timeout is an hour
    here, so only the share protects the others): 16 are accepted, every other one is
    answered overloaded naming maxConnectionsPerPeer and closed, and nobody's call is
    served all the while."""
    from codeinterp.connection import decode_body, frame_length

    s = shared_with_nobody("connectionIdleTimeoutMs: 3600000\n")  # the defaults: 64, 16 per peer
    settled(s)
    idle = Idle(s.socket, 200)
    try:
        wait_for(lambda: len(idle.read()) >= 200 - 16, "184 of the 200 connections to be refused")
        closed = idle.read()
        assert len(closed) == 200 - 16, len(closed)
        for i in closed:
            body = idle.data[i][4:]
            assert len(body) == frame_length(idle.data[i][:4]), idle.data[i]
            m = decode_body(body)
            assert (m["type"], m["id"], m["code"], m["message"]) == ("error", None, "overloaded",
                                                                     PER_PEER_MESSAGE), m
        peer = Peer(s)
        try:
            c = peer.connect()
            assert ok(peer.execute(c, "6 * 7"))["result"]["text"] == "42"
            st = peer.call(c, "status")
            assert st["connections"] == 16 + 1, st
            assert st["connectionsRefused"]["max_connections_per_peer"] == 200 - 16, st
        finally:
            peer.close()
        # Root's 16 are still open, and were sent nothing.
        assert len(idle.read()) == 200 - 16
        assert all(idle.data[i] == b"" for i in range(200) if i not in closed)
    finally:
        idle.close()


def test_a_share_above_the_whole_is_refused_at_check_policy(tmp_path):
    bad = tmp_path / "policy.yaml"
    bad.write_text("maxConnections: 32\nmaxConnectionsPerPeer: 33\n")
    r = subprocess.run([DAEMON, "--policy", str(bad), "--check-policy"], capture_output=True, text=True,
                       timeout=WAIT_LIMIT)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "line 2: maxConnectionsPerPeer: maxConnectionsPerPeer (33) must be at most maxConnections (32)" \
        in r.stderr, r.stderr
    # A file written for a smaller maxConnections before the share existed loads: its
    # share is the whole.
    bad.write_text("name: old\nmaxConnections: 8\n")
    r = subprocess.run([DAEMON, "--policy", str(bad), "--check-policy"], capture_output=True, text=True,
                       timeout=WAIT_LIMIT)
    assert r.returncode == 0, (r.returncode, r.stderr)


IDLE_MS = 300
IDLE_POLICY = "connectionIdleTimeoutMs: %d\n" % IDLE_MS
IDLE_MESSAGE = "connection closed: idle for connectionIdleTimeoutMs (%d ms)" % IDLE_MS


def closed_as_idle(conn):
    """The idle answer (after whatever else was pending for conn), then the end of the
    connection; when it came (time.monotonic())."""
    m = conn.wait(None, types=("error",))
    when = time.monotonic()
    assert (m["code"], m["message"], m.get("closing")) == ("overloaded", IDLE_MESSAGE, True), m
    assert_eof(conn.sock)
    return when


def test_an_idle_connection_is_closed_after_the_timeout(make_supervisor):
    s = make_supervisor(IDLE_POLICY)
    # One that never says anything (a leaked socket): the timer runs from its accept.
    t0 = time.monotonic()
    silent = Conn(s.socket)
    assert closed_as_idle(silent) - t0 >= IDLE_MS / 1000
    # One that spoke: from its last frame.
    talked = Conn(s.socket)
    assert talked.call("hello")["type"] == "reply"
    t0 = time.monotonic()
    rid = talked.request("status")
    assert talked.wait(rid)["connectionsIdleClosed"] == 1
    assert closed_as_idle(talked) - t0 >= IDLE_MS / 1000
    assert status(s)["connectionsIdleClosed"] == 2


def test_a_running_call_keeps_its_connection(make_supervisor):
    """A call held in its worker for three timeouts still returns ok on its connection;
    once it has finished, the connection is idle and closed."""
    s = make_supervisor(IDLE_POLICY)
    conn = s.connect()
    h = start_held(s, conn, after="6 * 7")
    h.wait_running()
    sleep_past(time.monotonic(), 3 * IDLE_MS / 1000)
    assert ok(h.finish())["result"]["text"] == "42"
    closed_as_idle(conn)


def test_an_open_invocation_keeps_its_connection(make_supervisor):
    """An invocation outlives three timeouts of silence on its connection; once it is
    closed, the connection is idle and closed."""
    s = make_supervisor(IDLE_POLICY)
    conn = s.connect()
    inv = conn.call("invocation.open")["invocation"]
    sleep_past(time.monotonic(), 3 * IDLE_MS / 1000)
    assert ok(conn.execute("6 * 7", invocation=inv))["result"]["text"] == "42"
    assert conn.call("invocation.close", invocation=inv)["type"] == "reply"
    closed_as_idle(conn)


def test_the_python_clients_reconnect_after_an_idle_close(make_supervisor):
    """A codeinterp.Client (and an AsyncClient) left idle finds its connection closed
    by the supervisor: it held no call and no invocation, so the next request goes to
    a new connection and succeeds; the supervisor counted the idle close."""
    import asyncio

    from codeinterp.aio import AsyncClient

    s = make_supervisor(IDLE_POLICY)
    c = s.client()
    c.hello()
    wait_for(lambda: status(s)["connectionsIdleClosed"] == 1, "the client's connection to be closed as idle")
    assert c.execute("6 * 7", "idle").outcome == "ok"
    c.close()

    async def run():
        async with AsyncClient(s.socket) as a:
            await a.hello()
            closed = status(s)["connectionsIdleClosed"]
            while status(s)["connectionsIdleClosed"] == closed:
                await asyncio.sleep(0.05)  # the event is the counter; polled, bounded below
            r = await asyncio.wait_for(a.execute("6 * 7", "idle"), WAIT_LIMIT)
            assert r.outcome == "ok", r

    asyncio.run(asyncio.wait_for(run(), 4 * WAIT_LIMIT))


@pytest.mark.asan
def test_a_peer_that_stops_reading_is_dropped_when_its_corked_replies_go_out(make_supervisor):
    """Replies are corked and go out together at the end of a request or of a call
    (conn_uncork()). A client that has shut its reading side (shutdown(SHUT_RD)) makes
    that send fail with EPIPE: the connection is dropped there, in either place, the
    call still ends and is counted, and the next client is served."""
    from testlib.frames import execute_frame

    sup = make_supervisor("")
    ok(sup.connect().execute("1"))
    base = status(sup)
    # At a call's end: its worker held, the client stops reading, the code goes on.
    held = start_held(sup)
    held.wait_holding()
    held.conn.sock.shutdown(socket.SHUT_RD)
    held.release()
    wait_for(lambda: status(sup)["outcomes"]["ok"] == base["outcomes"]["ok"] + 1, "the held call's end")
    wait_for(lambda: status(sup)["connections"] == base["connections"], "the reader-less connection dropped")
    held.conn.close()
    # At a request's end: the client stops reading before it sends the request.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sup.socket)
        s.shutdown(socket.SHUT_RD)
        s.sendall(execute_frame(1, "2"))
        wait_for(lambda: status(sup)["connections"] == base["connections"], "the second connection dropped")
    finally:
        s.close()
    assert ok(sup.connect().execute("6 * 7"))["result"]["text"] == "42"
