"""The benchmark's C load generator (tests/bench/loadgen.c), which every throughput figure
in docs/performance.md now comes from: it must count what it did, and count as failed
what failed, or a throughput ratio would be made of errors. Against a real supervisor
(calls), real processes (spawn) and the fork floor's own server (serve)."""
import os
import subprocess
import sys

from testlib import env

LOADGEN = os.path.join(env.BUILD, "bin", "loadgen")
sys.path.insert(0, os.path.join(env.SOURCE_ROOT, "tests", "bench"))
import bench  # noqa: E402  (FORK_SERVER, ZYGOTE_PRELOAD: the floor's own server)


def loadgen(*args):
    p = subprocess.run([LOADGEN] + [str(a) for a in args], capture_output=True, text=True, timeout=60)
    words = p.stdout.split()
    assert words[0::2] == ["done", "failed", "seconds", "lane_cpu_ms"], p.stdout + p.stderr
    return p.returncode, int(words[1]), int(words[3]), float(words[5]), p.stderr


def test_calls_count_ok_results_and_failures(shared_supervisor):
    sock = shared_supervisor().socket
    rc, done, failed, secs, err = loadgen("calls", 2, 0.5, sock, "sum([9.0, 7.5]) / 2")
    assert rc == 0 and done >= 2 and failed == 0 and err == ""
    assert 0.5 <= secs < 30
    # Every call an exception: each is counted, and as failed, with the outcome named.
    rc, done, failed, _, err = loadgen("calls", 1, 0.3, sock, "1/0")
    assert rc == 0 and done >= 1 and failed == done
    assert "the first: python_exception" in err


def test_calls_without_a_supervisor_fail_loudly(tmp_path):
    rc, done, failed, _, err = loadgen("calls", 2, 0.2, tmp_path / "none.sock", "1")
    assert rc == 0 and done == 0 and failed == 2
    assert "No such file or directory" in err


def test_spawn_counts_runs_and_failed_exits():
    rc, done, failed, _, _ = loadgen("spawn", 2, 0.3, "/bin/true")
    assert rc == 0 and done >= 2 and failed == 0
    rc, done, failed, _, err = loadgen("spawn", 1, 0.2, "/bin/false")
    assert rc == 0 and done >= 1 and failed == done and "exit status" in err


def test_serve_drives_the_fork_floor_and_notices_it_gone():
    argv = ["/usr/bin/python3", "-I", "-S", "-c", bench.FORK_SERVER, bench.ZYGOTE_PRELOAD, "sum([9.0, 7.5]) / 2"]
    rc, done, failed, _, _ = loadgen("serve", 2, 0.3, *argv)
    assert rc == 0 and done >= 2 and failed == 0
    # A server that answers nothing, gone or with its stdin closed while it lives (a
    # write to it is EPIPE, never the SIGPIPE that would end the lane and then
    # loadgen itself; whether the write comes before or after the close is a race,
    # hence a few of each): the lane fails before the clock starts.
    for server in [["/bin/true"]] * 5 + [["/bin/sh", "-c", "exec 0<&-; sleep 0.1"]] * 5:
        rc, done, failed, _, err = loadgen("serve", 1, 0.2, *server)
        assert rc == 0 and done == 0 and failed == 1 and "Broken pipe" in err, (server, err)


def test_usage_errors_exit_2():
    for args in ([], ["calls", "1", "1", "/x"], ["spawn", "0", "1", "/bin/true"], ["spawn", "1", "0", "/bin/true"],
                 ["fly", "1", "1", "/bin/true"]):
        p = subprocess.run([LOADGEN] + args, capture_output=True, text=True)
        assert p.returncode == 2 and p.stderr.startswith("usage: loadgen"), args
