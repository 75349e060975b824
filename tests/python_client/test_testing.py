"""codeinterp.testing: the pytest fixtures and the Daemon class."""
import os

import pytest

from codeinterp import Client, ConnectionLost
from codeinterp.aio import AsyncClient
from codeinterp.testing import Daemon, find_daemon
# The plugin's fixtures, under test (a user enables them with -p codeinterp.testing).
from codeinterp.testing import codeinterp_async_client, codeinterp_client, codeinterp_daemon  # noqa: F401

__all__ = ["codeinterp_async_client", "codeinterp_client", "codeinterp_daemon"]


@pytest.fixture
def codeinterp_policy():
    return "maxOutputCharacters: 1000\nworkerStart: exec\n"


def test_fixture_client_runs_on_the_policy(codeinterp_client, codeinterp_daemon):
    assert isinstance(codeinterp_client, Client)
    h = codeinterp_client.hello()
    assert h.limits.max_output_characters == 1000 and h.policy.worker_start == "exec"
    assert codeinterp_client.execute("print('a' * 1500)", "long").stdout.omitted_characters == 501
    assert codeinterp_daemon.proc.poll() is None and os.path.exists(codeinterp_daemon.socket)


def test_the_async_fixture_is_defined():
    """It is defined only where pytest-asyncio is installed: without it this fails (the
    async test below would only be skipped)."""
    import codeinterp.testing
    assert codeinterp.testing.pytest_asyncio is not None
    assert callable(codeinterp.testing.codeinterp_async_client)


@pytest.mark.asyncio
async def test_async_fixture_client_runs_on_the_policy(codeinterp_async_client, codeinterp_daemon):
    assert isinstance(codeinterp_async_client, AsyncClient)
    h = await codeinterp_async_client.hello()
    assert h.limits.max_output_characters == 1000 and h.policy.worker_start == "exec"
    events = [e async for e in codeinterp_async_client.stream("print('a' * 1500)", "long")]
    assert events[-1].stdout.omitted_characters == 501
    assert (await codeinterp_async_client.status()).pid == codeinterp_daemon.proc.pid


def test_daemon_stops_cleanly_and_leaves_nothing():
    assert find_daemon() == os.path.join(os.environ["CODEINTERP_BUILD"], "bin", "codeinterpd")
    d = Daemon(policy="workerStart: exec\n").wait_ready()
    c = d.connect()
    assert c.status().pid == d.proc.pid
    assert d.stop() == 0
    assert not os.path.exists(d.dir)
    with pytest.raises(ConnectionLost, match=d.socket):
        c.hello()  # stop() closed it


def test_daemon_that_cannot_start_reports_its_log():
    with pytest.raises(RuntimeError, match="codeinterpd exited: .*noSuchKey"):
        Daemon(policy="noSuchKey: 1\n")
