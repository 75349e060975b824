"""A host uid of its own for every live worker (docs/policy.md "Workers' host ids"):
two workers running at once have different host uids (reported as exitStatus.hostUid
and seen by the host in /proc/PID/status), while inside both are workerUid; a worker at
its process limit does not keep another from starting threads; an id block that holds
a host user is refused at start and by --check-config; a block too small for the
workers alive ends a call as worker_error; the ids of a zygote's pre-started workers
come back after the zygote is killed. Runs in both worker start modes
(CODEINTERP_WORKER_START)."""
import os
import signal
import subprocess
import threading

import pytest
from codeinterp.records import ExitStatus, from_wire

from conftest import DAEMON, Supervisor, require_sandbox, status, wait_until, worker_pids_of

BASE = 0x7ff00000
SLEEP_AND_SHOW_IDS = "import os, time\ntime.sleep(%s)\n(os.getuid(), os.getgid())\n"


@pytest.fixture
def sups():
    require_sandbox()
    started = []

    def make(policy=""):
        s = Supervisor(policy)
        s.wait_ready()
        started.append(s)
        return s

    yield make
    for s in started:
        assert s.stop() == 0


def run_async(sup, code):
    box = {}
    c = sup.connect()
    t = threading.Thread(target=lambda: box.setdefault("r", c.execute(code)))
    t.start()
    return t, box


def host_ids(pid):
    """(real uid, real gid) of a process, as the host sees them."""
    ids = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Uid", "Gid"):
                ids[key] = int(value.split()[0])
    return ids["Uid"], ids["Gid"]


def test_concurrent_workers_have_their_own_host_uids(sups):
    sup = sups("maxActiveWorkers: 2\n")
    runs = [run_async(sup, SLEEP_AND_SHOW_IDS % "1.5") for _ in range(2)]
    pids = wait_until(lambda: len(worker_pids_of(sup)) == 2 and worker_pids_of(sup), timeout=10)
    assert pids, "two workers did not run at once"
    # An exec-mode worker is named before it takes its ids (worker_main.c): wait for them.
    def workers_ids():
        ids = sorted(host_ids(p) for p in pids)
        return ids if (0, 0) not in ids else None
    seen = wait_until(workers_ids, timeout=5)
    assert seen, "a worker kept root's ids"
    for t, _ in runs:
        t.join(30)
    results = [box["r"] for _, box in runs]
    for r in results:
        assert r["outcome"] == "ok", r
        assert r["result"]["text"] == "(65534, 65534)", r  # workerUid/workerGid inside
    uids = sorted(r["exitStatus"]["hostUid"] for r in results)
    assert uids[0] != uids[1], uids
    assert all(BASE <= u < BASE + 65536 for u in uids), uids
    # The host sees each worker as its own uid (and gid), the ones the results report.
    assert [u for u, _ in seen] == uids, (seen, uids)
    assert all(u == g for u, g in seen), seen
    # The Python client's record carries it too.
    assert from_wire(ExitStatus, results[0]["exitStatus"]).host_uid == results[0]["exitStatus"]["hostUid"]


def test_a_worker_at_its_process_limit_does_not_stop_another(sups):
    """RLIMIT_NPROC counts the tasks of a user: a worker that has used up maxProcesses
    must not take the budget of a worker running beside it."""
    procs = 8
    sup = sups("maxActiveWorkers: 2\nmaxProcesses: %d\n" % procs)
    hog = ("import threading, time\n"
           "stop = threading.Event()\n"
           "n = 0\n"
           "while True:\n"
           "    try:\n"
           "        threading.Thread(target=stop.wait).start()\n"
           "    except RuntimeError:\n"
           "        break\n"
           "    n += 1\n"
           "time.sleep(2)\n"
           "stop.set()\n"
           "n\n")
    t1, hog_box = run_async(sup, hog)

    def hog_full():
        for p in worker_pids_of(sup):
            with open("/proc/%d/status" % p) as f:
                if any(line.startswith("Threads:") and int(line.split()[1]) >= procs for line in f):
                    return True
        return False

    assert wait_until(hog_full, timeout=10), "the first worker never reached its thread limit"
    r = sup.connect().execute("import threading\n"
                              "ts = [threading.Thread(target=lambda: None) for _ in range(4)]\n"
                              "for t in ts: t.start()\n"
                              "for t in ts: t.join()\n"
                              "len(ts)\n")
    t1.join(30)
    assert hog_box["r"]["outcome"] == "ok", hog_box["r"]
    assert int(hog_box["r"]["result"]["text"]) == procs - 1, hog_box["r"]  # every task but the main one
    assert r["outcome"] == "ok", r
    assert r["result"]["text"] == "4"
    assert r["exitStatus"]["hostUid"] != hog_box["r"]["exitStatus"]["hostUid"]


