"""The read-only scientific stack (policy key pythonPackages, docs/policy.md "The
scientific stack"): under packaging/policy-data.yaml every package of the allow-list
is importable and does the work agents ask of it (a t-test, a regression, a formula
fit, an equation solved, a seaborn PNG, an Excel round trip, a Markdown table); numpy,
pandas and matplotlib are preloaded in zygote mode, the others never are, and exec mode
imports on demand; each call starts pristine, thread pools have one thread, package
directories are read-only, and pip/ensurepip stay absent; under the reviewed profile
`import numpy` fails.

Markers: how the stack reaches a worker depends on the start mode (preloaded by the
zygote, imported by an exec-mode worker) and on the CPython (pyenv's builds lack it and
refuse a policy naming it)."""
import json
import os
import subprocess
import threading
import time

import pytest

from testlib import (DAEMON, MUST_SANDBOX, PYTHON, WAIT_LIMIT, WORKER_START, Conn, execute_once, proc,
                     running_supervisor, value)
from testlib.waits import start_held, wait_for

pytestmark = [pytest.mark.start_mode, pytest.mark.python]

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA_POLICY_PATH = os.path.join(ROOT, "packaging", "policy-data.yaml")
PACKAGES = ("numpy", "pandas", "matplotlib", "scipy", "sklearn", "statsmodels", "sympy", "seaborn", "openpyxl",
            "tabulate")  # the allow-list, in its order
PRELOADED = ("numpy", "pandas", "matplotlib")  # by the zygote (worker/runner.py)


def data_policy():
    with open(DATA_POLICY_PATH) as f:
        return f.read()


def stack_available():
    return all(PYTHON.get("packages", {}).get(p) for p in PACKAGES)


# Debian's /usr/bin/python3 has the stack whenever scripts/install-deps.sh ran (make
# test runs it): there, with CODEINTERP_MUST_SANDBOX=1, a missing stack fails the tests
# instead of skipping them. Another interpreter (pyenv's, make test-python-versions)
# cannot have Debian's packages: its tests skip and test_missing_package_refused runs.
MUST_HAVE_STACK = MUST_SANDBOX and PYTHON.get("interpreter") == "/usr/bin/python3"
NO_STACK = "this build's Python lacks a package of the allow-list (BUILD/python.json)"


def require_stack():
    if not stack_available():
        if MUST_HAVE_STACK:
            pytest.fail(NO_STACK + ", but CODEINTERP_MUST_SANDBOX=1 with /usr/bin/python3: run make deps "
                        "and reconfigure")
        pytest.skip(NO_STACK)


needs_stack = pytest.mark.skipif(not stack_available() and not MUST_HAVE_STACK, reason=NO_STACK)


@pytest.fixture
def dsup(shared_supervisor):
    """The data policy (two pre-started workers: consecutive calls get distinct workers of
    one zygote)."""
    require_stack()
    return shared_supervisor(data_policy() + "timeoutMs: 120000\n")


def run(sup, code):
    return execute_once(sup.socket, code, max(WAIT_LIMIT, 120))


@needs_stack
def test_pandas_northstar(dsup):
    r = run(dsup, "import pandas as pd\npd.DataFrame({'h': [9.0, 7.5]})['h'].mean()\n")
    assert value(r) == "8.25"
    assert r["stderr"]["text"] == ""


@needs_stack
def test_matplotlib_png(dsup):
    r = run(dsup, """\
import matplotlib
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
fig.savefig('/tmp/plot.png')
data = open('/tmp/plot.png', 'rb').read()
(matplotlib.get_backend(), data[:8], len(data) > 1000)
""")
    assert value(r) == "('agg', b'\\x89PNG\\r\\n\\x1a\\n', True)"
    assert r["stderr"]["text"] == "", r["stderr"]


