"""The asyncio client: the API of :class:`codeinterp.Client`, with coroutines.

One reader task per connection demultiplexes the supervisor's messages by
request id, so any number of :meth:`AsyncClient.execute` calls (and
:meth:`AsyncClient.cancel`) can run at once on one connection. Progress
callbacks run in the task that awaits the execute; a callback may return an
awaitable, which is awaited. :meth:`AsyncClient.stream` gives a call's progress
as an async iterator instead, its Result last.

Time limits: ``connect_timeout`` bounds connecting, ``timeout`` each request (an
execute: until its Result; ``execute(..., timeout=)`` and ``stream(..., timeout=)``
set it for one call). Past one, :class:`~codeinterp.errors.ClientTimeout` is
raised, and an execute's call is cancelled in the supervisor. Cancelling an
execute's task (``asyncio.wait_for``) does not cancel the call there;
:meth:`AsyncClient.cancel` does.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from typing import Any, AsyncGenerator, Awaitable, Callable, Dict, Mapping, Optional, Sequence, Union

from .client import InvocationState, KeepOutputs, describe_fields, execute_answer, execute_fields, reply_fields
from .connection import decode_body, default_socket, encode_frame, frame_length
from .errors import ClientTimeout, CodeinterpError, ConnectionLost, ProtocolError, error_from_message, transport_error
from .records import Hello, Progress, Result, Source, Status, from_wire

AsyncProgressCallback = Callable[[Progress], Union[None, Awaitable[None]]]
# What AsyncClient.stream yields: each Progress, then the Result.
CallEvent = Union[Progress, Result]


async def _connect_unix(sock: socket.socket, path: str) -> None:
    """Connect the non-blocking AF_UNIX sock to path. Such a connect never is in
    progress: it succeeds or fails at once, and fails with EAGAIN while the listener's
    backlog is full; no event says when there is room, so it is tried again, at
    growing intervals (up to 50 ms), until it succeeds or fails otherwise.
    (``loop.sock_connect`` would take that EAGAIN for a connect in progress and, the
    socket being writable, report it connected.)"""
    pause = 0.001
    while True:
        try:
            sock.connect(path)
            return
        except BlockingIOError:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)


class AsyncClient:
    """One asyncio connection to ``codeinterpd``: ``async with AsyncClient(path) as c``
    (or ``await AsyncClient(path).connect()`` and ``await c.close()``).

    The socket is driven by the loop's ``sock_*`` calls, not by a stream transport:
    asyncio's transports send without ``MSG_NOSIGNAL``, so a supervisor that closes the
    connection (it refuses this peer, say) would raise SIGPIPE in a program that has
    restored that signal's default action, and a transport whose write failed stops
    reading, losing the supervisor's reason. Here every send passes ``MSG_NOSIGNAL``
    and the reader task reads until the end.

    ``connect_timeout`` (seconds, None: none) bounds connecting; ``timeout`` (None:
    none) each request, an execute until its Result. A failure of the socket is
    raised as :class:`~codeinterp.errors.ConnectFailed`, :class:`ConnectionLost` or
    :class:`~codeinterp.errors.ClientTimeout`, each naming the socket's path."""

    def __init__(self, socket_path: Optional[str] = None, *, timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None) -> None:
        self.path = socket_path or default_socket()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._sock: Optional[socket.socket] = None
        self._task: Optional[asyncio.Task[None]] = None
        self._send_lock = asyncio.Lock()  # one frame at a time: sends may wait for room
        self._next_id = 1
        self._pending: Dict[int, asyncio.Queue[Any]] = {}
        self._failure: Optional[BaseException] = None
        self._parting = False  # the supervisor said it closes the connection ("closing": true)
        self._closed = False  # by close(): no new connection after that

    async def connect(self) -> "AsyncClient":
        """Open the connection and start the reader task."""
        if self._sock is not None:
            raise RuntimeError("already connected")
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.setblocking(False)
            await asyncio.wait_for(_connect_unix(sock, self.path), self.connect_timeout)
        except asyncio.TimeoutError as e:
            sock.close()
            raise ClientTimeout("timed out connecting to %s (connect_timeout %s s)" % (
                self.path, self.connect_timeout), path=self.path) from e
        except OSError as e:
            sock.close()
            raise transport_error(e, self.path, connecting=True) from e
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._task = loop.create_task(self._read_loop())
        return self

    async def close(self) -> None:
        """Close the connection: the supervisor cancels its calls and invocations;
        calls still awaited here raise ConnectionLost."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._sock is not None:
            self._sock.close()
        self._fail(ConnectionLost("the client closed its connection to %s" % self.path, path=self.path))

    async def __aenter__(self) -> "AsyncClient":
        """Connect, unless :meth:`connect` has already been awaited."""
        return self if self._sock is not None else await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing --

    def _fail(self, e: BaseException) -> None:
        """Every waiter, present and future, gets e."""
        if self._failure is None:
            self._failure = e
        for queue in self._pending.values():
            queue.put_nowait(e)

    async def _recv_exact(self, n: int) -> bytes:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = await loop.sock_recv_into(self._sock, view[got:])
            if k == 0:
                raise ConnectionLost("the supervisor at %s closed the connection" % self.path, path=self.path)
            got += k
        return bytes(buf)

    async def _read_loop(self) -> None:
        try:
            while True:
                header = await self._recv_exact(4)
                m = decode_body(await self._recv_exact(frame_length(header)))
                mid = m.get("id") if isinstance(m, Mapping) else None
                if mid is None:
                    if isinstance(m, Mapping) and m.get("type") == "error":
                        if m.get("closing") is True:  # the close follows: every waiter gets it
                            self._parting = True
                            self._fail(error_from_message(m))
                        else:  # a connection-level error; the connection goes on
                            for waiting in self._pending.values():
                                waiting.put_nowait(error_from_message(m))
                        continue
                    raise ProtocolError("a message without a request id: %r" % (m,))
                queue = self._pending.get(mid)
                if queue is not None:
                    queue.put_nowait(m)
        except OSError as e:
            self._fail(transport_error(e, self.path))
        except CodeinterpError as e:
            self._fail(e)

    async def _writable(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        fd = self._sock.fileno()
        room: asyncio.Future[None] = loop.create_future()

        def writable() -> None:
            if not room.done():
                room.set_result(None)
        loop.add_writer(fd, writable)
        try:
            await room
        finally:
            loop.remove_writer(fd)

    async def _send_frame(self, data: bytes) -> None:
        """All of data, MSG_NOSIGNAL: a closed peer is BrokenPipeError, never SIGPIPE."""
        assert self._sock is not None
        view = memoryview(data)
        async with self._send_lock:
            while view:
                try:
                    n = self._sock.send(view, socket.MSG_NOSIGNAL)
                except (BlockingIOError, InterruptedError):
                    await self._writable()
                    continue
                view = view[n:]

    async def _closed_while_idle(self) -> bool:
        """With no request pending: whether the supervisor has closed the connection.
        The reader task reads its parting ``error`` without an id (``"closing": true``)
        and the close that follows it at once (waited for up to 10 s); then the task is
        done. Data that has arrived is left to the reader task first: a parting error, or
        a late message for a request nobody waits for any more."""
        if self._closed or self._pending or self._task is None or self._sock is None:
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not self._task.done() and not self._parting and loop.time() < deadline:
            try:
                self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False  # open, and everything that came has been read
            except OSError:
                pass
            await asyncio.sleep(0)  # the reader task's turn
        if self._parting and not self._task.done():
            await asyncio.wait({self._task}, timeout=max(0.0, deadline - loop.time()))
        return self._task.done() and self._failure is not None

    async def _send(self, op: str, fields: Mapping[str, Any], pending: bool = True) -> int:
        """Send a request; its id. pending: keep its answers for _next_for (otherwise
        the reader task drops them)."""
        if self._sock is None:
            raise RuntimeError("not connected: use `async with AsyncClient(...)` or connect()")
        if await self._closed_while_idle():
            # Closed by the supervisor between requests (connectionIdleTimeoutMs
            # without an invocation or a call, or it stopped): nothing was held on it,
            # so the request goes to a new connection.
            self._sock.close()
            self._sock, self._task, self._failure, self._parting = None, None, None, False
            await self.connect()
        if self._failure is not None:
            raise self._failure
        rid = self._next_id
        self._next_id += 1
        frame = encode_frame({"op": op, "id": rid, **fields})
        if pending:
            self._pending[rid] = asyncio.Queue()
        try:
            await self._send_frame(frame)
        except (BrokenPipeError, ConnectionResetError) as e:
            self._pending.pop(rid, None)
            raise await self._why_closed() from e
        except OSError as e:
            self._pending.pop(rid, None)
            raise transport_error(e, self.path) from e
        except BaseException:
            self._pending.pop(rid, None)
            raise
        return rid

    async def _why_closed(self) -> BaseException:
        """A send found the connection closed by the supervisor. It may have said why
        first, in an ``error`` without an id (``permission_denied`` for a peer its
        policy refuses): the reader task reads on to the end of the connection (the
        peer is gone, so that is soon) and keeps that error. It, else ConnectionLost."""
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=10)
        if isinstance(self._failure, CodeinterpError) and not isinstance(self._failure, ConnectionLost):
            return self._failure
        return ConnectionLost("the supervisor at %s closed the connection" % self.path, path=self.path)

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        """The loop time by which a request started now must be answered (timeout None:
        the client's timeout; both None: no deadline)."""
        timeout = self.timeout if timeout is None else timeout
        return None if timeout is None else asyncio.get_running_loop().time() + timeout

    async def _next_for(self, rid: int, deadline: Optional[float] = None) -> Any:
        """The next message for request rid; ClientTimeout once the loop time passes
        deadline."""
        queue = self._pending[rid]
        if deadline is None:
            m = await queue.get()
        else:
            try:
                m = await asyncio.wait_for(queue.get(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError as e:
                raise ClientTimeout("timed out waiting for request %d's answer from %s" % (rid, self.path),
                                    path=self.path) from e
        if isinstance(m, BaseException):
            raise m
        return m

    async def _call(self, op: str, fields: Optional[Mapping[str, Any]] = None,
                    timeout: Optional[float] = None) -> Mapping[str, Any]:
        deadline = self._deadline(timeout)
        rid = await self._send(op, fields or {})
        try:
            return reply_fields(await self._next_for(rid, deadline), op)
        finally:
            del self._pending[rid]

    # -- ops --

    async def hello(self) -> Hello:
        """As :meth:`codeinterp.Client.hello`."""
        return from_wire(Hello, await self._call("hello"))

    async def describe(self) -> dict[str, Any]:
        """As :meth:`codeinterp.Client.describe`."""
        return describe_fields(await self._call("describe"))

    async def status(self) -> Status:
        """As :meth:`codeinterp.Client.status`."""
        return from_wire(Status, await self._call("status"))

    async def cancel(self, call_id: int) -> str:
        """As :meth:`codeinterp.Client.cancel`."""
        state = (await self._call("cancel", {"callId": call_id})).get("state")
        if not isinstance(state, str):
            raise ProtocolError("cancel reply without a state")
        return state

    async def execute(self, code: str, summary: str, source_ids: Sequence[str] = (),
                      on_progress: Optional[AsyncProgressCallback] = None, *,
                      invocation: Optional[str] = None, timeout: Optional[float] = None,
                      keep_outputs: KeepOutputs = None) -> Result:
        """As :meth:`codeinterp.Client.execute`; other calls may run meanwhile.
        timeout: for this call (None: the client's)."""
        async with contextlib.aclosing(self.stream(code, summary, source_ids, invocation=invocation,
                                                   timeout=timeout, keep_outputs=keep_outputs)) as events:
            async for event in events:
                if isinstance(event, Result):
                    return event
                if on_progress is not None:
                    ret = on_progress(event)
                    if inspect.isawaitable(ret):
                        await ret
        raise ProtocolError("the call's messages ended without a result")

    async def stream(self, code: str, summary: str, source_ids: Sequence[str] = (), *,
                     invocation: Optional[str] = None, timeout: Optional[float] = None,
                     keep_outputs: KeepOutputs = None) -> AsyncGenerator[CallEvent, None]:
        """Run code: ``async for event in client.stream(code, summary)`` gets each
        :class:`Progress` as it arrives, then the :class:`Result`, last. The request is
        sent when the iteration starts; rejections are raised from it as by
        :meth:`execute`. Leaving the loop early does not cancel the call
        (:meth:`cancel` does). Past timeout (None: the client's), ClientTimeout is
        raised and the call is cancelled in the supervisor."""
        deadline = self._deadline(timeout)
        rid = await self._send("execute", execute_fields(code, summary, source_ids, invocation, keep_outputs))
        call_id: Optional[int] = None
        try:
            while True:
                event = execute_answer(await self._next_for(rid, deadline))
                call_id = event.call_id
                yield event
                if isinstance(event, Result):
                    return
        except ClientTimeout:
            if call_id is not None:
                await self._cancel_quietly(call_id)
            raise
        finally:
            self._pending.pop(rid, None)

    async def _cancel_quietly(self, call_id: int) -> None:
        """Send a cancel for call_id and do not wait for its reply (the reader task
        drops it): a call this client stopped waiting for."""
        with contextlib.suppress(CodeinterpError):
            await self._send("cancel", {"callId": call_id}, pending=False)

    def invocation(self) -> "AsyncInvocation":
        """An invocation: ``async with client.invocation() as inv``."""
        return AsyncInvocation(self)


class AsyncInvocation(InvocationState):
    """As :class:`codeinterp.Invocation`, with coroutines and ``async with``."""

    client: AsyncClient

    async def open(self) -> "AsyncInvocation":
        """Send ``invocation.open``."""
        self._check_not_open()
        self._opened(await self.client._call("invocation.open"))
        return self

    async def close(self) -> None:
        """Send ``invocation.close`` (once)."""
        if self._closing():
            await self.client._call("invocation.close", {"invocation": self.id})

    async def __aenter__(self) -> "AsyncInvocation":
        return await self.open()

    async def __aexit__(self, exc_type: Optional[type], *exc: object) -> None:
        if exc_type is None:
            await self.close()
            return
        try:
            await self.close()
        except (CodeinterpError, OSError):
            pass  # the block's own exception says more

    async def put_source(self, source_id: str, text: str, origin: Optional[str] = None) -> Source:
        """As :meth:`codeinterp.Invocation.put_source`."""
        return from_wire(Source, await self.client._call("source.put", self._source_fields(source_id, text, origin)))

    async def put_attachment(self, source_id: str, original: Union[bytes, str], text: str, media_type: str,
                             file_name: str) -> Source:
        """As :meth:`codeinterp.Invocation.put_attachment`."""
        return from_wire(Source, await self.client._call("source.put", self._attachment_fields(
            source_id, original, text, media_type, file_name)))

    async def execute(self, code: str, summary: str, source_ids: Sequence[str] = (),
                      on_progress: Optional[AsyncProgressCallback] = None, *,
                      timeout: Optional[float] = None, keep_outputs: KeepOutputs = None) -> Result:
        """As :meth:`codeinterp.Invocation.execute` (timeout as :meth:`AsyncClient.execute`)."""
        return await self.client.execute(code, summary, source_ids, on_progress, invocation=self.id,
                                         timeout=timeout, keep_outputs=keep_outputs)

    def stream(self, code: str, summary: str, source_ids: Sequence[str] = (), *,
               timeout: Optional[float] = None, keep_outputs: KeepOutputs = None) -> AsyncGenerator[CallEvent, None]:
        """:meth:`AsyncClient.stream` in this invocation."""
        return self.client.stream(code, summary, source_ids, invocation=self.id, timeout=timeout,
                                  keep_outputs=keep_outputs)
