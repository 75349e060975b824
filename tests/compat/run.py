"""make test-compat: CPython's regression tests of the common stdlib modules inside the
sandbox and on the host, compared test by test (docs/testing.md, "Compatibility").

For each profile (default: packaging/policy.yaml, the reviewed policy; data:
packaging/policy-data.yaml) a supervisor from the build is started with that policy
file plus the suite's longer per-call budget (SUITE_KEYS below: time, CPU, memory,
output size; nothing that changes what the sandbox allows), and each module runs in a
call of its own: the code is tests/compat/child.py, which runs test.<module> with
unittest and returns each test's outcome. Debian's test package
(libpython3.11-testsuite) is part of the stdlib directory the worker's root binds, so
the worker imports it from the same /usr/lib/python3.11/test as the host; the test
packages Debian does not ship (test_sqlite3, test_tomllib) come from the pyenv build
of CPython 3.11.7 when the machine has it, as a zip passed to every call as a source
(under /inputs) and extracted into the worker's /tmp. The same child runs on the host
with bare /usr/bin/python3 -I, in a temporary working directory.

A sandbox-only failure is a test that failed (F, E or unexpected success) in the
sandbox and not on the host, or a module whose call did not end ok (timeout, memory,
CPU, a crashed worker: the module id "<test_x>"). Each must be fixed or listed in
tests/compat/expected.txt with the sandbox rule that causes it:

    profile test_id  # rule

Output: a table per profile (tests run on each side, host failures, sandbox-only
failures, expected, unexpected), then every unexpected failure with the end of its
traceback and a suggested rule, then the stale entries (listed, no longer failing).
Exit status 1 when a sandbox-only failure is not listed, an entry is still marked
[REVIEW], or a module did not run on the host; stale entries only warn unless STRICT=1
(a test that fails in the sandbox only now and then would otherwise fail the run every
other time; UPDATE=1 removes them).

Environment: MODULES="json re ..." (default: all of MODULES below), PROFILES="default
data", UPDATE=1 (rewrite expected.txt for the profiles and modules run: entries that
persist keep their reason, new ones get a suggested rule marked [REVIEW], stale ones
go), JOBS (calls and host runs at once, default 2), MODULE_TIMEOUT (seconds per module
and call on each side, default 300), TEST_TIMEOUT (seconds per test, default 60), POLICY_EXTRA ("maxProcesses: 64;
...": more policy keys, to see which rule a failure comes from), CODEINTERP_BUILD
(default ./build)."""
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

from codeinterp.testing import Daemon  # noqa: E402

PYTHON = "/usr/bin/python3"
BUILD = os.path.abspath(os.environ.get("CODEINTERP_BUILD") or os.path.join(ROOT, "build"))
EXPECTED = os.path.join(HERE, "expected.txt")
CHILD = os.path.join(HERE, "child.py")

# The list (issue 21).
MODULES = ("json re statistics decimal fractions math datetime zoneinfo csv collections itertools functools "
           "heapq bisect string textwrap unicodedata difflib hashlib base64 zlib gzip bz2 lzma struct sqlite3 "
           "tomllib xml_etree html random enum dataclasses typing pathlib tempfile io os time shutil pickle "
           "calendar locale threading").split()

PROFILES = {"default": os.path.join(ROOT, "packaging", "policy.yaml"),
            "data": os.path.join(ROOT, "packaging", "policy-data.yaml")}

# Test packages Debian's libpython3.11-testsuite lacks, and where this machine has them.
EXTRA_PACKAGES = ("test_sqlite3", "test_tomllib")
EXTRA_SOURCE = os.path.expanduser("~/.pyenv/versions/3.11.7/lib/python3.11/test")

FAILED = ("F", "E", "U")

# Processes and sockets: the two rules issue 21 counts apart from the rest.
PROCESS_RULE = "no processes"
SOCKET_RULE = "no sockets"

# The rules of tests/compat/expected.txt as reviewed, which the suggestions for new
# entries reuse so that those join their groups.
RULE_PROCESSES = (PROCESS_RULE + ": seccomp denies execve and clone without CLONE_THREAD (subprocess, os.fork, "
                  "script_helper) with EPERM")
