"""Unit tests for the worker's runner (worker/runner.py) as Python.

The runner is loaded the way pyrun_init() loads it (worker/pyrun.c,
pyrun_runner_setup): its text compiled as "<codeinterp-runner>" and executed
into a fresh namespace holding only a copy of the builtins dict, __name__,
_PATHS and _NUMERIC (the text of worker/codeinterp_numeric.py). run() then gets the code as bytes, the inputs as a tuple and the
namespace to run in.

Two ways to run it:
  - in this process (the `runner` fixture), for the execution rule and the
    report's exact values, including the exception object;
  - in a fresh `python3 -I -S -X utf8` (run_isolated), with the worker's import
    path and __main__, for what must not touch pytest's own interpreter: code
    that deletes builtins or patches modules, resource limits, compile-time
    warnings, stdout and stderr.

Run with: /usr/bin/python3 -m pytest -q tests/python
"""
import builtins
import errno
import linecache
import os
import pathlib
import pickle
import subprocess
import sys
import sysconfig
import tempfile

import pytest

RUNNER = pathlib.Path(__file__).resolve().parents[2] / "worker" / "runner.py"
# The numeric module's text: pyrun.c hands it to the runner as _NUMERIC.
NUMERIC = RUNNER.with_name("codeinterp_numeric.py")
RUNNER_FILENAME = "<codeinterp-runner>"  # pyrun.c, Py_CompileString
RUNNER_NAME = "codeinterp.runner"  # pyrun.c, __name__
# What the C side sets as _PATHS: CODEINTERP_PY_STDLIB and CODEINTERP_PY_DYNLOAD, taken
# by CMakeLists.txt from the same sysconfig variables.
WORKER_PATHS = (sysconfig.get_config_var("LIBDEST"), sysconfig.get_config_var("DESTSHARED"))
REPORT_KEYS = {"exception", "limit", "exc_type", "exc_message", "exc_traceback", "result", "exc"}
LIMITS = {None, "memory", "file_size", "processes"}


def load_runner(paths):
    """The runner's namespace, made as pyrun_runner_setup() makes it."""
    source = RUNNER.read_bytes()
    # _GUARDS False: the guards on process starts and sockets would patch pytest's own
    # os, _posixsubprocess and _socket (run_isolated's child has them, as a worker does).
    namespace = {"__builtins__": dict(builtins.__dict__), "__name__": RUNNER_NAME, "_PATHS": tuple(paths),
                 "_NUMERIC": NUMERIC.read_text(encoding="utf-8"), "_GUARDS": False}
    exec(compile(source, RUNNER_FILENAME, "exec", dont_inherit=True), namespace)
    # Only for pytest's own failure reports: the runner's lines by its compile name.
    text = source.decode()
    linecache.cache[RUNNER_FILENAME] = (len(text), None, text.splitlines(True), RUNNER_FILENAME)
    return namespace


def check_report(report):
    """The report's shape, as pyrun.c (report_from_dict) requires it."""
    assert type(report) is dict
    assert set(report) == REPORT_KEYS
    assert type(report["exception"]) is bool
    assert report["limit"] in LIMITS
    for key in ("exc_type", "exc_message", "exc_traceback"):
        assert report[key] is None or type(report[key]) is str
    assert report["result"] is None or type(report["result"]) is bytes
    if report["exception"]:
        assert report["result"] is None
    else:
        assert report["limit"] is None
        assert report["exc"] is None
        assert report["exc_type"] is report["exc_message"] is report["exc_traceback"] is None
    return report


class Runner:
    def __init__(self, namespace):
        self.namespace = namespace
        self.main = {"__name__": "__main__"}

    def run(self, code, inputs=(), main=None):
        if isinstance(code, str):
            code = code.encode()
        if main is None:
            main = self.main
        return check_report(self.namespace["run"](code, tuple(inputs), main))


@pytest.fixture
def runner():
    """The runner loaded in this process (it changes sys.path and sys.meta_path:
    both are put back afterwards). Each test gets a fresh namespace and main."""
    saved_path, saved_meta_path = list(sys.path), list(sys.meta_path)
    try:
        yield Runner(load_runner(sys.path))
    finally:
        sys.path[:] = saved_path
        sys.meta_path[:] = saved_meta_path


