"""What operators expect of the running service (docs/operations.md): the systemd
watchdog, reload on SIGHUP, the idle exit under socket activation, journal fields of
finished calls, and the status counters with their OpenMetrics rendering. All of it
is the supervisor's own code (asan).

Time: the watchdog's pings are timed by the kernel (SO_TIMESTAMPNS: when each datagram
was queued, i.e. sent), not by when this test got round to reading them; how often
they come is bounded from below only (a starved loop pings late, never early)."""
import array
import contextlib
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from testlib import DAEMON, NORTHSTAR, WAIT_LIMIT, WORKER_START, Conn, Supervisor, ask, proc, require_sandbox, status, stops_cleanly, terminate, value
from testlib.waits import sleep_past, start_held, wait_call, wait_for

pytestmark = pytest.mark.asan

# At least %s seconds of CPU (not of wall time: the same work however loaded the
# machine), then "done".
BUSY = """import time
while time.process_time() < %s:
    pass
print("done")
"""


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


class Managed:
    """codeinterpd started as systemd would: NOTIFY_SOCKET on a datagram socket the test
    owns, optionally WATCHDOG_USEC, and either --socket or a socket in LISTEN_FDS."""

    def __init__(self, policy="", watchdog_usec=None, activated=False):
        require_sandbox()
        self.dir = tempfile.mkdtemp(prefix="codeinterp-ops-")
        self.socket = os.path.join(self.dir, "ci.sock")
        self.policy_path = os.path.join(self.dir, "policy.yaml")
        with open(self.policy_path, "w") as f:
            f.write("workerStart: %s\n" % WORKER_START + policy)
        self.notify_path = os.path.join(self.dir, "notify")
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.notify.bind(self.notify_path)
        self.listener = None
        args = [DAEMON, "--policy", self.policy_path]
        if activated:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(self.socket)
            self.listener.listen(16)
        else:
            args += ["--socket", self.socket]
        listener = self.listener

        def as_systemd_would():
            os.environ["NOTIFY_SOCKET"] = self.notify_path
            if watchdog_usec:
                os.environ["WATCHDOG_USEC"] = str(watchdog_usec)
                os.environ["WATCHDOG_PID"] = str(os.getpid())
            if listener:
                os.dup2(listener.fileno(), 3)
                os.environ["LISTEN_FDS"] = "1"
                os.environ["LISTEN_PID"] = str(os.getpid())

        self.log_path = os.path.join(self.dir, "log")
        self.log = open(self.log_path, "wb")
        self.start = lambda: subprocess.Popen(args, preexec_fn=as_systemd_would, pass_fds=(3,) if listener else (),
                                              stdout=self.log, stderr=subprocess.STDOUT)
        self.proc = self.start()

    def recv(self, timeout):
        """(kernel time the datagram was sent, text), or None after timeout seconds."""
        self.notify.settimeout(timeout)
        try:
            data, anc, _, _ = self.notify.recvmsg(4096, socket.CMSG_SPACE(16))
        except socket.timeout:
            return None
        sent = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = array.array("q", payload[:16])
                sent = sec + nsec / 1e9
        return sent, data.decode()

    def messages(self, duration):
        """Notify datagrams (texts) that arrive within duration seconds (a check that
        nothing comes: a slow machine can only make it pass vacuously)."""
        return [text for _, text in self.timed(duration)]

    def timed(self, duration):
        out = []
        deadline = time.monotonic() + duration
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            m = self.recv(left)
            if m is None:
                return out
            out.append(m)

    def wait_for(self, what, timeout=WAIT_LIMIT):
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            m = self.recv(max(0.01, deadline - time.monotonic()))
            if m is None:
                break
            seen.append(m[1])
            if what in m[1].split("\n"):
                return seen
        raise AssertionError("no %s from codeinterpd; got %r; log: %s" % (what, seen, self.read_log()))

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        terminate(self.proc, signal.SIGCONT, signal.SIGTERM)
        self.log.close()
        self.notify.close()
        if self.listener:
            self.listener.close()
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)
        return self.proc.returncode


