"""The fault suite's supervisors (test_faults.py, test_readiness.py): each started with
the test process inside a pids cgroup of its own (cgroups.PidsCgroup), so that every
process of its tree is tracked (and, with pids.max, limited); FaultEnv undoes every
fault even when a test fails (limits restored, cgroups emptied and removed, processes
gone) and checks that a supervisor that has exited left nothing: no process of its
tree, no mount, no cgroup. The fixture is fault_env (testlib.plugin)."""
import os
import shutil
import signal
import socket
import subprocess
import time

from . import proc
from .cgroups import new_pids_cgroup
from .env import WAIT_LIMIT
from .supervisor import Conn, Supervisor, terminate
from .waits import wait_for


def settled_fd_count(pid):
    """The descriptor count once it has not changed for 0.3 s (closed connections are
    noticed by the supervisor a moment after the client closes them)."""
    last, since = proc.fd_count(pid), time.monotonic()
    end = time.monotonic() + WAIT_LIMIT
    while time.monotonic() < end:
        time.sleep(0.05)
        n = proc.fd_count(pid)
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= 0.3:
            break
    return last


def back_to_baseline(t, baseline):
    """Until the supervisor's descriptors are back to baseline."""
    wait_for(lambda: settled_fd_count(t.pid) == baseline, lambda: "descriptors %d, baseline %d: %r" % (
        proc.fd_count(t.pid), baseline, proc.fd_targets(t.pid)))


# ---- supervisors under observation ----

class Tracked:
    """One supervisor started by FaultEnv, with what is needed to check and undo."""

    def __init__(self, sup, cg):
        self.sup = sup
        self.cg = cg
        self.pid = sup.proc.pid
        self.nofile = None  # the original (soft, hard) while lowered
        self.rc = None
        self.log = ""
        self.stopped = False
        self.descendants = {}


