"""Core slice: one Python call in a fresh isolated worker, end to end.

Markers (docs/testing.md): the runner's rules depend on the CPython (python); what a
fresh worker holds depends on how it was made (start_mode, rootless); the fitting is the
supervisor's (asan)."""
import hashlib

import msgpack
import pytest

from testlib import NORTHSTAR, Conn, ok, proc, raised, recv_result_frame, status
from testlib.waits import check_mount_namespace_held, start_held


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
@pytest.mark.python
def test_northstar(conn):
    r = conn.execute(NORTHSTAR)
    assert r["type"] == "result"
    assert r["outcome"] == "ok"
    assert r["result"]["text"] == "8.25"
    assert r["stdout"]["text"] == ""
    assert r["exception"] is None
    ev = r["evidence"]
    assert len(ev["codeSha256"]) == 64
    assert ev["policy"]["name"] == "code_interpreter"


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_the_worker_mount_namespace_is_torn_down_after_its_result(make_supervisor):
    """The supervisor holds the worker's mount namespace from the worker's release
    until the result is on its way, so that the worker's exit, which the result waits
    for, does not also tear down its root's and /tmp's filesystems; then it lets go of
    it. (test_confinement.py: also with the shipped capabilities; test_faults.py: a
    namespace that cannot be held is done without.)"""
    sup = make_supervisor()
    c = sup.connect()
    check_mount_namespace_held(sup, c)
    c.close()


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.asan
def test_the_call_runs_at_the_supervisor_priority(make_supervisor):
    """A pre-started worker may prepare at a lower priority, but its call's code runs at
    the supervisor's, however it is confined (test_confinement.py: the unit's
    capabilities, with and without CAP_SYS_NICE)."""
    sup = make_supervisor()
    c = sup.connect()
    call = start_held(sup, c, after="1")
    pid = call.wait_holding()
    assert proc.nice(pid) == proc.nice(status(sup)["pid"])
    assert ok(call.finish())["result"]["text"] == "1"
    c.close()


# ---------------------------------------------------------------------------------------
# The rest of the core slice runs against one supervisor (default policy) per module.


def result_text(r):
    return None if r["result"] is None else r["result"]["text"]


def assert_consistent(ch):
    """The fitting identities every channel must keep."""
    assert ch["totalCharacters"] == len(ch["text"]) + ch["omittedCharacters"]
    assert ch["totalBytes"] == len(ch["text"].encode("utf-8")) + ch["omittedBytes"]


def assert_channel(ch, **fields):
    """ch has these fields (their wire names) with these values, and keeps the fitting
    identities."""
    assert {k: ch[k] for k in fields} == fields
    assert_consistent(ch)


# ---- the interactive rule ----

@pytest.mark.python
@pytest.mark.parametrize("code, stdout, result", [
    ("1 + 1", "", "2"),
    ("1 + 1;", "", None),                       # a trailing ';' suppresses the value
    ("x = 6\nx * 7  ;  # quiet", "", None),
    ("x = 6\nx * 7  # a comment; not a suppression", "", "42"),
    ("x = 1; x", "", "1"),                      # the last statement on the line counts
    ("None", "", None),                         # None is not shown
    ("def f():\n    pass\nf()", "", None),
    ("print('hello')", "hello\n", None),        # print returns None: nothing shown
    ("print('a'); print('b', end='')\n'é' * 2", "a\nb", "'éé'"),
    ("x = 5", "", None),                        # an assignment shows nothing
    ("for i in range(3):\n    print(i)", "0\n1\n2\n", None),
    ("x = 1\r\nx + 1", "", "2"),                  # CRLF line endings
    ("\ufeff1 + 1", "", "2"),                      # a byte-order mark
    ("1 + 1 \\\n;", "", None),                     # ';' after a line continuation
])
def test_interactive_rule(shared_conn, code, stdout, result):
    r = ok(shared_conn.execute(code))
    assert r["stdout"]["text"] == stdout
    assert result_text(r) == result
    assert r["exception"] is None
    assert r["partial"] is False


@pytest.mark.python
@pytest.mark.parametrize("code, result, warnings", [
    ("1 is 1", "True", 1),                      # one expression: compiled on the fast path
    ("1 is 1; 2 is 2", "True", 2),              # statements: the full path, each warned once
    ("x = 1 is 1\nx", "True", 1),
    ("(1 is 1) + (\n", None, 0),                 # a syntax error reports no warning twice
    (" 1 is 1", None, 0),                       # the indentation error of the full path
    ("(1 is 1) + (yield)", None, 1),            # warned, then refused by the compiler
])
def test_compile_time_warnings_appear_once(shared_conn, code, result, warnings):
    r = shared_conn.execute(code)
    assert r["stderr"]["text"].count("SyntaxWarning") == warnings, r["stderr"]
    assert result_text(r) == result
    assert (r["outcome"] == "ok") == (result is not None), r


