"""A peer the policy refuses, for real: a supervisor whose allowedUids leave nobody out,
on a socket nobody may open (socketGroup nogroup, mode 0660), and every client run as
nobody (setpriv --reuid=nobody --regid=nogroup --clear-groups). The supervisor answers
such a connection with an error `permission_denied` (id nil) and closes it, often
before the client has written its request. Each client must then read that answer
instead of dying of SIGPIPE (exit 141, signal 13) or reporting a lost connection:
exit status 11 and a message naming permission_denied, every time. The clients'
side only: the reference configuration."""
import grp
import os
import pwd
import subprocess
import sys

import pytest

from testlib import CLIENT, ROOTLESS, SOURCE_ROOT, WAIT_LIMIT, Conn, check_northstar

TRIES = 20
PYTHON_DIR = os.path.join(SOURCE_ROOT, "python")


def _nobody():
    return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid


def as_nobody():
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


@pytest.fixture
def refusing(shared_supervisor):
    """A supervisor that refuses nobody, on a socket nobody can open."""
    if ROOTLESS:
        pytest.skip("the refusing supervisor sets its socket's group: run as root")
    uid, gid = _nobody()
    s = shared_supervisor("allowedUids: [0]\nsocketGroup: %d\n" % gid)
    os.chmod(s.dir, 0o711)  # the harness's directory is 0700: let nobody reach the socket
    st = os.stat(s.socket)
    assert st.st_gid == gid and st.st_mode & 0o777 == 0o660, oct(st.st_mode)
    return s


def run_as_nobody(args, stdin=subprocess.DEVNULL):
    return subprocess.run(as_nobody() + args, stdin=stdin, capture_output=True, timeout=WAIT_LIMIT)


def check_refused(what, runs):
    """Every run exited 11 (never killed by SIGPIPE) and named permission_denied."""
    statuses = [r.returncode for r in runs]
    bad = [(r.returncode, r.stdout[-300:], r.stderr[-300:]) for r in runs
           if r.returncode != 11 or b"permission_denied" not in r.stderr]
    assert not bad, "%s as nobody: exit statuses %r (-13 and 141: SIGPIPE); first bad runs: %r" % (
        what, statuses, bad[:3])


@pytest.mark.parametrize("args", [["status"], ["hello"], ["exec", "-c", "1"], ["tool"]],
                         ids=["status", "hello", "exec", "tool"])
def test_codeinterp_command_refused(refusing, args):
    runs = [run_as_nobody([CLIENT, "--socket", refusing.socket] + args) for _ in range(TRIES)]
    check_refused("codeinterp " + " ".join(args), runs)
    if args[0] == "status":  # the reply is also printed, as JSON, as for any error reply
        assert all(b'"code":"permission_denied"' in r.stdout for r in runs), runs[0].stdout


def test_exec_with_a_source_refused(refusing, tmp_path):
    """exec --source opens an invocation first: refused there, the same way."""
    os.chmod(tmp_path, 0o755)
    src = tmp_path / "runtimes.txt"
    src.write_text("9.0 7.5\n")
    os.chmod(src, 0o644)
    runs = [run_as_nobody([CLIENT, "--socket", refusing.socket, "exec", "--source", "runtimes=%s" % src,
                           "-c", "1"]) for _ in range(TRIES)]
    check_refused("codeinterp exec --source", runs)


def test_mcp_refused(refusing):
    """codeinterp mcp says permission_denied, not "describe failed"; with an MCP client
    waiting on its stdin as well as with none."""
    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}\n'
    runs = [run_as_nobody([CLIENT, "--socket", refusing.socket, "mcp"], stdin=subprocess.DEVNULL)
            for _ in range(TRIES // 2)]
    runs += [subprocess.run(as_nobody() + [CLIENT, "--socket", refusing.socket, "mcp"], input=init,
                            capture_output=True, timeout=WAIT_LIMIT) for _ in range(TRIES // 2)]
    check_refused("codeinterp mcp", runs)
    assert not any(b"describe failed" in r.stderr for r in runs), runs[0].stderr


PY_CLIENTS = r"""
import asyncio, os, signal, sys
sys.path.insert(0, sys.argv[1])
# As a program that wants the default action back would: a send to a closed peer
# must still not kill it.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
from codeinterp import Client, PermissionDenied
from codeinterp.aio import AsyncClient

def sync_once():
    try:
        with Client(sys.argv[2], 10) as c:
            c.status()
        return "answered"
    except PermissionDenied as e:
        return "permission_denied" if e.code == "permission_denied" else repr(e)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)

async def aio_once():
    try:
        async with AsyncClient(sys.argv[2]) as c:
            await c.status()
        return "answered"
    except PermissionDenied as e:
        return "permission_denied" if e.code == "permission_denied" else repr(e)
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)

n = int(sys.argv[3])
print("sync", sorted(set(sync_once() for _ in range(n))))
print("aio", sorted(set(asyncio.run(aio_once()) for _ in range(n))))
"""


def test_python_clients_refused(refusing):
    """The Python client (codeinterp.Client and codeinterp.aio.AsyncClient) as nobody,
    SIGPIPE at its default action: PermissionDenied every time, never a lost connection
    or a death by signal."""
    out = run_as_nobody([sys.executable, "-c", PY_CLIENTS, os.path.abspath(PYTHON_DIR), refusing.socket,
                         str(TRIES)])
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert out.stdout.decode().splitlines() == ["sync ['permission_denied']", "aio ['permission_denied']"], \
        (out.stdout, out.stderr)


def test_refusals_leave_the_supervisor_serving(refusing):
    """Root is allowed: calls still run, and a refusal is logged with nobody's ids."""
    uid, gid = _nobody()
    check_refused("codeinterp status", [run_as_nobody([CLIENT, "--socket", refusing.socket, "status"])])
    check_northstar(refusing)
    c = Conn(refusing.socket)
    try:
        assert c.call("status")["type"] == "reply"
    finally:
        c.close()
    assert "Refused a connection from uid %d gid %d" % (uid, gid) in refusing.read_log()
