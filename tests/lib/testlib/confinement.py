"""The confinement codeinterpd is shipped with, to run a supervisor under it outside
systemd and Kubernetes: the capabilities of the unit (packaging/codeinterpd.service,
CapabilityBoundingSet=) and of the DaemonSet (packaging/kubernetes/daemonset.yaml,
capabilities.add), and a setpriv prefix that gives exactly those, with no_new_privs
(test_confinement.py, and the benchmark's confinement section)."""
import os
import re

from .env import SOURCE_ROOT

PACKAGING = os.path.join(SOURCE_ROOT, "packaging")


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
