"""The pytest side of testlib, loaded by tests/conftest.py for every suite: the
supervisor fixtures, and which tests run in this configuration.

Fixtures (one name per kind of supervisor):
- make_supervisor(policy=None, extra_args=(), prefix=()): a Supervisor of the test's
  own; stopped after the test, and it must have exited 0.
- supervisor, conn: make_supervisor() with the default policy, and a Conn to it.
- shared_supervisor(policy=<the module's SHARED_POLICY, else None>, extra_args=()): a
  Supervisor shared by the tests of a module that ask for the same policy (started on
  first use, stopped after the module). After each test its connections are closed and
  the test waits until it is idle, so the next test finds it as new (apart from
  counters).
- shared_conn: a Conn to shared_supervisor().
- connect(sup): a new Conn to sup, closed after the test (for tests that hold several
  connections, e.g. invocations of different connections); c: connect(shared_supervisor()).
- fault_env: a testlib.faults.FaultEnv, whose supervisors are tracked in pids cgroups
  and whose faults are undone after the test; no tracking cgroup may be left.
A supervisor's log is printed with the failure of a test that used it. Each must exit 0
and leave none of its worker cgroups behind. With CODEINTERP_TEST_SOCKET, the
default-policy supervisors are the installed one at that socket (testlib.env).

Configurations (testlib.env.dimensions()): a test runs in every configuration that
differs from the reference only in dimensions it is marked with:
  start_mode  what it checks depends on the worker start mode (also run in exec mode)
  rootless    ... on the supervisor running as root or not (also run rootless)
  asan        ... exercises supervisor code worth running under ASan/UBSan
  python      ... depends on the embedded CPython (also run against each other CPython)
CODEINTERP_TEST_ALL=1 runs every test anyway."""
import os

import pytest

from . import cgroups, env, faults
from .supervisor import Conn, Installed, require_sandbox, start
from .waits import wait_idle

MARKERS = {
    "start_mode": "depends on the worker start mode: runs in exec mode too",
    "rootless": "depends on whether the supervisor runs as root: runs rootless too",
    "asan": "exercises supervisor code worth checking under ASan/UBSan: runs against that build too",
    "python": "depends on the embedded CPython: runs against each other CPython too",
    "slow": "takes several seconds (fault injection, soaks)",
}


def pytest_configure(config):
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", "%s: %s" % (name, text))


def pytest_report_header(config):
    dims = env.dimensions()
    where = "build %s, workerStart %s, %s%s, Python %s" % (
        env.BUILD, env.WORKER_START, "rootless as %s" % env.ROOTLESS_USER if env.ROOTLESS else "root",
        ", ASan supervisor" if env.ASAN else "", (env.PYTHON or {}).get("version", "?"))
    if not dims:
        return "codeinterp: %s: the reference configuration, every test" % where
    if env.ALL_TESTS:
        return "codeinterp: %s: every test (CODEINTERP_TEST_ALL=1)" % where
    return "codeinterp: %s: the tests marked %s" % (where, " and ".join(sorted(dims)))


def runs_here(item, dims):
    marks = {m.name for m in item.iter_markers()}
    return dims <= marks


def pytest_collection_modifyitems(config, items):
    dims = env.dimensions()
    if not dims or env.ALL_TESTS:
        return
    keep, drop = [], []
    for item in items:
        (keep if runs_here(item, dims) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the item (rep_setup, rep_call, rep_teardown), so that a
    fixture's teardown can tell whether the test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request):
    return any(getattr(getattr(request.node, "rep_" + w, None), "failed", False) for w in ("setup", "call"))


def _show_log(s, why):
    print("---- codeinterpd log, %s, %s (last 8000 characters) ----\n%s" % (s.socket, why, s.read_log()[-8000:]))


def _stop(s, failed):
    """Stop s; the problems found: its exit status, and worker cgroups left behind."""
    if isinstance(s, Installed):
        s.stop()
        return []
    if failed:
        _show_log(s, "the test failed")
    pid = s.proc.pid
    parents = cgroups.worker_parents(pid) if s.proc.poll() is None else None
    rc = s.stop()
    problems = []
    if rc != 0:
        _show_log(s, "exit status %r" % rc)
        problems.append("codeinterpd %d exited with %r" % (pid, rc))
    left = cgroups.worker_cgroups(pid, parents) if parents else []
    if left:
        problems.append("codeinterpd %d left worker cgroups behind: %r" % (pid, left))
    elif rc == 0 and parents and any(os.path.exists(p) for p in parents):
        problems.append("codeinterpd %d left its cgroup subtree behind: %r" % (pid, parents))
    return problems


@pytest.fixture
def make_supervisor(request):
    if not env.INSTALLED_SOCKET:
        require_sandbox()
    started = []

    def make(policy=None, extra_args=(), prefix=()):
        s = start(policy, extra_args, prefix)
        started.append(s)
        return s

    yield make
    failed = _failed(request)
    problems = []
    for s in started:
        problems += _stop(s, failed)
    assert not problems, "\n".join(problems)


@pytest.fixture
def supervisor(make_supervisor):
    return make_supervisor()


@pytest.fixture
def conn(supervisor):
    return supervisor.connect()


_MODULE_POLICY = object()


@pytest.fixture(scope="module")
def _shared_supervisors():
    started = {}
    yield started
    problems = []
    for s in started.values():
        problems += _stop(s, False)
    assert not problems, "\n".join(problems)


@pytest.fixture
def shared_supervisor(request, _shared_supervisors):
    used = []
    module_policy = getattr(request.module, "SHARED_POLICY", None)

    def get(policy=_MODULE_POLICY, extra_args=()):
        if policy is _MODULE_POLICY:
            policy = module_policy
        key = (policy, tuple(extra_args))
        if key not in _shared_supervisors:
            if not env.INSTALLED_SOCKET:
                require_sandbox()
            _shared_supervisors[key] = start(policy, extra_args)
        s = _shared_supervisors[key]
        assert isinstance(s, Installed) or s.proc.poll() is None, (
            "the shared supervisor has exited: " + s.read_log()[-3000:])
        if s not in used:
            used.append(s)
        return s

    yield get
    failed = _failed(request)
    for s in used:
        if failed and not isinstance(s, Installed):
            _show_log(s, "the test failed")
        s.close_connections()
        if isinstance(s, Installed) or s.proc.poll() is None:
            wait_idle(s)


@pytest.fixture
def shared_conn(shared_supervisor):
    return shared_supervisor().connect()


@pytest.fixture
def connect():
    conns = []

    def make(sup):
        c = Conn(sup.socket)
        conns.append(c)
        return c

    yield make
    for c in conns:
        c.close()


@pytest.fixture
def c(shared_supervisor, connect):
    return connect(shared_supervisor())


@pytest.fixture
def fault_env():
    require_sandbox()
    e = faults.FaultEnv()
    yield e
    e.cleanup()
    left = cgroups.tracking_cgroups_left()
    for d in left:
        try:
            os.rmdir(d)
        except OSError:
            pass
    assert not left, "tracking cgroups left behind: %r" % left
