"""Fast fresh workers: the zygote and its pre-started workers. These run in zygote
mode whatever CODEINTERP_WORKER_START says (the policy pins it); the freshness tests of
test_core run in both modes. The zygote client is the supervisor's (asan); what a fresh
interpreter looks like depends on the CPython (python)."""
import os
import signal
import time

import pytest

from testlib import ok, proc, status, trace
from testlib.waits import start_held, until, wait_call, wait_for

pytestmark = pytest.mark.asan

ZYGOTE = "workerStart: zygote\nzygotePoolSize: 2\nmaxActiveWorkers: 2\n"


@pytest.fixture
def zsup(make_supervisor):
    return make_supervisor(ZYGOTE)


def no_zombie_children(pid):
    return all(proc.state(p) != "Z" for p in proc.children(pid))


@pytest.mark.python
def test_random_differs_between_calls(zsup):
    c = zsup.connect()
    seen = {ok(c.execute("import random\nrandom.random()"))["result"]["text"] for _ in range(4)}
    assert len(seen) == 4
    # random's other entry points too: a new Random() and randbytes
    seen = {ok(c.execute("import random\nrandom.Random().random(), random.randbytes(8)"))["result"]["text"]
            for _ in range(3)}
    assert len(seen) == 3


@pytest.mark.python
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


@pytest.mark.python
def test_corrupted_interpreter_does_not_leak(zsup):
    c = zsup.connect()
    r = c.execute("import builtins\nfor k in list(vars(builtins)):\n    delattr(builtins, k)\n")
    assert r["type"] == "result" and r["outcome"] in ("ok", "python_exception")
    r = c.execute("import sys\nsys.modules.clear()\nimport gc\ngc.disable()\nsum(range(10))")
    assert r["type"] == "result"
    ok(c.execute("import gc\ngc.isenabled() and len(__builtins__.__dict__ if hasattr(__builtins__, '__dict__') "
                 "else __builtins__) > 100"))
    assert ok(c.execute("sum([9.0, 7.5]) / 2"))["result"]["text"] == "8.25"


@pytest.mark.python
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
    assert zpid and proc.alive(zpid)
    c = sup.connect()
    # One running call holds the only slot; three more wait in the queue.
    first = start_held(sup, c, after="'first'")
    first.wait_running()
    queued = [c.submit("%d * 2" % i) for i in range(3)]
    for rid in queued:
        wait_call(sup, c.call_id(rid), "queued")
    os.kill(zpid, signal.SIGKILL)
    assert proc.wait_exit(zpid)
    first.release()
    results = [c.wait(rid, types=("result", "error")) for rid in [first.rid] + queued]
    assert [r["type"] for r in results] == ["result"] * 4
    assert results[0]["outcome"] == "ok" and results[0]["result"]["text"] == "'first'"
    assert [r["result"]["text"] for r in results[1:]] == ["0", "2", "4"]
    st = status(sup)
    assert st["zygotePid"] != zpid and st["zygoteGeneration"] >= 2
    # The dead zygote's pre-started workers are gone and reaped: no zombie children.
    wait_for(lambda: no_zombie_children(sup.proc.pid), "no zombie child")


def test_zygote_holds_no_client_or_call_descriptors(zsup):
    """Looked at while a call runs (held): its pipes exist then."""
    st = status(zsup)
    zpid, spid = st["zygotePid"], st["pid"]
    c = zsup.connect()
    call = start_held(zsup, c, after="print('x')")
    call.wait_running()
    z = proc.fd_targets(zpid)
    s = proc.fd_targets(spid)
    assert not [t for t in z.values() if t.startswith("pipe:")], z
    sup_sockets = {t for t in s.values() if t.startswith("socket:")}
    assert not sup_sockets & {t for t in z.values() if t.startswith("socket:")}, (z, s)
    call.release()
    assert ok(call.result())["stdout"]["text"] == "x\n"


def test_zygote_is_replaced_after_max_calls(make_supervisor):
    sup = make_supervisor("workerStart: zygote\nzygoteMaxCalls: 3\nzygotePoolSize: 1\n")
    c = sup.connect()
    first = status(sup)
    for i in range(7):
        assert ok(c.execute("%d" % i))["result"]["text"] == str(i)
    later = status(sup)
    assert later["zygoteGeneration"] >= first["zygoteGeneration"] + 2
    assert later["zygotePid"] != first["zygotePid"]
    assert proc.wait_exit(first["zygotePid"])


