"""A cgroup per worker (policy key cgroups, docs/policy.md "Per-worker cgroups"): the
worker is in a cgroup of its own while it runs, with memoryBytes and maxProcesses as
its limits; after the call (also after a timeout) the cgroup is given back, removed or
kept empty with its account reset for a later worker, which then reports only its own
peak and OOM kills; nothing is left at shutdown;
the cgroup's OOM killer ends a call as resource_limit memory with memoryPeakBytes;
cgroups: off and a host without a usable hierarchy give "none", and required refuses
to start there; cpuBandwidthPercent caps a busy loop's CPU time, nothing of the cpu
controller is used without it, and a cap without a cpu controller refuses to start
(required) or runs without (auto). Runs in both worker start modes
(CODEINTERP_WORKER_START)."""
import os
import subprocess

import pytest

from testlib import DAEMON, WAIT_LIMIT, WORKER_START, ok, proc, require_sandbox, status, worker_pids_of
from testlib.cgroups import (FS, VERSION, dirs_of, has_cpu_controller, need_cgroups, owned_by, procs, read,
                             worker_cgroups)
from testlib.waits import start_held, wait_for

# Made and removed by the supervisor (asan), entered by each start mode's worker in its
# own way (start_mode: zygote mode makes slots ahead).
pytestmark = [pytest.mark.start_mode, pytest.mark.asan]

MEMORY = 268435456
PROCS = 24
POLICY = "memoryBytes: %d\nmaxProcesses: %d\n" % (MEMORY, PROCS)
POOL = 2  # zygotePoolSize's default
RECYCLED = 4  # empty cgroups kept for reuse at most (supervisor/cgroup_internal.h, CG_RECYCLED_MAX)
RESIDUAL = 4 << 20  # what a kept cgroup's account may still hold (CG_RECYCLE_MAX_RESIDUAL_BYTES)


def calls_left(sup, per_v1=2):
    """Worker cgroups of this supervisor beyond those of its pre-started workers and the
    empty ones it keeps: in zygote mode each of the (at most zygotePoolSize) slots the
    zygote holds has its cgroup made ahead, empty until the zygote clones a ci-pool
    worker into it, and the supervisor keeps two spare slots made; in both modes at most
    RECYCLED given-back cgroups wait empty for reuse. After a status round trip (see
    given_back())."""
    status(sup)
    left = worker_cgroups(sup.proc.pid)
    busy, gone = [], []
    for d in left:
        pids = procs(d)
        if pids is None:
            gone.append(d)  # removed since it was listed
            continue
        if {proc.name(p) for p in pids} - ({"ci-pool", None} if WORKER_START == "zygote" else set()):
            busy.append(d)
    # Pool slots and the spare slots the supervisor makes ahead in idle time
    # (ZYGOTE_SPARE_SLOTS, 2), and the kept ones: at most POOL + 2 + RECYCLED per
    # hierarchy (v1 has two, three with the CPU cap).
    per = 1 if VERSION == "v2" else per_v1
    ahead = POOL + 2 if WORKER_START == "zygote" else 0
    left = [d for d in left if d not in gone]
    return busy if len(left) - len(busy) <= (ahead + RECYCLED) * per else left


def given_back(sup, dirs):
    """True once each of a call's cgroups is gone, or kept for reuse: no process in it,
    and what its account still holds, the worker's filesystems gone, no more than a kept
    cgroup may (its peak and OOM count are reset when it is taken again). The supervisor
    gives a call's cgroup back right after sending its result, in the same turn of its
    loop: any later answer (status) comes after."""
    status(sup)
    for ctrl, d in dirs.items():
        if not os.path.exists(d):
            continue
        if procs(d) not in ([], None):
            return False
        if ctrl == "memory":
            try:
                if int(read(d, "memory.current" if VERSION == "v2" else "memory.usage_in_bytes")) > RESIDUAL:
                    return False
            except FileNotFoundError:
                pass  # removed meanwhile
    return True


def assert_limits(dirs, memory, procs):
    """A call's cgroups (dirs_of) hold its memory limit and its process limit."""
    memory_file = "memory.max" if VERSION == "v2" else "memory.limit_in_bytes"
    assert int(read(dirs["memory"], memory_file)) == memory
    assert int(read(dirs["pids"], "pids.max")) == procs


