"""Readiness, provoked for real: `status` (ready, notReadyCause, notReadyDetail) and
`codeinterp status --ready` (exit 0 ready, 14 not ready, naming the cause) against a
running supervisor whose worker starts fail (RLIMIT_NOFILE lowered with prlimit), whose
zygote is killed while it may not start another (a pids cgroup at its limit), and
that is shutting down. Each test waits on what it observes: a status field, a log
line, a process's end; and sees readiness come back once the cause is gone, with no
call sent (the supervisor's trial workers).

The fault machinery (tracking cgroups, limits undone even when a test fails, nothing
left behind) is testlib.faults's (fixture fault_env). All of it is the supervisor's
own code (asan)."""
import os
import re
import signal
import subprocess

import pytest

from testlib import ASAN, CLIENT, WAIT_LIMIT, WORKER_START, Supervisor, ok, proc, status, unavailable
from testlib.cgroups import pids_hierarchy
from testlib.faults import log_tail, one_call, status_or_fail
from testlib.waits import wait_for

pytestmark = pytest.mark.asan

MODES = ("exec", "zygote")
EXIT_NOT_READY = 14


def ready_cmd(sock):
    return subprocess.run([CLIENT, "--socket", sock, "status", "--ready"], capture_output=True, timeout=WAIT_LIMIT)


def assert_ready(sock):
    p = ready_cmd(sock)
    assert (p.returncode, p.stdout) == (0, b"ready\n"), (p.returncode, p.stdout, p.stderr)


def assert_not_ready(sock, cause, detail_part):
    p = ready_cmd(sock)
    out = p.stdout.decode()
    assert p.returncode == EXIT_NOT_READY, (p.returncode, out, p.stderr)
    assert out.startswith("not ready (%s): " % cause) and detail_part in out, out
    return out


def metric_lines(sock):
    """`codeinterp status --prometheus`, its sample lines."""
    p = subprocess.run([CLIENT, "--socket", sock, "status", "--prometheus"], capture_output=True, timeout=WAIT_LIMIT)
    assert p.returncode == 0, p
    return [x for x in p.stdout.decode().splitlines() if not x.startswith("#")]


@pytest.mark.start_mode
def test_ready_when_serving():
    """A supervisor that serves: ready in both modes; the zygote's state only in zygote
    mode (in exec mode "zygote down" does not apply)."""
    s = Supervisor()
    try:
        st = status(s)
        assert st["ready"] is True and st["notReadyCause"] is None and st["notReadyDetail"] is None, st
        assert st["zygoteState"] == ("ready" if WORKER_START == "zygote" else None), st
        assert_ready(s.socket)
    finally:
        assert s.stop() == 0


def test_ready_without_a_supervisor(tmp_path):
    """Nothing listening: not ready either, as the status for no connection (12)."""
    p = ready_cmd(str(tmp_path / "none.sock"))
    assert p.returncode == 12 and b"cannot connect" in p.stderr, p


# ---- worker starts failing in a row ----

# Without worker cgroups: the spare slots' cgroups are made in idle time, each holding
# descriptors, and one made after the limit is lowered would take the one descriptor
# left for the test's connection.
FAILING = "workerStart: %s\nzygotePoolSize: 0\nunreadyAfterStartFailures: %d\ncgroups: off\n"
EMFILE = "Too many open files"


def failing_call(t):
    r = one_call(t, "'never runs'")
    assert r["type"] == "result" and r["outcome"] == "worker_error" and EMFILE in r["detail"], r
    return r


