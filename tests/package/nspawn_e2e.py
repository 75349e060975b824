"""The packages and units under a booted systemd (scripts/nspawn-check.sh): run by
tests/package/nspawn-e2e.sh inside the container, after apt installed the packages.
Every step drives the units as shipped, unmodified, through systemctl and the socket
that systemd owns; the only file changed is the policy, as an operator changes it.
Each wait observes something (a unit property, a progress frame, a process), with a
deadline that only bounds a failure. A failed step writes its reason to /e2e/failure
and exits 1."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from codeinterp import Client, Cancelled, ConnectionLost

SOCKET = "/run/codeinterp/codeinterp.sock"
POLICY = "/etc/codeinterp/policy.yaml"
UNIT = "codeinterpd.service"
NORTHSTAR = """measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours"""
T0 = time.monotonic()


class Failed(Exception):
    pass


def log(msg):
    print("e2e: [%5.1f s] %s" % (time.monotonic() - T0, msg), flush=True)


def check(cond, msg):
    if not cond:
        raise Failed(msg)


def run(*args, ok=True, timeout=300, **kw):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if ok and p.returncode != 0:
        raise Failed("%s exited %d: %s%s" % (" ".join(args), p.returncode, p.stdout[-1500:], p.stderr[-1500:]))
    return p


def prop(name, unit=UNIT):
    return run("systemctl", "show", "-p", name, "--value", unit).stdout.strip()


def wait_for(what, fn, deadline=120.0, every=0.2):
    """fn() until it returns something true; the deadline only bounds a failure."""
    end = time.monotonic() + deadline
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise Failed("waited %.0f s for %s" % (deadline, what))
        time.sleep(every)


def hello():
    with Client(SOCKET, timeout=60) as c:
        return c.hello()


def procs(prefixes=("codeinterp", "ci-")):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm.startswith(prefixes):
                out.append((int(d), comm))
    return out


def cgroup_dirs():
    """The service's cgroups and anything below them (workers' cgroups), in the
    hierarchies this container's systemd manages (unified and name=systemd; here the
    v1 controller hierarchies are the host's, read-only, and hold other supervisors')."""
    found = []
    for base in ("/sys/fs/cgroup/unified/system.slice", "/sys/fs/cgroup/systemd/system.slice",
                 "/sys/fs/cgroup/system.slice"):
        if os.path.isdir(base):
            found += [os.path.join(base, d) for d in os.listdir(base) if d.startswith("codeinterpd")]
    return found


def with_keys(text, **keys):
    """The policy text with each key's top-level line replaced (keys are written as the
    policy names them, e.g. timeoutMs=3000)."""
    for key, value in keys.items():
        text, n = re.subn(r"(?m)^%s:.*$" % re.escape(key), "%s: %s" % (key, value), text)
        check(n == 1, "the installed policy has %d lines for %s" % (n, key))
    return text


def set_policy(text):
    with open(POLICY + ".new", "w") as f:
        f.write(text)
    os.rename(POLICY + ".new", POLICY)


# ---- the steps ----

INSTALLED = ("/usr/sbin/codeinterpd", "/usr/bin/codeinterp", "/usr/libexec/codeinterp/codeinterp-worker",
             "/etc/codeinterp/policy.yaml", "/etc/codeinterp/policy-data.yaml", "/lib/systemd/system/codeinterpd.socket",
             "/lib/systemd/system/codeinterpd.service", "/usr/lib/systemd/user/codeinterpd.socket",
             "/usr/lib/systemd/user/codeinterpd.service", "/usr/share/man/man8/codeinterpd.8.gz",
             "/usr/share/man/man1/codeinterp.1.gz", "/usr/lib/x86_64-linux-gnu/libcodeinterp.so.0",
             "/usr/include/codeinterp/libcodeinterp.h")


def step_files_as_installed():
    missing = [p for p in INSTALLED if not os.path.exists(p)]
    check(not missing, "not installed: %r" % missing)
    conffiles = run("dpkg-query", "--control-show", "codeinterp", "conffiles").stdout.split()
    check("/etc/codeinterp/policy.yaml" in conffiles, "policy.yaml is not a conffile: %r" % conffiles)
    wants = [f for d in os.listdir("/etc/systemd/system") if d.endswith(".wants")
             for f in os.listdir("/etc/systemd/system/" + d) if f.startswith("codeinterpd")]
    check(wants == ["codeinterpd.socket"], "enabled units: %r (only the socket should be)" % wants)
    check(not os.path.exists("/etc/systemd/user") or not any(
        f.startswith("codeinterpd") for d in os.listdir("/etc/systemd/user") if d.endswith(".wants")
        for f in os.listdir("/etc/systemd/user/" + d)), "a user unit is enabled for every user")
    run("pkg-config", "--cflags", "--libs", "codeinterp")
    os.makedirs("/tmp/xdg", mode=0o700, exist_ok=True)
    r = run("systemd-analyze", "--user", "verify", "/usr/lib/systemd/user/codeinterpd.socket",
            "/usr/lib/systemd/user/codeinterpd.service", ok=False, env=dict(os.environ, XDG_RUNTIME_DIR="/tmp/xdg"))
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(), "systemd-analyze --user verify: " + r.stdout +
          r.stderr)
    log("files, conffile, pkg-config, enabled units (the socket only) and the user units as installed")


def step_rootless():
    """The installed supervisor started by an ordinary user (nobody) on a socket of its
    own, as the user units would: rootless, and serving."""
    d = "/tmp/rootless"
    os.makedirs(d, exist_ok=True)
    shutil.chown(d, "nobody", "nogroup")
    sock = d + "/codeinterp.sock"
    err = open("/tmp/rootless.log", "w")
    p = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/sbin/codeinterpd",
                          "--socket", sock], stderr=err)
    try:
        wait_for("the rootless supervisor's socket", lambda: os.path.exists(sock) or p.poll() is not None, 60)
        if p.poll() is not None:
            with open("/tmp/rootless.log") as f:
                raise Failed("the rootless codeinterpd exited: " + f.read())
        r = run("codeinterp", "--socket", sock, "exec", "-c", NORTHSTAR)
        check(r.stdout.strip() == "8.25", "rootless Northstar printed %r" % r.stdout)
        with Client(sock, timeout=60) as c:
            check(c.hello().rootless is True, "hello does not say rootless")
    finally:
        p.terminate()
        rc = p.wait(30)
        err.close()
    check(rc == 0, "the rootless codeinterpd exited %d on SIGTERM" % rc)
    log("rootless: the installed codeinterpd run by nobody printed 8.25, said rootless, exited 0")


def step_units_as_installed():
    check(prop("UnitFileState", "codeinterpd.socket") == "enabled", "the socket unit is not enabled")
    check(prop("ActiveState", "codeinterpd.socket") == "active", "the socket unit is not listening")
    check(prop("ActiveState") == "inactive", "the service runs before any connection")
    r = run("systemd-analyze", "verify", "/lib/systemd/system/codeinterpd.socket", "/lib/systemd/system/" + UNIT,
            ok=False)
    check(r.returncode == 0 and not (r.stdout + r.stderr).strip(), "systemd-analyze verify: " + r.stdout + r.stderr)
    out = run("systemd-analyze", "security", "--no-pager", UNIT).stdout
    m = re.search(r"Overall exposure level for %s: ([0-9.]+)" % re.escape(UNIT), out)
    check(m is not None, "no exposure level in: " + out[-500:])
    log("systemd-analyze security %s: exposure %s" % (UNIT, m.group(1)))
    check(float(m.group(1)) <= 3.3, "exposure %s is above 3.3" % m.group(1))


def step_northstar():
    r = run("codeinterp", "exec", "--summary", "Northstar mean runtime", "-c", NORTHSTAR)
    check(r.stdout.strip() == "8.25", "Northstar printed %r" % r.stdout)
    check(prop("ActiveState") == "active", "the service did not start on the first connection")
    h = hello()
    log("Northstar 8.25; socket activation started the service (pid %s, version %s, cgroup %s, %s start)" % (
        prop("MainPID"), h.version, h.cgroup, h.policy.worker_start))
    return h


def step_source_and_artifact(label):
    data = "run,hours\n1,9.0\n2,7.5\n"
    with open("/tmp/runtimes.csv", "w") as f:
        f.write(data)
    shutil.rmtree("/tmp/artifacts", ignore_errors=True)
    os.mkdir("/tmp/artifacts")
    code = ("import csv, os\nrows = list(csv.DictReader(open(input_files['runtimes'])))\n"
            "open('/outputs/hours.txt', 'w').write(' '.join(r['hours'] for r in rows))\n"
            "os.chmod('/outputs/hours.txt', 0)\nsum(float(r['hours']) for r in rows) / len(rows)")
    r = run("codeinterp", "exec", "--source", "runtimes=/tmp/runtimes.csv", "--save-artifacts", "/tmp/artifacts",
            "--summary", "source and artifact", "-c", code)
    check(r.stdout.strip() == "8.25", "the call with a source printed %r (stderr %r)" % (r.stdout, r.stderr))
    with open("/tmp/artifacts/hours.txt") as f:
        saved = f.read()
    check(saved == "9.0 7.5", "the artifact holds %r" % saved)
    log("%s: a source mounted, an artifact (mode 0 in the worker) saved back" % label)


def step_journal():
    """The supervisor writes journald's native protocol itself (common/log.c): under
    systemd its entries reach the journal whole, with the call's fields."""
    def finished():
        out = run("journalctl", "--no-pager", "-o", "json", "-u", UNIT, ok=False).stdout
        entries = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return [e for e in entries if e.get("CALL_ID") and e.get("SYSLOG_IDENTIFIER") == "codeinterpd"]
    calls = wait_for("a call's entry in the journal", finished)
    e = calls[-1]
    check(e.get("OUTCOME") == "ok" and str(e.get("MESSAGE", "")).startswith("call %s finished: ok" % e["CALL_ID"])
          and e.get("PRIORITY") == "6" and e.get("ELAPSED_MS", "").isdigit() and e.get("PEER_UID") == "0"
          and e.get("CODE_FILE", "").endswith("server_requests.c"), "the journal entry: %r" % e)
    log("journal: %d call entries from codeinterpd with CALL_ID, OUTCOME, ELAPSED_MS, PEER_UID (last: %s)" % (
        len(calls), e["MESSAGE"]))


