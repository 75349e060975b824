"""`codeinterp exec` shows progress as one live status line on stderr when stderr is a
terminal, and nothing of it otherwise or with --json."""
import os
import pty
import select
import subprocess

from testlib import CLIENT, WAIT_LIMIT, held
from testlib.waits import release_running


def run_with_tty_stderr(sup, *args, timeout=WAIT_LIMIT, on_tty=None):
    """Run the client with stderr on a pseudo-terminal; returns (stdout, tty bytes, rc).
    on_tty(bytes so far) is called as they arrive."""
    master, slave = pty.openpty()
    p = subprocess.Popen([CLIENT, "--socket", sup.socket] + list(args), stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    tty = b""
    while True:
        r, _, _ = select.select([master], [], [], timeout)
        if not r:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO once the client has exited and closed the terminal
            break
        if not chunk:
            break
        tty += chunk
        if on_tty:
            on_tty(tty)
    out = p.stdout.read()
    rc = p.wait(timeout)
    os.close(master)
    return out, tty, rc


def test_live_status_line_on_a_terminal(make_supervisor):
    """The code holds after its output until the status line has shown its size and a
    heartbeat's "running" (the size may come first in the "started" line, when the
    output is read before the worker's start is reported)."""
    sup = make_supervisor("heartbeatMs: 100\n")
    code = held("print('done', flush=True)", "6 * 7")
    released = []

    def on_tty(tty):
        if b"stdout 5 chars" in tty and b"[codeinterp] running" in tty and not released:
            released.append(release_running(sup))

    out, tty, rc = run_with_tty_stderr(sup, "exec", "-c", code, on_tty=on_tty)
    assert rc == 0 and released
    assert out == b"done\n42\n"
    assert b"[codeinterp] running" in tty
    assert b"stdout 5 chars" in tty  # the size, never the text
    assert b"done" not in tty.replace(b"[codeinterp]", b"")
    assert tty.endswith(b"\r\x1b[K")  # the line is cleared before the output is printed


def test_no_status_line_with_json_or_without_a_terminal(make_supervisor):
    """Heartbeats arrive during the sleep and show nothing (a slow machine can only send
    fewer of them: the check passes vacuously then, it cannot fail wrongly)."""
    sup = make_supervisor("heartbeatMs: 100\n")
    code = "import time\ntime.sleep(0.3)\n1"
    out, tty, rc = run_with_tty_stderr(sup, "exec", "--json", "-c", code)
    assert rc == 0 and tty == b"" and out.startswith(b"{")
    p = sup.cli("exec", "-c", code)
    assert p.returncode == 0 and p.stderr == b"" and p.stdout == b"1\n"
