"""Core slice: one Python call in a fresh isolated worker, end to end."""

NORTHSTAR = """measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours
"""


def test_northstar(conn):
    r = conn.execute(NORTHSTAR)
    assert r["type"] == "result"
    assert r["outcome"] == "ok"
    assert r["result"]["text"] == "8.25"
    assert r["stdout"]["text"] == ""
    assert r["exception"] is None
    ev = r["evidence"]
    assert len(ev["codeSha256"]) == 64
    assert ev["policy"]["name"] == "code_interpreter"
