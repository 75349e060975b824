"""A cgroup per worker (policy key cgroups, docs/policy.md "Per-worker cgroups"): the
worker is in a cgroup of its own while it runs, with memoryBytes and maxProcesses as
its limits; the cgroup is gone after the call (also after a timeout and at shutdown);
the cgroup's OOM killer ends a call as resource_limit memory with memoryPeakBytes;
cgroups: off and a host without a usable hierarchy give "none", and required refuses
to start there; cpuBandwidthPercent caps a busy loop's CPU time, nothing of the cpu
controller is used without it, and a cap without a cpu controller refuses to start
(required) or runs without (auto). Runs in both worker start modes
(CODEINTERP_WORKER_START)."""
import errno
import os
import threading

import pytest

import conftest
from conftest import Supervisor, require_sandbox, wait_until, worker_pids_of

FS = "/sys/fs/cgroup"
MEMORY = 268435456
PROCS = 24
POLICY = "memoryBytes: %d\nmaxProcesses: %d\n" % (MEMORY, PROCS)


def _host_has_cgroups():
    """The version auto would pick here: "v2", "v1" or None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    for n, ctrls, path in lines:
        if n == "0" and ctrls == "":
            mnt = FS if os.path.exists(os.path.join(FS, "cgroup.controllers")) else os.path.join(FS, "unified")
            try:
                with open(os.path.join(mnt, path.lstrip("/"), "cgroup.controllers")) as c:
                    have = c.read().split()
                if "memory" in have and "pids" in have:
                    return "v2"
            except OSError:
                pass
    ctrls = {c for _, cs, _ in lines for c in cs.split(",")}
    if "memory" in ctrls and "pids" in ctrls and os.path.isdir(os.path.join(FS, "memory")):
        return "v1"
    return None


VERSION = _host_has_cgroups()


def need_cgroups():
    require_sandbox()
    if VERSION is None:
        if os.environ.get("CODEINTERP_MUST_SANDBOX") == "1":
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but no cgroup hierarchy with memory and pids")
        pytest.skip("no cgroup hierarchy with the memory and pids controllers")


def cgroup_dirs(pid, cpu=False):
    """{"memory": dir, "pids": dir} (and "cpu" with cpu) of a process, as seen from the host."""
    with open("/proc/%d/cgroup" % pid) as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    if VERSION == "v2":
        mnt = FS if os.path.exists(os.path.join(FS, "cgroup.controllers")) else os.path.join(FS, "unified")
        path = [p for n, c, p in lines if n == "0" and c == ""][0]
        d = os.path.join(mnt, path.lstrip("/"))
        return {"memory": d, "pids": d, "cpu": d} if cpu else {"memory": d, "pids": d}
    out = {}
    for _, cs, path in lines:
        for c in cs.split(","):
            if c in ("memory", "pids") or (cpu and c == "cpu"):
                out[c] = os.path.join(FS, c, path.lstrip("/"))
    return out


def read(d, name):
    with open(os.path.join(d, name)) as f:
        return f.read().strip()


def leftovers(sup_pid):
    """Worker cgroups of this supervisor (named w<pid>-<n>) that still exist."""
    left = []
    for root, dirs, _ in os.walk(FS):
        for d in dirs:
            if d.startswith("w%d-" % sup_pid):
                left.append(os.path.join(root, d))
        if root.count("/") > 12:
            dirs[:] = []
    return left


def cgroup_procs(d):
    """The pids in cgroup d, or None when it is gone. A cgroup the supervisor is
    removing while we look may still be listed: opening its files then fails with
    ENOENT, or (cgroup v1, the directory already dying) reading fails with ENODEV."""
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENODEV):
            return None
        raise


POOL = 2  # zygotePoolSize's default


def calls_left(sup, per_v1=2):
    """Worker cgroups of this supervisor beyond those of its pre-started workers: in
    zygote mode each of the (at most zygotePoolSize) slots the zygote holds has its
    cgroup made ahead, empty until the zygote clones a ci-pool worker into it, and the
    supervisor keeps two spare slots made."""
    left = leftovers(sup.proc.pid)
    if conftest.WORKER_START != "zygote":
        return left
    busy, gone = [], []
    for d in left:
        pids = cgroup_procs(d)
        if pids is None:
            gone.append(d)  # removed since it was listed
            continue
        names = set()
        for p in pids:
            try:
                with open("/proc/%d/comm" % p) as f:
                    names.add(f.read().strip())
            except OSError:
                pass
        if names - {"ci-pool"}:
            busy.append(d)
    # Pool slots and the spare slots the supervisor makes ahead in idle time
    # (ZYGOTE_SPARE_SLOTS, 2): at most POOL + 2 per hierarchy (v1 has two, three with
    # the CPU cap).
    per = 1 if VERSION == "v2" else per_v1
    left = [d for d in left if d not in gone]
    return busy if len(left) - len(busy) <= (POOL + 2) * per else left


@pytest.fixture
def sups():
    started = []

    def make(policy=POLICY, extra_args=()):
        # auto is the reviewed profile's; said here too, so these tests do not depend on it.
        if "cgroups:" not in policy:
            policy = "cgroups: auto\n" + policy
        s = Supervisor(policy, extra_args)
        s.wait_ready()
        started.append(s)
        return s

    yield make
    for s in started:
        pid = s.proc.pid
        assert s.stop() == 0
        assert leftovers(pid) == [], "cgroups left behind by supervisor %d" % pid


def run_async(conn, code):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", conn.execute(code)))
    t.start()
    return t, box


def test_worker_runs_in_its_own_cgroup(sups):
    need_cgroups()
    sup = sups()
    c = sup.connect()
    assert c.call("hello")["cgroup"] == VERSION
    t, box = run_async(c, "import time\ntime.sleep(1.5)\n1")
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids, "no worker seen"
    dirs = cgroup_dirs(pids[0])
    mine = cgroup_dirs(sup.proc.pid)
    for ctrl, d in dirs.items():
        assert os.path.basename(d).startswith("w%d-" % sup.proc.pid), dirs
        assert d != mine[ctrl]
    if VERSION == "v2":
        assert int(read(dirs["memory"], "memory.max")) == MEMORY
        assert read(dirs["memory"], "memory.oom.group") == "1"
    else:
        assert int(read(dirs["memory"], "memory.limit_in_bytes")) == MEMORY
    assert int(read(dirs["pids"], "pids.max")) == PROCS
    t.join(30)
    r = box["r"]
    assert r["outcome"] == "ok", r
    assert r["evidence"]["runtime"]["cgroup"] == VERSION
    peak = r["exitStatus"]["memoryPeakBytes"]
    assert peak is None or 0 < peak <= MEMORY
    if VERSION == "v1":
        assert peak is not None
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs.values()), timeout=2), dirs


def test_tmp_pages_count_against_the_cgroup(sups):
    """/tmp is a tmpfs larger than memoryBytes: its pages are charged to the worker's
    cgroup, which RLIMIT_AS does not see, so filling it ends as resource_limit memory."""
    need_cgroups()
    sup = sups("memoryBytes: 67108864\ntmpBytes: 536870912\nmaxFileBytes: 536870912\n")
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


def test_cgroup_removed_after_timeout(sups):
    need_cgroups()
    sup = sups(POLICY + "timeoutMs: 1000\n")
    c = sup.connect()
    t, box = run_async(c, "while True:\n    pass\n")
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids, "no worker seen"
    dirs = cgroup_dirs(pids[0])
    t.join(30)
    assert box["r"]["outcome"] == "timeout", box["r"]
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs.values()), timeout=2), dirs
    assert wait_until(lambda: calls_left(sup) == [], timeout=2)


def test_cgroup_removed_at_shutdown(sups):
    need_cgroups()
    sup = sups()
    c = sup.connect()
    rid = c.request("execute", summary="t", code="import time\ntime.sleep(30)\n", sourceIds=[])
    assert wait_until(lambda: leftovers(sup.proc.pid), timeout=10), "no worker cgroup seen"
    pid = sup.proc.pid
    assert sup.stop() == 0
    assert leftovers(pid) == []
    del rid


def test_cgroups_off(sups):
    require_sandbox()
    sup = sups(POLICY + "cgroups: off\n")
    c = sup.connect()
    assert c.call("hello")["cgroup"] == "none"
    r = c.execute("1")
    assert r["outcome"] == "ok"
    assert r["evidence"]["runtime"]["cgroup"] == "none"
    assert r["exitStatus"]["memoryPeakBytes"] is None


def test_auto_without_hierarchy_falls_back(sups):
    """--cgroup-fs names where the cgroup filesystem is mounted: a path without one
    stands for a host without a usable hierarchy."""
    require_sandbox()
    sup = sups(POLICY, ["--cgroup-fs", "/nonexistent"])
    c = sup.connect()
    assert c.call("hello")["cgroup"] == "none"
    assert c.execute("2")["outcome"] == "ok"
    assert "without a cgroup of their own" in sup.read_log()


def test_required_without_hierarchy_refuses_to_start():
    require_sandbox()
    with pytest.raises(RuntimeError) as e:
        Supervisor(POLICY + "cgroups: required\n", ["--cgroup-fs", "/nonexistent"]).wait_ready()
    assert "requires a cgroup per worker" in str(e.value)


def test_check_config_names_the_cgroup_version(tmp_path):
    import subprocess

    from conftest import DAEMON
    # The reviewed profile has cgroups auto: the host's version is named; off says so.
    out = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True).stdout
    assert "cgroup per worker: %s" % (VERSION or "none") in out, out
    off = tmp_path / "off.yaml"
    off.write_text("cgroups: off\n")
    out = subprocess.run([DAEMON, "--check-config", "--policy", str(off)], capture_output=True, text=True).stdout
    assert "cgroup per worker: none (cgroups: off)" in out, out
    p = tmp_path / "p.yaml"
    p.write_text("cgroups: required\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", "/nonexistent"],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "but the policy requires one" in r.stdout


def test_many_calls_leave_nothing(sups):
    need_cgroups()
    sup = sups()
    c = sup.connect()
    for i in range(5):
        assert c.execute("%d" % i)["outcome"] == "ok"
    assert wait_until(lambda: calls_left(sup) == [], timeout=2)


def test_supervisors_sharing_a_cgroup(sups):
    """Supervisors started in the same cgroup share v1's "codeinterp" directory: one
    that exits (and removes it, being empty) does not break the other."""
    need_cgroups()
    a = sups()
    b = sups()
    cb = b.connect()
    assert cb.execute("1")["outcome"] == "ok"
    assert a.stop() == 0
    r = cb.execute("2")
    assert r["outcome"] == "ok", r


def pool_workers_of(sup):
    """Pre-started workers (ci-pool) of this supervisor: its children in zygote mode."""
    return [p for p in conftest.pids_named("ci-pool") if conftest.descends_from(p, sup.proc.pid)]


def test_pool_workers_wait_in_their_own_cgroups(sups):
    """Zygote mode: each pre-started worker is moved into a cgroup made for its slot when
    the zygote clones it, so the move (which waits for an RCU grace period) is off the
    call's path; the call then runs in that cgroup, and it goes after the reap."""
    need_cgroups()
    if conftest.WORKER_START != "zygote":
        pytest.skip("pre-started workers exist in zygote mode only")
    sup = sups()
    mine = cgroup_dirs(sup.proc.pid)

    def settled():
        # Each moves itself first thing after its clone (its name is set just before).
        pool = pool_workers_of(sup)
        return len(pool) == POOL and all(cgroup_dirs(p) != mine for p in pool) and pool

    pool = wait_until(settled, timeout=10)
    assert pool, "the pool did not fill, or its workers stayed in the supervisor's cgroup"
    waiting = {p: cgroup_dirs(p) for p in pool}
    for dirs in waiting.values():
        for ctrl, d in dirs.items():
            assert os.path.basename(d).startswith("w%d-" % sup.proc.pid) and d != mine[ctrl], dirs
        assert int(read(dirs["pids"], "pids.max")) == PROCS
    assert len({d["memory"] for d in waiting.values()}) == POOL  # one cgroup per worker
    c = sup.connect()
    t, box = run_async(c, "import time\ntime.sleep(1)\n1")
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids and pids[0] in waiting, (pids, waiting)  # the oldest pre-started worker took it
    dirs = waiting[pids[0]]
    assert cgroup_dirs(pids[0]) == dirs
    t.join(30)
    assert box["r"]["outcome"] == "ok", box["r"]
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs.values()), timeout=2), dirs


