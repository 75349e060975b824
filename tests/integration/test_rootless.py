"""Rootless (docs/security.md, "Rootless"): what a supervisor says and does about the
user it runs as. These run in both modes of the suite: as root (the ordinary run) the
answers are the root ones; under `make test-rootless` (CODEINTERP_ROOTLESS_USER, a user
created for the run) the rootless ones, in both start modes. The rest of the rootless
run is every test marked rootless (docs/testing.md)."""
import os
import pwd
import shutil
import signal
import subprocess
import tempfile

import pytest

from testlib import (DAEMON, ROOTLESS, ROOTLESS_USER, WAIT_LIMIT, WORKER_START, Conn, Supervisor, ok, proc,
                     require_sandbox, status, value)
from testlib.confinement import confined, manifest_capabilities
from testlib.supervisor import HOST_ID_BLOCK
from testlib.waits import check_pool_and_call_priority, start_held, wait_for

pytestmark = [pytest.mark.rootless, pytest.mark.start_mode]

# The host ids a worker runs as: the policy's workerUid/workerGid (defaults) as root;
# rootless, the supervisor's own user and its primary group.
if ROOTLESS:
    _pw = pwd.getpwnam(ROOTLESS_USER)
    HOST_IDS = (_pw.pw_uid, _pw.pw_gid)
else:
    HOST_IDS = (65534, 65534)


def test_hello_says_rootless(conn):
    assert conn.call("hello")["rootless"] is ROOTLESS


def test_evidence_says_rootless(conn):
    r = ok(conn.execute("1 + 1"))
    assert r["evidence"]["runtime"]["rootless"] is ROOTLESS


def test_supervisor_runs_as_the_suites_user(supervisor):
    assert proc.ids(supervisor.proc.pid) == (HOST_IDS if ROOTLESS else (0, 0))


def test_worker_host_ids_and_inside_ids(supervisor):
    """Inside, the worker is workerUid/workerGid (65534) in both modes; on the host it is
    that uid as root, and the supervisor's own user rootless (the single-id map). Read
    while the call holds, once its worker is confined."""
    call = start_held(supervisor, after="import os\n(os.getuid(), os.getgid())")
    pid = call.wait_running()
    ids = proc.ids(pid)
    if ROOTLESS:
        assert ids == HOST_IDS
    else:  # a host uid and gid of its own from its block (test_identity.py)
        # (an installed supervisor: the default block)
        base, count = getattr(supervisor, "host_id_base", 0x7ff00000), HOST_ID_BLOCK
        if not hasattr(supervisor, "host_id_base") or base == 0x7ff00000:
            count = 65536
        assert ids[0] == ids[1] and base <= ids[0] < base + count, ids
    with open("/proc/%d/uid_map" % pid) as f:
        assert f.read().split() == ["65534", str(ids[0]), "1"]
    with open("/proc/%d/setgroups" % pid) as f:
        assert f.read().strip() == ("deny" if ROOTLESS else "allow")
    call.release()
    m = call.result()
    assert value(m) == "(65534, 65534)"
    assert m["exitStatus"]["hostUid"] == ids[0]


@pytest.mark.skipif(WORKER_START != "zygote", reason="the pool is zygote mode's")
def test_pool_worker_priority(supervisor):
    """As root, pre-started workers prepare 10 nicer than the supervisor (at most 19)
    and the supervisor sets a worker back to its own nice when it takes a call.
    Rootless it can set it back only if its RLIMIT_NICE reaches its nice (no
    CAP_SYS_NICE on the host); otherwise pool workers stay at its priority.
    (test_confinement.py: root without CAP_SYS_NICE.)"""
    sup_pid = status(supervisor)["pid"]
    soft = proc.limits(sup_pid, "Max nice priority")[0]
    reaches = soft == "unlimited" or int(soft) >= 20 - proc.nice(sup_pid)
    c = supervisor.connect()
    check_pool_and_call_priority(supervisor, c, niced=not ROOTLESS or reaches)
    c.close()


