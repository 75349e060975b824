"""The adversarial suite: every attempt of attempts.py inside the sandbox, over the real
socket, against a supervisor in errno mode and one in kill mode. An attempt passes when
its marker appears nowhere (stdout, stderr, result, exception, in its call and in the
call before it), its outcome is one it may have, its result check holds, and the host
shows no effect: the host file it may target is unchanged and nothing was added next to
it, the dummy victim process and the supervisor are alive, the loopback and abstract
listeners got no connection, and no worker is left when the run ends.

The calls run over two connections at once (the default maxActiveWorkers is the number
of CPUs); each attempt gets its own call, so kill mode stops only that attempt."""
import concurrent.futures
import os
import shutil
import socket
import subprocess
import tempfile

import pytest

import harness
from attempts import ATTEMPTS
from testlib import WAIT_LIMIT, Conn, check_northstar, proc, running_supervisor, wait_idle, worker_pids_of

# What the sandbox lets through depends on how each start mode builds it (start_mode),
# and on whether the supervisor runs as root (rootless: run by hand, docs/testing.md).
pytestmark = [pytest.mark.start_mode, pytest.mark.rootless]

OUT_CHARS = 64000          # maxOutputCharacters (default)
RESULT_BYTES = 262144      # maxResultBytes (default)
LIMITS = dict(cpu_s=2, timeout_s=5, mem=256 << 20, tmp_bytes=4 << 20, file_bytes=2 << 20, nofile=64, nproc=16)
POLICY = ("cpuSeconds: %d\nmemoryBytes: %d\ntmpBytes: %d\nmaxFileBytes: %d\n"
          "maxOpenFiles: %d\nmaxProcesses: %d\n" % (
              LIMITS["cpu_s"], LIMITS["mem"], LIMITS["tmp_bytes"], LIMITS["file_bytes"], LIMITS["nofile"],
              LIMITS["nproc"]))
# CODEINTERP_ADVERSARIAL_POLICY names a policy file laid over POLICY (make adversarial
# runs the suite once more under packaging/policy-data.yaml, the scientific stack).
# That policy widens the worker's root, its environment, what it imports and what it
# has mapped (docs/security.md, "The scientific stack"), nothing else: under it run the
# attempts of the categories those touch. The others (privileges, network, processes,
# output forgery) meet the same sandbox as under the reviewed profile, where they run.
WIDENED_BY_A_POLICY = ("filesystem", "host information", "python tricks", "cpu and memory")
OVERLAY = os.environ.get("CODEINTERP_ADVERSARIAL_POLICY")
if OVERLAY:
    with open(OVERLAY) as _f:
        POLICY += _f.read()
RUN = [a for a in ATTEMPTS if not OVERLAY or a.category in WIDENED_BY_A_POLICY]
RO_FILE = "/usr/lib/python3.11/os.py"
MODES = ("errno", "kill")


def _fitted(channel, total):
    def check(r):
        ch = r.get(channel) or {}
        if len(ch.get("text", "")) > OUT_CHARS:
            return "%s holds %d characters, more than maxOutputCharacters" % (channel, len(ch["text"]))
        if ch.get("totalBytes") != total or not ch.get("omittedBytes"):
            return "%s counts do not show the omission: %r" % (channel, {k: v for k, v in ch.items() if k != "text"})
        return None
    return check


def _bounded(r):
    ch = r.get("stdout") or {}
    if len(ch.get("text", "")) > OUT_CHARS:
        return "stdout holds %d characters" % len(ch["text"])
    if ch.get("totalCharacters", 0) < len(ch.get("text", "")):
        return "stdout counts are smaller than its text"
    return None


def _result_bounded(r):
    res = r.get("result")
    if res and len(res["text"].encode()) > RESULT_BYTES:
        return "result holds %d bytes, more than maxResultBytes" % len(res["text"].encode())
    return None


def _outcome_is(want):
    return lambda r: None if r.get("outcome") == want else "outcome %r, expected %r" % (r.get("outcome"), want)


def _not_forged(r):
    if r.get("outcome") == "timeout":
        return "the forged outcome was believed"
    if (r.get("exitStatus") or {}).get("pid") == 4242:
        return "the forged exitStatus was believed"
    return None


CHECKS = {
    "stdout_fitted_8m": _fitted("stdout", 8 * 1024 * 1024),
    "stderr_fitted_8m": _fitted("stderr", 8 * 1024 * 1024),
    "stdout_bounded": _bounded,
    "result_bounded": _result_bounded,
    "worker_error": _outcome_is("worker_error"),
    "timeout": _outcome_is("timeout"),
    "ok_no_forgery": _outcome_is("ok"),
    "not_forged": _not_forged,
    "supervisor_alive": lambda r: None,
}


