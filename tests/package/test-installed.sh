# shellcheck shell=sh disable=SC2034  # sourced by fresh-system-check; PHASE is read by its t()
# The inside half of `make test-package` (scripts/test-package.sh): run by
# scripts/fresh-system-check.sh (CODEINTERP_FRESH_INSIDE) as pid 1 of a fresh minimal
# Debian 12 root, from /src/codeinterp, which holds debs/*.deb and tests/. Sourced
# after fresh-system-check's header: set -eu, DEBIAN_FRONTEND, CODEINTERP_MUST_SANDBOX=1,
# and t() with PHASE, which times each step into /fresh-timings.
say() { printf 'test-package (inside): %s\n' "$*"; }
fail() { printf 'test-package (inside): FAIL: %s\n' "$*" >&2; exit 1; }
say "$(. /etc/os-release; echo "$PRETTY_NAME")"
packages="codeinterp libcodeinterp0 libcodeinterp-dev"
[ -n "$(ls debs/python3-codeinterp_*.deb 2>/dev/null)" ] && packages="$packages python3-codeinterp"

# systemd first, as on a real system, so that the packages' postinst enables the socket
# unit; the test tools (man-db: systemd-analyze verify runs man for Documentation=) are not the packages' dependencies and are removed again.
PHASE="apt-get update + install systemd and test tools"
t sh -c 'apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd man-db python3-pytest python3-msgpack pkg-config >/dev/null'
before=$(mktemp)
dpkg-query -W -f='${Package}\n' | sort >"$before"

