"""The pod specs of packaging/kubernetes/, read from the manifests as shipped, and
what a container engine without a kubelet needs besides to run them.

- daemonset_pod(): the DaemonSet's pod template as a Pod (podman cannot play a
  DaemonSet); sidecar_pod(): the sidecar Pod as is; node_agent_pod(): an agent pod
  for the DaemonSet's node, made of the sidecar's agent containers and the
  DaemonSet's socket volume (docs/deployment.md: agent pods mount the same hostPath).
- check_config_pod(): the codeinterpd container alone, running --check-config once.
- for_podman(): podman 4.3's `kube play` ignores securityContext.seccompProfile and
  appArmorProfile and reads the older annotations instead, so each container's field
  (or the pod's) is written as the annotation podman reads, mechanically; hostPath
  directories may be moved (a test must not take the host's /run/codeinterp). Nothing
  else changes: tests/deployment/test_manifests.py checks that.

Used by tests/deployment/test_manifests.py and tests/pod/test_pod.py. Run as a
script it prints a container's image: `podspecs.py image codeinterpd|agent`.
"""
import copy
import os
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "packaging", "kubernetes")
SUPERVISOR = "codeinterpd"
SECCOMP_PROFILE_FILE = os.path.join(K8S, "seccomp-codeinterpd.json")
SECCOMP_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def load(name):
    with open(os.path.join(K8S, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def daemonset():
    return one(load("daemonset.yaml"), "DaemonSet")


def configmap():
    return one(load("policy-configmap.yaml"), "ConfigMap")


def sidecar_pod():
    return one(load("sidecar-pod.yaml"), "Pod")


def container(pod_spec, name):
    found = [c for c in pod_spec["containers"] if c["name"] == name]
    assert len(found) == 1, f"no container {name}"
    return found[0]


def daemonset_pod(ds=None):
    """The DaemonSet's pod template as a Pod named after the DaemonSet."""
    ds = ds or daemonset()
    template = ds["spec"]["template"]
    meta = {"name": ds["metadata"]["name"], "namespace": ds["metadata"]["namespace"]}
    for key in ("labels", "annotations"):
        if key in template.get("metadata", {}):
            meta[key] = copy.deepcopy(template["metadata"][key])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template["spec"])}


def agents(pod):
    """The containers of pod other than codeinterpd."""
    return [c for c in pod["spec"]["containers"] if c["name"] != SUPERVISOR]


def node_agent_pod(ds_pod=None, sidecar=None):
    """An agent pod beside the DaemonSet: the sidecar's agent containers, with the
    volumes they mount taken from the DaemonSet's pod (the socket's hostPath)."""
    ds_pod = ds_pod or daemonset_pod()
    sidecar = sidecar or sidecar_pod()
    spec = {k: copy.deepcopy(v) for k, v in sidecar["spec"].items() if k not in ("containers", "volumes")}
    spec["containers"] = copy.deepcopy(agents(sidecar))
    names = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])}
    spec["volumes"] = [copy.deepcopy(v) for v in ds_pod["spec"]["volumes"] if v["name"] in names]
    assert {v["name"] for v in spec["volumes"]} == names, "the agents mount a volume the DaemonSet lacks"
    meta = {"name": sidecar["metadata"]["name"] + "-node-agent", "namespace": sidecar["metadata"]["namespace"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def profile_annotation(profile):
    """A securityContext seccompProfile or appArmorProfile as the annotation value."""
    kind = profile["type"]
    if kind == "Localhost":
        return "localhost/" + profile["localhostProfile"]
    if kind == "RuntimeDefault":
        return "runtime/default"
    if kind == "Unconfined":
        return "unconfined"
    raise ValueError(f"unknown profile type {kind!r}")


def for_podman(pod, host_paths=None):
    """pod for podman 4.3's `kube play`: every container's seccompProfile and
    appArmorProfile (its own, else the pod's) also as the annotation podman reads, and
    hostPath directories moved as host_paths ({manifest path: path here}) says."""
    pod = copy.deepcopy(pod)
    annotations = pod["metadata"].setdefault("annotations", {})
    pod_sc = pod["spec"].get("securityContext", {})
    for c in pod["spec"]["containers"]:
        sc = c.get("securityContext", {})
        for field, prefix in (("seccompProfile", SECCOMP_ANNOTATION), ("appArmorProfile", APPARMOR_ANNOTATION)):
            profile = sc.get(field, pod_sc.get(field))
            if profile:
                annotations[prefix + c["name"]] = profile_annotation(profile)
    for v in pod["spec"].get("volumes", []):
        if "hostPath" in v and host_paths and v["hostPath"]["path"] in host_paths:
            v["hostPath"]["path"] = host_paths[v["hostPath"]["path"]]
    return pod


def with_security(pod, name, **changes):
    """A copy of pod whose container name has its securityContext changed: a value
    replaces the field, None removes it; capabilities_add replaces capabilities.add."""
    pod = copy.deepcopy(pod)
    sc = container(pod["spec"], name).setdefault("securityContext", {})
    for key, value in changes.items():
        if key == "capabilities_add":
            sc["capabilities"]["add"] = list(value)
        elif value is None:
            sc.pop(key, None)
        else:
            sc[key] = value
    return pod


def check_config_pod(pod):
    """A one-off pod of pod's codeinterpd container, the same in all (image, security
    context, volumes, policy) but for its command, which gets --check-config (and no
    probes, no restarts): where codeinterpd exits or restarts, --check-config still runs
    in its container."""
    pod = copy.deepcopy(pod)
    c = container(pod["spec"], SUPERVISOR)
    c["command"] = c["command"] + ["--check-config"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        c.pop(probe, None)
    pod["spec"]["containers"] = [c]
    pod["spec"]["restartPolicy"] = "Never"
    names = {m["name"] for m in c.get("volumeMounts", [])}
    pod["spec"]["volumes"] = [v for v in pod["spec"].get("volumes", []) if v["name"] in names]
    pod["metadata"]["name"] += "-check-config"
    return pod


def supervisor_pods():
    """The pod specs that run codeinterpd, by name."""
    return {"daemonset": daemonset_pod(), "sidecar": sidecar_pod()}


def image(name):
    """The image of container name (codeinterpd, or agent), the same in every pod spec."""
    if name == SUPERVISOR:
        found = {container(p["spec"], SUPERVISOR)["image"] for p in supervisor_pods().values()}
    else:
        found = {c["image"] for c in agents(sidecar_pod())}
    assert len(found) == 1, f"{name}: the pod specs name different images: {sorted(found)}"
    return found.pop()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "image":
        sys.exit("usage: podspecs.py image codeinterpd|agent")
    print(image(sys.argv[2]))
