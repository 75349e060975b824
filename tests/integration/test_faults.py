"""Fault injection: every class of worker-start and transport fault, provoked for real
against a running codeinterpd (plain, and under ASan/UBSan through
`make integration-asan`).

- fd exhaustion: RLIMIT_NOFILE of the running supervisor lowered with prlimit;
- process exhaustion: the supervisor (and its zygote) in a pids cgroup whose pids.max
  refuses every clone;
- namespace exhaustion (ENOSPC): the supervisor inside a child user namespace whose own
  user.max_user_namespaces is 0 (the host's sysctl is never touched);
- the zygote SIGKILLed and SIGSTOPped under load; a fake zygote that speaks the
  control protocol of worker/zygote.h wrongly; a missing worker binary;
- transport: a client that stops reading, a frame sent one byte at a time, SIGTERM
  with a full queue.

Every test checks that each admitted call gets exactly one final `result` or `error`
(collect_outcomes) and that nothing is left behind: each supervisor runs in its own
tracking pids cgroup, which must be empty once it has exited (no supervisor, zygote or
worker process survives), the supervisor's descriptor count returns to its baseline
once the fault is removed, no mount appears in the host's mount table, and every
cgroup the test made is removed.

The fd and pids cases run in both worker start modes whatever CODEINTERP_WORKER_START
says: the ASan run (default mode zygote) must see the exec-mode paths too."""
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import msgpack
import pytest

from testlib import (ASAN, DAEMON, MUST_SANDBOX, NORTHSTAR, WAIT_LIMIT, Conn, UsernsSupervisor, calls, ok, proc,
                     status, unavailable, worker_pids_of)
from testlib.cgroups import need_cgroups, new_pids_cgroup, pids_hierarchy, procs, worker_cgroups
from testlib.faults import assert_alive, back_to_baseline, log_tail, one_call, settled_fd_count, status_or_fail
from testlib.frames import collect_outcomes, describe, execute_frame
from testlib.waits import at_hold, held, release, start_held, wait_for, wait_states

# The supervisor's fault paths, plain and under ASan/UBSan (asan); the start modes are
# named by the tests that depend on them.
pytestmark = pytest.mark.asan

MODES = ("exec", "zygote")


def send_execute(conn, code):
    return conn.request("execute", summary="fault test", code=code, sourceIds=[])


NOFILE_CAUSE = re.compile(r"Too many open files|EMFILE|descriptor", re.I)


@pytest.mark.parametrize("mode", MODES)
def test_fd_exhaustion_fails_the_call_and_recovers(fault_env, mode):
    """RLIMIT_NOFILE of the running supervisor lowered with prlimit so that a connection
    still fits but nothing more: a worker needs a plan memfd and eight pipe ends (exec
    mode also a sync pipe and /dev/null), so starting one fails with EMFILE. The call ends as worker_error naming the cause,
    the supervisor keeps serving, and once the limit is raised again the next call is
    ok and the descriptor count is back at its baseline."""
    t = fault_env.start("workerStart: %s\nzygotePoolSize: 1\n" % mode)
    ok(one_call(t, "6 * 7"), "42")
    status_or_fail(t)
    baseline = settled_fd_count(t.pid)

    fault_env.lower_nofile_to_one_connection(t)
    c = Conn(t.sup.socket)
    rids = [send_execute(c, "'never runs'") for _ in range(2)]
    try:
        out = collect_outcomes([c], [rids], context=lambda: log_tail(t))
    except (EOFError, ConnectionError) as e:
        raise AssertionError("connection lost (%r):\n%s" % (e, log_tail(t)))
    finally:
        c.close()
    assert_alive(t, "after worker starts failed with EMFILE")
    for rid in rids:
        r = out.get(0, rid)
        assert r["type"] == "result" and r["outcome"] == "worker_error", describe(r)
        assert NOFILE_CAUSE.search(r["detail"] or ""), describe(r)
        assert r["timing"]["workerStarted"] is False and r["exitStatus"] is None, r
    st = status_or_fail(t, what="with RLIMIT_NOFILE lowered")
    assert st["running"] == 0 and st["queued"] == 0, st

    fault_env.restore_nofile(t)
    ok(one_call(t, NORTHSTAR), "8.25")
    back_to_baseline(t, baseline)
    fault_env.finish(t)



