#!/bin/sh
# Prove the README's install steps on a fresh, minimal Debian 12: a debootstrap
# --variant=minbase bookworm root gets `make` and nothing else, then runs `make demo`
# (must print 8.25) and the fast tier of `make test`, `make test-fast` (the format check
# without git, the npm packages, the unit tests and one pass of the integration suite),
# with CODEINTERP_MUST_SANDBOX=1, as a new user would. The whole of `make test` runs on
# the machine itself (.ci/run): running it a second time here would prove nothing the
# install steps do not.
#
#   scripts/fresh-system-check.sh [SOURCE_DIR]
#
# Source: without SOURCE_DIR, `git archive HEAD` of the checkout this script is in
# (committed files only); with SOURCE_DIR, a copy of that directory without .git and
# build*/ folders. Either way the fresh root has no .git and no git, so the no-git
# path of `make check-format` is exercised too.
#
# The pristine root is built once and cached as a tarball in $CODEINTERP_FRESH_CACHE
# (default /var/tmp/codeinterp-fresh-root); each run unpacks a new copy, enters it with
# pivot_root in a private mount (and pid) namespace -- not chroot: a chrooted process
# may not create user namespaces, which the worker and tests need -- and deletes the
# copy afterwards. The host network is kept (apt-get works; resolv.conf is copied in).
# Every mount lives in the private namespace and every process in the private pid
# namespace, so both are gone when the check ends, however it ends.
#
# Environment: CODEINTERP_FRESH_CACHE (cache directory), CODEINTERP_FRESH_MIRROR and
# CODEINTERP_FRESH_SECURITY_MIRROR (default: what the host's apt sources use for
# bookworm and bookworm-security), CODEINTERP_FRESH_REBUILD=1 (debootstrap again),
# CODEINTERP_FRESH_KEEP=1 (keep the run's root for inspection), CODEINTERP_FRESH_NICE
# (niceness of the run inside, default 10: the machine is shared), CODEINTERP_FRESH_INSIDE
# (a script run inside instead of the README's steps, from /src/codeinterp, with the same
# t/PHASE timing helper).
# Needs root, debootstrap (installed if missing), util-linux. A few minutes on a 2-core
# machine near a Debian mirror (docs/testing.md has the phase times).
set -eu

if [ "${1:-}" = "--inside" ]; then
        # Stage 2, inside the new mount and pid namespaces (pid 1), host filesystem
        # still visible: build the new root's mounts and pivot into it.
        root=$2
        mount --bind "$root" "$root"
        mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
        mount --rbind /sys "$root/sys"
        mount -t tmpfs -o nosuid,mode=0755 tmpfs "$root/dev"
        for d in null zero full random urandom tty; do
                touch "$root/dev/$d"
                mount --bind "/dev/$d" "$root/dev/$d"
        done
        mkdir -p "$root/dev/pts" "$root/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$root/dev/pts"
        ln -s pts/ptmx "$root/dev/ptmx"
        mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
        ln -s /proc/self/fd "$root/dev/fd"
        ln -s /proc/self/fd/0 "$root/dev/stdin"
        ln -s /proc/self/fd/1 "$root/dev/stdout"
        ln -s /proc/self/fd/2 "$root/dev/stderr"
        mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$root/run"
        mkdir -p "$root/.oldroot"
        cd "$root"
        pivot_root . .oldroot
        cd /
        # From here on only the new root's programs exist.
        umount -l /.oldroot
        rmdir /.oldroot
        exec env -i HOME=/root TERM=dumb LANG=C.UTF-8 NODE_EXTRA_CA_CERTS=/etc/fresh-host-extra-ca.crt \
                PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
                /bin/sh /fresh-check-inside.sh
fi

