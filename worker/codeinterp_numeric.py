"""The numeric rules of a calculation: which values are numbers, and what
happens to missing ones.

    >>> from codeinterp_numeric import to_number, mean
    >>> to_number(" 7.5 ")
    7.5
    >>> mean([9, None, 7.5], missing="omit")
    Aggregate(value=8.25, n=2, missing=1)

Numbers. to_number(x) accepts an int, a finite float, or a string holding
one finite decimal number in plain ASCII notation ("9", "-7.5", ".5", "1e-1",
"+3E2"), with surrounding whitespace allowed and stripped. An integer
string gives an int, any other a float. It raises NumericError for
everything else: booleans, empty or blank strings, malformed numbers
("1,5", "1_000", "0x10", "nan", "inf", non-ASCII digits), infinities and
NaN, numbers too large for a float, and other types (Decimal, Fraction,
bytes, None, ...: convert them explicitly first).

Missing values. In mean(), total() and count() the values None and a float
NaN are missing; nothing else is (an empty string or "NA" is rejected by
to_number, not treated as missing: map such markers to None yourself).
Missing is never zero. Every other value goes through to_number(), so
numeric strings are accepted and booleans rejected. The policy, the same
for all three functions:

    missing="reject"     (the default) raise MissingValueError when any value
                         is missing
    missing="omit"       compute over the present values; the result says
                         how many were left out
    missing="propagate"  the value is None when any value is missing

Each returns Aggregate(value, n, missing): n is the number of present
values, missing the number of missing ones (always counted, whatever the
policy). On [9, None, 7.5]:

    mean(v)                      MissingValueError
    mean(v, missing="omit")      Aggregate(value=8.25, n=2, missing=1)
    mean(v, missing="propagate") Aggregate(value=None, n=2, missing=1)

mean() of zero present values has value None (there is nothing to average;
never 0). total() of zero present values is 0, the empty sum; n=0 says so.
count()'s value is the number of present values, n (None under
"propagate" when a value is missing, like every aggregate). total() of ints
is an exact int; with a float among the values it is a correctly rounded
float (math.fsum). A total or mean that overflows raises NumericError.

This module is part of the codeinterp worker, not of the standard library:
the worker's binary carries it and serves it to "import codeinterp_numeric".
"""

import math as _math

__all__ = ["NumericError", "MissingValueError", "Aggregate", "to_number", "mean", "total", "count"]

MISSING_POLICIES = ("reject", "omit", "propagate")

# Nothing here calls into the standard library's Python code at import time (no re,
# no collections.namedtuple): the worker imports this module again after user code
# removed it from sys.modules, and that code may have deleted builtins, which the
# stdlib's Python code needs. The module itself runs with its own copy of the
# builtins (worker/runner.py, NumericModuleFinder).
_DIGITS = frozenset("0123456789")
_SIGNS = frozenset("+-")
_EXPONENT = frozenset("eE")
_WHITESPACE = " \t\n\r\f\v"


class NumericError(ValueError):
    """A value that is not a finite number where one is required."""


class MissingValueError(NumericError):
    """A missing value (None or NaN) under missing="reject"."""


class Aggregate(tuple):
    """Aggregate(value, n, missing), a named tuple: value (None when undefined or
    missing), n present values, missing values (left out or propagated)."""

    __slots__ = ()
    _fields = ("value", "n", "missing")
    __match_args__ = _fields

    def __new__(cls, value, n, missing):
        return tuple.__new__(cls, (value, n, missing))

    @classmethod
    def _make(cls, iterable):
        result = tuple.__new__(cls, iterable)
        if len(result) != 3:
            raise TypeError(f"expected 3 arguments, got {len(result)}")
        return result

    def _replace(self, **changes):
        fields = dict(zip(self._fields, self))
        for name in changes:
            if name not in fields:
                raise ValueError(f"got unexpected field name {name!r}")
        fields.update(changes)
        return type(self)(**fields)

    def _asdict(self):
        return dict(zip(self._fields, self))

    def __repr__(self):
        return f"Aggregate(value={self[0]!r}, n={self[1]!r}, missing={self[2]!r})"

    def __getnewargs__(self):
        return tuple(self)

    value = property(lambda self: self[0], doc="the aggregate, or None")
    n = property(lambda self: self[1], doc="the number of present values")
    missing = property(lambda self: self[2], doc="the number of missing values")