# The child: load the runner as the C side does, run the code in __main__ (emptied of
# the child's own names), and pickle the report into a file opened before the code
# runs. Everything the child needs afterwards is bound before the code runs.
CHILD = r"""
def _child():
    import builtins, os, pickle, sys
    runner_path, report_path, paths, inputs = sys.argv[1], sys.argv[2], eval(sys.argv[3]), eval(sys.argv[4])
    before = sys.argv[5]
    code = sys.stdin.buffer.read()
    out = open(report_path, "wb")
    write, dumps, type_ = out.write, pickle.dumps, type
    namespace = {"__builtins__": dict(builtins.__dict__), "__name__": "codeinterp.runner", "_PATHS": paths}
    with open(os.path.join(os.path.dirname(runner_path), "codeinterp_numeric.py"), encoding="utf-8") as f:
        namespace["_NUMERIC"] = f.read()
    with open(runner_path, "rb") as f:
        exec(compile(f.read(), "<codeinterp-runner>", "exec", dont_inherit=True), namespace)
    run = namespace["run"]
    main = globals()
    for name in list(main):
        if name not in ("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__"):
            del main[name]
    exec(before, {})
    report = run(code, inputs, main)
    exc = report.get("exc")
    report["exc"] = None if exc is None else type_(exc).__name__
    write(dumps(report))
    out.close()
_child()
"""


class Isolated:
    def __init__(self, report, stdout, stderr):
        self.report = report
        self.stdout = stdout
        self.stderr = stderr

    def __getitem__(self, key):
        return self.report[key]


def run_isolated(code, inputs=(), before="", paths=WORKER_PATHS):
    """Run code through the runner in a fresh interpreter. `before` runs in the child
    after the runner is loaded, right before run() (e.g. resource limits)."""
    if isinstance(code, str):
        code = code.encode()
    with tempfile.NamedTemporaryFile(prefix="runner-report.") as report_file:
        argv = [sys.executable, "-I", "-S", "-X", "utf8", "-c", CHILD, str(RUNNER), report_file.name,
                repr(tuple(paths)), repr(tuple(inputs)), before]
        proc = subprocess.run(argv, input=code, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        report = pickle.loads(report_file.read())
    assert set(report) == REPORT_KEYS
    return Isolated(report, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))


def assert_exception(report, exc_type):
    assert report["exception"] is True
    assert report["result"] is None
    assert report["exc_type"] == exc_type, report["exc_traceback"]
    # Never the runner's own frames.
    assert "codeinterp-runner" not in report["exc_traceback"]


# ---- loading ----


def test_load_needs_paths():
    with pytest.raises(KeyError, match="_PATHS"):
        exec(compile(RUNNER.read_bytes(), RUNNER_FILENAME, "exec"), {"__builtins__": dict(builtins.__dict__)})


def test_load_sets_import_path_and_stays_private():
    r = run_isolated("import sys\n(sys.path, [m for m in sys.modules if 'codeinterp' in m or 'runner' in m])")
    assert r["result"] == repr((list(WORKER_PATHS), [])).encode()


# ---- the execution rule ----


@pytest.mark.parametrize("code, shown", [
    ("x = 2\nx * 4", b"8"),
    ("x = 2\nx * 4\n\n# trailing comment\n", b"8"),
    ("'hello'", b"'hello'"),
    ("__name__", b"'__main__'"),
    ("x = 1\n(x +\n 1)", b"2"),
    ("if True:\n    y = 3\ny", b"3"),
    ("1; 2", b"2"),
    ("1 + 1 # c;", b"2"),
    ("x = '\u00e9'; '\u00e9\u00e9'", "'\u00e9\u00e9'".encode()),
    ("'\\udcff'", b"'\\udcff'"),
    ("from __future__ import annotations\nx: list[int] = [1]\n__annotations__", b"{'x': 'list[int]'}"),
])
def test_last_expression_shown(runner, code, shown):
    report = runner.run(code)
    assert report["exception"] is False
    assert report["result"] == shown