def texts(r):
    out = []
    for ch in ("stdout", "stderr", "result"):
        if r.get(ch):
            out.append(r[ch].get("text", ""))
    exc = r.get("exception") or {}
    for ch in ("message", "traceback"):
        if exc.get(ch):
            out.append(exc[ch].get("text", ""))
    out.append(r.get("detail") or "")
    return out


class Host:
    """The host side of one run: a directory with a secret and a target file, a victim
    process, loopback and abstract listeners."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="codeinterp-adv-host-")
        os.chmod(self.dir, 0o755)
        self.secret = os.path.join(self.dir, "secret")
        self.target = os.path.join(self.dir, "target")
        with open(self.secret, "w") as f:
            f.write("secret-" + harness.TOKEN)
        with open(self.target, "w") as f:
            f.write("original")
        self.ro_stat = os.stat(RO_FILE)
        self.victim = subprocess.Popen(["sleep", "600"])
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.setblocking(False)
        self.abstract = "codeinterp-adv-" + harness.TOKEN
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind("\0" + self.abstract)
        self.unix.listen(8)
        self.unix.setblocking(False)

    def ctx(self, sup):
        return dict(tmp="/tmp", host_dir=self.dir, secret_file=self.secret, secret="secret-" + harness.TOKEN,
                    target_file=self.target, ro_file=RO_FILE, root_dir="/", lib_dir="/usr/lib/python3.11",
                    inputs="/inputs", dev_dir="/dev", victim_pid=self.victim.pid, supervisor_pid=sup.proc.pid,
                    env_name=harness.ENV_CANARY_NAME, env_value="canary-" + harness.TOKEN,
                    host_hostname=socket.gethostname(), abstract=self.abstract,
                    tcp_port=self.tcp.getsockname()[1], socket_path=sup.socket, **LIMITS)

    def effects(self, sup):
        """Host effects seen now (empty when none)."""
        found = []
        if sorted(os.listdir(self.dir)) != ["secret", "target"]:
            found.append("host dir now holds %r" % sorted(os.listdir(self.dir)))
        with open(self.target) as f:
            if f.read() != "original":
                found.append("host target file was written")
        st = os.stat(RO_FILE)
        if (st.st_mode, st.st_mtime_ns, st.st_nlink) != (self.ro_stat.st_mode, self.ro_stat.st_mtime_ns,
                                                        self.ro_stat.st_nlink):
            found.append("%s changed" % RO_FILE)
        if self.victim.poll() is not None or not proc.alive(self.victim.pid):
            found.append("the victim process died")
        if sup.proc.poll() is not None:
            found.append("the supervisor died")
        for lsock, name in ((self.tcp, "loopback tcp"), (self.unix, "abstract unix")):
            try:
                c, _ = lsock.accept()
                c.close()
                found.append("the host's %s listener got a connection" % name)
            except BlockingIOError:
                pass
        return found

    def close(self):
        self.victim.kill()
        self.victim.wait()
        self.tcp.close()
        self.unix.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_attempt(sup, host, a):
    ctx = host.ctx(sup)
    conn = Conn(sup.socket, max(WAIT_LIMIT, 120))
    try:
        results = []
        if a.pre:
            results.append(conn.execute(harness.prelude(ctx) + "\n" + a.pre, summary="adversarial pre " + a.id))
        results.append(conn.execute(harness.program(a, ctx), summary="adversarial " + a.id))
    finally:
        conn.close()
    return results, host.effects(sup)


# Positive controls, run in the same sandbox: the machinery the attempts rely on works
# there (so an attempt cannot pass only because ctypes, raw system calls or executable
# memory are unavailable), and a marker printed in the sandbox is seen.
CONTROLS = [
    ("marker_is_detected", "escaped('control')", lambda r: harness.has_marker(*texts(r))),
    ("raw_syscall_getpid", "syscall(39)", lambda r: r["outcome"] == "ok" and r["result"]["text"] == "(1, 0)"),
    ("reached_getpid", "reached(39)", lambda r: r["outcome"] == "ok" and r["result"]["text"] == "True"),
    ("ctypes_shellcode_runs", """import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b'\\xb8\\x2a\\x00\\x00\\x00\\xc3')
ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()""",
     lambda r: r["outcome"] == "ok" and r["result"]["text"] == "42"),
    ("tmp_and_threads_work", """import threading
