"""codeinterp_numeric over the real socket, in the worker start mode of the run
(CODEINTERP_WORKER_START=zygote|exec): importable in every call, the chapter's
numeric and missingness cases, preloaded in zygote workers, imported lazily in exec
workers, served from the worker binary and not from the worker's root. The numeric
rules depend on the CPython (python); how the module is served on the start mode."""
import pytest

from testlib import PYTHON, WORKER_START, execute_once

pytestmark = pytest.mark.python


@pytest.fixture
def msup(shared_supervisor):
    return shared_supervisor()


def run(sup, code):
    return execute_once(sup.socket, code)


def ok_value(r):
    assert r["outcome"] == "ok", r.get("exception")
    return r["result"]["text"]


def test_chapter_cases(msup):
    r = run(msup, "from codeinterp_numeric import mean, MissingValueError\n"
                  "v = [9, None, 7.5]\n"
                  "try:\n"
                  "    mean(v, missing='reject')\n"
                  "except MissingValueError as e:\n"
                  "    print('reject:', type(e).__name__, isinstance(e, ValueError))\n"
                  "print('omit:', mean(v, missing='omit'))\n"
                  "print('propagate:', mean(v, missing='propagate'))\n"
                  "mean(v, missing='omit').value\n")
    assert ok_value(r) == "8.25"
    assert r["stdout"]["text"] == ("reject: MissingValueError True\n"
                                   "omit: Aggregate(value=8.25, n=2, missing=1)\n"
                                   "propagate: Aggregate(value=None, n=2, missing=1)\n")


def test_reject_is_a_python_exception(msup):
    r = run(msup, "import codeinterp_numeric\ncodeinterp_numeric.mean([9, None, 7.5])\n")
    assert r["outcome"] == "python_exception"
    assert r["exception"]["type"] == "codeinterp_numeric.MissingValueError"
    assert "1 of 3 values missing" in r["exception"]["message"]["text"]
    assert 'File "<codeinterp_numeric>"' in r["exception"]["traceback"]["text"]


def test_to_number_cases(msup):
    code = ("from codeinterp_numeric import to_number, NumericError\n"
            "def check(x):\n"
            "    try:\n"
            "        return to_number(x)\n"
            "    except NumericError:\n"
            "        return 'rejected'\n"
            "[check(x) for x in ['9', '7.5', '1e-1', ' 7.5 ', '', True, 'abc', 'inf', float('nan'), '1e400']]\n")
    assert ok_value(run(msup, code)) == "[9, 7.5, 0.1, 7.5, 'rejected', 'rejected', 'rejected', 'rejected', " \
                                        "'rejected', 'rejected']"


@pytest.mark.start_mode
def test_preloaded_in_zygote_lazy_in_exec(msup):
    v = ok_value(run(msup, "import sys\n'codeinterp_numeric' in sys.modules\n"))
    assert v == ("True" if WORKER_START == "zygote" else "False")
    assert ok_value(run(msup, "import codeinterp_numeric\ncodeinterp_numeric.count([1, None], 'omit')")) == \
        "Aggregate(value=1, n=1, missing=1)"


@pytest.mark.start_mode
def test_served_from_the_binary_not_the_root(msup):
    code = ("import os, sys, codeinterp_numeric as n\n"
            "found = [os.path.join(d, f) for d in sys.path if os.path.isdir(d)\n"
            "         for f in os.listdir(d) if f.startswith('codeinterp')]\n"
            "(n.__spec__.origin, getattr(n, '__file__', None), found)\n")
    assert ok_value(run(msup, code)) == "('<codeinterp_numeric>', None, [])"


# From 3.12 on, importlib's own module lock calls len() when it is released, so with
# len deleted every import fails with NameError, whatever the finder: len stays.
DELETED_BUILTINS = ("sum", "isinstance", "list", "float") + (
    ("len",) if tuple(int(x) for x in PYTHON["version"].split(".")[:2]) < (3, 12) else ())


def test_survives_deleted_builtins_and_cleared_module(msup):
    code = ("import sys, builtins\n"
            "import codeinterp_numeric as first\n"
            "for name in %r:\n"
            "    delattr(builtins, name)\n" % (DELETED_BUILTINS,) +
            "del sys.modules['codeinterp_numeric']\n"
            "import codeinterp_numeric as second\n"
            "(second is first, first.mean([9, None, 7.5], missing='omit'), second.total(['9', 7.5]))\n")
    assert ok_value(run(msup, code)) == \
        "(False, Aggregate(value=8.25, n=2, missing=1), Aggregate(value=16.5, n=2, missing=0))"


@pytest.mark.start_mode
def test_no_state_carries_into_the_next_call(msup):
    run(msup, "import codeinterp_numeric as n\nn.mean = lambda *a, **k: 0\n")
    assert ok_value(run(msup, "import codeinterp_numeric as n\nn.mean([9, 7.5]).value\n")) == "8.25"