@pytest.mark.parametrize("code", [
    "x = 5",
    "None",
    "x = None\nx",
    "1 + 1;",
    "1 + 1 ;  # comment",
    "x = 1\n(x +\n 1)  ;  # c",
    "1 +\\\n 2 \\\n ;",
    "for i in range(3):\n    i",
    "def f():\n    return 1",
    "",
    "# only a comment\n",
])
def test_statements_not_shown(runner, code):
    report = runner.run(code)
    assert report["exception"] is False
    assert report["result"] is None


def test_code_runs_once_in_main(runner, capsys):
    report = runner.run("print('a')\nn = 0\ndef f():\n    global n\n    n += 1\n    return n\nf(); f()")
    assert report["result"] == b"2"
    assert capsys.readouterr().out == "a\n"
    assert runner.main["n"] == 2
    # The namespace carries over between calls on the same main (the C side passes
    # __main__'s dict), and the runner gives it builtins.
    assert runner.main["__builtins__"] is builtins
    assert runner.run("n * 10")["result"] == b"20"


def test_inputs(runner):
    inputs = [("notes", "/inputs/notes.txt", None, None),
              ("report", "/inputs/report.txt", "/inputs/report.original", "application/pdf")]
    report = runner.run("(input_files, input_assets)", inputs)
    assert eval(report["result"]) == (
        {"notes": "/inputs/notes.txt", "report": "/inputs/report.txt"},
        {"report": {"text": "/inputs/report.txt", "original": "/inputs/report.original",
                    "mediaType": "application/pdf"}})
    assert runner.run("(input_files, input_assets)")["result"] == b"({}, {})"


def test_lone_expression_fast_path(runner):
    compile_code = runner.namespace["_compile_code"]
    # One expression: compiled directly in "eval" mode, no module part.
    head, tail = compile_code("(1 +\n 1)")
    assert head is None
    assert tail.co_filename == "<code>"
    assert eval(tail) == 2
    # Statements, then an expression: two parts, from the syntax tree.
    head, tail = compile_code("x = 1\nx")
    assert head is not None and tail is not None
    # Statements only, or a suppressed expression: one module, nothing shown.
    for code in ("x = 1", "1;"):
        head, tail = compile_code(code)
        assert head is not None and tail is None
    # The fast path gives up (None) on anything that is not one expression.
    expression = runner.namespace["_expression"]
    assert expression("x = 1") is None
    assert expression("1 +") is None
    assert expression("1; 2") is None
    # It leaves the warning filters as they were, whether it compiles or not (that it
    # silences compile-time warnings is test_compile_warning_once: pytest runs each
    # test with warnings.filters replaced, so it cannot be seen in this process).
    filters = runner.namespace["_warning_filters"]
    saved = list(filters)
    assert expression("1") is not None
    assert expression("1 +") is None
    assert filters == saved


def test_lone_expression_does_not_build_a_tree(runner):
    calls = []
    namespace = runner.namespace
    real_compile = namespace["__builtins__"]["compile"]

    def counting_compile(source, filename, mode, flags=0, **kwargs):
        calls.append((mode, flags))
        return real_compile(source, filename, mode, flags, **kwargs)

    namespace["__builtins__"]["compile"] = counting_compile
    try:
        assert runner.run("2 ** 10")["result"] == b"1024"
        assert calls == [("eval", 0)]
        calls.clear()
        assert runner.run("x = 2\nx ** 10")["result"] == b"1024"
        assert ("exec", namespace["_ONLY_AST"]) in calls
    finally:
        namespace["__builtins__"]["compile"] = real_compile


# ---- exceptions ----


def test_exception_report(runner):
    report = runner.run("x = 1\ny = x / 0\n")
    assert_exception(report, "ZeroDivisionError")
    assert report["limit"] is None
    assert report["exc_message"] == "division by zero"
    assert type(report["exc"]) is ZeroDivisionError
    assert report["exc_traceback"] == (
        "Traceback (most recent call last):\n"
        '  File "<code>", line 2, in <module>\n'
        "    y = x / 0\n"
        "        ~~^~~\n"
        "ZeroDivisionError: division by zero\n")
    # The exception object's own traceback starts at the user's frame, too.
    assert report["exc"].__traceback__.tb_frame.f_code.co_filename == "<code>"