def test_a_mount_namespace_that_cannot_be_held_is_done_without(fault_env):
    """The runner holds a worker's mount namespace until its result, so that the exit
    the result waits for does not tear its filesystems down, and does without when it
    cannot have it. In zygote mode the namespace comes after the worker's pidfd in the
    zygote's answer. Provoked: the zygote stopped while a call's spawn request waits
    for its answer, the supervisor's RLIMIT_NOFILE then set to leave room for the
    answer's pidfd alone, the zygote continued: the kernel cuts the namespace off the
    answer, which is taken without it (contract/zygote_proto.h), the worker runs without
    the hold (seen in /proc, which costs the supervisor no descriptor) and the call is
    ok; with the limit back, the next call's namespace is held again."""
    t = fault_env.start("workerStart: zygote\nzygotePoolSize: 1\ncgroups: off\nmaxArtifacts: 0\n")
    ok(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    zpid = status_or_fail(t)["zygotePid"]
    c = Conn(t.sup.socket)
    os.kill(zpid, signal.SIGSTOP)
    try:
        rid = c.submit(held(after="'x'"))
        wait_for(lambda: [x for x in c.call("status")["calls"] if x["state"] == "starting"],
                 "the call's spawn request sent")
        # RLIMIT_NOFILE bounds descriptor numbers: room for the lowest free one alone.
        fds = proc.fd_targets(t.pid)
        fault_env.lower_nofile(t, min(set(range(len(fds) + 1)) - set(fds)) + 1)
    finally:
        os.kill(zpid, signal.SIGCONT)
    pid = wait_for(lambda: [p for p in worker_pids_of(t.sup) if at_hold(p)], "the worker at its hold")[0]
    ns = os.readlink("/proc/%d/ns/mnt" % pid)
    held_then = ns in proc.fd_targets(t.pid).values()
    fault_env.restore_nofile(t)
    release(pid)
    r = c.wait(rid, types=("result",))
    c.close()
    assert not held_then and ok(r)["result"]["text"] == "'x'", (r, fds)
    c = Conn(t.sup.socket)
    second = start_held(t.sup, c)
    pid = second.wait_holding()
    assert os.readlink("/proc/%d/ns/mnt" % pid) in proc.fd_targets(t.pid).values()
    assert ok(second.finish())["result"] is None
    c.close()
    back_to_baseline(t, baseline)
    fault_env.finish(t)


def call_as_descriptors_run_out(fault_env, t, baseline, code, step, room):
    """One call of code at a time with the supervisor's RLIMIT_NOFILE raised by one from
    baseline + 1 (room to accept the connection: below it the listener waits) for at
    most room steps, until a call fails at step (its detail names it): that call's
    result, and every (limit, outcome, detail) seen. Fails if a call is ok first. The
    limit is restored in any case."""
    seen = []
    try:
        for n in range(baseline + 1, baseline + room):
            fault_env.lower_nofile(t, n)
            r = one_call(t, code)
            fault_env.restore_nofile(t)
            seen.append((n, r.get("outcome"), r.get("detail")))
            if step in (r.get("detail") or ""):
                return r, seen
            if r.get("outcome") == "ok":
                break
        raise AssertionError("no limit failed at %r: %r" % (step, seen))
    finally:
        fault_env.restore_nofile(t)


def reload_policy(t, text):
    """Replace the supervisor's policy file with text, send SIGHUP, wait for the reload."""
    before = t.sup.read_log().count("Reloaded the policy")
    with open(t.sup.policy_path + ".new", "w") as f:
        f.write(text)
    os.rename(t.sup.policy_path + ".new", t.sup.policy_path)
    t.sup.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: t.sup.read_log().count("Reloaded the policy") > before, lambda: "the reload: " + t.sup.read_log())


@pytest.mark.parametrize("mode", MODES)
def test_outputs_tmpfs_failure_is_named_and_recovers(fault_env, mode):
    """The call's /outputs tmpfs is made after its plan and pipes: ahead, while the call
    before runs, or on the call's path when there is none, as after a reload (which drops
    the one made ahead). With RLIMIT_NOFILE raised one descriptor at a time from where
    nothing fits, some limit lets the plan and the pipes through and fails
    fsopen()/fsmount(). That call ends as worker_error naming the step; with the limit
    restored the next call has its /outputs again, and after another reload the
    descriptors are back at their baseline."""
    policy = "workerStart: %s\nzygotePoolSize: 1\n" % mode
    t = fault_env.start(policy)
    ok(one_call(t, "6 * 7"), "42")
    reload_policy(t, policy + "maxArtifactBytes: 4194304\n")
    baseline = settled_fd_count(t.pid)
    r, _ = call_as_descriptors_run_out(fault_env, t, baseline, "open('/outputs/x', 'w').write('x')",
                                          "creating its /outputs tmpfs", 24)
    assert r["outcome"] == "worker_error" and NOFILE_CAUSE.search(r["detail"]), describe(r)
    assert r["timing"]["workerStarted"] is False and r["artifacts"] is None, r
    assert_alive(t, "after the /outputs step failed")
    r = one_call(t, "open('/outputs/back.txt', 'w').write('back')")
    ok(r)
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"]
    reload_policy(t, policy + "maxArtifactBytes: 2097152\n")
    back_to_baseline(t, baseline)
    fault_env.finish(t)


def test_a_kept_cgroup_that_cannot_be_reopened_is_removed(fault_env):
    """Exec mode, where a call's cgroup stays kept (empty, no descriptor open) until the
    next call takes it: with RLIMIT_NOFILE raised one descriptor at a time from where
    nothing fits, some limit lets the plan, the pipes and /outputs through and leaves
    no descriptor to open the kept cgroup again. That call ends as worker_error naming
    the step, and the kept cgroup is removed, not left until exit; with the limit
    restored the next call is ok and the descriptor count is back at its baseline."""
    need_cgroups()
    t = fault_env.start("workerStart: exec\ncgroups: auto\n")
    ok(one_call(t, "6 * 7"), "42")
    status_or_fail(t)
    kept = worker_cgroups(t.pid)
    assert kept and all(procs(d) == [] for d in kept), kept
    baseline = settled_fd_count(t.pid)
    r, _ = call_as_descriptors_run_out(fault_env, t, baseline, "1", "reusing its cgroup", 40)
    assert r["outcome"] == "worker_error" and NOFILE_CAUSE.search(r["detail"]), describe(r)
    assert r["timing"]["workerStarted"] is False, r
    assert not [d for d in kept if os.path.exists(d)], kept
    assert_alive(t, "after a kept cgroup could not be opened again")
    ok(one_call(t, NORTHSTAR), "8.25")
    back_to_baseline(t, baseline)
    fault_env.finish(t)