@pytest.mark.parametrize("mode", MODES)
def test_worker_start_failures_make_it_not_ready_until_a_worker_starts(fault_env, mode):
    """RLIMIT_NOFILE lowered so that a connection fits and nothing more: a worker's plan
    and pipes cannot be made. The first failed start
    leaves it ready; the second (unreadyAfterStartFailures: 2) makes it not ready,
    naming the cause. Trial workers then fail on their own (the row grows with no call
    sent); once the limit is back one starts and it is ready again, still with no call:
    no call was admitted and no worker counted for a call."""
    t = fault_env.start(FAILING % (mode, 2))
    ok(one_call(t, "6 * 7"), "42")
    before = status_or_fail(t)
    assert before["ready"] is True, before

    fault_env.lower_nofile_to_one_connection(t)
    failing_call(t)
    st = status_or_fail(t, what="after one failed start")
    assert st["ready"] is True and st["workerStartFailuresInRow"] == 1, st
    assert_ready(t.sup.socket)
    failing_call(t)
    st = status_or_fail(t, what="after two failed starts")
    assert st["ready"] is False and st["notReadyCause"] == "worker_start_failures", st
    # Trial workers may already have failed too: the row is at least 2.
    m = re.search(r"(\d+) worker starts failed in a row \(unreadyAfterStartFailures: 2\)", st["notReadyDetail"])
    assert m and int(m.group(1)) >= 2, st
    assert EMFILE in st["notReadyDetail"], st
    assert_not_ready(t.sup.socket, "worker_start_failures", EMFILE)
    assert "codeinterp_ready 0" in metric_lines(t.sup.socket)
    assert re.search(r"Not ready: \d+ worker starts failed in a row", t.sup.read_log()), log_tail(t)

    # Trial workers, no call: the row grows while the cause holds.
    wait_for(lambda: status_or_fail(t)["workerStartFailuresInRow"] >= 4, lambda: "trial workers failing: %r\n%s" % (
        status_or_fail(t), log_tail(t)))
    st = status_or_fail(t)
    assert st["ready"] is False and st["admittedTotal"] == before["admittedTotal"] + 2, st

    fault_env.restore_nofile(t)
    wait_for(lambda: status_or_fail(t)["ready"], lambda: "ready again after the limit was restored: %r\n%s" % (
        status_or_fail(t), log_tail(t)))
    st = status_or_fail(t)
    assert st["workerStartFailuresInRow"] == 0 and st["notReadyCause"] is None, st
    # The trial is nobody's call: no call admitted, no worker counted, no outcome.
    assert st["admittedTotal"] == before["admittedTotal"] + 2, st
    assert st["startedTotal"] == before["startedTotal"], st
    assert st["workerStartFailures"] == before["workerStartFailures"] + 2, st
    assert sum(st["outcomes"].values()) == sum(before["outcomes"].values()) + 2, st
    assert "Ready again: a worker started after" in t.sup.read_log(), log_tail(t)
    assert_ready(t.sup.socket)
    ok(one_call(t, "6 * 7"), "42")
    fault_env.finish(t)


@pytest.mark.start_mode
def test_unready_after_0_never_and_a_reload_takes_effect_at_once(fault_env):
    """unreadyAfterStartFailures: 0: failed starts never make it not ready, and no trial
    runs (the row stays where the calls left it). A reload to 2 makes the same row not
    ready at once; the limit restored, a trial brings it back."""
    t = fault_env.start(FAILING % (WORKER_START, 0))
    ok(one_call(t, "1"), "1")
    fault_env.lower_nofile_to_one_connection(t)
    for _ in range(3):
        failing_call(t)
    st = status_or_fail(t)
    assert st["ready"] is True and st["workerStartFailuresInRow"] == 3, st
    assert_ready(t.sup.socket)

    with open(t.sup.policy_path, "w") as f:
        f.write(FAILING % (WORKER_START, 2))
    t.sup.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "Reloaded the policy" in t.sup.read_log(), lambda: "the reload: " + log_tail(t))
    st = status_or_fail(t)
    assert st["ready"] is False and st["notReadyCause"] == "worker_start_failures", st
    assert "(unreadyAfterStartFailures: 2)" in st["notReadyDetail"], st

    fault_env.restore_nofile(t)
    wait_for(lambda: status_or_fail(t)["ready"], lambda: "ready again: %r\n%s" % (status_or_fail(t), log_tail(t)))
    fault_env.finish(t)