def test_traceback_user_frames_only(runner):
    report = runner.run("def f(d):\n    return 1 / d\n\nf(0)")
    assert_exception(report, "ZeroDivisionError")
    assert report["exc_traceback"].startswith(
        "Traceback (most recent call last):\n"
        '  File "<code>", line 4, in <module>\n'
        "    f(0)\n"
        '  File "<code>", line 2, in f\n'
        "    return 1 / d\n")
    # Chained exceptions lose the runner's frames as well.
    report = runner.run("try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('v') from e")
    assert_exception(report, "ValueError")
    text = report["exc_traceback"]
    assert "KeyError: 'k'" in text
    assert "direct cause" in text
    assert text.count("Traceback (most recent call last):\n  File \"<code>\"") == 2
    assert report["exc"].__cause__.__traceback__.tb_frame.f_code.co_filename == "<code>"


def test_exception_type_names(runner):
    report = runner.run("import json\njson.loads('{')")
    assert_exception(report, "json.decoder.JSONDecodeError")
    assert f'File "{WORKER_PATHS[0]}/json/decoder.py"' in report["exc_traceback"]

    report = runner.run("class A:\n    class Oops(Exception):\n        pass\nraise A.Oops('bad')")
    assert_exception(report, "__main__.A.Oops")
    assert report["exc_message"] == "bad"

    report = runner.run("class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()")
    assert_exception(report, "__main__.E")
    assert report["exc_message"] == "<unprintable E object>"


def test_repr_raises(runner):
    report = runner.run("class A:\n    def __repr__(self):\n        raise ValueError('no repr')\nA()")
    assert_exception(report, "ValueError")
    assert report["exc_message"] == "no repr"
    assert "in __repr__" in report["exc_traceback"]


def test_system_exit(runner, capsys):
    report = runner.run("print('before')\nraise SystemExit(3)\nprint('after')")
    assert_exception(report, "SystemExit")
    assert report["exc_message"] == "3"
    assert capsys.readouterr().out == "before\n"

    report = runner.run("import sys\nsys.exit(0)")
    assert_exception(report, "SystemExit")
    assert report["exc_message"] == "0"
    assert '  File "<code>", line 2, in <module>\n    sys.exit(0)\n' in report["exc_traceback"]


def test_keyboard_interrupt(runner):
    report = runner.run("raise KeyboardInterrupt")
    assert_exception(report, "KeyboardInterrupt")
    assert report["exc_message"] == ""
    assert report["exc_traceback"].endswith("KeyboardInterrupt\n")


@pytest.mark.parametrize("code, line, message", [
    ("print('ran')\n1 +", 2, "invalid syntax"),
    ("print('ran')\nreturn 5", 2, "'return' outside function"),
    ("print('ran')\nawait x", 2, "'await' outside function"),
    ("x = (1,\n", 1, "'(' was never closed"),
])
def test_syntax_error(runner, capsys, code, line, message):
    report = runner.run(code)
    assert_exception(report, "SyntaxError")
    assert message in report["exc_message"]
    assert f'File "<code>", line {line}' in report["exc_traceback"]
    assert "Traceback" not in report["exc_traceback"]
    assert report["exc_traceback"].endswith(f"SyntaxError: {message}\n")
    assert capsys.readouterr().out == ""  # nothing ran


def test_source_bytes(runner):
    report = runner.run(b"x = 1\ny = '\xff\xfe'\n")
    assert_exception(report, "SyntaxError")
    assert "utf-8" in report["exc_message"]
    assert report["exc"].lineno == 2

    report = runner.run(b"x = 1\n\0\n")
    assert_exception(report, "SyntaxError")
    assert report["exc_message"].startswith("source code string cannot contain null bytes")
    assert report["exc"].lineno == 2

    # A UTF-8 BOM and CR or CRLF line ends are fine.
    assert runner.run(b"\xef\xbb\xbfx = 2\r\nx * 3\r\n")["result"] == b"6"
    assert runner.run(b"x = 2\ry = 3\rx * y")["result"] == b"6"


