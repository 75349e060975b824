"""The asyncio client: the same API, concurrent calls on one connection."""
import asyncio

import pytest
from suite import SMALL_POLICY
from testlib import NORTHSTAR, Supervisor, calls, wait_for
from testlib.waits import held

from codeinterp import ClientTimeout, ConnectionLost, InvalidInput, Overloaded, Progress, QuotaExhausted, Result
from codeinterp.aio import AsyncClient


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_hello_status_execute(shared_supervisor):
    daemon = shared_supervisor()
    async def main():
        async with AsyncClient(daemon.socket) as c:
            h = await c.hello()
            s = await c.status()
            phases = []
            r = await c.execute(NORTHSTAR, "Northstar", on_progress=lambda p: phases.append(p.phase))
            return h, s, phases, r

    h, s, phases, r = run(main())
    assert h.protocol == 1 and s.pid == daemon.proc.pid
    assert isinstance(r, Result) and r.outcome == "ok" and r.result.text == "8.25"
    assert phases[:3] == ["requested", "queued", "started"] and phases[-1] == "finished"


def test_concurrent_executes_are_demultiplexed(shared_supervisor):
    """Three calls at once on one connection, finishing in another order than sent:
    each gets its own result and only its own progress."""
    daemon = shared_supervisor()
    async def main():
        async with AsyncClient(daemon.socket) as c:
            seen = {0: [], 1: [], 2: []}

            async def one(i, delay):
                return await c.execute("import time\ntime.sleep(%s)\n%d * 10" % (delay, i), "call %d" % i,
                                       on_progress=lambda p: seen[i].append(p))
            results = await asyncio.gather(one(0, 0.6), one(1, 0.0), one(2, 0.3))
            return results, seen

    results, seen = run(main())
    assert [r.result.text for r in results] == ["0", "10", "20"]
    assert len({r.id for r in results}) == 3 and len({r.call_id for r in results}) == 3
    for r, progress in zip(results, seen.values()):
        assert progress and {p.call_id for p in progress} == {r.call_id}
        assert progress[-1].phase == "finished"


def test_cancel_one_call_while_another_runs(shared_supervisor):
    daemon = shared_supervisor()
    async def main():
        async with AsyncClient(daemon.socket) as c:
            states = []

            async def on_progress(p):
                if p.phase == "started":
                    states.append(await c.cancel(p.call_id))

            slow = asyncio.ensure_future(c.execute("import time\ntime.sleep(60)", "slow", on_progress=on_progress))
            quick = await c.execute("sum(range(10))", "quick")
            return await slow, quick, states

    slow, quick, states = run(main())
    assert states == ["running"]
    assert slow.outcome == "cancelled" and slow.detail == "cancelled while running"
    assert quick.outcome == "ok" and quick.result.text == "45"


def test_invocation_and_errors(shared_supervisor):
    small = shared_supervisor(SMALL_POLICY)
    async def main():
        async with AsyncClient(small.socket) as c:
            async with c.invocation() as inv:
                src = await inv.put_source("n", "21")
                r1 = await inv.execute("int(open(input_files['n']).read()) * 2", "double", ["n"])
                att = await inv.put_attachment("b", b"\x00\xff", "", "application/octet-stream", "b.bin")
                r2 = await inv.execute("open(input_assets['b']['original'], 'rb').read()", "bytes", ["b"])
                with pytest.raises(QuotaExhausted):
                    await inv.execute("1", "third")
            with pytest.raises(InvalidInput):
                await c.execute("", "empty")
            return src, r1, att, r2, inv.closed

    src, r1, att, r2, closed = run(main())
    assert src.bytes == 2 and r1.result.text == "42"
    assert att.original_bytes == 2 and r2.result.text == "b'\\x00\\xff'"
    assert [i.source_id for i in r2.evidence.inputs] == ["b"] and closed


