# shellcheck shell=sh
# A fresh minimal Debian 12 root, shared by scripts/fresh-system-check.sh,
# scripts/nspawn-check.sh and the container check: sourced, it sets cache, arch,
# tarball, mirror and security, and defines fresh_root_build_cache (debootstrap
# --variant=minbase bookworm, cached as a tarball), fresh_root_unpack (a new copy
# with the host's resolver, extra CAs and apt sources) and fresh_root_remove (a run
# directory, unless something is mounted under it). The sourcing script defines
# say, die and here first.
#
# Environment: CODEINTERP_FRESH_CACHE (cache directory, default
# /var/tmp/codeinterp-fresh-root), CODEINTERP_FRESH_MIRROR and
# CODEINTERP_FRESH_SECURITY_MIRROR (default: what the host's apt sources use).

cache=${CODEINTERP_FRESH_CACHE:-/var/tmp/codeinterp-fresh-root}
case "$cache" in
/?*/?*) ;;
*) die "CODEINTERP_FRESH_CACHE must be an absolute path at least two levels deep: $cache" ;;
esac
case "$cache/" in
"$here"/*) die "the cache must be outside the source tree: $cache" ;;
esac
arch=$(dpkg --print-architecture)
tarball="$cache/bookworm-minbase-$arch.tar"

# Remove a run directory of the cache, RUN ($1, "$cache/<name>.XXXXXX"), unless
# the host sees anything mounted under it (mounts are made only in a private
# namespace: then it is left, and this says so and fails) or CODEINTERP_FRESH_KEEP=1
# (then it is left, and this says where its root is).
fresh_root_remove() {
        if awk -v r="$1" '$5 == r || index($5, r "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
                say "something is still mounted under $1: not deleting it"
                return 1
        fi
        if [ "${CODEINTERP_FRESH_KEEP:-}" = 1 ]; then
                say "kept the run's root: $1/root"
                return 0
        fi
        case "$1" in
        "$cache"/*.??????) rm -rf --one-file-system "$1" ;;
        esac
}

# The mirror the host's apt sources use for SUITE (one-line and deb822 formats).
host_mirror() {
        suite=$1
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
                [ -f "$f" ] || continue
                awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while (i <= NF && $i !~ /\]$/) i++;
                        if ($2 ~ /^\[/) i++; if ($(i + 1) == s) { print $i; exit } }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.sources; do
                [ -f "$f" ] || continue
                awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
                        { uri = ""; hit = 0; deb = 0; enabled = 1
                          for (k = 1; k <= NF; k++) {
                                if ($k ~ /^URIs:/) { uri = $k; sub(/^URIs:[ \t]*/, "", uri); sub(/[ \t].*/, "", uri) }
                                if ($k ~ /^Types:/ && $k ~ /[ \t]deb([ \t]|$)/) deb = 1
                                if ($k ~ /^Enabled:[ \t]*no/) enabled = 0
                                if ($k ~ /^Suites:/) { n = split($k, w, /[ \t]+/); for (m = 2; m <= n; m++) if (w[m] == s) hit = 1 }
                          }
                          if (hit && deb && enabled && uri != "") { print uri; exit } }' "$f"
        done
}
mirror=${CODEINTERP_FRESH_MIRROR:-$(host_mirror bookworm | head -n 1)}
mirror=${mirror:-http://deb.debian.org/debian}
security=${CODEINTERP_FRESH_SECURITY_MIRROR:-$(host_mirror bookworm-security | head -n 1)}
security=${security:-http://deb.debian.org/debian-security}

# Build the cached tarball with debootstrap in WORKDIR/debootstrap (a directory of the
# caller's, removed again).
fresh_root_build_cache() {
        command -v debootstrap >/dev/null || {
                apt-get update -qq
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
        }
        mkdir -p "$cache"
        staging="$1/debootstrap"
        # In a private mount namespace: whatever debootstrap mounts cannot outlive it.
        nice unshare --mount --propagation private debootstrap --variant=minbase bookworm "$staging" "$mirror" >"$1.debootstrap.log" 2>&1 || {
                tail -n 30 "$1.debootstrap.log" >&2
                rm -f "$1.debootstrap.log"
                die "debootstrap failed"
        }
        rm -f "$1.debootstrap.log"
        rm -rf "$staging/var/cache/apt/archives/"*.deb
        tar --numeric-owner --xattrs -C "$staging" -cf "$tarball.tmp" .
        mv "$tarball.tmp" "$tarball"
        rm -rf --one-file-system "$staging"
        printf 'mirror %s\ncreated %s\n' "$mirror" "$(date -u +%FT%TZ)" >"$tarball.info"
}

# A new copy of the cached root at ROOT (which must not exist yet).
fresh_root_unpack() {
        mkdir "$1"
        tar --numeric-owner --xattrs -C "$1" -xpf "$tarball"
        rm -f "$1/etc/resolv.conf"
        cp -L /etc/resolv.conf "$1/etc/resolv.conf"
        # The host's extra certificate authorities are part of its network too (a network
        # whose egress re-signs TLS, as this workplace's does, needs them for the npm
        # registry): a user of this network would add them to a fresh system the same way.
        # They are given to node (NODE_EXTRA_CA_CERTS), which the root's npm then trusts;
        # nothing else changes.
        : >"$1/etc/fresh-host-extra-ca.crt"
        for crt in /usr/local/share/ca-certificates/*.crt; do
                [ -f "$crt" ] && cat "$crt" >>"$1/etc/fresh-host-extra-ca.crt"
        done
        cat >"$1/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES
}