def step_core_tests():
    """The integration suite's core against the installed socket: the tests' module
    supervisor is systemd's (CODEINTERP_TEST_SOCKET, tests/integration/conftest.py)."""
    facts = run("codeinterpd", "--check-config").stdout
    ver, exe = re.search(r"embedded python: (\S+), from (\S+)", facts).groups()
    m = re.search(r"prefix (\S+), stdlib (\S+), lib-dynload (\S+), libpython in (\S+)", facts)
    runtime = re.findall(r"^    (/\S+): present", facts, re.M)
    check(m and runtime, "codeinterpd --check-config did not describe its Python: " + facts[-800:])
    os.makedirs("/tmp/installed/bin", exist_ok=True)
    for b in ("/usr/sbin/codeinterpd", "/usr/bin/codeinterp", "/usr/libexec/codeinterp/codeinterp-worker"):
        dst = "/tmp/installed/bin/" + os.path.basename(b)
        if not os.path.lexists(dst):
            os.symlink(b, dst)
    with open("/tmp/installed/python.json", "w") as f:
        json.dump({"interpreter": exe, "version": ver, "prefix": m[1], "stdlib": m[2], "dynload": m[3],
                   "libdir": m[4], "executable": exe, "runtime": runtime, "hidden": []}, f)
    env = dict(os.environ, CODEINTERP_BUILD="/tmp/installed", CODEINTERP_TEST_SOCKET=SOCKET,
               CODEINTERP_MUST_SANDBOX="1")
    r = run("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/integration/test_core.py",
            "tests/integration/test_numeric.py", cwd="/e2e", env=env, ok=False, timeout=600)
    tail = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]
    check(r.returncode == 0, "the core integration tests against the installed socket: " + r.stdout[-3000:])
    log("core integration tests against %s: %s" % (SOCKET, tail))


