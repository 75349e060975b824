"""Core slice: the wall-clock deadline and the worker's resource limits. The limits are
set in each start mode's sandbox setup (start_mode); how a call ended is classified by
the supervisor (asan).

Time: a deadline is checked on the supervisor's own clock (elapsedMs) and never early;
how late the kill comes is measured by make bench (docs/performance.md), not asserted
here: a deadline that did not fire shows as the code's own end (a 30 s sleep, an endless
loop ended by another limit), which no load can produce."""
import signal

import pytest

from testlib import Conn, proc, worker_pids_of

pytestmark = [pytest.mark.start_mode, pytest.mark.asan]

TIMEOUT_POLICY = "timeoutMs: 1000\nheartbeatMs: 50\n"
# The deadline is far: a CPU limit must end these calls whatever share of a CPU the
# worker gets on a loaded machine.
LIMITS_POLICY = """memoryBytes: 134217728
cpuSeconds: 1
timeoutMs: 120000
maxFileBytes: 65536
"""


@pytest.fixture
def lconn(shared_supervisor):
    return shared_supervisor(LIMITS_POLICY).connect()


def test_timeout(shared_supervisor):
    timeout_sup = shared_supervisor(TIMEOUT_POLICY)
    c = Conn(timeout_sup.socket)
    try:
        rid = c.request("execute", summary="spin", code="print('before', flush=True)\nwhile True:\n    pass\n",
                        sourceIds=[])
        r = c.wait(rid, types=("result", "error"))
    finally:
        c.close()
    assert r["type"] == "result"
    # Not the CPU limit (cpuSeconds 30 by default): the deadline ended the loop.
    assert r["outcome"] == "timeout", r
    assert r["partial"] is True
    assert r["detail"]
    assert r["timing"]["elapsedMs"] >= 1000, r["timing"]
    # Output printed before the loop is kept.
    assert r["stdout"]["text"] == "before\n"
    assert r["result"] is None
    assert r["exception"] is None
    assert r["exitStatus"]["signal"] == signal.SIGKILL
    # A call finishes once its worker is reaped.
    assert not proc.alive(r["exitStatus"]["pid"]), "worker %d survived the timeout" % r["exitStatus"]["pid"]
    assert worker_pids_of(timeout_sup) == []


def test_timeout_counts_from_admission_and_then_next_call_works(shared_supervisor):
    timeout_sup = shared_supervisor(TIMEOUT_POLICY)
    c = Conn(timeout_sup.socket)
    try:
        r = c.execute("import time\ntime.sleep(30)")
        assert r["outcome"] == "timeout"
        assert 1000 <= r["timing"]["elapsedMs"] < 30000
        r = c.execute("6 * 7")
        assert r["outcome"] == "ok" and r["result"]["text"] == "42"
    finally:
        c.close()


@pytest.mark.parametrize("code", [
    "x = bytearray(10**10)",
    "l = []\nwhile True:\n    l.append('x' * 2**20)",
    "l = []\nwhile True:\n    l.append(bytearray(2**20))",
])
def test_memory_limit(lconn, shared_supervisor, code):
    limits_sup = shared_supervisor(LIMITS_POLICY)
    r = lconn.execute(code)
    assert r["type"] == "result"
    # MemoryError is mapped to the memory limit, not reported as a plain exception.
    assert r["outcome"] == "resource_limit", (r["outcome"], r.get("exception"), r.get("detail"))
    assert r["limit"] == "memory"
    assert r["exception"]["type"] == "MemoryError"
    assert r["result"] is None
    assert worker_pids_of(limits_sup) == []


def test_memory_limit_default_policy(make_supervisor):
    s = make_supervisor()
    c = s.connect()
    r = c.execute("x = bytearray(10**10)")
    assert r["outcome"] == "resource_limit"
    assert r["limit"] == "memory"
    assert r["evidence"]["limits"]["memoryBytes"] == 536870912


def test_memory_below_limit_is_fine(lconn):
    r = lconn.execute("x = bytearray(32 * 2**20)\nlen(x)")
    assert r["outcome"] == "ok" and r["result"]["text"] == str(32 * 2**20)


def test_cpu_limit(lconn, shared_supervisor):
    limits_sup = shared_supervisor(LIMITS_POLICY)
    r = lconn.execute("print('spinning', flush=True)\nwhile True:\n    pass")
    assert r["type"] == "result"
    assert r["outcome"] == "resource_limit", (r["outcome"], r.get("detail"))
    assert r["limit"] == "cpu"
    assert r["partial"] is True
    assert r["stdout"]["text"] == "spinning\n"
    # Ended by RLIMIT_CPU (soft 1 s: SIGXCPU, hard 2 s: SIGKILL), long before timeoutMs.
    assert r["exitStatus"]["signal"] in (signal.SIGXCPU, signal.SIGKILL)
    # About cpuSeconds of CPU was used: rusage's runtime can be below the tick-sampled
    # time the limit counts on a loaded guest (823 ms seen at a 1 s limit).
    assert r["exitStatus"]["cpuMs"] >= 500, r["exitStatus"]
    assert worker_pids_of(limits_sup) == []


def test_cpu_limit_is_the_soft_limit(lconn):
    """cpuSeconds is the CPU time the code gets (docs/policy.md: the soft RLIMIT_CPU, where
    the kernel sends SIGXCPU; the hard limit one second later is only a backstop). Under
    cpuSeconds: 1 a busy loop must end after about one second of CPU, not two."""
    r = lconn.execute("while True:\n    pass")
    assert r["outcome"] == "resource_limit" and r["limit"] == "cpu"
    assert r["exitStatus"]["signal"] in (signal.SIGXCPU, signal.SIGKILL)
    assert r["exitStatus"]["cpuMs"] < 1900, r["exitStatus"]


def test_sleeping_uses_no_cpu_limit(shared_supervisor):
    # Control: a call that waits (no CPU) is ended by the deadline, not the CPU limit.
    timeout_sup = shared_supervisor(TIMEOUT_POLICY)
    c = Conn(timeout_sup.socket)
    try:
        r = c.execute("import time\ntime.sleep(3)")
    finally:
        c.close()
    assert r["outcome"] == "timeout" and r["limit"] is None


def test_file_size_limit(lconn):
    r = lconn.execute("with open('/tmp/x', 'wb') as f:\n    f.write(b'x' * 2**20)")
    assert r["type"] == "result"
    assert r["outcome"] == "resource_limit", (r["outcome"], r.get("exception"))
    assert r["limit"] == "file_size"
    assert r["exception"]["type"] == "OSError"
    assert "[Errno 27]" in r["exception"]["message"]["text"]  # EFBIG


def test_file_below_size_limit_is_fine(lconn):
    r = lconn.execute("with open('/tmp/x', 'wb') as f:\n    f.write(b'x' * 60000)\nopen('/tmp/x', 'rb').read().count(b'x')")
    assert r["outcome"] == "ok" and r["result"]["text"] == "60000"


def test_caught_limit_errors_are_not_outcomes(lconn):
    # The limit outcome describes how the call ended: code that handles the error is ok.
    code = """r = []
try:
    bytearray(10**10)
except MemoryError:
    r.append('MemoryError')
try:
    with open('/tmp/y', 'wb') as f:
        f.write(b'y' * 2**20)
except OSError as e:
    r.append(e.errno)
r
"""
    r = lconn.execute(code)
    assert r["outcome"] == "ok" and r["limit"] is None
    assert r["result"]["text"] == "['MemoryError', 27]"
