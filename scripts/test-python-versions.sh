#!/bin/sh
# Build codeinterp against every other CPython >= 3.12 this machine has (the newest
# patch release of each minor version under $PYENV_ROOT/versions, default
# /root/.pyenv/versions), each in its own build directory BUILD-py3.X, and run the
# seccomp probe (tests/unit/seccomp_python_probe.c) and the integration tests marked
# python (whose subject depends on the embedded CPython; test_datastack's: there the
# stack is missing and a policy naming it is refused) against it in both worker start
# modes (in exec mode, those also marked start_mode). CODEINTERP_PYTHONS="/path/python3.X
# ..." names the interpreters instead.
#
# No such interpreter is not a failure, not even with CODEINTERP_MUST_SANDBOX=1: the
# default build (Debian's python3) is what `make test` proves; this proves the others
# where they exist, and says so when there are none.
#
#   scripts/test-python-versions.sh BUILD "CMAKE_FLAGS"
# With CODEINTERP_BUILD_ONLY=1 it only builds (make bench-versions).
set -eu

build=${1:-build}
cmake_flags=${2:-}
tests=tests/integration

find_interpreters() {
        root="${PYENV_ROOT:-/root/.pyenv}/versions"
        [ -d "$root" ] || return 0
        # 3.X.Y only (no 3.13.0t, no -dev), newest patch per minor version, X >= 12.
        ls "$root" 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -V | awk -F. '
                $2 >= 12 { last[$2] = $0 } END { for (m in last) print last[m] }' | sort -V |
                while read -r v; do
                        minor=${v%.*}
                        exe="$root/$v/bin/python$minor"
                        [ -x "$exe" ] && echo "$exe"
                done
}

interpreters=${CODEINTERP_PYTHONS:-$(find_interpreters)}
if [ -z "$interpreters" ]; then
        echo "test-python-versions: no CPython >= 3.12 found (pyenv under ${PYENV_ROOT:-/root/.pyenv}); skipped"
        exit 0
fi

for py in $interpreters; do
        minor=$("$py" -I -S -c 'import sys; print("%d.%d" % sys.version_info[:2])')
        dir="$build-py$minor"
        echo "test-python-versions: Python $minor ($py) in $dir"
        # shellcheck disable=SC2086 # CMAKE_FLAGS is a list of flags
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCODEINTERP_PYTHON="$py" $cmake_flags >/dev/null
        cmake --build "$dir" -j"$(nproc)" --target codeinterpd codeinterp-worker codeinterp seccomp_python_probe
        [ "${CODEINTERP_BUILD_ONLY:-}" = 1 ] && continue
        # This CPython under the worker's seccomp filter, outside any sandbox.
        "$dir/bin/seccomp_python_probe"
        "$dir/bin/seccomp_python_probe" kill
        for mode in zygote exec; do
                echo "test-python-versions: Python $minor, $mode mode"
                # shellcheck disable=SC2086 # a list of test files
                CODEINTERP_BUILD="$(cd "$dir" && pwd)" CODEINTERP_WORKER_START=$mode \
                        /usr/bin/python3 -m pytest -q -n "${TEST_JOBS:-3}" $tests
        done
done