def test_rlimit_above_the_inherited_hard_limit_is_clamped():
    """The policy's fileBytes (16 MiB by default) above the hard RLIMIT_FSIZE the
    supervisor inherited: a worker cannot raise a hard limit (no CAP_SYS_RESOURCE on the
    host; a rootless user's limits are often lower than root's), so it keeps the
    inherited one, which is stricter, and the call runs."""
    require_sandbox()
    hard = 4 << 20
    sup = Supervisor(prefix=["prlimit", "--fsize=%d:%d" % (hard, hard), "--"])
    try:
        c = sup.connect()
        got = value(c.execute("import resource\nresource.getrlimit(resource.RLIMIT_FSIZE)"))
        assert got == "(%d, %d)" % (hard, hard)
        # And it holds: a write past it is a file_size limit.
        r = c.execute("with open('/tmp/big', 'wb') as f:\n    f.write(b'x' * %d)\n    f.write(b'x')" % hard)
        assert r["outcome"] == "resource_limit" and r["limit"] == "file_size", r
    finally:
        assert sup.stop() == 0


def test_check_config_says_rootless():
    args = [DAEMON, "--check-config"]
    if ROOTLESS:
        args = ["setpriv", "--reuid", ROOTLESS_USER, "--regid", str(HOST_IDS[1]), "--clear-groups", "--"] + args
    out = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert out.returncode == 0, out.stdout + out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("running as root:")]
    if ROOTLESS:
        assert line == ["running as root: no, rootless (uid %d): workers are uid 65534, gid 65534 inside and "
                        "this user's uid %d, gid %d on the host (docs/security.md)" % (HOST_IDS[0], *HOST_IDS)]
    else:
        assert line == ["running as root: yes: workers are uid 65534, gid 65534 inside, each with a host uid "
                        "and gid of its own from the block below"]


@pytest.mark.skipif(not ROOTLESS, reason="as root the supervisor can make cgroups (test_cgroups.py)")
def test_rootless_cgroups_only_where_delegated(make_supervisor):
    """The suite's user has no delegated cgroup: auto runs without, required refuses."""
    c = make_supervisor("cgroups: auto\n").connect()
    assert c.call("hello")["cgroup"] == "none"
    assert ok(c.execute("1"))["evidence"]["runtime"]["cgroup"] == "none"
    with pytest.raises(RuntimeError, match="requires a cgroup per worker"):
        Supervisor("cgroups: required\n")


@pytest.mark.skipif(not ROOTLESS, reason="needs a rootless supervisor beside the root one")
def test_rootless_beside_a_root_supervisor(make_supervisor):
    """A root supervisor of the same cgroup has made its workers' parent (v1: the shared
    `codeinterp` directory; v2: controllers enabled for children). That the directory
    exists does not make it the rootless supervisor's: it still runs without cgroups,
    and its calls work, while the root one's run in cgroups."""
    root = Supervisor("workerStart: %s\ncgroups: auto\n" % WORKER_START, user=None)
    try:
        rc = Conn(root.socket)
        try:
            have = rc.call("hello")["cgroup"]
            assert ok(rc.execute("1"))["evidence"]["runtime"]["cgroup"] == have
        finally:
            rc.close()
        c = make_supervisor("cgroups: auto\n").connect()
        assert c.call("hello")["cgroup"] == "none"
        assert ok(c.execute("1"))["evidence"]["runtime"]["cgroup"] == "none"
        with pytest.raises(RuntimeError, match="requires a cgroup per worker"):
            Supervisor("cgroups: required\n")
    finally:
        assert root.stop() == 0


THREADS = """import threading
ev = threading.Event()
n = 0
try:
    for i in range(14):
        threading.Thread(target=ev.wait).start()
        n += 1
except RuntimeError:
    pass
ev.set()
n"""