def count(msgs, what):
    return sum(m.split("\n").count(what) for m in msgs)


# ---- watchdog ----

def test_watchdog_pings_at_half_the_interval_and_stop_with_the_loop():
    """WATCHDOG_USEC 0.4 s: WATCHDOG=1 from the loop, never more often than a quarter of
    it (sd-event pings between a quarter and a half), none while the loop is stopped,
    and again once it runs."""
    with stops_cleanly(Managed(watchdog_usec=400000)) as m:
        m.wait_for("READY=1")
        pings = []
        while len(pings) < 8:
            got = m.recv(WAIT_LIMIT)
            assert got is not None, "no WATCHDOG=1 for %.0f s: %r" % (WAIT_LIMIT, pings)
            if "WATCHDOG=1" in got[1].split("\n"):
                pings.append(got[0])
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert min(gaps) >= 0.09, gaps
        # A loop that does not turn sends nothing.
        m.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: proc.state(m.proc.pid) == "T", "codeinterpd to stop")
        stopped_at = time.time()  # the kernel's timestamps are CLOCK_REALTIME
        late = [text for sent, text in m.timed(1.5) if sent > stopped_at]
        assert count(late, "WATCHDOG=1") == 0, late
        m.proc.send_signal(signal.SIGCONT)
        m.wait_for("WATCHDOG=1")
        c = Conn(m.socket)
        assert c.execute(NORTHSTAR)["result"]["text"] == "8.25"
        c.close()


def test_no_watchdog_unless_systemd_asks():
    with stops_cleanly(Managed()) as m:
        m.wait_for("READY=1")
        assert count(m.messages(1.0), "WATCHDOG=1") == 0


# ---- reload ----

def hello(sock):
    return ask(sock, "hello")


def write_policy(path, text):
    # Replace atomically, as an editor or config management would.
    with open(path + ".new", "w") as f:
        f.write("workerStart: %s\n" % WORKER_START + text)
    os.rename(path + ".new", path)


@pytest.mark.start_mode
def test_reload_changes_new_calls_and_keeps_running_and_queued_ones():
    """A call running and one queued at the reload keep the old deadline and CPU limit;
    new calls get the new ones. The running call holds until the queued one is past the
    new deadline, then each does 1.5 s of CPU: over the new cpuSeconds, within the old."""
    with stops_cleanly(Supervisor("timeoutMs: 120000\ncpuSeconds: 10\nmaxCalls: 10\nmaxActiveWorkers: 1\n")) as s:
        old = hello(s.socket)
        assert old["limits"]["timeoutMs"] == 120000 and old["limits"]["cpuSeconds"] == 10
        running, queued = s.connect(), s.connect()
        held = start_held(s, running, after=BUSY % 1.5)
        held.wait_running()
        rid_queued = queued.request("execute", summary="t", code=BUSY % 1.5, sourceIds=[])
        wait_call(s, queued.call_id(rid_queued), "queued")
        queued_seen = time.monotonic()  # after its admission

        write_policy(s.policy_path, "timeoutMs: 1500\ncpuSeconds: 1\nmaxCalls: 2\nmaxActiveWorkers: 1\n"
                     "zygotePoolSize: 5\n")
        s.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Reloaded the policy" in s.read_log(), lambda: "the reload: " + s.read_log())
        new = hello(s.socket)
        assert new["policy"]["sha256"] != old["policy"]["sha256"]
        assert new["limits"]["timeoutMs"] == 1500 and new["limits"]["cpuSeconds"] == 1
        assert new["policy"]["workerStart"] == WORKER_START
        assert status(s)["policySha256"] == new["policy"]["sha256"]
        # A key read only at start keeps its value, with a notice.
        assert 'Policy key zygotePoolSize changed' in s.read_log()
        # The queued call is past the new deadline before anything lets it start.
        sleep_past(queued_seen, 1.6)

        # The running call keeps 120 s / 10 s: it does its 1.5 s of CPU and ends ok.
        held.release()
        r = held.result()
        assert r["outcome"] == "ok" and r["stdout"]["text"] == "done\n", r
        assert r["evidence"]["policy"]["sha256"] == old["policy"]["sha256"]
        # The queued call waited past the new 1.5 s deadline, and then ran 1.5 s of CPU:
        # it keeps the old deadline and limits.
        r = queued.wait(rid_queued, types=("result", "error"))
        assert r["outcome"] == "ok" and r["stdout"]["text"] == "done\n", r
        assert r["timing"]["elapsedMs"] > 1500, r["timing"]
        assert r["evidence"]["policy"]["sha256"] == old["policy"]["sha256"], r

        # New calls get the new limits: 3 s of CPU is over cpuSeconds 1 / timeoutMs 1500.
        c = s.connect()
        inv = c.call("invocation.open")
        assert inv["maxCalls"] == 2, inv
        r = c.execute(BUSY % 3, invocation=inv["invocation"])
        assert r["outcome"] in ("resource_limit", "timeout"), r
        assert r["evidence"]["policy"]["sha256"] == new["policy"]["sha256"]
        assert c.execute("print(2)", invocation=inv["invocation"])["outcome"] == "ok"
        r = c.execute("print(3)", invocation=inv["invocation"])
        assert r.get("code") == "quota_exhausted" or r.get("outcome") == "quota_exhausted", r


