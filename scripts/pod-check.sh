#!/bin/sh
# make pod-check: the container image and the Kubernetes pod specs of
# packaging/kubernetes/ run for real under podman (`kube play`) with runc, no registry.
#
#   scripts/pod-check.sh [DEB_DIR]
#
# 1. The Debian packages: DEB_DIR, or `make deb` into build-deb/.
# 2. The base image: the cached minimal Debian 12 root of the fresh-root checks
#    (scripts/fresh-root.sh: debootstrap, $CODEINTERP_FRESH_CACHE, default
#    /var/tmp/codeinterp-fresh-root; made when missing), with Debian's apt sources for
#    bookworm, -updates and -security, imported with `podman import` as
#    localhost/codeinterp-base:bookworm (again only when that root changed).
# 3. The codeinterp image from packaging/kubernetes/Containerfile as shipped, with
#    --build-arg BASE_IMAGE=that image, tagged as the manifests name it; and the agent
#    image (tests/pod/agent.Containerfile: that image, waiting), tagged likewise.
# 4. Docker's default seccomp profile (moby's profiles/seccomp/default.json, what
#    containerd's RuntimeDefault follows), from Debian's golang-github-docker-docker-dev
#    (apt-get download, cached under /var/tmp/codeinterp-pod-check).
# 5. tests/pod (pytest): the sidecar pod and the DaemonSet's pod, each added capability
#    removed in turn, the engine's default seccomp profiles; every pod is torn down.
#
# podman runs with a containers.conf of this run (CONTAINERS_CONF): runc as the runtime
# (crun 1.8 refuses a v1/v2 hybrid cgroup layout), and nofile/nproc limits no higher
# than podman's own, since root without CAP_SYS_RESOURCE cannot raise them (podman's
# default, 1048576, fails in runc's init with "error setting rlimit ... operation not
# permitted"). Images stay cached in podman's store; nothing else is left.
# Environment: CODEINTERP_MUST_SANDBOX=1 (a host that cannot run it fails, never skips),
# CODEINTERP_POD_CACHE (default /var/tmp/codeinterp-pod-check).
# Needs root. Installs podman, runc and catatonit (the pause process of podman's pods)
# if missing.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'pod-check: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }
phase_start=0
timings=""
phase() { phase_start=$(now); say "== $*"; }
phase_done() { timings="$timings$(printf '%-44s %5s s' "$1" "$(($(now) - phase_start))")
"; }
total_start=$(now)
# shellcheck source=scripts/fresh-root.sh
. "$here/scripts/fresh-root.sh"

[ "$(id -u)" -eq 0 ] || die "needs root (rootful podman, as the manifests' root container)"
[ "$(dpkg --print-architecture)" = amd64 ] || die "packaging/kubernetes/seccomp-codeinterpd.json is x86_64 only"
cache=${CODEINTERP_POD_CACHE:-/var/tmp/codeinterp-pod-check}
mkdir -p "$cache"

phase "tools"
need=""
# podman and runc: the engine and the runtime. catatonit: the pause process of a pod's
# infra container (podman builds its pause image from it). python3-yaml, python3-pytest:
# tests/pod.
for p in podman runc catatonit python3-yaml python3-pytest; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
        say "installing:$need"
        apt-get update -qq
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
say "$(podman --version), $(runc --version | head -n 1), kernel $(uname -r)"
phase_done "tools"

run=$(mktemp -d "$cache/run.XXXXXX")
cleanup() {
        status=$?
        trap - EXIT INT TERM
        case "$run" in "$cache"/run.??????) rm -rf --one-file-system "$run" ;; esac
        [ -n "$timings" ] && { say "phase timings:"; printf '%s' "$timings" >&2; }
        exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# nofile and nproc: the hard limits podman itself runs with. It keeps nofile at the hard
# limit it inherits (raising it needs CAP_SYS_RESOURCE) and lowers nproc to at most
# 32768 (podman 4.3, observed: /proc/<podman>/limits); a container may not ask for more.
at_most() { if [ "$1" = unlimited ] || [ "$1" -gt "$2" ]; then echo "$2"; else echo "$1"; fi; }
hard_limit() { awk -v what="$1" 'index($0, what) == 1 { print $(NF - 1) }' /proc/self/limits; }
nofile=$(at_most "$(hard_limit "Max open files")" 1048576)
nproc=$(at_most "$(hard_limit "Max processes")" 32768)
cat >"$run/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$run/containers.conf"

phase "Debian packages"
if [ $# -ge 1 ]; then
        debs=$(cd "$1" && pwd)
        say "packages from $debs"
else
        debs="$here/build-deb"
        "$here/scripts/build-deb.sh" "$debs"
fi
set -- "$debs"/codeinterp_*_amd64.deb
[ $# -eq 1 ] && [ -f "$1" ] || die "expected one codeinterp_<version>_amd64.deb in $debs"
deb=$1
phase_done "Debian packages"

phase "base image"
base=localhost/codeinterp-base:bookworm
# The cached minimal root of the fresh-root checks (scripts/fresh-root.sh), made when
# it is missing.
if [ ! -f "$tarball" ]; then
        say "building the cached minimal root"
        fresh_root_build_cache "$run"
fi
[ -f "$tarball" ] && [ -f "$tarball.info" ] || die "no cached root at $tarball"
stamp="$(sed -n 's/^created //p' "$tarball.info") $(stat -c %s "$tarball")"
if [ "$(podman image inspect --format '{{index .Labels "codeinterp.base.root"}}' "$base" 2>/dev/null)" = "$stamp" ]; then
        say "reusing $base (root of $stamp)"
else
        root="$run/root"
        mkdir "$root"
        tar --numeric-owner --xattrs -C "$root" -xpf "$tarball"
        # As a bookworm image has them: the release, its updates and security; no
        # resolv.conf or hostname of this host (the engine provides both).
        cat >"$root/etc/apt/sources.list" <<EOF
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
        rm -f "$root/etc/resolv.conf" "$root/etc/hostname"
        tar --numeric-owner --xattrs -C "$root" -cf - . |
                podman import --change 'CMD ["/bin/bash"]' --change "LABEL codeinterp.base.root=\"$stamp\"" - "$base" >/dev/null
        rm -rf "$root"
        say "imported $base from $tarball"
fi
phase_done "base image"

phase "images"
image=$(/usr/bin/python3 "$here/tests/deployment/podspecs.py" image codeinterpd)
agent=$(/usr/bin/python3 "$here/tests/deployment/podspecs.py" image agent)
mkdir "$run/context" "$run/agent-context"
cp "$deb" "$run/context/"
# The images these tags named before, removed once replaced: repeated runs leave no
# untagged copies behind.
old_ids=$(podman image inspect --format '{{.Id}}' "$image" "$agent" 2>/dev/null || true)
# --network host: the RUN step's apt-get needs the network, and podman needs no CNI
# plugins for it.
podman build --quiet --pull=never --network host --build-arg BASE_IMAGE="$base" \
        -f "$here/packaging/kubernetes/Containerfile" -t "$image" "$run/context" >/dev/null
podman build --quiet --pull=never --network none --build-arg CODEINTERP_IMAGE="$image" \
        -f "$here/tests/pod/agent.Containerfile" -t "$agent" "$run/agent-context" >/dev/null
say "built $image ($(podman run --rm --network none "$image" --version)) and $agent"
new_ids=$(podman image inspect --format '{{.Id}}' "$image" "$agent")
for id in $old_ids; do
        case "$new_ids" in *"$id"*) ;; *) podman rmi "$id" >/dev/null 2>&1 || true ;; esac
done
phase_done "images"

phase "Docker's default seccomp profile"
docker_profile="$cache/docker-default-seccomp.json"
if [ ! -s "$docker_profile" ]; then
        mkdir "$run/moby"
        (cd "$run/moby" && apt-get download -q golang-github-docker-docker-dev >/dev/null 2>&1) ||
                die "apt-get download golang-github-docker-docker-dev failed"
        dpkg-deb --fsys-tarfile "$run"/moby/golang-github-docker-docker-dev_*.deb |
                tar -xOf - ./usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json >"$docker_profile.tmp"
        basename "$run"/moby/*.deb >"$docker_profile.info"
        mv "$docker_profile.tmp" "$docker_profile"
fi
say "$(cat "$docker_profile.info")"
phase_done "Docker's seccomp profile"

phase "tests/pod"
set +e
CODEINTERP_POD_DOCKER_SECCOMP="$docker_profile" /usr/bin/python3 -m pytest -q -rA -p no:cacheprovider "$here/tests/pod"
rc=$?
set -e
phase_done "tests/pod"

# Nothing of the run may be left: no pod or container of the manifests' pods, no mount
# under the run directory.
left=$(podman ps -a --format '{{.Names}}' | grep -E '^(codeinterpd|agent-with-codeinterp)' || true)
[ -z "$left" ] || { say "containers left: $left"; rc=1; }
if awk -v r="$run" 'index($5, r) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
        say "something is still mounted under $run"
        rc=1
fi
timings="$timings$(printf '%-44s %5s s' total "$(($(now) - total_start))")
"
[ "$rc" -eq 0 ] || die "FAILED"
say "PASSED: the sidecar pod and the DaemonSet's pod ran calls under podman/runc with the manifests' security context"