def step_reload(original):
    pid = prop("MainPID")
    old = hello().policy.sha256
    changed = with_keys(original, timeoutMs=3000)
    set_policy(changed)
    want = run("codeinterpd", "--policy", POLICY, "--check-policy").stdout.split()[-1]
    run("systemctl", "reload", UNIT)
    h = hello()
    check(h.policy.sha256 == want and want != old, "after reload hello says %s, the file is %s (was %s)" % (
        h.policy.sha256, want, old))
    check(h.limits.timeout_ms == 3000, "timeoutMs after reload: %r" % h.limits.timeout_ms)
    check(prop("MainPID") == pid, "reload restarted the service")
    log("reload with a changed policy: hello says sha256 %.12s (was %.12s), same pid" % (want, old))

    set_policy(with_keys(changed, maxCalls=-5))
    r = run("systemctl", "reload", UNIT, ok=False)
    failed = r.returncode
    check(failed != 0, "systemctl reload with an invalid policy succeeded")
    check(hello().policy.sha256 == want, "an invalid policy replaced the running one")
    check(prop("ActiveState") == "active" and prop("MainPID") == pid, "an invalid policy stopped the service")
    r = run("codeinterp", "exec", "-c", "6 * 7")
    check(r.stdout.strip() == "42", "a call after the failed reload printed %r" % r.stdout)
    log("reload with an invalid policy: systemctl reload failed (exit %d), the old policy serves" % failed)
    set_policy(changed)
    run("systemctl", "reload", UNIT)