@pytest.mark.start_mode
def test_reload_of_tmp_bytes_resizes_tmp_for_the_next_calls():
    """A call's /tmp is its policy's tmpBytes. In zygote mode a pre-started worker mounts
    /tmp before its call at the size the zygote was started with, and the zygote outlives
    a reload (tmpBytes is no key read only at start): after a reload that changes it, the
    pool's workers, prepared before, and those prepared after by the same zygote each get
    /tmp resized before the code runs."""
    size = "import os\nst = os.statvfs('/tmp')\nst.f_blocks * st.f_frsize"
    with stops_cleanly(Supervisor("tmpBytes: 1048576\n")) as s:
        c = s.connect()
        for _ in range(3):
            assert value(c.execute(size)) == "1048576"
        zygote = status(s)["zygotePid"]
        write_policy(s.policy_path, "tmpBytes: 2097152\n")
        s.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Reloaded the policy" in s.read_log(), lambda: "the reload: " + s.read_log())
        for _ in range(4):  # more than the pool's two, prepared before the reload
            assert value(c.execute(size)) == "2097152"
        assert status(s)["zygotePid"] == zygote


@pytest.mark.start_mode
def test_reload_of_artifact_bounds_reaches_the_next_calls_outputs():
    """A call's /outputs tmpfs is made ahead, while the call before runs. A reload drops
    the one made ahead; a call queued before the reload keeps the old bounds (as it keeps
    every limit) and one admitted after it gets the new ones, whichever starts first:
    the one made ahead for the other's bounds is never given to it. Each /outputs is
    checked by its size and inode count (maxArtifacts + 1)."""
    size = "import os\nst = os.statvfs('/outputs')\n(st.f_blocks * st.f_frsize, st.f_files)"
    old, new = "(1048576, 5)", "(2097152, 7)"
    with stops_cleanly(Supervisor("maxActiveWorkers: 1\nmaxArtifactBytes: 1048576\nmaxArtifacts: 4\n")) as s:
        c = s.connect()
        assert value(c.execute(size)) == old
        running, queued, later = s.connect(), s.connect(), s.connect()
        held = start_held(s, running, after=size)
        held.wait_running()
        rid_queued = queued.request("execute", summary="t", code=size, sourceIds=[])
        wait_call(s, queued.call_id(rid_queued), "queued")
        write_policy(s.policy_path, "maxActiveWorkers: 1\nmaxArtifactBytes: 2097152\nmaxArtifacts: 6\n")
        s.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Reloaded the policy" in s.read_log(), lambda: "the reload: " + s.read_log())
        rid_later = later.request("execute", summary="t", code=size, sourceIds=[])
        wait_call(s, later.call_id(rid_later), "queued")
        held.release()
        assert value(held.result()) == old
        assert value(queued.wait(rid_queued, types=("result", "error"))) == old
        assert value(later.wait(rid_later, types=("result", "error"))) == new
        for _ in range(2):
            assert value(c.execute(size)) == new