RULE_SOCKETS = (SOCKET_RULE + ": seccomp denies socket() of every family (AF_UNIX: EPERM in both modes) and "
                "socketpair() of every family but AF_UNIX; sendfile to a socket, a socket file in a directory")
RULE_THREADS = ("threads: a worker has maxProcesses (64) tasks and memoryBytes of address space, 8 MiB of stack "
                "a thread")
# shutil.which answers which program a command would start; in a sandbox that starts no
# program the answer is none: counted with the process rule (docs/testing.md).
RULE_NOEXEC = (PROCESS_RULE + ": no program can be started, so none is found: /tmp is mounted noexec (nothing the "
               "code writes is executable, os.access(X_OK) is false) and PATH is empty, so shutil.which finds nothing")
RULE_TERMINALS = ("no terminals: no /dev/ptmx or /dev/pts, and of the tty ioctls only the reads TCGETS, TIOCGPGRP and "
                  "TIOCGWINSZ are allowed (the filter answers any other with ENOTTY, before the kernel sees the descriptor)")
RULE_UNMAPPED = ("ids the worker's namespace does not map: chown to one (root, here) is EINVAL, where the test expects "
                 "the EPERM of a host's other user (the test runs when the worker's passwd has two accounts)")
RULE_GUARD_FIRST = ("no processes: the runner's guard refuses os.exec*/os.spawn* before CPython checks their arguments "
                    "(PermissionError, not the ValueError the test expects)")

# Suggested rules for new entries, from the end of the traceback: (pattern, rule),
# first match wins. A suggestion is marked [REVIEW] until a person has checked it.
SUGGESTIONS = (
    (r"^(test )?timeout", "hangs in the worker"),
    (r"no processes can be started", RULE_PROCESSES),
    (r"^[^\n]*(killed by signal|crash)", "the worker crashes"),
    (r"can.t start new thread", RULE_THREADS),
    (r"fork|_posixsubprocess|subprocess\.py|posix_spawn|spawnv|multiprocessing|script_helper|os\.system|Popen",
     RULE_PROCESSES),
    (r"socket", RULE_SOCKETS),
    (r"Read-only file system", "read-only root: the worker's / cannot be written"),
    (r"/dev/shm", "no /dev/shm in the worker's root"),
    (r"No space left on device", "/tmp is a tmpfs of tmpBytes"),
    (r"Too many open files", "maxOpenFiles (RLIMIT_NOFILE)"),
    (r"Function not implemented|ENOSYS", "seccomp: a system call the filter does not list (ENOSYS)"),
    (r"Operation not permitted|EPERM", "seccomp denies a system call (EPERM)"),
    (r"Permission denied", "the worker's uid cannot read or write a path the host user can"),
)


def env_list(name, default):
    v = os.environ.get(name)
    return v.replace(",", " ").split() if v else list(default)


# By the test: failures whose traceback does not name their cause.
SUGGESTIONS_BY_TEST = (
    (r"\.TestWhich(Bytes)?\.", RULE_NOEXEC),
    (r"test_openpty|test_tcgetpgrp|test_tcsetpgrpt", RULE_TERMINALS),
    (r"test_chown_without_permission", RULE_UNMAPPED),
    (r"ExecTests\.test_exec\w*_(with_bad_arglist|invalid_env)", RULE_GUARD_FIRST),
)


def suggest(why, test_id=""):
    for pattern, rule in SUGGESTIONS_BY_TEST:
        if re.search(pattern, test_id):
            return rule
    for pattern, rule in SUGGESTIONS:
        if re.search(pattern, why or ""):
            return rule
    return "unclassified"


def last_line(why):
    lines = [x for x in (why or "").strip().splitlines() if x.strip()]
    return lines[-1].strip()[:200] if lines else ""


def module_of(test_id):
    m = re.search(r"<(test_\w+)>|\btest\.(test_\w+)", test_id)
    return (m.group(1) or m.group(2)) if m else None


