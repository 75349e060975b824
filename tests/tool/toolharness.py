"""Shared by the tool-face tests: paths, the golden switch, and the integration harness
(tests/integration/conftest.py: a real codeinterpd on a temporary socket), reused as it is."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK_DIR = os.path.join(ROOT, "tests", "sdk-types")
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")
UPDATE_GOLDEN = os.environ.get("CODEINTERP_UPDATE_GOLDEN") == "1"
_HARNESS_PATH = os.path.join(ROOT, "tests", "integration", "conftest.py")


def _load_harness():
    # When pytest already loaded it (one session over both folders), use that module.
    mod = sys.modules.get("conftest")
    if mod is not None and os.path.abspath(getattr(mod, "__file__", "")) == _HARNESS_PATH:
        return mod
    spec = importlib.util.spec_from_file_location("codeinterp_integration_harness", _HARNESS_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


harness = _load_harness()
CLIENT = harness.CLIENT
NORTHSTAR = harness.NORTHSTAR
running_supervisor = harness.running_supervisor
status = harness.status


def require_node():
    """node and the packages of tests/sdk-types (make sdk-types installs them)."""
    if not shutil.which("node"):
        pytest.fail("node is not installed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "@modelcontextprotocol", "sdk")):
        subprocess.run([os.path.join(ROOT, "scripts", "install-sdk-types.sh")], check=True)


# Fixtures: a test module takes them with `msup = toolharness.msup` (there is no
# conftest.py here, so that one pytest session can hold tests/integration and tests/tool,
# whose conftest.py would both be imported as "conftest").
make_supervisor = harness.make_supervisor


@pytest.fixture(scope="module")
def msup():
    """One supervisor with the default policy for a whole module."""
    with running_supervisor() as s:
        yield s
