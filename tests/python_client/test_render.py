"""Progress cards (metadata only) and the model text of outcomes that are hard to
provoke (worker_error, resource_limit), rendered from edited real results."""
import re

from codeinterp import Progress, Result
from codeinterp.records import from_wire
from suite import SMALL_POLICY
from testlib.waits import held, release_running

CARD = re.compile(r"code_interpreter: (requested|queued|started|running|finished: [a-z_]+) · \d+\.\d s"
                  r"( · queue position \d+)? · stdout \d+ characters( \(\d+ omitted\))?"
                  r" · stderr \d+ characters( \(\d+ omitted\))?")


def test_cards_show_no_code_output_ids_paths_or_exception_text(shared_supervisor):
    """A call whose code, summary, source id, file name, output and exception all hold
    a marker: no card shows any of it, and each card is exactly the documented line."""
    small = shared_supervisor(SMALL_POLICY)
    secret = "zq7secret"
    cards = []
    released = []

    def on_progress(p):
        cards.append(p.card())
        if p.phase == "running" and not released:  # a heartbeat's card is in: let the code go on
            released.append(release_running(small))

    c = small.client()
    with c.invocation() as inv:
        inv.put_attachment(secret + "_id", secret.encode(), secret, "text/x-" + secret, secret + ".txt")
        code = held("import sys\nprint(%r * 20)\nsys.stderr.write(%r)" % (secret, secret),
                    "raise ValueError(%r + input_files[%r])" % (secret, secret + "_id"))
        r = inv.execute(code, "summary " + secret, [secret + "_id"], on_progress=on_progress)
    cards.append(r.card())
    assert r.outcome == "python_exception" and secret in r.exception.message.text  # the marker was there
    assert len(cards) >= 4
    for card in cards:
        assert CARD.fullmatch(card), card
        assert secret not in card and "/inputs" not in card and "ValueError" not in card
    assert cards[-1].startswith("code_interpreter: finished: python_exception · ")
    # stdout: 20 markers and a newline, C = 100: 81 omitted; stderr 9 characters.
    assert cards[-1].endswith(" · stdout 181 characters (81 omitted) · stderr 9 characters")
    assert cards[-2] == cards[-1]  # the finished progress and the result agree
    assert released and "running" in " ".join(cards)  # the code held until a heartbeat came


def test_card_format():
    p = Progress(id=3, call_id=9, phase="queued", elapsed_ms=1250, queue_position=2, stdout_characters=0,
                 stderr_characters=0, stdout_omitted_characters=0, stderr_omitted_characters=0, outcome=None)
    assert p.card() == "code_interpreter: queued · 1.2 s · queue position 2 · stdout 0 characters · stderr 0 characters"
    raw = {"id": 3, "type": "progress", "callId": 9, "phase": "finished", "elapsedMs": 30001,
           "queuePosition": None, "stdoutCharacters": 70000, "stderrCharacters": 5,
           "stdoutOmittedCharacters": 6000, "stderrOmittedCharacters": 0, "outcome": "timeout",
           "code": "print('leak')"}  # a field progress never has: ignored
    assert from_wire(Progress, raw).card() == (
        "code_interpreter: finished: timeout · 30.0 s · stdout 70000 characters (6000 omitted) · stderr 5 characters")
    raw.update(phase="leak: print('x')", outcome="leak")  # names outside the closed sets show as ?
    assert from_wire(Progress, raw).card().startswith("code_interpreter: ? · 30.0 s · ")


def test_model_text_of_worker_error_and_resource_limit(shared_supervisor):
    client = shared_supervisor().client()
    raw = dict(client.execute("print('x')", "x").raw)
    raw.update(outcome="worker_error", detail="the worker died from signal 31 (SIGSYS)", partial=True,
               workerError={"stage": "seccomp", "errno": 22})
    r = from_wire(Result, raw)
    assert r.worker_error.stage == "seccomp"
    assert r.model_text() == (
        "outcome: worker_error\nelapsed: %d ms\n"
        "The sandbox failed, not the code; calling again may work. This is not Python output.\n"
        "detail: the worker died from signal 31 (SIGSYS)\n"
        "Any output below is partial: what had arrived when the worker was stopped.\n"
        "--- stdout (2 characters) ---\nx\n" % r.elapsed_ms)
    # The code ended its own process: not the sandbox's failure.
    raw.update(detail="the worker exited with status 3 without a result", workerError=None,
               exitStatus=dict(raw["exitStatus"], code=3, signal=None))
    assert from_wire(Result, raw).model_text() == (
        "outcome: worker_error\nelapsed: %d ms\n"
        "The code ended its own process (exit status 3, as os._exit() does) before a result was sent. The sandbox "
        "did not fail: the same code will end the same way. This is not Python output.\n"
        "detail: the worker exited with status 3 without a result\n"
        "Any output below is what the code wrote before its process ended.\n"
        "--- stdout (2 characters) ---\nx\n" % r.elapsed_ms)
    raw.update(detail="the worker died from signal 11 (SEGV)", exitStatus=dict(raw["exitStatus"], code=None, signal=11))
    assert "The code's process was ended by signal 11, which the code sent itself" in from_wire(Result, raw).model_text()
    raw.update(outcome="resource_limit", limit="cpu", detail="CPU time limit (30 s) reached", workerError=None,
               partial=False)
    assert from_wire(Result, raw).model_text() == (
        "outcome: resource_limit (cpu)\nelapsed: %d ms\nA sandbox limit ended the code.\n"
        "detail: CPU time limit (30 s) reached\n--- stdout (2 characters) ---\nx\n" % r.elapsed_ms)
    raw.update(outcome="made_up", limit="made up")
    assert from_wire(Result, raw).model_text().startswith(
        "outcome: ?\nelapsed: %d ms\nThe runtime sent an outcome this client does not know.\n" % r.elapsed_ms)
