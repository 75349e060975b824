"""Issue 24: a pre-started worker runs its warm-up (worker/pyrun.c, pyrun_warmup: a float
result and, with pandas preloaded, a frame built and a column reduced) while it waits,
so the pages the call writes are copied before the call exists. Nothing of the warm-up
may reach the call: its __main__ holds only what a fresh interpreter's does, and the
values it computed are nowhere the code can see them.

And every new worker maps ahead, in bulk, the pages a worker touches while it prepares,
which the zygote learnt at its start from a rehearsal (common/pageset.h), of each kind
where the zygote timed that to beat the faults on this machine: held by ptrace right
after those madvise calls, before it has run any of its preparation, a worker already
owns its copies of the pages it will write when those are written ahead.

And a pre-started worker loads the early part of its seccomp filter while it prepares,
the late part when its call arrives (policy/seccomp.h): the kernel shows one filter on
a prepared worker and two on a running one, and a load the kernel refuses ends the call
as a typed setup error."""
import errno
import os
import re
import signal
import shutil
import subprocess
import tempfile

import pytest

from testlib import PYTHON, Supervisor, ok, proc, running_supervisor, status, trace, unavailable, value
from testlib.waits import start_held, wait_for

pytestmark = [pytest.mark.python]

# The runner's own names (input_files, input_assets) and nothing else.
CHECK = ("(sorted(k for k in globals() if not k.startswith('__')), hasattr(__import__('sys'), 'last_value'), "
         "hasattr(__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__), '_'), "
         "sum([9.0, 7.5]) / 2)")
FRESH = "(['input_assets', 'input_files'], False, False, 8.25)"
PANDAS = "import pandas as pd; pd.DataFrame({'h': [9.0, 7.5]})['h'].mean()"


def calls_after_warm_up(policy, codes):
    out = []
    with running_supervisor(policy + "workerStart: zygote\ntimeoutMs: 120000\n") as s:
        c = s.connect()
        for code in codes:
            wait_for(lambda: proc.pool_prepared(s.pid), what="pre-started workers done with their warm-up")
            out.append(value(c.execute(code)))
        c.close()
    return out


def test_warm_up_leaves_nothing_default_policy():
    assert calls_after_warm_up("", [CHECK, CHECK]) == [FRESH] * 2


def test_warm_up_leaves_nothing_data_policy():
    if not all(PYTHON.get("packages", {}).get(p) for p in ("numpy", "pandas", "matplotlib")):
        pytest.skip("this build's Python lacks the preloaded packages")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "policy-data.yaml")) as f:
        data = f.read()
    got = calls_after_warm_up(data, [CHECK, PANDAS, CHECK])
    assert got == [FRESH, "8.25", FRESH]


# x86_64's madvise (MADV_POPULATE_WRITE and _READ, once per run of learnt pages), and
# the recvmsg a pre-started worker waits for its call in, once prepared.
SYS_MADVISE, SYS_RECVMSG = 28, 47


# The zygote's word on each kind of learnt page (worker/zygote.c, choose_pages_ahead):
# how many, and whether mapping them ahead beat the faults it saves on this machine.
CHOICE = re.compile(r"codeinterp-zygote: (\d+) (read-only|written) pages: by faults ([\d.]+) ms, "
                    r"mapped ahead ([\d.]+) ms: (mapped ahead|left to faults)")


def pages_ahead_choices(sup):
    with open(sup.log_path, errors="replace") as f:
        found = CHOICE.findall(f.read())
    out = {}
    for n, kind, faults, ahead, verdict in found:
        # The faster way wins, as timed.
        assert (verdict == "mapped ahead") == (float(ahead) < float(faults)), (kind, faults, ahead, verdict)
        out[kind] = (int(n), verdict == "mapped ahead")
    return out


