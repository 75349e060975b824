"""The supervisor under the confinement it is shipped with: exactly the capabilities
the systemd unit (packaging/codeinterpd.service, CapabilityBoundingSet=) and the
Kubernetes manifests (packaging/kubernetes/*.yaml: drop ALL, add SETUID, SETGID,
SETPCAP) give it, with no_new_privs, as root. Calls with a source and an artifact run,
a file the code made unreadable comes back, and the socket gets its group, in both
start modes. (The unit itself, unmodified, under a booted systemd is
scripts/nspawn-check.sh; the pod spec under podman is scripts/pod-check.sh.)"""
import grp
import os
import re
import shutil
import socket
import subprocess

import pytest

from testlib import DAEMON, ROOTLESS, WAIT_LIMIT, WORKER_START, Supervisor, proc, require_sandbox
from testlib.confinement import confined, manifest_capabilities, unit_capabilities
from testlib.waits import check_mount_namespace_held, check_pool_and_call_priority

# The supervisor's own code without the capabilities it would otherwise use (asan), in
# both start modes (start_mode).
pytestmark = [pytest.mark.skipif(ROOTLESS, reason="capability sets of a root supervisor"),
              pytest.mark.start_mode, pytest.mark.asan]


CODE = """import os
text = open(input_files["data"]).read()
open('/outputs/locked.txt', 'w').write(text.upper())
os.chmod('/outputs/locked.txt', 0)
len(text)"""


@pytest.mark.parametrize("where", ["unit", "manifests"])
def test_calls_run_with_the_shipped_capabilities(where):
    require_sandbox()
    caps = unit_capabilities() if where == "unit" else manifest_capabilities()
    group = grp.getgrnam("nogroup").gr_gid
    s = Supervisor("socketGroup: %d\nallowedUids: [0]\n" % group, prefix=confined(caps))
    try:
        status = proc.status(s.proc.pid)
        assert int(status["NoNewPrivs"]) == 1
        # Exactly these capabilities, nothing else (CapEff is a hex mask).
        assert bin(int(status["CapEff"], 16)).count("1") == len(caps), (caps, status["CapEff"])
        st = os.stat(s.socket)
        assert (st.st_gid, st.st_mode & 0o777) == (group, 0o660)
        c = s.connect()
        inv = c.call("invocation.open")["invocation"]
        r = c.call("source.put", invocation=inv, sourceId="data", kind="read_source", text="four")
        assert r["type"] == "reply", r
        r = c.execute(CODE, source_ids=["data"], invocation=inv)
        assert r["outcome"] == "ok" and r["result"]["text"] == "4", r
        assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("locked.txt", b"FOUR")], r
    finally:
        assert s.stop() == 0, s.read_log()


@pytest.mark.parametrize("where", ["unit", "manifests"])
def test_the_worker_mount_namespace_is_held_with_the_shipped_capabilities(where):
    """The hold on a worker's mount namespace (test_core.py) needs ptrace read access to
    the worker, which a supervisor without CAP_SYS_PTRACE has only before the worker takes
    its own uid (zygote mode: the zygote opens it right after the clone) or once it runs
    its own executable (exec mode). The supervisor here is also no longer dumpable: the
    self-check read /outputs back as its owner (setfsuid), as every supervisor does."""
    require_sandbox()
    caps = unit_capabilities() if where == "unit" else manifest_capabilities()
    s = Supervisor("", prefix=confined(caps))
    try:
        c = s.connect()
        check_mount_namespace_held(s, c)
        c.close()
    finally:
        assert s.stop() == 0, s.read_log()


@pytest.mark.skipif(WORKER_START != "zygote", reason="the pool is zygote mode's")
@pytest.mark.parametrize("sys_nice", [False, True])
def test_a_call_runs_at_the_supervisor_priority_with_the_shipped_capabilities(sys_nice):
    """Pre-started workers prepare 10 nicer than the supervisor only where it can set
    the one that takes a call back to its own priority: raising a priority needs
    CAP_SYS_NICE, which the unit does not give (here: added, to see the restore under
    no_new_privs), or an RLIMIT_NICE that reaches it, which the unit's LimitNICE=+0
    gives (the rule: test_caps.c; raising the hard limit takes CAP_SYS_RESOURCE, which
    this host's root lacks). Without either they keep the supervisor's priority, so
    that no call runs at the lower one, as every call under the unit did before."""
    require_sandbox()
    s = Supervisor("", prefix=confined(unit_capabilities() + (["sys_nice"] if sys_nice else [])))
    try:
        c = s.connect()
        check_pool_and_call_priority(s, c, niced=sys_nice)
        c.close()
    finally:
        assert s.stop() == 0, s.read_log()