def test_reload_rewrites_a_prepared_cgroups_limits(sups):
    """A slot's cgroup is made with the limits of the policy at start; a call admitted
    after a reload that changed memoryBytes or maxProcesses gets them rewritten before
    its worker reads its plan: lowered, then raised above the start's (v1 keeps the
    memory limit under memsw's at each step)."""
    need_cgroups()
    import signal

    sup = sups()
    assert sup.connect().execute("1")["outcome"] == "ok"
    for memory, procs in ((MEMORY // 2, PROCS - 4), (MEMORY * 2, PROCS + 4)):
        with open(sup.policy_path, "w") as f:
            f.write("workerStart: %s\ncgroups: auto\nmemoryBytes: %d\nmaxProcesses: %d\n" %
                    (conftest.WORKER_START, memory, procs))
        log_before = sup.read_log().count("Reloaded the policy")
        sup.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: sup.read_log().count("Reloaded the policy") > log_before, 5), sup.read_log()
        c = sup.connect()
        t, box = run_async(c, "import time\ntime.sleep(1)\n1")
        pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
        assert pids, "no worker seen"
        dirs = cgroup_dirs(pids[0])
        if VERSION == "v2":
            assert int(read(dirs["memory"], "memory.max")) == memory
        else:
            assert int(read(dirs["memory"], "memory.limit_in_bytes")) == memory
        assert int(read(dirs["pids"], "pids.max")) == procs
        t.join(30)
        assert box["r"]["outcome"] == "ok", box["r"]
        assert wait_until(lambda: not worker_pids_of(sup), timeout=5)


# A busy loop of about a second: the CPU time it got over its wall-clock time, overall
# and the best of its quarters (a loaded machine may take the CPU away for a while).
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


def host_has_cpu_controller():
    if VERSION == "v2":
        return True  # checked by the supervisor: refused below if missing
    with open("/proc/self/cgroup") as f:
        return any("cpu" in line.split(":")[1].split(",") for line in f) and os.path.isdir(os.path.join(FS, "cpu"))


def test_cpu_cap_throttles_a_busy_loop(sups):
    """cpuBandwidthPercent 20: the worker's cgroup gets 20 ms of CPU per 100 ms period
    (v2 cpu.max, v1 cpu.cfs_quota_us/cpu.cfs_period_us), so a busy loop of a second
    gets clearly less CPU time than wall time; the cgroup goes after the call."""
    need_cgroups()
    if not host_has_cpu_controller():
        pytest.skip("no cpu controller")
    sup = sups(POLICY + "cpuBandwidthPercent: 20\n")
    c = sup.connect()
    assert c.call("hello")["limits"]["cpuBandwidthPercent"] == 20
    t, box = run_async(c, "import time\ntime.sleep(0.5)\n" + BUSY)
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids, "no worker seen"
    dirs = cgroup_dirs(pids[0], cpu=True)
    mine = cgroup_dirs(sup.proc.pid, cpu=True)
    assert os.path.basename(dirs["cpu"]).startswith("w%d-" % sup.proc.pid) and dirs["cpu"] != mine["cpu"], dirs
    if VERSION == "v2":
        assert read(dirs["cpu"], "cpu.max") == "20000 100000"
    else:
        assert read(dirs["cpu"], "cpu.cfs_period_us") == "100000"
        assert read(dirs["cpu"], "cpu.cfs_quota_us") == "20000"
    t.join(30)
    r = box["r"]
    assert r["outcome"] == "ok", r
    assert r["evidence"]["limits"]["cpuBandwidthPercent"] == 20
    ratio, best = eval(r["result"]["text"])
    assert ratio < 0.5, (ratio, best)
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs.values()), timeout=2), dirs
    assert wait_until(lambda: calls_left(sup, per_v1=3) == [], timeout=2)


