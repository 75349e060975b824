"""The model-visible text (`codeinterp exec --model-text`) and the user's progress card
(`--cards`) for real results from a real supervisor."""
import re
import signal
import subprocess
import time

import pytest

from testlib import WAIT_LIMIT
from toolharness import CLIENT, NORTHSTAR


@pytest.fixture
def msup(shared_supervisor):
    return shared_supervisor()


def model_text(sup, code, *args):
    out = sup.cli("exec", "--model-text", *args, "-c", code)
    return out.returncode, out.stdout.decode(), out.stderr.decode()


def test_ok(msup):
    rc, text, _ = model_text(msup, NORTHSTAR)
    assert rc == 0
    assert re.fullmatch(r"outcome: ok\nelapsed: \d+ ms\n--- value \(4 characters\) ---\n8\.25\n", text), text


def test_ok_stdout_and_no_value(msup):
    rc, text, _ = model_text(msup, "print('hello')\nprint('wörld')")
    assert rc == 0
    assert text.split("\n", 2)[2] == "--- stdout (12 characters) ---\nhello\nwörld\n"
    rc, text, _ = model_text(msup, "x = 1")
    assert "(no output and no value" in text


def test_python_exception(msup):
    rc, text, _ = model_text(msup, "print('before')\n{}['missing']")
    assert rc == 1
    lines = text.splitlines()
    assert lines[0] == "outcome: python_exception"
    assert "exception: KeyError" in lines
    assert "--- stdout (7 characters) ---\nbefore\n" in text
    assert "--- exception message (9 characters) ---\n'missing'\n" in text
    assert re.search(r"--- traceback \(\d+ characters\) ---\nTraceback \(most recent call last\):\n"
                     r"  File \"<code>\", line 2, in <module>\n", text), text
    assert "not Python output" not in text


def test_omitted_output_is_counted(make_supervisor):
    sup = make_supervisor("maxOutputCharacters: 1000\n")
    rc, text, _ = model_text(sup, "print(''.join(str(i % 10) for i in range(3000)), end='')\n'v' * 1500")
    assert rc == 0
    digits = "".join(str(i % 10) for i in range(3000))
    assert ("--- stdout (3000 characters; 2000 omitted where marked, not shown) ---\n" + digits[:750] +
            "\n[... 2000 characters omitted ...]\n" + digits[-250:] + "\n") in text, text
    # The value is repr()'d: 1502 characters with the quotes.
    assert ("--- value (1502 characters; 502 omitted where marked, not shown) ---\n'" + "v" * 749 +
            "\n[... 502 characters omitted ...]\n" + "v" * 249 + "'\n") in text, text


def test_timeout_is_a_runtime_outcome(make_supervisor):
    """The partial output is shown: the code must print before the deadline, so a
    machine too slow for that within timeoutMs gets the call again with twice the
    deadline, until it does."""
    timeout_ms = 1000
    while True:
        sup = make_supervisor("timeoutMs: %d\n" % timeout_ms)
        rc, text, _ = model_text(sup, "print('working', flush=True)\nimport time\ntime.sleep(3600)")
        if "--- stdout (8 characters) ---\nworking\n" in text or timeout_ms > WAIT_LIMIT * 1000:
            break
        timeout_ms *= 2
    assert rc == 3
    assert text.startswith("outcome: timeout\n")
    assert "The runtime stopped the call because its deadline passed. This is not Python output." in text
    assert "partial" in text
    assert "--- stdout (8 characters) ---\nworking\n" in text
    assert "exception:" not in text and "Traceback" not in text


