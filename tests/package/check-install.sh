#!/bin/sh
# make install-check: configure BUILD_DIR the way Debian does (prefix /usr), build only
# what is installed, `DESTDIR=$tmp cmake --install`, and check the tree file by file:
# nothing missing, nothing unexpected, the units naming the installed paths, the
# compiled-in worker path, the library's soname and exports, a program built against
# the installed header and codeinterp.pc, and the Python client rule (installed when
# the package exists, skipped cleanly when it does not).
#
#   tests/package/check-install.sh [BUILD_DIR]     (default: build-install)
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build-install}
fail() { printf 'install-check: FAIL: %s\n' "$*" >&2; exit 1; }
say() { printf 'install-check: %s\n' "$*"; }

tmp=$(mktemp -d /tmp/codeinterp-install-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
        -UCODEINTERP_PYTHON_SOURCE >"$tmp/configure.log" || { cat "$tmp/configure.log" >&2; fail "configure"; }
nice cmake --build "$build" -j"$(nproc)" --target codeinterpd codeinterp codeinterp-worker codeinterp_shared >"$tmp/build.log" ||
        { tail -n 30 "$tmp/build.log" >&2; fail "build"; }

dest="$tmp/root"
DESTDIR="$dest" cmake --install "$build" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "cmake --install"; }
say "DESTDIR=$dest cmake --install $build:"
(cd "$dest" && find . ! -type d | sed 's|^\.||' | LC_ALL=C sort) >"$tmp/got"
sed 's/^/    /' "$tmp/got"

