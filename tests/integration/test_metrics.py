"""The metrics, checked by Prometheus' own tools on real output: `codeinterp status
--prometheus` (text format 0.0.4) and `--openmetrics` (OpenMetrics 1.0.0) from a real
supervisor that has served calls of several outcomes.

- promtool check metrics (Debian's prometheus) reports no problem at all;
- prometheus-node-exporter (Debian's) reads the file with its textfile collector and
  serves every codeinterp family with its TYPE and HELP, on 127.0.0.1 (an ephemeral
  port), scraped with urllib; it is stopped afterwards;
- prometheus_client's parsers (Debian's python3-prometheus-client) read both formats,
  the OpenMetrics one strictly, and the values agree with the status reply.

A tool that is missing skips these tests, and fails them under CODEINTERP_MUST_SANDBOX=1
(scripts/install-deps.sh installs all three). Rendered by the client from the status
reply: the reference configuration only (the zygote's metrics are checked in both
modes' meaning by the zygote-mode run)."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest

from testlib import CLIENT, WAIT_LIMIT, WORKER_START, Conn, running_supervisor, status, terminate, unavailable
from testlib.waits import sleep_past, start_held, wait_for

BUSY = "import time\ntime.sleep(%s)\nprint('done')"
# timeoutMs leaves the held call (released after 1.1 s) room on a loaded machine.
POLICY = "timeoutMs: 4000\nmaxQueuedCalls: 0\nmaxActiveWorkers: 1\n"
OUTCOMES_SERVED = {"ok": 3, "python_exception": 1, "timeout": 1, "overloaded": 1, "unavailable_source": 1}


def need_tool(name, package):
    path = shutil.which(name)
    if path is None:
        why = "%s is missing (Debian package %s; scripts/install-deps.sh installs it)" % (name, package)
        unavailable(why)
    return path


def prometheus_client():
    try:
        import prometheus_client.openmetrics.parser
        import prometheus_client.parser
    except ImportError as e:
        why = "python3-prometheus-client is missing (%s; scripts/install-deps.sh installs it)" % e
        unavailable(why)
    return prometheus_client


def metrics(sup, fmt):
    p = subprocess.run([CLIENT, "--socket", sup.socket, "status", fmt], capture_output=True, timeout=WAIT_LIMIT)
    assert p.returncode == 0 and p.stderr == b"", (p.returncode, p.stderr)
    return p.stdout.decode()


@pytest.fixture(scope="module")
def served():
    """A supervisor that has served calls of several outcomes: three ok, an exception,
    a timeout, one refused as overloaded (the queue holds none while a call runs: it
    holds, for over a second) and one refused for an unknown source."""
    with running_supervisor(POLICY) as s:
        c = s.connect()
        assert c.execute("print(1)")["outcome"] == "ok"
        assert c.execute("1/0")["outcome"] == "python_exception"
        assert c.execute(BUSY % 3600)["outcome"] == "timeout"
        busy = start_held(s, after="print('done')")
        busy.wait_running()
        running_since = time.monotonic()
        assert c.execute("print(3)").get("code") == "overloaded"
        sleep_past(running_since, 1.1)
        busy.release()
        assert busy.result()["outcome"] == "ok"
        r = c.execute("print(4)", source_ids=["nope"])
        assert "unavailable_source" in (r.get("code"), r.get("outcome")), r
        assert c.execute("6 * 7")["outcome"] == "ok"
        yield s


def hello(sup):
    c = Conn(sup.socket)
    try:
        return c.call("hello")
    finally:
        c.close()


def test_prometheus_format_passes_promtool(served):
    promtool = need_tool("promtool", "prometheus")
    text = metrics(served, "--prometheus")
    assert "# EOF" not in text and "# UNIT" not in text
    p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=WAIT_LIMIT)
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b""), (p.returncode, p.stdout, p.stderr, text)


def families_by_name(parsed):
    return {f.name: f for f in parsed}


@pytest.mark.start_mode
@pytest.mark.asan
def test_prometheus_values_agree_with_status(served):
    pc = prometheus_client()
    before = time.time()
    text = metrics(served, "--prometheus")
    after = time.time()
    st, h = status(served), hello(served)
    fams = families_by_name(pc.parser.text_string_to_metric_families(text))

    def value(sample, **labels):
        found = [s.value for f in fams.values() for s in f.samples if s.name == sample and s.labels == labels]
        assert len(found) == 1, (sample, labels, found)
        return found[0]

    # Counters: the family keeps its _total, types as the TYPE lines say.
    calls = {s.labels["outcome"]: s.value for s in fams["codeinterp_calls"].samples}
    want = {k: 0 for k in h["outcomes"]}
    want.update(OUTCOMES_SERVED)
    assert calls == want and st["outcomes"] == want, (calls, st["outcomes"])
    assert fams["codeinterp_calls"].type == "counter"
    assert value("codeinterp_calls_admitted_total") == st["admittedTotal"] == 5
    assert value("codeinterp_workers_started_total") == st["startedTotal"]
    by_how = {s.labels["worker"]: s.value for s in fams["codeinterp_worker_starts"].samples}
    assert by_how == st["workersStartedBy"] and sum(by_how.values()) == st["startedTotal"], by_how
    assert set(by_how) == {"ready", "preparing", "cloned", "exec"} and fams["codeinterp_worker_starts"].type == "counter"
    assert value("codeinterp_worker_start_failures_total") == 0
    assert value("codeinterp_worker_start_failures_in_row") == 0
    # Gauges now (the client's own connection is open while status is read).
    assert value("codeinterp_ready") == 1
    assert value("codeinterp_queued_calls") == 0 and value("codeinterp_running_calls") == 0
    assert value("codeinterp_capacity") == 1 and value("codeinterp_connections") >= 1
    refused = {s.labels["reason"]: s.value for s in fams["codeinterp_connections_refused"].samples}
    assert refused == st["connectionsRefused"] == {"peer_not_allowed": 0, "max_connections": 0,
                                                   "max_connections_per_peer": 0}, refused
    assert fams["codeinterp_connections_refused"].type == "counter"
    assert value("codeinterp_connections_idle_closed_total") == st["connectionsIdleClosed"] == 0
    assert value("codeinterp_memory_gate_holding") == 0 and value("codeinterp_memory_gate_holds_total") == 0
    assert value("codeinterp_memory_gate_held_seconds_total") == 0
    # Uptime and start time: one start, seen from when the metrics were read (the
    # realtime clock then, within a second of rounding and of clock drift).
    up, start = value("codeinterp_uptime_seconds"), value("codeinterp_start_time_seconds")
    assert up > 0 and before - 1 <= start + up <= after + 1, (up, start, before, after)
    # The info metrics carry the build and the policy as hello reports them.
    assert value("codeinterp_build_info", version=h["version"], python_version=h["python"]) == 1
    assert value("codeinterp_policy_info", name=h["policy"]["name"], sha256=h["policy"]["sha256"],
                 worker_start=WORKER_START) == 1
    # The zygote: exported in zygote mode only.
    if WORKER_START == "zygote":
        assert value("codeinterp_zygote_ready") == 1
        assert value("codeinterp_zygotes_started_total") == st["zygoteGeneration"] >= 1
        # (0 too: where mapping ahead does not pay, the zygote maps nothing ahead)
        assert value("codeinterp_zygote_pages_ahead") == st["zygotePagesAhead"] >= 0
    else:
        assert "codeinterp_zygote_ready" not in fams and "codeinterp_zygotes_started" not in fams
        assert "codeinterp_zygote_pages_ahead" not in fams and st["zygotePagesAhead"] == 0
    # Histograms: one observation per finished call (5), the held call's run over 1 s.
    for fam, key in (("codeinterp_queue_wait_seconds", "queueWaitMs"), ("codeinterp_run_time_seconds",
                                                                          "runTimeMs")):
        f = fams[fam]
        assert f.type == "histogram"
        buckets = [(s.labels["le"], s.value) for s in f.samples if s.name == fam + "_bucket"]
        assert buckets[-1] == ("+Inf", 5.0) and value(fam + "_count") == 5, buckets
        assert [round(float(le) * 1000) for le, _ in buckets[:-1]] == st[key]["leMs"]
        assert [v for _, v in buckets[:-1]] == st[key]["counts"]
        assert abs(value(fam + "_sum") - st[key]["sumMs"] / 1000) < 0.01
    assert value("codeinterp_run_time_seconds_sum") >= 1.0


def sample_lines(text):
    return sorted(line for line in text.splitlines() if line and not line.startswith("#"))


def test_openmetrics_format_is_openmetrics(served):
    """--openmetrics: the strict OpenMetrics parser reads it (families without _total,
    info and units, # EOF last); its samples are the Prometheus format's, apart from
    the values that move between two reads (uptime, connections)."""
    pc = prometheus_client()
    om, prom = metrics(served, "--openmetrics"), metrics(served, "--prometheus")
    assert om.endswith("\n# EOF\n") and om.count("# EOF") == 1
    fams = families_by_name(pc.openmetrics.parser.text_string_to_metric_families(om))
    assert fams["codeinterp_calls"].type == "counter"
    assert fams["codeinterp_build"].type == "info" and fams["codeinterp_policy"].type == "info"
    assert fams["codeinterp_queue_wait_seconds"].type == "histogram"
    assert fams["codeinterp_queue_wait_seconds"].unit == "seconds"
    assert fams["codeinterp_memory_gate_held_seconds"].unit == "seconds"
    # The 0.0.4 parser names a counter family without its _total, as OpenMetrics does,
    # but an info metric is a gauge there, named with its _info.
    prom_fams = {re.sub(r"_info$", "", f.name): f for f in pc.parser.text_string_to_metric_families(prom)}
    assert set(fams) == set(prom_fams), set(fams) ^ set(prom_fams)
    for name, f in fams.items():
        assert f.documentation == prom_fams[name].documentation, name

    def steady(lines):
        return [x for x in lines if not re.match(r"codeinterp_(uptime_seconds|connections) ", x)]

    assert steady(sample_lines(om)) == steady(sample_lines(prom))


def metadata(text):
    """{sample family name: (type, help)} from the HELP and TYPE lines of a text-format
    exposition."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"# (HELP|TYPE) (\S+) (.*)$", line)
        if m:
            t, h = out.get(m.group(2), (None, None))
            out[m.group(2)] = (m.group(3), h) if m.group(1) == "TYPE" else (t, m.group(3))
    return out


class NodeExporter:
    """prometheus-node-exporter with only its textfile collector, on 127.0.0.1 at a port
    the kernel picks (read from its "Listening on" log line)."""

    def __init__(self, binary, directory):
        self.log_path = os.path.join(directory, "..", "node-exporter.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "--collector.disable-defaults", "--collector.textfile",
                                      "--collector.textfile.directory=" + directory, "--web.disable-exporter-metrics",
                                      "--web.listen-address=127.0.0.1:0"], stdout=self.log, stderr=subprocess.STDOUT)
        self.address = None

        def listening():
            assert self.proc.poll() is None, "node_exporter exited: " + self.read_log()
            m = re.search(r'msg="Listening on" address=(127\.0\.0\.1:\d+)', self.read_log())
            self.address = m and m.group(1)
            return self.address

        wait_for(listening, lambda: "node_exporter to listen: " + self.read_log())

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def scrape(self):
        with urllib.request.urlopen("http://%s/metrics" % self.address, timeout=WAIT_LIMIT) as r:
            assert r.status == 200
            return r.read().decode()

    def stop(self):
        terminate(self.proc)
        self.log.close()


