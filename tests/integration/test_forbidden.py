"""What the code is told when it does what the sandbox forbids (docs/security.md, "What
the code is told"): starting a process, using the network, installing a package.

Each fails the same way under both profiles (the reviewed default and
packaging/policy-data.yaml) and both start modes (the start_mode marker runs this file
again with CODEINTERP_WORKER_START=exec): the exception a library expects there, with the
errno the kernel would give, and a message naming the rule. The runner's guards give
the message; the seccomp filter stays the enforcement (tests/adversarial calls fork,
socket and execve around the guards).

Each test runs its probes in one call; a probe's value is (exception type, errno,
message) and, for urllib's URLError, the same of its reason."""
import ast
import errno
import socket

import pytest

from testlib import value

pytestmark = [pytest.mark.start_mode, pytest.mark.python]

PROFILES = ["reviewed", "data"]
PROCESSES = "no processes can be started in this sandbox; use threads or do the work in this program"
SHARED_MEMORY = PROCESSES + (" (multiprocessing's shared memory is for sharing with other processes: "
                             "keep the data in this program)")
NETWORK = "there is no network in this sandbox: no connections and no name lookups; work with the data and files already here"
INSTALLS = {
    "reviewed": "packages cannot be installed in this sandbox; use what is already here: the standard library",
    "data": ("packages cannot be installed in this sandbox; use what is already here: the standard library, "
             "numpy, pandas, matplotlib, scipy, sklearn, statsmodels, sympy, seaborn, openpyxl, tabulate"),
}

PRELUDE = r"""
import os, sys
def _described(e):
    return (type(e).__module__ + "." + type(e).__qualname__, getattr(e, "errno", None), str(e))
def probe(f):
    try:
        r = f()
    except BaseException as e:
        reason = getattr(e, "reason", None)
        return _described(e) + ((_described(reason),) if isinstance(reason, BaseException) else ())
    return ("returned", repr(r))
"""


def probes(sup, cases):
    """Run each case (an expression) through probe() in one call: {case: outcome}."""
    code = PRELUDE + "{\n" + "".join("    %r: probe(lambda: %s),\n" % (k, k) for k in cases) + "}"
    c = sup.connect()
    try:
        return ast.literal_eval(value(c.execute(code)))
    finally:
        c.close()


@pytest.fixture(params=PROFILES)
def profile(request):
    return request.param


@pytest.fixture
def sup(shared_supervisor, profile):
    if profile == "reviewed":
        return shared_supervisor(None)
    from test_datastack import data_policy, require_stack
    require_stack()
    return shared_supervisor(data_policy() + "timeoutMs: 120000\n")


def eperm(message):
    return ("builtins.PermissionError", errno.EPERM, "[Errno %d] %s" % (errno.EPERM, message))


def check(got, expected):
    wrong = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
    assert not wrong, "\n".join("%s\n  got      %r\n  expected %r" % (k, g, e) for k, (g, e) in wrong.items())


PROCESS_CASES = [
    "os.fork()",
    "os.forkpty()",
    "os.execv('/bin/sh', ['sh', '-c', 'true'])",
    "os.execvp('sh', ['sh', '-c', 'true'])",
    "os.execl('/bin/true', 'true')",
    "os.posix_spawn('/bin/true', ['true'], {})",
    "os.posix_spawnp('true', ['true'], {})",
    "os.spawnv(os.P_WAIT, '/bin/true', ['true'])",
    "os.spawnlp(os.P_NOWAIT, 'true', 'true')",
    "os.system('true')",
    "os.popen('echo hi').read()",
    "__import__('subprocess').run(['true'])",
    "__import__('subprocess').check_output('echo hi', shell=True)",
    "__import__('subprocess').Popen([sys.executable, '-c', 'pass'])",
    "__import__('pty').fork()",
    "__import__('posix').fork()",
    "__import__('multiprocessing').Process(target=print).start()",
    "__import__('multiprocessing').get_context('spawn').Process(target=print).start()",
    "__import__('multiprocessing').get_context('forkserver').Process(target=print).start()",
    "__import__('concurrent.futures').futures.ProcessPoolExecutor(2)",
    "__import__('multiprocessing').Pool(2)",
]
SHARED_MEMORY_CASES = [
    "__import__('multiprocessing.shared_memory').shared_memory.SharedMemory(create=True, size=16)",
]

# What the messages point to works, and multiprocessing's in-process parts: its
# semaphores live in the worker's /dev/shm, the call's /tmp.
THREAD_CASES = {
    "__import__('concurrent.futures').futures.ThreadPoolExecutor(2).submit(pow, 6, 2).result()": ("returned", "36"),
    "(lambda t: (t.start(), t.join()))(__import__('threading').Thread(target=print))": ("returned", "(None, None)"),
    "__import__('multiprocessing').Lock().acquire()": ("returned", "True"),
    "(lambda q: (q.put(7), q.get()))(__import__('multiprocessing').Queue())": ("returned", "(None, 7)"),
    "__import__('multiprocessing.pool').pool.ThreadPool(2).map(abs, [-1, 2])": ("returned", "[1, 2]"),
    "__import__('multiprocessing.dummy').dummy.Pool(2).map(abs, [-3])": ("returned", "[3]"),
}


