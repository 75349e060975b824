"""The blocking client: requests, their answers, typed results and errors.

Error replies are raised (:mod:`codeinterp.errors`); results are returned as
:class:`Result` whatever their outcome. A :class:`Client` is one connection and
is not thread-safe; use :class:`codeinterp.aio.AsyncClient` for concurrent calls.
"""
from __future__ import annotations

import collections
import select
import socket
from typing import Any, Callable, Deque, Dict, Iterable, Literal, Mapping, Optional, Sequence, Union

from .connection import Closing, Connection, default_socket
from .errors import (CodeinterpError, ConnectionLost, ProtocolError, error_from_message, transport_error,
                     transport_errors)
from .records import Hello, InvocationInfo, Progress, Result, Source, Status, from_wire

ProgressCallback = Callable[[Progress], Any]


# ---- Requests: the request field names, for both clients. ----

# keep_outputs of execute: "all", or the names of the /outputs files to keep as sources
# of the invocation (docs/protocol.md#kept-outputs); None keeps nothing.
KeepOutputs = Union[Literal["all"], Sequence[str], None]


def execute_fields(code: str, summary: str, source_ids: Iterable[str], invocation: Optional[str],
                   keep_outputs: KeepOutputs = None) -> dict[str, Any]:
    """The fields of an ``execute`` request. keep_outputs is sent as given: the
    supervisor checks it (InvalidInput without an invocation, or for a bad name)."""
    fields: dict[str, Any] = {"summary": summary, "code": code, "sourceIds": list(source_ids)}
    if invocation is not None:
        fields["invocation"] = invocation
    if keep_outputs is not None:
        if isinstance(keep_outputs, str) and keep_outputs != "all":
            raise TypeError("keep_outputs: \"all\" or a sequence of names, not the string %r" % keep_outputs)
        fields["keepOutputs"] = keep_outputs if isinstance(keep_outputs, str) else list(keep_outputs)
    return fields


def read_source_fields(invocation: str, source_id: str, text: str, origin: Optional[str]) -> dict[str, Any]:
    """The fields of a ``source.put`` of a ``read_source``."""
    fields: dict[str, Any] = {"invocation": invocation, "sourceId": source_id, "kind": "read_source", "text": text}
    if origin is not None:
        fields["origin"] = origin
    return fields


def attachment_fields(invocation: str, source_id: str, original: Union[bytes, str], text: str, media_type: str,
                      file_name: str) -> dict[str, Any]:
    """The fields of a ``source.put`` of an attachment (``original`` bytes go as bin)."""
    return {"invocation": invocation, "sourceId": source_id, "kind": "attachment", "text": text,
            "original": original, "mediaType": media_type, "fileName": file_name}


# ---- Answers. ----

def reply_fields(m: Any, op: str) -> Mapping[str, Any]:
    """The ``reply`` to an op; an ``error`` is raised as its typed exception."""
    if not isinstance(m, Mapping):
        raise ProtocolError("expected a map, got %r" % type(m).__name__)
    if m.get("type") == "error":
        raise error_from_message(m)
    if m.get("type") != "reply" or m.get("op") != op:
        raise ProtocolError("expected the reply to %r, got %r" % (op, {k: m.get(k) for k in ("type", "op")}))
    return m


def describe_fields(m: Mapping[str, Any]) -> dict[str, Any]:
    """The ``describe`` reply without the envelope (``id``, ``type``, ``op``)."""
    return {k: v for k, v in m.items() if k not in ("id", "type", "op")}


def execute_answer(m: Any) -> Union[Progress, Result]:
    """A message for an ``execute``: a Progress or the Result; an ``error`` is raised."""
    kind = m.get("type") if isinstance(m, Mapping) else None
    if kind == "progress":
        return from_wire(Progress, m)
    if kind == "result":
        return from_wire(Result, m)
    if kind == "error":
        raise error_from_message(m)
    raise ProtocolError("unexpected %r message for an execute" % (kind,))


