#!/bin/sh
# make test-package: the packages of `make deb` (DEB_DIR, default build-deb/) installed
# on a fresh minimal Debian 12 root, run, and purged (tests/package/test-installed.sh
# says what is checked). The root, its cache under /var/tmp and its private mount and
# pid namespaces are scripts/fresh-system-check.sh's; this script only stages what goes
# in: the .deb files (no -dbgsym) and the tests.
#
#   scripts/test-package.sh [DEB_DIR]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
debs=${1:-$here/build-deb}
[ -n "$(ls "$debs"/codeinterp_*.deb 2>/dev/null)" ] || { echo "test-package: no packages in $debs (make deb)" >&2; exit 1; }
stage=$(mktemp -d /tmp/codeinterp-test-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT INT TERM
mkdir -p "$stage/debs" "$stage/tests"
for f in "$debs"/*.deb; do
        case "$f" in *-dbgsym_*) ;; *) cp "$f" "$stage/debs/" ;; esac
done
# The integration tests and the helpers every suite takes (tests/lib, tests/conftest.py).
cp -r "$here/tests/integration" "$here/tests/lib" "$here/tests/conftest.py" "$here/tests/pytest.ini" "$stage/tests/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
CODEINTERP_FRESH_INSIDE="$here/tests/package/test-installed.sh" "$here/scripts/fresh-system-check.sh" "$stage"