def step_timeout():
    t = time.monotonic()
    r = run("codeinterp", "exec", "--json", "-c", "import time\ntime.sleep(60)", ok=False)
    res = json.loads(r.stdout)
    check(res.get("outcome") == "timeout" and r.returncode == 3, "a sleeping call ended %r (exit %d)" % (
        res.get("outcome"), r.returncode))
    elapsed = time.monotonic() - t
    check(elapsed < 20, "the 3 s deadline took %.1f s" % elapsed)
    log("timeout: a call sleeping 60 s ended as timeout after %.1f s (timeoutMs 3000), partial %s" % (
        elapsed, res.get("partial")))


def step_exec_mode(original):
    set_policy(with_keys(original, workerStart="exec"))
    run("systemctl", "restart", UNIT)
    check(hello().policy.worker_start == "exec", "workerStart did not become exec")
    step_source_and_artifact("exec start")
    set_policy(original)
    run("systemctl", "restart", UNIT)
    check(hello().policy.worker_start == "zygote", "workerStart did not go back to zygote")
    step_source_and_artifact("zygote start")


def step_watchdog():
    pid = int(prop("MainPID"))
    restarts = int(prop("NRestarts"))
    wd = prop("WatchdogUSec")
    os.kill(pid, 19)  # SIGSTOP: the loop stops sending WATCHDOG=1
    t = time.monotonic()
    wait_for("the watchdog to restart codeinterpd",
             lambda: int(prop("NRestarts")) > restarts and prop("ActiveState") == "active"
             and int(prop("MainPID") or 0) not in (0, pid), deadline=150)
    check(not os.path.exists("/proc/%d" % pid), "the stopped codeinterpd %d is still there" % pid)
    r = run("codeinterp", "exec", "-c", "6 * 7")
    check(r.stdout.strip() == "42", "a call after the watchdog restart printed %r" % r.stdout)
    log("watchdog (WatchdogUSec %s): the SIGSTOPped codeinterpd %d was replaced by %s after %.0f s; calls work" % (
        wd, pid, prop("MainPID"), time.monotonic() - t))


def step_stop_with_a_call_running():
    started = threading.Event()
    box = {}

    def call():
        try:
            with Client(SOCKET, timeout=120) as c:
                box["r"] = c.execute("import time\ntime.sleep(100)", "sleeper",
                                     on_progress=lambda p: p.phase == "running" and started.set())
        except Exception as e:  # reported below
            box["e"] = e

    th = threading.Thread(target=call)
    th.start()
    if not started.wait(60):
        raise Failed("the sleeping call never reported running: %r" % box)
    run("systemctl", "stop", UNIT)
    th.join(60)
    check("r" in box and box["r"].outcome == "cancelled", "the call in flight ended %r" % box)
    check(prop("Result") == "success" and prop("ExecMainStatus") == "0",
          "stop: Result=%s ExecMainStatus=%s" % (prop("Result"), prop("ExecMainStatus")))
    check(prop("ActiveState", "codeinterpd.socket") == "active", "the socket stopped with the service")
    left = procs()
    check(not left, "processes left after systemctl stop: %r" % left)
    cg = [d for d in cgroup_dirs() if "codeinterpd.service" in d]
    check(not cg, "cgroups left after systemctl stop: %r" % cg)
    log("stop with a call running: it ended cancelled (%s); service Result=success, no process, no cgroup left" %
        box["r"].detail)