def test_block_holding_a_host_user_is_refused(tmp_path):
    require_sandbox()
    policy = tmp_path / "policy.yaml"
    policy.write_text("workerHostIdBase: 65530\nworkerHostIdCount: 10\n")  # nobody is 65534
    check = subprocess.run([DAEMON, "--policy", str(policy), "--check-config"], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode != 0, check.stdout
    assert "worker host ids: 65530-65539" in check.stdout and "refused" in check.stdout, check.stdout
    assert "nobody" in check.stdout or "nogroup" in check.stdout, check.stdout
    start = subprocess.run([DAEMON, "--policy", str(policy), "--socket", str(tmp_path / "s")],
                           capture_output=True, text=True, timeout=60)
    assert start.returncode != 0
    assert "workerHostIdBase" in start.stderr and "65534" in start.stderr, start.stderr
    assert not (tmp_path / "s").exists()


def test_default_block_is_free_here():
    require_sandbox()
    check = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True, timeout=60)
    line = [x for x in check.stdout.splitlines() if x.startswith("worker host ids:")]
    assert line == ["worker host ids: %d-%d (uid 65534, gid 65534 inside each worker): free" %
                    (BASE, BASE + 65535)], check.stdout


def test_too_few_host_ids_is_a_worker_error(sups):
    """One id and two calls at once: the second finds none free and ends as worker_error;
    the id comes back when the first worker is reaped."""
    sup = sups("workerHostIdCount: 1\nzygotePoolSize: 0\nmaxActiveWorkers: 2\n")
    t, box = run_async(sup, SLEEP_AND_SHOW_IDS % "1")
    assert wait_until(lambda: worker_pids_of(sup), timeout=10)
    r = sup.connect().execute("1")
    assert r["outcome"] == "worker_error", r
    assert "Too many users" in r["detail"], r
    t.join(30)
    assert box["r"]["outcome"] == "ok", box["r"]
    assert box["r"]["exitStatus"]["hostUid"] == BASE
    r = sup.connect().execute("2")
    assert r["outcome"] == "ok", r
    assert r["exitStatus"]["hostUid"] == BASE


def test_ids_of_a_killed_zygotes_pool_come_back(sups):
    """Three ids, two of them held by pre-started workers: when the zygote is killed its
    workers exit and are reaped as strays, and only then are their ids free for the
    next zygote's pool and calls."""
    sup = sups("workerStart: zygote\nworkerHostIdCount: 3\nzygotePoolSize: 2\n")
    c = sup.connect()
    assert c.execute("1")["outcome"] == "ok"
    for _ in range(3):
        zpid = status(sup)["zygotePid"]
        os.kill(zpid, signal.SIGKILL)
        assert wait_until(lambda: status(sup)["zygotePid"] not in (None, zpid), timeout=10)
        r = c.execute("2")
        assert r["outcome"] == "ok", r
        assert BASE <= r["exitStatus"]["hostUid"] < BASE + 3


def test_block_not_mapped_in_the_supervisors_namespace_is_refused(monkeypatch):
    """A supervisor in a user namespace of its own (ids 0-65535, as in a user-namespaced
    pod) cannot map the default block: it refuses to start and says so; a block inside
    its range works (test_faults.py's namespace test runs calls with one)."""
    require_sandbox()
    import shutil
    import tempfile

    import test_faults

    made, real_mkdtemp = [], tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real_mkdtemp(**kw))
        return made[-1]

    monkeypatch.setattr(test_faults.tempfile, "mkdtemp", mkdtemp)
    try:
        with pytest.raises(RuntimeError) as e:
            test_faults.UsernsSupervisor("workerStart: exec\n")
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
    assert "not all mapped in the supervisor's user namespace" in str(e.value), str(e.value)
    assert "workerHostIdBase" in str(e.value)
