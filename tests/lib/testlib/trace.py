"""ptrace from the tests: the next worker a zygote clones, held stopped from its first
instruction, and stepped from one system call to the next."""
import contextlib
import ctypes
import os
import signal

from . import proc
from .supervisor import ok, status
from .waits import wait_for

# A supervisor whose zygote keeps one pre-started worker and runs one call at a time:
# the worker it clones after a call is the one refill_held() holds.
POOL_OF_ONE = "workerStart: zygote\nzygotePoolSize: 1\nmaxActiveWorkers: 1\n"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
PTRACE_SYSCALL, PTRACE_DETACH, PTRACE_GETEVENTMSG, PTRACE_SEIZE = 24, 17, 0x4201, 0x4206
PTRACE_O_TRACEFORK, PTRACE_O_TRACEVFORK, PTRACE_O_TRACECLONE = 2, 4, 8
WALL = 0x40000000  # waitpid: clones too


def ptrace(req, pid, addr=None, data=None):
    if _libc.ptrace(req, pid, addr, data) < 0:
        e = ctypes.get_errno()
        raise OSError(e, "ptrace(%#x, %d): %s" % (req, pid, os.strerror(e)))


class CloneTrap:
    """Seizes the zygote zpid at once; take() returns the child of its next clone,
    stopped before its first instruction (the zygote is let go then). close() lets go
    of whatever is still held: call it in a finally."""

    def __init__(self, zpid):
        ptrace(PTRACE_SEIZE, zpid, None, PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE)
        self.zpid, self.child = zpid, None

    def take(self):
        _, st = os.waitpid(self.zpid, WALL)
        assert os.WIFSTOPPED(st) and st >> 16 in (1, 2, 3), "not a fork/vfork/clone event: %#x" % st
        msg = ctypes.c_ulong()
        ptrace(PTRACE_GETEVENTMSG, self.zpid, None, ctypes.addressof(msg))
        self.child = msg.value
        self._let_go("zpid")
        pid, st = os.waitpid(self.child, WALL)
        assert pid == self.child and os.WIFSTOPPED(st), st
        return self.child

    def _next_syscall_stop(self):
        """Resume the held child to its next system call stop; the call's number (x86_64,
        as /proc/PID/syscall gives it), as a string."""
        sig = 0
        while True:
            ptrace(PTRACE_SYSCALL, self.child, None, sig or None)
            pid, st = os.waitpid(self.child, WALL)
            assert pid == self.child and os.WIFSTOPPED(st), st
            sig = os.WSTOPSIG(st)
            if sig == signal.SIGTRAP:
                return ((proc._read(self.child, "syscall") or "").split() or [""])[0]
            # a signal of its own: delivered at the next resume

    def step_past(self, nr, until):
        """Run the held child from system call to system call until it enters the first
        one that is not nr after one or more that were, and say True; or, when it enters
        until first (one it may block in), say False. It stays stopped there either way."""
        seen = False
        while True:
            now = self._next_syscall_stop()
            if now == str(nr):
                seen = True
            elif seen or now == str(until):
                return seen

    def run_to(self, nr):
        """Run the held child until it enters system call nr; it stays stopped there."""
        while self._next_syscall_stop() != str(nr):
            pass

    def release(self):
        """Let the child run on."""
        self._let_go("child")

    def _let_go(self, which):
        pid = getattr(self, which)
        setattr(self, which, None)
        if pid:
            try:
                ptrace(PTRACE_DETACH, pid)
            except OSError:
                pass

    def close(self):
        self._let_go("zpid")
        self._let_go("child")


@contextlib.contextmanager
def refill_held(sup):
    """sup (POOL_OF_ONE): once its pre-started worker is prepared, a call ("1") takes
    it, and the worker the zygote clones next, to refill its pool, is held stopped
    before its first instruction. Yields (the connection, the CloneTrap, that
    worker's pid); lets go of whatever is still held at the end."""
    c = sup.connect()
    wait_for(lambda: proc.pool_prepared(sup.pid), what="the pre-started worker done preparing")
    trap = CloneTrap(status(sup)["zygotePid"])
    try:
        r = ok(c.execute("1"))
        assert r["timing"]["worker"] == "ready", r["timing"]
        yield c, trap, trap.take()
    finally:
        trap.close()