def step_upgrade(new_debs):
    before = hello()
    old_pid = int(prop("MainPID"))
    want = run("dpkg-deb", "-f", [p for p in new_debs if "/codeinterp_" in p][0], "Version").stdout.strip()
    stop = threading.Event()
    stats = {"ok": 0, "cancelled": 0, "connect_failed": [], "lost": [], "other": [], "versions": set()}

    def loop():
        while not stop.is_set():
            try:
                c = Client(SOCKET, timeout=120)
            except OSError as e:
                stats["connect_failed"].append(repr(e))
                continue
            try:
                r = c.execute("6 * 7", "upgrade loop")
                if r.outcome == "ok" and r.result.text == "42":
                    stats["ok"] += 1
                elif r.outcome == "cancelled":
                    stats["cancelled"] += 1
                else:
                    stats["other"].append((r.outcome, r.detail))
            except Cancelled:
                stats["cancelled"] += 1
            except ConnectionLost as e:
                stats["lost"].append("%.3f %r" % (time.monotonic() - T0, e))
            except Exception as e:  # anything else is a failure too
                stats["other"].append("%.3f %r" % (time.monotonic() - T0, e))
            finally:
                c.close()

    th = threading.Thread(target=loop)
    th.start()
    wait_for("the client loop's first call", lambda: stats["ok"] > 0, deadline=60)
    t = time.monotonic()
    r = run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *new_debs, ok=False, timeout=600,
            env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    apt_s = time.monotonic() - t
    n_at_upgrade = stats["ok"]
    try:
        check(r.returncode == 0, "apt-get install of the upgrade: " + r.stdout[-1500:] + r.stderr[-1500:])
        wait_for("a call served by the new binary", lambda: hello().version == want, deadline=60)
        wait_for("more calls after the upgrade", lambda: stats["ok"] >= n_at_upgrade + 20, deadline=60)
    finally:
        stop.set()
        th.join(180)
    new_pid = int(prop("MainPID"))
    exe = os.readlink("/proc/%d/exe" % new_pid)
    log("upgrade %s -> %s in %.1f s with a client loop running: %d ok, %d cancelled, %d failed connects, "
        "%d lost connections, other %r; pid %d -> %d (%s)" % (
            before.version, want, apt_s, stats["ok"], stats["cancelled"], len(stats["connect_failed"]),
            len(stats["lost"]), stats["other"], old_pid, new_pid, exe))
    check(not stats["connect_failed"], "failed connects during the upgrade: %r" % stats["connect_failed"][:5])
    if stats["lost"] or stats["other"]:
        print(run("journalctl", "--no-pager", "-o", "short-monotonic", "-u", UNIT, ok=False).stdout[-6000:])
    check(not stats["lost"] and not stats["other"], "calls failed during the upgrade: %r %r" % (
        stats["lost"][:5], stats["other"][:5]))
    check(prop("ActiveState", "codeinterpd.socket") == "active", "the socket is not listening after the upgrade")
    check(new_pid != old_pid and exe == "/usr/sbin/codeinterpd", "the new binary does not serve: pid %d, exe %s" % (
        new_pid, exe))


def step_purge():
    run("apt-get", "purge", "-y", "-qq", "codeinterp", "libcodeinterp0", "libcodeinterp-dev", "python3-codeinterp",
        env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    run("apt-get", "autoremove", "--purge", "-y", "-qq", env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    left = procs()
    check(not left, "processes left after the purge: %r" % left)
    units = run("systemctl", "list-units", "--all", "--no-legend", "codeinterpd*").stdout.strip()
    check(not units, "units left after the purge: " + units)
    files = run("systemctl", "list-unit-files", "--no-legend", "codeinterpd*", ok=False).stdout.strip()
    check(not files, "unit files left after the purge: " + files)
    for p in ("/etc/codeinterp", "/run/codeinterp", "/usr/sbin/codeinterpd", "/usr/libexec/codeinterp",
              "/lib/systemd/system/codeinterpd.service", "/usr/lib/systemd/user/codeinterpd.service"):
        check(not os.path.exists(p), "%s is left after the purge" % p)
    check(not cgroup_dirs(), "cgroups left after the purge: %r" % cgroup_dirs())
    check(run("getent", "passwd", "codeinterp", ok=False).returncode != 0, "a codeinterp user is left")
    left = [f for f in run("find", "/usr", "/etc", "/lib", "/var/lib/systemd", "/var/lib/dpkg/info", "/run", "-name",
                           "*codeinterp*", ok=False).stdout.split() if "codeinterp-e2e" not in f]  # this check's unit
    check(not left, "files left after the purge: %r" % left)
    with open("/e2e/packages-before") as f:
        before = set(f.read().split())
    after = set(run("dpkg-query", "-W", "-f=${Package}\n").stdout.split())
    check(after <= before, "packages left after purge and autoremove: %r" % sorted(after - before))
    log("purge: no unit, file, directory, cgroup, user, package or process left")


def main():
    with open(POLICY) as f:
        original = f.read()
    step_files_as_installed()
    step_units_as_installed()
    h = step_northstar()
    old_version = h.version
    step_source_and_artifact("socket-activated service")
    step_journal()
    step_core_tests()
    step_reload(original)
    step_timeout()
    step_watchdog()
    step_stop_with_a_call_running()
    step_exec_mode(original)
    step_rootless()
    new_debs = sorted("/e2e/upgrade/" + f for f in os.listdir("/e2e/upgrade") if f.endswith(".deb"))
    step_upgrade(new_debs)
    check(hello().version != old_version, "the version did not change with the upgrade")
    step_purge()


if __name__ == "__main__":
    try:
        main()
    except (Failed, AssertionError, subprocess.TimeoutExpired, OSError) as e:
        with open("/e2e/failure", "w") as f:
            f.write("%s: %s\n" % (type(e).__name__, " ".join(str(e).split())))
        log("FAILED: %s" % e)
        sys.exit(1)
