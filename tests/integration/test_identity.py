"""A host uid of its own for every live worker (docs/policy.md "Workers' host ids"):
two workers running at once have different host uids (reported as exitStatus.hostUid
and seen by the host in /proc/PID/status), while inside both are workerUid; a worker at
its process limit does not keep another from starting threads; an id block that holds
a host user is refused at start and by --check-config; a block too small for the
workers alive ends a call as worker_error; the ids of a zygote's pre-started workers
come back after the zygote is killed. The ids are taken in each start mode's own way
(start_mode), by the supervisor's worker_ids (asan)."""
import os
import signal
import subprocess

import pytest
from codeinterp.records import ExitStatus, from_wire

from testlib import DAEMON, WAIT_LIMIT, UsernsSupervisor, proc, require_sandbox, status
from testlib.supervisor import HOST_ID_BLOCK
from testlib.waits import start_held, wait_for

pytestmark = [pytest.mark.start_mode, pytest.mark.asan]

BASE = 0x7ff00000
SHOW_IDS = "import os\n(os.getuid(), os.getgid())\n"


def test_concurrent_workers_have_their_own_host_uids(make_supervisor):
    """Two calls hold, both running, while the host reads their workers' ids."""
    sup = make_supervisor("maxActiveWorkers: 2\n")
    calls = [start_held(sup, after=SHOW_IDS) for _ in range(2)]
    pids = [call.wait_running() for call in calls]  # confined: its own ids by now
    seen = sorted(proc.ids(p) for p in pids)
    for call in calls:
        call.release()
    results = [call.result() for call in calls]
    for r in results:
        assert r["outcome"] == "ok", r
        assert r["result"]["text"] == "(65534, 65534)", r  # workerUid/workerGid inside
    uids = sorted(r["exitStatus"]["hostUid"] for r in results)
    assert uids[0] != uids[1], uids
    assert all(sup.host_id_base <= u < sup.host_id_base + HOST_ID_BLOCK for u in uids), uids  # its block
    # The host sees each worker as its own uid (and gid), the ones the results report.
    assert [u for u, _ in seen] == uids, (seen, uids)
    assert all(u == g for u, g in seen), seen
    # The Python client's record carries it too.
    assert from_wire(ExitStatus, results[0]["exitStatus"]).host_uid == results[0]["exitStatus"]["hostUid"]


def sharing(pid):
    """What else on the host runs as pid's uid, and pid's limits: why a worker may not
    have reached its thread limit."""
    uid = proc.ids(pid)[0]
    others = {}
    for p in proc.all_pids():
        try:
            if p != pid and uid in [int(x) for x in proc.status(p)["Uid"].split()]:
                others[p] = (proc.name(p), proc.threads(p))
        except (OSError, KeyError, ValueError):
            pass
    return {"uid": uid, "others": others, "limits": proc.limits(pid, "Max processes")}


def test_a_worker_at_its_process_limit_does_not_stop_another(make_supervisor):
    """RLIMIT_NPROC counts the tasks of a user: a worker that has used up maxProcesses
    must not take the budget of a worker running beside it. The first holds its threads
    until the second has run."""
    procs = 8
    sup = make_supervisor("maxActiveWorkers: 2\nmaxProcesses: %d\n" % procs)
    hog = start_held(sup, before=("import threading\n"
                                  "stop = threading.Event()\n"
                                  "n = 0\n"
                                  "while True:\n"
                                  "    try:\n"
                                  "        threading.Thread(target=stop.wait).start()\n"
                                  "    except RuntimeError:\n"
                                  "        break\n"
                                  "    n += 1\n"),
                     after="stop.set()\nn\n")
    pid = hog.wait_holding()
    assert proc.threads(pid) >= procs, ("the first worker did not reach its thread limit", sharing(pid))
    r = sup.connect().execute("import threading\n"
                              "ts = [threading.Thread(target=lambda: None) for _ in range(4)]\n"
                              "for t in ts: t.start()\n"
                              "for t in ts: t.join()\n"
                              "len(ts)\n")
    hog.release()
    hog_r = hog.result()
    assert hog_r["outcome"] == "ok", hog_r
    assert int(hog_r["result"]["text"]) == procs - 1, hog_r  # every task but the main one
    assert r["outcome"] == "ok", r
    assert r["result"]["text"] == "4"
    assert r["exitStatus"]["hostUid"] != hog_r["exitStatus"]["hostUid"]