def test_without_cpu_cap_the_loop_gets_the_cpu(sups):
    """The default (0, off): the same loop gets about a whole CPU, and the worker stays
    in the supervisor's cpu cgroup (no cpu cgroup is made, nothing is written)."""
    need_cgroups()
    sup = sups()
    c = sup.connect()
    assert c.call("hello")["limits"]["cpuBandwidthPercent"] == 0
    t, box = run_async(c, "import time\ntime.sleep(0.5)\n" + BUSY)
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids, "no worker seen"
    if VERSION == "v1" and host_has_cpu_controller():
        assert cgroup_dirs(pids[0], cpu=True)["cpu"] == cgroup_dirs(sup.proc.pid, cpu=True)["cpu"]
    t.join(30)
    r = box["r"]
    assert r["outcome"] == "ok", r
    ratio, best = eval(r["result"]["text"])
    assert best > 0.7, (ratio, best)
    assert wait_until(lambda: calls_left(sup) == [], timeout=2)


def fake_v1_tree(tmp_path):
    """A cgroup fs of plain directories with this process's memory and pids cgroups
    but no cpu hierarchy (a supervisor started from here has the same), or None."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    own = {c: p for _, cs, p in lines for c in cs.split(",") if c in ("memory", "pids")}
    if len(own) != 2:
        return None
    for c, p in own.items():
        (tmp_path / c / p.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return str(tmp_path)


def test_cpu_cap_without_cpu_controller(tmp_path):
    """A cap and no cpu controller: required refuses to start, saying why; auto runs
    without the cap and says so; --check-config says which."""
    import subprocess

    from conftest import DAEMON
    require_sandbox()
    fs = fake_v1_tree(tmp_path / "fs")
    if fs is None:
        pytest.skip("this process has no v1 memory and pids cgroups to fake")
    with pytest.raises(RuntimeError) as e:
        Supervisor(POLICY + "cgroups: required\ncpuBandwidthPercent: 20\n", ["--cgroup-fs", fs]).wait_ready()
    assert "cpuBandwidthPercent 20 needs the cpu controller" in str(e.value)
    # The fake tree has no memory or pids files: a worker could not get its cgroup, and
    # the self-check would refuse to serve; this is about the start-up notice only.
    s = Supervisor("cgroups: auto\n" + POLICY + "cpuBandwidthPercent: 20\n", ["--cgroup-fs", fs, "--no-self-check"])
    s.wait_ready()
    try:
        assert wait_until(lambda: "Workers run without the CPU cap" in s.read_log(), 5), s.read_log()
    finally:
        s.stop()
    p = tmp_path / "p.yaml"
    p.write_text("cgroups: required\ncpuBandwidthPercent: 20\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", fs],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "needs the cpu controller" in r.stdout, r.stdout
    p.write_text("cgroups: auto\ncpuBandwidthPercent: 20\n")
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(p), "--cgroup-fs", fs],
                       capture_output=True, text=True)
    assert "cpu cap: none, workers run without the 20% cap (cgroup v1: " in r.stdout, r.stdout
    if VERSION is not None and host_has_cpu_controller():
        r = subprocess.run([DAEMON, "--check-config", "--policy", str(p)], capture_output=True, text=True)
        assert "cpu cap: 20% of one CPU per worker" in r.stdout, r.stdout
    r = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True)
    assert "cpu cap: off" in r.stdout, r.stdout


def empty_worker_cgroups(sup):
    """This supervisor's worker cgroups that hold no process: the slots made ahead."""
    out = []
    for d in leftovers(sup.proc.pid):
        if cgroup_procs(d) == []:
            out.append(d)
    return out