# ---- the zygote down ----

def test_zygote_killed_and_not_back_makes_it_not_ready(fault_env):
    """Zygote mode, the supervisor in a pids cgroup whose limit leaves room for its own
    threads only: the zygote is SIGKILLed (its end seen through a pidfd) and no new one
    can be cloned. Not ready, cause zygote_down, until the limit is lifted and the zygote
    client's next (backed-off) start succeeds; then ready with a new zygote."""
    if pids_hierarchy() is None:
        unavailable("the host has no cgroup hierarchy with the pids controller")
    # LeakSanitizer's clone at exit would be refused by the limit, as in test_faults.
    t = fault_env.start("workerStart: zygote\nzygotePoolSize: 0\n",
                  env={"ASAN_OPTIONS": "detect_leaks=0"} if ASAN else None)
    assert t.cg is not None
    ok(one_call(t, "1"), "1")
    st = status_or_fail(t)
    assert st["ready"] is True and st["zygoteState"] == "ready", st
    zpid, gen = st["zygotePid"], st["zygoteGeneration"]

    t.cg.limit(proc.threads(t.pid))
    os.kill(zpid, signal.SIGKILL)
    assert proc.wait_exit(zpid), "the zygote did not die"
    wait_for(lambda: status_or_fail(t)["notReadyCause"] == "zygote_down", lambda: "zygote_down: %r\n%s" % (
        status_or_fail(t), log_tail(t)))
    st = status_or_fail(t)
    assert st["ready"] is False and st["zygoteState"] in ("starting", "broken") and not st["zygoteReady"], st
    # Its death is seen first (a failed control channel, or its exit); then the new
    # zygote's clone is refused, after a back-off of a second.
    wait_for(lambda: "Resource temporarily unavailable" in status_or_fail(t)["notReadyDetail"],
             lambda: "the refused clone in the detail: %r\n%s" % (status_or_fail(t), log_tail(t)))
    assert_not_ready(t.sup.socket, "zygote_down", "Resource temporarily unavailable")
    lines = metric_lines(t.sup.socket)
    assert "codeinterp_ready 0" in lines and "codeinterp_zygote_ready 0" in lines, lines

    t.cg.unlimit()
    wait_for(lambda: status_or_fail(t)["ready"], lambda: "ready again after the pids limit was lifted: %r\n%s" % (
        status_or_fail(t), log_tail(t)))
    st = status_or_fail(t)
    assert st["zygoteState"] == "ready" and st["zygotePid"] not in (None, zpid) and st["zygoteGeneration"] > gen, st
    assert_ready(t.sup.socket)
    assert "codeinterp_zygote_ready 1" in metric_lines(t.sup.socket)
    ok(one_call(t, "2"), "2")
    fault_env.finish(t)


# ---- shutting down ----

def test_shutting_down_is_not_ready(fault_env):
    """SIGTERM while a connection's replies cannot be sent (it does not read 480 kB of
    results): the supervisor keeps draining for up to 5 s, and a connection opened
    before the signal is told not ready, shutting_down."""
    t = fault_env.start("maxConnectionOutputBytes: 16777216\nmaxResultBytes: 262144\n")
    stuck = t.sup.connect()
    asker = t.sup.connect()
    for _ in range(8):
        stuck.request("execute", summary="t", code="print('x' * 60000)", sourceIds=[])
    wait_for(lambda: status_or_fail(t)["finishedTotal"] >= 8, lambda: "eight calls finished: %r" % status_or_fail(t))
    t.sup.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in t.sup.read_log(), lambda: "stopping: " + log_tail(t))
    r = asker.call("status")
    assert r["type"] == "reply" and r["ready"] is False and r["notReadyCause"] == "shutting_down", r
    stuck.close()
    asker.close()
    fault_env.finish(t)
