"""What the Python client's tests share besides the tests' one helper module
(tests/lib/testlib): the small policy of the tests that check fitting, deadlines and
quotas through the client."""

# A short output ceiling and deadline, two calls per invocation, frequent heartbeats.
SMALL_POLICY = "maxOutputCharacters: 100\ntimeoutMs: 3000\nmaxCalls: 2\nheartbeatMs: 50\n"
