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
import errno
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import msgpack
import pytest

from conftest import (DAEMON, MUST_SANDBOX, NORTHSTAR, Conn, Supervisor, require_sandbox, status, wait_ready,
                      wait_until, worker_pids_of)

MODES = ("exec", "zygote")
FINAL = ("result", "error")


# ---- exactly one outcome per request id ----

class Outcomes:
    """What collect_outcomes() saw: finals[(conn index, rid)] is the one final message,
    progress[(conn index, rid)] the progress messages, anonymous the errors with id nil,
    closed the connections the supervisor closed."""

    def __init__(self):
        self.finals = {}
        self.progress = {}
        self.anonymous = []
        self.closed = set()

    def get(self, i, rid):
        return self.finals[(i, rid)]


def collect_outcomes(conns, ids, timeout=30.0, grace=0.3, allow_eof=False, context=None):
    """Read every frame of conns until each request id in ids[i] (the ids sent on
    conns[i]) has a final `result` or `error`, then `grace` seconds more. Fails if an id
    gets two finals, or if some id has none by
    the timeout (or when its connection is closed first, unless allow_eof). context()
    is added to a failure's message (the supervisor's log)."""
    out = Outcomes()
    others = [[] for _ in conns]
    want = {(i, rid) for i, rs in enumerate(ids) for rid in rs}
    sent = set(want)
    deadline = time.monotonic() + timeout
    grace_end = None

    def take(i, m):
        key = (i, m.get("id"))
        if m.get("type") == "progress":
            out.progress.setdefault(key, []).append(m)
            return
        if m.get("type") not in FINAL or (m.get("id") is not None and key not in sent):
            others[i].append(m)  # replies and other requests' messages: left for Conn.wait
            return
        if m.get("id") is None:
            out.anonymous.append((i, m))
            return
        assert key not in out.finals, "request %r on conn %d got two outcomes:\n%r\n%r" % (
            key[1], i, out.finals[key], m)
        out.finals[key] = m
        want.discard(key)

    for i, c in enumerate(conns):
        while c.backlog:
            take(i, c.backlog.pop(0))
    while True:
        now = time.monotonic()
        if not want and grace_end is None:
            grace_end = now + grace
        if grace_end is not None and now >= grace_end:
            break
        if now >= deadline:
            missing = sorted(want)
            raise AssertionError("no outcome within %.1f s for (conn, request id) %r; got %r\n%s" % (
                timeout, missing, {k: (v["type"], v.get("outcome") or v.get("code")) for k, v in out.finals.items()},
                context() if context else ""))
        live = [c.sock for i, c in enumerate(conns) if i not in out.closed]
        if not live:
            break
        end = grace_end if grace_end is not None else deadline
        ready, _, _ = select.select(live, [], [], max(0.0, min(end - now, 0.5)))
        for sock in ready:
            i = [c.sock for c in conns].index(sock)
            try:
                m = conns[i].recv()
            except (EOFError, ConnectionResetError):
                out.closed.add(i)
                continue
            take(i, m)
    for i, c in enumerate(conns):
        c.backlog = others[i] + c.backlog
    left = sorted(k for k in want if k[0] in out.closed)
    if left and not allow_eof:
        raise AssertionError("connection closed before (conn, request id) %r got an outcome\n%s" % (
            left, context() if context else ""))
    return out


def describe(m):
    return "%s/%s: %s" % (m.get("type"), m.get("outcome") or m.get("code"), m.get("detail") or m.get("message"))


def ok_result(r, text=None):
    assert r["type"] == "result" and r["outcome"] == "ok", r
    if text is not None:
        assert r["result"]["text"] == text, r
    return r


def execute_frame(rid, code):
    body = msgpack.packb({"op": "execute", "id": rid, "summary": "fault test", "code": code, "sourceIds": []},
                         use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def send_execute(conn, code):
    return conn.request("execute", summary="fault test", code=code, sourceIds=[])


# ---- /proc ----

def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def settled_fd_count(pid, timeout=3.0):
    """The descriptor count once it has not changed for 0.3 s (closed connections are
    noticed by the supervisor a moment after the client closes them)."""
    last, since = fd_count(pid), time.monotonic()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.05)
        n = fd_count(pid)
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since >= 0.3:
            break
    return last


def fds_of(pid):
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out