def test_reload_with_an_invalid_file_keeps_the_old_policy():
    with stops_cleanly(Supervisor("timeoutMs: 20000\n")) as s:
        before = hello(s.socket)["policy"]["sha256"]
        write_policy(s.policy_path, "timeoutMs: 20000\nmaxCalls: banana\n")
        s.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "Reloading the policy" in s.read_log(), lambda: "the refused reload: " + s.read_log())
        line = [x for x in s.read_log().splitlines() if "Reloading the policy" in x][0]
        assert "maxCalls" in line and ("keeping sha256 %s" % before[:12]) in line, line
        assert hello(s.socket)["policy"]["sha256"] == before
        assert s.proc.poll() is None
        c = s.connect()
        r = c.execute(NORTHSTAR)
        assert r["outcome"] == "ok" and r["evidence"]["policy"]["sha256"] == before


def test_reload_tells_systemd_reloading_then_ready():
    with stops_cleanly(Managed("timeoutMs: 20000\n")) as m:
        m.wait_for("READY=1")
        wait_for(lambda: os.path.exists(m.socket), "the socket")
        before = hello(m.socket)["policy"]["sha256"]
        write_policy(m.policy_path, "timeoutMs: 10000\n")
        m.proc.send_signal(signal.SIGHUP)
        seen = m.wait_for("READY=1")
        text = "\n".join(seen)
        assert "RELOADING=1" in text and re.search(r"MONOTONIC_USEC=\d+", text), seen
        assert text.index("RELOADING=1") < text.rindex("READY=1")
        assert hello(m.socket)["policy"]["sha256"] != before


# ---- idle exit ----

def test_idle_exit_under_socket_activation():
    with stops_cleanly(Managed("idleExitSeconds: 1\n", activated=True)) as m:
        m.wait_for("READY=1")
        # An open connection is use: no exit while it stays, even with nothing running
        # (checked over two seconds: a slow machine can only make that pass vacuously).
        c = Conn(m.socket)
        assert c.execute(NORTHSTAR)["result"]["text"] == "8.25"
        time.sleep(2.0)
        assert m.proc.poll() is None, m.read_log()
        t0 = time.monotonic()
        c.close()
        assert m.proc.wait(WAIT_LIMIT) == 0, m.read_log()
        # Not before idleExitSeconds after the close (which it saw after t0).
        assert time.monotonic() - t0 >= 1.0
        assert "STOPPING=1" in "\n".join(m.messages(1.0))
        assert "idleExitSeconds" in m.read_log()
        # The socket is systemd's (here the test's): still there, and a client that
        # connects now waits in its backlog, its request with it, for the next supervisor,
        # which systemd starts on that connection (here the test does).
        assert os.path.exists(m.socket)
        waiting = Conn(m.socket)
        rid = waiting.request("hello")
        m.proc = m.start()
        m.wait_for("READY=1")
        assert waiting.wait(rid)["type"] == "reply"
        assert waiting.execute(NORTHSTAR)["result"]["text"] == "8.25"
        waiting.close()


def test_no_idle_exit_with_its_own_socket():
    with stops_cleanly(Managed("idleExitSeconds: 1\n")) as m:
        m.wait_for("READY=1")
        time.sleep(2.5)
        assert m.proc.poll() is None, m.read_log()


# ---- journal fields ----

