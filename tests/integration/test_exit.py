"""Nothing of the supervisor outlives it: at exit every child (the zygote, pre-started
workers, workers) is killed and reaped by codeinterpd itself, not left for init or for
systemd's KillMode to find."""
import subprocess
import sys
import textwrap

import pytest

from testlib import DAEMON, WAIT_LIMIT, Conn, require_sandbox, wait_for

# The zygote's pool only exists in zygote mode (the policy pins it); the exit path is
# the supervisor's own (asan).
pytestmark = pytest.mark.asan

# Runs as a child subreaper, so any process codeinterpd leaves behind becomes its child
# (a zombie it can see) instead of init's. Prints the pids of the children it still has
# after codeinterpd has exited, then reaps them.
PROBE = textwrap.dedent(r"""
    import ctypes, os, signal, subprocess, sys, tempfile, time
    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    d = tempfile.mkdtemp()
    pol = os.path.join(d, "policy.yaml")
    with open(pol, "w") as f:
        f.write("workerStart: zygote\nzygotePoolSize: 4\n")
    sock = os.path.join(d, "ci.sock")
    p = subprocess.Popen([sys.argv[1], "--socket", sock, "--policy", pol],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def children():
        with open("/proc/self/task/%d/children" % os.getpid()) as f:
            return [int(x) for x in f.read().split()]
    def comm(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return "?"
    def grandchildren():
        try:
            with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []
    deadline = time.monotonic() + float(sys.argv[2])
    # Wait for the zygote and some pre-started workers, then stop in the middle of the
    # pool's refill as often as possible: SIGTERM right after the pool changed.
    while time.monotonic() < deadline and len(grandchildren()) < 3:
        time.sleep(0.01)
    before = grandchildren()
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=float(sys.argv[2]))
    # A process's children are handed to the nearest subreaper (us) as it exits, before
    # its parent's wait returns: whatever the supervisor (or its zygote, reaped by it)
    # left alive is our child by now, dying of its parent-death signal or not.
    left = [c for c in children() if c != p.pid]
    print("before", len(before), "rc", rc, "left", " ".join("%d:%s" % (c, comm(c)) for c in left))
    for c in left:
        try:
            os.kill(c, signal.SIGKILL)
        except OSError:
            pass
        os.waitpid(c, 0)
    os.unlink(pol)
    os.rmdir(d)
""")


def test_no_child_outlives_the_supervisor():
    require_sandbox()
    out = subprocess.run([sys.executable, "-c", PROBE, DAEMON, str(WAIT_LIMIT)], capture_output=True, text=True,
                         timeout=3 * WAIT_LIMIT)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[0] == "before" and int(words[1]) >= 3, out.stdout  # the zygote and its pool existed
    assert words[2:4] == ["rc", "0"], out.stdout
    assert words[4] == "left" and words[5:] == [], out.stdout


def test_a_connection_accepted_before_sigterm_gets_an_answer(make_supervisor):
    """A client whose connection was accepted just before SIGTERM, and whose first
    request arrives after it, gets that request answered ("cancelled", the supervisor is
    shutting down) instead of a connection reset when the process exits with the
    request unread: the window a restart under load (a package upgrade) hits."""
    import signal
    s = make_supervisor()
    c = Conn(s.socket)
    probe = Conn(s.socket)
    # Both accepted: the supervisor counts them.
    wait_for(lambda: probe.call("status")["connections"] >= 2, "both connections accepted")
    probe.close()
    s.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "Received Terminated: stopping" in s.read_log(), lambda: "the stop, in " + s.read_log())
    r = c.execute("6 * 7")
    assert r["type"] == "error" and r["code"] == "cancelled" and "shutting down" in r["message"], r
    c.close()