# What agents ask each added package for, and the answer it must give.
PACKAGE_USES = {
    "scipy": ("import scipy.stats, scipy.optimize\n"
              "t = scipy.stats.ttest_ind([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 6.0])\n"
              "m = scipy.optimize.minimize_scalar(lambda x: (x - 3) ** 2)\n"
              "(round(float(t.pvalue), 4), round(float(m.x), 4))\n", "(0.2872, 3.0)"),
    "sklearn": ("import numpy as np\nfrom sklearn.linear_model import LinearRegression\n"
                "from sklearn.cluster import KMeans\n"
                "X = np.arange(10.0).reshape(-1, 1)\nm = LinearRegression().fit(X, 3 * X[:, 0] + 1)\n"
                "k = KMeans(2, n_init=3, random_state=0).fit(np.array([[0.0], [0.1], [9.0], [9.1]]))\n"
                "(round(float(m.coef_[0]), 6), round(float(m.intercept_), 6), len(set(k.labels_)))\n",
                "(3.0, 1.0, 2)"),
    "statsmodels": ("import numpy as np, pandas as pd, statsmodels.formula.api as smf\n"
                    "d = pd.DataFrame({'x': np.arange(10.0), 'y': 2 * np.arange(10.0) + 1})\n"
                    "r = smf.ols('y ~ x', d).fit()\n"
                    "(round(float(r.params['x']), 6), round(float(r.params['Intercept']), 6), "
                    "'OLS Regression Results' in str(r.summary()))\n", "(2.0, 1.0, True)"),
    "sympy": ("import sympy\nx = sympy.symbols('x')\n"
              "(str(sympy.solve(x ** 2 - 4, x)), str(sympy.integrate(sympy.sin(x), x)), str(sympy.N(sympy.pi, 12)))\n",
              "('[-2, 2]', '-cos(x)', '3.14159265359')"),
    "seaborn": ("import io, pandas as pd, seaborn as sns\n"
                "d = pd.DataFrame({'a': [1, 2, 2, 3], 'b': [4, 3, 2, 1]})\n"
                "ax = sns.scatterplot(data=d, x='a', y='b')\nsns.histplot(d['a'], ax=ax)\n"
                "ax.figure.savefig('/outputs/seaborn.png')\nopen('/outputs/seaborn.png', 'rb').read(4)\n",
                "b'\\x89PNG'"),
    "openpyxl": ("import pandas as pd\n"
                 "pd.DataFrame({'city': ['Oslo', 'Lima'], 'n': [3, 5]}).to_excel('/tmp/t.xlsx', index=False)\n"
                 "pd.read_excel('/tmp/t.xlsx').to_dict('list')\n", "{'city': ['Oslo', 'Lima'], 'n': [3, 5]}"),
    "tabulate": ("import pandas as pd\npd.DataFrame({'a': [1, 2]}).to_markdown(index=False)\n",
                 "'|   a |\\n|----:|\\n|   1 |\\n|   2 |'"),
}


@needs_stack
@pytest.mark.parametrize("package", sorted(PACKAGE_USES))
def test_each_added_package_does_its_work(dsup, package):
    code, want = PACKAGE_USES[package]
    r = run(dsup, code)
    assert r["outcome"] == "ok", (r["outcome"], r.get("exception"), r["stderr"]["text"][-2000:])
    assert value(r) == want
    assert "pip" not in r["stderr"]["text"], r["stderr"]["text"]


def test_packages_of_the_allow_list_are_the_builds():
    """Every package of the allow-list has its record in BUILD/python.json (the build
    probed each one), and the test's list is the allow-list."""
    assert tuple(PYTHON.get("packages", {})) == PACKAGES