def start(make_supervisor, policy=POLICY, extra_args=()):
    """make_supervisor with cgroups: auto unless the policy says otherwise (auto is the
    reviewed profile's; said here too, so these tests do not depend on it)."""
    return make_supervisor(policy if "cgroups:" in policy else "cgroups: auto\n" + policy, extra_args)


def test_worker_runs_in_its_own_cgroup(make_supervisor):
    need_cgroups()
    sup = start(make_supervisor, POLICY)
    c = sup.connect()
    assert c.call("hello")["cgroup"] == VERSION
    call = start_held(sup, c, after="1")
    pid = call.wait_running()
    dirs = dirs_of(pid)
    mine = dirs_of(sup.proc.pid)
    for ctrl, d in dirs.items():
        assert owned_by(sup.proc.pid, d), dirs
        assert d != mine[ctrl]
    assert_limits(dirs, MEMORY, PROCS)
    if VERSION == "v2":
        assert read(dirs["memory"], "memory.oom.group") == "1"
    call.release()
    r = call.result()
    assert r["outcome"] == "ok", r
    assert r["evidence"]["runtime"]["cgroup"] == VERSION
    peak = r["exitStatus"]["memoryPeakBytes"]
    assert peak is None or 0 < peak <= MEMORY
    if VERSION == "v1":
        assert peak is not None
    assert given_back(sup, dirs), dirs


def test_tmp_pages_count_against_the_cgroup(make_supervisor):
    """/tmp is a tmpfs larger than memoryBytes: its pages are charged to the worker's
    cgroup, which RLIMIT_AS does not see, so filling it ends as resource_limit memory."""
    need_cgroups()
    sup = start(make_supervisor, ("memoryBytes: 67108864\ntmpBytes: 536870912\nmaxFileBytes: 536870912\n"))
    c = sup.connect()
    r = c.execute("chunk = b'x' * (1 << 20)\n"
                  "with open('/tmp/fill', 'wb') as f:\n"
                  "    for i in range(400):\n"
                  "        f.write(chunk)\n"
                  "        f.flush()\n"
                  "'not reached'\n")
    assert r["outcome"] == "resource_limit", r
    assert r["limit"] == "memory", r
    assert "OOM" in r["detail"], r
    peak = r["exitStatus"]["memoryPeakBytes"]
    if VERSION == "v1":
        assert peak is not None and peak >= 32 << 20, r["exitStatus"]
    # The supervisor goes on serving, with a fresh cgroup.
    assert c.execute("1 + 1")["outcome"] == "ok"


FILL = ("chunk = b'x' * (1 << 20)\n"
        "with open('/tmp/fill', 'wb') as f:\n"
        "    for i in range(%d):\n"
        "        f.write(chunk)\n"
        "        f.flush()\n"
        "'written'\n")


def test_a_kept_cgroup_counts_only_its_next_workers_own_account(make_supervisor):
    """A call's cgroup is given back empty after its result and reused by a later worker
    (the last kept is taken first when a slot, or in exec mode a call, needs a cgroup),
    whose result then carries only its own account: after a worker the cgroup's OOM
    killer ended (/tmp, whose pages are charged to the cgroup, filled past memoryBytes),
    a call there ends ok; after one that held 40 MiB, a trivial call there reports its
    own small peak. Several rounds, each call held long enough to see its cgroup."""
    need_cgroups()
    sup = start(make_supervisor, "memoryBytes: 67108864\ntmpBytes: 536870912\nmaxFileBytes: 536870912\n")
    c = sup.connect()
    last = {}  # memory cgroup -> "oom" or "big": the last such call that ran there
    seen = set()
    for i in range(4 * (POOL + 3)):
        kind = "oom" if i == 0 else "big" if i % 2 else "small"
        call = start_held(sup, c, after="1" if kind == "small" else FILL % (400 if kind == "oom" else 40))
        d = dirs_of(call.wait_running())["memory"]
        r = call.finish()
        peak = r["exitStatus"]["memoryPeakBytes"]
        if kind == "oom":
            assert r["outcome"] == "resource_limit" and r["limit"] == "memory", r
        else:
            assert r["outcome"] == "ok", (r, last.get(d))  # an earlier worker's OOM kill is not this one's
        if last.get(d) == "oom":
            seen.add("after an OOM kill")
        if kind == "big" and VERSION == "v1":
            assert peak >= 40 << 20, r["exitStatus"]
        if kind == "small" and last.get(d):
            seen.add("a small peak after a big one")
            assert peak is None or peak < 20 << 20, (r["exitStatus"], last[d])
        if kind != "small":
            last[d] = kind
    assert seen == {"after an OOM kill", "a small peak after a big one"}, (seen, last)
    assert calls_left(sup) == []


