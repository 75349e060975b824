"""Neighbours (docs/security.md, "Neighbours on one host"): several supervisors on one
host share nothing they must not. Root supervisors with the same block of host ids
lease each id host-wide, so no two live workers of any of them have the same host uid
at any moment (sampled from /proc while calls run); blocks that overlap without being
the same are refused, naming both. Each supervisor's workers' cgroups are in a subtree
of its own, flock'ed while it lives: a supervisor in its own pid namespace (pid 1
there, like its neighbour) neither removes a live supervisor's cgroups nor collides
with them, and one SIGKILLed leaves its subtree to the next start, which removes it
and nobody else's."""
import os
import signal
import threading

import pytest

from testlib import WAIT_LIMIT, Supervisor, ok, proc, require_sandbox, start_held, unavailable
from testlib.cgroups import need_cgroups, worker_cgroups, worker_parents
from testlib.waits import wait_for

# What the supervisor makes and checks at start and per worker (cgroups, leases):
# both start modes (zygote mode leases ids for its pre-started workers), and ASan.
pytestmark = [pytest.mark.start_mode, pytest.mark.asan]

DEFAULT_BASE, DEFAULT_COUNT = 0x7ff00000, 65536  # policy.yaml's workerHostIdBase, workerHostIdCount
LEASE_DIR = "/run/codeinterp-ids"
# The default block, named (testlib gives other tests' supervisors blocks of their own).
POLICY = "cgroups: auto\nmaxActiveWorkers: 3\nworkerHostIdBase: %d\n" % DEFAULT_BASE


def worker_roots():
    """{host uid in the default block: {worker root pid: its start time}} for every
    process on the host with such a uid. A worker's root is its highest ancestor with
    the same uid (the worker itself; its children share its uid): two roots under one
    uid would be two workers sharing it."""
    uids = {}
    for pid in proc.all_pids():
        uid = _uid(pid)
        if uid is not None and DEFAULT_BASE <= uid < DEFAULT_BASE + DEFAULT_COUNT:
            uids[pid] = uid
    roots = {}
    for pid, uid in uids.items():
        root = pid
        while True:
            parent = proc.ppid(root)
            if parent is None or uids.get(parent) != uid:
                break
            root = parent
        roots.setdefault(uid, {})[root] = proc.starttime(root)
    return roots


def _uid(pid):
    try:
        return proc.ids(pid)[0]
    except (KeyError, OSError, IndexError, TypeError):
        return None


def shared(roots):
    """The uids held by more than one worker at one moment. A scan of /proc is not one
    moment: a worker read early may have been reaped (and its id leased again) before
    one read late. So a uid counts only when, read again after the scan, each of its
    roots is still the same process (start time) with that uid: then all of them
    existed at once, after the last was read."""
    out = {}
    for uid, r in roots.items():
        if len(r) > 1 and all(t is not None and proc.starttime(p) == t and _uid(p) == uid for p, t in r.items()):
            out[uid] = {p: (proc.name(p), proc.ppid(p), proc.state(p)) for p in r}
    return out


def test_supervisors_with_the_same_block_never_share_a_host_uid(make_supervisor):
    """Two root supervisors with the default block, three client loops each, and a
    rootless one beside them with a loop of its own, while a sampler reads every
    process's uid: no uid ever held by two workers, no worker_error. Then calls held in both at once: every worker a uid of its own."""
    require_sandbox()
    a, b = make_supervisor(POLICY), make_supervisor(POLICY)
    # A rootless neighbour beside them (no block: its workers are that user).
    r = Supervisor(POLICY, user="nobody")
    try:
        run_side_by_side(a, b, r)
    finally:
        assert r.stop() == 0, r.read_log()[-4000:]


