#!/bin/sh
# Install the Debian packages codeinterp builds and tests with, if any is missing.
# The one list of them: add a tool here (one per line, with what needs it) and
# `make deps`, `make test` and scripts/fresh-system-check.sh pick it up.
# A minimal Debian 12 (debootstrap --variant=minbase) plus `make` is enough to start
# from; scripts/fresh-system-check.sh proves it.
set -eu
PKGS="
make
build-essential
cmake
pkg-config
libseccomp-dev
libcap-dev
libpython3.11-dev
libpython3-dev
python3
libpython3.11-testsuite
libmsgpack-dev
libsystemd-dev
libyaml-dev
libjson-c-dev
libmicrohttpd-dev
nginx
openssl
libcmocka-dev
python3-pytest
python3-pytest-xdist
python3-msgpack
python3-pyflakes
mypy
python3-pytest-asyncio
python3-yaml
python3-numpy
python3-pandas
python3-matplotlib
python3-scipy
python3-sklearn
python3-statsmodels
python3-sympy
python3-seaborn
python3-openpyxl
python3-tabulate
clang-format
clang
libclang-rt-14-dev
cppcheck
util-linux
coreutils
prometheus
prometheus-node-exporter
python3-prometheus-client
stress-ng
bubblewrap
"
# python3-pytest-xdist: the suites run their tests in parallel (pytest -n, make test).
# libpython3.11-testsuite: CPython's regression tests (Debian's test package), which
# make test-compat runs in the sandbox and on the host.
# stress-ng: make test-flake keeps both cores busy while the integration suite runs.
# bubblewrap: make bench runs bwrap + python as a peer (tests/bench/bench.py; under
# CODEINTERP_MUST_SANDBOX=1 a missing peer fails the run).
# build-essential: gcc, make, libc headers.  libpython3-dev: python3-embed.pc, which
# CMakeLists.txt asks pkg-config for (libpython3.11-dev alone has only python-3.11-embed.pc).
# libjson-c-dev: codeinterp tool and mcp.  libmicrohttpd-dev: codeinterp mcp --http.
# nginx, openssl: tests/tool/test_mcp_http.py puts nginx with a self-signed certificate
# in front of mcp --http, as docs/deployment.md shows (a user-level instance on a free port).  python3-pyflakes: make lint-python.
# clang-format: make check-format.  clang, libclang-rt-14-dev: the libFuzzer targets
# (make fuzz-smoke).  cppcheck: make cppcheck.  util-linux: unshare
# (tests/lib/testlib), prlimit (tests/integration/test_faults.py) and flock.
# coreutils: timeout.  python3-numpy, -pandas, -matplotlib, -scipy, -sklearn,
# -statsmodels, -sympy, -seaborn, -openpyxl, -tabulate: the pythonPackages allow-list, bound into workers under packaging/policy-data.yaml
# (configure computes their binds, so install them before the first build; the data
# policy's tests and make bench use them).  prometheus (promtool), prometheus-node-exporter
# and python3-prometheus-client: tests/integration/test_metrics.py checks `codeinterp status
# --prometheus` with promtool check metrics and through node_exporter's textfile collector,
# and reads both formats with prometheus_client's parsers (under systemd the two services
# are enabled by their packages; the tests start node_exporter themselves, on 127.0.0.1).
# util-linux also has setpriv (tests/integration/test_refused_peer.py runs clients as nobody).
# mypy: make typecheck-python (the Python client's type hints, --strict).
# python3-pytest-asyncio: codeinterp.testing's async fixture and its test (tests/python_client).
# git is not needed: make check-format lists the C files with find when there is no git checkout.
missing=""
for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# node and npm for tests/sdk-types (any install will do: Debian's, or one already on PATH).
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: not root; install these packages first:$missing" >&2
        exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