@needs_stack
def test_preloaded_in_zygote_only(dsup):
    """numpy, pandas and matplotlib are in every zygote-mode worker before its code runs;
    the other packages never are (each would cost every fork, docs/policy.md "What is
    preloaded"): not even a submodule, nor what only they import."""
    r = run(dsup, "import sys\nsorted(n for n in sys.modules if n.split('.')[0] in %r or n == 'matplotlib.pyplot')\n"
            % (PACKAGES + ("mpmath", "patsy", "joblib", "setuptools", "openpyxl"),))
    got = set(eval(value(r)))
    if WORKER_START == "zygote":
        assert {"matplotlib", "matplotlib.pyplot", "numpy", "pandas"} <= got
        assert {n.split(".")[0] for n in got} == set(PRELOADED), sorted(got)
    else:
        assert got == set()


@needs_stack
def test_zygote_leaves_no_matplotlib_directory(dsup):
    """The zygote builds matplotlib's font list in a private temporary directory of the
    host's /tmp and removes it after the import. (Other tests' zygotes may be importing
    at this moment: each directory seen must go.)"""
    import glob
    run(dsup, "1")  # the zygote is ready
    wait_for(lambda: glob.glob("/tmp/codeinterp-mpl-*") == [], lambda: "/tmp/codeinterp-mpl-* to be removed: %r" %
             glob.glob("/tmp/codeinterp-mpl-*"))


@needs_stack
def test_each_call_starts_pristine(dsup):
    set_state = ("import numpy as np, pandas as pd, matplotlib\n"
                 "pd.set_option('display.max_rows', 3)\n"
                 "np.set_printoptions(precision=2)\n"
                 "matplotlib.rcParams['lines.linewidth'] = 7.0\n"
                 "pd.DataFrame.mean = lambda self, *a, **k: 'patched'\n"
                 "(pd.get_option('display.max_rows'), np.get_printoptions()['precision'], "
                 "matplotlib.rcParams['lines.linewidth'], pd.DataFrame({'a': [1.0]}).mean())\n")
    assert value(run(dsup, set_state)) == "(3, 2, 7.0, 'patched')"
    check = ("import numpy as np, pandas as pd, matplotlib\n"
             "(pd.get_option('display.max_rows'), np.get_printoptions()['precision'], "
             "matplotlib.rcParams['lines.linewidth'], float(pd.DataFrame({'a': [1.0]}).mean()['a']))\n")
    assert value(run(dsup, check)) == "(60, 8, 1.5, 1.0)"


@needs_stack
def test_memory_bytes_counts_what_the_code_adds():
    """memoryBytes bounds what the call adds to the address space the worker had mapped
    when its limits were set. The preloaded stack alone maps about 200-250 MiB
    (OpenBLAS's buffers included): were it counted, 256 MiB would leave the code next to
    nothing in zygote mode. Past memoryBytes the call still ends at the memory limit."""
    require_stack()
    with running_supervisor(data_policy() + "memoryBytes: 268435456\ntimeoutMs: 120000\n") as s:
        r = run(s, "x = bytearray(b'\\1') * (160 << 20)\nlen(x) >> 20\n")
        assert value(r) == "160"
        if WORKER_START == "zygote":
            # the preloaded packages cost the call nothing
            r = run(s, "import numpy as np\nint(np.ones(160 << 17).sum()) >> 17\n")
            assert value(r) == "160"
        r = run(s, "x = bytearray(300 << 20)\n")
        assert r["outcome"] == "resource_limit" and r["limit"] == "memory", (r["outcome"], r.get("exception"))


@needs_stack
def test_numpy_random_state_differs_per_worker(dsup):
    code = "import numpy as np\nnp.random.randint(0, 2**62, size=4).tolist()\n"
    draws = {value(run(dsup, code)) for _ in range(3)}
    assert len(draws) == 3, draws


