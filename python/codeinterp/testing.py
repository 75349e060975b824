"""Test support: a private ``codeinterpd`` on a temporary socket, and pytest fixtures.

Enable the fixtures with ``pytest -p codeinterp.testing`` (or
``pytest_plugins = ["codeinterp.testing"]`` in a top-level conftest.py, or by
importing ``codeinterp_daemon``, ``codeinterp_client`` and ``codeinterp_async_client``
into a conftest.py):

- ``codeinterp_policy``: the policy text (None: the built-in defaults);
  override it in a test module to start the supervisor with another policy.
- ``codeinterp_daemon``: a started :class:`Daemon`, ready for connections; when
  the test ends it is stopped with SIGTERM and must have exited 0.
- ``codeinterp_client``: a :class:`codeinterp.Client` connected to it.
- ``codeinterp_async_client``: an :class:`codeinterp.aio.AsyncClient` connected to
  it, for ``async def`` tests (``@pytest.mark.asyncio``); needs pytest-asyncio
  (Debian's python3-pytest-asyncio), and is not defined without it.

The binary is ``$CODEINTERP_BUILD/bin/codeinterpd`` when ``CODEINTERP_BUILD`` is
set, else ``codeinterpd`` on ``PATH``. The supervisor needs user namespaces: run
by root it is the ordinary supervisor; run by another user it is a rootless one,
which needs unprivileged user namespaces. Without them the fixtures skip, unless
``CODEINTERP_MUST_SANDBOX=1``, which turns the skip into a failure.

``Daemon(user=NAME)`` (root only) starts the supervisor as that user instead
(``setpriv``, no supplementary groups): a rootless supervisor. ``user`` may also be a
bare uid (its gid the same number), which no account needs to hold. Its temporary
directory is handed to the user; the binary must be readable and executable by it.
``prefix`` is a command that execs the supervisor (e.g. ``prlimit --fsize=N:N --``).
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, AsyncIterator, Iterator, List, Optional, Sequence, Tuple, Union

import pytest

from .aio import AsyncClient
from .client import Client

try:
    import pytest_asyncio  # type: ignore[import]
except ImportError:  # the async fixture needs it; the others do not
    pytest_asyncio = None

MUST_SANDBOX = os.environ.get("CODEINTERP_MUST_SANDBOX") == "1"


def find_daemon() -> str:
    """The codeinterpd binary: ``$CODEINTERP_BUILD/bin/codeinterpd``, else from PATH."""
    build = os.environ.get("CODEINTERP_BUILD")
    if build:
        return os.path.join(build, "bin", "codeinterpd")
    found = shutil.which("codeinterpd")
    if found is None:
        raise FileNotFoundError("codeinterpd: set CODEINTERP_BUILD to a build tree or put it on PATH")
    return found


def _ids(user: Union[str, int]) -> Tuple[int, int]:
    """(uid, gid) of a user name (its primary group), or of a bare uid (gid = uid: an
    id no account needs to hold)."""
    if isinstance(user, int):
        return user, user
    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid


def _as_user(user: Union[str, int]) -> List[str]:
    """The command prefix that runs a command as user, without supplementary groups."""
    uid, gid = _ids(user)
    return ["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups", "--"]


def sandbox_available(user: Optional[Union[str, int]] = None) -> Tuple[bool, str]:
    """(True, "") when this process can create the namespaces the supervisor
    needs (a process other than root: unprivileged user namespaces, for a rootless
    supervisor); otherwise (False, why). With user (only as root), whether that
    user can, for a rootless supervisor started as it."""
    if user is not None and os.geteuid() != 0:
        return False, "starting a supervisor as %s needs root" % user
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--net", "--fork", "true"]
    if user is not None:
        try:
            cmd = _as_user(user) + cmd
        except KeyError:
            return False, "no user %r" % user
    try:
        out = subprocess.run(cmd, capture_output=True, timeout=60)
        if out.returncode != 0:
            who = "" if user is None else " as %s (unprivileged user namespaces)" % user
            return False, "cannot create namespaces%s: %s" % (who, out.stderr.decode(errors="replace"))
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, "cannot create namespaces: %s" % e
    return True, ""


def require_sandbox(user: Optional[Union[str, int]] = None) -> None:
    """Skip the test when the kernel cannot sandbox (fail with CODEINTERP_MUST_SANDBOX=1);
    with user, when that user cannot (a rootless supervisor)."""
    ok, why = sandbox_available(user)
    if not ok:
        if MUST_SANDBOX:
            pytest.fail("CODEINTERP_MUST_SANDBOX=1 but the kernel cannot sandbox: " + why)
        pytest.skip(why)


class Daemon:
    """A ``codeinterpd`` on a socket in a new temporary directory, with its log there.

    The constructor returns once the socket file exists (it appears at bind(), a
    moment before listen(): :meth:`wait_ready` waits until connections are
    accepted). :meth:`stop` closes the connections made through :meth:`connect`,
    stops the supervisor and removes the directory.
    """

    def __init__(self, binary: Optional[str] = None, policy: Optional[str] = None, extra_args: Sequence[str] = (),
                 start_timeout: float = 10.0, user: Optional[Union[str, int]] = None, prefix: Sequence[str] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="codeinterp-test-")
        self.socket = os.path.join(self.dir, "ci.sock")
        self.log_path = os.path.join(self.dir, "codeinterpd.log")
        self.user = user
        args = list(prefix) + [binary or find_daemon(), "--socket", self.socket]
        if user is not None:
            os.chown(self.dir, *_ids(user))
            args = _as_user(user) + args
        if policy:
            self.policy_path = os.path.join(self.dir, "policy.yaml")
            with open(self.policy_path, "w") as f:
                f.write(policy)
            args += ["--policy", self.policy_path]
        args += list(extra_args)
        self.conns: List[Any] = []
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                what = "exited" if self.proc.returncode is not None else "did not start"
                log = self.read_log()
                self.stop()
                raise RuntimeError("codeinterpd %s: %s" % (what, log))
            time.sleep(0.01)

    def wait_ready(self, timeout: float = 10.0) -> "Daemon":
        """Wait until the supervisor accepts connections."""
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.socket)
                return self
            except (ConnectionRefusedError, FileNotFoundError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
            finally:
                s.close()

    def connect(self, timeout: Optional[float] = 60) -> Client:
        """A Client connected to this supervisor, closed by :meth:`stop`."""
        c = Client(self.socket, timeout)
        self.conns.append(c)
        return c

    def read_log(self) -> str:
        """The supervisor's stdout and stderr so far."""
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 15.0) -> Optional[int]:
        """Close the connections, SIGTERM the supervisor (SIGKILL after timeout),
        remove the directory; returns its exit status (negative: a signal)."""
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        rc = self.proc.returncode
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


