# What the worker's root needs for each package of the pythonPackages allow-list
# (docs/policy.md), computed at configure time by cmake/python.cmake with the
# embedded interpreter itself: run as
#
#   CODEINTERP_PYTHON -s -E cmake/python_packages.py BOUND
#
# where BOUND is the ':'-separated list of the runtime binds already made for the
# standard library. For each package it imports the package in a fresh child
# interpreter (matplotlib with the Agg backend, drawing one line plot to PNG, SVG,
# PDF and EPS, so the font manager and every writer's modules load too), then collects
#
#   - the top-level entries (package directories or single modules) of every
#     module the import brought from a site directory (dist-packages);
#   - the shared libraries: the DT_NEEDED closure (ldd) of every extension module
#     under those entries, and every library mapped in the child at the end;
#   - the package's data: matplotlib's mpl-data (its matplotlibrc is the one
#     matplotlib falls back to; Debian's /etc/matplotlibrc differs only in the
#     backend, which the worker sets to Agg; Debian's matplotlib looks only there
#     unless MATPLOTLIBRC names another, so the worker's environment gets
#     MATPLOTLIBRC=<mpl-data>) and the directories of the fonts its font manager
#     knows; pandas' time zone data.
#
# A path whose directory is already bound is left out. A library whose name leads
# through a symlink out of the binds (Debian's alternatives:
# /usr/lib/x86_64-linux-gnu/libblas.so.3 -> /etc/alternatives/... ->
# /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0) is not followed there: its real
# file is bound if it lies outside too, and listed to be preloaded by its real path
# (pyrun.c dlopen()s it before the first import, and the loader then satisfies the
# extension modules' DT_NEEDED by its soname), so the root gets no /etc. One line
# per package:
#
#   NAME<TAB>ok<TAB>SITE-DIRS<TAB>BINDS<TAB>PRELOAD<TAB>ENV     (each ':'-separated;
#                                                             ENV: NAME=VALUE items)
#   NAME<TAB>missing<TAB>REASON
import json
import os
import re
import subprocess
import sys
import tempfile

# The allow-list, in the order the zygote preloads them (a package after those it
# imports; policy/policy.h has the same order).
ALLOW = ("numpy", "pandas", "matplotlib", "scipy", "sklearn", "statsmodels", "sympy", "seaborn", "openpyxl",
         "tabulate")

MPL = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport io\n"