say() { printf 'fresh-system-check: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
now() { date +%s; }
phase_start=0
phase() { phase_start=$(now); say "== $*"; }
phase_done() { say "   $1: $(($(now) - phase_start)) s"; printf '%-40s %5s s\n' "$1" "$(($(now) - phase_start))" >>"$timings"; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount namespaces, and codeinterpd itself)"
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/fresh-root.sh
. "$here/scripts/fresh-root.sh"

mkdir -p "$cache"
run=$(mktemp -d "$cache/run.XXXXXX")
timings="$run.timings"
: >"$timings"
nspid=""
cleanup() {
        status=$?
        trap - EXIT INT TERM
        if [ -n "$nspid" ] && kill -0 "$nspid" 2>/dev/null; then
                # unshare blocks SIGINT and SIGTERM while it waits, and the namespace's
                # pid 1 ignores signals it has no handler for: SIGKILL unshare, and
                # --kill-child SIGKILLs pid 1, which takes the whole pid namespace.
                kill -KILL "$nspid" 2>/dev/null || true
                wait "$nspid" 2>/dev/null || true
        fi
        fresh_root_remove "$run" || status=1
        [ -s "$timings" ] && { say "phase timings:"; cat "$timings" >&2; }
        rm -f "$timings"
        exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

total_start=$(now)

# Phase 1: the pristine minimal root, cached (scripts/fresh-root.sh).
if [ ! -f "$tarball" ] || [ "${CODEINTERP_FRESH_REBUILD:-}" = 1 ]; then
        phase "debootstrap --variant=minbase bookworm from $mirror"
        fresh_root_build_cache "$run"
        phase_done "debootstrap (cached afterwards)"
else
        say "reusing the cached root $tarball ($(sed -n 's/^created //p' "$tarball.info" 2>/dev/null))"
fi

# Phase 2: a fresh copy of it, with the host's resolver and apt sources like a fresh
# install has them (the release, its updates and security).
phase "unpack a fresh copy of the root"
root="$run/root"
fresh_root_unpack "$root"
phase_done "unpack root"

# Phase 3: the source, without .git.
phase "copy the source"
mkdir -p "$root/src/codeinterp"
if [ $# -ge 1 ]; then
        src=$(cd "$1" && pwd)
        tar -C "$src" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$root/src/codeinterp" -xf -
        say "source: directory $src (without .git and build*)"
else
        git -C "$here" archive --format=tar HEAD | tar -C "$root/src/codeinterp" -xf -
        say "source: git archive HEAD of $here ($(git -C "$here" rev-parse --short HEAD))"
fi
[ ! -e "$root/src/codeinterp/.git" ] || die "the copied source has a .git"
phase_done "copy source"

# The steps a new user takes, run inside; each phase's time goes to /fresh-timings.
cat >"$root/fresh-check-inside.sh" <<'EOF'
set -eu
export DEBIAN_FRONTEND=noninteractive CODEINTERP_MUST_SANDBOX=1
t() { s=$(date +%s); "$@" && r=0 || r=$?; printf '%s %s\n' "$(($(date +%s) - s))" "$PHASE" >>/fresh-timings; return $r; }
echo "fresh-system-check (inside): $(. /etc/os-release; echo "$PRETTY_NAME"), git: $(command -v git || echo none)"
PHASE="apt-get update + install make"
t sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null'
cd /src/codeinterp
PHASE="make demo (install-deps, build, demo)"
t sh -c '{ make demo 2>&1; echo $? >/fresh-demo.rc; } | tee /fresh-demo.log; exit $(cat /fresh-demo.rc)'
grep -qx '8.25' /fresh-demo.log || { echo "fresh-system-check (inside): make demo did not print 8.25" >&2; exit 1; }
echo "fresh-system-check (inside): make demo printed 8.25"
PHASE="make test-fast"
t make test-fast
echo "fresh-system-check (inside): make test-fast passed"
EOF
if [ -n "${CODEINTERP_FRESH_INSIDE:-}" ]; then
        { sed -n '1,/^t() /p' "$root/fresh-check-inside.sh"; echo 'cd /src/codeinterp'; cat "$CODEINTERP_FRESH_INSIDE"; } >"$root/fresh-check-inside.sh.new"
        mv "$root/fresh-check-inside.sh.new" "$root/fresh-check-inside.sh"
fi
: >"$root/fresh-timings"

phase "enter the root (pivot_root) and run apt-get install make, make demo, make test-fast"
inside_start=$(now)
set +e
nice -n "${CODEINTERP_FRESH_NICE:-10}" unshare --mount --propagation private --pid --fork --kill-child \
        /bin/sh "$here/scripts/fresh-system-check.sh" --inside "$root" &
nspid=$!
wait "$nspid"
rc=$?
nspid=""
set -e
while read -r secs what; do
        printf '%-40s %5s s\n' "$what" "$secs" >>"$timings"
done <"$root/fresh-timings"
printf '%-40s %5s s\n' "inside, all" "$(($(now) - inside_start))" >>"$timings"
printf '%-40s %5s s\n' "total" "$(($(now) - total_start))" >>"$timings"
[ "$rc" -eq 0 ] || die "FAILED inside the fresh root (exit $rc)"
if [ -n "${CODEINTERP_FRESH_INSIDE:-}" ]; then
        say "PASSED: $CODEINTERP_FRESH_INSIDE on a fresh minimal Debian 12"
else
        say "PASSED: on a fresh minimal Debian 12, make demo printed 8.25 and make test-fast passed"
fi