def test_node_exporter_textfile_collector_keeps_types_and_help(served):
    """The --prometheus output as a .prom file, written the way the docs say (a
    temporary name, then rename): node_exporter's textfile collector reads it without
    error and serves every codeinterp family with the TYPE and HELP it had, and the
    same samples."""
    exporter_bin = need_tool("prometheus-node-exporter", "prometheus-node-exporter")
    pc = prometheus_client()
    d = tempfile.mkdtemp(prefix="codeinterp-textfile-")
    textdir = os.path.join(d, "textfile")
    os.mkdir(textdir)
    ne = None
    try:
        text = metrics(served, "--prometheus")
        with open(os.path.join(textdir, "codeinterp.prom.tmp"), "w") as f:
            f.write(text)
        os.rename(os.path.join(textdir, "codeinterp.prom.tmp"), os.path.join(textdir, "codeinterp.prom"))
        ne = NodeExporter(exporter_bin, textdir)
        scraped = ne.scrape()
    finally:
        if ne is not None:
            ne.stop()
            assert ne.proc.returncode is not None  # no node_exporter left running
        shutil.rmtree(d, ignore_errors=True)

    assert re.search(r"^node_textfile_scrape_error 0$", scraped, re.M), scraped[-2000:]
    ours, theirs = metadata(text), metadata(scraped)
    assert ours and all(name.startswith("codeinterp_") for name in ours), ours
    for name, (typ, help_text) in ours.items():
        assert name in theirs, "node_exporter dropped %s:\n%s" % (name, scraped[-3000:])
        assert theirs[name] == (typ, help_text), (name, theirs[name], (typ, help_text))
    def samples(exposition):
        # node_exporter writes numbers its own way (le="1" for le="1.0"): compare values.
        return {(s.name, tuple(sorted((k, float(v) if k == "le" else v) for k, v in s.labels.items())), s.value)
                for f in pc.parser.text_string_to_metric_families(exposition) for s in f.samples
                if s.name.startswith("codeinterp_")}

    assert samples(text) == samples(scraped), samples(text) ^ samples(scraped)