@needs_stack
def test_single_threaded_after_matmul(dsup):
    """The worker has no /proc: its thread count is read from the host, all along and
    once more while the code holds after a matmul and an inverse (BLAS/LAPACK), a pandas
    rolling mean and an OpenMP quantisation (which starts a thread per core when
    OMP_NUM_THREADS is unset; an unpinned OpenMP pool would still be alive there)."""
    call = start_held(dsup, Conn(dsup.socket, max(WAIT_LIMIT, 120)), before=(
        "import os, numpy as np, pandas as pd\n"
        "a = np.random.rand(400, 400)\n"
        "(a @ a).sum()\nnp.linalg.inv(a + 400 * np.eye(400)).sum()\n"
        "pd.DataFrame(a).rolling(5).mean().sum().sum()\n"
        # libimagequant (PIL, brought by matplotlib) is OpenMP: 2 threads here unpinned
        "from PIL import Image\n"
        "Image.new('RGB', (256, 256)).quantize(colors=16, method=Image.Quantize.LIBIMAGEQUANT)\n"
        "print('computed', flush=True)"),
        after="(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])")
    try:
        pid = call.wait_running()
        threads = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                if proc.alive(pid):
                    threads.append(proc.threads(pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            call.wait_holding()
        finally:
            done.set()
            sampler.join()
        held = proc.threads(pid)
        call.release()
        r = call.result()
    finally:
        call.conn.close()
    assert held == 1 and set(threads) <= {1}, (held, threads)
    assert value(r) == "('1', '1', '1')"
    assert r["stdout"]["text"] == "computed\n"


@needs_stack
def test_package_directories_are_read_only(dsup):
    r = run(dsup, """\
import errno, os, numpy, matplotlib
out = []
for d in (os.path.dirname(numpy.__file__), matplotlib.get_data_path()):
    try:
        open(os.path.join(d, 'evil.py'), 'w')
        out.append('written')
    except OSError as e:
        out.append(errno.errorcode[e.errno])
out
""")
    assert value(r) == "['EROFS', 'EROFS']"


@needs_stack
@pytest.mark.parametrize("module", ["pip", "ensurepip", "venv"])
def test_installers_absent_under_data_policy(dsup, module):
    r = run(dsup, "import %s\n" % module)
    assert r["outcome"] == "python_exception"
    assert r["exception"]["type"] == "ModuleNotFoundError"


@needs_stack
def test_only_the_packages_are_bound(dsup):
    # dist-packages holds only what the stack needs: nothing else installed there is visible.
    r = run(dsup, "import os\nsorted(os.listdir('/usr/lib/python3/dist-packages'))\n")
    want = set()
    for p in PACKAGES:
        for b in PYTHON["packages"][p]["binds"]:
            if b.startswith("/usr/lib/python3/dist-packages/"):
                want.add(b.rsplit("/", 1)[1])
    assert value(r) == repr(sorted(want))
    # (scikit-learn's joblib imports distutils, which Debian serves through setuptools'
    # shim: setuptools is bound, read-only, and can reach no index.)
    assert "pip" not in want and "ensurepip" not in want
    # Debian's alternatives (libblas.so.3 -> /etc/alternatives/...) are preloaded by their
    # real path, not bound: the root's /etc holds only the worker's own files and the
    # MIME table (the adversarial suite checks it too).
    r = run(dsup, "import os, numpy\nsorted(os.listdir('/etc'))\n")
    assert set(eval(value(r))) <= {"passwd", "group", "nsswitch.conf", "mime.types"}, value(r)


def test_reviewed_profile_has_no_numpy(shared_supervisor):
    rsup = shared_supervisor()
    r = run(rsup, "import numpy\n")
    assert r["outcome"] == "python_exception"
    assert r["exception"]["type"] == "ModuleNotFoundError"
    r = run(rsup, "import os\nos.path.exists('/usr/lib/python3/dist-packages')\n")
    assert value(r) == "False"


def test_missing_package_refused(tmp_path):
    """A build whose interpreter lacks a package refuses a policy that names it, at start
    and in --check-config; simulated here by naming one this build lacks, if any, else
    checked against the build's own record (BUILD/python.json) only."""
    missing = [p for p in PACKAGES if not PYTHON.get("packages", {}).get(p)]
    if not missing:
        pytest.skip("every package is available to this build (the refusal is tested by "
                    "make test-python-versions against pyenv's 3.12/3.13)")
    policy = tmp_path / "p.yaml"
    policy.write_text("pythonPackages: [%s]\n" % missing[0])
    r = subprocess.run([DAEMON, "--check-config", "--policy", str(policy)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "refused: pythonPackages: %s is not available" % missing[0] in r.stdout
    r = subprocess.run([DAEMON, "--policy", str(policy), "--socket", str(tmp_path / "s")],
                       capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert r.returncode == 2
    assert "pythonPackages: %s is not available to this build's Python" % missing[0] in r.stderr


def test_zygote_refuses_a_mask_outside_the_allow_list():
    """The zygote takes the mask as its fifth argument and refuses bits the allow-list
    does not have (the supervisor never sends one: this is the zygote's own check)."""
    worker = os.path.join(os.path.dirname(DAEMON), "codeinterp-worker")
    r = subprocess.run([worker, "--zygote", "65534", "65534", "2", str(1 << len(PACKAGES)), "16777216"],
                       capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert r.returncode == 2
    assert "bad arguments" in r.stderr


@needs_stack
def test_check_config_lists_binds(tmp_path):
    require_stack()
    r = subprocess.run([DAEMON, "--check-config", "--policy", DATA_POLICY_PATH], capture_output=True, text=True)
    assert "python packages: %s\n" % ", ".join(PACKAGES) in r.stdout
    assert "/usr/lib/python3/dist-packages/pandas: present" in r.stdout
    r = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True)
    assert "python packages: none (import numpy fails in a worker)" in r.stdout


@needs_stack
def test_stack_within_the_seccomp_allow_list():
    """The stack's work under seccompDenyAction: kill: a syscall outside the allow-list
    would end the worker (SIGSYS) instead of failing quietly with EPERM."""
    require_stack()
    with running_supervisor(data_policy() + "seccompDenyAction: kill\ntimeoutMs: 120000\n") as s:
        r = run(s, "import numpy as np, pandas as pd, matplotlib.pyplot as plt\n"
                   "from PIL import Image\n"
                   "a = np.random.rand(200, 200)\nnp.linalg.inv(a + 200 * np.eye(200))\n"
                   "df = pd.DataFrame({'t': pd.date_range('2024-01-01', periods=48, freq='H', tz='Europe/Berlin'),"
                   " 'h': np.arange(48.0)})\n"
                   "df.to_csv('/tmp/x.csv')\npd.read_csv('/tmp/x.csv')\n"
                   "fig, ax = plt.subplots()\nax.plot(df['h'])\nax.set_title('x')\nfig.savefig('/tmp/p.png')\n"
                   "fig.savefig('/tmp/p.svg')\nfig.savefig('/tmp/p.pdf')\n"
                   "Image.open('/tmp/p.png').quantize(colors=8, method=Image.Quantize.LIBIMAGEQUANT).size\n")
        assert value(r) == "(640, 480)"
        for package, (code, want) in sorted(PACKAGE_USES.items()):
            r = run(s, code)
            assert (package, value(r)) == (package, want), (r["outcome"], r.get("exception"))


def describe_guidance(sup):
    out = sup.cli("describe")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["tool"]["guidance"]


@needs_stack
def test_describe_names_the_packages(dsup, shared_supervisor):
    """The tool's guidance tells the model what it can import: the packages under the
    data policy, the standard library alone under the reviewed profile."""
    g = describe_guidance(dsup)
    assert ("The Python standard library is available, and these packages (read-only): %s (matplotlib "
            "with the non-interactive Agg backend: save figures to files)." % ", ".join(PACKAGES)) in g
    g = describe_guidance(shared_supervisor())
    assert "The Python standard library is available.\n" in g and "numpy" not in g