class Client(Closing):
    """A blocking connection to ``codeinterpd``.

    ``socket_path`` None means ``$CODEINTERP_SOCKET``, else
    ``/run/codeinterp/codeinterp.sock``; ``timeout`` bounds every socket operation
    (seconds; None: wait for ever), connecting included. Request ids count from 1.
    Messages for one request that arrive while another is awaited (for example, a
    call's progress while a :meth:`cancel` from its progress callback waits for its
    reply) are kept for it. A failure of the socket is raised as
    :class:`~codeinterp.errors.ConnectFailed`, :class:`ConnectionLost` or
    :class:`~codeinterp.errors.ClientTimeout`, each naming the socket's path.
    """

    def __init__(self, socket_path: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.path = socket_path or default_socket()
        self._timeout = timeout
        self.connection = self._connect()
        self._next_id = 1
        self._pending: Dict[int, Deque[Any]] = {}

    def _connect(self) -> Connection:
        with transport_errors(self.path, connecting=True):
            return Connection(self.path, self._timeout)

    def close(self) -> None:
        """Close the connection: the supervisor cancels its calls and invocations."""
        self.connection.close()

    # -- plumbing --

    def _closed_while_idle(self) -> bool:
        """With no request pending: whether the supervisor has closed the connection
        (after connectionIdleTimeoutMs without an invocation or a call, or when it
        stopped). Its parting ``error`` without an id (``"closing": true``) is read and
        dropped; the close follows it at once (waited for up to the client's timeout, 10 s
        without one), and one that does not follow is raised. A connection-level error
        after which the connection goes on (no ``closing``: a frame the supervisor could
        not read) is raised at once, as the next read would."""
        sock = self.connection.sock
        parting = None
        wait = 0.0
        if sock.fileno() < 0:
            return False  # closed here: the send says so
        while select.select([sock], [], [], wait)[0]:
            try:
                if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    return True
            except BlockingIOError:
                break
            except OSError:
                return True
            m = self.connection.recv()  # the supervisor writes a frame whole
            if isinstance(m, Mapping) and m.get("type") == "error" and m.get("id") is None:
                if m.get("closing") is not True:
                    raise error_from_message(m)
                parting = m
                wait = self._timeout if self._timeout is not None else 10.0
        if parting is not None:
            raise error_from_message(parting)
        return False

    def _send(self, op: str, fields: Mapping[str, Any]) -> int:
        # A connection closed between requests held no call and no invocation (those
        # keep it open): a new one loses nothing, so the request goes there.
        with transport_errors(self.path):
            closed = not self._pending and bool(self.connection.path) and self._closed_while_idle()
        if closed:
            self.connection.close()
            self.connection = self._connect()
        rid = self._next_id
        self._next_id += 1
        self._pending[rid] = collections.deque()
        try:
            self.connection.send({"op": op, "id": rid, **fields})
        except (BrokenPipeError, ConnectionResetError) as e:
            del self._pending[rid]
            raise self._why_closed() from e
        except OSError as e:
            del self._pending[rid]
            raise transport_error(e, self.path) from e
        except BaseException:
            del self._pending[rid]
            raise
        return rid

    def _why_closed(self) -> CodeinterpError:
        """The supervisor closed the connection before a request could be sent: it may
        have said why first, in an ``error`` without an id (``permission_denied`` for a
        peer its policy refuses), which is still there to read; that error, else
        ConnectionLost. The peer is gone, so the reads end at once."""
        try:
            while True:
                m = self.connection.recv()
                if isinstance(m, Mapping) and m.get("type") == "error" and m.get("id") is None:
                    return error_from_message(m)
        except (OSError, CodeinterpError):
            pass
        return ConnectionLost("the supervisor at %s closed the connection" % self.path, path=self.path)

    def _next_for(self, rid: int) -> Any:
        """The next message for request rid. An ``error`` without an id (a
        connection-level error) is raised here; messages for requests nobody waits
        for are dropped."""
        queue = self._pending[rid]
        while not queue:
            with transport_errors(self.path):
                m = self.connection.recv()
            mid = m.get("id") if isinstance(m, Mapping) else None
            if mid is None:
                if isinstance(m, Mapping) and m.get("type") == "error":
                    raise error_from_message(m)
                raise ProtocolError("a message without a request id: %r" % (m,))
            if mid in self._pending:
                self._pending[mid].append(m)
        return queue.popleft()

    def _call(self, op: str, **fields: Any) -> Mapping[str, Any]:
        rid = self._send(op, fields)
        try:
            return reply_fields(self._next_for(rid), op)
        finally:
            del self._pending[rid]

    # -- ops --

    def hello(self) -> Hello:
        """Protocol and runtime versions, the policy, a call's limits, the outcomes."""
        return from_wire(Hello, self._call("hello"))

    def describe(self) -> dict[str, Any]:
        """The tool definition (the ``describe`` op); InvalidInput ("unknown op") from
        a supervisor that does not have it."""
        return describe_fields(self._call("describe"))

    def status(self) -> Status:
        """The supervisor's process-wide counters."""
        return from_wire(Status, self._call("status"))

    def cancel(self, call_id: int) -> str:
        """Cancel a call of this connection; returns its state when cancelled
        (``"queued"`` or ``"running"``). Its result (outcome ``cancelled``) still
        arrives for the :meth:`execute` waiting on it. NotFound if it has finished."""
        state = self._call("cancel", callId=call_id).get("state")
        if not isinstance(state, str):
            raise ProtocolError("cancel reply without a state")
        return state

    def execute(self, code: str, summary: str, source_ids: Sequence[str] = (),
                on_progress: Optional[ProgressCallback] = None, *, invocation: Optional[str] = None,
                keep_outputs: KeepOutputs = None) -> Result:
        """Run code in a fresh worker and wait for its Result (returned whatever the
        outcome). on_progress gets each Progress; it may call :meth:`cancel`.
        keep_outputs (with an invocation): ``"all"`` or names of /outputs files to keep
        as sources of the invocation, ``out-<call>-<name>``; ``Result.kept_outputs``
        says what became of each. Rejections before admission are raised
        (InvalidInput, UnavailableSource, NotFound, QuotaExhausted, Overloaded,
        Cancelled, WorkerError)."""
        rid = self._send("execute", execute_fields(code, summary, source_ids, invocation, keep_outputs))
        try:
            while True:
                answer = execute_answer(self._next_for(rid))
                if isinstance(answer, Result):
                    return answer
                if on_progress is not None:
                    on_progress(answer)
        finally:
            del self._pending[rid]

    def invocation(self) -> "Invocation":
        """An invocation, opened by ``with`` (or :meth:`Invocation.open`) and
        closed on leaving it."""
        return Invocation(self)


class InvocationState:
    """What :class:`Invocation` and :class:`codeinterp.aio.AsyncInvocation` share: the
    client, the ``invocation.open`` reply, whether it was closed, and the fields of
    their requests. Each adds the calls, blocking or as coroutines."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.info: Optional[InvocationInfo] = None
        self.closed = False

    @property
    def id(self) -> str:
        """The invocation's id (32 hex characters); RuntimeError before it is open."""
        if self.info is None:
            raise RuntimeError("the invocation is not open")
        return self.info.invocation

    def _check_not_open(self) -> None:
        if self.info is not None:
            raise RuntimeError("the invocation is already open")

    def _opened(self, reply: Mapping[str, Any]) -> None:
        self.info = from_wire(InvocationInfo, reply)

    def _closing(self) -> bool:
        """True (once) when ``invocation.close`` is to be sent."""
        if self.info is None or self.closed:
            return False
        self.closed = True
        return True

    def _source_fields(self, source_id: str, text: str, origin: Optional[str]) -> Dict[str, Any]:
        return read_source_fields(self.id, source_id, text, origin)

    def _attachment_fields(self, source_id: str, original: Union[bytes, str], text: str, media_type: str,
                           file_name: str) -> Dict[str, Any]:
        return attachment_fields(self.id, source_id, original, text, media_type, file_name)


class Invocation(InvocationState):
    """One agent run's context on a Client: a source registry and a call quota.

    ``with client.invocation() as inv:`` sends ``invocation.open`` on entry and
    ``invocation.close`` on exit (if the block raised, an error from closing is
    not raised over it).
    """

    client: Client

    def open(self) -> "Invocation":
        """Send ``invocation.open``."""
        self._check_not_open()
        self._opened(self.client._call("invocation.open"))
        return self

    def close(self) -> None:
        """Send ``invocation.close`` (once): queued and running calls are cancelled and
        the sources dropped."""
        if self._closing():
            self.client._call("invocation.close", invocation=self.id)

    def __enter__(self) -> "Invocation":
        return self.open()

    def __exit__(self, exc_type: Optional[type], *exc: object) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except (CodeinterpError, OSError):
            pass  # the block's own exception says more

    def put_source(self, source_id: str, text: str, origin: Optional[str] = None) -> Source:
        """Register a ``read_source`` source (its canonical text)."""
        return from_wire(Source, self.client._call("source.put", **self._source_fields(source_id, text, origin)))

    def put_attachment(self, source_id: str, original: Union[bytes, str], text: str, media_type: str,
                       file_name: str) -> Source:
        """Register an attachment: its original bytes and its canonical text."""
        return from_wire(Source, self.client._call("source.put", **self._attachment_fields(
            source_id, original, text, media_type, file_name)))

    def execute(self, code: str, summary: str, source_ids: Sequence[str] = (),
                on_progress: Optional[ProgressCallback] = None, *, keep_outputs: KeepOutputs = None) -> Result:
        """:meth:`Client.execute` in this invocation (its sources, its quota, and the
        files it keeps: keep_outputs)."""
        return self.client.execute(code, summary, source_ids, on_progress, invocation=self.id,
                                   keep_outputs=keep_outputs)
