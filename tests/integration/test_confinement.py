"""The supervisor under the confinement it is shipped with: exactly the capabilities
the systemd unit (packaging/codeinterpd.service, CapabilityBoundingSet=) and the
Kubernetes manifests (packaging/kubernetes/*.yaml: drop ALL, add SETUID, SETGID,
SETPCAP) give it, with no_new_privs, as root. Calls with a source and an artifact run,
a file the code made unreadable comes back, and the socket gets its group, in both
start modes. (The unit itself, unmodified, under a booted systemd is
scripts/nspawn-check.sh; the pod spec under podman is scripts/pod-check.sh.)"""
import grp
import os
import re

import pytest

from conftest import ROOTLESS, Supervisor, require_sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGING = os.path.join(HERE, "..", "..", "packaging")

pytestmark = pytest.mark.skipif(ROOTLESS, reason="capability sets of a root supervisor")


def unit_capabilities():
    """CapabilityBoundingSet= of the shipped unit, as setpriv names them."""
    with open(os.path.join(PACKAGING, "codeinterpd.service")) as f:
        m = re.search(r"^CapabilityBoundingSet=(.*)$", f.read(), re.M)
    return [c.lower().replace("cap_", "") for c in m.group(1).split()]


def manifest_capabilities():
    """The codeinterpd container's capabilities.add in the DaemonSet."""
    with open(os.path.join(PACKAGING, "kubernetes", "daemonset.yaml")) as f:
        m = re.search(r"^\s*add: \[(.*)\]", f.read(), re.M)
    return [c.strip().strip('"').lower() for c in m.group(1).split(",")]


def confined(caps):
    """A prefix that execs the supervisor as root with exactly caps in its bounding
    set (so in its permitted and effective sets), none inheritable, no ambient ones,
    and no_new_privs: what systemd's CapabilityBoundingSet= and NoNewPrivileges=yes, or
    a container runtime's capability list and allowPrivilegeEscalation: false, give."""
    bounding = ",".join(["-all"] + ["+" + c for c in caps])
    return ["setpriv", "--bounding-set=" + bounding, "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--"]


CODE = """import os
text = open(input_files["data"]).read()
open('/outputs/locked.txt', 'w').write(text.upper())
os.chmod('/outputs/locked.txt', 0)
len(text)"""


@pytest.mark.parametrize("where", ["unit", "manifests"])
def test_calls_run_with_the_shipped_capabilities(where):
    require_sandbox()
    caps = unit_capabilities() if where == "unit" else manifest_capabilities()
    group = grp.getgrnam("nogroup").gr_gid
    s = Supervisor("socketGroup: %d\nallowedUids: [0]\n" % group, prefix=confined(caps))
    try:
        with open("/proc/%d/status" % s.proc.pid) as f:
            status = dict(line.split(":", 1) for line in f if ":" in line)
        assert int(status["NoNewPrivs"]) == 1
        # Exactly these capabilities, nothing else (CapEff is a hex mask).
        assert bin(int(status["CapEff"], 16)).count("1") == len(caps), (caps, status["CapEff"])
        st = os.stat(s.socket)
        assert (st.st_gid, st.st_mode & 0o777) == (group, 0o660)
        c = s.connect()
        inv = c.call("invocation.open")["invocation"]
        r = c.call("source.put", invocation=inv, sourceId="data", kind="read_source", text="four")
        assert r["type"] == "reply", r
        r = c.execute(CODE, source_ids=["data"], invocation=inv)
        assert r["outcome"] == "ok" and r["result"]["text"] == "4", r
        assert [(a["name"], a["data"]) for a in r["artifacts"]] == [("locked.txt", b"FOUR")], r
    finally:
        assert s.stop() == 0, s.read_log()
