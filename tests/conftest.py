"""The one conftest of every suite under tests/: the helpers live in tests/lib/testlib
(supervisors, connections, /proc, cgroups, frames, waits), its pytest plugin in
testlib.plugin (fixtures, and which tests run in this configuration: docs/testing.md)."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(_HERE, "lib"), os.path.join(_HERE, "..", "python")):
    _p = os.path.abspath(_p)
    if _p not in sys.path:
        sys.path.insert(0, _p)

pytest_plugins = ["testlib.plugin"]
