"""The Kubernetes manifests in packaging/kubernetes/ (docs/deployment.md), parsed and
checked field by field; the policy in the ConfigMap is loaded by the real
`codeinterpd --check-config`. The supervisor's security context is checked against what
the pod check (scripts/pod-check.sh, tests/pod) runs and proves with it, not against a
list kept here: podman gets the manifests unchanged but for the two mechanical
translations of podspecs.py, the DaemonSet and the sidecar ask for the same context (the
check's proofs run on the sidecar), and the context holds only settings the check
compares with the running container.

    make deployment-test      (builds first; CODEINTERP_BUILD names the build)
"""
import json
import os
import posixpath
import re
import subprocess

import pytest
import yaml

import podspecs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "packaging", "kubernetes")
BUILD = os.environ.get("CODEINTERP_BUILD", os.path.join(ROOT, "build"))
MIB = 1 << 20
# Supervisor, zygote and its pre-started workers, beyond what the policy bounds.
BASELINE = 128 * MIB
# The securityContext fields tests/pod compares with the running container
# (check_runs_as_specified) or proves (each added capability removed in turn; the
# engines' default seccomp profiles). A field not here is one no run has checked.
PROVEN_FIELDS = {"runAsUser", "runAsGroup", "runAsNonRoot", "privileged", "capabilities",
                 "allowPrivilegeEscalation", "seccompProfile", "readOnlyRootFilesystem"}
# Fields the pod check cannot prove on its host and documents as such
# (docs/deployment.md, "What was not run"): AppArmor (that kernel has none), and
# procMount, which podman ignores (Default is what every runtime does without it).
UNPROVEN_FIELDS = {"appArmorProfile", "procMount"}
# System calls the supervisor, zygote and worker make while building a sandbox.
SANDBOX_SYSCALLS = {
    "clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "sethostname",
    "setresuid", "setresgid", "setgroups", "capset", "prctl", "setrlimit", "prlimit64",
    "seccomp", "memfd_create", "execveat", "pidfd_open", "pidfd_send_signal",
    "close_range", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self", "waitid", "socketpair", "sendmsg", "recvmsg",
}


load = podspecs.load  # the documents of a manifest under packaging/kubernetes
one = podspecs.one  # the one document of a kind


