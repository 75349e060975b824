"""Typed exceptions: one per error outcome of the protocol, and one per way the
connection itself can fail.

An ``error`` message from the supervisor (a rejected request, or a
connection-level problem) is raised as the subclass of :class:`CodeinterpError`
named after its ``code``. A ``result`` message is never raised, whatever its
outcome: it is returned as a :class:`codeinterp.Result`. A failure of the socket
(no supervisor there, the connection closed mid-call, a timeout) is raised as a
:class:`TransportError` that names the socket's path; a request the client cannot
encode, as :class:`RequestNotEncodable`. Nothing else leaves the clients: no bare
OSError, no msgpack exception.
"""
from __future__ import annotations

import contextlib
import errno as _errno
from typing import Any, Iterator, Mapping, Optional

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


class RequestNotEncodable(CodeinterpError, TypeError):
    """A request's field is not something msgpack can send (an object of another type,
    an integer out of range); nothing was sent. Also a :class:`TypeError`."""


class TransportError(CodeinterpError):
    """The connection to the supervisor failed (not a protocol outcome): ``path`` is
    the socket's path ("" for a connection over a socket passed in), ``errno`` the
    operating system's error number when there was one."""

    errno: Optional[int]

    def __init__(self, message: str, *, path: Optional[str] = None, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


# (typeshed declares OSError.errno an int; it is None where the error has no number.)
class ConnectFailed(TransportError, OSError):  # type: ignore[misc]
    """No connection could be made: no socket at the path (``errno`` ENOENT), nobody
    listening there (ECONNREFUSED), no permission (EACCES). Also an :class:`OSError`
    with that ``errno``."""


class ConnectionLost(TransportError, EOFError):
    """The connection closed (by the supervisor, or reset) before the answer came
    (also an :class:`EOFError`)."""


class ClientTimeout(TransportError, TimeoutError):  # type: ignore[misc]
    """A timeout of this client's (the socket's timeout, or an :class:`AsyncClient`'s
    connect or per-call timeout) passed (also a :class:`TimeoutError`). Not the
    ``timeout`` outcome of a call, which is a :class:`codeinterp.Result`."""


def transport_error(e: OSError, path: str, connecting: bool = False) -> TransportError:
    """The package's error for e, an OSError of the socket at path: a timeout is
    ClientTimeout, a failed connect ConnectFailed, anything else ConnectionLost. An
    error that already is a TransportError is returned as it is."""
    if isinstance(e, TransportError):
        return e
    where = path or "the supervisor's socket"
    reason = e.strerror or str(e) or type(e).__name__
    if isinstance(e, TimeoutError):
        return ClientTimeout("timed out %s %s" % ("connecting to" if connecting else "waiting on", where),
                             path=path, errno=e.errno)
    if connecting:
        return ConnectFailed("cannot connect to the supervisor at %s: %s" % (where, reason), path=path,
                             errno=e.errno)
    if e.errno in (_errno.EBADF, _errno.ENOTCONN):
        reason = "the connection is closed"
    return ConnectionLost("connection to the supervisor at %s lost: %s" % (where, reason), path=path,
                          errno=e.errno)


@contextlib.contextmanager
def transport_errors(path: str, connecting: bool = False) -> Iterator[None]:
    """Around socket I/O: an OSError leaving the block is raised as
    :func:`transport_error` says."""
    try:
        yield
    except OSError as e:
        if isinstance(e, TransportError):
            raise
        raise transport_error(e, path, connecting) from e


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