def test_package_installers_blocked(runner):
    for code in ("import pip", "import ensurepip", "import venv", "import pip._internal", "from pip import main"):
        report = runner.run(code)
        assert_exception(report, "ModuleNotFoundError")
        assert "packages cannot be installed in this sandbox" in report["exc_message"]
        assert report["exc_traceback"].startswith(
            'Traceback (most recent call last):\n  File "<code>", line 1, in <module>\n')
        assert "find_spec" not in report["exc_traceback"]
    assert runner.run("import json\njson.dumps([1])")["result"] == b"'[1]'"



def test_forbidden_actions_name_the_rule():
    """The guards on process starts, sockets and name lookups (set in a worker, here in
    run_isolated's child): the exception the library expects, the rule as its message,
    and no runner frame in the traceback (tests/integration/test_forbidden.py has all)."""
    cases = [
        ("import os\nos.system('true')", "PermissionError", "[Errno 1] no processes can be started in this sandbox"),
        ("import subprocess\nsubprocess.run(['pip', 'install', 'x'])", "PermissionError",
         "[Errno 1] packages cannot be installed in this sandbox; use what is already here: the standard library"),
        ("import socket\nsocket.socket()", "PermissionError", "[Errno 1] there is no network in this sandbox"),
        ("import socket\nsocket.getaddrinfo('example.com', 80)", "socket.gaierror",
         "[Errno -4] there is no network in this sandbox"),
        ("from multiprocessing import shared_memory\nshared_memory.SharedMemory(create=True, size=1)",
         "PermissionError", "[Errno 1] no processes can be started in this sandbox"),
    ]
    for code, exc_type, message in cases:
        report = run_isolated(code)
        assert_exception(report, exc_type)
        assert report["exc_message"].startswith(message), report["exc_message"]
        assert report["exc_traceback"].startswith(
            'Traceback (most recent call last):\n  File "<code>", line 2, in <module>\n'), report["exc_traceback"]
    # Numeric addresses need no network.
    assert run_isolated("import socket\nsocket.gethostbyname('192.0.2.1')")["result"] == b"'192.0.2.1'"


# ---- limits ----


@pytest.mark.parametrize("code, exc_type, limit", [
    ("raise MemoryError", "MemoryError", "memory"),
    ("bytearray(1 << 60)", "MemoryError", "memory"),
    ("import errno\nraise OSError(errno.EFBIG, 'File too large')", "OSError", "file_size"),
    ("import errno\nraise OSError(errno.ENOSPC, 'No space left on device')", "OSError", None),
    ("raise RuntimeError(\"can't start new thread\")", "RuntimeError", "processes"),
    ("raise RuntimeError('something else')", "RuntimeError", None),
    ("raise ValueError(\"can't start new thread\")", "ValueError", None),
])
def test_limit_mapping(runner, code, exc_type, limit):
    report = runner.run(code)
    assert_exception(report, exc_type)
    assert report["limit"] == limit


def test_file_size_limit_real():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big")
        r = run_isolated(f"with open({path!r}, 'wb') as f:\n    f.write(b'x' * (4 << 20))",
                         before="import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))")
    assert_exception(r, "OSError")
    assert r["limit"] == "file_size"
    assert r["exc"] == "OSError"
    assert f"[Errno {errno.EFBIG}]" in r["exc_message"]


def test_memory_limit_real():
    r = run_isolated("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))",
                     before="import resource\nresource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))")
    assert_exception(r, "MemoryError")
    assert r["limit"] == "memory"


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC binds only an unprivileged uid; needs root to switch")
def test_thread_limit_real():
    r = run_isolated("import threading\nthreading.Thread(target=print).start()",
                     before="import os, resource\nos.setgroups([])\nos.setgid(65534)\nos.setuid(65534)\n"
                            "resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))")
    assert_exception(r, "RuntimeError")
    assert r["exc_message"] == "can't start new thread"
    assert r["limit"] == "processes"


# ---- warnings ----


