"""One supervisor and one connection for every suite: a real codeinterpd from BUILD on a
temporary socket (codeinterp.testing.Daemon, in the run's worker start mode and, under
make test-rootless, as the run's user), and Conn, the low-level protocol connection
with request ids and a backlog."""
import contextlib
import errno
import fcntl
import hashlib
import os
import re
import signal
import subprocess
import tempfile
import time

import pytest

from codeinterp import Client, Connection
from codeinterp.testing import Daemon, sandbox_available
from codeinterp.testing import require_sandbox as _require_sandbox

from . import proc
from .env import CLIENT, DAEMON, INSTALLED_SOCKET, MUST_SANDBOX, ROOTLESS_USER, WAIT_LIMIT, WORKER_START

NORTHSTAR = """measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours
"""

# Every outcome the protocol documents (docs/protocol.md, supervisor/protocol.c).
CORE_OUTCOMES = ("ok", "python_exception", "timeout", "cancelled", "invalid_input", "unavailable_source",
                 "quota_exhausted", "resource_limit", "worker_error")

__all__ = ["sandbox_available"]


def unavailable(why):
    """A prerequisite of the test is missing (a tool, a kernel feature, a controller):
    skip, or fail under CODEINTERP_MUST_SANDBOX=1 (CI), where nothing may be skipped."""
    if MUST_SANDBOX:
        pytest.fail("CODEINTERP_MUST_SANDBOX=1 but " + why)
    pytest.skip(why)


def terminate(p, *signals, timeout=WAIT_LIMIT):
    """End the subprocess.Popen p, unless it has already exited: send signals (SIGTERM
    when none are given), wait up to timeout, then SIGKILL it. Its return code."""
    if p.poll() is None:
        for sig in signals or (signal.SIGTERM,):
            p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def require_sandbox():
    """codeinterp.testing.require_sandbox for the run's mode: rootless, whether
    ROOTLESS_USER can create the namespaces (unprivileged user namespaces)."""
    _require_sandbox(ROOTLESS_USER)


class Conn(Connection):
    """One client connection: frames (send_raw, send, recv, recv_raw_frame, sock) from
    codeinterp.Connection, plus request ids and a backlog of messages read while
    waiting for another request's answer (recv returns those first)."""

    def __init__(self, path, timeout=WAIT_LIMIT):
        super().__init__(path, timeout)
        self.next_id = 1
        self.backlog = []

    def recv(self):
        if self.backlog:
            return self.backlog.pop(0)
        return super().recv()

    def request(self, op, **fields):
        rid = self.next_id
        self.next_id += 1
        msg = {"op": op, "id": rid}
        msg.update(fields)
        self.send(msg)
        return rid

    def wait(self, rid, types=("reply", "error", "result"), progress=None):
        """Next message for rid whose type is in types; progress messages are collected
        into progress when it is a list (else kept in the backlog like the others)."""
        kept = []
        try:
            while True:
                m = self.recv()
                if m.get("id") == rid and m.get("type") == "progress" and progress is not None:
                    progress.append(m)
                    continue
                if (m.get("id") == rid or m.get("id") is None) and m.get("type") in types:
                    return m
                kept.append(m)
        finally:
            self.backlog = kept + self.backlog

    def call(self, op, **fields):
        return self.wait(self.request(op, **fields))

    def submit(self, code, source_ids=(), invocation=None, summary="test", **fields):
        """Send an execute; returns its request id."""
        fields.update(summary=summary, code=code, sourceIds=list(source_ids))
        if invocation is not None:
            fields["invocation"] = invocation
        return self.request("execute", **fields)

    def execute(self, code, source_ids=(), invocation=None, summary="test", progress=None):
        rid = self.submit(code, source_ids, invocation, summary)
        return self.wait(rid, types=("error", "result"), progress=progress)

    def call_id(self, rid):
        """The callId of the execute rid, from its first progress message (read now if
        it has not been); fails if the request ended without being admitted."""
        for m in self.backlog:
            if m.get("id") == rid and m.get("type") in ("progress", "result"):
                return m["callId"]
        m = self.wait(rid, types=("progress", "result", "error"))
        self.backlog.insert(0, m)
        assert m["type"] != "error", m
        return m["callId"]