def test_a_kept_cgroup_somebody_moved_into_is_not_reused(make_supervisor):
    """A process of somebody else's moved into a kept cgroup (every hierarchy) keeps it
    from being reused: the next call runs in a new cgroup and ends ok, the supervisor
    logs that it could not remove the one holding the stranger, and once the stranger is
    gone nothing is left at shutdown. Exec mode, where a call's cgroup stays kept until
    the next call takes it (in zygote mode the spare slots take it at once, while idle)."""
    need_cgroups()
    if WORKER_START != "exec":
        pytest.skip("in zygote mode a kept cgroup is taken by a spare slot at once")
    sup = start(make_supervisor, POLICY)
    c = sup.connect()
    call = start_held(sup, c, after="1")
    dirs = dirs_of(call.wait_running())
    ok(call.finish())
    assert given_back(sup, dirs) and all(os.path.isdir(d) for d in dirs.values()), dirs  # kept, not removed
    stranger = subprocess.Popen(["sleep", "600"])
    try:
        for d in dirs.values():
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(stranger.pid))
        call = start_held(sup, c, after="2")
        other = dirs_of(call.wait_running())
        ok(call.finish(), "2")
        assert other["memory"] != dirs["memory"] and owned_by(sup.proc.pid, other["memory"]), (other, dirs)
        assert procs(dirs["memory"]) == [stranger.pid]
        assert "Could not remove the worker cgroup" in sup.read_log(), sup.read_log()[-2000:]
    finally:
        stranger.kill()
        stranger.wait()


def test_cgroup_given_back_after_timeout(make_supervisor):
    """The loop runs in its cgroup until the deadline kills it; the cgroup is given back
    with it, empty."""
    need_cgroups()
    sup = start(make_supervisor, POLICY + "timeoutMs: 3000\n")
    c = sup.connect()
    call = start_held(sup, c, after="while True:\n    pass\n")
    dirs = dirs_of(call.wait_running())
    call.release()
    r = call.result()
    assert r["outcome"] == "timeout", r
    assert given_back(sup, dirs), dirs
    assert calls_left(sup) == []


def test_cgroup_removed_at_shutdown(make_supervisor):
    need_cgroups()
    sup = start(make_supervisor, POLICY)
    call = start_held(sup)
    pid = call.wait_running()
    assert any(owned_by(sup.proc.pid, d) for d in dirs_of(pid).values())
    sup_pid, parents = sup.proc.pid, None
    from testlib.cgroups import worker_parents
    parents = worker_parents(sup_pid)
    assert sup.stop() == 0
    assert worker_cgroups(sup_pid, parents) == []


def test_cgroups_off(make_supervisor):
    require_sandbox()
    sup = start(make_supervisor, POLICY + "cgroups: off\n")
    c = sup.connect()
    assert c.call("hello")["cgroup"] == "none"
    r = c.execute("1")
    assert r["outcome"] == "ok"
    assert r["evidence"]["runtime"]["cgroup"] == "none"
    assert r["exitStatus"]["memoryPeakBytes"] is None


def test_auto_without_hierarchy_falls_back(make_supervisor):
    """--cgroup-fs names where the cgroup filesystem is mounted: a path without one
    stands for a host without a usable hierarchy."""
    require_sandbox()
    sup = start(make_supervisor, POLICY, ["--cgroup-fs", "/nonexistent"])
    c = sup.connect()
    assert c.call("hello")["cgroup"] == "none"
    assert c.execute("2")["outcome"] == "ok"
    assert "without a cgroup of their own" in sup.read_log()


def test_required_without_hierarchy_refuses_to_start(make_supervisor):
    require_sandbox()
    with pytest.raises(RuntimeError) as e:
        start(make_supervisor, POLICY + "cgroups: required\n", ["--cgroup-fs", "/nonexistent"])
    assert "requires a cgroup per worker" in str(e.value)


