"""Waits that end on an event, never on a guessed duration (docs/testing.md, "Waits").

- wait_for(predicate): a fact that says so (a status field, /proc, a file), read until
  it holds; WAIT_LIMIT only bounds a wait for an event that never comes.
- wait_call / wait_running / wait_idle: the supervisor's status "calls" (docs/protocol.md):
  a call queued, starting, or running in a confined worker whose host pid it names.
- proc.wait_exit: a process's end, on its pidfd.
- HeldCall: a call whose code stops at a point until the test releases it, so that what
  the test looks at (ids, mounts, cgroups, threads) exists for as long as it looks,
  however slow the machine is; no sleep in the code sets how long that is.
"""
import os
import signal
import time

from . import proc
from .env import WAIT_LIMIT
from .supervisor import calls, status


def wait_for(predicate, what="the condition", timeout=WAIT_LIMIT):
    """predicate() until it returns something true, which is returned. Checked at once,
    then every 5 ms, backing off to 50 ms. After timeout seconds (WAIT_LIMIT: a hang, not
    a slow machine) fails with what (a string, or a callable giving one)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("waited %.0f s (the wait limit) for %s" % (timeout, what() if callable(what) else what))
        time.sleep(pause)
        pause = min(pause * 1.5, 0.05)


def wait_call(sup, call_id, states):
    """Until status lists call_id in one of states ("queued", "starting", "running");
    returns its entry. Fails at once if the call has finished (it is no longer listed)."""
    states = (states,) if isinstance(states, str) else tuple(states)
    last = {}

    def listed():
        cs = calls(sup)
        assert call_id in cs, "call %d finished while waiting for it to be %s (last seen %r)" % (
            call_id, "/".join(states), last.get("entry"))
        last["entry"] = cs[call_id]
        return cs[call_id]["state"] in states and cs[call_id]

    return wait_for(listed, lambda: "call %d to be %s (last seen %r)" % (call_id, "/".join(states), last.get("entry")))


def wait_running(sup, call_id):
    """Until call_id runs in a worker that has reported its sandbox complete; the
    worker's host pid. From then on /proc shows the confined worker (its host ids, its
    mounts, its cgroup), in either start mode."""
    return wait_call(sup, call_id, "running")["workerPid"]


def wait_states(sup, want, what=None):
    """Until the states of the unfinished calls, in callId order, are want (a list of
    state names); returns status's calls list."""
    last = {}

    def match():
        last["calls"] = status(sup)["calls"]
        return [c["state"] for c in last["calls"]] == list(want) and last["calls"]

    return wait_for(match, lambda: "%s: calls %r (want states %r)" % (what or "calls", last.get("calls"), want))


def wait_idle(sup):
    """Until the supervisor has no unfinished call (every worker of a call is reaped: a
    call finishes after its worker's reap); returns the status reply."""
    last = {}

    def idle():
        last.update(status(sup))
        return not last["calls"] and last["queued"] == 0 and last["running"] == 0

    wait_for(idle, lambda: "the supervisor to be idle: %r" % last)
    return last


HOLD_SIGNAL = signal.SIGUSR1
# Blocked by the code just before it waits, unblocked once it goes on: /proc shows that
# it is at its hold. HOLD_SIGNAL itself does not show there while the code waits in
# sigwait(), which unblocks the signals it waits for (the kernel keeps them in
# real_blocked meanwhile, so one sent then is not lost either).
HOLD_WITNESS = signal.SIGUSR2


def at_hold(pid):
    """pid's main thread waits at its hold: HOLD_WITNESS blocked and HOLD_SIGNAL not
    (sigwait() unblocks it). Both blocked is not the hold: glibc blocks every signal for
    a moment while it creates a thread (pthread_create) or a process, and code that
    does so before its hold would otherwise seem to be there already."""
    return proc.blocks(pid, HOLD_WITNESS) and not proc.blocks(pid, HOLD_SIGNAL)

# Code that holds: HOLD_SETUP first, then HOLD_POINT (one line) wherever it is to wait
# for the test's release(), as often as it likes: each release lets one HOLD_POINT pass,
# as long as the test releases only after it has seen the code arrive there.
HOLD_SETUP = ("import signal as _hold\n"
              "_held = _hold.pthread_sigmask(_hold.SIG_BLOCK, {_hold.SIGUSR1})\n")
HOLD_POINT = ("_held = _hold.pthread_sigmask(_hold.SIG_BLOCK, {_hold.SIGUSR2}); "
              "_held = _hold.sigwait({_hold.SIGUSR1}); "
              "_held = _hold.pthread_sigmask(_hold.SIG_UNBLOCK, {_hold.SIGUSR2})\n")


def held(before="", after=""):
    """Code that runs before, then waits until the test sends it HOLD_SIGNAL (blocked
    first, so that a signal sent early is not lost: see release()), then runs after.
    Nothing is shown for the wait itself (the value rule): after's last expression, if
    any, is the call's value."""
    return HOLD_SETUP + before + "\n" + HOLD_POINT + after + "\n"