def run_daemon(args, prefix=(), timeout=WAIT_LIMIT):
    return subprocess.run(list(prefix) + [DAEMON] + list(args), capture_output=True, text=True, timeout=timeout)


def test_check_config_runs_a_worker_through_the_call_path(tmp_path):
    """--check-config ends with the self-check: one worker through the path a call
    takes, its value and its /outputs file back; exit 0."""
    require_sandbox()
    policy = tmp_path / "policy.yaml"
    policy.write_text("workerStart: %s\n" % WORKER_START)
    r = run_daemon(["--check-config", "--policy", str(policy)])
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"self-check: a worker ran 6 \* 7 = 42 in \d+ ms, and the file it left in /outputs came "
                        r"back", last), r.stdout


def test_a_host_where_calls_would_fail_is_refused(tmp_path):
    """Confinement that lets the supervisor start but not make a worker (no CAP_SETGID:
    the id maps cannot be written; exec mode, whose supervisor writes them): before,
    it listened and said READY=1 while every call failed. Now --check-config exits 1
    naming the step and errno, and the daemon, socket-activated, never says READY=1:
    it logs why and exits 1."""
    require_sandbox()
    policy = tmp_path / "policy.yaml"
    policy.write_text("workerStart: exec\n")
    broken = confined(["setuid", "setpcap", "sys_admin"])
    want = "could not start a worker: writing its id maps: Operation not permitted"
    r = run_daemon(["--check-config", "--policy", str(policy)], prefix=broken)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "self-check: FAILED: worker_error: " + want, r.stdout

    path, notify_path = str(tmp_path / "ci.sock"), str(tmp_path / "notify")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)

    def as_systemd_would():
        os.dup2(listener.fileno(), 3)
        os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()), NOTIFY_SOCKET=notify_path)

    try:
        p = subprocess.run(broken + [DAEMON, "--policy", str(policy)], preexec_fn=as_systemd_would, pass_fds=(3,),
                           capture_output=True, text=True, timeout=WAIT_LIMIT)
        assert p.returncode == 1, p.stderr
        assert "A call would fail here, so codeinterpd does not serve: worker_error: " + want in p.stderr, p.stderr
        notify.setblocking(False)
        said = []
        while True:
            try:
                said.append(notify.recv(4096).decode())
            except BlockingIOError:
                break
        assert not any("READY=1" in m.split("\n") for m in said), said
    finally:
        listener.close()
        notify.close()


def test_check_policy_validates_as_a_reload_would(tmp_path):
    """--check-policy (the unit's first ExecReload=): a valid file prints the sha256 the
    supervisor reports for it, exit 0; an invalid one names the key, exit 2."""
    s = Supervisor("timeoutMs: 3000\n")
    try:
        r = run_daemon(["--policy", s.policy_path, "--check-policy"])
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[-1] == s.connect().call("hello")["policy"]["sha256"], r.stdout
    finally:
        assert s.stop() == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("timeoutMs: 3000\nmaxCalls: -5\n")
    r = run_daemon(["--policy", str(bad), "--check-policy"])
    assert r.returncode == 2 and "maxCalls" in r.stderr, (r.returncode, r.stderr)


DENY_HOSTNAME_C = r"""
#include <errno.h>
#include <seccomp.h>
#include <unistd.h>
/* What a container engine's default profile does to codeinterpd (podman's refuses
 * sethostname without CAP_SYS_ADMIN): a filter around it, then exec. */
int main(int argc, char **argv) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sethostname), 0) < 0 ||
            seccomp_load(ctx) < 0)
                return 125;
        execv(argv[1], argv + 1);
        return 126;
}
"""


def test_a_seccomp_profile_around_it_is_named(tmp_path):
    """Under a seccomp filter that refuses what the sandbox needs (sethostname, as
    podman's default profile does), the self-check names the stage, says codeinterpd
    runs under a seccomp filter, and names the remedy (the shipped Localhost profile,
    or unconfined); the daemon does not serve."""
    require_sandbox()
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    src, wrapper = tmp_path / "deny.c", str(tmp_path / "deny")
    src.write_text(DENY_HOSTNAME_C)
    subprocess.run([cc, "-o", wrapper, str(src), "-lseccomp"], check=True)
    policy = tmp_path / "policy.yaml"
    policy.write_text("workerStart: %s\n" % WORKER_START)
    r = subprocess.run([wrapper, DAEMON, "--check-config", "--policy", str(policy)], capture_output=True, text=True,
                       timeout=60)
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 1, r.stdout + r.stderr
    assert last.startswith("self-check: FAILED: ") and "hostname" in last, last
    assert "runs under a seccomp filter" in last and "seccomp-codeinterpd.json" in last, last
    r = subprocess.run([wrapper, DAEMON, "--policy", str(policy), "--socket", str(tmp_path / "ci.sock")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "runs under a seccomp filter" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "ci.sock")
