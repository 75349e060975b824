#!/bin/sh
# Install the Debian packages codeinterp builds and tests with, if any is missing.
set -eu
PKGS="build-essential cmake pkg-config libseccomp-dev libcap-dev libpython3.11-dev python3 \
libmsgpack-dev libsystemd-dev libyaml-dev libcmocka-dev python3-pytest python3-msgpack python3-pyflakes clang-format \
clang libclang-rt-14-dev cppcheck"
missing=""
for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: not root; install these packages first:$missing" >&2
        exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
