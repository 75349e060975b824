"""The tool-face tests run against a real codeinterpd, started by the integration
harness (tests/integration/conftest.py), loaded here under its own name."""
import importlib.util
import os
import shutil
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK_DIR = os.path.join(ROOT, "tests", "sdk-types")
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")
UPDATE_GOLDEN = os.environ.get("CODEINTERP_UPDATE_GOLDEN") == "1"

_spec = importlib.util.spec_from_file_location(
    "codeinterp_integration_harness", os.path.join(ROOT, "tests", "integration", "conftest.py"))
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

CLIENT = harness.CLIENT
NORTHSTAR = harness.NORTHSTAR
make_supervisor = harness.make_supervisor
running_supervisor = harness.running_supervisor
status = harness.status


@pytest.fixture(scope="module")
def msup():
    """One supervisor with the default policy for a whole module."""
    with running_supervisor() as s:
        yield s


def require_node():
    """node and the packages of tests/sdk-types (make sdk-types installs them)."""
    if not shutil.which("node"):
        pytest.fail("node is not installed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "@modelcontextprotocol", "sdk")):
        subprocess.run([os.path.join(ROOT, "scripts", "install-sdk-types.sh")], check=True)