def parse_journal_datagram(data):
    """The journal's native protocol: KEY=value lines, or KEY\\n<le64 size><value>\\n."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            v = data[nl + 9:nl + 9 + n]
            assert data[nl + 9 + n:nl + 10 + n] == b"\n"
            i = nl + 10 + n
        fields.setdefault(k.decode(), []).append(v.decode(errors="replace"))
    return fields


@contextlib.contextmanager
def journal_supervisor():
    """A supervisor whose stderr is a journal stream (JOURNAL_STREAM names it) and whose
    /run/systemd/journal/socket is the test's datagram socket; yields (process, its
    socket path, the journal socket, the stderr file's path)."""
    require_sandbox()
    d = tempfile.mkdtemp(prefix="codeinterp-journal-")
    journal_dir = os.path.join(d, "journal")
    os.mkdir(journal_dir)
    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind(os.path.join(journal_dir, "socket"))
    sock = os.path.join(d, "ci.sock")
    policy = os.path.join(d, "policy.yaml")
    with open(policy, "w") as f:
        f.write("workerStart: %s\n" % WORKER_START)
    err = open(os.path.join(d, "stderr"), "wb")
    st = os.fstat(err.fileno())
    env = dict(os.environ, JOURNAL_STREAM="%d:%d" % (st.st_dev, st.st_ino))
    # The journal's socket is /run/systemd/journal/socket: in a private mount namespace
    # of the supervisor's own, that is the test's socket. The host's /run is not touched.
    script = ('if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; '
              'else mount -t tmpfs tmpfs /run && mkdir /run/systemd; fi && mkdir /run/systemd/journal && '
              'mount --bind "$0" /run/systemd/journal && exec "$@"')
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, journal_dir,
                          DAEMON, "--socket", sock, "--policy", policy], env=env, stdout=err, stderr=err)
    try:
        # The socket appears when it listens (bind, listen, then rename into place).
        wait_for(lambda: os.path.exists(sock) or p.poll() is not None, "the socket")
        assert p.poll() is None, open(os.path.join(d, "stderr"), "rb").read()
        yield p, sock, journal, os.path.join(d, "stderr")
    finally:
        terminate(p)
        err.close()
        journal.close()
        subprocess.run(["rm", "-rf", d])
    assert p.returncode == 0


def drain_journal(journal, datagrams, stop):
    """Read the journal socket into datagrams until stop is set, as journald does."""
    journal.settimeout(0.2)
    while not stop.is_set():
        try:
            datagrams.append(journal.recv(65536))
        except socket.timeout:
            pass


def test_call_finished_journal_fields():
    # The journal is read while the supervisor runs, as journald does: the kernel queues
    # only net.unix.max_dgram_qlen datagrams (10 here) before the queue is full.
    datagrams, stop = [], threading.Event()
    with journal_supervisor() as (p, sock, journal, stderr_path):
        reader = threading.Thread(target=drain_journal, args=(journal, datagrams, stop))
        reader.start()
        try:
            c = Conn(sock)
            marker = "SECRET_%d" % os.getpid()
            r1 = c.execute("x = '%s'\nprint(x)" % marker)
            r2 = c.execute("raise ValueError('%s')" % marker)
            c.close()
            assert r1["outcome"] == "ok" and r2["outcome"] == "python_exception"
            # Both entries are written before the results are sent: they are there once the
            # reader has taken them. Then whatever else arrived.
            wait_for(lambda: sum(b"CALL_ID=" in x for x in datagrams) >= 2, "both calls' journal entries")
        finally:
            stop.set()
            reader.join()
        journal.setblocking(False)
        while True:
            try:
                datagrams.append(journal.recv(65536))
            except BlockingIOError:
                break
        raw = b"".join(datagrams)
        entries = [parse_journal_datagram(x) for x in datagrams]
        assert marker.encode() not in raw
        finished = [e for e in entries if "CALL_ID" in e]
        assert len(finished) == 2, entries
        for e, call_id, outcome in ((finished[0], r1["callId"], "ok"), (finished[1], r2["callId"], "python_exception")):
            assert e["MESSAGE"] == ["call %d finished: %s (worker started)" % (call_id, outcome)], e
            assert e["CALL_ID"] == [str(call_id)] and e["OUTCOME"] == [outcome], e
            assert e["PEER_UID"] == [str(os.getuid())] and re.fullmatch(r"\d+", e["ELAPSED_MS"][0]), e
            assert e["SYSLOG_IDENTIFIER"] == ["codeinterpd"] and e["PRIORITY"] == ["6"], e
            assert set(e) == {"MESSAGE", "PRIORITY", "CODE_FILE", "CODE_LINE", "SYSLOG_IDENTIFIER", "CALL_ID",
                              "OUTCOME", "ELAPSED_MS", "PEER_UID"}, e
        # Other messages go there too, without the call fields.
        assert any(e.get("MESSAGE", [""])[0].startswith("Listening on") for e in entries)
        # Nothing went to stderr but the zygote's own lines, if any.
        with open(stderr_path, "rb") as f:
            assert b"codeinterpd[" not in f.read()