def run_side_by_side(a, b, r):
    seen, failures, stop = [], [], threading.Event()

    def loop(sup):
        c = sup.connect()
        for i in range(25):
            r = c.execute("sum(range(%d))" % i)
            if r.get("outcome") != "ok":
                failures.append(r)

    def sample():
        while not stop.is_set():
            bad = shared(worker_roots())
            if bad:
                seen.append(bad)

    sampler = threading.Thread(target=sample)
    sampler.start()
    loops = [threading.Thread(target=loop, args=(s,)) for s in (a, b) for _ in range(3)]
    loops.append(threading.Thread(target=loop, args=(r,)))
    for t in loops:
        t.start()
    for t in loops:
        t.join()
    stop.set()
    sampler.join()
    assert failures == [], failures[:3]
    assert seen == [], seen[:3]
    held = [start_held(s) for s in (a, b) for _ in range(3)]
    pids = [h.wait_running() for h in held]
    uids = [proc.ids(p)[0] for p in pids]
    assert len(set(uids)) == len(uids), uids
    assert all(DEFAULT_BASE <= u < DEFAULT_BASE + DEFAULT_COUNT for u in uids), uids
    assert shared(worker_roots()) == {}
    for h in held:
        ok(h.finish())


def test_overlapping_blocks_are_refused_naming_both(make_supervisor):
    """A block that overlaps a running supervisor's without being the same is refused at
    start, naming the other's block; the same block is shared."""
    require_sandbox()
    base = 0x7fc00000 + (os.getpid() % 4096) * 64  # a region of this test's own
    a = make_supervisor("workerHostIdBase: %d\nworkerHostIdCount: 16\n" % base)
    with pytest.raises(RuntimeError) as e:
        make_supervisor("workerHostIdBase: %d\nworkerHostIdCount: 16\n" % (base + 8))
    assert "overlaps the block %d-%d of a running supervisor" % (base, base + 15) in str(e.value), str(e.value)
    b = make_supervisor("workerHostIdBase: %d\nworkerHostIdCount: 16\n" % base)
    ca, cb = a.connect(), b.connect()
    ra, rb = ca.execute("6 * 7"), cb.execute("6 * 7")
    ok(ra, "42")
    ok(rb, "42")


def stop_in_own_namespace(s):
    """Stop a supervisor started under unshare --fork: unshare holds SIGTERM until its
    child ends, so the supervisor (its child, pid 1 of the namespace) gets it, and
    unshare exits with its status."""
    for pid in proc.children(s.proc.pid):
        proc.kill_quietly(pid, signal.SIGTERM)
    assert s.proc.wait(timeout=WAIT_LIMIT) == 0, s.read_log()[-4000:]


def test_a_supervisor_in_its_own_pid_namespace_leaves_a_live_ones_cgroups_alone(make_supervisor):
    """Two supervisors each pid 1 of a pid namespace of its own start beside a running
    one: the running one's worker cgroups (a held call's, and in zygote mode those made
    ahead) stay; all three serve calls without a worker_error."""
    need_cgroups()
    # The held call lives through thirty calls of three supervisors: its deadline is not
    # what this test measures, so it is far beyond what any machine needs (exec mode
    # under load has taken 30 s).
    a = make_supervisor(POLICY + "timeoutMs: 600000\n")
    held = start_held(a)
    held.wait_running()
    before = worker_cgroups(a.proc.pid)
    assert before, "no worker cgroup of the running supervisor"
    own_ns = ["unshare", "--pid", "--fork", "--mount-proc"]
    b1 = make_supervisor(POLICY, prefix=own_ns)
    b2 = make_supervisor(POLICY, prefix=own_ns)
    assert all(os.path.isdir(d) for d in before), [d for d in before if not os.path.isdir(d)]
    conns = [s.connect() for s in (a, b1, b2)]
    for i in range(10):
        for c in conns:
            ok(c.execute("%d + 1" % i), str(i + 1))
    ok(held.finish())
    for s in (b1, b2):
        stop_in_own_namespace(s)


def test_a_sigkilled_supervisors_subtree_is_reclaimed_by_the_next_start_only(make_supervisor):
    """A supervisor killed with SIGKILL leaves its subtree (and its lease registration);
    the next supervisor to start once the processes it had started are gone (its zygote
    and workers die with it) removes them, and leaves the live neighbour's subtree and
    calls alone."""
    need_cgroups()
    a = make_supervisor(POLICY)
    held = start_held(a)
    held.wait_running()
    b = Supervisor(POLICY)
    try:
        hb = start_held(b)
        hb.wait_running()
        subtrees = worker_parents(b.proc.pid)
        assert subtrees, "the supervisor's subtree"
        mine = worker_parents(a.proc.pid)
        b_pid, below = b.proc.pid, proc.descendants(b.proc.pid)
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(timeout=WAIT_LIMIT)
        # Reaped by whoever inherited them: /proc/PID gone (or the pid reused).
        wait_for(lambda: all(proc.starttime(p) != t for p, t in below.items()),
                 lambda: "the killed supervisor's processes to be gone: %r" % [p for p, t in below.items()
                                                                               if proc.starttime(p) == t])
        # (A supervisor another test starts meanwhile may reclaim it first: also right.)
        c = make_supervisor(POLICY)  # removes the orphan at start, before it serves
        assert not any(os.path.exists(d) for d in subtrees), subtrees
        assert all(os.path.isdir(d) for d in mine), mine
        assert not [f for f in os.listdir(os.path.join(LEASE_DIR, "blocks")) if "-%d-" % b_pid in f]
        ok(c.connect().execute("2 + 2"), "4")
    finally:
        b.stop()
    ok(held.finish())
    ok(a.connect().execute("1"), "1")


