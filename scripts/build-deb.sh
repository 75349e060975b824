#!/bin/sh
# make deb: the Debian packages (debian/), built with dpkg-buildpackage from a copy of
# this work tree (without .git and build*), into OUT (default build-deb/), then checked
# with lintian. Installs debhelper, lintian and the build dependencies if missing.
#
#   scripts/build-deb.sh [OUT]
#
# python3-codeinterp is built only when python/codeinterp exists; otherwise the build
# uses the nopython profile (debian/control). DEB_BUILD_OPTIONS defaults to nocheck:
# `make test` runs the tests, the package build only compiles what it installs; set
# DEB_BUILD_OPTIONS= to run ctest in the build too. Lintian errors fail; its warnings
# are printed (the kept ones are listed in docs/operations.md).
# CODEINTERP_DEB_VERSION=V builds version V instead of debian/changelog's (a changelog
# entry is added in the staging copy only): scripts/nspawn-check.sh upgrades to such a
# build.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build-deb}
say() { printf 'build-deb: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }
start=$(now)

# The packaging tools: a separate step from scripts/install-deps.sh (make test does not
# need them).
need=""
for p in debhelper lintian dpkg-dev fakeroot dh-python; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
        [ "$(id -u)" -eq 0 ] || die "install these packages first:$need"
        say "installing:$need"
        apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

version=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
upstream=${version%-*}
profiles=""
[ -f "$here/python/codeinterp/__init__.py" ] || profiles=nopython
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS-nocheck}"
export DEB_BUILD_PROFILES="$profiles"

# A staging copy: dpkg-buildpackage writes its results next to the source directory.
rm -rf "$out"
mkdir -p "$out"
src="$out/codeinterp-$upstream"
mkdir "$src"
tar -C "$here" --exclude=./.git --exclude='./build*' --exclude='__pycache__' --exclude=node_modules -cf - . | tar -C "$src" -xf -

if [ -n "${CODEINTERP_DEB_VERSION:-}" ]; then
        { printf 'codeinterp (%s) bookworm; urgency=medium\n\n  * A build for the upgrade check (scripts/nspawn-check.sh).\n\n -- %s  %s\n\n' \
                "$CODEINTERP_DEB_VERSION" "$(dpkg-parsechangelog -l "$here/debian/changelog" -S Maintainer)" \
                "$(date -R)"; cat "$here/debian/changelog"; } >"$src/debian/changelog"
        version=$CODEINTERP_DEB_VERSION
        say "version $version (CODEINTERP_DEB_VERSION)"
fi

# The build dependencies (the profile and options above decide which).
unmet=$(cd "$src" && dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p' | sed 's/([^)]*)//g; s/<[^>]*>//g')
if [ -n "$unmet" ]; then
        [ "$(id -u)" -eq 0 ] || die "install the build dependencies first: $unmet"
        say "installing build dependencies: $unmet"
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $unmet >/dev/null
fi

say "dpkg-buildpackage -b (DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS, profiles: ${profiles:-none}) in $src"
if ! (cd "$src" && nice dpkg-buildpackage -b -us -uc -j"$(nproc)" ${profiles:+-P$profiles}) >"$out/build.log" 2>&1; then
        tail -n 40 "$out/build.log" >&2
        die "dpkg-buildpackage failed (log: $out/build.log)"
fi
rm -rf "$src"
say "built in $(($(now) - start)) s:"
ls -1 "$out"/*.deb >&2

changes=$(ls "$out"/codeinterp_*.changes)
lintian --display-info --pedantic --tag-display-limit 0 "$changes" >"$out/lintian.log" 2>&1 || true
sed 's/^/    /' "$out/lintian.log" >&2
if grep -q '^E: ' "$out/lintian.log"; then
        die "lintian reports errors (log: $out/lintian.log)"
fi
say "lintian: $(grep -c '^E: ' "$out/lintian.log") errors, $(grep -c '^W: ' "$out/lintian.log") warnings, $(grep -c '^I: ' "$out/lintian.log") info, $(grep -c '^P: ' "$out/lintian.log") pedantic"