# ---- policies and supervisors ----

def suite_keys(timeout):
    """The per-call budget of the suite: a module's tests need more time and output
    than a model's call; these keys change how long and how big, not what is allowed.
    POLICY_EXTRA="key: value; key: value" adds keys (to find which limit causes a
    failure: never for the figures)."""
    extra = {}
    for item in os.environ.get("POLICY_EXTRA", "").split(";"):
        if item.strip():
            k, _, v = item.partition(":")
            extra[k.strip()] = v.strip()
    return dict({
        "maxCalls": 1000,
        "timeoutMs": timeout * 1000,
        "cpuSeconds": timeout,
        "memoryBytes": 1073741824,
        "maxOutputCharacters": 8000000,
        "maxResultBytes": 33554432,
        "maxConnectionOutputBytes": 67108864,
        # A whole module's tests in one call leave more in /tmp, and keep more files
        # open, than a model's call; test_io writes one sparse file past 2 GiB.
        "tmpBytes": 536870912,
        "maxFileBytes": 4294967296,
        "maxOpenFiles": 256,
    }, **extra)


def policy_text(path, overrides, host_id_base):
    """The profile's file with the overrides: a key the file sets is replaced in place,
    the others are appended (the loader refuses a key twice)."""
    with open(path) as f:
        lines = f.read().splitlines()
    overrides = dict(overrides, workerHostIdBase=host_id_base, workerHostIdCount=256)
    done = set()
    for i, line in enumerate(lines):
        m = re.match(r"^(\w+):", line)
        if m and m.group(1) in overrides:
            lines[i] = "%s: %s" % (m.group(1), overrides[m.group(1)])
            done.add(m.group(1))
    lines += ["%s: %s" % (k, v) for k, v in overrides.items() if k not in done]
    return "\n".join(lines) + "\n"


# A block of workers' host ids of the suite's own per profile, away from the default
# block and from the one the integration tests' supervisors take theirs from
# (tests/lib/testlib/supervisor.py).
HOST_ID_BASE = 0x7fc00000