# Each root supervisor a test starts gets a block of host ids of its own, in a region
# below the default block, unless its policy places its block (workerHostIdBase):
# tests/integration/test_neighbours.py names the default block to prove the host-wide
# leases between supervisors that share it. Private blocks keep what the kernel counts
# per user across a worker's user namespace (RLIMIT_NPROC) from joining two tests'
# workers while a killed supervisor's workers are still leaving (its leases go with it
# at once: see issue 19's notes). Each test process takes a range of its own for the
# blocks of the supervisors it starts, by a lock on a byte of one file, held until it
# exits: two runs on one host (two checkouts, say) never share a range.
HOST_ID_BLOCK = 256
_DEFAULT_HOST_ID_BASE = 0x7ff00000
_PRIVATE_HOST_ID_BASE = 0x7fd00000
_SLOTS_PER_PROCESS = 31
_RANGES = (_DEFAULT_HOST_ID_BASE - _PRIVATE_HOST_ID_BASE) // (HOST_ID_BLOCK * _SLOTS_PER_PROCESS)
_RANGE_LOCK = os.path.join(tempfile.gettempdir(), "codeinterp-host-id-ranges.lock")
_range = None
_started = 0


def _own_range():
    """The first range no other living test process holds; the lock lives as long as
    this process (its descriptor is kept open)."""
    fd = os.open(_RANGE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    for index in range(_RANGES):
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, index)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN):
                continue
            raise
        return fd, index
    raise RuntimeError("every one of the %d host id ranges for tests is held" % _RANGES)


def _host_id_block():
    global _range, _started
    if _range is None:
        _range = _own_range()
    slot = _range[1] * _SLOTS_PER_PROCESS + _started % _SLOTS_PER_PROCESS
    _started += 1
    return "workerHostIdBase: %d\n" % (_PRIVATE_HOST_ID_BASE + slot * HOST_ID_BLOCK)


class _Endpoint:
    """connect() (a Conn) and client() (a codeinterp.Client, the public Python client) to
    self.socket, each kept in self.conns until close_connections()."""

    def connect(self, timeout=WAIT_LIMIT):
        return self._keep(Conn(self.socket, timeout))

    def client(self, timeout=WAIT_LIMIT):
        return self._keep(Client(self.socket, timeout))

    def _keep(self, c):
        self.conns.append(c)
        return c


class Supervisor(_Endpoint, Daemon):
    """codeinterpd from BUILD in the run's worker start mode (a policy that names
    workerStart keeps it) and, rootless, as the run's user; ready for connections when
    the constructor returns. connect() gives a Conn, client() a codeinterp.Client,
    cli() runs the codeinterp command against it. dir, socket, log_path, policy_path,
    proc, log, conns, read_log() and stop() come from codeinterp.testing.Daemon."""

    prefixed = False  # started behind a command that forks (see stop())

    def __init__(self, policy=None, extra_args=(), prefix=(), user=ROOTLESS_USER, binary=DAEMON):
        if policy is None or "workerStart" not in policy:
            policy = "workerStart: %s\n" % WORKER_START + (policy or "")
        if not user and "workerHostIdBase" not in policy:
            policy += ("" if policy.endswith("\n") else "\n") + _host_id_block()
            if "workerHostIdCount" not in policy:
                policy += "workerHostIdCount: %d\n" % HOST_ID_BLOCK
        m = re.search(r"^workerHostIdBase:\s*(\d+)\s*$", policy, re.M)
        self.host_id_base = int(m.group(1)) if m else _DEFAULT_HOST_ID_BASE  # its block's first id
        self.prefixed = bool(prefix)
        super().__init__(binary, policy, extra_args, start_timeout=WAIT_LIMIT, user=user, prefix=prefix)
        try:
            self.wait_ready(WAIT_LIMIT)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self):
        return self.proc.pid

    def cli(self, *args, input=None, timeout=WAIT_LIMIT):
        """The codeinterp command with --socket and args; a CompletedProcess."""
        return subprocess.run([CLIENT, "--socket", self.socket] + list(args), input=input,
                              capture_output=True, timeout=timeout)

    def close_connections(self):
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
        self.conns.clear()

    def stop(self, timeout=15.0):
        """Behind a prefix that forks (unshare --fork), the supervisor is the prefix's
        child and the prefix holds SIGTERM until it ends: the supervisor gets SIGTERM
        itself, and SIGKILL if it outlives the prefix, so that no stop (a failed test's
        included) leaves it running."""
        kids = proc.children(self.proc.pid) if self.prefixed and self.proc.poll() is None else []
        for pid in kids:
            proc.kill_quietly(pid, signal.SIGTERM)
        rc = super().stop(timeout)
        for pid in kids:
            if proc.alive(pid):
                proc.kill_quietly(pid)
                proc.wait_exit(pid)
        return rc