@pytest.mark.parametrize("mode", MODES)
def test_unreadable_outputs_are_reported_omitted_and_recover(fault_env, mode):
    """The supervisor reads a call's /outputs after its worker has been reaped. With
    RLIMIT_NOFILE lowered to 3 while the code runs (every descriptor it has stays open;
    no new one can be made), that read cannot open the directory: the result must not
    drop the files silently. It is the call's own outcome (ok), with no artifacts and
    every entry counted in omittedArtifacts, its bytes the tmpfs's whole pages; once
    the limit is back, the next call returns its artifacts and no descriptor is lost."""
    t = fault_env.start("workerStart: %s\nzygotePoolSize: 0\nheartbeatMs: 50\n" % mode)
    ok(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    c = Conn(t.sup.socket)
    try:
        # The code holds once its files exist until the limit is lowered.
        call = start_held(t.sup, c, before="open('/outputs/a.txt', 'w').write('abc')\n"
                                           "open('/outputs/b.bin', 'wb').write(bytes(5000))\n"
                                           "print('ready', flush=True)", after="'done'")
        while True:
            m = c.wait(call.rid, types=("progress", "result", "error"))
            assert m["type"] == "progress", describe(m)
            if m["phase"] == "running" and m["stdoutCharacters"] >= 6:
                break
        assert m["artifacts"] == 2, m  # the tmpfs's count while it runs
        call.wait_running()
        fault_env.lower_nofile(t, 3)
        try:
            call.release()
            r = call.result()
        finally:
            fault_env.restore_nofile(t)
    finally:
        c.close()
    assert_alive(t, "after /outputs could not be read")
    assert r["type"] == "result" and r["outcome"] == "ok", describe(r)
    assert r["result"]["text"] == "'done'" and r["stdout"]["text"] == "ready\n", r
    assert r["artifacts"] == [] and r["omittedArtifacts"] == 2, describe(r)
    # Whole pages: one for a.txt, two for b.bin's 5000 bytes.
    page = os.sysconf("SC_PAGE_SIZE")
    assert r["omittedArtifactBytes"] == 3 * page, describe(r)
    assert "reported as omitted" in t.sup.read_log(), log_tail(t)

    r = one_call(t, "open('/outputs/back.txt', 'w').write('back')")
    ok(r)
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"] and r["omittedArtifacts"] == 0, r
    back_to_baseline(t, baseline)
    fault_env.finish(t)


# ---- process limit (pids cgroup) ----

PIDS_CAUSE = re.compile(r"Resource temporarily unavailable|process limit|EAGAIN|pids", re.I)
PIDS_POLICY = "workerStart: %s\nmaxActiveWorkers: 1\ntimeoutMs: 2000\nzygotePoolSize: 0\nheartbeatMs: 200\n"


def limit_to_current(t):
    """pids.max = the tasks of the supervisor and its zygote only, so that a running
    worker's exit makes no room: every further clone (a worker, in exec mode by the
    supervisor, in zygote mode by the zygote) fails with EAGAIN. pids.max may be below
    pids.current; only new tasks are refused."""
    zpid = status(t.sup)["zygotePid"]
    t.cg.limit(proc.threads(t.pid) + (proc.threads(zpid) if zpid else 0))


def check_pids_outcome(r, deadline_s, problems):
    """Under the process limit a call ends as worker_error naming EAGAIN, or, if the
    supervisor chose to retry, as timeout at its deadline; never later. A detail that
    does not name the cause is added to problems (checked at the end of the test, so
    that the rest still runs)."""
    assert r["type"] == "result", describe(r)
    if r["outcome"] == "worker_error":
        if not PIDS_CAUSE.search(r["detail"] or ""):
            problems.append("detail does not name the process limit (EAGAIN): " + describe(r))
    else:
        assert r["outcome"] == "timeout", describe(r)
    # Not retried past its deadline: ended by then, with a margin of 5 s for a loaded
    # machine's late timer (a retry that ignored the deadline would go on for ever).
    assert r["elapsedMs"] <= deadline_s * 1000 + 5000, r["timing"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_process_limit_fails_calls_without_spinning(fault_env, mode):
    """The supervisor (and its zygote) in a pids cgroup at its limit: clone fails with
    EAGAIN. Each call ends once (worker_error naming the cause, or timeout at its
    deadline, including a call queued behind a running one), the event loop does not
    spin (CPU time over two seconds stays low), status answers; after the limit is
    lifted calls are ok and the descriptor count is back at its baseline; with the limit
    back, SIGTERM still drains: every call answered, exit 0, promptly."""
    if pids_hierarchy() is None:
        unavailable("the host has no cgroup hierarchy with the pids controller")
    # LeakSanitizer stops the world at exit with a clone, which this test's pids limit
    # refuses: leak checking is off for this supervisor only (use-after-free and the
    # like are still caught).
    t = fault_env.start(PIDS_POLICY % mode, env={"ASAN_OPTIONS": "detect_leaks=0"} if ASAN else None)
    assert t.cg is not None
    ok(one_call(t, "6 * 7"), "42")
    status_or_fail(t)
    baseline = settled_fd_count(t.pid)
    problems = []

    # One call runs (its worker exists before the limit); two more queue behind it.
    c = Conn(t.sup.socket)
    first = send_execute(c, "import time\ntime.sleep(0.5)\n'first'")
    # "started": its worker exists (in zygote mode "running" begins before the zygote
    # has made it, and a limit set then would refuse this worker too).
    while True:
        m = c.wait(first, types=("progress", "result", "error"))
        assert m["type"] == "progress", "the call before the limit ended early: " + describe(m)
        if m["phase"] == "started":
            break
    limit_to_current(t)
    queued = [send_execute(c, "'queued %d'" % i) for i in range(2)]
    t_sent = time.monotonic()

    # No busy loop: sample the supervisor's CPU time once the running call is over and
    # the queued ones try to start. (A loaded machine gives it less CPU, never more: the
    # bound cannot fail wrongly.)
    time.sleep(0.8)
    assert_alive(t, "under the process limit")
    cpu0 = proc.cpu_seconds(t.pid)
    time.sleep(2.0)
    spent = proc.cpu_seconds(t.pid) - cpu0
    # Every symptom of a stuck loop is collected before failing: CPU, status, deadlines.
    stuck = []
    if spent >= 0.5:
        stuck.append("codeinterpd used %.2f s of CPU in 2 s under the process limit (a busy loop)" % spent)
    try:
        status_or_fail(t, what="under the process limit")
    except AssertionError:
        stuck.append("status was not answered within %.0f s" % WAIT_LIMIT)
    try:
        out = collect_outcomes([c], [[first] + queued])
    except AssertionError as e:
        stuck.append("calls queued with a 2 s deadline had no outcome %.0f s later (%s)" % (
            time.monotonic() - t_sent, str(e).splitlines()[0]))
    if stuck:
        t.sup.proc.send_signal(signal.SIGTERM)
        try:
            t.sup.proc.wait(timeout=WAIT_LIMIT)
        except subprocess.TimeoutExpired:
            stuck.append("SIGTERM was not handled: still running %.0f s later" % WAIT_LIMIT)
    assert not stuck, "\n".join(stuck) + "\n" + log_tail(t, 1500)
    ok(out.get(0, first), "'first'")
    for rid in queued:
        check_pids_outcome(out.get(0, rid), 2.0, problems)

    # The fault removed: calls are ok again, nothing accumulated.
    t.cg.unlimit()
    ok(one_call(t, NORTHSTAR), "8.25")
    c.close()
    back_to_baseline(t, baseline)

    # The limit back, calls waiting or failing, then SIGTERM: each gets its answer and
    # the supervisor exits 0 at once.
    limit_to_current(t)
    c = t.sup.connect()
    rids = [send_execute(c, "'late %d'" % i) for i in range(3)]
    for rid in rids:
        c.call_id(rid)  # admitted
    t.sup.proc.send_signal(signal.SIGTERM)
    out = collect_outcomes([c], [rids], context=lambda: log_tail(t))
    for rid in rids:
        r = out.get(0, rid)
        assert (r["type"], r.get("outcome") or r.get("code")) in (
            ("result", "worker_error"), ("result", "cancelled"), ("result", "timeout"), ("error", "cancelled")), \
            describe(r)
        if r.get("outcome") == "worker_error" and not PIDS_CAUSE.search(r["detail"] or ""):
            problems.append("detail does not name the process limit (EAGAIN): " + describe(r))
    try:
        t.sup.proc.wait(timeout=WAIT_LIMIT)
    except subprocess.TimeoutExpired:
        raise AssertionError("codeinterpd did not exit within %.0f s of SIGTERM:\n%s" % (WAIT_LIMIT, log_tail(t)))
    t.cg.unlimit()
    fault_env.finish(t)
    assert not problems, "\n".join(problems)


# ---- the zygote under load: SIGKILL, SIGSTOP ----

ZYGOTE_LOAD = "workerStart: zygote\nmaxActiveWorkers: 2\nzygotePoolSize: 1\ntimeoutMs: 10000\n"


def load(t, n_conns=3, per_conn=3):
    """n_conns clients with per_conn calls each: the first call of the first two
    connections holds (they run, maxActiveWorkers 2), the others wait in the queue
    behind them. Returns (conns, ids, expected texts, the held calls) once that is so."""
    conns = [t.sup.connect() for _ in range(n_conns)]
    ids, expect, held = [[] for _ in conns], {}, []
    for i in range(2):
        call = start_held(t.sup, conns[i], after="%d" % (i * 100))
        call.wait_running()
        held.append(call)
        ids[i].append(call.rid)
        expect[(i, call.rid)] = str(i * 100)
    for i, c in enumerate(conns):
        for j in range(len(ids[i]), per_conn):
            value = i * 100 + j
            rid = send_execute(c, "%d" % value)
            expect[(i, rid)] = str(value)
            ids[i].append(rid)
    wait_states(t.sup, ["running"] * 2 + ["queued"] * (n_conns * per_conn - 2), "two calls running, the others queued")
    return conns, ids, expect, held


def check_load(out, expect):
    """Each call: ok with its own value, or worker_error/timeout; never anything else."""
    kinds = {}
    for key, text in expect.items():
        r = out.finals[key]
        assert r["type"] == "result", describe(r)
        assert r["outcome"] in ("ok", "worker_error", "timeout"), describe(r)
        if r["outcome"] == "ok":
            assert r["result"]["text"] == text, (key, r["result"])
        kinds[r["outcome"]] = kinds.get(r["outcome"], 0) + 1
    return kinds


def zygote_under_load(fault_env):
    """A supervisor of ZYGOTE_LOAD that has run one call, under load(): (t, the zygote's
    pid, the supervisor's settled fd count, what load() returns)."""
    t = fault_env.start(ZYGOTE_LOAD)
    ok(one_call(t, "1"), "1")
    zpid = status_or_fail(t)["zygotePid"]
    baseline = settled_fd_count(t.pid)
    return t, zpid, baseline, load(t)


def test_zygote_sigkill_under_load(fault_env):
    """The zygote SIGKILLed while calls run and wait on three connections: every call
    gets exactly one outcome, a new zygote takes over, later calls are ok."""
    t, zpid, baseline, (conns, ids, expect, held) = zygote_under_load(fault_env)
    os.kill(zpid, signal.SIGKILL)
    assert proc.wait_exit(zpid)
    for call in held:
        call.release()
    out = collect_outcomes(conns, ids, context=lambda: log_tail(t))
    check_load(out, expect)
    st = status_or_fail(t)
    assert st["zygotePid"] not in (None, zpid) and st["zygoteGeneration"] >= 2, st
    for i in range(3):
        ok(one_call(t, "%d + 1" % i), str(i + 1))
    assert not worker_pids_of(t.sup)  # each call finished after its worker's reap
    for c in conns:
        c.close()
    # The new zygote's (or the same one's) descriptors replace the old ones.
    back_to_baseline(t, baseline)
    fault_env.finish(t)


def test_zygote_sigstop_sigcont_under_load(fault_env):
    """The zygote stopped for a second (spawn requests unanswered, below the 5 s
    replacement) while calls run and wait, then continued: status answers while it is
    stopped, every call gets exactly one outcome, later calls are ok."""
    t, zpid, baseline, (conns, ids, expect, held) = zygote_under_load(fault_env)
    os.kill(zpid, signal.SIGSTOP)
    try:
        wait_for(lambda: proc.state(zpid) == "T", "the zygote to stop")
        # The running calls end; the queued ones then ask the stopped zygote for workers.
        for call in held:
            call.release()
        done = {call.call_id for call in held}
        wait_for(lambda: not done & set(calls(t.sup)), "the running calls to finish")
        status_or_fail(t, what="while the zygote is stopped")
        assert proc.state(zpid) == "T"
        time.sleep(1.0)  # the fault lasts a second
    finally:
        os.kill(zpid, signal.SIGCONT)
    out = collect_outcomes(conns, ids, context=lambda: log_tail(t))
    kinds = check_load(out, expect)
    assert kinds.get("ok", 0) >= 1, kinds
    for i in range(3):
        ok(one_call(t, "%d + 1" % i), str(i + 1))
    for c in conns:
        c.close()
    # The new zygote's (or the same one's) descriptors replace the old ones.
    back_to_baseline(t, baseline)
    fault_env.finish(t)


# ---- transport ----

def test_client_that_stops_reading_is_cut_off(fault_env):
    """A client sends many executes with big outputs and never reads: once its unsent
    replies pass maxConnectionOutputBytes it is disconnected, its running worker (a long
    sleep) is killed and its queued calls dropped, and another client is served all
    along."""
    t = fault_env.start("maxActiveWorkers: 2\nmaxConnectionOutputBytes: 262144\nmaxResultBytes: 262144\n"
                  "maxQueuedCalls: 64\ntimeoutMs: 60000\n")
    ok(one_call(t, "1"), "1")
    baseline = settled_fd_count(t.pid)
    bad = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bad.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    bad.connect(t.sup.socket)
    frames = execute_frame(1, "import time\ntime.sleep(3600)")
    frames += b"".join(execute_frame(i, "print('x' * 60000)") for i in range(2, 32))
    try:
        bad.sendall(frames)
        check_cut_off(t, bad, baseline)
    finally:
        bad.close()
    fault_env.finish(t)


def check_cut_off(t, bad, baseline):
    good = Conn(t.sup.socket)
    try:
        cut = False
        deadline = time.monotonic() + WAIT_LIMIT
        while time.monotonic() < deadline:
            ok(good.execute(NORTHSTAR), "8.25")
            if "does not read its replies" in t.sup.read_log():
                cut = True
                break
        assert cut, "the client that does not read was not cut off:\n" + log_tail(t)
        ok(good.execute("'still served'"), "'still served'")

        def released():
            st = status(t.sup)  # its own connection and `good` remain
            return st["connections"] == 2 and st["running"] == 0 and st["queued"] == 0 and not worker_pids_of(t.sup)

        wait_for(released, lambda: "the cut-off connection closed and its calls ended: %r, workers %r" % (
            status(t.sup), worker_pids_of(t.sup)))
        st = status(t.sup)
        assert st["finishedTotal"] == st["admittedTotal"], st
    finally:
        good.close()
    # The cut-off client reads what had been sent, then the end of the stream.
    bad.settimeout(WAIT_LIMIT)
    total = 0
    try:
        while True:
            chunk = bad.recv(65536)
            if not chunk:
                break
            total += len(chunk)
    except ConnectionResetError:
        pass
    assert total < 1024 * 1024, total
    back_to_baseline(t, baseline)


def test_frame_sent_one_byte_at_a_time(fault_env):
    """Requests that arrive one byte at a time (2 ms apart, across the length prefix and
    the body) are answered correctly, and a second connection is served meanwhile."""
    t = fault_env.start("")
    c = Conn(t.sup.socket)
    other = Conn(t.sup.socket)
    try:
        data = execute_frame(1, NORTHSTAR)
        status_body = msgpack.packb({"op": "status", "id": 2}, use_bin_type=True)
        data += struct.pack(">I", len(status_body)) + status_body
        for k, b in enumerate(data):
            c.send_raw(bytes([b]))
            time.sleep(0.002)
            if k == len(data) // 2:
                ok(other.execute("6 * 7"), "42")
        out = collect_outcomes([c], [[1]], context=lambda: log_tail(t))
        ok(out.get(0, 1), "8.25")
        r = c.wait(2)
        assert r["type"] == "reply" and r["op"] == "status", r
    finally:
        c.close()
        other.close()
    fault_env.finish(t)


def test_sigterm_with_full_queue_and_running_workers(fault_env):
    """SIGTERM while two workers run and the queue is full (one more call refused as
    overloaded): every admitted call gets exactly one outcome (cancelled, or finished
    if it was done first), the supervisor exits 0 promptly, nothing is left."""
    t = fault_env.start("maxActiveWorkers: 2\nmaxQueuedCalls: 3\ntimeoutMs: 3600000\n")
    a = t.sup.connect()
    b = t.sup.connect()
    running = [send_execute(a, "import time\ntime.sleep(3600)") for _ in range(2)]
    wait_states(t.sup, ["running", "running"], "two calls running")
    queued_a = [send_execute(a, "'a%d'" % i) for i in range(2)]
    queued_b = [send_execute(b, "'b0'")]
    st = wait_states(t.sup, ["running", "running", "queued", "queued", "queued"], "two running, three queued")
    workers = [m["workerPid"] for m in st[:2]]
    refused = send_execute(b, "'refused'")
    r = b.wait(refused, types=("error", "result"))
    assert r["type"] == "error" and r["code"] == "overloaded", r
    st = status(t.sup)
    assert sorted(worker_pids_of(t.sup)) == sorted(workers)

    t.sup.proc.send_signal(signal.SIGTERM)
    out = collect_outcomes([a, b], [running + queued_a, queued_b], grace=0.5, context=lambda: log_tail(t))
    for key, r in out.finals.items():
        assert r["type"] == "result", describe(r)
        assert r["outcome"] == "cancelled" and "shutting down" in r["detail"], describe(r)
        fin = [m for m in out.progress.get(key, []) if m["phase"] == "finished"]
        assert len(fin) == 1 and fin[0]["outcome"] == "cancelled", out.progress.get(key)
    for rid in running:
        assert out.get(0, rid)["partial"] is True
    # Exits without waiting for the code (an hour of sleep).
    try:
        rc = t.sup.proc.wait(timeout=WAIT_LIMIT)
    except subprocess.TimeoutExpired:
        raise AssertionError("codeinterpd did not exit within %.0f s of SIGTERM:\n%s" % (WAIT_LIMIT, log_tail(t)))
    assert rc == 0, "exit %r:\n%s" % (rc, log_tail(t))
    assert st["admittedTotal"] >= 5
    # Each connection is closed after its answers.
    for c in (a, b):
        c.sock.settimeout(WAIT_LIMIT)
        with pytest.raises((EOFError, ConnectionResetError)):
            while True:
                c.recv()
    for p in workers:
        assert proc.wait_exit(p), p
    fault_env.finish(t)


# ---- a zygote that speaks the control protocol wrongly ----

# A stand-in for `codeinterp-zygote --zygote UID GID POOL PACKAGES`: it speaks the control
# protocol of contract/zygote_proto.h (compiled against that header, so it follows the
# protocol as it changes) and answers each spawn request wrongly, as MODE says. It must
# be a binary: the supervisor executes the worker from a close-on-exec memfd, which a
# script's interpreter could not open.
FAKE_ZYGOTE_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contract/zygote_proto.h"

#define CTL 3

static int send_msg(const void *m, size_t len, int fd) {
        struct iovec iov = { .iov_base = (void *) m, .iov_len = len };
        union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (fd >= 0) {
                memset(&u, 0, sizeof u);
                mh.msg_control = u.buf;
                mh.msg_controllen = sizeof u.buf;
                struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof fd);
        }
        return sendmsg(CTL, &mh, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static ZygoteMsg msg(uint32_t kind, uint64_t token, int error, pid_t pid) {
        ZygoteMsg m;
        memset(&m, 0, sizeof m);
        m.magic = ZYGOTE_MAGIC;
        m.kind = kind;
        m.token = token;
        m.error = error;
        m.pid = pid;
        return m;
}

/* An answer gives back the slot its request brought, as a real zygote may. */
static ZygoteMsg answer(const ZygoteMsg *req, uint64_t token, int error, pid_t pid) {
        ZygoteMsg m = msg(ZYGOTE_MSG_SPAWNED, token, error, pid);
        m.slot = req->slot;
        return m;
}

int main(void) {
        ZygoteMsg ready = msg(ZYGOTE_MSG_READY, 0, 0, 0);
        if (MODE == 0)
                ready.magic = 0xdeadbeefU;
        if (send_msg(&ready, sizeof ready, -1) < 0)
                return 1;
        for (;;) {
                ZygoteMsg req;
                char cbuf[CMSG_SPACE(sizeof(int) * 16)];
                struct iovec iov = { .iov_base = &req, .iov_len = sizeof req };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                                     .msg_controllen = sizeof cbuf };
                ssize_t n = recvmsg(CTL, &mh, MSG_CMSG_CLOEXEC);
                if (n <= 0)
                        return 0;
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                        if (cm->cmsg_type == SCM_RIGHTS)
                                for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                        int fd;
                                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                                        close(fd);
                                }
                if (n != sizeof req || req.kind != ZYGOTE_MSG_SPAWN)
                        continue; /* IDLE hints, SLOTs */
                ZygoteMsg r;
                switch (MODE) {
                case 1: /* garbage: five bytes */
                        if (send_msg("\x01\x02\x03\x04\x05", 5, -1) < 0)
                                return 1;
                        continue;
                case 2: /* a clean refusal */
                        r = answer(&req, req.token, EPERM, 0);
                        break;
                case 3: /* a well-formed answer to a request never made */
                        r = answer(&req, req.token + 1000, EPERM, 0);
                        break;
                case 4: { /* "started": a process that is not the supervisor's child */
                        while (waitpid(-1, NULL, WNOHANG) > 0)
                                ;
                        pid_t pid = fork();
                        if (pid == 0) {
                                usleep(200000);
                                _exit(0);
                        }
                        int pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
                        r = answer(&req, req.token, 0, pid);
                        if (send_msg(&r, sizeof r, pidfd) < 0)
                                return 1;
                        close(pidfd);
                        continue;
                }
                default:
                        return 1;
                }
                if (send_msg(&r, sizeof r, -1) < 0)
                        return 1;
        }
}
"""
SOURCE_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAKE_MODES = {"bad_ready": 0, "garbage": 1, "refusal": 2, "unknown_token": 3, "not_a_child": 4}


@pytest.fixture(scope="module")
def fake_zygotes():
    """{mode name: path of a fake zygote binary}."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        unavailable("there is no C compiler for the fake zygote")
    d = tempfile.mkdtemp(prefix="codeinterp-fakezygote-")
    src = os.path.join(d, "fake.c")
    with open(src, "w") as f:
        f.write(FAKE_ZYGOTE_C)
    out = {}
    for name, mode in FAKE_MODES.items():
        out[name] = os.path.join(d, name)
        p = subprocess.run([cc, "-O1", "-DMODE=%d" % mode, "-I", SOURCE_ROOT, "-o", out[name], src],
                           capture_output=True)
        assert p.returncode == 0, "the fake zygote does not build:\n" + p.stderr.decode(errors="replace")
    yield out
    shutil.rmtree(d, ignore_errors=True)


FAKE_POLICY = "workerStart: zygote\nmaxActiveWorkers: 1\ntimeoutMs: 1500\nzygotePoolSize: 0\n"


def test_fake_zygote_with_a_bad_ready_message_fails_startup(fault_env, fake_zygotes):
    """A zygote whose "ready" message has the wrong magic: the supervisor does not start
    (exit 1, a message naming the zygote) and leaves nothing behind."""
    cg = new_pids_cgroup()
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    sock = os.path.join(d, "ci.sock")
    try:
        with open(os.path.join(d, "policy.yaml"), "w") as f:
            f.write(FAKE_POLICY)
        args = [DAEMON, "--socket", sock, "--policy", os.path.join(d, "policy.yaml"),
                "--worker", fake_zygotes["bad_ready"]]
        if cg is not None:
            with cg.joined():
                p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        else:
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            log = p.communicate(timeout=3 * WAIT_LIMIT)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("codeinterpd kept running with a zygote that said garbage")
        assert p.returncode == 1, (p.returncode, log)
        assert re.search(r"zygote", log, re.I), log
        assert not os.path.exists(sock), "socket file left behind"
        if cg is not None:
            wait_for(lambda: not cg.procs(), lambda: "nothing left: %r" % [(q, proc.name(q)) for q in cg.procs()])
    finally:
        if cg is not None:
            cg.remove()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("fake", ["garbage", "refusal", "unknown_token", "not_a_child"])
def test_fake_zygote_answers_wrongly(fault_env, fake_zygotes, fake):
    """The zygote answers spawn requests with garbage (a 5-byte message), a refusal
    (EPERM), an answer to a request never made, or a "worker" that is not the
    supervisor's child. Each call still gets exactly one outcome (worker_error, or
    timeout at its deadline), the supervisor keeps answering without spinning (no
    restart storm), and SIGTERM stops it cleanly with nothing left. (Its start-up
    self-check would refuse such a zygote: --no-self-check lets it serve, as a zygote
    that goes wrong later would.)"""
    t = fault_env.start(FAKE_POLICY, extra_args=["--worker", fake_zygotes[fake], "--no-self-check"])
    gen0 = status_or_fail(t)["zygoteGeneration"]
    c = t.sup.connect()
    rids = [send_execute(c, "'never runs %d'" % i) for i in range(2)]
    cpu0 = proc.cpu_seconds(t.pid)
    t0 = time.monotonic()
    out = collect_outcomes([c], [rids], context=lambda: log_tail(t))
    for rid in rids:
        r = out.get(0, rid)
        assert r["type"] == "result" and r["outcome"] in ("worker_error", "timeout"), describe(r)
        # By its deadline, with a margin of 5 s for a loaded machine's late timer.
        assert r["elapsedMs"] <= 1500 + 5000, r["timing"]
        if fake == "refusal":
            assert r["outcome"] == "worker_error" and "Operation not permitted" in r["detail"], describe(r)
        if r["outcome"] == "timeout":
            assert r["timing"]["workerStarted"] is False, r
    st = status_or_fail(t, what="after a zygote answered wrongly")
    assert st["running"] == 0 and st["queued"] == 0, st
    elapsed = time.monotonic() - t0
    spent = proc.cpu_seconds(t.pid) - cpu0  # a loaded machine gives it less, never more
    assert spent < 0.3 + 0.25 * elapsed, "codeinterpd used %.2f s of CPU in %.2f s" % (spent, elapsed)
    # Replacing a zygote that answers wrongly is fine; replacing it in a tight loop is not.
    assert st["zygoteGeneration"] - gen0 <= 10, st
    fault_env.finish(t)


def test_missing_worker_binary_is_a_startup_error(fault_env):
    """--worker naming a file that does not exist: exit 1 at once with a message naming
    the worker binary; no socket file left behind."""
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    sock = os.path.join(d, "ci.sock")
    try:
        for mode in MODES:
            with open(os.path.join(d, "policy.yaml"), "w") as f:
                f.write("workerStart: %s\n" % mode)
            p = subprocess.run([DAEMON, "--socket", sock, "--policy", os.path.join(d, "policy.yaml"),
                                "--worker", "/nonexistent/codeinterp-worker"], capture_output=True, timeout=WAIT_LIMIT)
            log = (p.stdout + p.stderr).decode(errors="replace")
            assert p.returncode == 1, (mode, p.returncode, log)
            assert re.search(r"worker binary", log, re.I) and "No such file" in log, log
            assert "AddressSanitizer" not in log and "runtime error" not in log, log
            assert not os.path.exists(sock)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- namespace limit (ENOSPC), confined to a child user namespace ----

# The supervisor runs in a user namespace of its own (testlib's UsernsSupervisor), and
# only that namespace's limit is lowered: the host's sysctls are shared with whoever
# else runs tests on the machine.


def set_userns_limit(pid, name, value):
    """Write /proc/sys/user/<name> as seen from pid's user namespace."""
    subprocess.run(["nsenter", "--user", "--target", str(pid), "/bin/sh", "-c",
                    "echo %s > /proc/sys/user/%s" % (value, name)], check=True, capture_output=True, timeout=WAIT_LIMIT)


def read_userns_limit(pid, name):
    return subprocess.run(["nsenter", "--user", "--target", str(pid), "cat", "/proc/sys/user/" + name],
                          check=True, capture_output=True, timeout=WAIT_LIMIT).stdout.decode().strip()


NS_CAUSE = re.compile(r"No space left on device|ENOSPC|namespace", re.I)


@pytest.mark.parametrize("mode", MODES)
def test_namespace_limit_fails_the_call_and_recovers(fault_env, mode):
    """In the supervisor's own user namespace, max_user_namespaces = 0: creating a
    worker's user namespace fails with ENOSPC. The call ends as worker_error naming the
    cause, the supervisor keeps serving, and with the limit restored the next call is
    ok. The host's limit is never changed."""
    host_before = open("/proc/sys/user/max_user_namespaces").read()
    try:
        t = fault_env.start_with(lambda: UsernsSupervisor(
            "workerStart: %s\nzygotePoolSize: 0\nmaxActiveWorkers: 1\ntimeoutMs: 5000\n"
            "workerHostIdBase: 50000\nworkerHostIdCount: 1000\n" % mode))
    except RuntimeError as e:
        if MUST_SANDBOX:
            raise
        pytest.skip("cannot run codeinterpd in a user namespace of its own: %s" % e)
    ok(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    base_fds = proc.fd_targets(t.pid)
    old = read_userns_limit(t.pid, "max_user_namespaces")
    set_userns_limit(t.pid, "max_user_namespaces", 0)
    try:
        assert open("/proc/sys/user/max_user_namespaces").read() == host_before
        c = t.sup.connect()
        rids = [send_execute(c, "'never runs'") for _ in range(2)]
        out = collect_outcomes([c], [rids], context=lambda: log_tail(t))
        for rid in rids:
            r = out.get(0, rid)
            assert r["type"] == "result" and r["outcome"] == "worker_error", describe(r)
            assert NS_CAUSE.search(r["detail"] or ""), describe(r)
        status_or_fail(t, what="with max_user_namespaces at 0")
        c.close()
    finally:
        set_userns_limit(t.pid, "max_user_namespaces", old)
    ok(one_call(t, NORTHSTAR), "8.25")
    wait_for(lambda: settled_fd_count(t.pid) == baseline, lambda: "descriptors %d, baseline %d: new %r" % (
        proc.fd_count(t.pid), baseline, set(proc.fd_targets(t.pid).items()) - set(base_fds.items())))
    fault_env.finish(t)
    assert open("/proc/sys/user/max_user_namespaces").read() == host_before


@pytest.mark.parametrize("mode", MODES)
def test_supervisor_in_a_user_namespace_still_has_outputs(fault_env, mode):
    """A supervisor in a user namespace of its own that shares the host's mounts may not
    create tmpfs superblocks there (fsopen: EPERM); it moves into a private mount
    namespace at start, says so, and calls get their /outputs."""
    try:
        t = fault_env.start_with(lambda: UsernsSupervisor("workerStart: %s\nzygotePoolSize: 0\n"
                                                          "workerHostIdBase: 50000\nworkerHostIdCount: 1000\n" % mode))
    except RuntimeError as e:
        if MUST_SANDBOX:
            raise
        pytest.skip("cannot run codeinterpd in a user namespace of its own: %s" % e)
    r = ok(one_call(t, "open('/outputs/here.txt', 'w').write('here')"))
    assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("here.txt", b"here")]
    assert "running in a private one" in t.sup.read_log()
    fault_env.finish(t)