@pytest.mark.start_mode
@pytest.mark.python
def test_user_code_sees_pristine_warning_filters(shared_conn):
    """The runner's fast path adds a filter while it compiles; it is gone before the
    code runs."""
    r = ok(shared_conn.execute("import warnings\nwarnings.filters[0]"))
    assert "error" not in result_text(r), r["result"]
    r = ok(shared_conn.execute("import warnings\nlen(warnings.filters)"))
    assert result_text(r) == str(len(PRISTINE_FILTERS)), r["result"]


PRISTINE_FILTERS = [
    ("default", "DeprecationWarning", "__main__"),
    ("ignore", "DeprecationWarning"),
    ("ignore", "PendingDeprecationWarning"),
    ("ignore", "ImportWarning"),
    ("ignore", "ResourceWarning"),
]


@pytest.mark.python
def test_syntax_error_runs_nothing(shared_conn):
    r = shared_conn.execute("print('side effect')\nx = (1 +\n")
    exc = raised(r, "SyntaxError")
    # The whole cell is compiled before any of it runs.
    assert r["stdout"]["text"] == ""
    assert exc["message"]["text"]
    tb = exc["traceback"]["text"]
    assert "SyntaxError" in tb and "<code>" in tb


@pytest.mark.python
def test_zero_division(shared_conn):
    r = shared_conn.execute("print('before')\nx = 1\nx / 0\nprint('after')")
    exc = raised(r, "ZeroDivisionError", "division by zero")
    assert r["stdout"]["text"] == "before\n"
    tb = exc["traceback"]["text"]
    assert tb.startswith("Traceback (most recent call last):\n")
    assert 'File "<code>", line 3' in tb
    assert tb.endswith("ZeroDivisionError: division by zero\n")
    # Only the user's frames: nothing of the runner.
    assert "codeinterp-runner" not in tb
    assert r["limit"] is None


@pytest.mark.python
def test_exception_in_repr_of_value(shared_conn):
    r = shared_conn.execute("class A:\n    def __repr__(self):\n        raise ValueError('bad repr')\nA()")
    raised(r, "ValueError", "bad repr")


@pytest.mark.start_mode
@pytest.mark.asan
def test_evidence_and_timing(shared_conn):
    code = "print('é')\n6 * 7"
    r = ok(shared_conn.execute(code))
    ev = r["evidence"]
    assert ev["codeSha256"] == hashlib.sha256(code.encode("utf-8")).hexdigest()
    assert ev["codeCharacters"] == len(code)
    assert ev["inputs"] == []
    assert ev["runtime"]["workerStart"] == shared_conn.call("hello")["policy"]["workerStart"]
    t = r["timing"]
    assert t["workerStarted"] is True
    assert t["queueMs"] + t["runMs"] <= t["elapsedMs"] + 1
    assert r["exitStatus"]["code"] == 0 and r["exitStatus"]["signal"] is None


@pytest.mark.python
def test_qualified_exception_type(shared_conn):
    raised(shared_conn.execute("import json\njson.loads('{')"), "json.decoder.JSONDecodeError")


@pytest.mark.python
@pytest.mark.parametrize("code", ["raise SystemExit(0)", "import sys\nsys.exit(0)"])
def test_system_exit_zero_is_an_exception(shared_conn, code):
    r = shared_conn.execute(code)
    assert r["type"] == "result"
    raised(r, "SystemExit", "0")


# ---- every call starts from nothing ----

SET_STATE = """GLOBAL_CANARY = 'set'
import math, builtins
math.pi = 3
builtins.BUILTIN_CANARY = 1
with open('/tmp/canary-file', 'w') as f:
    f.write('still here')
(GLOBAL_CANARY, math.pi, open('/tmp/canary-file').read())
"""

CHECK_STATE = """import math, os, builtins
('GLOBAL_CANARY' in globals(), math.pi, hasattr(builtins, 'BUILTIN_CANARY'), os.path.exists('/tmp/canary-file'))
"""


@pytest.mark.start_mode
@pytest.mark.rootless
@pytest.mark.python
def test_fresh_state_same_connection(shared_conn):
    assert result_text(ok(shared_conn.execute(SET_STATE))) == "('set', 3, 'still here')"
    assert result_text(ok(shared_conn.execute(CHECK_STATE))) == "(False, 3.141592653589793, False, False)"


@pytest.mark.start_mode
@pytest.mark.rootless
def test_fresh_state_new_connection(shared_supervisor):
    msup = shared_supervisor()
    a = Conn(msup.socket)
    try:
        assert result_text(ok(a.execute(SET_STATE))) == "('set', 3, 'still here')"
    finally:
        a.close()
    b = Conn(msup.socket)
    try:
        assert result_text(ok(b.execute(CHECK_STATE))) == "(False, 3.141592653589793, False, False)"
    finally:
        b.close()


# ---- output fitting: head 3/4, tail 1/4 of maxOutputCharacters (64000), exact counts ----

