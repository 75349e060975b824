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


PRODUCT_ROOMS = ("supervisor", "worker", "contract", "policy", "client", "client/lib", "common")
FUNCTION_START = re.compile(r"^(?!static const|struct|typedef|enum|union)[A-Za-z_][^=;]*\)\s*\{\s*$")


def product_sources():
    paths = []
    for room in PRODUCT_ROOMS:
        paths += sorted(glob.glob(os.path.join(ROOT, room, "*.[ch]")))
    assert len(paths) > 100, len(paths)  # the check reads what it thinks it reads
    return paths


def long_functions(lines, most):
    """(first line, length) of each function definition longer than most lines: from a
    line at column 0 that ends in ") {" to the next "}" at column 0."""
    found, start = [], None
    for i, line in enumerate(lines):
        if start is None and FUNCTION_START.match(line):
            start = i
        elif start is not None and line.startswith("}"):
            if i - start + 1 > most:
                found.append((start + 1, i - start + 1))
            start = None
    return found


def test_long_function_finder_finds_one():
    body = ["int f(void) {"] + ["        x();"] * 80 + ["}", "static int g(int a) {", "}"]
    assert long_functions(body, 80) == [(1, 82)]


def test_no_function_over_80_lines_no_file_over_800():
    too_long = {}
    for path in product_sources():
        with open(path) as f:
            lines = f.read().split("\n")
        rel = os.path.relpath(path, ROOT)
        if len(lines) > 800:
            too_long[rel] = len(lines)
        for first, n in long_functions(lines, 80):
            too_long["%s:%d" % (rel, first)] = n
    assert not too_long, too_long


def test_every_file_opens_with_what_it_owns():
    """The line after the licence is a comment: what the file owns."""
    silent = []
    for path in product_sources():
        with open(path) as f:
            lines = f.read().split("\n")
        if not (lines[0].startswith("/* SPDX-License-Identifier") and lines[1].startswith("/* ")
                and len(lines[1]) > 20):
            silent.append(os.path.relpath(path, ROOT))
    assert not silent, silent
