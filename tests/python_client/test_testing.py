"""codeinterp.testing: the pytest fixtures and the Daemon class."""
import os

import pytest

from codeinterp import Client
from codeinterp.testing import Daemon, find_daemon
# The plugin's fixtures, under test (a user enables them with -p codeinterp.testing).
from codeinterp.testing import codeinterp_client, codeinterp_daemon  # noqa: F401

__all__ = ["codeinterp_client", "codeinterp_daemon"]


@pytest.fixture
def codeinterp_policy():
    return "maxOutputCharacters: 1000\nworkerStart: exec\n"


def test_fixture_client_runs_on_the_policy(codeinterp_client, codeinterp_daemon):
    assert isinstance(codeinterp_client, Client)
    h = codeinterp_client.hello()
    assert h.limits.max_output_characters == 1000 and h.policy.worker_start == "exec"
    assert codeinterp_client.execute("print('a' * 1500)", "long").stdout.omitted_characters == 501
    assert codeinterp_daemon.proc.poll() is None and os.path.exists(codeinterp_daemon.socket)


def test_daemon_stops_cleanly_and_leaves_nothing():
    assert find_daemon() == os.path.join(os.environ["CODEINTERP_BUILD"], "bin", "codeinterpd")
    d = Daemon(policy="workerStart: exec\n").wait_ready()
    c = d.connect()
    assert c.status().pid == d.proc.pid
    assert d.stop() == 0
    assert not os.path.exists(d.dir)
    with pytest.raises(OSError):
        c.hello()  # stop() closed it


def test_daemon_that_cannot_start_reports_its_log():
    with pytest.raises(RuntimeError, match="codeinterpd exited: .*noSuchKey"):
        Daemon(policy="noSuchKey: 1\n")