multiarch=$(gcc -print-multiarch)
unitdir=$(sed -n 's/^CODEINTERP_SYSTEMD_UNITDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
userunitdir=$(sed -n 's/^CODEINTERP_SYSTEMD_USERUNITDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
py_source=$(sed -n 's/^CODEINTERP_PYTHON_SOURCE:[A-Z]*=//p' "$build/CMakeCache.txt")
{
        echo /etc/codeinterp/policy.yaml
        echo "$unitdir/codeinterpd.service"
        echo "$unitdir/codeinterpd.socket"
        echo "$userunitdir/codeinterpd.service"
        echo "$userunitdir/codeinterpd.socket"
        echo /usr/bin/codeinterp
        echo /usr/include/codeinterp/libcodeinterp.h
        echo "/usr/lib/$multiarch/libcodeinterp.so"
        echo "/usr/lib/$multiarch/libcodeinterp.so.0"
        echo "/usr/lib/$multiarch/libcodeinterp.so.0.1.0"
        echo "/usr/lib/$multiarch/pkgconfig/codeinterp.pc"
        echo /usr/libexec/codeinterp/codeinterp-worker
        echo /usr/sbin/codeinterpd
        echo /usr/share/doc/codeinterp/README.md
        for f in "$here"/docs/*.md; do echo "/usr/share/doc/codeinterp/$(basename "$f")"; done
        echo /usr/share/man/man1/codeinterp.1
        echo /usr/share/man/man8/codeinterpd.8
        # The Python client, when this tree has one (python/codeinterp).
        if [ -f "$py_source/__init__.py" ]; then
                (cd "$py_source/.." && find codeinterp -type f ! -name '*.pyc' ! -path '*/__pycache__/*') |
                        sed 's|^|/usr/lib/python3/dist-packages/|'
        fi
} | LC_ALL=C sort >"$tmp/want"
if ! cmp -s "$tmp/want" "$tmp/got"; then
        diff -u "$tmp/want" "$tmp/got" | sed 's/^/    /' >&2
        fail "the installed tree differs from the expected one (- missing, + unexpected)"
fi
say "every expected path is there, nothing else"

# The library: a symlink chain to the versioned file, soname .0, only ci_* exported.
[ "$(readlink "$dest/usr/lib/$multiarch/libcodeinterp.so")" = libcodeinterp.so.0 ] || fail "libcodeinterp.so is not a link to .so.0"
[ "$(readlink "$dest/usr/lib/$multiarch/libcodeinterp.so.0")" = libcodeinterp.so.0.1.0 ] || fail "libcodeinterp.so.0 is not a link to .so.0.1.0"
soname=$(readelf -d "$dest/usr/lib/$multiarch/libcodeinterp.so.0.1.0" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = libcodeinterp.so.0 ] || fail "soname is \"$soname\", not libcodeinterp.so.0"
others=$(nm -D --defined-only "$dest/usr/lib/$multiarch/libcodeinterp.so.0.1.0" | awk '$3 !~ /^ci_/ && $3 != "CODEINTERP_0" { print $3 }')
[ -z "$others" ] || fail "the library exports more than ci_*: $others"
say "libcodeinterp.so.0: soname $soname, $(nm -D --defined-only "$dest/usr/lib/$multiarch/libcodeinterp.so.0.1.0" | grep -c ' T ci_') ci_* functions exported, nothing else"

# The public header includes no project header (only msgpack and the C library).
if grep -n '#include "' "$dest/usr/include/codeinterp/libcodeinterp.h"; then
        fail "libcodeinterp.h includes an internal header"
fi

# A program built against the installed header, codeinterp.pc and library, and run.
cat >"$tmp/consumer.c" <<'EOF'
#include <codeinterp/libcodeinterp.h>
#include <stdio.h>
int main(void) {
        CiClient *c = NULL;
        int r = ci_connect("/nonexistent/codeinterp.sock", &c);
        printf("ci_connect: %d\n", r);
        return r < 0 ? 0 : 1;
}
EOF
pcpath="$dest/usr/lib/$multiarch/pkgconfig:/usr/lib/$multiarch/pkgconfig:/usr/share/pkgconfig"
flags=$(PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_LIBDIR="$pcpath" pkg-config --cflags --libs codeinterp) ||
        fail "pkg-config codeinterp"
# shellcheck disable=SC2086
cc -Wall -Werror -o "$tmp/consumer" "$tmp/consumer.c" $flags || fail "compiling against the installed header and library"
LD_LIBRARY_PATH="$dest/usr/lib/$multiarch" "$tmp/consumer" >/dev/null || fail "the consumer program"
[ "$(readelf -d "$tmp/consumer" | grep -c 'libcodeinterp.so.0')" -eq 1 ] || fail "the consumer is not linked to libcodeinterp.so.0"
say "a program builds with \`pkg-config --cflags --libs codeinterp\` ($flags) and runs"

# The units and the supervisor name the installed paths.
grep -qx 'ExecStart=/usr/sbin/codeinterpd --policy /etc/codeinterp/policy.yaml' "$dest$unitdir/codeinterpd.service" ||
        fail "codeinterpd.service: ExecStart does not name /usr/sbin/codeinterpd and /etc/codeinterp/policy.yaml"
grep -qx 'ExecStart=/usr/sbin/codeinterpd' "$dest$userunitdir/codeinterpd.service" ||
        fail "the user codeinterpd.service: ExecStart does not name /usr/sbin/codeinterpd"
grep -qx 'ListenStream=%t/codeinterp/codeinterp.sock' "$dest$userunitdir/codeinterpd.socket" ||
        fail "the user codeinterpd.socket does not listen in the user's runtime directory"
if grep -n '@[A-Z_]*@' "$dest$unitdir/codeinterpd.service" "$dest$unitdir/codeinterpd.socket" \
        "$dest$userunitdir/codeinterpd.service" "$dest$userunitdir/codeinterpd.socket"; then
        fail "a unit still holds an unreplaced @VARIABLE@"
fi
"$dest/usr/sbin/codeinterpd" --help | grep -q '/usr/libexec/codeinterp/codeinterp-worker' ||
        fail "codeinterpd --help does not name the installed worker path"
say "the services (system and user) run /usr/sbin/codeinterpd; its default worker is /usr/libexec/codeinterp/codeinterp-worker"

# The Python client rule, on its own component: with a package it installs it, and
# without one (a source with no python/codeinterp) it installs nothing and does not fail.
if [ -f "$py_source/__init__.py" ]; then
        say "python: $py_source installed (checked above)"
else
        [ ! -e "$dest/usr/lib/python3" ] || fail "no Python client, yet something was installed under /usr/lib/python3"
        DESTDIR="$tmp/py-absent" cmake --install "$build" --component python >/dev/null || fail "the python component without a package"
        [ -z "$(find "$tmp/py-absent" ! -type d 2>/dev/null)" ] || fail "the python component installed files without a package"
        say "python: no $py_source, so nothing installed and the python component is empty"
fi
# Whatever this tree holds: a package elsewhere is installed with its files only.
mkdir -p "$tmp/pysrc/codeinterp/__pycache__"
printf '"""install-check package."""\n' >"$tmp/pysrc/codeinterp/__init__.py"
: >"$tmp/pysrc/codeinterp/__pycache__/__init__.cpython-311.pyc"
cmake -S "$here" -B "$build" -DCODEINTERP_PYTHON_SOURCE="$tmp/pysrc/codeinterp" >/dev/null
DESTDIR="$tmp/py-present" cmake --install "$build" --component python >/dev/null || fail "the python component with a package"
got=$(cd "$tmp/py-present" && find . ! -type d)
cmake -S "$here" -B "$build" -UCODEINTERP_PYTHON_SOURCE >/dev/null
[ "$got" = ./usr/lib/python3/dist-packages/codeinterp/__init__.py ] ||
        fail "the python component installed \"$got\" instead of /usr/lib/python3/dist-packages/codeinterp/__init__.py"
say "python: a package at CODEINTERP_PYTHON_SOURCE goes to /usr/lib/python3/dist-packages/codeinterp (no __pycache__)"
say "PASSED"