def test_check_config_names_the_cgroup_version(tmp_path):
    import subprocess

    # The reviewed profile has cgroups auto: the host's version is named; off says so.
    out = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True, timeout=WAIT_LIMIT).stdout
    assert "cgroup per worker: %s" % (VERSION or "none") in out, out
    off = tmp_path / "off.yaml"
    off.write_text("cgroups: off\n")
    out = subprocess.run([DAEMON, "--check-config", "--policy", str(off)], capture_output=True, text=True,
                         timeout=WAIT_LIMIT).stdout
    assert "cgroup per worker: none (cgroups: off)" in out, out
    p = tmp_path / "p.yaml"
    p.write_text("cgroups: required\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", "/nonexistent"],
                       capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert r.returncode == 1
    assert "but the policy requires one" in r.stdout


def test_many_calls_leave_nothing(make_supervisor):
    need_cgroups()
    sup = start(make_supervisor, POLICY)
    c = sup.connect()
    for i in range(5):
        assert c.execute("%d" % i)["outcome"] == "ok"
    assert calls_left(sup) == []


def test_supervisors_sharing_a_cgroup(make_supervisor):
    """Supervisors started in the same cgroup share v1's "codeinterp" directory: one
    that exits (and removes it, being empty) does not break the other."""
    need_cgroups()
    a = start(make_supervisor, POLICY)
    b = start(make_supervisor, POLICY)
    cb = b.connect()
    assert cb.execute("1")["outcome"] == "ok"
    assert a.stop() == 0
    r = cb.execute("2")
    assert r["outcome"] == "ok", r


def test_pool_workers_wait_in_their_own_cgroups(make_supervisor):
    """Zygote mode: each pre-started worker is moved into a cgroup made for its slot when
    the zygote clones it, so the move (which waits for an RCU grace period) is off the
    call's path; the call then runs in that cgroup, given back after the reap."""
    need_cgroups()
    if WORKER_START != "zygote":
        pytest.skip("pre-started workers exist in zygote mode only")
    sup = start(make_supervisor, POLICY)
    mine = dirs_of(sup.proc.pid)

    def settled():
        # Each moves itself first thing after its clone (its name is set just before).
        pool = proc.pool_workers(sup.proc.pid)
        # moved in every hierarchy (one after the other)
        return len(pool) == POOL and all(all(d != mine[c] for c, d in dirs_of(p).items()) for p in pool) and pool

    pool = wait_for(settled, "the pool to fill, its workers each in a cgroup of its own")
    waiting = {p: dirs_of(p) for p in pool}
    for dirs in waiting.values():
        for ctrl, d in dirs.items():
            assert owned_by(sup.proc.pid, d) and d != mine[ctrl], dirs
        assert int(read(dirs["pids"], "pids.max")) == PROCS
    assert len({d["memory"] for d in waiting.values()}) == POOL  # one cgroup per worker
    c = sup.connect()
    call = start_held(sup, c, after="1")
    pid = call.wait_running()
    assert pid in waiting, (pid, waiting)  # the oldest pre-started worker took it
    dirs = waiting[pid]
    assert dirs_of(pid) == dirs
    call.release()
    r = call.result()
    assert r["outcome"] == "ok", r
    assert given_back(sup, dirs), dirs