# What each package's import and a sample use load: the worker's root gets what they
# touched. Each recipe exercises the parts agents use (a fit, a test, a plot, a file).
RECIPES = {
    "numpy": "import numpy\nnumpy.ones((4, 4)) @ numpy.ones((4, 4))\nnumpy.linalg.inv(numpy.eye(3))\n",
    "pandas": "import pandas\npandas.DataFrame({'h': [9.0, 7.5]})['h'].mean()\n"
              "pandas.Timestamp('2024-01-01', tz='Europe/Berlin')\n",
    "matplotlib": MPL + "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9])\n"
                        "for fmt in ('png', 'svg', 'pdf', 'eps'):\n    fig.savefig(io.BytesIO(), format=fmt)\n",
    "scipy": "import numpy\nimport scipy.stats, scipy.optimize, scipy.linalg, scipy.interpolate, scipy.integrate\n"
             "import scipy.signal, scipy.sparse, scipy.special, scipy.spatial, scipy.fft, scipy.cluster\n"
             "scipy.stats.ttest_ind([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 6.0])\n"
             "scipy.optimize.minimize(lambda x: (x[0] - 1) ** 2, [0.0])\n"
             "scipy.interpolate.CubicSpline([0, 1, 2], [0, 1, 4])(1.5)\n"
             "scipy.integrate.quad(lambda x: x * x, 0, 1)\nscipy.linalg.solve(numpy.eye(3), numpy.ones(3))\n",
    "sklearn": "import numpy\nfrom sklearn.linear_model import LinearRegression, LogisticRegression\n"
               "from sklearn.cluster import KMeans\nfrom sklearn.ensemble import RandomForestClassifier\n"
               "from sklearn.model_selection import train_test_split, cross_val_score\n"
               "from sklearn.preprocessing import StandardScaler\nfrom sklearn.decomposition import PCA\n"
               "from sklearn import metrics\n"
               "X = numpy.arange(40.0).reshape(20, 2)\ny = X[:, 0] > 20\n"
               "LinearRegression().fit(X, X[:, 0] * 2)\nLogisticRegression().fit(X, y)\n"
               "KMeans(2, n_init=2).fit(X)\nRandomForestClassifier(n_estimators=3).fit(X, y)\n"
               "PCA(1).fit(StandardScaler().fit_transform(X))\nmetrics.accuracy_score(y, y)\n",
    "statsmodels": "import numpy, pandas\nimport statsmodels.api as sm\nimport statsmodels.formula.api as smf\n"
                   "d = pandas.DataFrame({'x': numpy.arange(10.0), 'y': numpy.arange(10.0) * 2 + 1})\n"
                   "smf.ols('y ~ x', d).fit().summary()\nsm.OLS(d['y'], sm.add_constant(d['x'])).fit()\n",
    "sympy": "import sympy\nx = sympy.symbols('x')\nsympy.solve(x ** 2 - 4, x)\n"
             "sympy.integrate(sympy.sin(x), x)\nsympy.latex(sympy.sqrt(x))\nsympy.N(sympy.pi, 30)\n",
    "seaborn": MPL + "import pandas, seaborn\nd = pandas.DataFrame({'a': [1, 2, 2, 3], 'b': [4, 3, 2, 1]})\n"
                     "seaborn.histplot(d['a']).figure.savefig(io.BytesIO(), format='png')\n"
                     "seaborn.scatterplot(data=d, x='a', y='b')\nplt.close('all')\n",
    "openpyxl": "import io, openpyxl, pandas\nb = io.BytesIO()\n"
                "pandas.DataFrame({'a': [1, 2]}).to_excel(b, index=False)\nb.seek(0)\npandas.read_excel(b)\n"
                "openpyxl.Workbook().active.append([1, 2])\n",
    "tabulate": "import pandas, tabulate\ntabulate.tabulate([[1, 2]])\n"
                "pandas.DataFrame({'a': [1]}).to_markdown()\n",
}

CHILD = r"""
import json, os, sys
before = set(sys.modules)
exec(compile(RECIPE, "<recipe>", "exec"), {})
files, data, env = [], [], []
for name in set(sys.modules) - before:
    m = sys.modules.get(name)
    f = getattr(m, "__file__", None)
    if f:
        files.append(f)
    for p in getattr(m, "__path__", None) or []:
        files.append(os.path.join(p, "__init__.py"))
libs = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and parts[5].startswith("/") and ".so" in parts[5]:
            libs.add(parts[5])
if "matplotlib" in sys.modules:
    import matplotlib
    from matplotlib import font_manager
    data.append(matplotlib.get_data_path())
    env.append("MATPLOTLIBRC=" + matplotlib.get_data_path())
    for font in font_manager.fontManager.ttflist + font_manager.fontManager.afmlist:
        data.append(os.path.dirname(font.fname))
if "pandas" in sys.modules:
    import zoneinfo
    data.extend(p for p in zoneinfo.TZPATH if os.path.isdir(p))
print(json.dumps({"files": files, "libs": sorted(libs), "data": data, "env": env, "sys_path": sys.path}))
"""


def normalise(path, bound_dirs):
    """The path as the worker sees it: /lib is a symlink to usr/lib in its root."""
    path = os.path.normpath(path)
    if path.startswith("/lib/") and "/lib" not in bound_dirs:
        path = "/usr" + path
    return path


