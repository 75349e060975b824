"""Unit tests for the worker's numeric module (worker/codeinterp_numeric.py): the
chapter's numeric normalization and missingness rules, and the runner's finder that
serves the module to "import codeinterp_numeric" from its embedded text.

Run with: /usr/bin/python3 -m pytest -q tests/python
"""
import importlib.util
import math
import pathlib
import pickle

import pytest

from test_runner import run_isolated

NUMERIC = pathlib.Path(__file__).resolve().parents[2] / "worker" / "codeinterp_numeric.py"


def load_module():
    spec = importlib.util.spec_from_file_location("codeinterp_numeric", NUMERIC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


num = load_module()
NAN = float("nan")
INF = float("inf")


# ---- to_number ----

@pytest.mark.parametrize("x, expected", [
    (9, 9), (-3, -3), (7.5, 7.5), (0.0, 0.0),
    ("9", 9), ("7.5", 7.5), ("1e-1", 0.1), ("-7.5", -7.5), ("+3E2", 300.0), (".5", 0.5), ("9.", 9.0),
    (" 7.5\n", 7.5), ("\t9 ", 9), ("-0", 0),
    ("123456789012345678901234567890", 123456789012345678901234567890),
])
def test_to_number_accepts(x, expected):
    value = num.to_number(x)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("x", [
    "", "   ", True, False, "True", "1,5", "1_000", "0x10", "1e", "e5", ".", "+", "-", ".e1", "1.2.3", "9 kg",
    "nan", "NaN", "inf", "-Infinity", "\u0669", "\uff19", "1e400", "-1e400", NAN, INF, -INF, None, b"9",
    [9], {}, object(),
])
def test_to_number_rejects(x):
    with pytest.raises(num.NumericError):
        num.to_number(x)


def test_to_number_rejects_other_number_types():
    import decimal
    import fractions
    for x in (decimal.Decimal("1.5"), fractions.Fraction(1, 2), 1j):
        with pytest.raises(num.NumericError):
            num.to_number(x)


def test_errors_are_value_errors():
    assert issubclass(num.NumericError, ValueError)
    assert issubclass(num.MissingValueError, num.NumericError)
    with pytest.raises(ValueError, match="booleans"):
        num.to_number(True)


def test_huge_integer_string_is_a_numeric_error():
    with pytest.raises(num.NumericError):
        num.to_number("9" * 5000)  # over sys.get_int_max_str_digits()


# ---- the chapter's cases: [9, None, 7.5] ----

def test_chapter_reject():
    with pytest.raises(num.MissingValueError, match="1 of 3 values missing"):
        num.mean([9, None, 7.5])
    with pytest.raises(num.MissingValueError):
        num.mean([9, None, 7.5], missing="reject")


def test_chapter_omit():
    r = num.mean([9, None, 7.5], missing="omit")
    assert r == num.Aggregate(value=8.25, n=2, missing=1)
    assert (r.value, r.n, r.missing) == (8.25, 2, 1)
    assert repr(r) == "Aggregate(value=8.25, n=2, missing=1)"


def test_chapter_propagate():
    r = num.mean([9, None, 7.5], missing="propagate")
    assert r == num.Aggregate(value=None, n=2, missing=1)
    assert r.value is None


def test_missing_is_never_zero():
    # Silently replacing None with 0 would give 5.5.
    assert num.mean([9, None, 7.5], missing="omit").value != 5.5
    assert num.mean([9, 7.5]) == (8.25, 2, 0)


def test_nan_is_missing():
    assert num.mean([9, NAN, 7.5], missing="omit") == (8.25, 2, 1)
    with pytest.raises(num.MissingValueError):
        num.total([NAN])


def test_strings_go_through_to_number():
    assert num.mean(["9", " 7.5 "]) == (8.25, 2, 0)
    with pytest.raises(num.NumericError, match="index 1"):
        num.mean(["9", ""], missing="omit")
    with pytest.raises(num.NumericError, match="index 0"):
        num.mean(["NA", 9], missing="omit")


def test_bools_rejected_in_aggregates():
    for f in (num.mean, num.total, num.count):
        with pytest.raises(num.NumericError, match="booleans"):
            f([1, True], missing="omit")


def test_malformed_value_raises_whatever_the_policy():
    for missing in num.MISSING_POLICIES:
        with pytest.raises(num.NumericError) as info:
            num.mean([None, "x"], missing=missing)
        assert not isinstance(info.value, num.MissingValueError)


# ---- total, count, edge cases ----

def test_total():
    assert num.total([9, None, 7.5], missing="omit") == (16.5, 2, 1)
    assert num.total([9, None, 7.5], missing="propagate") == (None, 2, 1)
    assert num.total([1, 2, "3"]) == (6, 3, 0)
    assert type(num.total([1, 2]).value) is int
    assert num.total([0.1] * 10).value == 1.0  # fsum: correctly rounded


def test_count_is_the_number_of_present_values():
    assert num.count([9, None, 7.5], missing="omit") == (2, 2, 1)
    assert num.count([9, None, 7.5], missing="propagate") == (None, 2, 1)
    assert num.count([9, 7.5]) == (2, 2, 0)
    with pytest.raises(num.MissingValueError):
        num.count([9, None])


def test_zero_present_values():
    assert num.mean([]) == (None, 0, 0)
    assert num.mean([None, NAN], missing="omit") == (None, 0, 2)
    assert num.total([]) == (0, 0, 0)
    assert num.total([None], missing="omit") == (0, 0, 1)
    assert num.count([]) == (0, 0, 0)


def test_values_may_be_any_iterable_but_not_a_string():
    assert num.mean(x for x in (9, 7.5)) == (8.25, 2, 0)
    assert num.mean((9, 7.5)) == (8.25, 2, 0)
    for bad in ("97", b"97", {"a": 1}, 9):
        with pytest.raises(num.NumericError):
            num.mean(bad)


def test_bad_policy():
    with pytest.raises(ValueError, match="missing must be one of"):
        num.mean([1], missing="zero")


def test_overflow_is_a_numeric_error():
    with pytest.raises(num.NumericError):
        num.total([1e308, 1e308])
    with pytest.raises(num.NumericError):
        num.mean([10 ** 400, 1])
    assert math.isclose(num.mean([1e308, 1e308 / 2]).value, 0.75e308)


def test_aggregate_is_a_named_tuple():
    a = num.Aggregate(8.25, 2, 1)
    assert isinstance(a, tuple) and a == (8.25, 2, 1)
    assert a._fields == ("value", "n", "missing")
    assert a._asdict() == {"value": 8.25, "n": 2, "missing": 1}
    assert a._replace(missing=0) == (8.25, 2, 0)
    assert num.Aggregate._make([1, 2, 3]) == (1, 2, 3)
    value, n, missing = a
    assert (value, n, missing) == (8.25, 2, 1)
    with pytest.raises(AttributeError):
        a.value = 1


def test_aggregate_pickles():
    # By reference to the module: this loader registered it as codeinterp_numeric.
    import sys
    sys.modules["codeinterp_numeric"] = num
    try:
        assert pickle.loads(pickle.dumps(num.Aggregate(8.25, 2, 1))) == (8.25, 2, 1)
    finally:
        del sys.modules["codeinterp_numeric"]


def test_public_names():
    assert set(num.__all__) == {"NumericError", "MissingValueError", "Aggregate", "to_number", "mean", "total",
                                "count"}


# ---- served by the runner (worker/runner.py, NumericModuleFinder) ----

CHAPTER = """
import codeinterp_numeric as n
v = [9, None, 7.5]
try:
    n.mean(v)
except n.MissingValueError as e:
    rejected = type(e).__name__
(rejected, n.mean(v, missing="omit"), n.mean(v, missing="propagate"))
"""


def test_runner_serves_the_module():
    r = run_isolated(CHAPTER)
    assert r["exception"] is False, r["exc_traceback"]
    assert r["result"] == (b"('MissingValueError', Aggregate(value=8.25, n=2, missing=1), "
                           b"Aggregate(value=None, n=2, missing=1))")


def test_runner_module_has_no_file_and_is_not_on_disk():
    r = run_isolated("import codeinterp_numeric as n, sys\n"
                     "(getattr(n, '__file__', None), n.__spec__.origin, [p for p in sys.path if 'worker' in p])")
    assert r["result"] == b"(None, '<codeinterp_numeric>', [])", r["exc_traceback"]


def test_fresh_import_after_builtins_deleted_and_module_removed():
    code = ("import sys, builtins\n"
            "import codeinterp_numeric as first\n"
            "for name in ('len', 'sum', 'isinstance', 'list', 'float', 'int', 'zip', 'ValueError'):\n"
            "    delattr(builtins, name)\n"
            "del sys.modules['codeinterp_numeric']\n"
            "import codeinterp_numeric as second\n"
            "(second is not first, first.mean(['9', None, 7.5], missing='omit'),"
            " second.mean(['9', None, 7.5], missing='omit'))\n")
    r = run_isolated(code)
    assert r["exception"] is False, r["exc_traceback"]
    assert r["result"] == b"(True, Aggregate(value=8.25, n=2, missing=1), Aggregate(value=8.25, n=2, missing=1))"


def test_module_builtins_are_its_own():
    r = run_isolated("import codeinterp_numeric as n, builtins\n"
                     "(n.__builtins__ is builtins.__dict__, type(n.__builtins__).__name__)")
    assert r["result"] == b"(False, 'dict')", r["exc_traceback"]


def test_traceback_shows_the_module_lines():
    r = run_isolated("import codeinterp_numeric as n\nn.to_number('')\n")
    assert r["exc_type"] == "codeinterp_numeric.NumericError"
    assert 'File "<codeinterp_numeric>"' in r["exc_traceback"]
    assert "raise NumericError" in r["exc_traceback"]


def test_without_the_finder_the_import_fails():
    # Documented: user code that removes the finder from sys.meta_path loses the module.
    r = run_isolated("import sys\nsys.meta_path[:] = [f for f in sys.meta_path"
                     " if type(f).__name__ != 'type' or f.__name__ != 'NumericModuleFinder']\n"
                     "import codeinterp_numeric\n")
    assert r["exc_type"] == "ModuleNotFoundError"


def test_a_file_of_the_same_name_does_not_shadow_it(tmp_path):
    (tmp_path / "codeinterp_numeric.py").write_text("FAKE = True\n")
    r = run_isolated(f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
                     "import codeinterp_numeric as n\n(hasattr(n, 'FAKE'), n.__spec__.origin)\n")
    assert r["result"] == b"(False, '<codeinterp_numeric>')", r["exc_traceback"]
