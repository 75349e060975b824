"""Issue 24: a pre-started worker runs its warm-up (worker/pyrun.c, pyrun_warmup: a float
result and, with pandas preloaded, a frame built and a column reduced) while it waits,
so the pages the call writes are copied before the call exists. Nothing of the warm-up
may reach the call: its __main__ holds only what a fresh interpreter's does, and the
values it computed are nowhere the code can see them."""
import os

import pytest

from testlib import PYTHON, proc, running_supervisor, value
from testlib.waits import wait_for

pytestmark = [pytest.mark.python]

# The runner's own names (input_files, input_assets) and nothing else.
CHECK = ("(sorted(k for k in globals() if not k.startswith('__')), hasattr(__import__('sys'), 'last_value'), "
         "hasattr(__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__), '_'), "
         "sum([9.0, 7.5]) / 2)")
FRESH = "(['input_assets', 'input_files'], False, False, 8.25)"
PANDAS = "import pandas as pd; pd.DataFrame({'h': [9.0, 7.5]})['h'].mean()"


def calls_after_warm_up(policy, codes):
    out = []
    with running_supervisor(policy + "workerStart: zygote\ntimeoutMs: 120000\n") as s:
        c = s.connect()
        for code in codes:
            wait_for(lambda: proc.pool_prepared(s.pid), what="pre-started workers done with their warm-up")
            out.append(value(c.execute(code)))
        c.close()
    return out


def test_warm_up_leaves_nothing_default_policy():
    assert calls_after_warm_up("", [CHECK, CHECK]) == [FRESH] * 2


def test_warm_up_leaves_nothing_data_policy():
    if not all(PYTHON.get("packages", {}).get(p) for p in ("numpy", "pandas", "matplotlib")):
        pytest.skip("this build's Python lacks the preloaded packages")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "policy-data.yaml")) as f:
        data = f.read()
    got = calls_after_warm_up(data, [CHECK, PANDAS, CHECK])
    assert got == [FRESH, "8.25", FRESH]
