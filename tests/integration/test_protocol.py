"""Core slice: the wire protocol against hostile or careless clients, and peer checks.
After every bad input the same supervisor must still serve a new connection."""
import os
import random
import socket
import stat
import struct
import subprocess
import sys
import textwrap

import msgpack
import pytest

from testlib import CORE_OUTCOMES, WAIT_LIMIT, Conn, check_northstar, frame, raw_frame, status, wait_for

# Hostile bytes against the supervisor's decoder and connection handling: all of it is
# the supervisor's code (asan), the same in every start mode.
pytestmark = pytest.mark.asan


def assert_closed(conn, timeout=WAIT_LIMIT):
    """The supervisor closes the connection (EOF), within timeout."""
    conn.sock.settimeout(timeout)
    try:
        data = conn.sock.recv(1)
    except ConnectionResetError:
        return
    except socket.timeout:
        pytest.fail("the supervisor kept the connection open")
    assert data == b"", "unexpected data: %r" % data


def execute_fields(**over):
    m = {"op": "execute", "id": 42, "summary": "t", "code": "1 + 1", "sourceIds": []}
    m.update(over)
    return {k: v for k, v in m.items() if v is not REMOVE}


REMOVE = object()


# ---- hello and status ----

def test_hello(shared_conn):
    r = shared_conn.call("hello")
    assert r["type"] == "reply" and r["op"] == "hello"
    assert r["id"] == 1
    assert r["protocol"] == 1
    assert set(CORE_OUTCOMES) <= set(r["outcomes"])
    lim = r["limits"]
    assert lim["maxMessageBytes"] == 8388608
    assert lim["maxCodeCharacters"] == 20000
    assert lim["maxSourceIds"] == 4
    assert len(r["policy"]["sha256"]) == 64


def test_status(shared_conn):
    r = shared_conn.call("status")
    assert r["type"] == "reply" and r["op"] == "status"
    for k in ("queued", "running", "capacity", "admittedTotal", "startedTotal", "finishedTotal", "connections",
              "connectionsIdleClosed"):
        assert isinstance(r[k], int), k
    assert r["connections"] >= 1
    assert set(r["connectionsRefused"]) == {"peer_not_allowed", "max_connections", "max_connections_per_peer"}


# ---- framing ----

