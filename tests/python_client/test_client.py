"""The blocking client: ops, typed results, raised errors, invocations, sources."""
import dataclasses
import hashlib
import os
import select

import pytest
from suite import SMALL_POLICY
from testlib import NORTHSTAR, WAIT_LIMIT

import codeinterp
from codeinterp import (Channel, Client, Histogram, InvalidInput, NotFound, Progress, ProtocolError, QuotaExhausted,
                        Result, Status, UnavailableSource)
from codeinterp.records import WIRE, from_wire, wire_name


def sha256(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def test_hello_is_typed(shared_supervisor):
    client = shared_supervisor().client()
    h = client.hello()
    assert isinstance(h, codeinterp.Hello)
    assert h.protocol == 1
    assert h.python.startswith("3.")
    assert h.policy.worker_start in ("exec", "zygote")
    assert len(h.policy.sha256) == 64
    assert h.limits.max_output_characters == 64000 and h.limits.max_source_ids == 4
    assert h.outcomes[:2] == ("ok", "python_exception") and "permission_denied" in h.outcomes
    assert h.raw["limits"]["timeoutMs"] == h.limits.timeout_ms == 30000
    assert h.limits.cpu_bandwidth_percent == 0
    assert h.rootless is False and h.cgroup == host_cgroup()  # a root supervisor, cgroups: auto by default


def host_cgroup():
    """What cgroups: auto gives a root supervisor here: v2 where the unified hierarchy
    has the memory controller, v1 where a memory hierarchy is mounted (hybrid hosts)."""
    try:
        with open("/sys/fs/cgroup/cgroup.controllers") as f:
            if "memory" in f.read().split():
                return "v2"
    except OSError:
        pass
    return "v1" if os.path.isdir("/sys/fs/cgroup/memory") else "none"


def test_status_is_typed(shared_supervisor):
    daemon = shared_supervisor()
    client = shared_supervisor().client()
    s = client.status()
    assert s.pid == daemon.proc.pid
    assert s.connections >= 1 and s.capacity >= 1
    assert s.worker_start in ("exec", "zygote")
    assert (s.zygote_pid is None) == (s.worker_start == "exec")


def test_status_has_every_field_of_the_reply(shared_supervisor):
    """Every field of the status reply is a field of Status (and of its nested records):
    this fails when the supervisor's reply grows a field the client lacks."""
    client = shared_supervisor().client()
    s = client.status()

    def wire_fields(cls):
        return {f.metadata.get(WIRE) or wire_name(f.name) for f in dataclasses.fields(cls) if f.name != "raw"}

    assert set(s.raw) - {"id", "type", "op"} == wire_fields(Status)
    for name in ("queueWaitMs", "runTimeMs"):
        assert set(s.raw[name]) == wire_fields(Histogram), name
    assert set(s.connections_refused) == {"peer_not_allowed", "max_connections", "max_connections_per_peer"}
    assert s.connections_idle_closed is not None and s.connections_idle_closed >= 0
    assert set(s.outcomes) == set(client.hello().outcomes)
    assert set(s.workers_started_by) == {"ready", "preparing", "cloned", "exec"}
    assert sum(s.workers_started_by.values()) == s.started_total
    # Only a zygote maps pages ahead, and only where that pays on the machine (worker/zygote.c).
    assert isinstance(s.zygote_pages_ahead, int) and (s.zygote_pages_ahead == 0 or s.worker_start == "zygote")
    assert isinstance(s.queue_wait_ms, Histogram) and len(s.queue_wait_ms.le_ms) == len(s.queue_wait_ms.counts)
    assert s.run_time_ms is not None and s.run_time_ms.count == s.raw["runTimeMs"]["count"]


def test_northstar_result_has_every_field(shared_supervisor):
    client = shared_supervisor().client()
    phases = []
    r = client.execute(NORTHSTAR, "Northstar mean runtime", on_progress=phases.append)
    assert isinstance(r, Result)
    assert r.outcome == "ok" and r.ok
    assert r.result == Channel(text="8.25", total_characters=4, total_bytes=4, omitted_characters=0,
                               omitted_bytes=0, omitted_at=4, replaced_characters=0)
    assert r.stdout.text == "" and r.stdout.total_characters == 0
    assert r.exception is None and r.limit is None and r.detail is None and not r.partial
    assert r.worker_error is None
    assert r.evidence.code_sha256 == sha256(NORTHSTAR)
    assert r.evidence.code_characters == len(NORTHSTAR)
    assert r.evidence.inputs == ()
    assert r.evidence.limits.max_calls == 10
    assert r.evidence.runtime.python.startswith("3.")
    assert r.evidence.runtime.rootless is False and r.evidence.runtime.cgroup == host_cgroup()
    assert r.timing.elapsed_ms == r.elapsed_ms and r.timing.worker_started
    assert r.timing.worker in ("ready", "preparing", "cloned", "exec")
    assert r.exit_status is not None and r.exit_status.code == 0 and r.exit_status.signal is None
    assert r.id == 1 and r.call_id >= 1
    assert r.model_text() == "outcome: ok\nelapsed: %d ms\n--- value (4 characters) ---\n8.25\n" % r.elapsed_ms
    assert r.card() == "code_interpreter: finished: ok · %d.%d s · stdout 0 characters · stderr 0 characters" % (
        r.elapsed_ms // 1000, r.elapsed_ms % 1000 // 100)
    assert all(isinstance(p, Progress) and p.call_id == r.call_id and p.id == r.id for p in phases)
    assert [p.phase for p in phases][:3] == ["requested", "queued", "started"]
    assert phases[-1].phase == "finished" and phases[-1].outcome == "ok"


def test_python_exception_is_returned_not_raised(shared_supervisor):
    client = shared_supervisor().client()
    r = client.execute('print("hi")\n1/0', "divide")
    assert r.outcome == "python_exception" and r.result is None
    assert r.exception.type == "ZeroDivisionError"
    assert r.exception.message.text == "division by zero"
    assert r.exception.traceback.text.endswith("ZeroDivisionError: division by zero\n")
    tb = r.exception.traceback
    assert r.model_text() == (
        "outcome: python_exception\nelapsed: %d ms\nexception: ZeroDivisionError\n"
        "--- stdout (3 characters) ---\nhi\n"
        "--- exception message (16 characters) ---\ndivision by zero\n"
        "--- traceback (%d characters) ---\n%s" % (r.elapsed_ms, tb.total_characters, tb.text))


def test_stdout_stderr_and_replaced_bytes(shared_supervisor):
    client = shared_supervisor().client()
    r = client.execute("import os, sys\nprint('out')\nsys.stderr.write('err')\nsys.stderr.flush()\n"
                       "os.write(1, b'\\xff\\n')\n'v'", "channels")
    assert r.outcome == "ok"
    assert r.stdout.text == "out\n\ufffd\n" and r.stdout.replaced_characters == 1
    assert r.stderr.text == "err"
    assert r.model_text() == (
        "outcome: ok\nelapsed: %d ms\n"
        "--- stdout (6 characters; 1 invalid UTF-8 sequences shown as U+FFFD) ---\nout\n\ufffd\n"
        "--- stderr (3 characters) ---\nerr\n"
        "--- value (3 characters) ---\n'v'\n" % r.elapsed_ms)


def test_omitted_output_is_counted_in_the_model_text(shared_supervisor):
    small_client = shared_supervisor(SMALL_POLICY).client()
    r = small_client.execute("print('a' * 75 + 'b' * 900 + 'c' * 25)", "long line")
    # C = 100: the first 75 and the last 25 characters are kept (the last is the newline).
    assert r.stdout.total_characters == 1001 and r.stdout.omitted_characters == 901
    assert r.stdout.omitted_bytes == 901 and r.stdout.omitted_at == 75
    assert r.stdout.text == "a" * 75 + "c" * 24 + "\n"
    assert r.model_text() == (
        "outcome: ok\nelapsed: %d ms\n--- stdout (1001 characters; 901 omitted where marked, not shown) ---\n"
        % r.elapsed_ms + "a" * 75 + "\n[... 901 characters omitted ...]\n" + "c" * 24 + "\n"
    )


def test_timeout_is_a_runtime_outcome(shared_supervisor):
    """The partial output is shown: the code must print before the deadline (3 s), so a
    machine too slow for that gets the call again with twice the deadline, until it
    does."""
    timeout_ms = 3000
    while True:
        policy = SMALL_POLICY.replace("timeoutMs: 3000", "timeoutMs: %d" % timeout_ms)
        small_client = shared_supervisor(policy).client()
        r = small_client.execute("import time\nprint('started', flush=True)\ntime.sleep(3600)", "sleep")
        if r.stdout.text == "started\n" or timeout_ms > WAIT_LIMIT * 1000:
            break
        timeout_ms *= 2
    assert r.outcome == "timeout" and r.partial and r.exception is None
    assert r.detail == "the deadline passed while the code was running"
    assert r.stdout.text == "started\n"
    assert r.model_text() == (
        "outcome: timeout\nelapsed: %d ms\n"
        "The runtime stopped the call because its deadline passed. This is not Python output.\n"
        "detail: the deadline passed while the code was running\n"
        "Any output below is partial: what had arrived when the worker was stopped.\n"
        "--- stdout (8 characters) ---\nstarted\n" % r.elapsed_ms)


def test_cancel_from_a_progress_callback(shared_supervisor):
    client = shared_supervisor().client()
    states = []

    def on_progress(p):
        if p.phase == "started":
            states.append(client.cancel(p.call_id))

    r = client.execute("import time\ntime.sleep(60)", "sleep", on_progress=on_progress)
    assert states == ["running"]
    assert r.outcome == "cancelled" and r.detail == "cancelled while running" and r.partial
    assert r.model_text() == (
        "outcome: cancelled\nelapsed: %d ms\n"
        "The runtime cancelled the call before it finished. This is not Python output.\n"
        "detail: cancelled while running\n"
        "Any output below is partial: what had arrived when the worker was stopped.\n(no output)\n" % r.elapsed_ms)
    with pytest.raises(NotFound) as e:
        client.cancel(r.call_id)
    assert e.value.code == "not_found" and e.value.request_id == client._next_id - 1


def test_rejections_are_raised(shared_supervisor):
    client = shared_supervisor().client()
    with pytest.raises(InvalidInput) as e:
        client.execute("   ", "blank")
    assert e.value.code == "invalid_input" and e.value.request_id == client._next_id - 1
    assert e.value.raw["type"] == "error" and e.value.message
    assert e.value.model_text() == (
        "outcome: invalid_input\nNo code ran: the request was rejected before execution.\nreason: %s\n"
        "Correct the arguments (see the tool's input schema) and call again.\n" % e.value.message)
    with pytest.raises(UnavailableSource) as e:
        client.execute("1", "no such source", ["nope"])
    assert "sourceIds[0]" in e.value.message
    with pytest.raises(NotFound):
        client.execute("1", "no such invocation", invocation="0" * 32)
    # The connection keeps working.
    assert client.execute("6 * 7", "still there").result.text == "42"


def test_invocation_sources_and_quota(shared_supervisor):
    small_client = shared_supervisor(SMALL_POLICY).client()
    text = "9.0\n7.5\n"
    with small_client.invocation() as inv:
        assert len(inv.id) == 32 and inv.info.max_calls == 2
        s = inv.put_source("runtimes", text, origin="https://example.org/runtimes")
        assert s == codeinterp.Source(source_id="runtimes", kind="read_source", bytes=len(text), sha256=sha256(text))
        a = inv.put_attachment("wb.xlsx", b"PK\x03\x04\x00", "a,b\n", "application/vnd.ms-excel", "book.xlsx")
        assert a.kind == "attachment" and a.original_bytes == 5 and a.original_sha256 == sha256(b"PK\x03\x04\x00")
        r = inv.execute("vals = open(input_files['runtimes']).read().split()\n"
                        "(sum(map(float, vals)) / len(vals), input_assets['wb.xlsx']['mediaType'],"
                        " open(input_assets['wb.xlsx']['original'], 'rb').read())",
                        "mean", ["runtimes", "wb.xlsx"])
        assert r.outcome == "ok", r.model_text()
        assert r.result.text == "(8.25, 'application/vnd.ms-excel', b'PK\\x03\\x04\\x00')"
        assert [i.source_id for i in r.evidence.inputs] == ["runtimes", "wb.xlsx"]
        assert r.evidence.inputs[0].sha256 == sha256(text) and r.evidence.inputs[0].media_type is None
        assert r.evidence.inputs[1].media_type == "application/vnd.ms-excel"
        assert inv.execute("2", "second").result.text == "2"
        with pytest.raises(QuotaExhausted):
            inv.execute("3", "third")
        with pytest.raises(InvalidInput):
            inv.put_source("runtimes", "again")
        invocation_id = inv.id
    assert inv.closed
    with pytest.raises(UnavailableSource):
        small_client.execute("1", "closed invocation", ["runtimes"], invocation=invocation_id)
    with pytest.raises(NotFound):
        small_client.execute("1", "closed invocation", invocation=invocation_id)


def test_invocation_exit_does_not_hide_the_block_error(shared_supervisor):
    small_client = shared_supervisor(SMALL_POLICY).client()
    with pytest.raises(KeyError):
        with small_client.invocation() as inv:
            inv.close()  # closed already: leaving the block sends nothing more
            raise KeyError("from the block")
    assert small_client.hello().protocol == 1


def test_describe(shared_supervisor):
    """The describe op returns the tool definition; a supervisor without it answers
    invalid_input "unknown op" (then this test skips, saying so)."""
    client = shared_supervisor().client()
    try:
        d = client.describe()
    except InvalidInput as e:
        if "unknown op" in e.message:
            pytest.skip("this codeinterpd has no describe op: %s" % e.message)
        raise
    tool = d["tool"]
    assert tool["name"] == "code_interpreter"
    assert tool["inputSchema"]["required"] == ["summary", "code"]
    assert tool["inputSchema"]["properties"]["code"]["maxLength"] == client.hello().limits.max_code_characters


def test_connection_level_error_is_raised(shared_supervisor):
    """An error with a nil id (here: a frame that is not msgpack) reaches the waiter, in
    both orders: sent before the request and read while waiting for its reply, and
    already arrived when the request is made (the client looks for a parting error of an
    idle close then: this one has no "closing", so it is raised at once, not waited on)."""
    daemon = shared_supervisor()
    c = Client(daemon.socket, WAIT_LIMIT)
    try:
        for arrived_first in (False, True):
            c.connection.send_raw(b"\x00\x00\x00\x01\xc1")
            if arrived_first:
                assert select.select([c.connection.sock], [], [], WAIT_LIMIT)[0], "no answer to the bad frame"
            with pytest.raises(InvalidInput) as e:
                c.hello()
            assert e.value.request_id is None
            assert c.hello().protocol == 1
    finally:
        c.close()


def test_low_level_connection(shared_supervisor):
    daemon = shared_supervisor()
    with codeinterp.Connection(daemon.socket, WAIT_LIMIT) as conn:
        conn.send({"op": "hello", "id": 7})
        m = conn.recv()
        assert m["id"] == 7 and m["type"] == "reply" and m["protocol"] == 1
        conn.send_raw(b"\x00\x00\x00\x00")
        m = conn.recv()
        assert m["id"] is None and m["type"] == "error" and m["code"] == "invalid_input"


def test_from_wire_checks_the_documented_fields(shared_supervisor):
    client = shared_supervisor().client()
    raw = dict(client.execute("1", "one").raw)
    assert from_wire(Result, raw).result.text == "1"
    del raw["timing"]
    with pytest.raises(ProtocolError, match="'timing' is missing"):
        from_wire(Result, raw)
    raw["timing"] = {"elapsedMs": "1"}
    with pytest.raises(ProtocolError, match="Result.timing.elapsedMs: expected int"):
        from_wire(Result, raw)


def test_omission_counts_characters_not_bytes(shared_supervisor):
    small_client = shared_supervisor(SMALL_POLICY).client()
    r = small_client.execute("print('\u00e9' * 200, end='')", "two-byte characters")
    assert r.stdout.total_characters == 200 and r.stdout.total_bytes == 400
    assert r.stdout.omitted_characters == 100 and r.stdout.omitted_bytes == 200
    assert r.model_text() == (
        "outcome: ok\nelapsed: %d ms\n--- stdout (200 characters; 100 omitted where marked, not shown) ---\n"
        % r.elapsed_ms + "\u00e9" * 75 + "\n[... 100 characters omitted ...]\n" + "\u00e9" * 25 + "\n")


def test_connection_over_a_socketpair():
    import socket
    a, b = socket.socketpair()
    with codeinterp.Connection.from_socket(a) as x, codeinterp.Connection.from_socket(b) as y:
        x.send({"id": 1, "bytes": b"\x00\xff", "text": "\u00e9"})
        assert y.recv_raw_frame() == b"\x83\xa2id\x01\xa5bytes\xc4\x02\x00\xff\xa4text\xa2\xc3\xa9"
        x.send_raw(b"\x00\x00\x00\x01\xc0")
        assert y.recv() is None
        x.close()
        with pytest.raises(codeinterp.ConnectionLost):
            y.recv()


def test_artifacts_are_typed(shared_supervisor):
    client = shared_supervisor().client()
    progress = []
    r = client.execute("open('/outputs/b.csv', 'w').write('x,y\\n1,2\\n')\n"
                       "open('/outputs/a.bin', 'wb').write(bytes(range(7)))\n"
                       "import os\nos.mkdir('/outputs/sub')", "files", on_progress=progress.append)
    assert r.ok
    assert [a.name for a in r.artifacts] == ["a.bin", "b.csv"]
    a, b = r.artifacts
    assert a.data == bytes(range(7)) and a.size == 7 and a.media_type == "application/octet-stream"
    with pytest.warns(DeprecationWarning, match="Artifact.size"):
        assert a.bytes == 7  # the old name, documented before: an alias
    assert b.data == b"x,y\n1,2\n" and b.media_type == "text/csv" and b.sha256 == sha256(b.data)
    for x in r.artifacts:
        x.check()
    assert r.omitted_artifacts == 1 and r.omitted_artifact_bytes == 0
    (fin,) = [p for p in progress if p.phase == "finished"]
    assert fin.artifacts == 3 and fin.artifact_bytes == 15
    h = client.hello()
    assert h.limits.max_artifacts == 16 and h.limits.max_artifact_bytes == 8388608
    assert "--- files in /outputs (2 returned, 15 bytes; 1 omitted, 0 bytes) ---\n" in r.model_text()
    assert r.card().endswith(" · files 2 (15 bytes) (1 omitted)")


def test_artifact_check_refuses_a_lie():
    from codeinterp.records import Artifact
    with pytest.raises(ProtocolError):
        Artifact(name="x", media_type="text/plain", size=1, sha256="0" * 64, data=b"x").check()
    with pytest.raises(ProtocolError):
        Artifact(name="x", media_type="text/plain", size=2, sha256=sha256(b"x"), data=b"x").check()
    Artifact(name="x", media_type="text/plain", size=1, sha256=sha256(b"x"), data=b"x").check()


# ---- kept outputs (docs/protocol.md#kept-outputs) ----

def test_keep_outputs_chain_typed(shared_supervisor):
    client = shared_supervisor().client()
    with client.invocation() as inv:
        r1 = inv.execute("open('/outputs/a.csv', 'w').write('x,y\\n1,2\\n')\nopen('/outputs/b.txt', 'w').write('b')",
                         "write", keep_outputs=["a.csv", "missing.txt"])
        assert r1.kept_outputs == (
            codeinterp.KeptOutput(name="a.csv", source_id="out-1-a.csv", size=8, sha256=sha256("x,y\n1,2\n")),
            codeinterp.KeptOutput(name="missing.txt", refused="not_produced"))
        assert r1.kept_outputs[0].kept and not r1.kept_outputs[1].kept
        r2 = inv.execute("open(input_files['out-1-a.csv']).read()", "read", ["out-1-a.csv"], keep_outputs="all")
        assert r2.result.text == repr("x,y\n1,2\n")
        (src,) = r2.evidence.inputs
        assert src.kind == "output" and src.media_type == "text/csv"
        assert src.produced_by == codeinterp.ProducedBy(call=1, sha256=sha256("x,y\n1,2\n"))
        assert r2.kept_outputs == ()
        # A call that does not ask keeps nothing and says nothing.
        assert inv.execute("1", "plain").kept_outputs is None
    with pytest.raises(InvalidInput, match="needs an \"invocation\""):
        client.execute("1", "anonymous", keep_outputs="all")
    with pytest.raises(TypeError):
        client.execute("1", "bad", keep_outputs="some")


def test_registering_out_prefix_is_invalid_input(shared_supervisor):
    client = shared_supervisor().client()
    with client.invocation() as inv:
        with pytest.raises(InvalidInput, match="reserved for kept outputs"):
            inv.put_source("out-1-x", "t")
        with pytest.raises(UnavailableSource):
            inv.execute("1", "not kept", ["out-1-x"])