def cpu_seconds(pid):
    """utime + stime of pid (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mount_lines():
    with open("/proc/self/mountinfo") as f:
        return set(f.read().splitlines())


def nofile_limits(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return soft, hard
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


# ---- cgroups ----

def _pids_hierarchy():
    """("v1", mount point) for a cgroup v1 hierarchy with the pids controller, ("v2",
    mount point) for a cgroup2 mount offering it, or None."""
    v2 = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            fstype, opts, mnt = parts[sep + 1], parts[sep + 3], parts[4]
            if fstype == "cgroup" and "pids" in opts.split(","):
                return "v1", mnt
            if fstype == "cgroup2" and v2 is None:
                try:
                    with open(os.path.join(mnt, "cgroup.controllers")) as c:
                        if "pids" in c.read().split():
                            v2 = ("v2", mnt)
                except OSError:
                    pass
    return v2


def _own_cgroup(version):
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if version == "v1" and "pids" in ctrls.split(","):
                return path
            if version == "v2" and ctrls == "":
                return path
    return "/"


class PidsCgroup:
    """A pids cgroup of our own: tracks every process a supervisor starts (children
    inherit their creator's cgroup), and limits them when pids.max is set."""

    def __init__(self):
        found = _pids_hierarchy()
        if found is None:
            raise FileNotFoundError("no cgroup hierarchy with the pids controller")
        self.version, self.mnt = found
        self.home = os.path.join(self.mnt, _own_cgroup(self.version).lstrip("/"))
        if self.version == "v2":
            with open(os.path.join(self.mnt, "cgroup.subtree_control"), "w") as f:
                f.write("+pids")
        self.path = os.path.join(self.mnt, "codeinterp-test-%d-%06x" % (os.getpid(), random.getrandbits(24)))
        os.mkdir(self.path)

    def _write(self, name, value, path=None):
        with open(os.path.join(path or self.path, name), "w") as f:
            f.write(str(value))

    def add(self, pid):
        self._write("cgroup.procs", pid)

    def procs(self):
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as f:
                return [int(x) for x in f.read().split()]
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENODEV):  # removed, or dying (v1)
                return []
            raise

    def current(self):
        with open(os.path.join(self.path, "pids.current")) as f:
            return int(f.read())

    def limit(self, n):
        self._write("pids.max", n)

    def unlimit(self):
        self._write("pids.max", "max")

    def joined(self):
        """Context: the test process itself sits in the cgroup while it starts a
        supervisor, so that the supervisor is born in it."""
        cg = self

        class _Joined:
            def __enter__(self):
                cg.add(os.getpid())

            def __exit__(self, *exc):
                cg._write("cgroup.procs", os.getpid(), cg.home)

        return _Joined()

    def remove(self):
        """Move whatever is left back to where the test runs, then remove the cgroup."""
        if not os.path.isdir(self.path):
            return
        try:
            self.unlimit()
        except OSError:
            pass
        for _ in range(50):
            left = self.procs()
            if not left:
                break
            for pid in left:
                try:
                    self._write("cgroup.procs", pid, self.home)
                except OSError:
                    pass
            time.sleep(0.02)
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
        os.rmdir(self.path)


def new_cgroup():
    """A PidsCgroup, or None where the host has no pids controller (a failure under
    CODEINTERP_MUST_SANDBOX=1)."""
    try:
        return PidsCgroup()
    except (FileNotFoundError, PermissionError) as e:
        if MUST_SANDBOX:
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but no pids cgroup can be made: %s" % e)
        return None


# ---- supervisors under observation ----