def test_pool_workers_are_used_once(zsup):
    c = zsup.connect()
    pids = [ok(c.execute("1"))["exitStatus"]["pid"] for _ in range(5)]
    assert len(set(pids)) == 5


def test_loop_serves_while_a_zygote_starts(make_supervisor):
    """A new zygote starts in the background: the supervisor keeps answering (and
    keeps enforcing deadlines) while it does, and queued calls start once it is ready.
    status is asked as fast as it answers until it has said "not ready" once; should a
    new zygote be ready before the first answer, it is killed again."""
    sup = make_supervisor("workerStart: zygote\nzygotePoolSize: 1\n")
    c = sup.connect()
    seen = []
    zpid = status(sup)["zygotePid"]
    deadline = until()
    while False not in seen:
        os.kill(zpid, signal.SIGKILL)
        assert proc.wait_exit(zpid)
        while True:
            assert time.monotonic() < deadline, "no new zygote became ready: %r" % seen[-20:]
            r = c.call("status")
            seen.append(r["zygoteReady"])
            if r["zygoteReady"] and r["zygotePid"] not in (None, zpid):
                break
        zpid = r["zygotePid"]
    assert seen[-1] is True
    assert ok(c.execute("6 * 7"))["result"]["text"] == "42"


def test_pool_is_refilled_between_calls_not_during_them(zsup):
    """Preparing a worker slows a running call's page faults on a virtualised host, so
    the zygote refills its pool only when the supervisor says nothing runs. Checked
    while a call holds (for 0.6 s: a slow machine can only make that weaker)."""
    st = status(zsup)
    sup_pid, zpid = st["pid"], st["zygotePid"]

    def pool():
        return set(proc.pool_workers(sup_pid))

    # Done preparing too: a call that had to wait for a worker still preparing would
    # say the pool is behind, and the zygote would rightly refill beside it.
    wait_for(lambda: len(pool()) == 2 and proc.pool_prepared(sup_pid), lambda: "a full pool: %r" % pool())
    before = pool()
    c = zsup.connect()
    call = start_held(zsup, c, after="'done'")
    pid = call.wait_running()
    assert pid in before
    wait_for(lambda: len(pool()) == 1, lambda: "the pool less the worker that took the call: %r" % pool())
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        others = set(proc.children(sup_pid)) - {zpid, pid}
        assert others <= before, "a worker was cloned while a call ran: %r" % (others - before)
        time.sleep(0.01)
    call.release()
    assert ok(call.result())["result"]["text"] == "'done'"
    wait_for(lambda: len(pool()) == 2, lambda: "the pool refilled: %r" % pool())
    assert not pool() <= before  # a new worker was prepared once the call was over


def test_a_pool_that_is_behind_is_refilled_while_calls_run(make_supervisor):
    """A call that found no worker ready says that calls come faster than quiet
    moments: the zygote then refills its pool while calls run, instead of leaving each
    queued call to wait for its own clone. With one pre-started worker: the first call
    takes it (ready, so nothing is refilled beside it), the second finds the pool empty
    (cloned); a new pool worker appears while both still hold."""
    sup = make_supervisor("workerStart: zygote\nzygotePoolSize: 1\nmaxActiveWorkers: 2\n")
    st = status(sup)
    sup_pid = st["pid"]

    def pool():
        return set(proc.pool_workers(sup_pid))

    wait_for(lambda: len(pool()) == 1 and proc.pool_prepared(sup_pid), lambda: "a prepared pool: %r" % pool())
    first = start_held(sup)
    first_pid = first.wait_running()
    wait_for(lambda: not pool(), lambda: "the pool emptied by the first call: %r" % pool())
    second = start_held(sup)
    second_pid = second.wait_running()
    refilled = wait_for(lambda: pool() - {first_pid, second_pid},
                        lambda: "a worker prepared while both calls run: %r" % pool())
    assert all(proc.alive(p) and p not in refilled for p in (first_pid, second_pid))
    hows = [ok(call.finish())["timing"]["worker"] for call in (first, second)]
    assert hows == ["ready", "cloned"], hows
    # Once done preparing, the refilled worker serves the next call, ready: the pool has
    # caught up.
    wait_for(lambda: proc.pool_prepared(sup_pid), "the refilled worker done preparing")
    c = sup.connect()
    assert ok(c.execute("1"))["timing"]["worker"] == "ready"
    c.close()


