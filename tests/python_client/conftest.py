"""Tests of the Python client (python/codeinterp) against a real supervisor.

Run with: CODEINTERP_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/python_client
(as root; without CODEINTERP_BUILD the supervisor is taken from ./build).
"""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("CODEINTERP_BUILD", os.path.join(ROOT, "build"))

from codeinterp.testing import Daemon, codeinterp_client, codeinterp_daemon, codeinterp_policy, require_sandbox  # noqa: E402

__all__ = ["codeinterp_client", "codeinterp_daemon", "codeinterp_policy"]

NORTHSTAR = """measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours
"""

# A small policy: short output ceiling and deadline, two calls per invocation,
# frequent heartbeats. Every module-scoped daemon runs in the suite's worker start mode.
SMALL_POLICY = "maxOutputCharacters: 100\ntimeoutMs: 3000\nmaxCalls: 2\nheartbeatMs: 50\n"


def policy(text=""):
    return "workerStart: %s\n%s" % (os.environ.get("CODEINTERP_WORKER_START", "zygote"), text)


def started(text=""):
    """A Daemon with the policy text (plus the worker start mode), ready."""
    require_sandbox()
    d = Daemon(policy=policy(text))
    try:
        d.wait_ready()
    except BaseException:
        d.stop()
        raise
    return d


def stop(d):
    log = d.read_log()
    rc = d.stop()
    assert rc == 0, "codeinterpd exited with %r:\n%s" % (rc, log)


@pytest.fixture(scope="module")
def daemon():
    """A supervisor with the default limits, for a whole module."""
    d = started()
    yield d
    stop(d)


@pytest.fixture(scope="module")
def small():
    """A supervisor with SMALL_POLICY, for a whole module."""
    d = started(SMALL_POLICY)
    yield d
    stop(d)


@pytest.fixture
def client(daemon):
    c = daemon.connect(60)
    yield c
    c.close()


@pytest.fixture
def small_client(small):
    c = small.connect(60)
    yield c
    c.close()
