#!/bin/sh
# Inside the container booted by scripts/nspawn-check.sh, run by a oneshot unit at
# boot: install the packages with apt as an operator would (the socket unit is enabled
# and started by their postinst), check that the Python client imports with nothing
# installed by hand, then run tests/package/nspawn_e2e.py. Writes /e2e/result (PASSED or
# FAILED: why) and powers the container off whatever happens. Its output goes to
# /e2e/log, which the host prints.
exec >/e2e/log 2>&1
fail() {
        echo "FAILED: $*" >/e2e/result
        echo "e2e: FAILED: $*"
        systemctl poweroff
        exit 1
}
echo "e2e: $(. /etc/os-release; echo "$PRETTY_NAME"), systemd $(systemctl --version | sed -n '1s/systemd \([0-9]*\).*/\1/p')"
export DEBIAN_FRONTEND=noninteractive
dpkg-query -W -f='${Package}\n' | sort >/e2e/packages-before
start=$(date +%s)
apt-get install -y -qq --no-install-recommends /e2e/debs/*.deb >/tmp/apt.log 2>&1 ||
        { tail -n 20 /tmp/apt.log; fail "apt-get install of the packages"; }
echo "e2e: installed $(dpkg-query -W -f='${Package} ${Version}, ' codeinterp libcodeinterp0 libcodeinterp-dev python3-codeinterp) in $(($(date +%s) - start)) s"
python3 -c 'import codeinterp, msgpack; print("e2e: import codeinterp:", codeinterp.__file__)' ||
        fail "python3 -c 'import codeinterp' after installing python3-codeinterp alone"
python3 /e2e/nspawn_e2e.py || fail "$(tail -n 1 /e2e/failure 2>/dev/null || echo "nspawn_e2e.py exited $?")"
echo PASSED >/e2e/result
echo "e2e: PASSED in $(($(date +%s) - start)) s"
systemctl poweroff