@pytest.mark.asan
def test_stdout_fitting_exact(shared_conn):
    r = ok(shared_conn.execute("print('é' * 70000)"))
    out = r["stdout"]
    # 70000 'é' + '\n'; head 48000 characters, tail 16000 (incl. the newline).
    assert_channel(out, totalCharacters=70001, totalBytes=140001, omittedCharacters=6001, omittedBytes=12002,
                   omittedAt=48000, replacedCharacters=0, text="é" * 63999 + "\n")
    assert len(out["text"]) == 64000
    assert r["stderr"]["text"] == "" and r["stderr"]["totalCharacters"] == 0


@pytest.mark.asan
def test_stderr_fitting_exact(shared_conn):
    r = ok(shared_conn.execute("import sys\nsys.stderr.write('é' * 70000);"))
    err = r["stderr"]
    assert_channel(err, totalCharacters=70000, totalBytes=140000, omittedCharacters=6000, omittedBytes=12000,
                   omittedAt=48000, text="é" * 64000)
    assert r["stdout"]["totalCharacters"] == 0
    assert r["result"] is None


@pytest.mark.asan
def test_result_fitting_exact(shared_conn):
    r = ok(shared_conn.execute("'x' * 100000"))
    res = r["result"]
    # repr adds the two quotes: 100002 characters.
    assert_channel(res, totalCharacters=100002, totalBytes=100002, omittedCharacters=36002, omittedBytes=36002,
                   omittedAt=48000, text="'" + "x" * 63998 + "'")


def raw_result(sup, code):
    """(the result frame as it came, the result) of code, on a connection of its own."""
    c = Conn(sup.socket)
    try:
        return recv_result_frame(c, c.request("execute", summary="big", code=code, sourceIds=[]))
    finally:
        c.close()


@pytest.mark.asan
def test_result_message_bounded_by_max_result_bytes(shared_supervisor):
    """Three large channels: the whole frame stays within maxResultBytes and every
    channel's counts still add up."""
    raw, r = raw_result(shared_supervisor(),
                        "import sys\nprint('€' * 64000)\nsys.stderr.write('€' * 64000)\n'€' * 100000")
    assert r["type"] == "result" and r["outcome"] == "ok", r.get("detail")
    max_bytes = r["evidence"]["limits"]["maxResultBytes"]
    assert max_bytes == 262144
    assert len(raw) <= max_bytes
    assert len(msgpack.packb(r, use_bin_type=True)) <= max_bytes
    expected = {"stdout": (64001, 192001), "stderr": (64000, 192000), "result": (100002, 300002)}
    for name, (chars, nbytes) in expected.items():
        ch = r[name]
        assert ch["totalCharacters"] == chars, name
        assert ch["totalBytes"] == nbytes, name
        assert ch["omittedCharacters"] > 0, name
        assert_consistent(ch)
        # What is kept is a head and a tail of the real output.
        head = ch["text"][:ch["omittedAt"]]
        tail = ch["text"][ch["omittedAt"]:]
        assert set(head) <= set("€'\n") and set(tail) <= set("€'\n"), name
    assert r["stdout"]["text"].endswith("€\n")
    assert r["result"]["text"].startswith("'€") and r["result"]["text"].endswith("€'")


@pytest.mark.asan
def test_exception_channels_share_the_bound(shared_supervisor):
    raw, r = raw_result(shared_supervisor(), "print('é' * 100000)\nraise ValueError('€' * 300000)")
    assert r["outcome"] == "python_exception"
    assert len(raw) <= 262144
    exc = r["exception"]
    assert exc["type"] == "ValueError"
    assert exc["message"]["totalCharacters"] == 300000
    assert exc["message"]["totalBytes"] == 900000
    for ch in (r["stdout"], r["stderr"], exc["message"], exc["traceback"]):
        assert_consistent(ch)
    assert exc["traceback"]["text"].startswith("Traceback (most recent call last):\n")
    assert exc["traceback"]["text"].endswith("€\n")


# ---- output that is not UTF-8 ----

@pytest.mark.asan
def test_invalid_utf8_stdout(shared_conn):
    r = ok(shared_conn.execute('import sys\nsys.stdout.buffer.write(b"a\\xffb\\xc3");'))
    out = r["stdout"]
    # U+FFFD counts as its 3-byte encoding.
    assert_channel(out, text="a\ufffdb\ufffd", replacedCharacters=2, totalCharacters=4, totalBytes=8)


@pytest.mark.asan
def test_invalid_utf8_stderr(shared_conn):
    r = ok(shared_conn.execute('import sys\nsys.stderr.buffer.write(b"\\xe2\\x82x\\xed\\xa0\\x80");'))
    err = r["stderr"]
    # E2 82 is a truncated 3-byte sequence (one U+FFFD), ED A0 80 a surrogate (three).
    assert_channel(err, text="\ufffdx\ufffd\ufffd\ufffd", replacedCharacters=4)

