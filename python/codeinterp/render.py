"""Rendering for the model and for users, byte for byte as libcodeinterp's
``ci_render_model_text`` and ``ci_render_progress_card`` (``codeinterp exec
--model-text --cards``). The format is specified in docs/client.md ("Model text
and progress cards").

Only names from the runtime's closed sets (outcomes, phases, limits) are copied
into a rendering as words; anything else shows as ``?``, so a forged or garbled
message cannot pass text through a field that should hold a name.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .errors import CodeinterpError
    from .records import Channel, Progress, Result

OUTCOMES = ("ok", "python_exception", "timeout", "cancelled", "invalid_input", "unavailable_source",
            "quota_exhausted", "resource_limit", "worker_error", "overloaded", "not_found", "permission_denied")
PHASES = ("requested", "queued", "started", "running", "finished")
LIMITS = ("memory", "cpu", "file_size", "processes")
# The media types the supervisor's sniffer gives.
MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "application/pdf",
               "application/xml", "application/json", "text/csv", "text/plain", "application/octet-stream")

# Outcomes the runtime decided (not the code): their output is partial, never Python output.
RUNTIME_NOTES = {
    "timeout": "The runtime stopped the call because its deadline passed. This is not Python output.",
    "cancelled": "The runtime cancelled the call before it finished. This is not Python output.",
    "worker_error": "The sandbox failed, not the code; calling again may work. This is not Python output.",
}
# worker_error when the code itself ended its process (code_death()).
CODE_EXIT_NOTE = ("The code ended its own process (exit status %d, as os._exit() does) before a result was sent. "
                  "The sandbox did not fail: the same code will end the same way. This is not Python output.")
CODE_SIGNAL_NOTE = ("The code's process was ended by signal %d, which the code sent itself (os.kill(), os.abort(), "
                    "signal.raise_signal()) or caused by crashing in native code. The sandbox did not fail: the same "
                    "code will most likely end the same way. This is not Python output.")
CODE_SECCOMP_NOTE = ("The sandbox's system-call filter ended the process: the code (or a library it used) made a "
                     "system call that is not allowed here. The sandbox did not fail: the same code will end the same "
                     "way. This is not Python output.")
CODE_DEATH_OUTPUT_NOTE = "Any output below is what the code wrote before its process ended."
RESOURCE_LIMIT_NOTE = "A sandbox limit ended the code."
UNKNOWN_OUTCOME_NOTE = "The runtime sent an outcome this client does not know."
PARTIAL_NOTE = "Any output below is partial: what had arrived when the worker was stopped."
NO_VALUE_NOTE = "(no output and no value: end the code with an expression or print() to see a result)"
NO_OUTPUT_NOTE = "(no output)"

REJECTED_NOTE = "No code ran: the request was rejected before execution."
ERROR_HINTS = {
    "invalid_input": "Correct the arguments (see the tool's input schema) and call again.",
    "unavailable_source": "Use only source ids this conversation offers.",
    "quota_exhausted": "No more calls are allowed in this session; answer without the tool.",
    "overloaded": "The service is busy; calling again later may work.",
    "worker_error": "The sandbox failed, not the code; calling again may work.",
    "cancelled": "The service is shutting down.",
    "not_found": "The session's invocation is gone (closed or expired).",
}


def _known(value: object, names: tuple[str, ...]) -> Optional[str]:
    return value if isinstance(value, str) and value in names else None


def _prefix(text: str, max_bytes: int) -> str:
    """At most max_bytes UTF-8 bytes of text, never half a code point."""
    return text.encode()[:max_bytes].decode("utf-8", "ignore")


def channel_section(label: str, ch: Channel) -> str:
    """``--- LABEL (N characters[; K omitted where marked, not shown][; R invalid UTF-8
    sequences shown as U+FFFD]) ---``, then the kept text with the omitted run marked
    in place on a line of its own; ends with a newline unless it is empty."""
    header = "--- %s (%d characters" % (label, ch.total_characters)
    if ch.omitted_characters > 0:
        header += "; %d omitted where marked, not shown" % ch.omitted_characters
    if ch.replaced_characters > 0:
        header += "; %d invalid UTF-8 sequences shown as U+FFFD" % ch.replaced_characters
    body = ch.text
    if ch.omitted_characters > 0:
        head, tail = body[:ch.omitted_at], body[ch.omitted_at:]
        if head and not head.endswith("\n"):
            head += "\n"
        body = "%s[... %d characters omitted ...]\n%s" % (head, ch.omitted_characters, tail)
    if body and not body.endswith("\n"):
        body += "\n"
    return header + ") ---\n" + body


def artifact_name_safe(name: str) -> bool:
    """A name that may become a file name: 1..255 UTF-8 bytes, not . or .., no '/',
    no C0 control character or DEL (libcodeinterp's ci_artifact_name_safe)."""
    raw = name.encode("utf-8", "surrogateescape")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return (0 < len(raw) <= 255 and name not in (".", "..")
            and not any(c < 0x20 or c == 0x7f or c == 0x2f for c in raw))


def artifacts_section(r: Result) -> str:
    """``--- files in /outputs (N returned, B bytes[; K omitted, OB bytes]) ---``, one
    ``NAME: MEDIA_TYPE, N bytes`` line each, then the omitted count; empty when the call
    had no /outputs or left nothing there."""
    if r.artifacts is None or (not r.artifacts and r.omitted_artifacts == 0):
        return ""
    total = sum(a.size for a in r.artifacts)
    out = ["--- files in /outputs (%d returned, %d bytes" % (len(r.artifacts), total)]
    if r.omitted_artifacts > 0:
        out.append("; %d omitted, %d bytes" % (r.omitted_artifacts, r.omitted_artifact_bytes))
    out.append(") ---\n")
    for a in r.artifacts:
        out.append("%s: %s, %d bytes\n" % (a.name if artifact_name_safe(a.name) else "?",
                                            _known(a.media_type, MEDIA_TYPES) or "?", a.size))
    if r.omitted_artifacts > 0:
        out.append("[... %d more entries of /outputs (%d bytes) omitted ...]\n"
                   % (r.omitted_artifacts, r.omitted_artifact_bytes))
    return "".join(out)


# Why a file was not kept (docs/protocol.md#kept-outputs).
KEEP_REFUSALS = ("not_produced", "invalid_name", "max_source_bytes", "max_sources_per_invocation",
                 "max_invocation_bytes", "invocation_closed", "out_of_memory")
_SOURCE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _safe(value: object, pattern: re.Pattern[str]) -> str:
    return value if isinstance(value, str) and pattern.fullmatch(value) else "?"


def kept_section(r: Result) -> str:
    """``--- kept outputs (N kept, R refused) ---``, then per file asked for
    ``NAME: SOURCE_ID, N bytes, sha256 DIGEST`` or ``NAME: not kept (REASON)``; empty
    when the call asked to keep nothing (libcodeinterp's render_kept())."""
    if r.kept_outputs is None:
        return ""
    kept = sum(1 for k in r.kept_outputs if k.refused is None)
    out = ["--- kept outputs (%d kept, %d refused) ---\n" % (kept, len(r.kept_outputs) - kept)]
    for k in r.kept_outputs:
        name = k.name if artifact_name_safe(k.name) else "?"
        if k.refused is not None:
            out.append("%s: not kept (%s)\n" % (name, _known(k.refused, KEEP_REFUSALS) or "?"))
        else:
            out.append("%s: %s, %d bytes, sha256 %s\n" % (name, _safe(k.source_id, _SOURCE_ID), k.size or 0,
                                                           _safe(k.sha256, _SHA256)))
    return "".join(out)


def code_death(r: Result) -> Optional[str]:
    """The note for a worker_error the code itself caused by ending its process, or None
    (the sandbox's): the supervisor's detail together with the exit status it describes,
    and no sandbox setup step reported (libcodeinterp's code_death())."""
    if r.outcome != "worker_error" or r.worker_error is not None or r.exit_status is None:
        return None
    detail = r.detail if isinstance(r.detail, str) else ""
    if detail.startswith("killed by the seccomp filter"):
        return CODE_SECCOMP_NOTE
    signal = r.exit_status.signal
    if detail.startswith("the worker died from signal ") and isinstance(signal, int) and signal >= 0:
        return CODE_SIGNAL_NOTE % signal
    code = r.exit_status.code
    if detail.startswith("the worker exited with status ") and isinstance(code, int) and code >= 0:
        return CODE_EXIT_NOTE % code
    return None


def model_text(r: Result) -> str:
    """The text the model sees for a result: the outcome and what it means, the
    elapsed time, the runtime's detail, then the exception type, stdout, stderr,
    the exception message and traceback, and the value, each with exact counts."""
    outcome = _known(r.outcome, OUTCOMES)
    limit = _known(r.limit, LIMITS)
    out = ["outcome: %s%s\n" % (outcome or "?", " (%s)" % limit if limit else ""),
           "elapsed: %d ms\n" % r.elapsed_ms]
    death = code_death(r)
    if outcome is None:
        out.append(UNKNOWN_OUTCOME_NOTE + "\n")
    elif death is not None:
        out.append(death + "\n")
    elif outcome in RUNTIME_NOTES:
        out.append(RUNTIME_NOTES[outcome] + "\n")
    elif outcome == "resource_limit":
        out.append(RESOURCE_LIMIT_NOTE + "\n")
    if r.detail is not None:
        out.append("detail: %s\n" % _prefix(r.detail, 1024))
    if death is not None:
        out.append(CODE_DEATH_OUTPUT_NOTE + "\n")
    elif outcome in RUNTIME_NOTES or r.partial:
        out.append(PARTIAL_NOTE + "\n")
    if r.exception is not None:
        out.append("exception: %s\n" % _prefix(r.exception.type, 256))
    if r.stdout.total_characters > 0:
        out.append(channel_section("stdout", r.stdout))
    if r.stderr.total_characters > 0:
        out.append(channel_section("stderr", r.stderr))
    if r.exception is not None:
        out.append(channel_section("exception message", r.exception.message))
        if r.exception.traceback.total_characters > 0:
            out.append(channel_section("traceback", r.exception.traceback))
    if r.result is not None:
        out.append(channel_section("value", r.result))
    if (r.stdout.total_characters == 0 and r.stderr.total_characters == 0 and r.result is None
            and r.exception is None):
        out.append((NO_VALUE_NOTE if outcome == "ok" else NO_OUTPUT_NOTE) + "\n")
    out.append(artifacts_section(r))
    out.append(kept_section(r))
    return "".join(out)


def error_model_text(e: CodeinterpError) -> str:
    """The text the model sees for a rejected request (an ``error`` message)."""
    code = _known(e.code, OUTCOMES)
    out = ["outcome: %s\n" % (code or "?"), REJECTED_NOTE + "\n", "reason: %s\n" % _prefix(e.message, 1024)]
    if code in ERROR_HINTS:
        out.append(ERROR_HINTS[code] + "\n")
    return "".join(out)


def _seconds(ms: int) -> str:
    return "%d.%d s" % (ms // 1000, ms % 1000 // 100)


def _sizes(name: str, characters: int, omitted: int) -> str:
    return " · %s %d characters%s" % (name, characters, " (%d omitted)" % omitted if omitted > 0 else "")


def _files(n: int, size: int, omitted: int) -> str:
    return " · files %d (%d bytes)%s" % (n, size, " (%d omitted)" % omitted if omitted > 0 else "")


def progress_card(p: Progress) -> str:
    """``code_interpreter: PHASE[: OUTCOME] · S.D s[ · queue position N] · stdout N
    characters[ (K omitted)] · stderr N characters[ (K omitted)]``. Metadata only."""
    outcome = _known(p.outcome, OUTCOMES)
    card = "code_interpreter: %s%s · %s" % (_known(p.phase, PHASES) or "?", ": " + outcome if outcome else "",
                                           _seconds(p.elapsed_ms))
    if p.queue_position is not None:
        card += " · queue position %d" % p.queue_position
    card += (_sizes("stdout", p.stdout_characters, p.stdout_omitted_characters)
             + _sizes("stderr", p.stderr_characters, p.stderr_omitted_characters))
    if p.artifacts:
        card += _files(p.artifacts, p.artifact_bytes or 0, 0)
    return card


def result_card(r: Result) -> str:
    """The card of a finished call, from its result: ``code_interpreter: finished:
    OUTCOME · S.D s · stdout ... · stderr ...``. Metadata only."""
    card = ("code_interpreter: finished: %s · %s" % (_known(r.outcome, OUTCOMES) or "?", _seconds(r.elapsed_ms))
            + _sizes("stdout", r.stdout.total_characters, r.stdout.omitted_characters)
            + _sizes("stderr", r.stderr.total_characters, r.stderr.omitted_characters))
    if r.artifacts or r.omitted_artifacts:
        card += _files(len(r.artifacts or ()), sum(a.size for a in r.artifacts or ()), r.omitted_artifacts)
    return card