def quantity(q):
    """A Kubernetes memory quantity in bytes."""
    m = re.fullmatch(r"([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(q))
    assert m, f"unsupported quantity {q!r}"
    mult = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[m.group(2)]
    return int(m.group(1)) * mult


def option(command, name):
    assert command.count(name) == 1, f"{name} must appear once in {command}"
    return command[command.index(name) + 1]


def container(pod_spec, name):
    found = [c for c in pod_spec["containers"] if c["name"] == name]
    assert len(found) == 1, f"no container {name}"
    return found[0]


def mount_of(c, volume):
    found = [m for m in c.get("volumeMounts", []) if m["name"] == volume]
    assert len(found) == 1, f"container {c['name']} does not mount {volume}"
    return found[0]


def volume_for_path(pod_spec, c, path):
    """The volume c mounts at exactly the directory of path, and that mount."""
    d = posixpath.dirname(path)
    found = [m for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == d]
    assert len(found) == 1, f"{c['name']}: no volume mounted at {d} (for {path})"
    vols = [v for v in pod_spec["volumes"] if v["name"] == found[0]["name"]]
    assert len(vols) == 1
    return vols[0], found[0]


@pytest.fixture(scope="module")
def configmap():
    return one(load("policy-configmap.yaml"), "ConfigMap")


@pytest.fixture(scope="module")
def policy(configmap):
    text = configmap["data"]["policy.yaml"]
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    with open(os.path.join(ROOT, "packaging", "policy.yaml")) as f:
        merged = yaml.safe_load(f)  # every key with its default
    unknown = set(doc) - set(merged) - {"socketGroup"}
    assert not unknown, f"keys the policy does not know: {unknown}"
    merged.update(doc)
    return merged


@pytest.fixture(scope="module")
def daemonset_docs():
    return load("daemonset.yaml")


@pytest.fixture(scope="module")
def daemonset(daemonset_docs):
    return one(daemonset_docs, "DaemonSet")


@pytest.fixture(scope="module")
def sidecar():
    return one(load("sidecar-pod.yaml"), "Pod")


def supervisor_pods(daemonset, sidecar):
    return [("daemonset", daemonset["spec"]["template"]["spec"]), ("sidecar", sidecar["spec"])]


def test_kinds_and_api_versions(daemonset_docs, configmap, sidecar):
    kinds = {(d["apiVersion"], d["kind"]) for d in daemonset_docs}
    assert kinds == {("v1", "Namespace"), ("apps/v1", "DaemonSet")}
    assert (configmap["apiVersion"], configmap["kind"]) == ("v1", "ConfigMap")
    assert (sidecar["apiVersion"], sidecar["kind"]) == ("v1", "Pod")
    ns = one(daemonset_docs, "Namespace")["metadata"]["name"]
    for d in (one(daemonset_docs, "DaemonSet"), configmap, sidecar):
        assert d["metadata"]["namespace"] == ns


def test_daemonset_selector_matches_template(daemonset):
    labels = daemonset["spec"]["template"]["metadata"]["labels"]
    for k, v in daemonset["spec"]["selector"]["matchLabels"].items():
        assert labels.get(k) == v


def test_daemonset_socket_in_host_directory(daemonset):
    spec = daemonset["spec"]["template"]["spec"]
    c = container(spec, "codeinterpd")
    sock = option(c["command"], "--socket")
    vol, m = volume_for_path(spec, c, sock)
    assert "hostPath" in vol, "the DaemonSet's socket directory must be a hostPath"
    assert vol["hostPath"]["path"].rstrip("/") == posixpath.dirname(sock)
    assert vol["hostPath"].get("type") in ("Directory", "DirectoryOrCreate")
    assert not m.get("readOnly"), "codeinterpd creates its socket there"


def test_supervisor_command(daemonset, sidecar):
    for where, spec in supervisor_pods(daemonset, sidecar):
        cmd = container(spec, "codeinterpd")["command"]
        assert cmd[0] == "codeinterpd", where
        assert option(cmd, "--worker") == "/usr/libexec/codeinterp/codeinterp-worker", where
        assert option(cmd, "--socket").startswith("/"), where
        assert "--check-config" not in cmd


def test_policy_mounted_from_the_configmap(daemonset, sidecar, configmap):
    for where, spec in supervisor_pods(daemonset, sidecar):
        c = container(spec, "codeinterpd")
        path = option(c["command"], "--policy")
        vol, m = volume_for_path(spec, c, path)
        assert vol["configMap"]["name"] == configmap["metadata"]["name"], where
        items = {i["path"]: i["key"] for i in vol["configMap"].get("items", [])}
        key = items.get(posixpath.basename(path), posixpath.basename(path))
        assert key in configmap["data"], where
        assert m.get("readOnly") is True, where


def test_policy_loads_in_the_real_codeinterpd(configmap, policy, tmp_path):
    binary = os.path.join(BUILD, "bin", "codeinterpd")
    if not os.access(binary, os.X_OK):
        if os.environ.get("CODEINTERP_BUILD"):
            pytest.fail(f"{binary} is missing (make build)")
        pytest.skip(f"{binary} is missing: run make build or make deployment-test")
    f = tmp_path / "policy.yaml"
    f.write_text(configmap["data"]["policy.yaml"])
    r = subprocess.run([binary, "--check-config", "--policy", str(f)],
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    # 2: the policy does not load. 1: a host check failed (not root, no namespaces...).
    assert r.returncode != 2, out
    if os.geteuid() == 0 or os.environ.get("CODEINTERP_MUST_SANDBOX") == "1":
        assert r.returncode == 0, out
    assert f"active workers: {policy['maxActiveWorkers']}," in out, out


def test_memory_limit_covers_the_policy(daemonset, sidecar, policy):
    workers = policy["maxActiveWorkers"]
    assert workers > 0, "maxActiveWorkers must be explicit: 0 means the node's CPUs"
    need = (workers * (policy["memoryBytes"] + policy["tmpBytes"] + policy["maxInvocationBytes"]
                       + policy.get("maxArtifactBytes", 8388608))
            + policy["maxConnections"] * policy["maxInvocationsPerConnection"]
            * policy["maxInvocationBytes"]
            + BASELINE)
    for where, spec in supervisor_pods(daemonset, sidecar):
        res = container(spec, "codeinterpd")["resources"]
        limit = quantity(res["limits"]["memory"])
        assert limit >= need, f"{where}: limit {limit} < {need} bytes"
        assert limit >= workers * policy["memoryBytes"] + BASELINE
        assert quantity(res["requests"]["memory"]) == limit, f"{where}: request != limit"
        assert "cpu" not in res["limits"], f"{where}: a CPU limit turns into timeouts"
        assert float(res["requests"]["cpu"]) >= workers


def test_security_context_is_what_the_pod_check_runs(daemonset, sidecar):
    ds = container(daemonset["spec"]["template"]["spec"], "codeinterpd")["securityContext"]
    sc = container(sidecar["spec"], "codeinterpd")["securityContext"]
    # One context: tests/pod proves each capability and the seccomp profile on the
    # sidecar pod, and runs both pod specs with it.
    assert ds == sc, "the DaemonSet's and the sidecar's codeinterpd ask for different contexts"
    unknown = set(sc) - PROVEN_FIELDS - UNPROVEN_FIELDS
    assert not unknown, f"fields no pod check run compares or proves: {unknown} (extend tests/pod)"
    # The hardening the run proves compatible; a weaker value has no failure to justify it.
    assert sc["privileged"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("procMount", "Default") == "Default"
    # Root, for the workers' own host ids (not rootless, docs/security.md "Rootless").
    assert sc["runAsUser"] == 0 and sc["runAsNonRoot"] is False
    add = sc["capabilities"].get("add", [])
    assert len(set(add)) == len(add) and add, add
    # The API refuses allowPrivilegeEscalation: false together with SYS_ADMIN.
    assert sc["allowPrivilegeEscalation"] is ("SYS_ADMIN" in add)
    # The profile the check installs and runs with: seccomp-codeinterpd.json under the
    # name the manifests give (Unconfined would be wider than what the run needs).
    assert sc["seccompProfile"]["type"] == "Localhost", sc["seccompProfile"]
    assert sc["seccompProfile"]["localhostProfile"] == "codeinterpd.json"
    assert os.path.basename(podspecs.SECCOMP_PROFILE_FILE) == "seccomp-" + sc["seccompProfile"]["localhostProfile"]
    assert sc["appArmorProfile"]["type"] in ("Unconfined", "Localhost")
    for where, spec in supervisor_pods(daemonset, sidecar):
        assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC"), where


def test_test_confinement_reads_the_manifests_capabilities(daemonset):
    """tests/integration/test_confinement.py runs codeinterpd under setpriv with the
    DaemonSet's capabilities, read with a regular expression: the same list as YAML."""
    with open(os.path.join(K8S, "daemonset.yaml")) as f:
        m = re.search(r"^\s*add: \[(.*)\]", f.read(), re.M)
    by_regex = [c.strip().strip('"') for c in m.group(1).split(",")]
    sc = container(daemonset["spec"]["template"]["spec"], "codeinterpd")["securityContext"]
    assert by_regex == sc["capabilities"]["add"]


def test_podman_plays_the_manifests_unchanged():
    """podspecs.for_podman adds the annotations podman 4.3 reads for each container's
    seccomp and AppArmor profile, and moves hostPath directories; nothing else."""
    ds = podspecs.daemonset_pod()
    pods = [ds, podspecs.sidecar_pod(), podspecs.node_agent_pod()]
    host = {v["hostPath"]["path"]: "/elsewhere" + v["hostPath"]["path"]
            for v in ds["spec"]["volumes"] if "hostPath" in v}
    assert host, "the DaemonSet has no hostPath"
    for pod in pods:
        played = podspecs.for_podman(pod, host)
        annotations = played["metadata"].pop("annotations")
        assert annotations.keys() >= {podspecs.SECCOMP_ANNOTATION + c["name"] for c in pod["spec"]["containers"]}
        for c in pod["spec"]["containers"]:
            sc = c["securityContext"]
            assert annotations[podspecs.SECCOMP_ANNOTATION + c["name"]] == \
                podspecs.profile_annotation(sc["seccompProfile"])
            if "appArmorProfile" in sc:
                assert annotations[podspecs.APPARMOR_ANNOTATION + c["name"]] == \
                    podspecs.profile_annotation(sc["appArmorProfile"])
        for v in played["spec"]["volumes"]:
            if "hostPath" in v:
                assert v["hostPath"]["path"].startswith("/elsewhere/")
                v["hostPath"]["path"] = v["hostPath"]["path"].removeprefix("/elsewhere")
        pod = dict(pod, metadata={k: v for k, v in pod["metadata"].items() if k != "annotations"})
        assert played == pod


def test_pod_specs_the_check_derives(daemonset, sidecar):
    """The DaemonSet's Pod is its template; the agent pod beside it is the sidecar's
    agent containers with the DaemonSet's socket volume."""
    ds = podspecs.daemonset_pod()
    assert ds["spec"] == daemonset["spec"]["template"]["spec"]
    assert ds["metadata"]["labels"] == daemonset["spec"]["template"]["metadata"]["labels"]
    agent = podspecs.node_agent_pod()
    assert agent["spec"]["containers"] == podspecs.agents(sidecar)
    assert agent["spec"]["volumes"] == [v for v in ds["spec"]["volumes"] if v["name"] == "socket-dir"]
    assert podspecs.image("codeinterpd") == container(ds["spec"], "codeinterpd")["image"]
    # The one-off --check-config pod: the same container but for the flag, probes, restarts.
    for pod in (ds, podspecs.sidecar_pod()):
        check = podspecs.check_config_pod(pod)
        [c] = check["spec"]["containers"]
        want = {k: v for k, v in container(pod["spec"], "codeinterpd").items() if not k.endswith("Probe")}
        assert c == dict(want, command=want["command"] + ["--check-config"])
        assert check["spec"]["restartPolicy"] == "Never"
        assert {v["name"] for v in check["spec"]["volumes"]} == {m["name"] for m in c["volumeMounts"]}


def test_probes_use_the_same_socket(daemonset, sidecar, policy):
    for where, spec in supervisor_pods(daemonset, sidecar):
        c = container(spec, "codeinterpd")
        sock = option(c["command"], "--socket")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            cmd = c[probe]["exec"]["command"]
            assert cmd[0] == "codeinterp", f"{where} {probe}"
            assert option(cmd, "--socket") == sock, f"{where} {probe}"
            want = ["status", "--ready"] if probe == "readinessProbe" else ["status"]
            assert cmd[-len(want):] == want and cmd[-len(want) - 1] != "status", f"{where} {probe}"
        # The probes connect as the container's user (root): the policy must let it in.
        uids, gids = policy["allowedUids"], policy["allowedGids"]
        assert (not uids and not gids) or 0 in uids, "the probes (uid 0) would be refused"


def test_sidecar_shares_the_socket_through_an_emptydir(sidecar, policy):
    spec = sidecar["spec"]
    sup = container(spec, "codeinterpd")
    sock = option(sup["command"], "--socket")
    vol, _ = volume_for_path(spec, sup, sock)
    assert "emptyDir" in vol and "hostPath" not in vol
    agents = [c for c in spec["containers"] if c["name"] != "codeinterpd"]
    assert agents, "the sidecar pod has no agent container"
    for agent in agents:
        m = mount_of(agent, vol["name"])
        assert m["mountPath"].rstrip("/") == posixpath.dirname(sock)
        env = {e["name"]: e.get("value") for e in agent.get("env", [])}
        assert env.get("CODEINTERP_SOCKET") == sock
        # The agent's primary gid must pass the peer check, and own the socket.
        gid = agent["securityContext"]["runAsGroup"]
        assert gid in policy["allowedGids"] or agent["securityContext"]["runAsUser"] in policy["allowedUids"]
        assert policy.get("socketGroup") == gid


def test_localhost_seccomp_profile_allows_the_sandbox():
    with open(os.path.join(K8S, "seccomp-codeinterpd.json")) as f:
        prof = json.load(f)
    assert prof["defaultAction"] == "SCMP_ACT_ALLOW"
    assert prof["architectures"] == ["SCMP_ARCH_X86_64"]
    denied = set()
    for rule in prof["syscalls"]:
        assert rule["action"] == "SCMP_ACT_ERRNO"
        denied |= set(rule["names"])
    assert denied, "the profile denies nothing"
    assert not denied & SANDBOX_SYSCALLS, denied & SANDBOX_SYSCALLS
    assert {"ptrace", "kexec_load", "init_module", "reboot"} <= denied


def test_containerfile(daemonset):
    with open(os.path.join(K8S, "Containerfile")) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    # The base is a build argument whose default is the registry's Debian 12, so the file
    # builds as is with a registry, and from a local image without one (pod-check.sh).
    assert lines[:2] == ["ARG BASE_IMAGE=debian:bookworm-slim", "FROM ${BASE_IMAGE}"]
    text = "\n".join(lines)
    assert re.search(r"^COPY codeinterp_\*\.deb /tmp/$", text, re.M)
    assert "apt-get install -y --no-install-recommends /tmp/codeinterp_*.deb" in text
    entry = json.loads(re.search(r"^ENTRYPOINT (.*)$", text, re.M).group(1))
    cmd = json.loads(re.search(r"^CMD (.*)$", text, re.M).group(1))
    image_cmd = entry + cmd
    ds_cmd = container(daemonset["spec"]["template"]["spec"], "codeinterpd")["command"]
    assert image_cmd == ds_cmd, "the image's default command differs from the DaemonSet's"
    volume = json.loads(re.search(r"^VOLUME (.*)$", text, re.M).group(1))
    assert volume == [posixpath.dirname(option(ds_cmd, "--socket"))]
