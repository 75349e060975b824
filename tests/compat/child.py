"""One CPython regression-test module, run with unittest, and a summary of each test's
outcome (make test-compat, tests/compat/run.py).

The same file runs in a codeinterp worker (the driver submits it as a call's code with
a last line `main(MODULE, EXTRAS)`, and the summary is the call's final value) and on
the host (`/usr/bin/python3 -I child.py MODULE [EXTRAS [TEST_TIMEOUT]]`: the summary on stdout).

The module is test.<MODULE> of the interpreter's own test package (Debian's
libpython3.11-testsuite, /usr/lib/python3.11/test); EXTRAS is a zip of the test packages
Debian does not ship (test_sqlite3, test_tomllib), extracted into a temporary directory
and added to the test package's __path__. The tests run as `python -m test` would run
them with no -u option (support.use_resources = []: network, cpu, largefile... tests
are skipped), through the module's test_main when it has one.

The summary: JSON {"module", "seconds", "tests": {test id: outcome}, "why": {test id:
the end of its traceback}} with outcome p (passed), s (skipped), x (expected failure),
F (failed), E (error), U (unexpected success); a subtest that failed makes its test F
or E. A module that cannot be imported or loaded is one test id "<module>" with E.

While the tests run, the child writes a line "@@compat > ID" to standard output when a
test starts and "@@compat = OUTCOME ID" when it ends (flushed), so that when a worker is
killed (a timeout, a memory limit) or crashes, the driver still knows each finished
test's outcome and which test was running. SKIP (a list of test ids) leaves those tests
out: the driver resumes a module after the test that brought its worker down. A test
that runs longer than TEST_TIMEOUT seconds ends the process as regrtest's --timeout
does (faulthandler: every thread's stack on stderr, then exit status 1).

The test package itself is run as it is, but for one adaptation to a read-only sys.path
(_read_only_sys_path: test.support's forget())."""
import faulthandler
import io
import json
import os
import sys
import tempfile
import time
import traceback
import unittest
import zipfile

WHY_CHARS = 1500


class Recorder(unittest.TestResult):
    """Each test's outcome (the worst of its subtests') and, for F and E, the end of
    the traceback."""

    RANK = {"p": 0, "s": 0, "x": 0, "U": 1, "F": 2, "E": 3}

    def __init__(self, out, test_timeout):
        super().__init__()
        self.outcomes = {}
        self.why = {}
        self.out = out
        self.test_timeout = test_timeout

    def _say(self, line):
        try:
            self.out.write("\n@@compat " + line + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass

    def startTest(self, test):
        super().startTest(test)
        self._say("> " + test.id())
        if self.test_timeout:
            try:  # as regrtest's --timeout: the stacks on stderr, then _exit(1)
                faulthandler.dump_traceback_later(self.test_timeout, exit=True, file=sys.__stderr__)
            except (AttributeError, OSError, ValueError):
                self.test_timeout = None

    def stopTest(self, test):
        if self.test_timeout:
            faulthandler.cancel_dump_traceback_later()
        super().stopTest(test)
        self._say("= %s %s" % (self.outcomes.get(test.id(), "p"), test.id()))

    def _set(self, test, outcome, err=None):
        tid = test.id()
        old = self.outcomes.get(tid)
        if old is not None and self.RANK[old] > self.RANK[outcome]:
            return
        self.outcomes[tid] = outcome
        if err is not None:
            try:
                text = "".join(traceback.format_exception(*err))
            except Exception as e:  # a broken exception: its type is enough
                text = "%s (unformattable: %r)" % (err[0], e)
            self.why[tid] = text[-WHY_CHARS:]

    def addSuccess(self, test):
        super().addSuccess(test)
        self.outcomes.setdefault(test.id(), "p")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "F", err)

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "E", err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "s")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "x")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "U")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, "F" if failed else "E", err)


def _add_extras(extras):
    """Extract the zip of extra test packages and make them part of the test package;
    the directory they are in (None without extras)."""
    import test
    if not extras or not os.path.exists(extras):
        return None
    where = tempfile.mkdtemp(prefix="compat-extras-")
    with zipfile.ZipFile(extras) as z:
        z.extractall(where)
    test.__path__.append(os.path.join(where, "test"))
    return os.path.join(where, "test")


def _load_extra(loader, module, where):
    """The tests of an extra package, module by module: its load_tests would discover
    them from a top-level directory (the test package's first, Debian's) that does not
    hold them."""
    names = sorted(f[:-3] for f in os.listdir(os.path.join(where, module))
                   if f.startswith("test_") and f.endswith(".py"))
    return loader.loadTestsFromNames(["test.%s.%s" % (module, n) for n in names])


def _read_only_sys_path():
    """The one adaptation of the test package to the worker (on the host too, where it
    changes nothing): test.support's forget(), which a test's cleanup calls to drop a
    module it wrote, unlinks <module>.pyc in every sys.path directory and ignores only
    ENOENT, while unlink in a read-only mount (the worker's stdlib) is EROFS even for a
    file that is not there. Such a file being absent is what forget() wants; an EROFS
    for a file that exists still raises."""
    import errno
    from test.support import import_helper, os_helper
    unlink = os_helper.unlink

    def unlink_absent_ok(filename):
        try:
            unlink(filename)
        except OSError as e:
            if e.errno != errno.EROFS or os.path.lexists(filename):
                raise
    os_helper.unlink = import_helper.unlink = unlink_absent_ok  # import_helper imported it by name


def _without(suite, skip):
    """suite without the tests whose ids are in skip."""
    out = unittest.TestSuite()
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            out.addTest(_without(t, skip))
        elif t.id() not in skip:
            out.addTest(t)
    return out


def main(module, extras=None, skip=(), test_timeout=60):
    start = time.monotonic()
    rec = Recorder(sys.stdout, test_timeout)
    skip = set(skip)

    def run_suite(suite):
        if skip:
            suite = _without(suite, skip)
        suite.run(rec)

    name = "test." + module
    try:
        where = _add_extras(extras)
        from test import support
        _read_only_sys_path()
        support.verbose = 0
        support.use_resources = []
        support._run_suite = run_suite  # what run_unittest (a test_main's) calls
        __import__(name)
        mod = sys.modules[name]
        loader = unittest.TestLoader()
        if hasattr(mod, "test_main"):
            mod.test_main()
        else:
            if where and os.path.isdir(os.path.join(where, module)):
                suite = _load_extra(loader, module, where)
            else:
                suite = loader.loadTestsFromModule(mod)
            for error in loader.errors:
                rec.outcomes["<%s>" % module] = "E"
                rec.why["<%s>" % module] = error[-WHY_CHARS:]
            run_suite(suite)
    except BaseException:
        rec.outcomes["<%s>" % module] = "E"
        rec.why["<%s>" % module] = traceback.format_exc()[-WHY_CHARS:]
    return json.dumps({"module": module, "seconds": round(time.monotonic() - start, 1),
                       "tests": rec.outcomes, "why": rec.why}, sort_keys=True)


if __name__ == "__main__" and "COMPAT_IN_SANDBOX" not in globals():
    summary = main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None, (),
                   int(sys.argv[3]) if len(sys.argv) > 3 else 60)
    out = io.open(1, "w", encoding="utf-8", closefd=False)
    out.write("\nCOMPAT-SUMMARY " + summary + "\n")
    out.flush()
    os._exit(0)  # threads a test left behind must not keep the process