# x86_64's exit_group: a worker's last system call, after its last report.
SYS_EXIT_GROUP = 231


def test_an_empty_pool_is_refilled_while_the_last_worker_exits(make_supervisor):
    """Once the running call's worker has sent its last report, only its exit is left
    (≈ 1 ms of its address space torn down): the supervisor says EXITING, and a zygote
    with no worker prepares one then, beside that exit, for a call sent right after
    the result. Held by ptrace as it enters exit_group, the worker has reported and is
    still there: the pool refills meanwhile."""
    sup = make_supervisor(trace.POOL_OF_ONE)
    with trace.refill_held(sup) as (c, trap, worker):
        rid = c.submit("6 * 7")  # handed to it while it is held
        trap.run_to(SYS_EXIT_GROUP)  # prepared, ran the call, reported; not exited
        wait_for(lambda: proc.pool_workers(sup.pid), what="a worker prepared while the last one exits")
        assert (proc.stat_fields(worker) or ["gone"])[0] in ("t", "T"), "the held worker went on"
        trap.release()
    r = ok(c.wait(rid, types=("result", "error")))
    assert r["result"]["text"] == "42" and r["timing"]["worker"] == "preparing", r["timing"]


def test_supervisor_answers_while_the_zygote_does_not(make_supervisor):
    """A spawn request does not block the event loop: with the zygote stopped, another
    request is answered while the call still waits for its worker, and the call's
    deadline still ends it (no worker was ever made for it)."""
    sup = make_supervisor(ZYGOTE + "timeoutMs: 800\n")
    st = status(sup)
    zpid, sup_pid = st["zygotePid"], st["pid"]
    os.kill(zpid, signal.SIGSTOP)
    try:
        c = sup.connect()
        rid = c.request("execute", summary="t", code="'never'", sourceIds=[])
        call_id = c.call_id(rid)  # admitted, its spawn asked for
        s = status(sup)
        listed = {m["callId"]: m for m in s["calls"]}
        # Answered while the call waits for the stopped zygote (or in the queue behind
        # the spawn, never running): the loop was not blocked by it.
        assert s["running"] + s["queued"] == 1 and listed[call_id]["state"] in ("starting", "queued"), s
        r = c.wait(rid)
        assert r["outcome"] == "timeout" and r["timing"]["workerStarted"] is False, r
        assert r["exitStatus"] is None
        assert r["timing"]["elapsedMs"] >= 800, r["timing"]
    finally:
        os.kill(zpid, signal.SIGCONT)
    # The zygote answers the abandoned request late: that worker never runs the call
    # and is killed and reaped; the next call is served normally.
    c2 = sup.connect()
    assert ok(c2.execute("6 * 7"))["result"]["text"] == "42"
    assert status(sup)["zygotePid"] == zpid
    wait_for(lambda: no_zombie_children(sup_pid), "no zombie child")
    # The abandoned worker is killed when the late answer arrives and reaped as a stray.
    wait_for(lambda: not [p for p in proc.children(sup_pid) if proc.name(p) == "ci-worker"],
             "the abandoned worker to be reaped")


def test_a_zygote_that_stops_answering_is_replaced(make_supervisor):
    """A spawn request unanswered for 5 s replaces the zygote; the call is not lost."""
    sup = make_supervisor(ZYGOTE)
    zpid = status(sup)["zygotePid"]
    os.kill(zpid, signal.SIGSTOP)
    c = sup.connect()
    r = ok(c.execute("'served'"))
    assert r["result"]["text"] == "'served'"
    assert r["timing"]["elapsedMs"] >= 4500, r["timing"]  # the supervisor's clock
    st = status(sup)
    assert st["zygotePid"] != zpid and st["zygoteGeneration"] >= 2
    assert proc.wait_exit(zpid)