class Installed(_Endpoint):
    """The installed supervisor (CODEINTERP_TEST_SOCKET): connect() and client() as a
    Supervisor's; nothing to start, and stop() only closes the connections."""

    def __init__(self, path):
        self.socket = path
        self.conns = []

    def close_connections(self):
        for c in self.conns:
            c.close()
        self.conns.clear()

    def stop(self):
        self.close_connections()
        return 0



def start(policy=None, extra_args=(), prefix=()):
    """A Supervisor; the installed one (CODEINTERP_TEST_SOCKET) when that is set and the
    default policy will do."""
    if INSTALLED_SOCKET:
        assert policy is None and not extra_args and not prefix, "needs a supervisor of its own, not the installed one"
        return Installed(INSTALLED_SOCKET)
    return Supervisor(policy, extra_args, prefix)


# user.max_user_namespaces and friends are per user namespace, and a namespace created
# inside user namespace U is counted against U's limit (and its ancestors'). The host's
# sysctls are shared with whoever else runs tests on the machine, so a supervisor that
# needs its own runs in a user namespace U of its own (uids and gids 0-65535 mapped to
# themselves, so it is root there and can map workers' host ids, given a block inside
# that range: the default block is not mapped there and the supervisor would refuse to
# start).
USERNS_WRAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
    sys.exit("unshare(CLONE_NEWUSER): %s" % os.strerror(ctypes.get_errno()))
w, r = int(sys.argv[1]), int(sys.argv[2])
os.write(w, b"u")
if os.read(r, 1) != b"m":  # the test has written our uid and gid maps
    sys.exit("no id maps")