@pytest.mark.rootless  # a rootless zygote learns them as an unprivileged user, without CAP_SYS_ADMIN
def test_a_new_worker_has_the_learnt_pages_written_ahead(make_supervisor):
    """Whether a kind is mapped ahead is the machine's: the zygote timed both ways. What
    it kept is what status counts and what a new worker does before anything else; the
    mapping itself, either kind, is tests/unit/test_pageset.c's."""
    sup = make_supervisor(trace.POOL_OF_ONE)
    chosen = pages_ahead_choices(sup)
    ahead = status(sup)["zygotePagesAhead"]
    assert set(chosen) == {"read-only", "written"}, chosen
    assert chosen["written"][0] >= 100 and chosen["read-only"][0] >= 100, chosen  # ≈ 185 and ≈ 940
    assert ahead == sum(n for n, kept in chosen.values() if kept), (ahead, chosen)
    with trace.refill_held(sup) as (c, trap, child):
        before = proc.written_pages(child)
        # The pages mapped ahead, and nothing else of its preparation run.
        stepped = trap.step_past(SYS_MADVISE, until=SYS_RECVMSG)
        after = proc.written_pages(child)
        trap.release()
    assert stepped == (ahead > 0), (stepped, ahead)
    # At its first instruction it owns a few pages the kernel copied at the clone
    # (measured: 8); after the madvise calls, also the ≈ 180 its preparation writes,
    # when those are written ahead here.
    if chosen["written"][1]:
        assert before < 50 and after >= before + 100, (before, after, chosen)
    elif stepped:
        assert after < before + 50, (before, after, chosen)
    wait_for(lambda: proc.pool_prepared(sup.pid), what="the traced worker done preparing")
    r = ok(c.execute("sum([9.0, 7.5]) / 2"))
    assert r["result"]["text"] == "8.25" and r["timing"]["worker"] == "ready", r


# A prefix that loads a seccomp filter with RULES (libseccomp calls, each "< 0 ||"),
# for the supervisor and everything it starts, then execs it.
PREFIX_C = r"""
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || RULES
            seccomp_load(ctx) < 0)
                return 125;
        execv(argv[1], argv + 1);
        perror("execv");
        return 126;
}
"""

# seccomp(SECCOMP_SET_MODE_FILTER, ...) refused (ENOMEM, as when the kernel cannot
# allocate the program); libseccomp's own probes (other operations) go on.
NO_SECCOMP_LOAD_RULES = """
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOMEM), SCMP_SYS(seccomp), 1, SCMP_A0(SCMP_CMP_EQ, 1)) < 0 ||"""
# A kernel without MADV_POPULATE_READ/_WRITE (before 5.14) answers EINVAL.
NO_POPULATE_RULES = """
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(madvise), 1, SCMP_A2(SCMP_CMP_EQ, 22)) < 0 ||
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(madvise), 1, SCMP_A2(SCMP_CMP_EQ, 23)) < 0 ||"""
# fork() (glibc's clone with CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD) fails
# with EAGAIN, as under a process limit; the clone3 calls that make the supervisor's and
# the zygote's children are not fork() and go on.
NO_FORK_RULES = """
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAGAIN), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_EQ, 0x01200011)) < 0 ||"""

# clone3 answered ENOSYS, as a container runtime's default profile does (to make glibc
# fall back to clone, whose flags a filter can see): common/clone.h falls back too.
NO_CLONE3_RULES = """
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0 ||"""