@pytest.mark.skipif(not ROOTLESS, reason="as root, workers are not the supervisor's user")
def test_rootless_rlimit_nproc_is_shared_with_the_users_processes():
    """docs/security.md, "Rootless": every task of the supervisor's user on the host
    counts against the user's RLIMIT_NPROC, the workers' included. With 8 allowed and
    the supervisor, its /outputs helper and the worker itself counted (exec mode: nothing
    else is the user's), a call starts 5 threads, though its own maxProcesses (64) would
    allow 61. The
    supervisor runs as a uid of this test process's own (no account, no other process),
    not as the run's user, whose other supervisors run tests beside this one."""
    require_sandbox()
    uid = 0x7fe00000 + (os.getpid() & 0xffff)  # below the workers' block, unused on the host
    sup = Supervisor("workerStart: exec\n", prefix=["prlimit", "--nproc=8:8", "--"], user=uid)
    try:
        assert value(sup.connect().execute(THREADS)) == "5"
    finally:
        assert sup.stop() == 0
    assert subprocess.run(["pgrep", "-U", str(uid)], capture_output=True).stdout == b""


SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "test-rootless.sh")


@pytest.mark.parametrize("must", ["1", ""])
def test_rootless_script_fails_instead_of_skipping_under_must_sandbox(must):
    """scripts/test-rootless.sh on a host where it cannot run (here: not started by root,
    the same path as a host without unprivileged user namespaces) says why and passes,
    and fails with CODEINTERP_MUST_SANDBOX=1."""
    env = dict(os.environ, CODEINTERP_MUST_SANDBOX=must)
    out = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", "sh", SCRIPT,
                          "/tmp"], capture_output=True, text=True, timeout=WAIT_LIMIT, env=env, cwd="/")
    if must:
        assert out.returncode == 1, out
        assert "FAILED: CODEINTERP_MUST_SANDBOX=1 but it must run as root" in out.stderr
    else:
        assert out.returncode == 0, out
        assert "test-rootless: skipped: it must run as root" in out.stdout


def test_require_sandbox_for_a_user_that_cannot(monkeypatch):
    """The suite's rootless check (codeinterp.testing.require_sandbox(user)) for a user
    that cannot start a supervisor: a skip, or a failure under CODEINTERP_MUST_SANDBOX=1."""
    import codeinterp.testing as testing

    assert testing.sandbox_available("ci-no-such-user-0") == (False, "no user 'ci-no-such-user-0'")
    monkeypatch.setattr(testing, "MUST_SANDBOX", True)
    with pytest.raises(pytest.fail.Exception, match="no user"):
        testing.require_sandbox("ci-no-such-user-0")
    monkeypatch.setattr(testing, "MUST_SANDBOX", False)
    with pytest.raises(pytest.skip.Exception, match="no user"):
        testing.require_sandbox("ci-no-such-user-0")


@pytest.mark.skipif(WORKER_START != "zygote", reason="the zygote is zygote mode's")
def test_zygote_capabilities(supervisor):
    """Under root the zygote keeps CAP_SETUID and CAP_SETGID to write its workers' maps;
    rootless it keeps none: it owns its workers' namespaces and maps only its own ids."""
    zpid = supervisor.connect().call("status")["zygotePid"]
    caps = proc.caps(zpid)
    setid = (1 << 6) | (1 << 7)  # CAP_SETGID, CAP_SETUID
    assert (caps["CapPrm"], caps["CapEff"]) == ((0, 0) if ROOTLESS else (setid, setid))
    assert proc.ids(zpid) == (HOST_IDS if ROOTLESS else (0, 0))


