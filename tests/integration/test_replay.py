"""codeinterp exec --save FILE and codeinterp replay FILE over a real supervisor:
an identical replay, a changed source file named, a changed saved code detected,
and the error cases (exit status 2)."""
import json
import os
import subprocess

import pytest

from testlib import CLIENT, WAIT_LIMIT

CODE = """import codeinterp_numeric as n
values = open(input_files["runtimes"]).read().split()
print(len(values), "values")
n.mean(values, missing="omit").value
"""


@pytest.fixture
def msup(shared_supervisor):
    return shared_supervisor()


@pytest.fixture
def saved(msup, tmp_path):
    """A record of a call with one read_source and one attachment; returns its path."""
    (tmp_path / "runtimes.txt").write_text("9\n7.5\n")
    (tmp_path / "book.csv").write_bytes(b"prototype,hours\nA,9\nB,7.5\n")
    record = tmp_path / "call.json"
    out = msup.cli("exec", "--json", "--save", str(record), "--summary", "Northstar mean runtime",
                      "--source", "runtimes=%s" % (tmp_path / "runtimes.txt"),
                      "--attach", "wb=%s:text/csv" % (tmp_path / "book.csv"), "-c", CODE)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["result"]["text"] == "8.25"
    return record


def replay(msup, record):
    out = msup.cli("replay", str(record))
    return out.returncode, out.stdout.decode(), out.stderr.decode()


def lines(report):
    """{name: 'identical' | 'DIFFERS'} from replay's report."""
    found = {}
    for line in report.splitlines():
        for word in ("identical", "DIFFERS"):
            marker = " " + word
            if marker in line and not line.startswith("replay:"):
                found[line[:line.index(marker)].strip()] = word
    return found


def test_record_holds_code_sources_and_result(saved):
    rec = json.loads(saved.read_text())
    assert rec["codeinterpReplay"] == 1
    assert rec["code"] == CODE
    assert rec["summary"] == "Northstar mean runtime"
    assert [s["id"] for s in rec["sources"]] == ["runtimes", "wb"]
    rt, wb = rec["sources"]
    assert rt["kind"] == "read_source" and os.path.isabs(rt["file"])
    assert wb["kind"] == "attachment" and wb["mediaType"] == "text/csv" and wb["fileName"] == "book.csv"
    message = rec["message"]
    assert message["type"] == "result" and message["outcome"] == "ok"
    assert message["evidence"]["codeSha256"] == rec["codeSha256"]
    assert [i["sha256"] for i in message["evidence"]["inputs"]] == [rt["sha256"], wb["sha256"]]


def test_identical_replay(msup, saved):
    status, report, err = replay(msup, saved)
    assert status == 0, report + err
    assert report.splitlines()[-1] == "replay: identical"
    assert lines(report) == {"code": "identical", "input runtimes": "identical", "input wb": "identical",
                             "outcome": "identical", "stdout": "identical", "stderr": "identical",
                             "result": "identical", "exception": "identical", "artifacts": "identical"}
    assert "runtime    same:" in report and "policy     same:" in report


def test_changed_source_file_is_named(msup, saved, tmp_path):
    (tmp_path / "runtimes.txt").write_text("9\n7.5\n12\n")
    status, report, err = replay(msup, saved)
    assert status == 1, report + err
    found = lines(report)
    assert found["input runtimes"] == "DIFFERS"
    assert found["input wb"] == "identical"
    assert found["code"] == "identical"
    assert found["stdout"] == "DIFFERS" and found["result"] == "DIFFERS"
    assert str(tmp_path / "runtimes.txt") in report
    assert report.splitlines()[-1] == "replay: NOT identical: input runtimes, stdout, result"


def test_changed_attachment_is_named(msup, saved, tmp_path):
    (tmp_path / "book.csv").write_bytes(b"prototype,hours\nA,9\nB,7.0\n")
    status, report, _ = replay(msup, saved)
    assert status == 1
    found = lines(report)
    assert found["input wb"] == "DIFFERS" and found["input runtimes"] == "identical"
    # The code does not read the attachment: the channels are the same.
    assert found["stdout"] == found["result"] == "identical"


def replay_changed_code(msup, saved, old, new):
    """Replay the saved record with old replaced by new in its code: it must differ
    (status 1). The report."""
    rec = json.loads(saved.read_text())
    rec["code"] = rec["code"].replace(old, new)
    saved.write_text(json.dumps(rec))
    status, report, _ = replay(msup, saved)
    assert status == 1
    return report


def test_changed_saved_code_is_detected(msup, saved):
    report = replay_changed_code(msup, saved, 'missing="omit"', 'missing="propagate"')
    found = lines(report)
    assert found["code"] == "DIFFERS"
    assert found["input runtimes"] == "identical"
    # Same inputs, no missing value: the new code gives the same channels.
    assert found["result"] == "identical"
    assert report.splitlines()[-1] == "replay: NOT identical: code"


def test_changed_code_changes_channels(msup, saved):
    report = replay_changed_code(msup, saved, ".value", ".n")
    assert lines(report)["result"] == "DIFFERS"