def asan_build():
    """True when the supervisor under test is built with ASan (make integration-asan)."""
    try:
        with open(DAEMON, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


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
        self.mounts = mount_lines()

    def start(self, policy, extra_args=(), env=None):
        return self.start_with(lambda: Supervisor(policy, extra_args), env)

    def start_with(self, make, env=None):
        """make() starts a Supervisor; it runs with the test process in a new tracking
        cgroup, so that the supervisor is born there."""
        cg = new_cgroup()
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
        wait_ready(sup)
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
        soft, hard = nofile_limits(t.pid)
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

    def stop(self, t, timeout=15.0, sig=signal.SIGTERM):
        """Stop the supervisor (sig, then SIGKILL after timeout); returns (rc, seconds).
        The log is kept in t.log."""
        sup = t.sup
        for c in sup.conns:
            try:
                c.close()
            except OSError:
                pass
        if t.cg is None and sup.proc.poll() is None:
            t.descendants = descendants(t.pid)  # without a tracking cgroup: who must go
        t0 = time.monotonic()
        if sup.proc.poll() is None:
            sup.proc.send_signal(sig)
            try:
                sup.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                sup.proc.kill()
                sup.proc.wait()
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
            assert wait_until(lambda: not t.cg.procs(), 5.0), \
                "processes left behind by the supervisor: %r" % [(p, _comm(p)) for p in t.cg.procs()]
            t.cg.remove()
            assert not os.path.exists(t.cg.path)
        else:
            def left():
                return [p for p, st in t.descendants.items() if st is not None and _starttime(p) == st]
            assert wait_until(lambda: not left(), 5.0), \
                "processes left behind by the supervisor: %r" % [(p, _comm(p)) for p in left()]
        added = wait_until(lambda: not (mount_lines() - self.mounts), 2.0) or (mount_lines() - self.mounts)
        assert added is True, "mounts left behind: %r" % added

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
                self.stop(t, timeout=5.0)
            if t.cg is not None:
                try:
                    t.cg.procs() and wait_until(lambda: not t.cg.procs(), 3.0)
                    for p in t.cg.procs():  # never leave a process of ours running
                        try:
                            os.kill(p, signal.SIGKILL)
                        except OSError:
                            pass
                    t.cg.remove()
                except OSError:
                    pass


def _starttime(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def descendants(pid):
    """{pid: start time} of every process below pid (through /proc/P/task/T/children)."""
    out, todo = {}, [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for task in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (p, task)) as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out:
                    out[k] = _starttime(k)
                    todo.append(k)
    return out


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


@pytest.fixture(scope="module", autouse=True)
def no_cgroup_left_behind():
    """After the module: no cgroup made by this process remains."""
    yield
    found = _pids_hierarchy()
    if found is None:
        return
    prefix = "codeinterp-test-%d-" % os.getpid()
    left = [d for d in os.listdir(found[1]) if d.startswith(prefix)]
    for d in left:
        try:
            os.rmdir(os.path.join(found[1], d))
        except OSError:
            pass
    assert not left, "cgroups left behind: %r" % left


@pytest.fixture
def env():
    require_sandbox()
    e = FaultEnv()
    yield e
    e.cleanup()


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


def status_or_fail(t, timeout=3.0, what=""):
    """The status reply within timeout seconds: the event loop is serving."""
    assert_alive(t, what)
    c = Conn(t.sup.socket, timeout)
    try:
        r = c.call("status")
    except (socket.timeout, EOFError, ConnectionError) as e:
        raise AssertionError("status not answered within %.1f s %s (%r); supervisor CPU %.2f s:\n%s" % (
            timeout, what, e, cpu_seconds(t.pid), log_tail(t)))
    finally:
        c.close()
    assert r["type"] == "reply", r
    return r


def one_call(t, code, timeout=30):
    c = Conn(t.sup.socket, timeout)
    try:
        return c.execute(code)
    finally:
        c.close()


# ---- RLIMIT_NOFILE ----

NOFILE_CAUSE = re.compile(r"Too many open files|EMFILE|descriptor", re.I)


@pytest.mark.parametrize("mode", MODES)
def test_fd_exhaustion_fails_the_call_and_recovers(env, mode):
    """RLIMIT_NOFILE of the running supervisor lowered with prlimit so that a connection
    still fits but nothing more: a worker needs a plan memfd and eight pipe ends (exec
    mode also a sync pipe and /dev/null), so starting one fails with EMFILE. The call ends as worker_error naming the cause,
    the supervisor keeps serving, and once the limit is raised again the next call is
    ok and the descriptor count is back at its baseline."""
    t = env.start("workerStart: %s\nzygotePoolSize: 1\n" % mode)
    ok_result(one_call(t, "6 * 7"), "42")
    status_or_fail(t)
    baseline = settled_fd_count(t.pid)

    env.lower_nofile_to_one_connection(t)
    c = Conn(t.sup.socket, 15)
    rids = [send_execute(c, "'never runs'") for _ in range(2)]
    try:
        out = collect_outcomes([c], [rids], timeout=15, context=lambda: log_tail(t))
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
    st = status_or_fail(t, what="with RLIMIT_NOFILE at 16")
    assert st["running"] == 0 and st["queued"] == 0, st

    env.restore_nofile(t)
    ok_result(one_call(t, NORTHSTAR), "8.25")
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (
        "descriptors %d, baseline %d: %r" % (fd_count(t.pid), baseline, fds_of(t.pid)))
    env.finish(t)



@pytest.mark.parametrize("mode", MODES)
def test_outputs_tmpfs_failure_is_named_and_recovers(env, mode):
    """The call's /outputs tmpfs is made after its plan and pipes: with RLIMIT_NOFILE
    raised one descriptor at a time from where nothing fits, some limit lets the plan
    and the pipes through and fails fsopen()/fsmount(). That call ends as worker_error
    naming the step; with the limit restored the next call has its /outputs again."""
    t = env.start("workerStart: %s\nzygotePoolSize: 1\n" % mode)
    ok_result(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    seen = []
    try:
        # baseline + 1: room to accept the connection (below it the listener waits).
        for n in range(baseline + 1, baseline + 24):
            env.lower_nofile(t, n)
            r = one_call(t, "open('/outputs/x', 'w').write('x')", timeout=15)
            env.restore_nofile(t)
            seen.append((n, r.get("outcome"), r.get("detail")))
            if r.get("outcome") == "ok":
                break
            if "creating its /outputs tmpfs" in (r.get("detail") or ""):
                assert r["outcome"] == "worker_error" and NOFILE_CAUSE.search(r["detail"]), describe(r)
                assert r["timing"]["workerStarted"] is False and r["artifacts"] is None, r
                break
        else:
            raise AssertionError("no limit failed at the /outputs step: %r" % seen)
        assert "creating its /outputs tmpfs" in (seen[-1][2] or ""), seen
    finally:
        env.restore_nofile(t)
    assert_alive(t, "after the /outputs step failed")
    r = one_call(t, "open('/outputs/back.txt', 'w').write('back')")
    ok_result(r)
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"]
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (
        "descriptors %d, baseline %d: %r" % (fd_count(t.pid), baseline, fds_of(t.pid)))
    env.finish(t)


@pytest.mark.parametrize("mode", MODES)
def test_unreadable_outputs_are_reported_omitted_and_recover(env, mode):
    """The supervisor reads a call's /outputs after its worker has been reaped. With
    RLIMIT_NOFILE lowered to 3 while the code runs (every descriptor it has stays open;
    no new one can be made), that read cannot open the directory: the result must not
    drop the files silently. It is the call's own outcome (ok), with no artifacts and
    every entry counted in omittedArtifacts, its bytes the tmpfs's whole pages; once
    the limit is back, the next call returns its artifacts and no descriptor is lost."""
    t = env.start("workerStart: %s\nzygotePoolSize: 0\nheartbeatMs: 50\n" % mode)
    ok_result(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    code = ("open('/outputs/a.txt', 'w').write('abc')\n"
            "open('/outputs/b.bin', 'wb').write(bytes(5000))\n"
            "print('ready', flush=True)\n"
            "import time\n"
            "time.sleep(1.0)\n"
            "'done'\n")
    c = Conn(t.sup.socket, 30)
    try:
        rid = send_execute(c, code)
        progress = []
        while True:
            m = c.wait(rid, types=("progress", "result", "error"))
            assert m["type"] == "progress", describe(m)
            progress.append(m)
            if m["phase"] == "running" and m["stdoutCharacters"] >= 6:
                break
        assert m["artifacts"] == 2, m  # the tmpfs's count while it runs
        env.lower_nofile(t, 3)
        try:
            r = c.wait(rid, types=("result", "error"))
        finally:
            env.restore_nofile(t)
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
    ok_result(r)
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"] and r["omittedArtifacts"] == 0, r
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (
        "descriptors %d, baseline %d: %r" % (fd_count(t.pid), baseline, fds_of(t.pid)))
    env.finish(t)


# ---- process limit (pids cgroup) ----

PIDS_CAUSE = re.compile(r"Resource temporarily unavailable|process limit|EAGAIN|pids", re.I)
PIDS_POLICY = "workerStart: %s\nmaxActiveWorkers: 1\ntimeoutMs: 2000\nzygotePoolSize: 0\nheartbeatMs: 200\n"


def threads(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def limit_to_current(t):
    """pids.max = the tasks of the supervisor and its zygote only, so that a running
    worker's exit makes no room: every further clone (a worker, in exec mode by the
    supervisor, in zygote mode by the zygote) fails with EAGAIN. pids.max may be below
    pids.current; only new tasks are refused."""
    zpid = status(t.sup)["zygotePid"]
    t.cg.limit(threads(t.pid) + (threads(zpid) if zpid else 0))


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
    assert r["elapsedMs"] <= deadline_s * 1000 + 1500, r["timing"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_process_limit_fails_calls_without_spinning(env, mode):
    """The supervisor (and its zygote) in a pids cgroup at its limit: clone fails with
    EAGAIN. Each call ends once (worker_error naming the cause, or timeout at its
    deadline, including a call queued behind a running one), the event loop does not
    spin (CPU time over two seconds stays low), status answers; after the limit is
    lifted calls are ok and the descriptor count is back at its baseline; with the limit
    back, SIGTERM still drains: every call answered, exit 0, promptly."""
    if _pids_hierarchy() is None:
        if MUST_SANDBOX:
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but the host has no cgroup hierarchy with the pids controller")
        pytest.skip("no pids cgroup controller on this host")
    # LeakSanitizer stops the world at exit with a clone, which this test's pids limit
    # refuses: leak checking is off for this supervisor only (use-after-free and the
    # like are still caught).
    t = env.start(PIDS_POLICY % mode, env={"ASAN_OPTIONS": "detect_leaks=0"} if asan_build() else None)
    assert t.cg is not None
    ok_result(one_call(t, "6 * 7"), "42")
    status_or_fail(t)
    baseline = settled_fd_count(t.pid)
    problems = []

    # One call runs (its worker exists before the limit); two more queue behind it.
    c = Conn(t.sup.socket, 20)
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
    # the queued ones try to start.
    time.sleep(0.8)
    assert_alive(t, "under the process limit")
    cpu0 = cpu_seconds(t.pid)
    time.sleep(2.0)
    spent = cpu_seconds(t.pid) - cpu0
    # Every symptom of a stuck loop is collected before failing: CPU, status, deadlines.
    stuck = []
    if spent >= 0.5:
        stuck.append("codeinterpd used %.2f s of CPU in 2 s under the process limit (a busy loop)" % spent)
    try:
        status_or_fail(t, 2.0, what="under the process limit")
    except AssertionError:
        stuck.append("status was not answered within 2 s")
    try:
        out = collect_outcomes([c], [[first] + queued], timeout=max(0.5, 5.0 - (time.monotonic() - t_sent)))
    except AssertionError as e:
        stuck.append("calls queued with a 2 s deadline had no outcome 5 s later (%s)" % str(e).splitlines()[0])
    if stuck:
        t.sup.proc.send_signal(signal.SIGTERM)
        try:
            t.sup.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            stuck.append("SIGTERM was not handled: still running 2 s later")
    assert not stuck, "\n".join(stuck) + "\n" + log_tail(t, 1500)
    ok_result(out.get(0, first), "'first'")
    for rid in queued:
        check_pids_outcome(out.get(0, rid), 2.0, problems)

    # The fault removed: calls are ok again, nothing accumulated.
    t.cg.unlimit()
    ok_result(one_call(t, NORTHSTAR), "8.25")
    c.close()
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (
        "descriptors %d, baseline %d: %r" % (fd_count(t.pid), baseline, fds_of(t.pid)))

    # The limit back, calls waiting or failing, then SIGTERM: each gets its answer and
    # the supervisor exits 0 at once.
    limit_to_current(t)
    c = t.sup.connect(20)
    rids = [send_execute(c, "'late %d'" % i) for i in range(3)]
    time.sleep(0.2)
    t.sup.proc.send_signal(signal.SIGTERM)
    out = collect_outcomes([c], [rids], timeout=5.0, context=lambda: log_tail(t))
    for rid in rids:
        r = out.get(0, rid)
        assert (r["type"], r.get("outcome") or r.get("code")) in (
            ("result", "worker_error"), ("result", "cancelled"), ("result", "timeout"), ("error", "cancelled")), \
            describe(r)
        if r.get("outcome") == "worker_error" and not PIDS_CAUSE.search(r["detail"] or ""):
            problems.append("detail does not name the process limit (EAGAIN): " + describe(r))
    try:
        t.sup.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        raise AssertionError("codeinterpd did not exit within 5 s of SIGTERM:\n" + log_tail(t))
    t.cg.unlimit()
    env.finish(t)
    assert not problems, "\n".join(problems)


# ---- the zygote under load: SIGKILL, SIGSTOP ----

ZYGOTE_LOAD = "workerStart: zygote\nmaxActiveWorkers: 2\nzygotePoolSize: 1\ntimeoutMs: 10000\n"


def load(t, n_conns=3, per_conn=3, seconds=0.3):
    """n_conns clients with per_conn calls each; returns (conns, ids, expected texts)."""
    conns = [t.sup.connect(30) for _ in range(n_conns)]
    ids, expect = [], {}
    for i, c in enumerate(conns):
        rs = []
        for j in range(per_conn):
            value = i * 100 + j
            rid = send_execute(c, "import time\ntime.sleep(%s)\n%d" % (seconds, value))
            expect[(i, rid)] = str(value)
            rs.append(rid)
        ids.append(rs)
    return conns, ids, expect


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


def test_zygote_sigkill_under_load(env):
    """The zygote SIGKILLed while calls run and wait on three connections: every call
    gets exactly one outcome, a new zygote takes over, later calls are ok."""
    t = env.start(ZYGOTE_LOAD)
    ok_result(one_call(t, "1"), "1")
    zpid = status_or_fail(t)["zygotePid"]
    baseline = settled_fd_count(t.pid)
    conns, ids, expect = load(t)
    time.sleep(0.2)  # two calls running, the others queued
    os.kill(zpid, signal.SIGKILL)
    out = collect_outcomes(conns, ids, timeout=20, context=lambda: log_tail(t))
    check_load(out, expect)
    st = status_or_fail(t)
    assert st["zygotePid"] not in (None, zpid) and st["zygoteGeneration"] >= 2, st
    for i in range(3):
        ok_result(one_call(t, "%d + 1" % i), str(i + 1))
    assert not worker_pids_of(t.sup) or wait_until(lambda: not worker_pids_of(t.sup), 3.0)
    for c in conns:
        c.close()
    # The new zygote's (or the same one's) descriptors replace the old ones.
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (fd_count(t.pid), baseline, fds_of(t.pid))
    env.finish(t)


def test_zygote_sigstop_sigcont_under_load(env):
    """The zygote stopped for a second (spawn requests unanswered, below the 5 s
    replacement) while calls run and wait, then continued: status answers meanwhile,
    every call gets exactly one outcome, later calls are ok."""
    t = env.start(ZYGOTE_LOAD)
    ok_result(one_call(t, "1"), "1")
    zpid = status_or_fail(t)["zygotePid"]
    baseline = settled_fd_count(t.pid)
    conns, ids, expect = load(t)
    time.sleep(0.1)
    os.kill(zpid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        status_or_fail(t, 1.0, "while the zygote is stopped")
        assert time.monotonic() - t0 < 1.0
        time.sleep(1.0)
    finally:
        os.kill(zpid, signal.SIGCONT)
    out = collect_outcomes(conns, ids, timeout=20, context=lambda: log_tail(t))
    kinds = check_load(out, expect)
    assert kinds.get("ok", 0) >= 1, kinds
    for i in range(3):
        ok_result(one_call(t, "%d + 1" % i), str(i + 1))
    for c in conns:
        c.close()
    # The new zygote's (or the same one's) descriptors replace the old ones.
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (fd_count(t.pid), baseline, fds_of(t.pid))
    env.finish(t)


# ---- transport ----

def test_client_that_stops_reading_is_cut_off(env):
    """A client sends many executes with big outputs and never reads: once its unsent
    replies pass maxConnectionOutputBytes it is disconnected, its running worker (a long
    sleep) is killed and its queued calls dropped, and another client is served all
    along."""
    t = env.start("maxActiveWorkers: 2\nmaxConnectionOutputBytes: 262144\nmaxResultBytes: 262144\n"
                  "maxQueuedCalls: 64\ntimeoutMs: 60000\n")
    ok_result(one_call(t, "1"), "1")
    baseline = settled_fd_count(t.pid)
    bad = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bad.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    bad.connect(t.sup.socket)
    frames = execute_frame(1, "import time\ntime.sleep(60)")
    frames += b"".join(execute_frame(i, "print('x' * 60000)") for i in range(2, 32))
    try:
        bad.sendall(frames)
        check_cut_off(t, bad, baseline)
    finally:
        bad.close()
    env.finish(t)


def check_cut_off(t, bad, baseline):
    good = Conn(t.sup.socket, 30)
    try:
        cut = False
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ok_result(good.execute(NORTHSTAR), "8.25")
            if "does not read its replies" in t.sup.read_log():
                cut = True
                break
        assert cut, "the client that does not read was not cut off:\n" + log_tail(t)
        ok_result(good.execute("'still served'"), "'still served'")

        def released():
            st = status(t.sup)  # its own connection and `good` remain
            return st["connections"] == 2 and st["running"] == 0 and st["queued"] == 0 and not worker_pids_of(t.sup)

        assert wait_until(released, 5.0), (
            "cut off (logged), but 5 s later its connection is still open and its calls still run: %r, "
            "workers %r" % (status(t.sup), worker_pids_of(t.sup)))
        st = status(t.sup)
        assert st["finishedTotal"] == st["admittedTotal"], st
    finally:
        good.close()
    # The cut-off client reads what had been sent, then the end of the stream.
    bad.settimeout(10)
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
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (fd_count(t.pid), baseline, fds_of(t.pid))


def test_frame_sent_one_byte_at_a_time(env):
    """Requests that arrive one byte at a time (2 ms apart, across the length prefix and
    the body) are answered correctly, and a second connection is served meanwhile."""
    t = env.start("")
    c = Conn(t.sup.socket, 30)
    other = Conn(t.sup.socket, 30)
    try:
        data = execute_frame(1, NORTHSTAR)
        status_body = msgpack.packb({"op": "status", "id": 2}, use_bin_type=True)
        data += struct.pack(">I", len(status_body)) + status_body
        for k, b in enumerate(data):
            c.send_raw(bytes([b]))
            time.sleep(0.002)
            if k == len(data) // 2:
                ok_result(other.execute("6 * 7"), "42")
        out = collect_outcomes([c], [[1]], timeout=30, context=lambda: log_tail(t))
        ok_result(out.get(0, 1), "8.25")
        r = c.wait(2)
        assert r["type"] == "reply" and r["op"] == "status", r
    finally:
        c.close()
        other.close()
    env.finish(t)


def test_sigterm_with_full_queue_and_running_workers(env):
    """SIGTERM while two workers run and the queue is full (one more call refused as
    overloaded): every admitted call gets exactly one outcome (cancelled, or finished
    if it was done first), the supervisor exits 0 promptly, nothing is left."""
    t = env.start("maxActiveWorkers: 2\nmaxQueuedCalls: 3\ntimeoutMs: 60000\n")
    a = t.sup.connect(30)
    b = t.sup.connect(30)
    running = [send_execute(a, "import time\ntime.sleep(60)") for _ in range(2)]
    for rid in running:
        assert a.wait(rid, types=("progress",))["id"] == rid
    assert wait_until(lambda: status(t.sup)["running"] == 2, 10.0), status(t.sup)
    queued_a = [send_execute(a, "'a%d'" % i) for i in range(2)]
    queued_b = [send_execute(b, "'b0'")]
    assert wait_until(lambda: status(t.sup)["queued"] == 3, 5.0), status(t.sup)
    refused = send_execute(b, "'refused'")
    r = b.wait(refused, types=("error", "result"))
    assert r["type"] == "error" and r["code"] == "overloaded", r
    st = status(t.sup)
    assert wait_until(lambda: len(worker_pids_of(t.sup)) == 2, 3.0)
    workers = worker_pids_of(t.sup)

    t0 = time.monotonic()
    t.sup.proc.send_signal(signal.SIGTERM)
    out = collect_outcomes([a, b], [running + queued_a, queued_b], timeout=10, grace=0.5,
                           context=lambda: log_tail(t))
    for key, r in out.finals.items():
        assert r["type"] == "result", describe(r)
        assert r["outcome"] == "cancelled" and "shutting down" in r["detail"], describe(r)
        fin = [m for m in out.progress.get(key, []) if m["phase"] == "finished"]
        assert len(fin) == 1 and fin[0]["outcome"] == "cancelled", out.progress.get(key)
    for rid in running:
        assert out.get(0, rid)["partial"] is True
    try:
        rc = t.sup.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        raise AssertionError("codeinterpd did not exit within 5 s of SIGTERM:\n" + log_tail(t))
    took = time.monotonic() - t0
    assert rc == 0, "exit %r:\n%s" % (rc, log_tail(t))
    assert took < 3.0, took
    assert st["admittedTotal"] >= 5
    # Each connection is closed after its answers.
    for c in (a, b):
        c.sock.settimeout(2)
        with pytest.raises((EOFError, ConnectionResetError)):
            while True:
                c.recv()
    for p in workers:
        assert wait_until(lambda: not os.path.exists("/proc/%d" % p) or _comm(p) != "ci-worker", 2.0), p
    env.finish(t)


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
        if MUST_SANDBOX:
            pytest.fail("no C compiler for the fake zygote")
        pytest.skip("no C compiler for the fake zygote")
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


def test_fake_zygote_with_a_bad_ready_message_fails_startup(env, fake_zygotes):
    """A zygote whose "ready" message has the wrong magic: the supervisor does not start
    (exit 1, a message naming the zygote) and leaves nothing behind."""
    cg = new_cgroup()
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
            log = p.communicate(timeout=40)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("codeinterpd kept running with a zygote that said garbage")
        assert p.returncode == 1, (p.returncode, log)
        assert re.search(r"zygote", log, re.I), log
        assert not os.path.exists(sock), "socket file left behind"
        if cg is not None:
            assert wait_until(lambda: not cg.procs(), 3.0), [(q, _comm(q)) for q in cg.procs()]
    finally:
        if cg is not None:
            cg.remove()
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("fake", ["garbage", "refusal", "unknown_token", "not_a_child"])
def test_fake_zygote_answers_wrongly(env, fake_zygotes, fake):
    """The zygote answers spawn requests with garbage (a 5-byte message), a refusal
    (EPERM), an answer to a request never made, or a "worker" that is not the
    supervisor's child. Each call still gets exactly one outcome (worker_error, or
    timeout at its deadline), the supervisor keeps answering without spinning (no
    restart storm), and SIGTERM stops it cleanly with nothing left. (Its start-up
    self-check would refuse such a zygote: --no-self-check lets it serve, as a zygote
    that goes wrong later would.)"""
    t = env.start(FAKE_POLICY, extra_args=["--worker", fake_zygotes[fake], "--no-self-check"])
    gen0 = status_or_fail(t)["zygoteGeneration"]
    c = t.sup.connect(20)
    rids = [send_execute(c, "'never runs %d'" % i) for i in range(2)]
    cpu0 = cpu_seconds(t.pid)
    t0 = time.monotonic()
    out = collect_outcomes([c], [rids], timeout=8, context=lambda: log_tail(t))
    for rid in rids:
        r = out.get(0, rid)
        assert r["type"] == "result" and r["outcome"] in ("worker_error", "timeout"), describe(r)
        assert r["elapsedMs"] <= 1500 + 1500, r["timing"]
        if fake == "refusal":
            assert r["outcome"] == "worker_error" and "Operation not permitted" in r["detail"], describe(r)
        if r["outcome"] == "timeout":
            assert r["timing"]["workerStarted"] is False, r
    st = status_or_fail(t, what="after a zygote answered wrongly")
    assert st["running"] == 0 and st["queued"] == 0, st
    elapsed = time.monotonic() - t0
    spent = cpu_seconds(t.pid) - cpu0
    assert spent < 0.3 + 0.25 * elapsed, "codeinterpd used %.2f s of CPU in %.2f s" % (spent, elapsed)
    # Replacing a zygote that answers wrongly is fine; replacing it in a tight loop is not.
    assert st["zygoteGeneration"] - gen0 <= 10, st
    env.finish(t)


def test_missing_worker_binary_is_a_startup_error(env):
    """--worker naming a file that does not exist: exit 1 at once with a message naming
    the worker binary; no socket file left behind."""
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    sock = os.path.join(d, "ci.sock")
    try:
        for mode in MODES:
            with open(os.path.join(d, "policy.yaml"), "w") as f:
                f.write("workerStart: %s\n" % mode)
            p = subprocess.run([DAEMON, "--socket", sock, "--policy", os.path.join(d, "policy.yaml"),
                                "--worker", "/nonexistent/codeinterp-worker"], capture_output=True, timeout=20)
            log = (p.stdout + p.stderr).decode(errors="replace")
            assert p.returncode == 1, (mode, p.returncode, log)
            assert re.search(r"worker binary", log, re.I) and "No such file" in log, log
            assert "AddressSanitizer" not in log and "runtime error" not in log, log
            assert not os.path.exists(sock)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---- namespace limit (ENOSPC), confined to a child user namespace ----

# user.max_user_namespaces and friends are per user namespace, and a namespace created
# inside user namespace U is counted against U's limit (and its ancestors'). The host's
# sysctls are shared with whoever else runs tests on the machine, so the supervisor runs
# in a user namespace U of its own (uids and gids 0-65535 mapped to themselves, so it is
# root there and can map workers' host ids, given a block inside that range: the default
# block is not mapped there and the supervisor would refuse to start), and only U's
# limit is lowered.
USERNS_WRAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
    sys.exit("unshare(CLONE_NEWUSER): %s" % os.strerror(ctypes.get_errno()))
w, r = int(sys.argv[1]), int(sys.argv[2])
os.write(w, b"u")
if os.read(r, 1) != b"m":  # the test has written our uid and gid maps
    sys.exit("no id maps")
os.execv(sys.argv[3], sys.argv[3:])
"""


class UsernsSupervisor(Supervisor):
    """A Supervisor running in a user namespace of its own (see above)."""

    def __init__(self, policy):
        self.dir = tempfile.mkdtemp(prefix="codeinterp-test-")
        self.socket = os.path.join(self.dir, "ci.sock")
        self.log_path = os.path.join(self.dir, "codeinterpd.log")
        self.policy_path = os.path.join(self.dir, "policy.yaml")
        with open(self.policy_path, "w") as f:
            f.write(policy)
        self.log = open(self.log_path, "wb")
        self.conns = []
        to_test, from_child = os.pipe()
        to_child, from_test = os.pipe()
        try:
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", "-c", USERNS_WRAPPER, str(from_child), str(to_child), DAEMON,
                 "--socket", self.socket, "--policy", self.policy_path],
                stdout=self.log, stderr=subprocess.STDOUT, pass_fds=(from_child, to_child))
            os.close(from_child)
            os.close(to_child)
            from_child = to_child = -1
            if os.read(to_test, 1) != b"u":
                raise RuntimeError("the user namespace wrapper failed: " + self.read_log())
            for name in ("uid_map", "gid_map"):
                with open("/proc/%d/%s" % (self.proc.pid, name), "w") as f:
                    f.write("0 0 65536\n")
            os.write(from_test, b"m")
        finally:
            for fd in (to_test, from_test, from_child, to_child):
                if fd >= 0:
                    os.close(fd)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None:
                raise RuntimeError("codeinterpd exited: " + self.read_log())
            if time.monotonic() > deadline:
                raise RuntimeError("codeinterpd did not start: " + self.read_log())
            time.sleep(0.01)


def set_userns_limit(pid, name, value):
    """Write /proc/sys/user/<name> as seen from pid's user namespace."""
    subprocess.run(["nsenter", "--user", "--target", str(pid), "/bin/sh", "-c",
                    "echo %s > /proc/sys/user/%s" % (value, name)], check=True, capture_output=True, timeout=10)


def read_userns_limit(pid, name):
    return subprocess.run(["nsenter", "--user", "--target", str(pid), "cat", "/proc/sys/user/" + name],
                          check=True, capture_output=True, timeout=10).stdout.decode().strip()


NS_CAUSE = re.compile(r"No space left on device|ENOSPC|namespace", re.I)


@pytest.mark.parametrize("mode", MODES)
def test_namespace_limit_fails_the_call_and_recovers(env, mode):
    """In the supervisor's own user namespace, max_user_namespaces = 0: creating a
    worker's user namespace fails with ENOSPC. The call ends as worker_error naming the
    cause, the supervisor keeps serving, and with the limit restored the next call is
    ok. The host's limit is never changed."""
    host_before = open("/proc/sys/user/max_user_namespaces").read()
    try:
        t = env.start_with(lambda: UsernsSupervisor(
            "workerStart: %s\nzygotePoolSize: 0\nmaxActiveWorkers: 1\ntimeoutMs: 5000\n"
            "workerHostIdBase: 50000\nworkerHostIdCount: 1000\n" % mode))
    except RuntimeError as e:
        if MUST_SANDBOX:
            raise
        pytest.skip("cannot run codeinterpd in a user namespace of its own: %s" % e)
    ok_result(one_call(t, "6 * 7"), "42")
    baseline = settled_fd_count(t.pid)
    base_fds = fds_of(t.pid)
    old = read_userns_limit(t.pid, "max_user_namespaces")
    set_userns_limit(t.pid, "max_user_namespaces", 0)
    try:
        assert open("/proc/sys/user/max_user_namespaces").read() == host_before
        c = t.sup.connect(15)
        rids = [send_execute(c, "'never runs'") for _ in range(2)]
        out = collect_outcomes([c], [rids], timeout=10, context=lambda: log_tail(t))
        for rid in rids:
            r = out.get(0, rid)
            assert r["type"] == "result" and r["outcome"] == "worker_error", describe(r)
            assert NS_CAUSE.search(r["detail"] or ""), describe(r)
        status_or_fail(t, what="with max_user_namespaces at 0")
        c.close()
    finally:
        set_userns_limit(t.pid, "max_user_namespaces", old)
    ok_result(one_call(t, NORTHSTAR), "8.25")
    assert wait_until(lambda: settled_fd_count(t.pid) == baseline, 5.0), (
        "descriptors %d, baseline %d: new %r" % (fd_count(t.pid), baseline,
                                                 set(fds_of(t.pid).items()) - set(base_fds.items())))
    env.finish(t)
    assert open("/proc/sys/user/max_user_namespaces").read() == host_before


@pytest.mark.parametrize("mode", MODES)
def test_supervisor_in_a_user_namespace_still_has_outputs(env, mode):
    """A supervisor in a user namespace of its own that shares the host's mounts may not
    create tmpfs superblocks there (fsopen: EPERM); it moves into a private mount
    namespace at start, says so, and calls get their /outputs."""
    try:
        t = env.start_with(lambda: UsernsSupervisor("workerStart: %s\nzygotePoolSize: 0\n"
                                                          "workerHostIdBase: 50000\nworkerHostIdCount: 1000\n" % mode))
    except RuntimeError as e:
        if MUST_SANDBOX:
            raise
        pytest.skip("cannot run codeinterpd in a user namespace of its own: %s" % e)
    r = ok_result(one_call(t, "open('/outputs/here.txt', 'w').write('here')"))
    assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("here.txt", b"here")]
    assert "running in a private one" in t.sup.read_log()
    env.finish(t)