def built_prefix(rules):
    """The prefix with rules, built in a temporary directory while the generator lives
    (a module fixture's body)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        unavailable("there is no C compiler for the seccomp prefix")
    d = tempfile.mkdtemp(prefix="codeinterp-prefix-")
    try:
        with open(os.path.join(d, "p.c"), "w") as f:
            f.write(PREFIX_C.replace("RULES", rules))
        p = subprocess.run([cc, "-O1", "-o", os.path.join(d, "p"), os.path.join(d, "p.c"), "-lseccomp"],
                           capture_output=True)
        assert p.returncode == 0, "the prefix does not build:\n" + p.stderr.decode(errors="replace")
        yield os.path.join(d, "p")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def no_populate():
    yield from built_prefix(NO_POPULATE_RULES)


@pytest.fixture(scope="module")
def no_fork():
    yield from built_prefix(NO_FORK_RULES)


@pytest.fixture(scope="module")
def no_clone3():
    yield from built_prefix(NO_CLONE3_RULES)


@pytest.fixture(scope="module")
def no_seccomp_load():
    yield from built_prefix(NO_SECCOMP_LOAD_RULES)


def filters(pid):
    """(seccomp mode, number of filters) of pid, from /proc/PID/status."""
    st = proc.status(pid)
    return int(st["Seccomp"]), int(st["Seccomp_filters"])


@pytest.mark.rootless
@pytest.mark.parametrize("deny", ["errno", "kill"])
def test_a_prepared_worker_has_the_early_filter_and_its_call_the_late_one(deny):
    """The zygote has loaded the early part into itself; its prepared worker has that
    one filter, inherited at its clone, before any call exists; once it runs its call it
    has two (the late part on top), in both deny modes, and what the filter denies is
    still denied. The zygote serves under its filter: its worker was made and ran."""
    sup = Supervisor(trace.POOL_OF_ONE + "seccompDenyAction: %s\n" % deny)
    try:
        zygote = status(sup)["zygotePid"]
        assert filters(zygote) == (2, 1)
        assert "loading the early seccomp filter" not in sup.read_log()
        wait_for(lambda: proc.pool_prepared(sup.pid), what="the pre-started worker done preparing")
        (worker,) = proc.pool_workers(sup.pid)
        assert filters(worker) == (2, 1)
        # unshare(CLONE_NEWUSER) straight to the kernel: the filter's own verdict.
        call = start_held(sup, after="import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                     "print(libc.unshare(0x10000000), ctypes.get_errno())\n")
        assert call.wait_holding() == worker
        assert filters(worker) == (2, 2)
        r = call.finish()
        if deny == "errno":
            assert ok(r)["stdout"]["text"] == "-1 %d\n" % errno.EPERM, r  # as from the whole filter
        else:
            assert r["outcome"] == "worker_error" and r["exitStatus"]["signal"] == signal.SIGSYS, r
    finally:
        sup.stop()


def test_a_refused_seccomp_load_is_a_typed_setup_error(no_seccomp_load):
    """The kernel refuses to load a filter: the pre-started worker remembers it (its
    early part fails while it prepares) and reports it for its call, typed (stage
    seccomp, ENOMEM), without running the code; here that call is the supervisor's
    self-check, so it says why and does not serve."""
    with pytest.raises(RuntimeError) as e:
        Supervisor(trace.POOL_OF_ONE, prefix=(no_seccomp_load,))
    log = str(e.value)
    assert "Self-check failed: worker_error: sandbox setup failed at seccomp: Cannot allocate memory" in log, log
    assert "does not serve" in log, log


def serve_two_ready_calls(sup):
    c = sup.connect()
    for _ in range(2):
        wait_for(lambda: proc.pool_prepared(sup.pid), what="the pre-started worker done preparing")
        r = ok(c.execute("sum([9.0, 7.5]) / 2"))
        assert r["result"]["text"] == "8.25" and r["timing"]["worker"] == "ready", r
    c.close()


def test_a_zygote_under_its_filter_clones_without_clone3(no_clone3):
    """Where clone3 is answered ENOSYS, the zygote makes its workers with clone (the
    early part, which the zygote runs under, lets it have both; the late part gives
    each the call's verdict): pre-started workers serve calls, and the call itself
    still cannot clone into new namespaces."""
    sup = Supervisor(trace.POOL_OF_ONE, prefix=(no_clone3,))
    try:
        assert filters(status(sup)["zygotePid"]) == (2, 2)  # the prefix's and its own
        serve_two_ready_calls(sup)
        r = ok(sup.connect().execute(
            "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)\n"  # clone(CLONE_NEWUSER | SIGCHLD)
            "(r, errno.errorcode[ctypes.get_errno()])"))
        assert r["result"]["text"] == "(-1, 'EPERM')", r
        assert "loading the early seccomp filter" not in sup.read_log()
    finally:
        sup.stop()


def test_pages_that_cannot_be_timed_are_mapped_ahead(no_fork):
    """With fork() failing, the zygote cannot time the two ways in throwaway copies:
    it says so for each kind and maps both ahead, as before it timed them; status counts
    them all, and each call is served by a pre-started worker."""
    sup = Supervisor(trace.POOL_OF_ONE, prefix=(no_fork,))
    try:
        with open(sup.log_path, errors="replace") as f:
            log = f.read()
        untimed = re.findall(r"codeinterp-zygote: (\d+) (read-only|written) pages could not be timed: mapped ahead",
                             log)
        assert sorted(kind for _, kind in untimed) == ["read-only", "written"], log
        assert not CHOICE.search(log), log
        assert status(sup)["zygotePagesAhead"] == sum(int(n) for n, _ in untimed) > 0
        serve_two_ready_calls(sup)
    finally:
        sup.stop()


def test_a_kernel_without_populate_serves_without_pages_ahead(no_populate):
    """Nothing is mapped ahead, the zygote says why, status and the workers go on: each
    call is served by a pre-started worker that prepared at the full price of its
    faults, as before pages were mapped ahead."""
    sup = Supervisor(trace.POOL_OF_ONE, prefix=(no_populate,))
    try:
        assert status(sup)["zygotePagesAhead"] == 0
        serve_two_ready_calls(sup)
        with open(sup.log_path, errors="replace") as f:
            log = f.read()
        assert "learning the pages a worker touches failed (Invalid argument): none is mapped ahead" in log, log
        assert "a new worker maps 0 pages ahead" in log, log
    finally:
        sup.stop()
