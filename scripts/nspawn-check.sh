#!/bin/sh
# Once-only end-to-end check under a real systemd (docs/operations.md, "Under a real
# systemd"): a fresh copy of fresh-system-check's cached bookworm minbase root gets
# systemd and the packages of `make deb`, boots with `systemd-nspawn -b`, and a oneshot
# unit runs tests/package/nspawn-e2e.sh there (socket activation, Northstar, a drained
# `systemctl stop`, the journal), which writes /e2e.result and powers off.
# Not part of make test or make test-package: it needs systemd-nspawn (systemd-container)
# and a host that lets it boot a container.
#
#   scripts/nspawn-check.sh [DEB_DIR]      (default build-deb/)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
debs=${1:-$here/build-deb}
cache=${CODEINTERP_FRESH_CACHE:-/var/tmp/codeinterp-fresh-root}
tarball="$cache/bookworm-minbase-$(dpkg --print-architecture).tar"
say() { printf 'nspawn-check: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root"
command -v systemd-nspawn >/dev/null || die "needs systemd-nspawn: apt-get install systemd-container"
[ -f "$tarball" ] || die "no cached root $tarball: run make fresh-system-check or make test-package first"
run=$(mktemp -d "$cache/nspawn.XXXXXX")
cleanup() {
        if awk -v r="$run" 'index($5, r) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
                say "something is still mounted under $run: not deleting it"
        elif [ "${CODEINTERP_FRESH_KEEP:-}" = 1 ]; then
                say "kept $run/root"
        else
                rm -rf --one-file-system "$run"
        fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
root="$run/root"
mkdir "$root"
tar --numeric-owner --xattrs -C "$root" -xpf "$tarball"
rm -f "$root/etc/resolv.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
mkdir "$root/debs"
for f in "$debs"/*.deb; do case "$f" in *-dbgsym_*) ;; *) cp "$f" "$root/debs/" ;; esac; done
install -m 0755 "$here/tests/package/nspawn-e2e.sh" "$root/e2e.sh"

say "installing systemd and the packages (systemd-nspawn --pipe, no boot)"
systemd-nspawn -q -D "$root" --register=no --keep-unit --pipe /bin/sh -c 'set -e; export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus ./debs/*.deb >/dev/null' ||
        die "installing into the root failed"
cat >"$root/etc/systemd/system/codeinterp-e2e.service" <<'UNIT'
[Unit]
Description=codeinterp end-to-end check
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/e2e.sh
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -s /etc/systemd/system/codeinterp-e2e.service "$root/etc/systemd/system/multi-user.target.wants/"

say "booting: systemd-nspawn -b -D $root --register=no --keep-unit"
rc=0
timeout 300 systemd-nspawn -q -b -D "$root" --register=no --keep-unit --console=pipe >"$run.boot.log" 2>&1 || rc=$?
# What the container's journal holds about the check and the service.
journalctl -D "$root/var/log/journal" --no-pager -o short -u codeinterp-e2e.service -u codeinterpd.service \
        -u codeinterpd.socket >&2 || true
result=$(cat "$root/e2e.result" 2>/dev/null || echo "no result (systemd-nspawn exit $rc)")
if [ "$result" != PASSED ]; then
        tail -n 40 "$run.boot.log" >&2
        rm -f "$run.boot.log"
        die "$result"
fi
rm -f "$run.boot.log"
say "PASSED under systemd: socket activation, Northstar 8.25, stop drained a call, journal lines"