open(CTX['tmp'] + '/c', 'w').write('x')
t = threading.Thread(target=lambda: None); t.start(); t.join()
open(CTX['tmp'] + '/c').read()""", lambda r: r["outcome"] == "ok" and r["result"]["text"] == "'x'"),
]


def run_controls(sup, host):
    ctx = host.ctx(sup)
    conn = Conn(sup.socket)
    failed = []
    try:
        for name, code, ok in CONTROLS:
            r = conn.execute(harness.prelude(ctx) + "\n" + code, summary="adversarial control")
            if r.get("type") != "result" or not ok(r):
                failed.append((name, r.get("outcome"), r.get("result"), r.get("exception")))
    finally:
        conn.close()
    return failed


_RUNS = {}


# The deadline is an attempt's subject only where the attempt expects to be ended by it
# (it sleeps past CTX['timeout_s']): those run against a supervisor with the 5 s
# deadline of LIMITS. Every other attempt runs against one whose deadline is far (its
# other limits the same), so that a machine slow enough to stretch an attempt past 5 s
# cannot turn its outcome into a timeout.
DEADLINE = "timeoutMs: %d\n" % (LIMITS["timeout_s"] * 1000)
FAR_DEADLINE = "timeoutMs: %d\n" % (max(WAIT_LIMIT, 120) * 1000)


def deadline_is_the_subject(a):
    return "timeout" in a.expect and len(a.expect) == 1


def run_mode(mode):
    """All attempts in one mode, once per session; {id: (results, host effects)}."""
    if mode in _RUNS:
        return _RUNS[mode]
    os.environ[harness.ENV_CANARY_NAME] = "canary-" + harness.TOKEN
    host = Host()
    out = {}
    try:
        policy = POLICY + "seccompDenyAction: %s\n" % mode
        with running_supervisor(policy + DEADLINE) as deadline_sup, running_supervisor(policy + FAR_DEADLINE) as sup:
            out["__controls__"] = run_controls(sup, host)
            with concurrent.futures.ThreadPoolExecutor(2) as ex:
                futs = {ex.submit(run_attempt, deadline_sup if deadline_is_the_subject(a) else sup, host, a): a
                        for a in RUN}
                for f in concurrent.futures.as_completed(futs):
                    a = futs[f]
                    try:
                        out[a.id] = f.result()
                    except Exception as e:
                        out[a.id] = ([], ["the harness failed: %r" % e])
            final = []
            for s in (deadline_sup, sup):
                wait_idle(s)  # every call finished: its worker reaped
                left = worker_pids_of(s)
                final += host.effects(s)
                if left:
                    final.append("workers left after the run: %r" % left)
                check_northstar(s)
            out["__final__"] = final
    finally:
        host.close()
    _RUNS[mode] = out
    return out


# Each seccomp mode is one run of the whole table against one supervisor (run_mode):
# its tests go to one xdist worker (--dist loadgroup), the other mode's to another.
BY_MODE = [pytest.param(m, marks=pytest.mark.xdist_group("adversarial-" + m)) for m in MODES]


@pytest.mark.parametrize("mode", BY_MODE)
@pytest.mark.parametrize("a", RUN, ids=lambda a: a.id)
def test_attempt_does_not_escape(mode, a):
    results, effects = run_mode(mode)[a.id]
    assert results, effects
    for r in results:
        assert r.get("type") == "result", r
        assert not harness.has_marker(*texts(r)), "ESCAPED in the sandbox (%s mode): %s" % (
            mode, [t[:300] for t in texts(r) if harness.MARKER in t])
    r = results[-1]
    allowed = set(a.expect) | ({"worker_error"} if mode == "kill" else set())
    assert r["outcome"] in allowed, (r["outcome"], r.get("detail"), r.get("exception"))
    if a.check:
        problem = CHECKS[a.check](r)
        assert problem is None, problem
    assert not effects, effects


@pytest.mark.parametrize("mode", BY_MODE)
def test_controls_work_in_the_sandbox(mode):
    assert not run_mode(mode)["__controls__"]


@pytest.mark.parametrize("mode", BY_MODE)
def test_nothing_left_on_the_host(mode):
    assert not run_mode(mode)["__final__"]


def test_table_is_large_and_covers_every_category():
    cats = {a.category for a in ATTEMPTS}
    assert len(ATTEMPTS) >= 120
    assert cats == {"filesystem", "privilege", "host information", "process", "network", "output forgery",
                    "python tricks", "cpu and memory"}
    for a in ATTEMPTS:
        assert a.validate in ("host", "userns") or a.why, a.id