@pytest.mark.skipif(not ROOTLESS, reason="a root supervisor's workers drop their groups")
def test_rootless_worker_keeps_the_supervisors_supplementary_groups():
    """docs/security.md, "Rootless": setgroups is denied in a rootless worker's
    namespace, so the supervisor's supplementary groups stay (unmapped: 65534 inside);
    the worker still starts and runs."""
    require_sandbox()
    d = tempfile.mkdtemp(prefix="codeinterp-test-")
    os.chown(d, *HOST_IDS)
    sock = os.path.join(d, "ci.sock")
    extra_gid = 4  # adm: any group the user is not in
    daemon = subprocess.Popen(["setpriv", "--reuid", str(HOST_IDS[0]), "--regid", str(HOST_IDS[1]),
                               "--groups", str(extra_gid), "--", DAEMON, "--socket", sock],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(sock) or daemon.poll() is not None, "the socket")
        assert daemon.poll() is None, daemon.stderr.read()
        c = Conn(sock)  # the path appears only once it listens (bind, listen, rename)
        try:
            assert value(c.execute("import os\n(os.getgroups(), os.getgid())")) == "([65534], 65534)"
        finally:
            c.close()
        assert proc.status(daemon.pid)["Groups"].split() == [str(extra_gid)]
    finally:
        daemon.terminate()
        assert daemon.wait(WAIT_LIMIT) == 0
        shutil.rmtree(d, ignore_errors=True)



# ---- /outputs (docs/design.md, "Artifacts"; rootless: the mount helper) ----

def outputs_mount(pid):
    """The super options of the /outputs mount in pid's mounts, as a dict."""
    found = proc.mount_options(pid, "/outputs")
    assert found, "no /outputs in the worker's mounts"
    fstype, opts = found
    assert fstype == "tmpfs", found
    return opts


def test_outputs_tmpfs_bounds_and_owner(make_supervisor):
    """The worker's /outputs is a tmpfs with the policy's bounds (size maxArtifactBytes,
    maxArtifacts + 1 inodes), owned by the supervisor's own ids and never handed over
    (no CAP_CHOWN): as root mode 0777, the worker writing there with host ids of its
    own; rootless mode 0700, the worker being this user (the helper's tmpfs). The
    kernel keeps the bounds either way. Read while the call holds, once its worker is
    confined (its mounts made)."""
    s = make_supervisor("maxArtifacts: 3\nmaxArtifactBytes: 65536\n")
    c = s.connect()
    call = start_held(s, c, before="open('/outputs/a.txt', 'w').write('a')")
    pid = call.wait_running()
    opts = outputs_mount(pid)
    mode = "700" if ROOTLESS else "777"
    assert (opts["size"], opts["nr_inodes"], opts["mode"]) == ("64k", "4", mode), opts
    st = os.stat("/proc/%d/root/outputs" % pid)
    assert (st.st_uid, st.st_gid) == proc.ids(s.proc.pid) and st.st_mode & 0o777 == int(mode, 8)
    if ROOTLESS:
        assert proc.ids(pid) == HOST_IDS == proc.ids(s.proc.pid)
    else:
        assert proc.ids(pid) != proc.ids(s.proc.pid)
    call.release()
    r = ok(call.result())
    assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("a.txt", b"a")]
    code = ("import os\nn = 0\ntry:\n    for i in range(10):\n        open('/outputs/f%d' % i, 'w').close()\n"
            "        n += 1\nexcept OSError as e:\n    n = (n, e.errno)\nn")
    assert value(c.execute(code)) == "(3, 28)"  # ENOSPC: the root takes the fourth inode
    code = ("import os\nfd = os.open('/outputs/big', os.O_WRONLY | os.O_CREAT)\nn = 0\ntry:\n    while True:\n"
            "        n += os.write(fd, b'x' * 4096)\nexcept OSError as e:\n    n = (n, e.errno)\nn")
    assert value(c.execute(code)) == "(65536, 28)"
NOFILE_CAUSE = "Too many open files"
OUTPUTS_STEP = "creating its /outputs tmpfs"