def read_call_entry(journal, call_id):
    """The journal datagrams up to call call_id's entry (blocking, WAIT_LIMIT each)."""
    journal.settimeout(WAIT_LIMIT)
    while True:
        e = parse_journal_datagram(journal.recv(65536))
        if e.get("CALL_ID") == [str(call_id)]:
            return e


def test_a_restarted_journal_is_connected_again():
    """journald restarted: its socket is a new one at the same path, and a send on the
    old connection is refused. The supervisor connects again and the entry gets there,
    not to stderr."""
    with journal_supervisor() as (p, sock, journal, stderr_path):
        c = Conn(sock)
        r = c.execute("1")
        assert read_call_entry(journal, r["callId"])["OUTCOME"] == ["ok"]
        path = journal.getsockname()
        journal.close()
        os.unlink(path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as new:
            new.bind(path)
            r = c.execute("2")
            c.close()
            assert read_call_entry(new, r["callId"])["OUTCOME"] == ["ok"]
        with open(stderr_path, "rb") as f:
            assert b"codeinterpd[" not in f.read()


def test_a_journal_that_does_not_read_costs_entries_not_calls():
    """journald stuck: its socket's queue fills and nobody reads it. The supervisor does
    not wait on it (a blocking send would stop its loop and every call with it): each
    call is answered, the entries that found no room are dropped and counted, and the
    count is the first thing logged once the journal reads again. Nothing goes to
    stderr instead, which is journald's too."""
    calls = 25  # each logs an entry: well past the queue's 10
    note_re = re.compile(r"(\d+) log entries were dropped: the journal was not reading")
    with journal_supervisor() as (p, sock, journal, stderr_path):
        c = Conn(sock)
        ids = []
        for i in range(calls):
            r = c.execute("%d" % i)
            assert r["outcome"] == "ok", r
            ids.append(str(r["callId"]))
        # The queue holds what it took; the rest was dropped. Each call's entry was
        # written (or dropped) before its result was sent.
        journal.setblocking(False)
        stream = []
        while True:
            try:
                stream.append(parse_journal_datagram(journal.recv(65536)))
            except BlockingIOError:
                break
        assert 0 < len(stream) < calls, len(stream)
        # The journal reads again: the next entry that goes through is preceded by the
        # count of those lost (the supervisor may log something of its own meanwhile:
        # the stream is read on to the next call's entry).
        after = c.execute("print('after')")
        assert after["outcome"] == "ok", after
        c.close()
        journal.setblocking(True)
        journal.settimeout(WAIT_LIMIT)
        while str(after["callId"]) not in stream[-1].get("CALL_ID", []):
            stream.append(parse_journal_datagram(journal.recv(65536)))
        notes = [i for i, e in enumerate(stream) if note_re.fullmatch(e["MESSAGE"][0])]
        assert notes, stream
        note = stream[notes[0]]
        assert note["PRIORITY"] == ["4"], note
        dropped = int(note_re.fullmatch(note["MESSAGE"][0]).group(1))
        # Each call's entry is logged just after its result is sent, so the last one may
        # come after the count; every entry of the 25 either came or was counted.
        came = {e["CALL_ID"][0] for e in stream if e.get("CALL_ID", [None])[0] in ids}
        assert notes[0] < len(stream) - 1, stream
        assert len(came) < calls and dropped >= calls - len(came), (dropped, sorted(came))
        with open(stderr_path, "rb") as f:
            assert b"codeinterpd[" not in f.read()


# ---- status counters and OpenMetrics ----

OM_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
OM_LABELS = r'\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)?\}'
OM_NUMBER = r"(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]?Inf|NaN)"
OM_SAMPLE = re.compile(r"^(%s)(%s)? (%s)$" % (OM_NAME, OM_LABELS, OM_NUMBER))
OM_SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count", "_created"),
               "info": ("_info",)}