PHASE="apt-get install the packages"
t apt-get install -y -qq --no-install-recommends ./debs/*.deb >/dev/null
for p in $packages; do
        dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" || fail "$p is not installed"
done
say "installed: $(dpkg-query -W -f='${Package} ${Version}, ' $packages)"

PHASE="installed files, units, systemd-analyze verify"
for f in /usr/sbin/codeinterpd /usr/bin/codeinterp /usr/libexec/codeinterp/codeinterp-worker \
        /etc/codeinterp/policy.yaml /lib/systemd/system/codeinterpd.socket /lib/systemd/system/codeinterpd.service \
        /usr/lib/systemd/user/codeinterpd.socket /usr/lib/systemd/user/codeinterpd.service \
        /usr/share/man/man8/codeinterpd.8.gz /usr/share/man/man1/codeinterp.1.gz \
        /usr/lib/x86_64-linux-gnu/libcodeinterp.so.0 /usr/include/codeinterp/libcodeinterp.h; do
        [ -e "$f" ] || fail "$f is missing"
done
dpkg-query --control-show codeinterp conffiles | grep -qx /etc/codeinterp/policy.yaml || fail "policy.yaml is not a conffile"
[ -L /etc/systemd/system/sockets.target.wants/codeinterpd.socket ] || fail "the socket unit is not enabled"
if ls /etc/systemd/system/*.wants/codeinterpd.service 2>/dev/null; then fail "the service unit is enabled on its own"; fi
say "the socket unit is enabled (sockets.target.wants), the service is not"
if ls /etc/systemd/user/*.wants/codeinterpd.* 2>/dev/null; then fail "a user unit is enabled for every user"; fi
say "the rootless user units are installed and enabled for nobody"
pkg-config --cflags --libs codeinterp >/dev/null || fail "pkg-config codeinterp"
t systemd-analyze verify /lib/systemd/system/codeinterpd.socket /lib/systemd/system/codeinterpd.service >/tmp/verify.log 2>&1 ||
        { cat /tmp/verify.log >&2; fail "systemd-analyze verify"; }
[ ! -s /tmp/verify.log ] || { cat /tmp/verify.log >&2; fail "systemd-analyze verify printed warnings"; }
say "systemd-analyze verify: both units clean"
mkdir -m 0700 /tmp/xdg-runtime
t env XDG_RUNTIME_DIR=/tmp/xdg-runtime systemd-analyze --user verify /usr/lib/systemd/user/codeinterpd.socket \
        /usr/lib/systemd/user/codeinterpd.service >/tmp/verify.log 2>&1 || { cat /tmp/verify.log >&2; fail "systemd-analyze --user verify"; }
[ ! -s /tmp/verify.log ] || { cat /tmp/verify.log >&2; fail "systemd-analyze --user verify printed warnings"; }
rm -rf /tmp/xdg-runtime
say "systemd-analyze --user verify: both user units clean"

# The installed supervisor as the socket unit would start it: its socket path, the
# service's ExecStart, socket activation by systemd-socket-activate.
PHASE="Northstar through the installed units' paths"
listen=$(sed -n 's/^ListenStream=//p' /lib/systemd/system/codeinterpd.socket)
exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/codeinterpd.service)
[ "$listen" = /run/codeinterp/codeinterp.sock ] || fail "ListenStream is \"$listen\""
mkdir -p "$(dirname "$listen")"
# shellcheck disable=SC2086
systemd-socket-activate -l "$listen" $exec_start 2>/tmp/codeinterpd.log &
activator=$!
i=0
while [ ! -S "$listen" ]; do
        i=$((i + 1))
        [ $i -le 500 ] || { cat /tmp/codeinterpd.log >&2; fail "systemd-socket-activate did not listen"; }
        sleep 0.01
done
code='measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours'
t codeinterp exec --summary "Northstar mean runtime" -c "$code" >/tmp/northstar.out
cat /tmp/northstar.out
grep -qx '8.25' /tmp/northstar.out || { cat /tmp/codeinterpd.log >&2; fail "the installed codeinterp did not print 8.25"; }
say "Northstar: the installed codeinterp printed 8.25 through the socket-activated /usr/sbin/codeinterpd"
kill -TERM "$activator"
wait "$activator" || fail "codeinterpd did not exit 0 on SIGTERM: $(cat /tmp/codeinterpd.log)"
grep -q 'Listening on /run/codeinterp/codeinterp.sock' /tmp/codeinterpd.log || { cat /tmp/codeinterpd.log >&2; fail "no startup line"; }
rm -rf /run/codeinterp

# Rootless: the installed supervisor started by an ordinary user (nobody), as the user
# units would, on a socket of its own; the installed client as root.
PHASE="Northstar through a rootless installed codeinterpd"
rl=$(mktemp -d)
chown nobody:nogroup "$rl"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/sbin/codeinterpd --socket "$rl/codeinterp.sock" \
        2>/tmp/rootless.log &
rootless=$!
i=0
while [ ! -S "$rl/codeinterp.sock" ]; do
        i=$((i + 1))
        [ $i -le 500 ] || { cat /tmp/rootless.log >&2; fail "the rootless codeinterpd did not listen"; }
        sleep 0.01
done
t codeinterp --socket "$rl/codeinterp.sock" exec --summary "Northstar mean runtime" -c "$code" >/tmp/northstar.out
grep -qx '8.25' /tmp/northstar.out || { cat /tmp/rootless.log >&2; fail "the rootless codeinterpd did not give 8.25"; }
codeinterp --socket "$rl/codeinterp.sock" hello | grep -q '"rootless":true' || fail "hello does not say rootless"
kill -TERM "$rootless"
wait "$rootless" || fail "the rootless codeinterpd did not exit 0 on SIGTERM: $(cat /tmp/rootless.log)"
grep -q 'rootless: workers run as this user on the host' /tmp/rootless.log || { cat /tmp/rootless.log >&2; fail "no rootless startup line"; }
rm -rf "$rl"
say "rootless: the installed codeinterpd run by nobody printed 8.25 and said rootless"

# The integration suites' core against the installed binaries: CODEINTERP_BUILD is a
# directory of links to them, so codeinterpd finds its worker by the compiled-in path.
mkdir -p /tmp/installed/bin
ln -s /usr/sbin/codeinterpd /usr/bin/codeinterp /usr/libexec/codeinterp/codeinterp-worker /tmp/installed/bin/
# The suite reads the embedded Python's facts from BUILD/python.json (cmake/python.cmake
# writes it into a build tree); for the installed binary they come from what it says of
# itself (--check-config), so the tests follow the installed build, not a guess.
/usr/sbin/codeinterpd --check-config | python3 -c '
import json, re, sys
text = sys.stdin.read()
ver, exe = re.search(r"embedded python: (\S+), from (\S+)", text).groups()
m = re.search(r"prefix (\S+), stdlib (\S+), lib-dynload (\S+), libpython in (\S+)", text)
runtime = re.findall(r"^    (/\S+): present", text, re.M)
assert m and runtime, text
json.dump({"interpreter": exe, "version": ver, "prefix": m[1], "stdlib": m[2], "dynload": m[3],
           "libdir": m[4], "executable": exe, "runtime": runtime, "hidden": []}, sys.stdout)
' >/tmp/installed/python.json || fail "codeinterpd --check-config did not describe its Python"
PHASE="integration core against the installed binaries"
t env CODEINTERP_BUILD=/tmp/installed python3 -m pytest -q -p no:cacheprovider tests/integration/test_core.py \
        tests/integration/test_activation.py tests/integration/test_cli.py tests/integration/test_sandbox.py \
        tests/integration/test_numeric.py tests/integration/test_protocol.py
rm -rf /tmp/installed

PHASE="purge and check nothing is left"
# shellcheck disable=SC2086
t apt-get purge -y -qq $packages >/dev/null
apt-get autoremove --purge -y -qq >/dev/null
for p in $packages; do
        ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed" || fail "$p is still installed"
done
left=$(find /usr /etc /lib /var/lib/systemd /var/lib/dpkg/info /run -path /src -prune -o -name '*codeinterp*' -print 2>/dev/null)
[ -z "$left" ] || fail "left after purge: $left"
[ ! -e /etc/codeinterp ] || fail "/etc/codeinterp is still there"
if ls /etc/systemd/system/*.wants/codeinterpd.* 2>/dev/null; then fail "a unit is still enabled"; fi
procs=""
for d in /proc/[0-9]*; do
        c=$(cat "$d/comm" 2>/dev/null) || continue
        case "$c" in codeinterp* | ci-* | systemd-socket*) procs="$procs ${d#/proc/}:$c" ;; esac
done
[ -z "$procs" ] || fail "processes left:$procs"
say "purged: no files under /usr, /etc, /lib, /var/lib/systemd, no enabled unit, no process left"
after=$(mktemp)
dpkg-query -W -f='${Package}\n' | sort >"$after"
extra=$(comm -13 "$before" "$after" | tr '\n' ' ')
[ -z "$extra" ] || fail "packages left after purge --auto-remove: $extra"
say "PASSED"
