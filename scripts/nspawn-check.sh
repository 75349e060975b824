#!/bin/sh
# make nspawn-check: the Debian packages as apt installs them and the systemd units as
# shipped, unmodified, under a real booted systemd (docs/operations.md, "Proven under a
# booted systemd"). A fresh copy of the cached minimal Debian 12 root
# (scripts/fresh-root.sh) gets systemd and the test tools (not the packages), boots with
# `systemd-nspawn -b`, and a oneshot unit runs tests/package/nspawn-e2e.sh there: apt
# installs the packages of DEB_DIR (their Depends pull in the rest), and
# tests/package/nspawn_e2e.py drives the units through socket activation, calls with a
# source and an artifact, a timeout, the core integration tests against the installed
# socket, reloads (valid and invalid), the watchdog, a stop with a call running, both
# start modes, an upgrade to the packages of UPGRADE_DIR while a client loop runs, and a
# purge. It writes /e2e/result (PASSED or FAILED: why) and powers off; its log is
# printed here.
#
#   scripts/nspawn-check.sh DEB_DIR UPGRADE_DIR
#
# Root; installs systemd-container (systemd-nspawn) when missing. A host that cannot
# boot systemd in a container fails the check (never a skip).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'nspawn-check: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }
[ $# -eq 2 ] || die "usage: scripts/nspawn-check.sh DEB_DIR UPGRADE_DIR"
debs=$(cd "$1" && pwd)
upgrade=$(cd "$2" && pwd)
[ "$(id -u)" -eq 0 ] || die "needs root (systemd-nspawn)"
# shellcheck source=scripts/fresh-root.sh
. "$here/scripts/fresh-root.sh"
start=$(now)

if ! command -v systemd-nspawn >/dev/null; then
        say "installing systemd-container (systemd-nspawn)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd-container >/dev/null
fi
mkdir -p "$cache"
run=$(mktemp -d "$cache/nspawn.XXXXXX")
cleanup() {
        status=$?
        trap - EXIT INT TERM
        fresh_root_remove "$run" || status=1
        rm -f "$run.boot.log"
        exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

[ -f "$tarball" ] || { say "building the cached minimal root"; fresh_root_build_cache "$run"; }
root="$run/root"
fresh_root_unpack "$root"
mkdir -p "$root/e2e/debs" "$root/e2e/upgrade" "$root/e2e/tests"
for d in "$debs" "$upgrade"; do
        n=$(ls "$d"/codeinterp_*.deb 2>/dev/null | wc -l)
        [ "$n" -eq 1 ] || die "$d must hold exactly one codeinterp_*.deb (make deb, make deb-upgrade)"
done
for f in "$debs"/*.deb; do case "$f" in *-dbgsym_*) ;; *) cp "$f" "$root/e2e/debs/" ;; esac; done
for f in "$upgrade"/*.deb; do case "$f" in *-dbgsym_*) ;; *) cp "$f" "$root/e2e/upgrade/" ;; esac; done
# The integration tests and the helpers every suite takes (tests/lib, tests/conftest.py).
cp -r "$here/tests/integration" "$here/tests/lib" "$here/tests/conftest.py" "$here/tests/pytest.ini" "$root/e2e/tests/"
find "$root/e2e/tests" -name __pycache__ -prune -exec rm -rf {} +
install -m 0755 "$here/tests/package/nspawn-e2e.sh" "$root/e2e/run.sh"
install -m 0644 "$here/tests/package/nspawn_e2e.py" "$root/e2e/nspawn_e2e.py"

say "installing systemd and the test tools into the root (systemd-nspawn --pipe, no boot; not the packages)"
systemd-nspawn -q -D "$root" --register=no --keep-unit --pipe /bin/sh -c 'set -e
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus python3-pytest man-db \
                pkg-config >/dev/null' ||
        die "installing systemd into the root failed"
cat >"$root/etc/systemd/system/codeinterp-e2e.service" <<'UNIT'
[Unit]
Description=codeinterp end-to-end check
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/e2e/run.sh
StandardOutput=journal+console
StandardError=journal+console
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -s /etc/systemd/system/codeinterp-e2e.service "$root/etc/systemd/system/multi-user.target.wants/"
say "prepared in $(($(now) - start)) s"

say "booting: systemd-nspawn -b -D $root"
boot_start=$(now)
rc=0
timeout "${CODEINTERP_NSPAWN_TIMEOUT:-900}" systemd-nspawn -q -b -D "$root" --register=no --keep-unit \
        --console=pipe >"$run.boot.log" 2>&1 || rc=$?
cat "$root/e2e/log" >&2 2>/dev/null || say "no log from the check"
result=$(cat "$root/e2e/result" 2>/dev/null || echo "FAILED: no result (systemd-nspawn exit $rc)")
if [ "$result" != PASSED ]; then
        say "the container's journal (codeinterpd, the check):"
        journalctl -D "$root/var/log/journal" --no-pager -o short-monotonic -u codeinterp-e2e.service \
                -u codeinterpd.service -u codeinterpd.socket 2>/dev/null | tail -n 150 >&2 || true
        tail -n 40 "$run.boot.log" >&2
        die "$result"
fi
say "PASSED under a booted systemd in $(($(now) - boot_start)) s (all: $(($(now) - start)) s)"