def test_no_process_can_be_started(sup):
    got = probes(sup, PROCESS_CASES + SHARED_MEMORY_CASES + list(THREAD_CASES))
    expected = {k: eperm(PROCESSES) for k in PROCESS_CASES}
    expected.update({k: eperm(SHARED_MEMORY) for k in SHARED_MEMORY_CASES})
    expected.update(THREAD_CASES)
    check(got, expected)


def test_no_network(sup):
    gai = ("socket.gaierror", socket.EAI_FAIL, "[Errno %d] %s" % (socket.EAI_FAIL, NETWORK))
    refused = eperm(NETWORK)
    urlerror = "urllib.error.URLError"
    cases = {
        "__import__('socket').socket()": refused,
        "__import__('socket').socket(__import__('socket').AF_INET6, __import__('socket').SOCK_DGRAM)": refused,
        "__import__('socket').socket(__import__('socket').AF_UNIX)": refused,
        "__import__('_socket').socket(2, 1, 0)": refused,
        "__import__('socket').create_connection(('192.0.2.1', 80), timeout=1)": refused,
        "__import__('socket').create_connection(('example.com', 80), timeout=1)": gai,
        "__import__('socket').getaddrinfo('example.com', 443)": gai,
        "__import__('socket').gethostbyname('localhost')": gai,
        "__import__('socket').gethostbyname_ex('pypi.org')": gai,
        "__import__('socket').gethostbyaddr('192.0.2.1')": ("socket.herror", 3, "[Errno 3] " + NETWORK),
        "__import__('http.client').client.HTTPSConnection('example.com', timeout=1).request('GET', '/')": gai,
        "__import__('urllib.request').request.urlopen('http://example.com/', timeout=1)": (
            urlerror, None, "<urlopen error %s>" % gai[2], gai),
        "__import__('urllib.request').request.urlopen('https://192.0.2.1/', timeout=1)": (
            urlerror, None, "<urlopen error %s>" % refused[2], refused),
        # What needs no network still works: numeric addresses resolve.
        "__import__('socket').gethostbyname('192.0.2.1')": ("returned", repr("192.0.2.1")),
        "__import__('socket').getaddrinfo('127.0.0.1', 80, type=1)[0][4]": ("returned", repr(("127.0.0.1", 80))),
    }
    check(probes(sup, list(cases)), cases)


def test_no_package_can_be_installed(sup, profile):
    installs = INSTALLS[profile]
    refused = eperm(installs)
    cases = {
        "__import__('pip')": ("builtins.ModuleNotFoundError", None, "No module named 'pip': " + installs),
        # The import system imports pip first.
        "__import__('pip._internal.cli.main')": ("builtins.ModuleNotFoundError", None, "No module named 'pip': " + installs),
        "__import__('ensurepip')": ("builtins.ModuleNotFoundError", None, "No module named 'ensurepip': " + installs),
        "__import__('subprocess').run(['pip', 'install', 'requests'])": refused,
        "__import__('subprocess').check_call([sys.executable, '-m', 'pip', 'install', 'openpyxl'])": refused,
        "__import__('subprocess').run('pip3 install -q requests', shell=True)": refused,
        "os.system('pip install requests')": refused,
        "os.system('conda install -y openpyxl')": refused,
        "os.execv('/usr/bin/pip3', ['pip3', 'install', 'x'])": refused,
    }
    check(probes(sup, list(cases)), cases)


def test_pandas_names_the_sandbox_rule_for_a_missing_optional_package(shared_supervisor):
    from test_datastack import data_policy, require_stack
    require_stack()
    sup = shared_supervisor(data_policy() + "timeoutMs: 120000\n")
    c = sup.connect()
    try:
        r = c.execute("import pandas as pd\n" + PRELUDE + """
df = pd.DataFrame({"a": [1]})
[probe(lambda: pd.read_excel("x.ods", engine="odf")), probe(lambda: pd.read_excel("x.xls", engine="xlrd"))]""")
    finally:
        c.close()
    got = ast.literal_eval(value(r))
    assert got == [
        ("builtins.ImportError", None, "Missing optional dependency '%s'. %s" % (name, INSTALLS["data"]))
        for name in ("odfpy", "xlrd")  # (openpyxl and tabulate are in the data policy)
    ], got


def test_kill_mode_workers_are_told_too(make_supervisor):
    """Under seccompDenyAction: kill the filter would end the worker at the fork or the
    socket: the guards answer first, and the call goes on."""
    s = make_supervisor("seccompDenyAction: kill\n")
    cases = {
        "os.fork()": eperm(PROCESSES),
        "__import__('subprocess').run(['true'])": eperm(PROCESSES),
        "__import__('socket').socket()": eperm(NETWORK),
    }
    check(probes(s, list(cases)), cases)