@pytest.mark.asan
def test_memory_gate_metrics():
    """minAvailableMemoryBytes of 1 TiB: the gate holds a call back. While it holds:
    memoryGateHolding and codeinterp_memory_gate_holding 1; after (the call cancelled
    once the gate has held it for a second): 0, one hold, and the time held counted.
    (That the gate holds a call until its deadline is test_scheduler's.)"""
    pc = prometheus_client()
    with running_supervisor("minAvailableMemoryBytes: 1099511627776\n") as s:
        c = s.connect()
        rid = c.request("execute", summary="t", code="1", sourceIds=[])
        wait_for(lambda: status(s)["memoryGateHolding"], lambda: "the gate holding: %r" % status(s))
        holding_seen = time.monotonic()
        held = families_by_name(pc.parser.text_string_to_metric_families(metrics(s, "--prometheus")))
        assert [x.value for x in held["codeinterp_memory_gate_holding"].samples] == [1]
        assert [x.value for x in held["codeinterp_memory_gate_holds"].samples] == [1]
        sleep_past(holding_seen, 1.0)
        assert c.call("cancel", callId=c.call_id(rid))["type"] == "reply"
        r = c.wait(rid, types=("result", "error"))
        assert r["outcome"] == "cancelled" and r["timing"]["workerStarted"] is False, r
        wait_for(lambda: not status(s)["memoryGateHolding"], lambda: "the gate let go: %r" % status(s))
        st = status(s)
        assert st["memoryGateHolds"] == 1 and st["memoryGateHeldMs"] >= 1000, st
        after = families_by_name(pc.parser.text_string_to_metric_families(metrics(s, "--prometheus")))
        assert [x.value for x in after["codeinterp_memory_gate_holding"].samples] == [0]
        assert [x.value for x in after["codeinterp_memory_gate_held_seconds"].samples] == [st["memoryGateHeldMs"] / 1000]