def test_block_holding_a_host_user_is_refused(tmp_path):
    require_sandbox()
    policy = tmp_path / "policy.yaml"
    policy.write_text("workerHostIdBase: 65530\nworkerHostIdCount: 10\n")  # nobody is 65534
    check = subprocess.run([DAEMON, "--policy", str(policy), "--check-config"], capture_output=True, text=True,
                           timeout=WAIT_LIMIT)
    assert check.returncode != 0, check.stdout
    assert "worker host ids: 65530-65539" in check.stdout and "refused" in check.stdout, check.stdout
    assert "nobody" in check.stdout or "nogroup" in check.stdout, check.stdout
    start = subprocess.run([DAEMON, "--policy", str(policy), "--socket", str(tmp_path / "s")],
                           capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert start.returncode != 0
    assert "workerHostIdBase" in start.stderr and "65534" in start.stderr, start.stderr
    assert not (tmp_path / "s").exists()


def test_default_block_is_free_here():
    require_sandbox()
    check = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True, timeout=WAIT_LIMIT)
    line = [x for x in check.stdout.splitlines() if x.startswith("worker host ids:")]
    assert line == ["worker host ids: %d-%d (uid 65534, gid 65534 inside each worker): free" %
                    (BASE, BASE + 65535)], check.stdout


def test_too_few_host_ids_is_a_worker_error(make_supervisor):
    """One id and two calls at once: the second finds none free and ends as worker_error
    (the first holds its id meanwhile); the id comes back when the first worker is
    reaped."""
    sup = make_supervisor("workerHostIdCount: 1\nzygotePoolSize: 0\nmaxActiveWorkers: 2\n")
    first = start_held(sup, after=SHOW_IDS)
    first.wait_running()
    r = sup.connect().execute("1")
    assert r["outcome"] == "worker_error", r
    assert "Too many users" in r["detail"], r
    first.release()
    r = first.result()
    assert r["outcome"] == "ok", r
    assert r["exitStatus"]["hostUid"] == sup.host_id_base
    r = sup.connect().execute("2")
    assert r["outcome"] == "ok", r
    assert r["exitStatus"]["hostUid"] == sup.host_id_base


def test_ids_of_a_killed_zygotes_pool_come_back(make_supervisor):
    """Three ids, two of them held by pre-started workers: when the zygote is killed its
    workers exit and are reaped as strays, and only then are their ids free for the
    next zygote's pool and calls."""
    sup = make_supervisor("workerStart: zygote\nworkerHostIdCount: 3\nzygotePoolSize: 2\n")
    c = sup.connect()
    assert c.execute("1")["outcome"] == "ok"
    for _ in range(3):
        zpid = status(sup)["zygotePid"]
        os.kill(zpid, signal.SIGKILL)
        wait_for(lambda: status(sup)["zygotePid"] not in (None, zpid), "a new zygote")
        r = c.execute("2")
        assert r["outcome"] == "ok", r
        assert sup.host_id_base <= r["exitStatus"]["hostUid"] < sup.host_id_base + 3


def test_block_not_mapped_in_the_supervisors_namespace_is_refused():
    """A supervisor in a user namespace of its own (ids 0-65535, as in a user-namespaced
    pod) cannot map the default block: it refuses to start and says so; a block inside
    its range works (test_faults.py's namespace test runs calls with one)."""
    require_sandbox()
    with pytest.raises(RuntimeError) as e:
        UsernsSupervisor("workerStart: exec\n")
    assert "not all mapped in the supervisor's user namespace" in str(e.value), str(e.value)
    assert "workerHostIdBase" in str(e.value)