@pytest.fixture
def codeinterp_policy() -> Optional[str]:
    """The policy text for ``codeinterp_daemon`` (None: the defaults). Override it."""
    return None


@pytest.fixture
def codeinterp_daemon(codeinterp_policy: Optional[str]) -> Iterator[Daemon]:
    """A private supervisor for one test; it must exit 0 when stopped."""
    require_sandbox()
    d = Daemon(policy=codeinterp_policy)
    try:
        d.wait_ready()
    except BaseException:
        d.stop()
        raise
    yield d
    rc = d.stop()
    assert rc == 0, "codeinterpd exited with %r" % rc


@pytest.fixture
def codeinterp_client(codeinterp_daemon: Daemon) -> Client:
    """A Client connected to ``codeinterp_daemon``."""
    return codeinterp_daemon.connect()


async def _async_client(codeinterp_daemon: Daemon) -> AsyncIterator[AsyncClient]:
    """An AsyncClient connected to ``codeinterp_daemon`` (timeouts: 60 s), closed
    after the test, in the test's event loop."""
    async with AsyncClient(codeinterp_daemon.socket, timeout=60, connect_timeout=60) as c:
        yield c


if pytest_asyncio is not None:
    codeinterp_async_client = pytest_asyncio.fixture(_async_client, name="codeinterp_async_client")