os.execv(sys.argv[3], sys.argv[3:])
"""


class UsernsSupervisor(Supervisor):
    """A Supervisor running in a user namespace of its own (USERNS_WRAPPER above);
    RuntimeError when it does not start."""

    def __init__(self, policy):
        self.user = None
        self.dir = tempfile.mkdtemp(prefix="codeinterp-test-")
        self.socket = os.path.join(self.dir, "ci.sock")
        self.log_path = os.path.join(self.dir, "codeinterpd.log")
        self.policy_path = os.path.join(self.dir, "policy.yaml")
        with open(self.policy_path, "w") as f:
            f.write(policy)
        self.log = open(self.log_path, "wb")
        self.conns = []
        to_test, from_child = os.pipe()
        to_child, from_test = os.pipe()
        try:
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", "-c", USERNS_WRAPPER, str(from_child), str(to_child), DAEMON,
                 "--socket", self.socket, "--policy", self.policy_path],
                stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(from_child, to_child))
            os.close(from_child)
            os.close(to_child)
            from_child = to_child = -1
            if os.read(to_test, 1) != b"u":
                raise RuntimeError("the user namespace wrapper failed: " + self.read_log())
            for name in ("uid_map", "gid_map"):
                with open("/proc/%d/%s" % (self.proc.pid, name), "w") as f:
                    f.write("0 0 65536\n")
            os.write(from_test, b"m")
        except BaseException:
            self.stop()
            raise
        finally:
            for fd in (to_test, from_test, from_child, to_child):
                if fd >= 0:
                    os.close(fd)
        deadline = time.monotonic() + WAIT_LIMIT
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.read_log()
                self.stop()
                raise RuntimeError("codeinterpd %s: %s" % ("exited" if self.proc.returncode is not None
                                                            else "did not start", log))
            time.sleep(0.01)


def status(sup):
    """The supervisor's status reply (on a connection of its own). Its answer is also a
    barrier: the event loop has finished whatever it was doing when the request came,
    e.g. removing the cgroup of a call whose result has already arrived."""
    return ask(sup.socket, "status")


def _on_own_connection(sock, fn, timeout=WAIT_LIMIT):
    """fn(c) for a Conn c of its own to sock, closed after."""
    c = Conn(sock, timeout)
    try:
        return fn(c)
    finally:
        c.close()


def ask(sock, request):
    """The reply to one request (with no fields) on a connection of its own to sock."""
    r = _on_own_connection(sock, lambda c: c.call(request))
    assert r["type"] == "reply", r
    return r


def execute_once(sock, code, timeout=WAIT_LIMIT):
    """The result of executing code on a connection of its own to sock (not an error)."""
    r = _on_own_connection(sock, lambda c: c.execute(code), timeout)
    assert r.get("type") == "result", r
    return r


def calls(sup):
    """{callId: {"callId", "state", "workerPid"}} of the calls admitted and unfinished."""
    return {m["callId"]: m for m in status(sup)["calls"]}


def worker_pids():
    """Workers running a call (both start modes name them ci-worker), host-wide.
    Pre-started zygote workers waiting for a call are named ci-pool."""
    return proc.pids_named("ci-worker")


def worker_pids_of(sup):
    """Workers (worker_pids()) started by this supervisor, directly (exec) or through its
    zygote: other supervisors on the host may be running workers too. The host's view,
    independent of what the supervisor says (testlib.waits.wait_running asks it)."""
    return [p for p in worker_pids() if proc.descends_from(p, sup.proc.pid)]


@contextlib.contextmanager
def running_supervisor(policy=None, extra_args=()):
    """A supervisor for a with block; stopped afterwards, and it must have exited 0."""
    if not INSTALLED_SOCKET:
        require_sandbox()
    s = start(policy, extra_args)
    try:
        yield s
    finally:
        rc = s.stop()
    assert rc == 0, "codeinterpd exited with %r" % rc


@contextlib.contextmanager
def stops_cleanly(s):
    """s, a started supervisor (anything whose stop() returns its exit status), for a with
    block: stopped when the block ends, however it ends, and it must have exited 0."""
    try:
        yield s
    finally:
        assert s.stop() == 0


def check_northstar(sup):
    """Assert that a new connection to sup still gets 8.25 from the Northstar calculation."""
    assert sup.proc.poll() is None, "codeinterpd died: " + sup.read_log()[-2000:]
    c = Conn(sup.socket)
    try:
        r = c.execute(NORTHSTAR)
    finally:
        c.close()
    assert r.get("type") == "result" and r.get("outcome") == "ok", r
    assert r["result"]["text"] == "8.25"
    return r


def sha(b):
    """The sha256 hex digest of bytes, or of a str's UTF-8: the digests results and
    evidence carry."""
    if isinstance(b, str):
        b = b.encode("utf-8")
    return hashlib.sha256(b).hexdigest()


def ok(r, text=None):
    """r is a result with outcome ok (and, with text, that value); returns r."""
    assert r.get("type") == "result" and r.get("outcome") == "ok", (
        r.get("type"), r.get("outcome") or r.get("code"), r.get("detail") or r.get("message"), r.get("exception"))
    if text is not None:
        assert r["result"] is not None and r["result"]["text"] == text, r["result"]
    return r


def raised(r, type, message=None):
    """The exception of r, a python_exception of type (whose message is message, when
    given) that shows no result."""
    assert r["outcome"] == "python_exception", r
    exc = r["exception"]
    assert exc["type"] == type
    if message is not None:
        assert exc["message"]["text"] == message
    assert r["result"] is None
    return exc


def value(r):
    """The value text of an ok result."""
    return ok(r)["result"]["text"]
