"""`codeinterp exec` shows progress as one live status line on stderr when stderr is a
terminal, and nothing of it otherwise or with --json."""
import os
import pty
import select
import subprocess

from conftest import CLIENT


def run_with_tty_stderr(sup, *args, timeout=30):
    """Run the client with stderr on a pseudo-terminal; returns (stdout, tty bytes, rc)."""
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
    out = p.stdout.read()
    rc = p.wait(timeout)
    os.close(master)
    return out, tty, rc


def test_live_status_line_on_a_terminal(make_supervisor):
    sup = make_supervisor("heartbeatMs: 100\n")
    code = "import time\nprint('done')\ntime.sleep(0.5)\n6 * 7"
    out, tty, rc = run_with_tty_stderr(sup, "exec", "-c", code)
    assert rc == 0
    assert out == b"done\n42\n"
    assert b"[codeinterp] running" in tty
    assert b"stdout 5 chars" in tty  # the size, never the text
    assert b"done" not in tty.replace(b"[codeinterp]", b"")
    assert tty.endswith(b"\r\x1b[K")  # the line is cleared before the output is printed


def test_no_status_line_with_json_or_without_a_terminal(make_supervisor):
    sup = make_supervisor("heartbeatMs: 100\n")
    code = "import time\ntime.sleep(0.3)\n1"
    out, tty, rc = run_with_tty_stderr(sup, "exec", "--json", "-c", code)
    assert rc == 0 and tty == b"" and out.startswith(b"{")
    p = sup.client("exec", "-c", code)
    assert p.returncode == 0 and p.stderr == b"" and p.stdout == b"1\n"