def make_extras(tmp):
    """The zip of EXTRA_PACKAGES (their test/ paths), or None; and the list of those missing."""
    have = [p for p in EXTRA_PACKAGES if os.path.isdir(os.path.join(EXTRA_SOURCE, p))
            and not os.path.exists(os.path.join("/usr/lib/python3.11/test", p))]
    missing = [p for p in EXTRA_PACKAGES if p not in have
               and not os.path.exists(os.path.join("/usr/lib/python3.11/test", p))]
    if not have:
        return None, missing
    path = os.path.join(tmp, "extras.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p in have:
            top = os.path.join(EXTRA_SOURCE, p)
            for d, dirs, files in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                for f in sorted(files):
                    full = os.path.join(d, f)
                    z.write(full, os.path.join("test", os.path.relpath(full, EXTRA_SOURCE)))
    return path, missing


# ---- one module, one side ----

def progress(stdout):
    """From the child's progress lines: {test id: outcome} of the tests that ended, and
    the test that had started and not ended (None)."""
    done, running = {}, None
    for line in stdout.splitlines():
        if line.startswith("@@compat > "):
            running = line[11:]
        elif line.startswith("@@compat = "):
            outcome, _, tid = line[11:].partition(" ")
            done[tid] = outcome
            if tid == running:
                running = None
    return done, running


def broken(module, what, stdout=""):
    """The summary of a module whose run did not end (what: why): the tests that ended,
    the test that was running as an error, or the module id "<test_x>" when none was."""
    done, running = progress(stdout)
    culprit = running or "<%s>" % module
    done[culprit] = "E"
    return {"module": module, "outcome": what, "tests": done, "why": {culprit: what}, "culprit": running}


def run_host(module, extras, timeout):
    cwd = tempfile.mkdtemp(prefix="compat-host-")
    name = "test_" + module
    try:
        # TMPDIR: what the tests (and the child's extraction) leave in temporary
        # directories goes with cwd.
        p = subprocess.run([PYTHON, "-I", CHILD, name, extras or "", str(TEST_TIMEOUT)], cwd=cwd, timeout=timeout,
                           stdin=subprocess.DEVNULL, capture_output=True, env=dict(os.environ, TMPDIR=cwd))
    except subprocess.TimeoutExpired as e:
        return broken(name, "timeout: %d s on the host" % timeout, (e.stdout or b"").decode("utf-8", "replace"))
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    stdout = p.stdout.decode("utf-8", "replace")
    for line in reversed(stdout.splitlines()):
        if line.startswith("COMPAT-SUMMARY "):
            out = json.loads(line[len("COMPAT-SUMMARY "):])
            out["outcome"] = "ok"
            return out
    return broken(name, "crashed on the host: exit status %d: %s" % (
        p.returncode, p.stderr.decode("utf-8", "replace")[-WHY_STDERR:]), stdout)


def describe(r):
    """A call that did not end ok, in a line: outcome, limit, how the worker ended."""
    what = r.outcome
    if re.search(r"^Timeout \(\d+:\d\d:\d\d\)!$", r.stderr.text, re.M):
        what = "test timeout (%d s, faulthandler), %s" % (TEST_TIMEOUT, what)
    if r.limit:
        what += " (%s)" % r.limit
    if r.exit_status is not None:
        e = r.exit_status
        what += ", worker %s" % ("killed by signal %d" % e.signal if e.signal else "exit status %s" % e.code)
    if r.detail:
        what += ": " + r.detail
    if r.exception is not None:
        what += ": %s: %s" % (r.exception.type, r.exception.message)
    return what[:500]


# A test running longer than this ends its process (the child's faulthandler, as
# regrtest --timeout), and its stacks (the end of stderr) join the failure's traceback.
TEST_TIMEOUT = int(os.environ.get("TEST_TIMEOUT", "60"))
WHY_STDERR = 4000

# A module whose worker ends early (a crash, a timeout, a limit) is resumed after the
# test that was running, at most this many times.
RESUMES = 3


def run_sandbox(socket_path, module, extras_bytes, timeout):
    """The module in calls: the first runs every test; when a worker ends early, the
    test it was running is recorded as an error with the call's outcome, and the next
    call runs the tests that had not ended."""
    from codeinterp import Client
    name = "test_" + module
    with open(CHILD) as f:
        child = "COMPAT_IN_SANDBOX = True\n" + f.read()
    tests, why, notes, skip = {}, {}, [], []
    for _ in range(RESUMES + 1):
        code = child + "\nmain(%r, %r, %r, %d)\n" % (
            name, "/inputs/extras.original" if extras_bytes else None, skip, TEST_TIMEOUT)
        with Client(socket_path, timeout + 60) as client:
            with client.invocation() as inv:
                sources = []
                if extras_bytes:
                    inv.put_attachment("extras", extras_bytes, "test packages Debian does not ship (zip)",
                                       "application/zip", "extras.zip")
                    sources = ["extras"]
                r = inv.execute(code, "compat " + name, sources)
        if r.outcome == "ok" and r.result is not None:
            try:
                out = json.loads(ast.literal_eval(r.result.text))
            except (ValueError, SyntaxError) as e:
                out = broken(name, "unreadable summary (%s): %d characters, %d omitted" % (
                    e, r.result.total_characters, r.result.omitted_characters), r.stdout.text)
            else:
                out["outcome"] = "ok"
        else:
            out = broken(name, describe(r), r.stdout.text)
            if out.get("culprit"):
                out["why"][out["culprit"]] += "\n" + r.stderr.text[-WHY_STDERR:]
        tests.update(out["tests"])
        why.update(out["why"])
        if out["outcome"] == "ok":
            break
        notes.append(out["outcome"] + (" in " + out["culprit"] if out.get("culprit") else ""))
        if not out.get("culprit"):
            break  # nothing to resume after
        # The tests that ended ok are left out; those that failed run again, so that
        # the summary brings their tracebacks.
        skip = sorted(t for t, o in tests.items() if o not in FAILED or t == out["culprit"])
    return {"module": name, "outcome": "; ".join(notes) or "ok", "tests": tests, "why": why}


# ---- expected.txt ----

def read_expected(path):
    """{(profile, test id): rule}"""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            entry, _, rule = line.partition("#")
            parts = entry.split()
            if len(parts) != 2 or not rule.strip():
                raise SystemExit("%s:%d: not 'profile test_id  # rule': %r" % (path, n, line))
            out[(parts[0], parts[1])] = rule.strip()
    return out


HEADER = """\
# The sandbox-only failures of make test-compat (tests/compat/run.py, docs/testing.md
# "Compatibility"): tests that pass on the host (bare /usr/bin/python3) and fail in a
# worker, one a line, "profile test_id  # the sandbox rule that causes it", grouped by
# rule. A module id "<test_x>" is a module whose call did not end ok (timeout, memory,
# a crashed worker). UPDATE=1 rewrites the lines of the profiles and modules it runs:
# lasting entries keep their rule, new ones get a suggested one marked [REVIEW] (check
# it, then remove the mark), stale ones go.
"""


def write_expected(path, entries):
    groups = {}
    for (profile, tid), rule in entries.items():
        groups.setdefault(rule, []).append((profile, tid))
    with open(path, "w") as f:
        f.write(HEADER)
        for rule in sorted(groups, key=lambda r: (r.startswith(PROCESS_RULE), r.startswith(SOCKET_RULE), r)):
            f.write("\n# %s (%d)\n" % (rule, len(groups[rule])))
            for profile, tid in sorted(groups[rule]):
                f.write("%s %s  # %s\n" % (profile, tid, rule))


# ---- the run ----

def main():
    modules = env_list("MODULES", MODULES)
    modules = [m[5:] if m.startswith("test_") else m for m in modules]
    profiles = env_list("PROFILES", PROFILES)
    for p in profiles:
        if p not in PROFILES:
            raise SystemExit("unknown profile %r (known: %s)" % (p, ", ".join(PROFILES)))
    update = os.environ.get("UPDATE") == "1"
    strict = os.environ.get("STRICT") == "1"
    jobs = int(os.environ.get("JOBS", "2"))
    timeout = int(os.environ.get("MODULE_TIMEOUT", "300"))
    daemon = os.path.join(BUILD, "bin", "codeinterpd")
    if not os.path.exists(daemon):
        raise SystemExit("%s is missing: make build" % daemon)

    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="codeinterp-compat-")
    sups = {}
    try:
        extras, missing = make_extras(tmp)
        left_out = [m for m in modules if "test_" + m in missing]
        modules = [m for m in modules if m not in left_out]
        extras_bytes = open(extras, "rb").read() if extras else None
        for i, p in enumerate(profiles):
            sups[p] = Daemon(daemon, policy_text(PROFILES[p], suite_keys(timeout), HOST_ID_BASE + 256 * i),
                             start_timeout=60).wait_ready(60)

        results = {}  # (side, module) -> summary
        lock = threading.Lock()

        def job(side, module):
            t0 = time.monotonic()
            extra = "test_" + module in EXTRA_PACKAGES  # only these modules need the zip
            if side == "host":
                r = run_host(module, extras if extra else None, timeout)
            else:
                r = run_sandbox(sups[side].socket, module, extras_bytes if extra else None, timeout)
            r["wall"] = time.monotonic() - t0
            with lock:
                results[(side, module)] = r
                bad = sum(1 for o in r["tests"].values() if o in FAILED)
                print("  %-8s %-14s %5d tests %4d failed %6.1f s%s" % (
                    side, module, len(r["tests"]), bad, r["wall"],
                    "" if r["outcome"] == "ok" else "  " + r["outcome"][:100]), flush=True)

        sides = ["host"] + profiles
        # Slow modules first, so that the run does not end waiting for one of them.
        first = ("decimal", "io", "threading", "pickle", "typing", "datetime", "os", "re", "zoneinfo", "statistics")
        order = sorted(modules, key=lambda m: (m not in first, first.index(m) if m in first else 0))
        print("test-compat: %d modules, sides %s, %d at once" % (len(modules), ", ".join(sides), jobs), flush=True)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(job, side, m) for m in order for side in sides]
            for f in futures:
                f.result()
        for p in profiles:
            rc = sups.pop(p).stop()
            if rc != 0:
                print("test-compat: codeinterpd (%s) exited with %r" % (p, rc))
    finally:
        for s in sups.values():
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started

    expected = read_expected(EXPECTED)
    rc = 0
    found = {}  # (profile, id) -> why
    print()
    for p in profiles:
        print("profile %s (%s)" % (p, os.path.relpath(PROFILES[p], ROOT)))
        print("  %-14s %7s %7s %6s %9s %8s %10s" % ("module", "host", "sandbox", "host F", "sbx-only", "expected",
                                                   "unexpected"))
        tot = [0] * 6
        for m in modules:
            host, sbx = results[("host", m)], results[(p, m)]
            host_failed = {t for t, o in host["tests"].items() if o in FAILED}
            only = {t: sbx["why"].get(t, "") for t, o in sbx["tests"].items() if o in FAILED and t not in host_failed}
            for t, why in only.items():
                found[(p, t)] = why
            exp = sum(1 for t in only if (p, t) in expected)
            row = [len(host["tests"]), len(sbx["tests"]), len(host_failed), len(only), exp, len(only) - exp]
            tot = [a + b for a, b in zip(tot, row)]
            print("  %-14s %7d %7d %6d %9d %8d %10d" % tuple([m] + row))
        print("  %-14s %7d %7d %6d %9d %8d %10d" % tuple(["total"] + tot))
        procs = sum(1 for (pp, t), why in found.items() if pp == p
                    and expected.get((p, t), suggest(why, t)).startswith((PROCESS_RULE, SOCKET_RULE)))
        print("  sandbox-only failures: %d, of them processes/sockets: %d, the rest: %d" % (
            tot[3], procs, tot[3] - procs))
        print()
    host_broken = [m for m in modules if results[("host", m)]["outcome"] != "ok"]
    for m in host_broken:
        print("test-compat: HOST: test_%s did not run on the host: %s" % (m, results[("host", m)]["outcome"]))
        rc = 1
    if left_out:
        print("test-compat: left out (neither Debian's test package nor %s has them): %s" % (
            EXTRA_SOURCE, ", ".join("test_" + m for m in left_out)))

    unexpected = sorted(k for k in found if k not in expected)
    ran = set(modules)
    stale = sorted(k for k in expected if k[0] in profiles and module_of(k[1]) in {"test_" + m for m in ran}
                   and k not in found)
    if unexpected:
        print("test-compat: %d UNEXPECTED sandbox-only failures:" % len(unexpected))
        for k in unexpected:
            print("  %s %s  # %s\n      %s" % (k[0], k[1], suggest(found[k], k[1]), last_line(found[k])))
        if not update:
            rc = 1
    if stale:
        print("test-compat: %d stale entries in %s (no longer failing in the sandbox only):" % (
            len(stale), os.path.relpath(EXPECTED, ROOT)))
        for k in stale:
            print("  %s %s  # %s" % (k[0], k[1], expected[k]))
        if strict and not update:
            rc = 1
    review = sorted(k for k, r in expected.items() if r.endswith("[REVIEW]") and k not in stale)
    if review and not update:
        print("test-compat: %d entries of %s are still marked [REVIEW]: check each rule, then remove the mark" % (
            len(review), os.path.relpath(EXPECTED, ROOT)))
        rc = 1
    if update:
        new = {k: r for k, r in expected.items() if k not in stale}
        for k in unexpected:
            new[k] = suggest(found[k], k[1]) + " [REVIEW]"
        write_expected(EXPECTED, new)
        print("test-compat: rewrote %s: %d entries, %d new to review" % (
            os.path.relpath(EXPECTED, ROOT), len(new), len(unexpected)))
    print("test-compat: %d modules, %s, %.0f s" % (len(modules), ", ".join(["host"] + profiles), elapsed))
    return rc


if __name__ == "__main__":
    sys.exit(main())