def test_prepared_cgroups_removed_under_the_supervisor(sups):
    """Somebody (an administrator's cleanup, a confused agent) removes the empty worker
    cgroups made ahead while the supervisor runs. A spare slot found removed when it is
    given to the zygote is dropped with the other spares and made again at once: the
    call runs. Only a pre-started worker whose slot was removed before it moved in
    fails (stage "cgroup"), as worker_error, never as code that ran without its
    cgroup. Later calls run in new cgroups; nothing is left behind at shutdown. (In
    exec mode a cgroup is made at call time: nothing is made ahead.)"""
    need_cgroups()
    sup = sups()
    c = sup.connect()
    assert c.execute("1")["outcome"] == "ok"
    removed = []
    rounds = 3 if conftest.WORKER_START == "zygote" else 1
    for _ in range(rounds):  # the supervisor makes spares again as slots are used up
        wait_until(lambda: empty_worker_cgroups(sup), timeout=5)
        for d in empty_worker_cgroups(sup):
            try:
                os.rmdir(d)
                removed.append(d)
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
    if conftest.WORKER_START == "zygote":
        assert removed, "no prepared cgroup was seen"
    # Recovered: every call runs, in a cgroup of its own, again.
    ok = 0
    for _ in range(3 * (POOL + 2)):
        r = c.execute("1")
        assert r.get("type") == "result", r
        ok = ok + 1 if r["outcome"] == "ok" else 0
        if ok > POOL + 2:
            break
    assert ok > POOL + 2, r
    t, box = run_async(c, "import time\ntime.sleep(1)\n1")
    pids = wait_until(lambda: worker_pids_of(sup), timeout=10)
    assert pids and all(os.path.basename(d).startswith("w%d-" % sup.proc.pid)
                        for d in cgroup_dirs(pids[0]).values())
    t.join(30)
    assert box["r"]["outcome"] == "ok", box["r"]
    assert c.call("hello")["cgroup"] == VERSION