def prlimit(pid, what, soft):
    """Set the soft limit of a running supervisor (the hard one is kept) and return the
    old one. Rootless, as the supervisor's user: root here may lack CAP_SYS_RESOURCE,
    without which only a process's own user may change its limits."""
    as_user = []
    if ROOTLESS:
        as_user = ["setpriv", "--reuid", ROOTLESS_USER, "--regid", str(HOST_IDS[1]), "--clear-groups", "--"]
    out = subprocess.run(as_user + ["prlimit", "--pid", str(pid), "--" + what, "--raw", "--noheadings",
                                    "--output=SOFT,HARD"], check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(as_user + ["prlimit", "--pid", str(pid), "--%s=%s:%s" % (what, soft, out[1])], check=True)
    return out[0]


def helper_supervisor(make_supervisor, policy=""):
    """A supervisor whose /outputs mounts come from the helper: rootless every one does;
    as root, one without CAP_SYS_ADMIN (the DaemonSet's capabilities)."""
    return make_supervisor(policy, prefix=[] if ROOTLESS else confined(manifest_capabilities()))


def mount_helper(sup_pid):
    """The supervisor's /outputs mount helper (its child named ci-mount), or None."""
    found = [p for p in proc.children(sup_pid) if proc.name(p) == "ci-mount"]
    assert len(found) <= 1, found
    return found[0] if found else None


def drop_outputs_made_ahead(s):
    """A reload (maxArtifactBytes changed) drops the /outputs the last call had made ahead
    for the next: the next call makes its own, on its path (docs/design.md, Artifacts)."""
    with open(s.policy_path, "a") as f:
        f.write("maxArtifactBytes: 4194304\n")
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "Reloaded the policy" in s.read_log(), lambda: "the reload: " + s.read_log())


@pytest.mark.asan
@pytest.mark.parametrize("by_helper", [False, True])
def test_outputs_step_fails_under_the_descriptor_limit(make_supervisor, by_helper):
    """RLIMIT_NOFILE raised one descriptor at a time from where the plan and the pipes
    just fit: the /outputs step fails with EMFILE for two limits where the supervisor
    makes the mount (fsopen, then fsmount), and for one where the helper does (rootless,
    or root without CAP_SYS_ADMIN): the helper's answer, whose descriptor finds no room
    here (the helper, which did its part, is kept). Then the call is ok, and so is
    every call once the limit is restored. Without cgroups: the spare slots' cgroups are
    made at idle priority and would take descriptors in between."""
    if ROOTLESS and not by_helper:
        pytest.skip("rootless, every mount comes from the helper")
    policy = "zygotePoolSize: 1\ncgroups: off\n"
    s = helper_supervisor(make_supervisor, policy) if by_helper else make_supervisor(policy)
    assert value(s.connect().execute("6 * 7")) == "42"
    drop_outputs_made_ahead(s)
    pid = s.proc.pid
    helper = mount_helper(pid) if by_helper else None
    base = len(os.listdir("/proc/%d/fd" % pid))
    failed, seen = [], []
    old = None
    try:
        for n in range(base + 1, base + 30):
            soft = prlimit(pid, "nofile", n)
            old = soft if old is None else old
            c = Conn(s.socket)
            try:
                r = c.execute("open('/outputs/x', 'w').write('x')")
            finally:
                c.close()
            seen.append((n, r.get("outcome"), r.get("detail")))
            if OUTPUTS_STEP in (r.get("detail") or ""):
                assert r["outcome"] == "worker_error" and NOFILE_CAUSE in r["detail"], r
                assert r["artifacts"] is None, r
                failed.append(n)
            elif r.get("outcome") == "ok":
                break
    finally:
        if old is not None:
            prlimit(pid, "nofile", old)
    want = 1 if by_helper else 2
    assert len(failed) == want and failed == list(range(failed[0], failed[0] + want)), seen
    if by_helper:
        assert helper and mount_helper(pid) == helper, (helper, proc.children(pid))
    assert seen[-1][1] == "ok", seen
    r = ok(s.connect().execute("open('/outputs/back.txt', 'w').write('back')"))
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"]


