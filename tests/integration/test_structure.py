"""The house reads one way: supervisor/ and worker/ meet only in contract/, and the
daemon does not carry an interpreter."""
import glob
import os
import re
import subprocess

from testlib import BUILD, DAEMON

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def includes_of(folder):
    found = {}
    for path in glob.glob(os.path.join(ROOT, folder, "*.[ch]")):
        with open(path) as f:
            for room in INCLUDE.findall(f.read()):
                found.setdefault(room, []).append(os.path.basename(path))
    return found


def test_supervisor_and_worker_do_not_include_each_other():
    assert "worker" not in includes_of("supervisor"), includes_of("supervisor").get("worker")
    assert "supervisor" not in includes_of("worker"), includes_of("worker").get("supervisor")


def test_contract_includes_neither_side():
    inc = includes_of("contract")
    assert not {"supervisor", "worker", "client"} & set(inc), inc


def test_daemon_does_not_link_libpython():
    out = subprocess.run(["readelf", "-d", DAEMON], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert needed, out  # the check reads what it thinks it reads
    assert not [n for n in needed if "python" in n], needed
    worker = subprocess.run(["readelf", "-d", os.path.join(BUILD, "bin", "codeinterp-worker")],
                            capture_output=True, text=True, check=True).stdout
    assert "libpython" in worker  # and the worker does


def defined_functions(binary):
    out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()[1:2] and line.split()[1] in "tT"}


def test_daemon_does_not_link_the_sandbox():
    """Worker creation in exec mode is the supervisor's (exec_spawner.c) up to the exec;
    everything of the sandbox is in the worker binary alone."""
    daemon = defined_functions(DAEMON)
    assert "runner_start" in daemon and "exec_spawner_spawn" in daemon  # the check reads what it thinks it reads
    assert not [s for s in daemon if s.startswith("sandbox_") or s == "setup_root"], \
        sorted(s for s in daemon if s.startswith("sandbox_") or s == "setup_root")
    worker = defined_functions(os.path.join(BUILD, "bin", "codeinterp-worker"))
    assert "sandbox_enter" in worker or "sandbox_finish" in worker  # and the worker has it
