"""Shared by the tool-face tests: paths and the golden switch. Supervisors, connections
and fixtures come from the tests' one helper module (tests/lib/testlib)."""
import os
import shutil
import subprocess

import pytest

from testlib import CLIENT, NORTHSTAR, status

__all__ = ["CLIENT", "NORTHSTAR", "status"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SDK_DIR = os.path.join(ROOT, "tests", "sdk-types")
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")
UPDATE_GOLDEN = os.environ.get("CODEINTERP_UPDATE_GOLDEN") == "1"
def require_node():
    """node and the packages of tests/sdk-types (make sdk-types installs them)."""
    if not shutil.which("node"):
        pytest.fail("node is not installed (scripts/install-deps.sh installs it)")
    if not os.path.isdir(os.path.join(SDK_DIR, "node_modules", "@modelcontextprotocol", "sdk")):
        subprocess.run([os.path.join(ROOT, "scripts", "install-sdk-types.sh")], check=True)