@pytest.mark.asan
def test_outputs_helper_is_kept_and_replaced(make_supervisor):
    """docs/design.md, "Artifacts": the helper that makes the /outputs mounts where the
    supervisor cannot is started once and kept (no clone per call); one that is gone is
    noticed at the next mount and replaced, and so is one that stops answering (after
    HELPER_TIMEOUT_SEC): the calls are ok throughout and nothing of the old one stays."""
    s = helper_supervisor(make_supervisor, "zygotePoolSize: 0\n")
    c = s.connect()
    ok(c.execute("open('/outputs/a', 'w').write('a')"))
    first = mount_helper(s.proc.pid)
    assert first, proc.children(s.proc.pid)
    r = ok(c.execute("open('/outputs/b', 'w').write('b')"))
    assert [a["name"] for a in r["artifacts"]] == ["b"] and mount_helper(s.proc.pid) == first
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: proc.state(first) in ("Z", None), "the helper killed")
    r = ok(c.execute("open('/outputs/c', 'w').write('c')"))
    second = mount_helper(s.proc.pid)
    assert [a["name"] for a in r["artifacts"]] == ["c"] and second not in (None, first)
    assert proc.state(first) is None  # reaped
    os.kill(second, signal.SIGSTOP)
    r = ok(c.execute("open('/outputs/d', 'w').write('d')"))
    assert [a["name"] for a in r["artifacts"]] == ["d"] and mount_helper(s.proc.pid) not in (None, second)
    assert proc.state(second) is None
    c.close()


@pytest.mark.skipif(not ROOTLESS, reason="RLIMIT_NPROC does not bind root")
def test_rootless_outputs_helper_under_the_process_limit(make_supervisor):
    """Rootless, each call's /outputs comes from the helper process: one gone (killed
    here) is started again at the next mount (here the next call's own: a reload has
    dropped the one made ahead), and with the user's process limit
    reached (RLIMIT_NPROC of the supervisor lowered to 1) its clone fails, and the call
    ends as worker_error naming the step and EAGAIN; restored, the next call has its
    /outputs again."""
    s = make_supervisor("zygotePoolSize: 0\n")
    assert value(s.connect().execute("6 * 7")) == "42"
    helper = mount_helper(s.proc.pid)
    os.kill(helper, signal.SIGKILL)
    wait_for(lambda: proc.state(helper) in ("Z", None), "the helper killed")
    drop_outputs_made_ahead(s)
    old = prlimit(s.proc.pid, "nproc", 1)
    try:
        r = s.connect().execute("'never runs'")
    finally:
        prlimit(s.proc.pid, "nproc", old)
    assert r["outcome"] == "worker_error", r
    assert r["detail"] == "could not start a worker: %s: Resource temporarily unavailable" % OUTPUTS_STEP, r
    r = ok(s.connect().execute("open('/outputs/back.txt', 'w').write('back')"))
    assert [a["name"] for a in r["artifacts"]] == ["back.txt"]


def test_outputs_the_owner_made_unreadable(make_supervisor):
    """docs/security.md: the supervisor reads /outputs as the files' owner (the worker's
    host ids as its fsuid and fsgid, no CAP_DAC_OVERRIDE needed), so a file the code
    made unreadable is given its owner's read bit back and returned. As root the code
    cannot touch /outputs itself (the supervisor's, mode 0777); rootless it owns it and
    may make it unsearchable, and the supervisor, its owner too, opens it again."""
    s = make_supervisor()
    c = s.connect()
    r = ok(c.execute("import os\nopen('/outputs/a', 'w').write('a')\nopen('/outputs/b', 'w').write('b')\n"
                     "os.chmod('/outputs/a', 0)\nos.chmod('/outputs/b', 0o200)"))
    assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("a", b"a"), ("b", b"b")], r
    assert r["omittedArtifacts"] == 0, r
    r = c.execute("import os\nopen('/outputs/a', 'w').write('a')\nos.chmod('/outputs', 0)")
    if ROOTLESS:
        ok(r)
    else:
        assert r["outcome"] == "python_exception" and r["exception"]["type"] == "PermissionError", r
    assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("a", b"a")], r
    assert r["omittedArtifacts"] == 0, r
