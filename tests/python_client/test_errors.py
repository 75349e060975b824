"""Connection failures raise the package's own errors, naming the socket (no bare
OSError, ConnectionError or msgpack exception)."""
import asyncio
import errno
import socket

import pytest
from testlib import WAIT_LIMIT, Supervisor, proc, wait_for
from testlib.waits import held

from codeinterp import Client, ClientTimeout, CodeinterpError, ConnectFailed, ConnectionLost, RequestNotEncodable
from codeinterp.aio import AsyncClient


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, WAIT_LIMIT))


def connect_sync(path, **kw):
    Client(path, **kw).close()


def connect_async(path, **kw):
    async def main():
        await (await AsyncClient(path, **kw).connect()).close()
    run(main())


CONNECT = [connect_sync, connect_async]


def refusing_socket(path):
    """A socket file nobody listens on: connect() gets ECONNREFUSED."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    return s


@pytest.mark.parametrize("connect", CONNECT)
def test_no_socket_is_connect_failed(tmp_path, connect):
    path = str(tmp_path / "nobody.sock")
    with pytest.raises(ConnectFailed) as e:
        connect(path)
    assert isinstance(e.value, OSError) and isinstance(e.value, CodeinterpError)
    assert e.value.errno == errno.ENOENT and e.value.path == path
    assert path in str(e.value) and "No such file" in str(e.value)


@pytest.mark.parametrize("connect", CONNECT)
def test_refused_is_connect_failed(tmp_path, connect):
    path = str(tmp_path / "refusing.sock")
    with refusing_socket(path):
        with pytest.raises(ConnectFailed) as e:
            connect(path)
    assert e.value.errno == errno.ECONNREFUSED and path in str(e.value)


def full_listener(path):
    """A listening socket at path whose backlog is full, and the sockets that fill it."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    fillers = []
    while True:  # until a connect would block: the backlog is full
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        fillers.append(s)
        try:
            s.connect(path)
        except BlockingIOError:
            return listener, fillers


def test_connect_to_a_full_backlog(tmp_path):
    """A listener whose backlog is full does not accept: connect waits, until
    connect_timeout (AsyncClient), or fails at once (Client with a timeout)."""
    path = str(tmp_path / "full.sock")
    listener, fillers = full_listener(path)
    try:
        with pytest.raises(ClientTimeout) as e:
            connect_async(path, connect_timeout=0.2)
        assert isinstance(e.value, TimeoutError) and path in str(e.value)
        # The blocking client with a timeout: that connect fails at once (EAGAIN).
        with pytest.raises(ConnectFailed) as e:
            connect_sync(path, timeout=WAIT_LIMIT)
        assert e.value.errno == errno.EAGAIN and path in str(e.value)
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_async_connect_goes_through_once_the_backlog_has_room(tmp_path):
    """The connect that found the backlog full (EAGAIN) is tried again, and succeeds
    once the listener accepts one of the waiting connections."""
    path = str(tmp_path / "full.sock")
    listener, fillers = full_listener(path)
    try:
        async def main():
            c = AsyncClient(path, connect_timeout=WAIT_LIMIT)
            connecting = asyncio.ensure_future(c.connect())
            await asyncio.sleep(0)  # its first attempt: EAGAIN
            assert not connecting.done()
            accepted, _ = listener.accept()  # room for one
            try:
                await connecting
                assert c._sock.getpeername() == path
            finally:
                accepted.close()
                await c.close()
        run(main())
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_sync_timeout_names_the_socket(shared_supervisor):
    """The blocking client's socket timeout, while a call holds: ClientTimeout (a
    TimeoutError too). Closing the client cancels the call."""
    daemon = shared_supervisor()
    c = Client(daemon.socket, timeout=0.3)
    try:
        with pytest.raises(ClientTimeout) as e:
            c.execute(held(), "held until the client gives up")
        assert isinstance(e.value, TimeoutError) and daemon.socket in str(e.value)
    finally:
        c.close()


def test_unencodable_request_is_typed(shared_supervisor):
    c = shared_supervisor().client()
    with pytest.raises(RequestNotEncodable):
        c.execute("1", "x", source_ids=[object()])
    with pytest.raises(RequestNotEncodable):
        c.execute("1", "x", source_ids=[2 ** 70])
    assert c.execute("1", "the connection goes on").result.text == "1"


def reclaim(sup, below):
    """After sup was killed: wait until the processes it had started are gone, then
    start a supervisor, which removes the subtree it left (docs/operations.md), and
    stop it."""
    sup.stop()
    wait_for(lambda: all(proc.starttime(p) != t for p, t in below.items()), "the killed supervisor's processes to go")
    assert Supervisor().stop() == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_closed_mid_call_is_connection_lost(kind):
    """The supervisor dies while a call runs: the waiting execute raises ConnectionLost
    (an EOFError), naming the socket; never ConnectionResetError or EOFError itself."""
    sup = Supervisor()
    below = {}
    try:
        def on_progress(p):
            if p.phase == "started":
                below.update(proc.descendants(sup.proc.pid))
                sup.proc.kill()  # its zygote and workers die with it

        with pytest.raises(ConnectionLost) as e:
            if kind == "sync":
                with Client(sup.socket, timeout=WAIT_LIMIT) as c:
                    c.execute(held(), "the supervisor dies meanwhile", on_progress=on_progress)
            else:
                async def main():
                    async with AsyncClient(sup.socket, timeout=WAIT_LIMIT) as c:
                        await c.execute(held(), "the supervisor dies meanwhile", on_progress=on_progress)
                run(main())
        assert isinstance(e.value, EOFError) and e.value.path == sup.socket and sup.socket in str(e.value)
    finally:
        reclaim(sup, below)