class FaultEnv:
    """Starts supervisors in tracking cgroups and undoes every fault, even when a test
    fails: limits restored, cgroups emptied and removed, processes gone."""

    def __init__(self):
        self.tracked = []
        self.mounts = proc.host_mounts()

    def start(self, policy, extra_args=(), env=None):
        return self.start_with(lambda: Supervisor(policy, extra_args), env)

    def start_with(self, make, env=None):
        """make() starts a Supervisor; it runs with the test process in a new tracking
        cgroup, so that the supervisor is born there."""
        cg = new_pids_cgroup()
        saved = {}
        for k, v in (env or {}).items():
            saved[k] = os.environ.get(k)
            os.environ[k] = v
        try:
            if cg is not None:
                with cg.joined():
                    sup = make()
            else:
                sup = make()
        except BaseException:
            if cg is not None:
                cg.remove()
            raise
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        t = Tracked(sup, cg)
        self.tracked.append(t)
        return t

    # -- faults --

    def lower_nofile_to_one_connection(self, t):
        """Lower the soft RLIMIT_NOFILE so that one more descriptor fits and no second:
        a connection is still accepted, but a worker (a plan memfd, pipes) cannot be
        made. RLIMIT_NOFILE bounds descriptor numbers, not their count: the limit is the
        lowest free number plus one, whatever the supervisor holds (its spare slots'
        cgroup descriptors come and go)."""
        used = {int(fd) for fd in os.listdir("/proc/%d/fd" % t.pid)}
        lowest = min(set(range(len(used) + 1)) - used)
        self.lower_nofile(t, lowest + 1)

    def lower_nofile(self, t, n):
        soft, hard = proc.limits(t.pid, "Max open files")
        t.nofile = (soft, hard)
        # Only the soft limit: raising a hard limit back needs CAP_SYS_RESOURCE, which
        # the test may not have.
        subprocess.run(["prlimit", "--pid", str(t.pid), "--nofile=%d:%s" % (n, hard)], check=True)

    def restore_nofile(self, t):
        if t.nofile is None:
            return
        soft, hard = t.nofile
        subprocess.run(["prlimit", "--pid", str(t.pid), "--nofile=%s:%s" % (soft, hard)], check=True)
        t.nofile = None

    # -- the end --

    def stop(self, t, timeout=WAIT_LIMIT, sig=signal.SIGTERM):
        """Stop the supervisor (sig, then SIGKILL after timeout); returns (rc, seconds).
        The log is kept in t.log."""
        sup = t.sup
        for c in sup.conns:
            try:
                c.close()
            except OSError:
                pass
        if t.cg is None and sup.proc.poll() is None:
            t.descendants = proc.descendants(t.pid)  # without a tracking cgroup: who must go
        t0 = time.monotonic()
        terminate(sup.proc, sig, timeout=timeout)
        took = time.monotonic() - t0
        t.rc = sup.proc.returncode
        t.stopped = True
        try:
            sup.log.close()
            t.log = sup.read_log()
        except OSError:
            pass
        shutil.rmtree(sup.dir, ignore_errors=True)
        return t.rc, took

    def assert_nothing_left(self, t):
        """After the supervisor has exited: no process of its tree, no new mount, its
        cgroup removed."""
        if t.cg is not None:
            wait_for(lambda: not t.cg.procs(), lambda: "processes left behind by the supervisor: %r" %
                     [(p, proc.name(p)) for p in t.cg.procs()])
            t.cg.remove()
            assert not os.path.exists(t.cg.path)
        else:
            def left():
                return [p for p, st in t.descendants.items() if st is not None and proc.starttime(p) == st]
            wait_for(lambda: not left(), lambda: "processes left behind by the supervisor: %r" %
                     [(p, proc.name(p)) for p in left()])
        added = proc.host_mounts() - self.mounts
        assert not added, "mounts left behind: %r" % added

    def finish(self, t, expect_rc=0):
        """Stop with SIGTERM and check it exited cleanly and left nothing."""
        rc, _ = self.stop(t)
        assert rc == expect_rc, "codeinterpd exited with %r:\n%s" % (rc, t.log[-3000:])
        self.assert_nothing_left(t)

    def cleanup(self):
        for t in self.tracked:
            try:
                if t.cg is not None:
                    t.cg.unlimit()
            except OSError:
                pass
            if t.nofile is not None and t.sup.proc.poll() is None:
                try:
                    self.restore_nofile(t)
                except (OSError, subprocess.CalledProcessError):
                    pass
            if not t.stopped:
                self.stop(t)
            if t.cg is not None:
                try:
                    t.cg.remove()  # never leaves a process of ours running
                except (OSError, AssertionError):
                    pass


def log_tail(t, n=3000):
    """The end of the supervisor's log; an ASan report is shown from its start."""
    try:
        text = t.sup.read_log()
    except OSError:
        text = t.log
    i = text.find("ERROR: AddressSanitizer")
    if i < 0:
        i = text.find("runtime error:")
    if i >= 0:
        return text[i:i + n]
    return text[-n:]


def assert_alive(t, what):
    assert t.sup.proc.poll() is None, "codeinterpd died (%s), exit %r:\n%s" % (what, t.sup.proc.returncode,
                                                                             log_tail(t))


def status_or_fail(t, timeout=WAIT_LIMIT, what=""):
    """The status reply within timeout seconds (WAIT_LIMIT: a hang): the event loop is
    serving."""
    assert_alive(t, what)
    c = Conn(t.sup.socket, timeout)
    try:
        r = c.call("status")
    except (socket.timeout, EOFError, ConnectionError) as e:
        raise AssertionError("status not answered within %.1f s %s (%r); supervisor CPU %.2f s:\n%s" % (
            timeout, what, e, proc.cpu_seconds(t.pid), log_tail(t)))
    finally:
        c.close()
    assert r["type"] == "reply", r
    return r


def one_call(t, code, timeout=WAIT_LIMIT):
    c = Conn(t.sup.socket, timeout)
    try:
        return c.execute(code)
    finally:
        c.close()


# ---- RLIMIT_NOFILE ----
