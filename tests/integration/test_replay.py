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


# ---- chains: several steps in one invocation, kept outputs flowing on (issue 22) ----

STEP1 = "n = open('/outputs/raw.csv', 'w').write('v\\n1\\n2\\nbad\\n4\\n')\n"
STEP2 = """rows = open('/inputs/out-1-raw.csv').read().split()[1:]
good = [r for r in rows if r.isdigit()]
open('/outputs/clean.csv', 'w').write('\\n'.join(good) + '\\n')
print(len(good), 'rows kept')
"""
STEP3 = "print(sum(int(v) for v in open('/inputs/out-2-clean.csv').read().split()))\n"


def chain_lines(report):
    """{call number: {name: 'identical' | 'DIFFERS'}} from a chain's report."""
    found, call, part = {}, None, []
    for line in report.splitlines() + ["== end"]:
        if line.startswith("== "):
            if call is not None:
                found[call] = lines("\n".join(part))
            call, part = (int(line.split()[2]) if line.startswith("== call ") else None), []
        else:
            part.append(line)
    return found


@pytest.fixture
def chain(msup, tmp_path):
    """A three-step chain run with --keep-all and --save; returns the record's path."""
    record = tmp_path / "chain.json"
    out = msup.cli("exec", "--keep-all", "--save", str(record), "--summary", "clean and sum",
                   "-c", STEP1, "-c", STEP2, "-c", STEP3)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"3 rows kept\n7\n"
    err = out.stderr.decode()
    for k in (1, 2, 3):
        assert "codeinterp: call %d of 3\n" % k in err
    assert "codeinterp: kept raw.csv as out-1-raw.csv" in err
    assert "codeinterp: kept clean.csv as out-2-clean.csv" in err
    return record


def test_chain_record_fields(chain):
    rec = json.loads(chain.read_text())
    assert rec["codeinterpReplay"] == 2 and rec["sources"] == []
    assert "code" not in rec and "message" not in rec
    calls = rec["calls"]
    assert [c["code"] for c in calls] == [STEP1, STEP2, STEP3]
    for c in calls:
        assert c["summary"] == "clean and sum" and c["keepOutputs"] == "all"
        assert c["message"]["outcome"] == "ok"
        assert c["message"]["evidence"]["codeSha256"] == c["codeSha256"]
    (raw,) = calls[0]["message"]["keptOutputs"]
    assert raw["sourceId"] == "out-1-raw.csv"
    (inp,) = calls[1]["message"]["evidence"]["inputs"]
    assert inp["sourceId"] == "out-1-raw.csv" and inp["sha256"] == raw["sha256"]
    assert inp["producedBy"] == {"call": 1, "sha256": raw["sha256"]}
    (inp3,) = calls[2]["message"]["evidence"]["inputs"]
    assert inp3["producedBy"]["call"] == 2 and inp3["sourceId"] == "out-2-clean.csv"


def test_chain_replays_identical(msup, chain):
    status, report, err = replay(msup, chain)
    assert status == 0, report + err
    assert report.splitlines()[-1] == "replay: identical"
    assert "== call 1 of 3 ==" in report and "== call 3 of 3 ==" in report
    found = chain_lines(report)
    assert sorted(found) == [1, 2, 3]
    assert found[1]["kept outputs"] == "identical" and "kept input out-1-raw.csv" not in found[1]
    assert found[2]["kept input out-1-raw.csv"] == "identical"
    assert found[3]["kept input out-2-clean.csv"] == "identical"
    assert all(word == "identical" for call in found.values() for word in call.values()), found


def test_chain_edited_first_call_is_followed_through(msup, chain):
    rec = json.loads(chain.read_text())
    rec["calls"][0]["code"] = STEP1.replace("4", "5")
    chain.write_text(json.dumps(rec))
    status, report, _ = replay(msup, chain)
    assert status == 1, report
    found = chain_lines(report)
    assert found[1]["code"] == found[1]["artifacts"] == found[1]["kept outputs"] == "DIFFERS"
    assert found[2]["code"] == "identical" and found[2]["kept input out-1-raw.csv"] == "DIFFERS"
    assert found[2]["stdout"] == "identical"  # still 3 rows
    assert found[2]["kept outputs"] == "DIFFERS"
    assert found[3]["kept input out-2-clean.csv"] == "DIFFERS" and found[3]["stdout"] == "DIFFERS"
    verdict = report.splitlines()[-1]
    assert verdict.startswith("replay: NOT identical: call 1 code, ")
    for part in ("call 2 kept input out-1-raw.csv", "call 2 kept outputs", "call 3 kept input out-2-clean.csv",
                 "call 3 stdout"):
        assert part in verdict, verdict