def test_garbage_frame_then_connection_still_usable(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    shared_conn.send_raw(b"\x00\x00\x00\x05hello")
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    assert r["id"] is None
    # Framing was intact: the same connection still works.
    assert shared_conn.call("hello")["type"] == "reply"
    check_northstar(msup)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes(shared_supervisor, seed):
    msup = shared_supervisor()
    before = status(msup)
    data = random.Random(seed).randbytes(4096)
    c = Conn(msup.socket)
    try:
        c.send_raw(data)
    except OSError:
        pass
    finally:
        c.close()
    check_northstar(msup)
    after = status(msup)
    assert after["startedTotal"] == before["startedTotal"] + 1  # the Northstar call only


def test_random_bytes_small_header(shared_supervisor):
    # A plausible header followed by noise: decoded, refused, connection still framed.
    msup = shared_supervisor()
    c = Conn(msup.socket)
    try:
        body = random.Random(7).randbytes(200)
        c.send_raw(raw_frame(body))
        r = c.recv()
        assert r["type"] == "error" and r["code"] == "invalid_input"
    finally:
        c.close()
    check_northstar(msup)


def test_empty_frame(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    shared_conn.send_raw(b"\x00\x00\x00\x00")
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    check_northstar(msup)


def test_truncated_frame(shared_supervisor):
    msup = shared_supervisor()
    c = Conn(msup.socket)
    c.send_raw(struct.pack(">I", 100) + b"0123456789")
    c.close()
    c = Conn(msup.socket)
    c.send_raw(b"\x00\x00")  # half a header
    c.close()
    check_northstar(msup)


def test_frame_over_max_message_bytes(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    limit = shared_conn.call("hello")["limits"]["maxMessageBytes"]
    shared_conn.send_raw(struct.pack(">I", limit + 1))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    assert r["id"] is None and r["closing"] is True  # the close follows
    assert str(limit + 1) in r["message"]
    assert_closed(shared_conn)
    check_northstar(msup)


def test_frame_at_max_message_bytes_is_read(shared_supervisor, shared_conn):
    # The bound is on the frame, not less: a frame of exactly maxMessageBytes is decoded
    # (and refused for its content: code longer than maxCodeCharacters).
    msup = shared_supervisor()
    limit = shared_conn.call("hello")["limits"]["maxMessageBytes"]
    base = msgpack.packb(execute_fields(code=""), use_bin_type=True)
    pad = limit - len(base) - 4  # "" has a 1-byte header, the padded code a 5-byte one
    body = msgpack.packb(execute_fields(code="x" * pad), use_bin_type=True)
    assert len(body) == limit
    shared_conn.send_raw(raw_frame(body))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input" and r["id"] == 42
    assert "maxCodeCharacters" in r["message"]
    check_northstar(msup)


def test_trailing_bytes_after_map(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    shared_conn.send_raw(raw_frame(msgpack.packb({"op": "hello", "id": 3}) + b"\xc0"))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    check_northstar(msup)


@pytest.mark.parametrize("obj", [[1, 2, 3], "hello", 5, None])
def test_request_not_a_map(shared_supervisor, shared_conn, obj):
    msup = shared_supervisor()
    shared_conn.send_raw(frame(obj))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    assert r["id"] is None and "closing" not in r  # the connection goes on
    assert shared_conn.call("hello")["type"] == "reply"
    check_northstar(msup)


@pytest.mark.parametrize("obj", [{"op": "hello"}, {"op": "hello", "id": "7"}, {"op": "hello", "id": -1},
                                 {"op": "hello", "id": 1.5}])
def test_request_without_valid_id(shared_supervisor, shared_conn, obj):
    msup = shared_supervisor()
    shared_conn.send_raw(frame(obj))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    assert r["id"] is None
    check_northstar(msup)


def test_duplicate_keys(shared_supervisor, shared_conn):
    # {"id": 9, "op": "hello", "id": 10} written by hand: msgpack libraries refuse to.
    msup = shared_supervisor()
    body = b"\x83" + msgpack.packb("id") + msgpack.packb(9) + msgpack.packb("op") + msgpack.packb("hello") + \
        msgpack.packb("id") + msgpack.packb(10)
    shared_conn.send_raw(raw_frame(body))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input"
    check_northstar(msup)


def test_unknown_op(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    shared_conn.send({"op": "frobnicate", "id": 77})
    r = shared_conn.recv()
    assert r == {"id": 77, "type": "error", "code": "invalid_input", "message": r["message"]}
    assert "frobnicate" in r["message"]
    check_northstar(msup)


def test_op_not_a_string(shared_conn):
    shared_conn.send({"op": 1, "id": 5})
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input" and r["id"] == 5


# ---- execute validation: all refused before admission, no worker ----

BAD_EXECUTES = {
    "packages": execute_fields(packages=["numpy"]),
    "cwd": execute_fields(cwd="/"),
    "env": execute_fields(env={"A": "B"}),
    "network": execute_fields(network=True),
    "timeoutMs": execute_fields(timeoutMs=1000000),
    "code-bytes": execute_fields(code=b"1 + 1"),
    "code-int": execute_fields(code=5),
    "code-missing": execute_fields(code=REMOVE),
    "code-empty": execute_fields(code=""),
    "code-whitespace": execute_fields(code="  \n\t\r\n  "),
    "summary-missing": execute_fields(summary=REMOVE),
    "sourceIds-missing": execute_fields(sourceIds=REMOVE),
    "sourceIds-string": execute_fields(sourceIds="a"),
    "sourceIds-map": execute_fields(sourceIds={"a": 1}),
    "sourceIds-five": execute_fields(sourceIds=["a", "b", "c", "d", "e"]),
    "sourceIds-duplicate": execute_fields(sourceIds=["a", "a"]),
    "sourceIds-bad-id": execute_fields(sourceIds=["../etc"]),
    "sourceIds-int": execute_fields(sourceIds=[1]),
    "invocation-empty": execute_fields(invocation=""),
}


@pytest.mark.parametrize("name", sorted(BAD_EXECUTES))
def test_execute_invalid_input(shared_supervisor, shared_conn, name):
    msup = shared_supervisor()
    before = status(msup)
    shared_conn.send(BAD_EXECUTES[name])
    r = shared_conn.recv()
    assert r["type"] == "error", r
    assert r["code"] == "invalid_input", r
    assert r["id"] == 42
    after = status(msup)
    assert after["admittedTotal"] == before["admittedTotal"]
    assert after["startedTotal"] == before["startedTotal"]
    if name in ("packages", "cwd", "env", "network", "timeoutMs"):
        assert name in r["message"]
    check_northstar(msup)


def test_code_not_utf8(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    before = status(msup)
    body = msgpack.packb(execute_fields(code="XY"), use_bin_type=True)
    assert body.count(b"\xa2XY") == 1
    shared_conn.send_raw(raw_frame(body.replace(b"\xa2XY", b"\xa2\xff\xfe")))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "invalid_input" and r["id"] == 42
    assert status(msup)["startedTotal"] == before["startedTotal"]
    check_northstar(msup)


def test_valid_source_ids_without_invocation_are_unavailable(shared_supervisor, shared_conn):
    msup = shared_supervisor()
    before = status(msup)
    shared_conn.send(execute_fields(sourceIds=["a", "b", "c", "d"]))
    r = shared_conn.recv()
    assert r["type"] == "error" and r["code"] == "unavailable_source" and r["id"] == 42
    assert status(msup)["startedTotal"] == before["startedTotal"]


def test_bad_inputs_leave_supervisor_serving(shared_supervisor):
    msup = shared_supervisor()
    check_northstar(msup)


def test_max_code_characters_counts_characters(make_supervisor):
    s = (make_supervisor("maxCodeCharacters: 10\n"))
    c = s.connect()
    ten = "'" + "é" * 8 + "'"
    assert len(ten) == 10 and len(ten.encode()) == 18
    r = c.execute(ten)
    assert r["type"] == "result" and r["outcome"] == "ok", r
    assert r["result"]["text"] == ten
    assert r["evidence"]["codeCharacters"] == 10
    started = c.call("status")["startedTotal"]
    eleven = "'" + "é" * 9 + "'"
    r = c.execute(eleven)
    assert r["type"] == "error" and r["code"] == "invalid_input"
    assert "maxCodeCharacters" in r["message"]
    assert c.call("status")["startedTotal"] == started


# ---- peers ----

PEER_CLIENT = textwrap.dedent("""
    import socket, struct, sys
    import msgpack
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(float(sys.argv[3]))
    try:
        s.connect(sys.argv[1])
    except OSError as e:
        print("connect-errno", e.errno)
        sys.exit(0)
    print("connected")
    if sys.argv[2] == "hello":
        body = msgpack.packb({"op": "hello", "id": 1})
        s.sendall(struct.pack(">I", len(body)) + body)
    def rx(n):
        buf = b""
        while len(buf) < n:
            c = s.recv(n - len(buf))
            if not c:
                raise EOFError
            buf += c
        return buf
    try:
        (n,) = struct.unpack(">I", rx(4))
        m = msgpack.unpackb(rx(n), raw=False)
        print("message", m.get("type"), m.get("code") or m.get("op"))
        if m.get("type") == "error":
            s.settimeout(float(sys.argv[3]))
            rx(1)
            print("more-data")
    except (EOFError, ConnectionResetError):
        print("eof")
    except socket.timeout:
        print("still-open")
""")


# Another uid must be able to run it: Debian's python3 (with python3-msgpack).
PEER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def run_peer(sock_path, uid, gid, hello=True):
    """Run PEER_CLIENT as uid/gid (no supplementary groups); its output lines. Without
    hello it sends nothing and only reads what the supervisor sends on its own (a refusal):
    a request the supervisor never reads could turn its close into a reset."""
    out = subprocess.run([PEER_PYTHON, "-c", PEER_CLIENT, sock_path, "hello" if hello else "quiet", str(WAIT_LIMIT)],
                         capture_output=True, text=True, user=uid, group=gid, extra_groups=[], timeout=3 * WAIT_LIMIT)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")[:-1]


def open_dir(sup):
    # The harness's temporary directory is 0700: let other uids reach the socket file
    # itself, so that only the socket's own mode and the peer check decide.
    os.chmod(sup.dir, 0o755)


def test_socket_mode_0600_refuses_other_uid(make_supervisor):
    s = (make_supervisor())
    open_dir(s)
    st = os.stat(s.socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == 0
    assert run_peer(s.socket, 65534, 65534, hello=False) == ["connect-errno 13"]  # EACCES
    check_northstar(s)


def test_socket_group_0660_and_peer_not_allowed(make_supervisor):
    s = (make_supervisor("socketGroup: 0\n"))
    open_dir(s)
    st = os.stat(s.socket)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert st.st_gid == 0
    # nobody in group 0 may open the socket but is not an allowed peer: refused with
    # permission_denied, then the supervisor closes the connection.
    assert run_peer(s.socket, 65534, 0, hello=False) == ["connected", "message error permission_denied", "eof"]
    check_northstar(s)


def test_allowed_uids(make_supervisor):
    s = (make_supervisor("socketGroup: 0\nallowedUids: [0, 65534]\n"))
    open_dir(s)
    assert run_peer(s.socket, 65534, 0) == ["connected", "message reply hello"]
    # A uid in neither list: refused.
    assert run_peer(s.socket, 65533, 0, hello=False)[:2] == ["connected", "message error permission_denied"]
    check_northstar(s)


def test_refused_peers_do_not_use_connection_slots(make_supervisor):
    s = (make_supervisor("socketGroup: 0\nmaxConnections: 2\nmaxConnectionsPerPeer: 2\n"))
    open_dir(s)
    # The peer opens two connections and waits until both have been refused (it has read
    # the error), then keeps them open.
    hold = ("import socket, struct, sys, time\nheld = []\nfor i in range(2):\n"
            "    x = socket.socket(socket.AF_UNIX)\n    x.settimeout(60)\n    x.connect(sys.argv[1])\n"
            "    n = struct.unpack('>I', x.recv(4, socket.MSG_WAITALL))[0]\n"
            "    x.recv(n, socket.MSG_WAITALL)\n    held.append(x)\n"
            "print('holding', flush=True)\ntime.sleep(3600)\n")
    p = subprocess.Popen([PEER_PYTHON, "-c", hold, s.socket], user=65534, group=0, extra_groups=[],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "holding\n"
        # Refused connections from a peer that is not allowed must not lock the allowed
        # ones out (a retry covers a refused connection that is freed a turn later).
        wait_for(lambda: _hello_ok(s), "an allowed peer to be served (refused: slots held by refused peers?)")
    finally:
        p.kill()
        p.wait()


def test_max_connections(make_supervisor):
    s = make_supervisor("maxConnections: 1\nmaxConnectionsPerPeer: 1\n")
    held = []

    def connect_first():
        # Retried: the supervisor may not listen yet, or not have freed a probe connection.
        try:
            c = Conn(s.socket)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        if c.call("hello").get("type") == "reply":
            held.append(c)
            return True
        c.close()
        return False

    wait_for(connect_first, "the first connection")
    first = held[0]
    second = s.connect()
    r = second.recv()
    assert r["type"] == "error" and r["code"] == "overloaded"
    assert_closed(second)
    first.close()
    wait_for(lambda: _hello_ok(s), "a connection once the first is closed")


def _hello_ok(s):
    c = Conn(s.socket)
    try:
        return c.call("hello").get("type") == "reply"
    except (OSError, EOFError):
        return False
    finally:
        c.close()