def test_cancelled_is_a_runtime_outcome(make_supervisor):
    sup = make_supervisor()
    p = subprocess.Popen([CLIENT, "--socket", sup.socket, "exec", "--model-text", "--cards", "-c",
                          "print('working', flush=True)\nimport time\ntime.sleep(3600)"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Wait for the worker to start (the card says so), then shut the supervisor down.
    line = b""
    deadline = time.monotonic() + WAIT_LIMIT
    while b"started" not in line and time.monotonic() < deadline:
        line = p.stderr.readline()
    assert b"started" in line
    sup.proc.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=WAIT_LIMIT)
    text = out.decode()
    assert p.returncode == 4, text
    assert text.startswith("outcome: cancelled\n")
    assert "The runtime cancelled the call before it finished. This is not Python output." in text
    assert "exception:" not in text and "Traceback" not in text


def test_the_code_ending_its_own_process_is_not_a_sandbox_failure(msup):
    """os._exit() and a crash the code causes are worker_error, and the model is told the
    code ended the process, not that the sandbox failed and calling again may help. (A
    signal the code sends itself with os.kill() does nothing: the worker is its pid
    namespace's init, which the kernel protects from its own signals; abort() ends in a
    forced SIGSEGV.)"""
    rc, text, _ = model_text(msup, "import os\nprint('bye', flush=True)\nos._exit(3)")
    assert rc == 9
    assert text.startswith("outcome: worker_error\nelapsed: ")
    assert ("The code ended its own process (exit status 3, as os._exit() does) before a result was sent. The "
            "sandbox did not fail: the same code will end the same way. This is not Python output.\n") in text
    assert "detail: the worker exited with status 3 without a result\n" in text
    assert "Any output below is what the code wrote before its process ended.\n--- stdout (4 characters) ---\nbye\n" in text
    rc, text, _ = model_text(msup, "import os\nos.abort()")
    assert rc == 9
    assert "The code's process was ended by signal 11, which the code sent itself" in text
    for t in (text,):
        assert "sandbox failed" not in t and "calling again may work" not in t and "partial" not in t


def test_error_reply(make_supervisor):
    sup = make_supervisor("maxCodeCharacters: 10\n")
    rc, text, _ = model_text(sup, "x = 1 + 2 + 3 + 4")
    assert rc == 6
    assert text == ("outcome: invalid_input\nNo code ran: the request was rejected before execution.\n"
                    "reason: code has 17 characters, more than maxCodeCharacters (10)\n"
                    "Correct the arguments (see the tool's input schema) and call again.\n")


def test_cards_carry_metadata_only(msup, tmp_path):
    src = tmp_path / "secret.csv"
    src.write_text("SECRET-SOURCE-TEXT-4711\n")
    code = ("token = 'SECRET-CODE-1234'\n"
            "print('SECRET-OUTPUT-' + '5678')\n"
            "import sys; print('SECRET-ERR-' + '9012', file=sys.stderr)\n"
            "open(input_files['secretsrc']).read()\n"
            "raise ValueError('SECRET-EXC-' + '3456')")
    out = msup.cli("exec", "--model-text", "--cards", "--summary", "SECRET-SUMMARY-777",
                      "--source", "secretsrc=%s" % src, "-c", code)
    assert out.returncode == 1
    cards = out.stderr.decode()
    lines = cards.splitlines()
    # requested, queued, started, finished (progress), finished (result)
    assert [ln.split(":")[1].split("·")[0].strip() for ln in lines[:3]] == ["requested", "queued", "started"]
    assert lines[-1].startswith("code_interpreter: finished: python_exception · ")
    assert "stdout 19 characters" in lines[-1] and "stderr 16 characters" in lines[-1]
    for secret in ("SECRET", "secretsrc", "secret.csv", str(tmp_path), "ValueError", "token", "/inputs",
                   "Traceback"):
        assert secret not in cards, secret
    # ...while the model does see them.
    text = out.stdout.decode()
    assert "SECRET-OUTPUT-5678" in text and "SECRET-EXC-3456" in text and "exception: ValueError" in text


def test_files_in_outputs_listed_for_the_model_counted_on_cards(msup):
    code = ("open('/outputs/SECRET-NAME.csv', 'w').write('a,b\\n1,2\\n')\n"
            "open('/outputs/plot.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(8))\n"
            "import os\nos.symlink('/etc/passwd', '/outputs/link')\nprint('SECRET-CONTENT')")
    out = msup.cli("exec", "--model-text", "--cards", "-c", code)
    assert out.returncode == 0
    text = out.stdout.decode()
    assert text.endswith("--- files in /outputs (2 returned, 24 bytes; 1 omitted, 0 bytes) ---\n"
                         "SECRET-NAME.csv: text/csv, 8 bytes\n"
                         "plot.png: image/png, 16 bytes\n"
                         "[... 1 more entries of /outputs (0 bytes) omitted ...]\n"), text
    assert "a,b" not in text  # the bytes are not in the text
    cards = out.stderr.decode().splitlines()
    assert cards[-1].endswith(" · files 2 (24 bytes) (1 omitted)"), cards
    assert any(c.endswith(" · files 3 (24 bytes)") for c in cards[:-1]), cards
    for c in cards:
        assert "SECRET" not in c and "plot" not in c and "link" not in c
