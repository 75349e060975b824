"""What the host's /proc says about a process: the one place the tests parse it.

Every function takes a host pid. Lookups of a process that is gone return None (or an
empty result) instead of raising, unless said otherwise: the tests look at workers and
zygotes that may end at any moment."""
import os
import select
import signal

from .env import WAIT_LIMIT


def _read(pid, name, mode="r"):
    try:
        with open("/proc/%s/%s" % (pid, name), mode) as f:
            return f.read()
    except OSError:
        return None


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command name: [0] state, [1] ppid, [11]
    utime, [12] stime, [16] nice, [19] starttime (proc(5) numbering minus 3). None when
    gone."""
    data = _read(pid, "stat")
    if data is None:
        return None
    return data.rsplit(")", 1)[1].split()


def name(pid):
    """The process's name (comm), or None."""
    data = _read(pid, "stat", "rb")
    if data is None:
        return None
    return data[data.index(b"(") + 1:data.rindex(b")")].decode(errors="replace")


def state(pid):
    """"R", "S", "Z", ... or None when gone."""
    f = stat_fields(pid)
    return f[0] if f else None


def alive(pid):
    """True while pid exists and is not a zombie."""
    return state(pid) not in (None, "Z")


def ppid(pid):
    f = stat_fields(pid)
    return int(f[1]) if f else None


def nice(pid):
    f = stat_fields(pid)
    return int(f[16]) if f else None


def starttime(pid):
    """The start time (clock ticks since boot): with the pid, what names a process."""
    f = stat_fields(pid)
    return f[19] if f else None


def cpu_seconds(pid):
    """utime + stime of pid (all its threads), in seconds."""
    f = stat_fields(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def parse_status(text):
    """The text of a /proc/PID/status (read here, or in a container) as {key: value
    text}."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key] = value.strip()
    return out


def status(pid):
    """/proc/PID/status as {key: value text}, or {} when gone."""
    return parse_status(_read(pid, "status"))


def ids(pid):
    """(real uid, real gid) of pid as the host sees them."""
    st = status(pid)
    return int(st["Uid"].split()[0]), int(st["Gid"].split()[0])


def threads(pid):
    st = status(pid)
    return int(st["Threads"]) if "Threads" in st else 0


def caps(pid):
    """{"CapInh": int, "CapPrm": int, "CapEff": int, "CapBnd": int, "CapAmb": int}."""
    return {k: int(v, 16) for k, v in status(pid).items() if k.startswith("Cap")}


def blocks(pid, sig):
    """True when pid's main thread has sig blocked (/proc/PID/status SigBlk)."""
    mask = status(pid).get("SigBlk")
    return mask is not None and bool(int(mask, 16) >> (int(sig) - 1) & 1)


def children(pid):
    """The children of every thread of pid."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for task in tasks:
        data = _read(pid, "task/%s/children" % task)
        out += [int(x) for x in (data or "").split()]
    return out


def descendants(pid):
    """{pid: start time} of every process below pid."""
    out, todo = {}, [pid]
    while todo:
        for k in children(todo.pop()):
            if k not in out:
                out[k] = starttime(k)
                todo.append(k)
    return out


def descends_from(pid, ancestor):
    """True if ancestor is pid's parent, grandparent, ..."""
    seen = set()
    while pid and pid not in seen:
        seen.add(pid)
        pid = ppid(pid)
        if pid == ancestor:
            return True
    return False


def all_pids():
    """Every process on the host (as this pid namespace sees it), now."""
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def pids_named(comm):
    """Live (non-zombie) processes whose name is comm, anywhere on the host."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and name(d) == comm and alive(d):
            out.append(int(d))
    return out


def pool_workers(sup_pid):
    """The zygote's pre-started workers (named ci-pool) of supervisor sup_pid: its
    children (the zygote clones them with CLONE_PARENT)."""
    return [p for p in children(sup_pid) if name(p) == "ci-pool"]


# x86_64's recvmsg: a pre-started worker blocks in it, for its call's descriptors, once
# its preparation and warm-up are done (worker/zygote.c, child_main).
SYS_RECVMSG = "47"


def pool_prepared(sup_pid):
    """Some pre-started worker of sup_pid, and every one done preparing: waiting for its
    call in recvmsg (/proc/PID/syscall)."""
    pids = pool_workers(sup_pid)
    try:
        return bool(pids) and all(_read(p, "syscall").split()[0] == SYS_RECVMSG for p in pids)
    except (AttributeError, OSError, IndexError):
        return False  # one went away, or is running: look again


def fd_targets(pid):
    """{fd: readlink target} of pid's descriptors."""
    out = {}
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return out
    for fd in fds:
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def mountinfo(pid="self"):
    """The lines of /proc/PID/mountinfo."""
    return (_read(pid, "mountinfo") or "").splitlines()


# Mount points other tools on a shared machine make in the host's mount namespace
# (podman, network namespaces, systemd-nspawn, user runtime directories): not ours.
FOREIGN_MOUNTS = ("/var/lib/containers/", "/run/containers/", "/run/netns/", "/var/lib/machines/",
                  "/run/systemd/", "/run/user/")


def host_mounts():
    """The set of mountinfo lines of this process's mount namespace (the host's),
    without those of FOREIGN_MOUNTS: what a supervisor must not add to."""
    out = set()
    for line in mountinfo():
        point = line.split()[4]
        if not (point + "/").startswith(FOREIGN_MOUNTS):
            out.add(line)
    return out


def mount_options(pid, mountpoint):
    """(fstype, {super option: value}) of the mount at mountpoint in pid's mount
    namespace, or None."""
    for line in mountinfo(pid):
        fields = line.split()
        if fields[4] == mountpoint:
            sep = fields.index("-")
            return fields[sep + 1], dict(o.partition("=")[::2] for o in fields[sep + 3].split(","))
    return None


def limits(pid, what):
    """(soft, hard) of a /proc/PID/limits line starting with what, e.g. "Max open files"."""
    for line in (_read(pid, "limits") or "").splitlines():
        if line.startswith(what):
            soft, hard = line[len(what):].split()[:2]
            return soft, hard
    raise AssertionError("no %r in /proc/%d/limits" % (what, pid))


def wait_exit(pid, timeout=WAIT_LIMIT):
    """Wait for pid to exit, on its pidfd (readable once the process has ended, reaped or
    not): the event itself, no polling. True once it has ended (or was gone already)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def written_pages(pid):
    """How many pages of pid's private writable mappings it alone maps (pagemap(5):
    present and exclusively mapped): right after a fork, none; so for a worker cloned
    from the zygote, the pages it has written (or had written ahead) since. None when
    gone."""
    maps = _read(pid, "maps")
    if maps is None:
        return None
    psz = os.sysconf("SC_PAGESIZE")
    n = 0
    try:
        with open("/proc/%s/pagemap" % pid, "rb") as f:
            for line in maps.splitlines():
                span, perms = line.split()[:2]
                if perms != "rw-p":
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                f.seek(start // psz * 8)
                data = f.read((end - start) // psz * 8)
                for i in range(0, len(data), 8):
                    e = int.from_bytes(data[i:i + 8], "little")
                    n += (e >> 63) & (e >> 56) & 1
    except OSError:
        return None
    return n
