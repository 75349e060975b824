"""systemd socket activation and readiness: without --socket the supervisor takes its
listening socket from LISTEN_FDS (fd 3), tells the service manager READY=1 through
NOTIFY_SOCKET, serves on it, and on SIGTERM leaves the socket it did not create."""
import os
import signal
import socket
import subprocess
import tempfile

import pytest

from testlib import DAEMON, NORTHSTAR, WAIT_LIMIT, Conn, require_sandbox

pytestmark = pytest.mark.asan


def test_socket_activation_and_sd_notify():
    require_sandbox()
    d = tempfile.mkdtemp(prefix="codeinterp-activation-")
    path, notify_path = os.path.join(d, "ci.sock"), os.path.join(d, "notify")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(WAIT_LIMIT)

    def as_systemd_would():
        os.dup2(listener.fileno(), 3)
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())
        os.environ["NOTIFY_SOCKET"] = notify_path

    p = subprocess.Popen([DAEMON], preexec_fn=as_systemd_would, pass_fds=(3,), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        messages = notify.recv(4096).decode()
        assert "READY=1" in messages.split("\n"), messages
        c = Conn(path)
        r = c.execute(NORTHSTAR)
        c.close()
        assert r["outcome"] == "ok" and r["result"]["text"] == "8.25"
        p.send_signal(signal.SIGTERM)
        assert p.wait(WAIT_LIMIT) == 0, p.stderr.read().decode(errors="replace")
        # STOPPING=1 was said on the way out; the socket belongs to the service manager.
        assert "STOPPING=1" in notify.recv(4096).decode()
        assert os.path.exists(path)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        listener.close()
        notify.close()
        for f in (path, notify_path):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
        os.rmdir(d)


def test_without_socket_or_activation_it_refuses_to_start():
    require_sandbox()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTEN_", "NOTIFY_SOCKET"))}
    p = subprocess.run([DAEMON], env=env, capture_output=True, timeout=WAIT_LIMIT)
    assert p.returncode != 0
    assert b"No --socket given" in p.stderr
