"""Fast fresh workers: the zygote and its pre-started workers. These run in zygote
mode whatever CODEINTERP_WORKER_START says; the freshness tests of test_core run in
both modes."""
import os
import signal
import time

import pytest

from conftest import pid_alive, status, wait_until

ZYGOTE = "workerStart: zygote\nzygotePoolSize: 2\nmaxActiveWorkers: 2\n"


@pytest.fixture
def zsup(make_supervisor):
    return make_supervisor(ZYGOTE)


def ok(r):
    assert r["type"] == "result" and r["outcome"] == "ok", r
    return r


def children_of(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def state_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_random_differs_between_calls(zsup):
    c = zsup.connect()
    seen = {ok(c.execute("import random\nrandom.random()"))["result"]["text"] for _ in range(4)}
    assert len(seen) == 4
    # random's other entry points too: a new Random() and randbytes
    seen = {ok(c.execute("import random\nrandom.Random().random(), random.randbytes(8)"))["result"]["text"]
            for _ in range(3)}
    assert len(seen) == 3


def test_interpreter_state_is_pristine_next_call(zsup):
    c = zsup.connect()
    ok(c.execute("import json, math, builtins, sys\n"
                 "json.dumps = lambda *a, **k: 'patched'\n"
                 "math.pi = 3\n"
                 "builtins.len = lambda x: -1\n"
                 "sys.modules['evil'] = math\n"
                 "sys.path.insert(0, '/tmp')\n"
                 "x = 41"))
    r = ok(c.execute("import json, math, sys\n"
                     "(json.dumps([1]), math.pi, len('ab'), 'evil' in sys.modules, '/tmp' in sys.path,"
                     " 'x' in globals())"))
    assert r["result"]["text"] == "('[1]', 3.141592653589793, 2, False, False, False)"


def test_corrupted_interpreter_does_not_leak(zsup):
    c = zsup.connect()
    r = c.execute("import builtins\nfor k in list(vars(builtins)):\n    delattr(builtins, k)\n")
    assert r["type"] == "result" and r["outcome"] in ("ok", "python_exception")
    r = c.execute("import sys\nsys.modules.clear()\nimport gc\ngc.disable()\nsum(range(10))")
    assert r["type"] == "result"
    ok(c.execute("import gc\ngc.isenabled() and len(__builtins__.__dict__ if hasattr(__builtins__, '__dict__') "
                 "else __builtins__) > 100"))
    assert ok(c.execute("sum([9.0, 7.5]) / 2"))["result"]["text"] == "8.25"


def test_hash_seed_is_fixed_within_a_zygote_generation(zsup):
    # Documented: workers of one zygote share its string hash seed (docs/security.md).
    c = zsup.connect()
    a = ok(c.execute("hash('codeinterp')"))["result"]["text"]
    b = ok(c.execute("hash('codeinterp')"))["result"]["text"]
    assert a == b


def test_zygote_killed_while_calls_are_queued(make_supervisor):
    sup = make_supervisor("workerStart: zygote\nzygotePoolSize: 1\nmaxActiveWorkers: 1\n")
    st = status(sup)
    zpid = st["zygotePid"]
    assert zpid and pid_alive(zpid)
    c = sup.connect()
    # One running call holds the only slot; three more wait in the queue.
    first = c.request("execute", summary="t", code="import time\ntime.sleep(0.5)\n'first'", sourceIds=[])
    queued = [c.request("execute", summary="t", code="%d * 2" % i, sourceIds=[]) for i in range(3)]
    time.sleep(0.1)
    os.kill(zpid, signal.SIGKILL)
    results = [c.wait(rid, types=("result", "error")) for rid in [first] + queued]
    assert [r["type"] for r in results] == ["result"] * 4
    assert results[0]["outcome"] == "ok" and results[0]["result"]["text"] == "'first'"
    assert [r["result"]["text"] for r in results[1:]] == ["0", "2", "4"]
    st = status(sup)
    assert st["zygotePid"] != zpid and st["zygoteGeneration"] >= 2
    # The dead zygote's pre-started workers are gone and reaped: no zombie children.
    sup_pid = sup.proc.pid
    assert wait_until(lambda: all(state_of(p) != "Z" for p in children_of(sup_pid)), 3.0)


def test_zygote_holds_no_client_or_call_descriptors(zsup):
    st = status(zsup)
    zpid, spid = st["zygotePid"], st["pid"]
    c = zsup.connect()
    rid = c.request("execute", summary="t", code="import time\ntime.sleep(0.6)\nprint('x')", sourceIds=[])
    time.sleep(0.3)  # the call is running: its pipes exist now

    def targets(pid):
        out = {}
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
        return out

    z = targets(zpid)
    s = targets(spid)
    assert not [t for t in z.values() if t.startswith("pipe:")], z
    sup_sockets = {t for t in s.values() if t.startswith("socket:")}
    assert not sup_sockets & {t for t in z.values() if t.startswith("socket:")}, (z, s)
    assert ok(c.wait(rid))["stdout"]["text"] == "x\n"


def test_zygote_is_replaced_after_max_calls(make_supervisor):
    sup = make_supervisor("workerStart: zygote\nzygoteMaxCalls: 3\nzygotePoolSize: 1\n")
    c = sup.connect()
    first = status(sup)
    for i in range(7):
        assert ok(c.execute("%d" % i))["result"]["text"] == str(i)
    later = status(sup)
    assert later["zygoteGeneration"] >= first["zygoteGeneration"] + 2
    assert later["zygotePid"] != first["zygotePid"]
    assert not pid_alive(first["zygotePid"])


def test_pool_workers_are_used_once(zsup):
    c = zsup.connect()
    pids = [ok(c.execute("1"))["exitStatus"]["pid"] for _ in range(5)]
    assert len(set(pids)) == 5


def test_loop_serves_while_a_zygote_starts(make_supervisor):
    """A new zygote starts in the background: the supervisor keeps answering (and
    keeps enforcing deadlines) while it does, and queued calls start once it is ready."""
    sup = make_supervisor("workerStart: zygote\nzygotePoolSize: 1\n")
    zpid = status(sup)["zygotePid"]
    os.kill(zpid, signal.SIGKILL)
    seen = []
    c = sup.connect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        r = c.call("status")
        seen.append(r["zygoteReady"])
        if seen[-1] and False in seen:
            break
        time.sleep(0.005)
    assert False in seen, "never saw the supervisor answer while no zygote was ready"
    assert seen[-1] is True
    assert ok(c.execute("6 * 7"))["result"]["text"] == "42"


def comm_of(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def test_pool_is_refilled_between_calls_not_during_them(zsup):
    """Preparing a worker slows a running call's page faults on a virtualised host, so
    the zygote refills its pool only when the supervisor says nothing runs."""
    st = status(zsup)
    sup_pid, zpid = st["pid"], st["zygotePid"]

    def pool():
        return {p for p in children_of(sup_pid) if p != zpid and comm_of(p) == "ci-pool"}

    assert wait_until(lambda: len(pool()) == 2, 10.0), pool()
    before = pool()
    c = zsup.connect()
    rid = c.request("execute", summary="t", code="import time\ntime.sleep(1.0)\n'done'", sourceIds=[])
    assert wait_until(lambda: len(pool()) == 1, 5.0)
    running = [p for p in children_of(sup_pid) if comm_of(p) == "ci-worker"]
    assert len(running) == 1 and running[0] in before
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        others = set(children_of(sup_pid)) - {zpid} - set(running)
        assert others <= before, "a worker was cloned while a call ran: %r" % (others - before)
        time.sleep(0.01)
    assert ok(c.wait(rid))["result"]["text"] == "'done'"
    assert wait_until(lambda: len(pool()) == 2, 10.0), pool()
    assert not pool() <= before  # a new worker was prepared once the call was over


def test_supervisor_answers_while_the_zygote_does_not(make_supervisor):
    """A spawn request does not block the event loop: with the zygote stopped, other
    requests are answered at once and a queued call's deadline still ends it on time
    (no worker was ever made for it)."""
    sup = make_supervisor(ZYGOTE + "timeoutMs: 800\n")
    st = status(sup)
    zpid, sup_pid = st["zygotePid"], st["pid"]
    os.kill(zpid, signal.SIGSTOP)
    try:
        c = sup.connect()
        t0 = time.monotonic()
        rid = c.request("execute", summary="t", code="'never'", sourceIds=[])
        assert c.wait(rid, types=("progress",))["type"] == "progress"  # admitted, spawn asked for
        other = sup.connect()
        s = other.call("status")
        assert time.monotonic() - t0 < 0.5, "status waited for the zygote"
        assert s["running"] == 1
        r = c.wait(rid)
        elapsed = time.monotonic() - t0
        assert r["outcome"] == "timeout" and r["timing"]["workerStarted"] is False, r
        assert r["exitStatus"] is None
        assert 0.7 < elapsed < 2.5, elapsed
    finally:
        os.kill(zpid, signal.SIGCONT)
    # The zygote answers the abandoned request late: that worker never runs the call
    # and is killed and reaped; the next call is served normally.
    c2 = sup.connect()
    assert ok(c2.execute("6 * 7"))["result"]["text"] == "42"
    assert status(sup)["zygotePid"] == zpid
    assert wait_until(lambda: all(state_of(p) != "Z" for p in children_of(sup_pid)), 10.0)
    # The abandoned worker is killed when the late answer arrives and reaped as a stray.
    assert wait_until(lambda: not [p for p in children_of(sup_pid) if comm_of(p) == "ci-worker"], 10.0)


def test_a_zygote_that_stops_answering_is_replaced(make_supervisor):
    """A spawn request unanswered for 5 s replaces the zygote; the call is not lost."""
    sup = make_supervisor(ZYGOTE)
    zpid = status(sup)["zygotePid"]
    os.kill(zpid, signal.SIGSTOP)
    c = sup.connect()
    t0 = time.monotonic()
    r = ok(c.execute("'served'"))
    assert r["result"]["text"] == "'served'"
    assert 4.5 < time.monotonic() - t0 < 15
    st = status(sup)
    assert st["zygotePid"] != zpid and st["zygoteGeneration"] >= 2
    assert wait_until(lambda: not pid_alive(zpid), 3.0)
