"""The host's cgroups as the tests see them: which hierarchy a supervisor would use, a
process's cgroup directories, a supervisor's worker cgroups (w<pid>-<n>), and pids
cgroups the fault suite makes to track and limit a supervisor's processes."""
import errno
import os
import random

import pytest

from . import proc
from .env import MUST_SANDBOX
from .supervisor import require_sandbox

FS = "/sys/fs/cgroup"


def _own_lines(pid="self"):
    try:
        with open("/proc/%s/cgroup" % pid) as f:
            return [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return []


def _v2_mount():
    return FS if os.path.exists(os.path.join(FS, "cgroup.controllers")) else os.path.join(FS, "unified")


def _host_version():
    """The version cgroups: auto would pick here: "v2", "v1" or None."""
    lines = _own_lines()
    for n, ctrls, path in lines:
        if n == "0" and ctrls == "":
            try:
                with open(os.path.join(_v2_mount(), path.lstrip("/"), "cgroup.controllers")) as c:
                    have = c.read().split()
                if "memory" in have and "pids" in have:
                    return "v2"
            except OSError:
                pass
    ctrls = {c for _, cs, _ in lines for c in cs.split(",")}
    if "memory" in ctrls and "pids" in ctrls and os.path.isdir(os.path.join(FS, "memory")):
        return "v1"
    return None


VERSION = _host_version()


def need_cgroups():
    """Skip (fail under CODEINTERP_MUST_SANDBOX=1) without a usable hierarchy."""
    require_sandbox()
    if VERSION is None:
        if MUST_SANDBOX:
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but no cgroup hierarchy with memory and pids")
        pytest.skip("no cgroup hierarchy with the memory and pids controllers")


def has_cpu_controller():
    if VERSION == "v2":
        return True  # checked by the supervisor: refused if missing
    return any("cpu" in cs.split(",") for _, cs, _ in _own_lines()) and os.path.isdir(os.path.join(FS, "cpu"))


def dirs_of(pid, cpu=False):
    """{"memory": dir, "pids": dir} (and "cpu" with cpu) of a process, as seen from the host."""
    lines = _own_lines(pid)
    if VERSION == "v2":
        path = [p for n, c, p in lines if n == "0" and c == ""][0]
        d = os.path.join(_v2_mount(), path.lstrip("/"))
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


def _hierarchies():
    """{frozenset of v1 controllers (or {"" } for v2): mount point}, from our mountinfo."""
    out = {}
    for line in proc.mountinfo():
        parts = line.split()
        sep = parts.index("-")
        fstype, opts, mnt = parts[sep + 1], parts[sep + 3], parts[4]
        if fstype == "cgroup2":
            out.setdefault(frozenset([""]), mnt)
        elif fstype == "cgroup":
            out.setdefault(frozenset(o for o in opts.split(",") if o not in ("rw", "ro") and "=" not in o), mnt)
    return out


def worker_parents(sup_pid):
    """The supervisor's own subtrees, where it makes its workers' cgroups: the
    "ci-<instance>" directory under each hierarchy's workers' parent (v1: under its
    "codeinterp" directory), which the supervisor keeps open (and flock'ed) while it
    runs; found among its open descriptors. Read while it runs: after it has exited,
    worker_cgroups() looks there."""
    mounts = set(_hierarchies().values())
    out = []
    fd_dir = "/proc/%d/fd" % sup_pid
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if (os.path.basename(target).startswith("ci-") and any(target.startswith(m + "/") for m in mounts)
                and target not in out):
            out.append(target)
    return sorted(out)


def owned_by(sup_pid, d):
    """Whether cgroup d is a worker cgroup of supervisor sup_pid (in one of its own
    subtrees)."""
    return os.path.dirname(d) in worker_parents(sup_pid) and os.path.basename(d).startswith("w")


def worker_cgroups(sup_pid, parents=None):
    """Worker cgroups of this supervisor (named w<n> in its own subtrees) that exist
    now, under parents (worker_parents(sup_pid) by default)."""
    left = []
    for parent in worker_parents(sup_pid) if parents is None else parents:
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        left += [os.path.join(parent, d) for d in names if d.startswith("w")]
    return left


def procs(d):
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


def pids_hierarchy():
    """("v1", mount point) for a cgroup v1 hierarchy with the pids controller, ("v2",
    mount point) for a cgroup2 mount offering it, or None."""
    v2 = None
    for line in proc.mountinfo():
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
    for _, ctrls, path in _own_lines():
        if version == "v1" and "pids" in ctrls.split(","):
            return path
        if version == "v2" and ctrls == "":
            return path
    return "/"


TRACKING_PREFIX = "codeinterp-test-%d-" % os.getpid()


class PidsCgroup:
    """A pids cgroup of our own: tracks every process a supervisor starts (children
    inherit their creator's cgroup), and limits them when pids.max is set."""

    def __init__(self):
        found = pids_hierarchy()
        if found is None:
            raise FileNotFoundError("no cgroup hierarchy with the pids controller")
        self.version, self.mnt = found
        self.home = os.path.join(self.mnt, _own_cgroup(self.version).lstrip("/"))
        if self.version == "v2":
            with open(os.path.join(self.mnt, "cgroup.subtree_control"), "w") as f:
                f.write("+pids")
        self.path = os.path.join(self.mnt, TRACKING_PREFIX + "%06x" % random.getrandbits(24))
        os.mkdir(self.path)

    def _write(self, name, value, path=None):
        with open(os.path.join(path or self.path, name), "w") as f:
            f.write(str(value))

    def add(self, pid):
        self._write("cgroup.procs", pid)

    def procs(self):
        return procs(self.path) or []

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
        """Kill whatever is left (only processes of the supervisor this cgroup tracked),
        wait for each to end, then remove the cgroup."""
        if not os.path.isdir(self.path):
            return
        try:
            self.unlimit()
        except OSError:
            pass
        from .waits import wait_for
        for pid in self.procs():
            if pid == os.getpid():  # the test itself, still joined
                self._write("cgroup.procs", pid, self.home)
                continue
            proc.kill_quietly(pid)
            proc.wait_exit(pid)
        # An exited process leaves cgroup.procs once its parent has reaped it.
        wait_for(lambda: not self.procs(), "the tracking cgroup %s to empty" % self.path)

        def removed():
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                pass
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                return False
            return True

        wait_for(removed, "rmdir %s (EBUSY: not yet released by the kernel)" % self.path)


def new_pids_cgroup():
    """A PidsCgroup, or None where the host has no pids controller (a failure under
    CODEINTERP_MUST_SANDBOX=1)."""
    try:
        return PidsCgroup()
    except (FileNotFoundError, PermissionError) as e:
        if MUST_SANDBOX:
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but no pids cgroup can be made: %s" % e)
        return None


def tracking_cgroups_left():
    """The pids cgroups this process made and has not removed."""
    found = pids_hierarchy()
    if found is None:
        return []
    return [os.path.join(found[1], d) for d in os.listdir(found[1]) if d.startswith(TRACKING_PREFIX)]