def parse_openmetrics(text):
    """A strict reading of the OpenMetrics text format, for what codeinterp emits:
    returns {family: {"type": t, "samples": [(name, labels, value)]}}; raises AssertionError."""
    assert text.endswith("# EOF\n"), text[-50:]
    lines = text[:-1].split("\n")
    assert lines[-1] == "# EOF" and "# EOF" not in lines[:-1]
    families, current = {}, None
    for line in lines[:-1]:
        assert line, "empty line"
        if line.startswith("#"):
            parts = line.split(" ", 3)
            assert parts[0] == "#" and parts[1] in ("TYPE", "HELP", "UNIT"), line
            name = parts[2]
            assert re.fullmatch(OM_NAME, name), line
            if parts[1] == "TYPE":
                assert name not in families, "family %s twice" % name
                assert parts[3] in OM_SUFFIXES, line
                families[name] = {"type": parts[3], "samples": []}
                current = name
            else:
                assert name == current, "%s before its TYPE: %s" % (parts[1], line)
                if parts[1] == "UNIT":
                    assert name.endswith("_" + parts[3]), line
            continue
        m = OM_SAMPLE.match(line)
        assert m, "bad sample line: %r" % line
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        assert current and any(name == current + s for s in OM_SUFFIXES[families[current]["type"]]), \
            "sample %s outside its family %s" % (name, current)
        lab = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels))
        families[current]["samples"].append((name, lab, float(value)))
    for fam, f in families.items():
        assert f["samples"], "family %s without samples" % fam
        if f["type"] == "counter":
            assert all(v >= 0 for _, _, v in f["samples"])
        if f["type"] == "histogram":
            buckets = [(lab["le"], v) for n, lab, v in f["samples"] if n == fam + "_bucket"]
            les = [float(le) for le, _ in buckets]
            assert les == sorted(les) and len(set(les)) == len(les) and buckets[-1][0] == "+Inf", buckets
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), "buckets not monotone: %r" % buckets
            total = [v for n, _, v in f["samples"] if n == fam + "_count"]
            sums = [v for n, _, v in f["samples"] if n == fam + "_sum"]
            assert total == [counts[-1]] and len(sums) == 1 and sums[0] >= 0, f
            for le, _ in buckets[:-1]:
                assert re.fullmatch(r"\d+\.\d+", le), "le %r is not a plain float" % le
    return families


