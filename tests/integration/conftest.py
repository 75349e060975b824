"""Integration harness: a real codeinterpd on a temporary socket, spoken to over the
real protocol (4-byte big-endian length + one msgpack map) through the Python client
(python/codeinterp): Conn is its low-level Connection plus request ids and a backlog,
Supervisor is its testing.Daemon plus this suite's policy defaults."""
import os
import subprocess
import json
import sys
import time

import msgpack
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from codeinterp import Connection  # noqa: E402
from codeinterp.testing import MUST_SANDBOX, Daemon, sandbox_available  # noqa: E402
from codeinterp.testing import require_sandbox as _require_sandbox  # noqa: E402

BUILD = os.environ.get("CODEINTERP_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
DAEMON = os.path.join(BUILD, "bin", "codeinterpd")
CLIENT = os.path.join(BUILD, "bin", "codeinterp")

# Names the test modules import from here (with those defined below).
__all__ = ["MUST_SANDBOX", "require_sandbox", "sandbox_available"]


def _python_facts():
    """The embedded Python this build chose: BUILD/python.json, written by
    cmake/python.cmake (interpreter, version, stdlib, dynload, libdir, runtime binds)."""
    path = os.path.join(BUILD, "python.json")
    if not os.path.exists(path):
        raise RuntimeError("%s is missing: reconfigure the build (cmake -S . -B %s, or make build)" % (path, BUILD))
    with open(path) as f:
        return json.load(f)


PYTHON = _python_facts()


def runtime_ancestors():
    """The directories the worker's root has only because a runtime bind lies below them
    (e.g. /root for a pyenv interpreter): empty tmpfs directories, not the host's."""
    out = set()
    for p in PYTHON["runtime"]:
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            out.add("/" + "/".join(parts[:i]))
    return out


class Conn(Connection):
    """One client connection: frames (send_raw, send, recv, recv_raw_frame, sock) from
    codeinterp.Connection, plus request ids and a backlog of messages read while
    waiting for another request's answer (recv returns those first)."""

    def __init__(self, path, timeout=60):
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
        """Next message for rid whose type is in types; progress messages are collected."""
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

    def execute(self, code, source_ids=(), invocation=None, summary="test", progress=None):
        fields = {"summary": summary, "code": code, "sourceIds": list(source_ids)}
        if invocation is not None:
            fields["invocation"] = invocation
        rid = self.request("execute", **fields)
        return self.wait(rid, types=("error", "result"), progress=progress)


# Which worker start mode the suite runs in (make test runs it in both). A policy
# that names workerStart itself keeps its choice.
WORKER_START = os.environ.get("CODEINTERP_WORKER_START", "zygote")

# Rootless mode (make test-rootless, scripts/test-rootless.sh): every supervisor of the
# suite runs as this unprivileged user, created for the run. Unset: as root.
ROOTLESS_USER = os.environ.get("CODEINTERP_ROOTLESS_USER") or None
ROOTLESS = ROOTLESS_USER is not None


# A supervisor this suite did not start: CODEINTERP_TEST_SOCKET names its socket (the
# installed service under a booted systemd, tests/package/nspawn_e2e.py). The default-
# policy fixtures (supervisor, msup through running_supervisor()) use it; a test that
# needs a supervisor with a policy of its own cannot run against it and fails saying so.
INSTALLED_SOCKET = os.environ.get("CODEINTERP_TEST_SOCKET") or None


class Installed:
    """The installed supervisor: connect() gives a Conn; nothing to start or stop."""

    def __init__(self, path):
        self.socket = path
        self.conns = []

    def connect(self, timeout=60):
        c = Conn(self.socket, timeout)
        self.conns.append(c)
        return c

    def stop(self):
        for c in self.conns:
            c.close()
        return 0


def require_sandbox():
    """codeinterp.testing.require_sandbox for the suite's mode: rootless, whether
    ROOTLESS_USER can create the namespaces (unprivileged user namespaces)."""
    _require_sandbox(ROOTLESS_USER)


class Supervisor(Daemon):
    """codeinterpd from BUILD in the suite's worker start mode; connect() gives a Conn.
    dir, socket, log_path, policy_path, proc, log, conns, read_log() and stop() (which
    returns the exit status) come from codeinterp.testing.Daemon."""

    def __init__(self, policy=None, extra_args=(), prefix=()):
        if policy is None or "workerStart" not in policy:
            policy = "workerStart: %s\n" % WORKER_START + (policy or "")
        super().__init__(DAEMON, policy, extra_args, user=ROOTLESS_USER, prefix=prefix)

    def connect(self, timeout=60):
        c = Conn(self.socket, timeout)
        self.conns.append(c)
        return c

    def client(self, *args, input=None, timeout=60):
        return subprocess.run([CLIENT, "--socket", self.socket] + list(args), input=input,
                              capture_output=True, timeout=timeout)


def pids_named(comm):
    """Live (non-zombie) processes whose name is comm, anywhere on the host."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index(b"(") + 1:stat.rindex(b")")]
        state = stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3]
        if name == comm.encode() and state != b"Z":
            pids.append(int(d))
    return pids


def worker_pids():
    """Workers running a call (both start modes name them ci-worker), host-wide.
    Pre-started zygote workers waiting for a call are named ci-pool."""
    return pids_named("ci-worker")


@pytest.fixture
def make_supervisor(request):
    require_sandbox()
    started = []

    def make(policy=None, extra_args=()):
        if INSTALLED_SOCKET:
            assert policy is None and not extra_args, "needs a supervisor of its own, not the installed one"
            s = Installed(INSTALLED_SOCKET)
            started.append(s)
            return s
        s = Supervisor(policy, extra_args)
        started.append(s)
        return s

    yield make
    rep = getattr(request.node, "rep_call", None)
    for s in started:
        if rep is not None and rep.failed and not INSTALLED_SOCKET:  # shown with the failure: what it said
            print("---- codeinterpd log, %s (last 8000 characters) ----\n%s" % (s.socket, s.read_log()[-8000:]))
        rc = s.stop()
        assert rc == 0, "codeinterpd exited with %r" % rc


@pytest.fixture
def supervisor(make_supervisor):
    return make_supervisor()


@pytest.fixture
def conn(supervisor):
    return supervisor.connect()


# ---- Helpers shared by the core-slice tests (appended; nothing above changed). ----

import contextlib  # noqa: E402

NORTHSTAR = """measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours
"""

# Every outcome the protocol documents (docs/protocol.md, supervisor/protocol.c).
CORE_OUTCOMES = ("ok", "python_exception", "timeout", "cancelled", "invalid_input", "unavailable_source",
                 "quota_exhausted", "resource_limit", "worker_error")


def _ppid(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def descends_from(pid, ancestor):
    """True if ancestor is pid's parent, grandparent, ..."""
    seen = set()
    while pid and pid not in seen:
        seen.add(pid)
        pid = _ppid(pid)
        if pid == ancestor:
            return True
    return False


def worker_pids_of(sup):
    """Workers (worker_pids()) started by this supervisor, directly (exec) or through its
    zygote: other supervisors on the host may be running workers too."""
    return [p for p in worker_pids() if descends_from(p, sup.proc.pid)]


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(predicate, timeout=2.0, interval=0.02):
    """Poll predicate until it is true or timeout passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def wait_no_workers(sup, timeout=2.0):
    """Poll until the supervisor has no worker left; returns the workers still there."""
    left = []

    def none_left():
        left[:] = worker_pids_of(sup)
        return not left

    wait_until(none_left, timeout)
    return left


def wait_ready(sup, timeout=10.0):
    """Wait until the supervisor accepts connections. The socket file appears at bind(),
    a moment before listen(): connecting in between is refused (ECONNREFUSED)."""
    return sup.wait_ready(timeout)


@contextlib.contextmanager
def running_supervisor(policy=None, extra_args=()):
    """A supervisor for a whole module (use from a module-scoped fixture), ready to
    accept connections. Stops it afterwards and checks that it exited 0."""
    if INSTALLED_SOCKET:
        assert policy is None and not extra_args, "needs a supervisor of its own, not the installed one"
        yield Installed(INSTALLED_SOCKET)
        return
    require_sandbox()
    s = Supervisor(policy, extra_args)
    try:
        wait_ready(s)
        yield s
    finally:
        rc = s.stop()
    assert rc == 0, "codeinterpd exited with %r" % rc


def recv_result_frame(conn, rid):
    """(raw bytes, decoded message) of the next result or error frame for rid; progress
    messages are skipped. Bypasses Conn.backlog: call it on a fresh connection."""
    while True:
        raw = conn.recv_raw_frame()
        m = msgpack.unpackb(raw, raw=False)
        if m.get("id") == rid and m.get("type") in ("result", "error"):
            return raw, m


def check_northstar(sup):
    """Assert that a new connection to sup still gets 8.25 from the Northstar calculation."""
    assert sup.proc.poll() is None, "codeinterpd died: " + sup.read_log()[-2000:]
    c = Conn(sup.socket, 30)
    try:
        r = c.execute(NORTHSTAR)
    finally:
        c.close()
    assert r.get("type") == "result" and r.get("outcome") == "ok", r
    assert r["result"]["text"] == "8.25"
    return r


# ---- Shared per-module fixtures and helpers. ----

@pytest.fixture(scope="module")
def msup():
    """One supervisor with the default policy for a whole test module (a module may
    define its own msup with another policy)."""
    with running_supervisor() as s:
        yield s


@pytest.fixture
def mconn(msup):
    c = Conn(msup.socket, 60)
    yield c
    c.close()


def status(sup):
    """The supervisor's status reply: queue counters, pids, zygote generation."""
    c = Conn(sup.socket, 20)
    try:
        r = c.call("status")
    finally:
        c.close()
    assert r["type"] == "reply", r
    return r


# ---- Markers (appended; nothing above changed). ----

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the item (rep_setup, rep_call, rep_teardown), so that a
    fixture's teardown can tell whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test that takes several seconds (fault injection, soaks)")