def test_overloaded_is_raised_with_its_request_id_or_none():
    """maxActiveWorkers: 1, maxQueuedCalls: 0: while a call runs, the next one is refused
    (overloaded, with its request id). maxConnections: 1: a second connection is refused
    with an id-less overloaded error and closed."""
    d = Supervisor("maxConnections: 1\nmaxConnectionsPerPeer: 1\nmaxQueuedCalls: 0\nmaxActiveWorkers: 1\n")
    try:
        async def main():
            for _ in range(200):  # until the supervisor has seen wait_ready's probe go
                first = await AsyncClient(d.socket).connect()
                try:
                    await first.hello()
                    break
                except (Overloaded, ConnectionLost):
                    await first.close()
                    await asyncio.sleep(0.01)
            async with first:
                running = asyncio.Event()
                call_ids = []

                def on_progress(p):
                    if p.phase == "started":
                        call_ids.append(p.call_id)
                        running.set()
                slow = asyncio.ensure_future(first.execute("import time\ntime.sleep(60)", "slow",
                                                           on_progress=on_progress))
                await running.wait()
                with pytest.raises(Overloaded) as queued:
                    await first.execute("1", "refused")
                async with AsyncClient(d.socket) as second:
                    # Let the reader take the error before writing: writing to the closed
                    # socket first could lose it. (The client keeps it as its failure.)
                    while second._failure is None:
                        await asyncio.sleep(0.005)
                    with pytest.raises(Overloaded) as refused:
                        await second.hello()
                    with pytest.raises(Overloaded):  # and every later request
                        await second.status()
                assert await first.cancel(call_ids[0]) == "running"
                return queued.value, refused.value, await slow

        queued, refused, slow = run(main())
        assert queued.request_id == 3 and queued.code == "overloaded"
        assert refused.request_id is None and "maxConnections" in refused.message
        assert slow.outcome == "cancelled"
    finally:
        assert d.stop() == 0


def test_closed_client_raises_connection_lost(shared_supervisor):
    daemon = shared_supervisor()
    async def main():
        c = await AsyncClient(daemon.socket).connect()
        await c.close()
        with pytest.raises(ConnectionLost):
            await c.hello()

    run(main())


def test_stream_yields_progress_then_the_result(shared_supervisor):
    daemon = shared_supervisor()
    async def main():
        async with AsyncClient(daemon.socket) as c:
            events = [e async for e in c.stream(NORTHSTAR, "Northstar")]
            async with c.invocation() as inv:
                await inv.put_source("n", "21")
                in_inv = [e async for e in inv.stream("int(open(input_files['n']).read()) * 2", "double", ["n"])]
            return events, in_inv

    events, in_inv = run(main())
    for evs, value in ((events, "8.25"), (in_inv, "42")):
        *progress, result = evs
        assert isinstance(result, Result) and result.result.text == value
        assert progress and all(isinstance(p, Progress) for p in progress)
        assert [p.phase for p in progress][:3] == ["requested", "queued", "started"]
        assert progress[-1].phase == "finished" and {p.call_id for p in progress} == {result.call_id}


def test_stream_raises_rejections(shared_supervisor):
    daemon = shared_supervisor()
    async def main():
        async with AsyncClient(daemon.socket) as c:
            with pytest.raises(InvalidInput):
                async for _ in c.stream("  ", "blank code"):
                    pass

    run(main())


@pytest.mark.parametrize("where", ["client", "call"])
def test_call_timeout_raises_and_cancels_the_call(shared_supervisor, where):
    """Past the timeout (the client's, or the one call's), ClientTimeout is raised and
    the call is cancelled in the supervisor: it leaves status's calls."""
    daemon = shared_supervisor()
    async def main():
        call_ids = []
        client_timeout, call_timeout = (0.5, None) if where == "client" else (None, 0.5)
        async with AsyncClient(daemon.socket, timeout=client_timeout) as c:
            with pytest.raises(ClientTimeout) as e:
                await c.execute(held(), "held past the timeout", on_progress=lambda p: call_ids.append(p.call_id),
                                timeout=call_timeout)
            assert isinstance(e.value, TimeoutError) and daemon.socket in str(e.value)
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: wait_for(lambda: call_ids[0] not in calls(daemon), "the timed-out call to go"))
            assert (await c.execute("6 * 7", "the connection goes on")).result.text == "42"

    run(main())


def test_keep_outputs_async(shared_supervisor):
    sup = shared_supervisor()

    async def main():
        async with AsyncClient(sup.socket) as c:
            async with c.invocation() as inv:
                r1 = await inv.execute("open('/outputs/n.txt', 'w').write('21')", "write", keep_outputs=["n.txt"])
                events = [e async for e in inv.stream("int(open(input_files['out-1-n.txt']).read()) * 2", "double",
                                                      ["out-1-n.txt"], keep_outputs="all")]
            with pytest.raises(InvalidInput):
                await c.execute("1", "anonymous", keep_outputs=["n.txt"])
            return r1, events[-1]

    r1, r2 = run(main())
    (k,) = r1.kept_outputs
    assert k.source_id == "out-1-n.txt" and k.size == 2
    assert isinstance(r2, Result) and r2.result.text == "42" and r2.kept_outputs == ()
    assert r2.evidence.inputs[0].produced_by.call == 1 and r2.evidence.inputs[0].produced_by.sha256 == k.sha256