def _is_decimal(text):
    """None if text is not one ASCII decimal number, else True for an integer
    ("-12") and False for one with a point or an exponent ("1.", ".5", "1e-1")."""
    i, n = 0, len(text)
    if i < n and text[i] in _SIGNS:
        i += 1
    start = i
    while i < n and text[i] in _DIGITS:
        i += 1
    digits = i - start
    integer = True
    if i < n and text[i] == ".":
        integer = False
        i += 1
        start = i
        while i < n and text[i] in _DIGITS:
            i += 1
        digits += i - start
    if digits == 0:
        return None
    if i < n and text[i] in _EXPONENT:
        integer = False
        i += 1
        if i < n and text[i] in _SIGNS:
            i += 1
        start = i
        while i < n and text[i] in _DIGITS:
            i += 1
        if i == start:
            return None
    return integer if i == n else None


def _describe(x):
    text = repr(x)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(x).__name__})"


def to_number(x):
    """x as an int or a finite float, or raise NumericError (see the module's doc)."""
    if isinstance(x, bool):
        raise NumericError(f"not a number: {_describe(x)}: booleans are not numbers")
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        if not _math.isfinite(x):
            raise NumericError(f"not a finite number: {_describe(x)}")
        return float(x)
    if isinstance(x, str):
        text = x.strip(_WHITESPACE)
        if not text:
            raise NumericError(f"not a number: {_describe(x)}: the string is empty")
        integer = _is_decimal(text)
        if integer is None:
            raise NumericError(f"not a number: {_describe(x)}: not a decimal number")
        try:
            if integer:
                return int(text)
            value = float(text)
        except (ValueError, OverflowError) as e:  # e.g. more than sys.get_int_max_str_digits()
            raise NumericError(f"not a number: {_describe(x)}: {e}") from None
        if not _math.isfinite(value):
            raise NumericError(f"not a finite number: {_describe(x)}: too large for a float")
        return value
    raise NumericError(f"not a number: {_describe(x)}: expected an int, a float or a numeric string")


def _is_missing(x):
    return x is None or (isinstance(x, float) and x != x)


def _present(values, missing):
    """(present values as numbers, number of missing values), or raise."""
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {', '.join(map(repr, MISSING_POLICIES))}, not {missing!r}")
    if isinstance(values, (str, bytes, bytearray, dict)):
        raise NumericError(f"values must be a sequence of values, not {type(values).__name__}")
    try:
        items = list(values)
    except TypeError:
        raise NumericError(f"values must be an iterable of values, not {type(values).__name__}") from None
    present = []
    absent = []
    for index, x in enumerate(items):
        if _is_missing(x):
            absent.append(index)
            continue
        try:
            present.append(to_number(x))
        except NumericError as e:
            raise NumericError(f"value at index {index}: {e}") from None
    if absent and missing == "reject":
        raise MissingValueError(
            f"{len(absent)} of {len(items)} values missing (first at index {absent[0]}); "
            "choose missing=\"omit\" or missing=\"propagate\" if that is intended")
    return present, len(absent)


def _sum(numbers):
    if all(isinstance(x, int) for x in numbers):
        return sum(numbers)
    try:
        value = _math.fsum(numbers)
    except OverflowError:
        value = _math.inf
    if not _math.isfinite(value):
        raise NumericError("the total is too large for a float")
    return value


def total(values, missing="reject"):
    """Aggregate(sum of the present values, n, missing); see the module's doc."""
    present, absent = _present(values, missing)
    if absent and missing == "propagate":
        return Aggregate(None, len(present), absent)
    return Aggregate(_sum(present), len(present), absent)


def mean(values, missing="reject"):
    """Aggregate(mean of the present values, n, missing); see the module's doc."""
    present, absent = _present(values, missing)
    n = len(present)
    if (absent and missing == "propagate") or n == 0:
        return Aggregate(None, n, absent)
    try:
        value = _sum(present) / n
    except OverflowError:
        raise NumericError("the mean is too large for a float") from None
    return Aggregate(value, n, absent)


def count(values, missing="reject"):
    """Aggregate(number of present values, n, missing); see the module's doc."""
    present, absent = _present(values, missing)
    if absent and missing == "propagate":
        return Aggregate(None, len(present), absent)
    return Aggregate(len(present), len(present), absent)