@pytest.mark.parametrize("code, category, shown", [
    ("1 is 1", "SyntaxWarning", b"True"),
    ("x = 1\nx is 1", "SyntaxWarning", b"True"),
    ("'\\d'", "DeprecationWarning", b"'\\\\d'"),
    ("x = '\\d'\nx", "DeprecationWarning", b"'\\\\d'"),
])
def test_compile_warning_once(code, category, shown):
    # Shown every time it is raised, so a second compile would show it twice.
    r = run_isolated(code, before="import warnings\nwarnings.simplefilter('always')")
    assert r["exception"] is False
    assert r["result"] == shown
    assert r.stderr.count(f"{category}:") == 1, r.stderr
    assert '<code>:' in r.stderr


def test_default_warning_filters():
    # Compile-time warnings under the default filters: SyntaxWarning shown once,
    # DeprecationWarning (not from __main__) not at all; the code's own warnings shown.
    r = run_isolated("x = 1\nx is 1")
    assert r.stderr.count("SyntaxWarning") == 1, r.stderr
    r = run_isolated("'\\d'")
    assert r["result"] == b"'\\\\d'"
    assert r.stderr == ""
    r = run_isolated("import warnings\nwarnings.warn('careful')\n2")
    assert r["result"] == b"2"
    assert r.stderr.count("UserWarning: careful") == 1


def test_warning_as_error_is_an_exception():
    r = run_isolated("1 is 1", before="import warnings\nwarnings.simplefilter('error')")
    assert_exception(r, "SyntaxError")
    assert '"is" with a literal' in r["exc_message"]


# ---- robustness against the code it runs ----


def test_output_and_streams():
    r = run_isolated("import sys\nprint('x') or sys.stderr.write('e') and 5")
    assert (r.stdout, r.stderr, r["result"]) == ("x\n", "e", b"5")
    # Replaced streams and recursion limit: the report is still made.
    r = run_isolated("import sys\nsys.stdout = None\nsys.stderr = None\nsys.setrecursionlimit(40)\n"
                     "def f(): f()\nf()")
    assert_exception(r, "RecursionError")
    assert "in f" in r["exc_traceback"]


def test_deleted_builtins():
    r = run_isolated("import builtins\ndel builtins.repr\n5")
    assert r["result"] == b"5"
    r = run_isolated("import builtins\ndel builtins.str, builtins.len, builtins.isinstance, builtins.type\n1/0")
    assert_exception(r, "ZeroDivisionError")
    assert r["exc_message"] == "division by zero"
    assert 'File "<code>", line 3' in r["exc_traceback"]


def test_patched_traceback_and_linecache():
    r = run_isolated("import traceback, linecache\n"
                     "traceback.TracebackException = traceback.StackSummary = None\n"
                     "traceback.format_exception = None\n"
                     "linecache.getline = linecache.getlines = None\n"
                     "linecache.cache.clear()\n"
                     "1/0")
    assert_exception(r, "ZeroDivisionError")
    assert 'File "<code>", line 6, in <module>\n    1/0\n    ~^~\n' in r["exc_traceback"]


def test_private_copies_broken():
    # The runner's own traceback/linecache copies emptied: the plain fallback formatter.
    r = run_isolated("import gc, sys, types\n"
                     "for m in gc.get_objects():\n"
                     "    if isinstance(m, types.ModuleType) and m.__name__ in ('traceback', 'linecache') "
                     "and m is not sys.modules.get(m.__name__):\n"
                     "        m.__dict__.clear()\n"
                     "1/0")
    assert_exception(r, "ZeroDivisionError")
    assert r["exc_traceback"] == ("Traceback (most recent call last):\n"
                                  '  File "<code>", line 5, in <module>\n'
                                  "    1/0\n"
                                  "ZeroDivisionError: division by zero\n")


def test_runner_namespace_wiped():
    # Nothing the runner computes is left: still a well-formed exception report,
    # with the names left to the C side (None) and the exception object.
    r = run_isolated("import gc\n"
                     "for d in gc.get_objects():\n"
                     "    if isinstance(d, dict) and 'PackageInstallBlocker' in d:\n"
                     "        d.clear()\n")
    assert r["exception"] is True
    assert r["result"] is None
    assert r["limit"] is None
    assert r["exc_type"] is None and r["exc_traceback"] is None
    assert r["exc"] == "NameError"
