"""Issue 24: each result says how its call got a worker (timing.worker), and the status
reply and the metrics count them (workersStartedBy, codeinterp_worker_starts_total):
"ready" (a pre-started worker done preparing), "preparing" (a pre-started worker still
preparing when the call reached it), "cloned" (none was pre-started) and "exec". Each
way is provoked for real: "preparing" with the pre-started worker held stopped by
ptrace from the moment the zygote clones it until the call has been handed to it."""
import pytest

from testlib import ok, proc, status, trace
from testlib.waits import wait_for

pytestmark = [pytest.mark.asan]

ZYGOTE_ONE = trace.POOL_OF_ONE
WAYS = ("ready", "preparing", "cloned", "exec")


def counts(sup):
    st = status(sup)
    return st["workersStartedBy"], st["startedTotal"]


def test_a_call_on_a_prepared_worker_says_ready(make_supervisor):
    sup = make_supervisor(ZYGOTE_ONE)
    c = sup.connect()
    for _ in range(3):
        wait_for(lambda: proc.pool_prepared(sup.pid), what="the pre-started worker done preparing")
        assert ok(c.execute("1"))["timing"]["worker"] == "ready"
    by, total = counts(sup)
    assert by == {"ready": 3, "preparing": 0, "cloned": 0, "exec": 0} and total == 3, by


def test_without_a_pool_every_worker_is_cloned_for_its_call(make_supervisor):
    sup = make_supervisor("workerStart: zygote\nzygotePoolSize: 0\n")
    c = sup.connect()
    assert [ok(c.execute("1"))["timing"]["worker"] for _ in range(3)] == ["cloned"] * 3
    assert counts(sup) == ({"ready": 0, "preparing": 0, "cloned": 3, "exec": 0}, 3)


def test_exec_mode_says_exec(make_supervisor):
    """(A call that never had a worker says None: test_scheduler.py, cancelled and
    timed out while queued.)"""
    sup = make_supervisor("workerStart: exec\n")
    c = sup.connect()
    assert [ok(c.execute("1"))["timing"]["worker"] for _ in range(2)] == ["exec"] * 2
    assert counts(sup) == ({"ready": 0, "preparing": 0, "cloned": 0, "exec": 2}, 2)


def test_a_call_that_reaches_a_worker_still_preparing_says_preparing(make_supervisor):
    """The zygote's refill after the first call is traced: its new worker starts
    stopped, so it cannot have said it is prepared when the second call is handed to
    it. Released once the zygote has answered (the call's "started" progress), the
    worker prepares, then runs it."""
    sup = make_supervisor(ZYGOTE_ONE)
    with trace.refill_held(sup) as (_, trap, _worker):
        c2 = sup.connect()
        rid = c2.submit("6 * 7")
        m = c2.wait(rid, types=("progress", "result", "error"))
        while m["type"] == "progress" and m.get("phase") != "started":
            m = c2.wait(rid, types=("progress", "result", "error"))
        assert m["type"] == "progress", m  # the zygote answered: the call has the stopped worker
        trap.release()
    r = ok(c2.wait(rid, types=("result", "error")))
    assert r["result"]["text"] == "42" and r["timing"]["worker"] == "preparing", r["timing"]
    by, total = counts(sup)
    assert by == {"ready": 1, "preparing": 1, "cloned": 0, "exec": 0} and total == 2, by