def release(pid):
    """Let the held code of worker pid go on past its hold. The signal is sent only once
    the code is there (at_hold(): it waits in sigwait() for HOLD_SIGNAL): sent before
    HOLD_SETUP it would be dropped (the worker is init of its pid namespace) and the code
    would wait for ever."""
    wait_for(lambda: at_hold(pid) or not proc.alive(pid), "worker %d to reach its hold" % pid)
    proc.kill_quietly(pid, HOLD_SIGNAL)


def release_running(sup):
    """Release the held code of the one call sup runs (a call the test did not submit
    itself, e.g. through the codeinterp command); its worker's pid."""
    running = wait_for(lambda: [c for c in calls(sup).values() if c["state"] == "running"],
                       "a running call")
    assert len(running) == 1, running
    release(running[0]["workerPid"])
    return running[0]["workerPid"]


class HeldCall:
    """An execute of held(before, after) (or of code built from HOLD_SETUP and
    HOLD_POINT) on conn: wait_running() gives the confined worker's pid, release() lets
    the code go on, result() reads the final message."""

    def __init__(self, sup, conn, before="", after="", code=None, **fields):
        self.sup, self.conn = sup, conn
        self.rid = conn.submit(code if code is not None else held(before, after), **fields)
        self.pid = None
        self._call_id = None

    @property
    def call_id(self):
        """From the call's first progress message, read through conn (a test that reads
        the raw frames itself sets it instead: seen(callId))."""
        if self._call_id is None:
            self._call_id = self.conn.call_id(self.rid)
        return self._call_id

    def seen(self, call_id):
        self._call_id = call_id
        return self

    def wait_running(self):
        """The worker's host pid once it is confined (status says running)."""
        if self.pid is None:
            self.pid = wait_running(self.sup, self.call_id)
        return self.pid

    def wait_holding(self):
        """Until the code has reached its hold; the worker's pid."""
        pid = self.wait_running()
        wait_for(lambda: at_hold(pid) or not proc.alive(pid), "worker %d to reach its hold" % pid)
        return pid

    def release(self):
        release(self.wait_running())

    def result(self, progress=None):
        """The call's result (or error)."""
        return self.conn.wait(self.rid, types=("result", "error"), progress=progress)

    def finish(self, progress=None):
        self.release()
        return self.result(progress)


def start_held(sup, conn=None, before="", after="", code=None, **fields):
    """A HeldCall on conn (default: a new connection to sup)."""
    return HeldCall(sup, conn or sup.connect(), before, after, code, **fields)


def check_mount_namespace_held(sup, conn):
    """A call's worker mount namespace is among the supervisor's descriptors while its
    code runs (so that the worker's exit does not tear its filesystems down), and is let
    go once the result has come (supervisor/runner.c, common/proc.h)."""
    sup_pid = status(sup)["pid"]
    call = start_held(sup, conn, after="'done'")
    pid = call.wait_holding()
    ns = os.readlink("/proc/%d/ns/mnt" % pid)
    assert ns != os.readlink("/proc/%d/ns/mnt" % sup_pid)
    held = ns in proc.fd_targets(sup_pid).values()
    r = call.finish()
    assert held, "the supervisor does not hold the worker's %s: %r" % (ns, proc.fd_targets(sup_pid))
    assert r["type"] == "result" and r["outcome"] == "ok" and r["result"]["text"] == "'done'", r
    wait_for(lambda: ns not in proc.fd_targets(sup_pid).values(),
             lambda: "the supervisor to let go of %s: %r" % (ns, proc.fd_targets(sup_pid)))


def check_pool_and_call_priority(sup, conn, niced):
    """Zygote mode: sup's pre-started workers are 10 nicer than it (at most 19) when
    niced, else at its own nice; a held call's worker runs at its nice either way
    (worker/zygote.c, pool_nice_restorable()). Relative, not absolute: the suite may
    itself run niced (make fresh-system-check runs at nice 10), and so may a service."""
    sup_pid = status(sup)["pid"]
    base = proc.nice(sup_pid)
    wait_for(lambda: proc.pool_workers(sup_pid), "a pre-started worker")
    assert {proc.nice(p) for p in proc.pool_workers(sup_pid)} == ({min(base + 10, 19)} if niced else {base})
    call = start_held(sup, conn, after="1")
    nice = proc.nice(call.wait_holding())
    r = call.finish()
    assert nice == base, (nice, base)
    assert r["type"] == "result" and r["outcome"] == "ok", r


def until(timeout=WAIT_LIMIT):
    """A monotonic deadline timeout seconds from now (for loops that read a stream)."""
    return time.monotonic() + timeout


def sleep_past(t0, seconds):
    """Sleep until seconds after t0 (time.monotonic()): for tests about time itself
    (deadlines, TTLs, watchdog intervals), never to let something happen."""
    left = t0 + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)