def test_changed_outcome_and_exception(msup, tmp_path):
    record = tmp_path / "call.json"
    out = msup.cli("exec", "--save", str(record), "-c", "import codeinterp_numeric as n\nn.mean([9, None, 7.5])")
    assert out.returncode == 1  # python_exception, still saved
    rec = json.loads(record.read_text())
    assert rec["message"]["exception"]["type"] == "codeinterp_numeric.MissingValueError"
    status, report, _ = replay(msup, record)
    assert status == 0, report
    rec["code"] = "import codeinterp_numeric as n\nn.mean([9, None, 7.5], missing='omit').value"
    record.write_text(json.dumps(rec))
    status, report, _ = replay(msup, record)
    assert status == 1
    found = lines(report)
    assert found["outcome"] == found["exception"] == found["result"] == "DIFFERS"
    assert "python_exception recorded, ok replayed" in report


def test_nondeterministic_code_differs(msup, tmp_path):
    record = tmp_path / "call.json"
    out = msup.cli("exec", "--save", str(record), "-c", "import os\nos.urandom(16).hex()")
    assert out.returncode == 0
    status, report, _ = replay(msup, record)
    assert status == 1
    assert lines(report)["result"] == "DIFFERS"


def test_missing_source_file_is_an_error(msup, saved, tmp_path):
    (tmp_path / "runtimes.txt").unlink()
    status, report, err = replay(msup, saved)
    assert status == 2
    assert "input runtimes" in err and "No such file" in err


@pytest.mark.parametrize("content", ["", "not json", "{}", '{"codeinterpReplay": 2, "code": "1", "summary": "",'
                                     ' "sources": [], "message": {}}', "[1, 2"])
def test_bad_record_is_an_error(msup, tmp_path, content):
    record = tmp_path / "bad.json"
    record.write_text(content)
    status, report, err = replay(msup, record)
    assert status == 2 and report == ""
    assert "codeinterp: replay:" in err


def test_usage_and_unreadable_record(msup, tmp_path):
    assert replay(msup, tmp_path / "absent.json")[0] == 2
    assert msup.cli("replay").returncode == 2
    out = msup.cli("replay", "--help")
    assert out.returncode == 0 and b"Usage: codeinterp replay FILE" in out.stdout


def test_no_supervisor_is_an_error(msup, saved, tmp_path):
    out = subprocess.run([CLIENT, "--socket", str(tmp_path / "none.sock"), "replay", str(saved)],
                         capture_output=True, timeout=WAIT_LIMIT)
    assert out.returncode == 2
    assert b"cannot connect" in out.stderr


def test_unwritable_save_path(msup, tmp_path):
    out = msup.cli("exec", "--save", str(tmp_path / "no" / "such" / "dir.json"), "-c", "1")
    assert out.returncode == 2
    assert b"cannot save the record" in out.stderr


def test_save_without_json_prints_as_usual(msup, tmp_path):
    record = tmp_path / "call.json"
    out = msup.cli("exec", "--save", str(record), "-c", "print('hi')\n6 * 7")
    assert out.returncode == 0 and out.stdout == b"hi\n42\n"
    assert json.loads(record.read_text())["message"]["result"]["text"] == "42"


def test_unicode_and_escapes_survive_the_record(msup, tmp_path):
    # The record is read back by the client's own JSON parser: non-ASCII text,
    # control characters, quotes and backslashes, also as \\u escapes with
    # surrogate pairs (json.dumps writes those), must give the same code.
    record = tmp_path / "call.json"
    code = 'print("caf\u00e9 \u2603 \U0001F600 \\t \\\\ \\" \\x01")\n"\u00e9\U0001F600"\n'
    out = msup.cli("exec", "--save", str(record), "-c", code)
    assert out.returncode == 0, out.stderr
    assert replay(msup, record)[0] == 0
    rec = json.loads(record.read_text())
    assert rec["code"] == code
    record.write_text(json.dumps(rec, indent=1))  # ASCII only, \ud83d\ude00 pairs
    status, report, _ = replay(msup, record)
    assert status == 0, report


def test_artifacts_compared(msup, tmp_path):
    """The files left in /outputs are part of the record: the same bytes replay as
    identical, different bytes are named (by count, never by content)."""
    same = tmp_path / "same.json"
    out = msup.cli("exec", "--save", str(same), "-c", "open('/outputs/a.txt', 'w').write('fixed\\n')")
    assert out.returncode == 0, out.stderr
    assert json.loads(same.read_text())["message"]["artifacts"][0]["name"] == "a.txt"
    rc, report, _ = replay(msup, same)
    assert rc == 0 and lines(report)["artifacts"] == "identical", report
    changing = tmp_path / "changing.json"
    out = msup.cli("exec", "--save", str(changing), "-c",
                      "import os\nopen('/outputs/r.bin', 'wb').write(os.urandom(16))")
    assert out.returncode == 0, out.stderr
    rc, report, _ = replay(msup, changing)
    assert rc == 1 and lines(report)["artifacts"] == "DIFFERS", report
    assert "1 files each, not the same" in report
    assert report.splitlines()[-1] == "replay: NOT identical: artifacts"


def test_record_without_artifacts_is_not_judged_on_them(msup, tmp_path):
    """A record made before artifacts existed (no such key) replays without that verdict."""
    rec_path = tmp_path / "old.json"
    out = msup.cli("exec", "--save", str(rec_path), "-c", "1 + 1")
    assert out.returncode == 0
    rec = json.loads(rec_path.read_text())
    for key in ("artifacts", "omittedArtifacts", "omittedArtifactBytes"):
        del rec["message"][key]
    rec_path.write_text(json.dumps(rec))
    rc, report, _ = replay(msup, rec_path)
    assert rc == 0, report
    assert "artifacts" not in lines(report)