def test_reload_rewrites_a_prepared_cgroups_limits(make_supervisor):
    """A slot's cgroup is made with the limits of the policy at start; a call admitted
    after a reload that changed memoryBytes or maxProcesses gets them rewritten before
    its worker reads its plan: lowered, then raised above the start's (v1 keeps the
    memory limit under memsw's at each step)."""
    need_cgroups()
    import signal

    sup = start(make_supervisor, POLICY)
    assert sup.connect().execute("1")["outcome"] == "ok"
    for memory, procs_max in ((MEMORY // 2, PROCS - 4), (MEMORY * 2, PROCS + 4)):
        with open(sup.policy_path, "w") as f:
            f.write("workerStart: %s\ncgroups: auto\nmemoryBytes: %d\nmaxProcesses: %d\n" %
                    (WORKER_START, memory, procs_max))
        log_before = sup.read_log().count("Reloaded the policy")
        sup.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: sup.read_log().count("Reloaded the policy") > log_before, "the reload")
        call = start_held(sup, after="1")
        dirs = dirs_of(call.wait_running())
        assert_limits(dirs, memory, procs_max)
        call.release()
        r = call.result()
        assert r["outcome"] == "ok", r
        assert worker_pids_of(sup) == []


# A busy loop of about a second: the CPU time it got over its wall-clock time, overall
# and the best of its quarters.
BUSY = """import time
t0, c0 = time.monotonic(), time.process_time()
best, t1, c1 = 0.0, t0, c0
while time.monotonic() - t0 < 1.0:
    for _ in range(20000):
        pass
    t, c = time.monotonic(), time.process_time()
    if t - t1 >= 0.25:
        best, t1, c1 = max(best, (c - c1) / (t - t1)), t, c
((time.process_time() - c0) / (time.monotonic() - t0), best)
"""


def test_cpu_cap_throttles_a_busy_loop(make_supervisor):
    """cpuBandwidthPercent 20: the worker's cgroup gets 20 ms of CPU per 100 ms period
    (v2 cpu.max, v1 cpu.cfs_quota_us/cpu.cfs_period_us), so a busy loop of a second
    gets clearly less CPU time than wall time (a loaded machine only gives it less);
    the cgroup goes after the call."""
    need_cgroups()
    if not has_cpu_controller():
        pytest.skip("no cpu controller")
    sup = start(make_supervisor, POLICY + "cpuBandwidthPercent: 20\n")
    c = sup.connect()
    assert c.call("hello")["limits"]["cpuBandwidthPercent"] == 20
    call = start_held(sup, c, after=BUSY)
    pid = call.wait_running()
    dirs = dirs_of(pid, cpu=True)
    mine = dirs_of(sup.proc.pid, cpu=True)
    assert owned_by(sup.proc.pid, dirs["cpu"]) and dirs["cpu"] != mine["cpu"], dirs
    if VERSION == "v2":
        assert read(dirs["cpu"], "cpu.max") == "20000 100000"
    else:
        assert read(dirs["cpu"], "cpu.cfs_period_us") == "100000"
        assert read(dirs["cpu"], "cpu.cfs_quota_us") == "20000"
    call.release()
    r = call.result()
    assert r["outcome"] == "ok", r
    assert r["evidence"]["limits"]["cpuBandwidthPercent"] == 20
    ratio, best = eval(r["result"]["text"])
    assert ratio < 0.5, (ratio, best)
    assert given_back(sup, dirs), dirs
    assert calls_left(sup, per_v1=3) == []


def test_without_cpu_cap_the_loop_gets_the_cpu(make_supervisor):
    """The default (0, off): nothing limits the loop's CPU. The worker stays in the
    supervisor's cpu cgroup (no cpu cgroup is made, nothing is written), and the kernel
    says that cgroup has no bandwidth limit: what share of a CPU the loop then gets is
    the machine's business (measured, it is about a whole CPU on an idle one)."""
    need_cgroups()
    sup = start(make_supervisor, POLICY)
    c = sup.connect()
    assert c.call("hello")["limits"]["cpuBandwidthPercent"] == 0
    call = start_held(sup, c, after=BUSY)
    pid = call.wait_running()
    if VERSION == "v1" and has_cpu_controller():
        cpu = dirs_of(pid, cpu=True)["cpu"]
        assert cpu == dirs_of(sup.proc.pid, cpu=True)["cpu"]
        assert read(cpu, "cpu.cfs_quota_us") == "-1"
    elif VERSION == "v2":
        assert read(dirs_of(pid, cpu=True)["cpu"], "cpu.max").split()[0] == "max"
    call.release()
    r = call.result()
    assert r["outcome"] == "ok", r
    ratio, best = eval(r["result"]["text"])
    assert best > 0, (ratio, best)
    assert calls_left(sup) == []


def fake_v1_tree(tmp_path):
    """A cgroup fs with this process's memory and pids hierarchies (links to where they
    are mounted: the supervisor's workers get real cgroups, so it passes its self-check
    and serves) but no cpu hierarchy, as a host without the cpu controller has; or
    None where this process has no v1 memory and pids cgroups."""
    if VERSION != "v1" or set(dirs_of("self")) != {"memory", "pids"}:
        return None
    tmp_path.mkdir(parents=True, exist_ok=True)
    for c in ("memory", "pids"):
        (tmp_path / c).symlink_to(os.path.join(FS, c))
    return str(tmp_path)


def test_cpu_cap_without_cpu_controller(make_supervisor, tmp_path):
    """A cap and no cpu controller: required refuses to start, saying why; auto runs
    without the cap and says so; --check-config says which."""
    import subprocess

    require_sandbox()
    fs = fake_v1_tree(tmp_path / "fs")
    if fs is None:
        pytest.skip("this process has no v1 memory and pids cgroups to fake")
    with pytest.raises(RuntimeError) as e:
        start(make_supervisor, POLICY + "cgroups: required\ncpuBandwidthPercent: 20\n", ["--cgroup-fs", fs])
    assert "cpuBandwidthPercent 20 needs the cpu controller" in str(e.value)
    s = start(make_supervisor, POLICY + "cpuBandwidthPercent: 20\n", ["--cgroup-fs", fs])
    wait_for(lambda: "Workers run without the CPU cap" in s.read_log(), lambda: "the notice: " + s.read_log())
    ok(s.connect().execute("6 * 7"), "42")
    p = tmp_path / "p.yaml"
    p.write_text("cgroups: required\ncpuBandwidthPercent: 20\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", fs],
                       capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert r.returncode == 1
    assert "needs the cpu controller" in r.stdout, r.stdout
    p.write_text("cgroups: auto\ncpuBandwidthPercent: 20\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", fs],
                       capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert "cpu cap: none, workers run without the 20% cap (cgroup v1: " in r.stdout, r.stdout
    if VERSION is not None and has_cpu_controller():
        r = subprocess.run([DAEMON, "--check-config", "--policy", str(p)], capture_output=True, text=True,
                           timeout=WAIT_LIMIT)
        assert "cpu cap: 20% of one CPU per worker" in r.stdout, r.stdout
    r = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert "cpu cap: off" in r.stdout, r.stdout


def empty_worker_cgroups(sup):
    """This supervisor's worker cgroups that hold no process: the slots made ahead."""
    return [d for d in worker_cgroups(sup.proc.pid) if procs(d) == []]


def test_prepared_cgroups_removed_under_the_supervisor(make_supervisor):
    """Somebody (an administrator's cleanup, a confused agent) removes the empty worker
    cgroups made ahead while the supervisor runs. A spare slot found removed when it is
    given to the zygote is dropped with the other spares and made again at once: the
    call runs. Only a pre-started worker whose slot was removed before it moved in
    fails (stage "cgroup"), as worker_error, never as code that ran without its
    cgroup. Later calls run in new cgroups; nothing is left behind at shutdown. (In
    exec mode a cgroup is made at call time: nothing is made ahead.)"""
    need_cgroups()
    sup = start(make_supervisor, POLICY)
    c = sup.connect()
    assert c.execute("1")["outcome"] == "ok"
    removed_dirs = []
    rounds = 3 if WORKER_START == "zygote" else 1
    for _ in range(rounds):  # the supervisor makes spares again as slots are used up
        if WORKER_START == "zygote":
            wait_for(lambda: empty_worker_cgroups(sup), "slots' cgroups made ahead")
        for d in empty_worker_cgroups(sup):
            try:
                os.rmdir(d)
                removed_dirs.append(d)
            except (FileNotFoundError, OSError):
                pass  # taken meanwhile (a worker moved in) or gone
        outcomes = []
        for _ in range(POOL + 1):
            r = c.execute("import os\nopen('/proc/self/cgroup').read() if os.path.exists('/proc/self') else 1")
            assert r.get("type") == "result", r
            outcomes.append(r)
        for r in outcomes:
            if r["outcome"] != "ok":
                assert r["outcome"] == "worker_error", r
                # only a pre-started worker given its slot before the removal and
                # not yet moved in fails; a spare found removed is made again
                assert (r.get("workerError") or {}).get("stage") == "cgroup", r
    if WORKER_START == "zygote":
        assert removed_dirs, "no prepared cgroup was seen"
    # Recovered: every call runs, in a cgroup of its own, again.
    good = 0
    for _ in range(3 * (POOL + 2)):
        r = c.execute("1")
        assert r.get("type") == "result", r
        good = good + 1 if r["outcome"] == "ok" else 0
        if good > POOL + 2:
            break
    assert good > POOL + 2, r
    call = start_held(sup, c, after="1")
    pid = call.wait_running()
    assert all(owned_by(sup.proc.pid, d) for d in dirs_of(pid).values())
    call.release()
    ok(call.result())
    assert c.call("hello")["cgroup"] == VERSION
