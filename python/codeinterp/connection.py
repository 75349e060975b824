"""Framing: one msgpack object per frame, after a 4-byte big-endian length."""
from __future__ import annotations

import os
import socket
import struct
from typing import Any, Optional, TypeVar

import msgpack  # type: ignore[import]  # (Debian's python3-msgpack has no type hints)

from .errors import ConnectionLost, ProtocolError, RequestNotEncodable

DEFAULT_SOCKET = "/run/codeinterp/codeinterp.sock"

# The largest frame this client accepts (as libcodeinterp: 64 MiB).
MAX_FRAME_BYTES = 64 << 20

_LENGTH = struct.Struct(">I")


def default_socket() -> str:
    """``$CODEINTERP_SOCKET``, else ``/run/codeinterp/codeinterp.sock``."""
    return os.environ.get("CODEINTERP_SOCKET") or DEFAULT_SOCKET


def encode_frame(obj: Any) -> bytes:
    """obj packed as msgpack (bytes as bin, str as str) behind its length;
    RequestNotEncodable for a value msgpack cannot pack."""
    try:
        body: bytes = msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise RequestNotEncodable("the request cannot be encoded: %s" % e) from e
    return _LENGTH.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length announced by a 4-byte header; ProtocolError past MAX_FRAME_BYTES."""
    n = int(_LENGTH.unpack(header)[0])
    if n > MAX_FRAME_BYTES:
        raise ProtocolError("the supervisor sent a frame of %d bytes (limit %d)" % (n, MAX_FRAME_BYTES))
    return n


def decode_body(body: bytes) -> Any:
    """One msgpack object from a frame body; ProtocolError if it is not exactly one."""
    try:
        return msgpack.unpackb(body, raw=False)
    except (ValueError, msgpack.UnpackException) as e:
        raise ProtocolError("the supervisor sent a frame that is not one msgpack object: %s" % e) from e


_Closes = TypeVar("_Closes", bound="Closing")


class Closing:
    """A context manager that calls ``close()`` on the way out: ``with X(...) as x:``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closes) -> _Closes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection(Closing):
    """One blocking connection to the supervisor, speaking frames and nothing more:
    no request ids, no waiting for answers (:class:`codeinterp.Client` does that).
    Meant for tools and tests that need the wire itself (``send_raw``).

    ``timeout`` (seconds, None for none) applies to every socket operation; a
    timeout raises :class:`TimeoutError`. A connection closed by the peer raises
    :class:`ConnectionLost` when a read finds its end; the socket's other failures
    are the OSErrors themselves (``BrokenPipeError``, ``ConnectionResetError``,
    ``FileNotFoundError`` from the constructor): this is the wire, for tools and tests.
    :class:`codeinterp.Client` turns them into the package's errors.
    """

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = None) -> None:
        self.path = path or default_socket()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(self.path)
        except BaseException:
            self.sock.close()
            raise

    @classmethod
    def from_socket(cls, sock: socket.socket) -> "Connection":
        """A Connection over an already connected stream socket (a socketpair, an
        accepted connection, a descriptor passed by socket activation)."""
        conn = cls.__new__(cls)
        conn.path = ""
        conn.sock = sock
        return conn

    def fileno(self) -> int:
        """The socket's descriptor (for select/poll)."""
        return self.sock.fileno()

    def close(self) -> None:
        """Close the socket; the supervisor cancels this connection's calls."""
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (no framing). MSG_NOSIGNAL: a supervisor that has
        closed the connection gives BrokenPipeError, never SIGPIPE, even in a process
        that restored SIGPIPE's default action."""
        self.sock.sendall(data, socket.MSG_NOSIGNAL)

    def send(self, obj: Any) -> None:
        """Send obj as one frame (as :meth:`send_raw`)."""
        self.send_raw(encode_frame(obj))

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionLost("connection to the supervisor at %s closed" % (self.path or "its socket"),
                                     path=self.path)
            got += k
        return bytes(buf)

    def recv_raw_frame(self) -> bytes:
        """The body of the next frame, undecoded."""
        return self._recv_exact(frame_length(self._recv_exact(4)))

    def recv(self) -> Any:
        """The next message, decoded (server messages are maps with string keys)."""
        return decode_body(self.recv_raw_frame())