def test_chain_stops_at_the_failing_step(msup, tmp_path):
    record = tmp_path / "stopped.json"
    out = msup.cli("exec", "--keep-all", "--save", str(record), "-c", STEP1, "-c", "raise ValueError('no')",
                   "-c", STEP3)
    assert out.returncode == 1  # python_exception: that call's status
    err = out.stderr.decode()
    assert "codeinterp: the chain stopped at call 2 of 3 (python_exception); 1 call not run\n" in err
    assert "call 3 of 3" not in err and "ValueError: no" in err
    rec = json.loads(record.read_text())
    assert [c["code"] for c in rec["calls"]] == [STEP1, "raise ValueError('no')"]
    assert rec["calls"][1]["message"]["outcome"] == "python_exception"
    status, report, _ = replay(msup, record)
    assert status == 0, report
    assert "== call 2 of 2 ==" in report


def test_chain_json_lines(msup):
    out = msup.cli("exec", "--json", "--keep", "raw.csv", "--keep", "clean.csv", "-c", STEP1, "-c", STEP2)
    assert out.returncode == 0, out.stderr
    first, second = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert first["keptOutputs"][0]["sourceId"] == "out-1-raw.csv"
    assert first["keptOutputs"][1] == {"name": "clean.csv", "refused": "not_produced"}
    assert second["stdout"]["text"] == "3 rows kept\n"
    assert second["evidence"]["inputs"][0]["producedBy"]["call"] == 1
    assert b"call 1 of 2" not in out.stderr


def test_chain_from_files(msup, tmp_path):
    for name, code in (("a.py", STEP1), ("b.py", STEP2), ("c.py", STEP3)):
        (tmp_path / name).write_text(code)
    out = msup.cli("exec", "--keep-all", str(tmp_path / "a.py"), "-", str(tmp_path / "c.py"),
                   input=STEP2.encode())
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"3 rows kept\n7\n"


@pytest.mark.parametrize("args, words", [
    (["-c", "1", "x.py"], b"either -c CODE or a FILE"),
    (["-c", "1"] * 17, b"at most 16 steps"),
    (["f%d.py" % i for i in range(17)], b"at most 16 steps"),
    (["-", "-"], b"standard input"),
])
def test_chain_usage_errors(msup, args, words):
    out = msup.cli("exec", *args, input=b"1\n")
    assert out.returncode == 2 and out.stdout == b""
    assert words in out.stderr, out.stderr


def test_one_step_with_keep_writes_version_2(msup, tmp_path):
    record = tmp_path / "kept.json"
    out = msup.cli("exec", "--keep", "raw.csv", "--save", str(record), "-c", STEP1)
    assert out.returncode == 0, out.stderr
    assert b"call 1 of" not in out.stderr
    rec = json.loads(record.read_text())
    assert rec["codeinterpReplay"] == 2 and len(rec["calls"]) == 1
    assert rec["calls"][0]["keepOutputs"] == ["raw.csv"]
    status, report, _ = replay(msup, record)
    assert status == 0, report
    assert chain_lines(report)[1]["kept outputs"] == "identical"


GOOD_CALL = {"summary": "s", "code": "1", "message": {"type": "result", "outcome": "ok"}}


@pytest.mark.parametrize("calls", [
    {"summary": "s"},
    [],
    [GOOD_CALL] * 17,
    [dict(GOOD_CALL, code=None)],
    [{k: v for k, v in GOOD_CALL.items() if k != "summary"}],
    [{k: v for k, v in GOOD_CALL.items() if k != "message"}],
    [GOOD_CALL, "call"],
    [dict(GOOD_CALL, keepOutputs=3)],
    [dict(GOOD_CALL, keepOutputs="some")],
    [dict(GOOD_CALL, keepOutputs=["a", 1])],
    [dict(GOOD_CALL, keepOutputs=["n%d" % i for i in range(17)])],
])
def test_bad_chain_record_is_an_error(msup, tmp_path, calls):
    record = tmp_path / "bad.json"
    record.write_text(json.dumps({"codeinterpReplay": 2, "sources": [], "calls": calls}))
    status, report, err = replay(msup, record)
    assert status == 2 and report == ""
    assert err.startswith("codeinterp: replay:"), err


def test_chain_save_artifacts_keeps_the_first_file(msup, tmp_path):
    """Each call writes into DIR; a name an earlier call wrote is refused (status 13 when
    every call was ok), and the chain goes on."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    again = "n = open('/outputs/raw.csv', 'w').write('second\\n')\n"
    out = msup.cli("exec", "--save-artifacts", str(out_dir), "-c", STEP1, "-c", again, "-c", "print('third')")
    assert out.returncode == 13, out.stderr
    assert out.stdout == b"third\n"
    assert (out_dir / "raw.csv").read_text() == "v\n1\n2\nbad\n4\n"
    assert b"cannot save artifact \"raw.csv\"" in out.stderr and b"codeinterp: call 3 of 3" in out.stderr

