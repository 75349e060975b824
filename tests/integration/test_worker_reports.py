"""The report pipe (fd 3) and the result pipe (fd 4) are reachable from user code: what
arrives on them is validated and bounded by the supervisor. Garbage, a second report,
an oversized report or a forged setup failure end as worker_error (or as what the code
did), never as a crash, and the next call is unaffected. The reports are parsed by
the supervisor (asan); the worker writes them the same way in both start modes."""
import pytest

from testlib import NORTHSTAR, frame

pytestmark = pytest.mark.asan
SHARED_POLICY = "maxWorkerMessageBytes: 4096\n"


@pytest.fixture
def rsup(shared_supervisor):
    return shared_supervisor()


def run(sup, code):
    c = sup.connect()
    try:
        return c.execute(code)
    finally:
        c.close()


CASES = {
    "garbage": "import os\nos.write(3, b'\\x00\\x00\\x00\\x05hello')",
    "truncated": "import os\nos.write(3, b'\\x00\\x00\\x10\\x00abc')",
    "not_a_map": "import os, struct\nos.write(3, struct.pack('>I', 1) + b'\\x90')",
    "second_report": None,  # filled below
    "oversized": "import os\nos.write(3, b'\\x00\\x10\\x00\\x00' + b'x' * 8192)",
    "huge_declared_array": "import os\nos.write(3, b'\\x00\\x00\\x00\\x05\\xdd\\x7f\\xff\\xff\\xff')",
    "bad_counts": None,
}


def test_garbage_on_the_report_pipe_is_worker_error(rsup):
    for name, code in CASES.items():
        if code is None:
            continue
        r = run(rsup, code)
        assert r["type"] == "result", (name, r)
        assert r["outcome"] == "worker_error", (name, r["outcome"], r.get("detail"))
    # the same supervisor still computes
    assert run(rsup, NORTHSTAR)["result"]["text"] == "8.25"


def test_a_forged_extra_report_is_worker_error(rsup):
    forged = frame({"t": "done", "hasResult": False, "limit": None, "exception": None})
    r = run(rsup, "import os\nos.write(3, %r)\n1" % forged)
    # the runner's own report follows the forged one: two frames
    assert r["outcome"] == "worker_error", r


def test_inconsistent_exception_counts_are_worker_error(rsup):
    bad = frame({"t": "done", "hasResult": False, "limit": None,
                 "exception": {"type": "E", "message": {"text": "abc", "totalCharacters": 1, "totalBytes": 3,
                                                        "omittedCharacters": 0, "omittedBytes": 0},
                               "traceback": {"text": "", "totalCharacters": 0, "totalBytes": 0,
                                             "omittedCharacters": 0, "omittedBytes": 0}}})
    r = run(rsup, "import os\nos.write(3, %r)\nos._exit(0)" % bad)
    assert r["outcome"] == "worker_error", r


def test_a_forged_setup_failure_is_reported_as_such(rsup):
    forged = frame({"t": "setup", "stage": "seccomp", "errno": 1})
    r = run(rsup, "import os\nos.write(3, %r)\nos._exit(127)" % forged)
    assert r["outcome"] == "worker_error"
    assert r["workerError"] == {"stage": "seccomp", "errno": 1}


def test_exiting_without_a_report(rsup):
    r = run(rsup, "import os\nprint('bye', flush=True)\nos._exit(0)")
    assert r["outcome"] == "worker_error" and "without a result" in r["detail"]
    assert r["stdout"]["text"] == "bye\n"


def test_writing_the_result_pipe_directly_is_fitted(rsup):
    # User code can write its own "value": it is fitted like any channel (and only
    # counts when the code's last statement is an expression).
    r = run(rsup, "import os\nos.write(4, b'\\xff' * 10)\n7")
    assert r["outcome"] == "ok"
    assert r["result"]["text"].endswith("7")
    assert r["result"]["replacedCharacters"] == 10


def test_non_blocking_pipes_set_by_user_code(rsup):
    # The worker's own writes wait out O_NONBLOCK on its pipes instead of failing.
    r = run(rsup, "import os, fcntl\n"
                  "for fd in (1, 3, 4):\n"
                  "    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)\n"
                  "'x' * 200000")
    assert r["outcome"] == "ok", (r["outcome"], r.get("detail"))
    assert r["result"]["totalCharacters"] == 200002