def test_status_counts_outcomes_and_histograms(tmp_path):
    with stops_cleanly(Supervisor("timeoutMs: 3000\nmaxQueuedCalls: 0\nmaxActiveWorkers: 1\n")) as s:
        c = s.connect()
        results = [c.execute("print(1)"), c.execute("print(2)"), c.execute("1/0"), c.execute("while True: pass")]
        assert [r["outcome"] for r in results[:3]] == ["ok", "ok", "python_exception"], results
        assert results[3]["outcome"] in ("timeout", "resource_limit"), results[3]
        timeout_like = status(s)["outcomes"]
        # A second call while one runs and the queue holds none: overloaded, refused. The
        # one that runs holds for a second at least, for the histogram below.
        busy = start_held(s, after="print('done')")
        busy.wait_running()
        running_since = time.monotonic()
        r = c.execute("print(3)")
        assert r.get("code") == "overloaded", r
        sleep_past(running_since, 1.1)
        busy.release()
        results.append(busy.result())
        assert results[-1]["outcome"] == "ok", results[-1]
        r = c.execute("print(4)", source_ids=["nope"])
        assert r.get("code") == "unavailable_source" or r.get("outcome") == "unavailable_source", r

        st = status(s)
        o = st["outcomes"]
        assert set(o) == set(hello(s.socket)["outcomes"])
        expect_to = "timeout" if timeout_like["timeout"] else "resource_limit"
        want = {k: 0 for k in o}
        want.update({"ok": 3, "python_exception": 1, expect_to: 1, "overloaded": 1, "unavailable_source": 1})
        assert o == want, o
        assert st["finishedTotal"] == 5 and st["admittedTotal"] == 5
        for key in ("queueWaitMs", "runTimeMs"):
            h = st[key]
            assert h["count"] == 5, (key, h)
            assert h["counts"] == sorted(h["counts"]) and h["counts"][-1] <= h["count"]
            assert len(h["leMs"]) == len(h["counts"]) and h["leMs"] == sorted(h["leMs"])
        # The histogram holds what the results say of each call (their own timing).
        rt = st["runTimeMs"]
        run_ms = [r["timing"]["runMs"] for r in results]
        i = rt["leMs"].index(1000)
        assert rt["count"] - rt["counts"][i] == sum(1 for ms in run_ms if ms > 1000) >= 1, (rt, run_ms)
        assert abs(rt["sumMs"] - sum(run_ms)) <= len(run_ms), (rt, run_ms)

        p = s.cli("status", "--openmetrics")
        assert p.returncode == 0, p.stderr
        text = p.stdout.decode()
        fams = parse_openmetrics(text)
        calls = {lab["outcome"]: v for n, lab, v in fams["codeinterp_calls"]["samples"]}
        assert fams["codeinterp_calls"]["type"] == "counter"
        assert calls == {k: float(v) for k, v in want.items()}
        for fam, key in (("codeinterp_queue_wait_seconds", "queueWaitMs"), ("codeinterp_run_time_seconds",
                                                                             "runTimeMs")):
            f = fams[fam]
            assert f["type"] == "histogram"
            cnt = [v for n, _, v in f["samples"] if n == fam + "_count"][0]
            assert cnt == 5
            sm = [v for n, _, v in f["samples"] if n == fam + "_sum"][0]
            # status was read again by the client: one more connection, same calls.
            assert abs(sm - st[key]["sumMs"] / 1000) < 0.001
        assert fams["codeinterp_worker_start_failures"]["samples"] == [
            ("codeinterp_worker_start_failures_total", {}, 0.0)]


def test_openmetrics_parser_refuses_what_the_format_forbids():
    good = ("# TYPE a counter\na_total 1\n# TYPE h histogram\nh_bucket{le=\"0.5\"} 1\n"
            "h_bucket{le=\"+Inf\"} 2\nh_sum 1.0\nh_count 2\n# EOF\n")
    parse_openmetrics(good)
    bad = [
        good.replace("# EOF\n", ""),                                  # no EOF
        good.replace("# TYPE a counter\n", ""),                       # sample before TYPE
        good.replace("h_bucket{le=\"0.5\"} 1", "h_bucket{le=\"0.5\"} 3"),  # not monotone
        good.replace("h_count 2", "h_count 3"),                       # +Inf != count
        good.replace("a_total 1", "a_total{outcome=ok} 1"),           # unquoted label
        good.replace("a_total 1", "a total 1"),                       # bad name
        good + "x_total 1\n",                                         # after EOF
    ]
    for text in bad:
        with pytest.raises(AssertionError):
            parse_openmetrics(text)