def covered(path, bound_dirs, bound_files):
    path = normalise(path, bound_dirs)
    return path in bound_files or any(path.startswith(d + "/") or path == d for d in bound_dirs)


def hops(path):
    """The path and every symlink hop after it, as absolute paths."""
    chain = [os.path.normpath(path)]
    while os.path.islink(chain[-1]) and len(chain) < 40:
        target = os.readlink(chain[-1])
        chain.append(os.path.normpath(os.path.join(os.path.dirname(chain[-1]), target)))
    return chain


def add_bind(path, binds, bound_dirs, bound_files):
    path = normalise(path, bound_dirs)
    if os.path.isdir(path):
        bound_dirs.add(path)
    else:
        bound_files.add(path)
    binds.append(path)


def need_library(path, binds, bound_dirs, bound_files, preload):
    """Make the library reachable: nothing to do when its name resolves inside the
    binds; else bind its real file if needed and preload it by that path."""
    if not os.path.exists(path) or all(covered(h, bound_dirs, bound_files) for h in hops(path)):
        return
    real = os.path.realpath(path)
    if not covered(real, bound_dirs, bound_files):
        add_bind(real, binds, bound_dirs, bound_files)
    if real not in preload:
        preload.append(real)


def need(path, binds, bound_dirs, bound_files):
    """Make path reachable in the worker's root: bind the first hop outside the binds."""
    for hop in hops(path):
        if covered(hop, bound_dirs, bound_files):
            continue
        if os.path.exists(hop):
            add_bind(hop, binds, bound_dirs, bound_files)
        return


def ldd(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    return re.findall(r"=> (/\S+)", out)


def probe(name, base):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    with tempfile.TemporaryDirectory(prefix="codeinterp-probe-") as tmp:
        env.update(MPLCONFIGDIR=tmp, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", HOME=tmp)
        child = subprocess.run([sys.executable, "-s", "-E", "-c", "RECIPE = %r\n%s" % (RECIPES[name], CHILD)],
                               capture_output=True, text=True, env=env, cwd=tmp, check=False)
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["exit status %d" % child.returncode])[-1]
        return None, "%s cannot import it (Python %d.%d): %s" % (sys.executable, *sys.version_info[:2], last)
    got = json.loads(child.stdout)
    sites = [p for p in got["sys_path"] if os.path.basename(p) in ("dist-packages", "site-packages")]
    bound_dirs = {p for p in base if os.path.isdir(p)}
    bound_files = {p for p in base if not os.path.isdir(p)}
    binds, used_sites, preload = [], [], []
    for f in sorted(set(got["files"])):
        site = next((s for s in sites if f.startswith(s + "/")), None)
        if site is None:
            continue
        top = os.path.join(site, f[len(site) + 1:].split("/")[0])
        if site not in used_sites:
            used_sites.append(site)
        need(top, binds, bound_dirs, bound_files)
    libs = set(got["libs"])
    for top in list(binds):
        for root, _dirs, names in os.walk(top):
            for n in names:
                if n.endswith(".so") or ".so." in n:
                    libs.update(ldd(os.path.join(root, n)))
    for lib in sorted(libs):
        need_library(lib, binds, bound_dirs, bound_files, preload)
    for d in got["data"]:
        need(d, binds, bound_dirs, bound_files)
    used_sites.sort(key=sites.index)
    for p in binds + used_sites + preload + got["env"]:
        if ":" in p or "\t" in p or "\n" in p or '"' in p or "\\" in p:
            return None, "a path contains ':', a quote, a backslash or a control character: %r" % p
    return (used_sites, binds, preload, got["env"]), None


def main():
    base = [p for p in sys.argv[1].split(":") if p]
    for name in ALLOW:
        result, why = probe(name, base)
        if result is None:
            print("%s\tmissing\t%s" % (name, why.replace("\t", " ").replace(";", ",")))
        else:
            print("%s\tok\t%s" % (name, "\t".join(":".join(r) for r in result)))


if __name__ == "__main__":
    main()
