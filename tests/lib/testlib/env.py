"""Where the tests run: the build under test, the configuration it stands for, and the
knobs of the run (all from the environment, read once).

The reference configuration is: worker start mode zygote, a supervisor run by root,
the plain build, the interpreter the default build embeds (Debian's /usr/bin/python3).
Every test runs there. A run that differs in some dimension (CODEINTERP_WORKER_START=
exec, CODEINTERP_ROOTLESS_USER, a supervisor built with ASan, another CPython) runs only
the tests marked as depending on each dimension it changes (testlib.plugin,
docs/testing.md "Configurations and markers")."""
import json
import os

SOURCE_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.path.abspath(os.environ.get("CODEINTERP_BUILD") or os.path.join(SOURCE_ROOT, "build"))
DAEMON = os.path.join(BUILD, "bin", "codeinterpd")
CLIENT = os.path.join(BUILD, "bin", "codeinterp")

# The worker start mode of the supervisors the tests start; a policy that names
# workerStart itself keeps its choice.
WORKER_START = os.environ.get("CODEINTERP_WORKER_START", "zygote")
if WORKER_START not in ("zygote", "exec"):
    raise RuntimeError("CODEINTERP_WORKER_START must be zygote or exec, not %r" % WORKER_START)

# Rootless mode (make test-rootless, scripts/test-rootless.sh): every supervisor of the
# run starts as this unprivileged user, created for the run. Unset: as root.
ROOTLESS_USER = os.environ.get("CODEINTERP_ROOTLESS_USER") or None
ROOTLESS = ROOTLESS_USER is not None

# A supervisor the tests did not start: CODEINTERP_TEST_SOCKET names its socket (the
# installed service under a booted systemd, tests/package/nspawn_e2e.py). The fixtures'
# default-policy supervisors are that one; a test that needs a policy of its own fails
# saying so.
INSTALLED_SOCKET = os.environ.get("CODEINTERP_TEST_SOCKET") or None

# CI (.ci/run): a sandboxing test that cannot run fails instead of skipping.
MUST_SANDBOX = os.environ.get("CODEINTERP_MUST_SANDBOX") == "1"

# Run every test whatever the configuration (by hand: the whole suite against another
# CPython, rootless, or the ASan supervisor).
ALL_TESTS = os.environ.get("CODEINTERP_TEST_ALL") == "1"

# How long any wait may take before the test fails as hung. Never an expected duration:
# every wait ends on the event it waits for, this only bounds a wait for an event that
# never comes (docs/testing.md, "Waits").
WAIT_LIMIT = float(os.environ.get("CODEINTERP_TEST_WAIT_LIMIT", "60"))

REFERENCE_PYTHON = "/usr/bin/python3"


def _python_facts():
    """The embedded Python this build chose: BUILD/python.json, written by
    cmake/python.cmake (interpreter, version, stdlib, dynload, libdir, runtime binds)."""
    path = os.path.join(BUILD, "python.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


PYTHON = _python_facts()


def require_python_facts():
    if PYTHON is None:
        raise RuntimeError("%s is missing: reconfigure the build (cmake -S . -B %s, or make build)" % (
            os.path.join(BUILD, "python.json"), BUILD))
    return PYTHON


def _asan_build():
    """True when the supervisor under test is built with ASan (make integration-asan)."""
    try:
        with open(DAEMON, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


ASAN = _asan_build()


def dimensions():
    """The dimensions in which this run differs from the reference configuration: a
    subset of {"start_mode", "rootless", "asan", "python"} (the markers' names)."""
    out = set()
    if WORKER_START != "zygote":
        out.add("start_mode")
    if ROOTLESS:
        out.add("rootless")
    if ASAN:
        out.add("asan")
    if PYTHON is not None and PYTHON.get("interpreter") != REFERENCE_PYTHON:
        out.add("python")
    return out


def runtime_ancestors():
    """The directories the worker's root has only because a runtime bind lies below them
    (e.g. /root for a pyenv interpreter): empty tmpfs directories, not the host's."""
    out = set()
    for p in require_python_facts()["runtime"]:
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            out.add("/" + "/".join(parts[:i]))
    return out
