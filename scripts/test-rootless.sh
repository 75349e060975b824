#!/bin/sh
# make test-rootless: the integration tests marked rootless (whose subject depends on
# whether the supervisor runs as root) against supervisors started as an unprivileged
# user made for the run, in both worker start modes (in exec mode, those also marked
# start_mode) (docs/testing.md, "Rootless").
#
# Run as root. It creates a system user ci-rootless-PID (useradd, no home, no login)
# and removes it on every exit, failure and interruption included, after making sure
# none of its processes is left (a leftover is killed by pid and fails the run). The
# binaries and BUILD/python.json are copied to a temporary directory the user can read
# (a clone under /root would not be). A host without unprivileged user namespaces is
# skipped with a message, and fails under CODEINTERP_MUST_SANDBOX=1.
#
#   scripts/test-rootless.sh BUILD
# CODEINTERP_ROOTLESS_TESTS="tests/... ..." runs other suites the same way (any suite
# whose supervisors come from tests/lib/testlib, e.g. tests/adversarial).
set -eu

build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tests=${CODEINTERP_ROOTLESS_TESTS:-tests/integration}
user="ci-rootless-$$"
tmp=""
made_user=0

fail_or_skip() {
        if [ "${CODEINTERP_MUST_SANDBOX:-}" = 1 ]; then
                echo "test-rootless: FAILED: CODEINTERP_MUST_SANDBOX=1 but $1" >&2
                exit 1
        fi
        echo "test-rootless: skipped: $1"
        exit 0
}

cleanup() {
        rc=$?
        trap - EXIT INT TERM HUP
        if [ "$made_user" = 1 ]; then
                uid=$(id -u "$user")
                left=$(pgrep -U "$uid" || true)
                if [ -n "$left" ]; then
                        echo "test-rootless: processes of $user left behind: $(echo $left)" >&2
                        # shellcheck disable=SC2086 # one pid per word
                        kill -KILL $left 2>/dev/null || true
                        sleep 0.2
                        rc=1
                fi
                userdel "$user" || rc=1
                if getent group "$user" >/dev/null; then
                        groupdel "$user" || rc=1
                fi
        fi
        [ -n "$tmp" ] && rm -rf "$tmp"
        exit "$rc"
}

[ "$(id -u)" = 0 ] || fail_or_skip "it must run as root (it creates a user for the test)"
for tool in useradd userdel setpriv unshare pgrep; do
        command -v "$tool" >/dev/null || fail_or_skip "$tool is missing"
done

trap cleanup EXIT
trap 'exit 130' INT TERM HUP
useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
made_user=1
uid=$(id -u "$user")
gid=$(id -g "$user")
echo "test-rootless: user $user (uid $uid, gid $gid)"

if ! out=$(setpriv --reuid "$uid" --regid "$gid" --clear-groups -- \
        unshare --user --map-root-user --mount --pid --net --fork true 2>&1); then
        fail_or_skip "$user cannot create user namespaces (unprivileged user namespaces disabled?): $out"
fi

tmp=$(mktemp -d /tmp/codeinterp-rootless.XXXXXX)
chmod 0755 "$tmp"
mkdir "$tmp/bin"
cp "$build/bin/codeinterpd" "$build/bin/codeinterp-worker" "$build/bin/codeinterp" "$tmp/bin/"
cp "$build/python.json" "$tmp/"
chmod -R a+rX "$tmp"

rc=0
cd "$src"
for start in zygote exec; do
        echo "test-rootless: workerStart $start"
        # shellcheck disable=SC2086 # a list of test paths
        CODEINTERP_BUILD="$tmp" CODEINTERP_ROOTLESS_USER="$user" CODEINTERP_WORKER_START="$start" \
                /usr/bin/python3 -m pytest -q -n "${TEST_JOBS:-3}" $tests || rc=1
done
exit "$rc"
