"""Typed exceptions: one per error outcome of the protocol.

An ``error`` message from the supervisor (a rejected request, or a
connection-level problem) is raised as the subclass of :class:`CodeinterpError`
named after its ``code``. A ``result`` message is never raised, whatever its
outcome: it is returned as a :class:`codeinterp.Result`.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from . import render


class CodeinterpError(Exception):
    """Base class of every error this package raises.

    ``code`` is the outcome name of the ``error`` message (None for failures that
    are not protocol outcomes), ``message`` its one-line text, ``request_id`` the
    id of the request it answers (None for a connection-level error), ``raw`` the
    decoded message (or None).
    """

    code: Optional[str] = None

    def __init__(self, message: str, *, code: Optional[str] = None, request_id: Optional[int] = None,
                 raw: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message if code is None else "%s: %s" % (code, message))
        if code is not None:
            self.code = code
        self.message = message
        self.request_id = request_id
        self.raw = raw

    def model_text(self) -> str:
        """The text the model sees for this rejection (docs/client.md, "Model text and
        progress cards"): no code ran, the reason, and a hint."""
        return render.error_model_text(self)


class InvalidInput(CodeinterpError):
    """``invalid_input``: the request was malformed or out of bounds."""

    code = "invalid_input"


class UnavailableSource(CodeinterpError):
    """``unavailable_source``: a source ID is not available to the call."""

    code = "unavailable_source"


class QuotaExhausted(CodeinterpError):
    """``quota_exhausted``: the invocation has spent ``maxCalls`` calls."""

    code = "quota_exhausted"


class Overloaded(CodeinterpError):
    """``overloaded``: the queue is full, or the connection was refused."""

    code = "overloaded"


class NotFound(CodeinterpError):
    """``not_found``: unknown call or invocation on this connection."""

    code = "not_found"


class PermissionDenied(CodeinterpError):
    """``permission_denied``: the peer's uid/gid is not allowed by the policy."""

    code = "permission_denied"


class WorkerError(CodeinterpError):
    """``worker_error`` as an error: the supervisor could not admit the call, store
    an invocation or source, or fit a result into ``maxResultBytes``."""

    code = "worker_error"


class Cancelled(CodeinterpError):
    """``cancelled`` as an error: an ``execute`` sent while the supervisor shuts down."""

    code = "cancelled"


class ProtocolError(CodeinterpError):
    """The supervisor sent something this client cannot read (not a protocol outcome)."""


class ConnectionLost(CodeinterpError, EOFError):
    """The supervisor closed the connection (also an :class:`EOFError`)."""


ERRORS: Mapping[str, type[CodeinterpError]] = {
    cls.code: cls
    for cls in (InvalidInput, UnavailableSource, QuotaExhausted, Overloaded, NotFound, PermissionDenied,
                WorkerError, Cancelled)
    if cls.code is not None
}


def error_from_message(m: Mapping[str, Any]) -> CodeinterpError:
    """The exception for an ``error`` message: the class named by its code, or
    :class:`CodeinterpError` for a code this client does not know."""
    code = m.get("code")
    code = code if isinstance(code, str) else "unknown"
    message = m.get("message")
    request_id = m.get("id")
    return ERRORS.get(code, CodeinterpError)(str(message), code=code,
                                             request_id=request_id if isinstance(request_id, int) else None,
                                             raw=m)
