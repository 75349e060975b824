"""Rendering results for the model and progress for users.

:func:`model_text` is the text an agent's model sees for a call; its format is
specified in docs/client.md ("Model text") and matches
``codeinterp exec --model-text``. :func:`progress_card` is a one-line card for a
user interface; it shows metadata only (docs/client.md, "Progress cards").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .records import Channel, Progress, Result

PARTIAL_NOTE = "partial: the worker did not finish; the output below is what had arrived by then"


def channel_text(name: str, ch: Channel) -> str:
    """A channel's text with the omitted run marked in place, on a line of its own,
    as ``codeinterp exec`` prints it; always ends with a newline."""
    text = ch.text
    if ch.omitted_characters > 0:
        head, tail = text[:ch.omitted_at], text[ch.omitted_at:]
        if head and not head.endswith("\n"):
            head += "\n"
        text = "%s[... %s: %d characters (%d bytes) omitted ...]\n%s" % (
            head, name, ch.omitted_characters, ch.omitted_bytes, tail)
    if not text.endswith("\n"):
        text += "\n"
    return text


def channel_block(name: str, ch: Channel) -> str:
    """A header line with the channel's exact counts, then its text; empty for a
    channel that received nothing."""
    if ch.total_characters == 0:
        return ""
    header = "%s: %d characters" % (name, ch.total_characters)
    if ch.omitted_characters > 0:
        header += ", %d omitted" % ch.omitted_characters
    if ch.replaced_characters > 0:
        header += ", %d invalid UTF-8 sequences replaced" % ch.replaced_characters
    return header + "\n" + channel_text(name, ch)


def model_text(r: Result) -> str:
    """The bounded, model-visible text of a result: the outcome first (a timeout or
    cancellation is a runtime outcome, never Python output), then the channels with
    exact omission counts, then the exception."""
    out = ["outcome: %s%s\n" % (r.outcome, " (%s)" % r.limit if r.limit is not None else "")]
    if r.detail is not None:
        out.append("detail: %s\n" % r.detail)
    if r.worker_error is not None:
        out.append("worker setup failed: stage %s, errno %d\n" % (r.worker_error.stage, r.worker_error.errno))
    out.append("elapsed: %d ms\n" % r.elapsed_ms)
    if r.partial:
        out.append(PARTIAL_NOTE + "\n")
    out.append(channel_block("stdout", r.stdout))
    out.append(channel_block("stderr", r.stderr))
    if r.result is not None:
        out.append(channel_block("value", r.result))
    if r.exception is not None:
        out.append("exception: %s\n" % r.exception.type)
        out.append(channel_block("message", r.exception.message))
        out.append(channel_block("traceback", r.exception.traceback))
    return "".join(out)


def _size(name: str, characters: int, omitted: int) -> str:
    return "%s %d chars%s" % (name, characters, " (%d omitted)" % omitted if omitted else "")


def progress_card(p: Progress) -> str:
    """``[code_interpreter] PHASE | ELAPSED s | stdout N chars | stderr N chars``:
    the phase (with the queue position while queued, the outcome when finished),
    the elapsed time and the output sizes. Nothing else: no code, output, source
    IDs, paths or exception text (a progress message carries none of them)."""
    phase = p.phase
    if p.queue_position is not None:
        phase += " #%d" % p.queue_position
    if p.outcome is not None:
        phase += ": %s" % p.outcome
    return "[code_interpreter] %s | %.1f s | %s | %s" % (
        phase, p.elapsed_ms / 1000.0,
        _size("stdout", p.stdout_characters, p.stdout_omitted_characters),
        _size("stderr", p.stderr_characters, p.stderr_omitted_characters))