FREEZER = "/sys/fs/cgroup/freezer"


def test_a_dead_supervisors_ids_wait_for_its_workers(make_supervisor):
    """A supervisor's leases go with it, but its workers (killed by their parent-death
    signal as it dies) may outlive it for a moment. Held there for as long as the test
    needs (frozen by the v1 freezer, SIGKILL pending), they keep their uids: a supervisor
    started on the same block meanwhile runs calls on the other ids of the block, and
    says why it skips theirs."""
    require_sandbox()
    if not os.path.isdir(FREEZER):
        unavailable("no v1 freezer here to hold a dead supervisor's workers")
    base, count = 0x7fb00000 + (os.getpid() % 4096) * 64, 16
    policy = "workerHostIdBase: %d\nworkerHostIdCount: %d\nmaxActiveWorkers: 2\n" % (base, count)
    frozen = os.path.join(FREEZER, "codeinterp-test-%d" % os.getpid())
    os.mkdir(frozen)
    held_pids = {}
    try:
        a = Supervisor(policy)
        try:
            held = start_held(a)
            held.wait_running()
            # Every process of a with an id of the block: the held call's worker and, in
            # zygote mode, those made ahead.
            held_pids = {p: proc.starttime(p) for p in proc.descendants(a.proc.pid)
                         if (_uid(p) or 0) - base in range(count)}
            assert held_pids, "no worker of the supervisor"
            for p in held_pids:
                with open(os.path.join(frozen, "cgroup.procs"), "w") as f:
                    f.write(str(p))
            with open(os.path.join(frozen, "freezer.state"), "w") as f:
                f.write("FROZEN")
            wait_for(lambda: open(os.path.join(frozen, "freezer.state")).read().strip() == "FROZEN",
                     "the workers to be frozen")
            uids = {_uid(p) for p in held_pids}
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(timeout=WAIT_LIMIT)
        finally:
            a.stop()
        assert all(proc.starttime(p) == t for p, t in held_pids.items()), "the frozen workers died"
        b = make_supervisor(policy)
        c = b.connect()
        used = set()
        for i in range(2 * count):
            r = c.execute("%d" % i)
            ok(r, str(i))
            used.add(r["exitStatus"]["hostUid"])
        assert used and not used & uids, (sorted(used & uids), "used while their workers live")
        assert "was leased by a supervisor that is gone" in b.read_log()
    finally:
        for p, t in held_pids.items():
            if proc.starttime(p) == t:
                proc.kill_quietly(p)
        if os.path.isdir(frozen):
            with open(os.path.join(frozen, "freezer.state"), "w") as f:
                f.write("THAWED")
            for p in held_pids:
                proc.wait_exit(p)
            os.rmdir(frozen)
    # The next start removes the dead supervisor's subtree, now empty.
    ok(make_supervisor(policy).connect().execute("1"), "1")


def test_the_fixtures_stop_reaches_a_supervisor_behind_unshare():
    """What a failed test's teardown does to a supervisor started under unshare --fork:
    the supervisor itself gets SIGTERM and exits 0, and nothing of it is left running."""
    require_sandbox()
    s = Supervisor(POLICY, prefix=["unshare", "--pid", "--fork", "--mount-proc"])
    kids = proc.children(s.proc.pid)
    assert len(kids) == 1 and proc.name(kids[0]) == "codeinterpd", kids
    assert s.stop() == 0, s.read_log()[-4000:]
    assert proc.wait_exit(kids[0]), "the supervisor outlived its stop"
