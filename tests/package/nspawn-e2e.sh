#!/bin/sh
# Inside a booted container (scripts/nspawn-check.sh): the packaged socket unit starts
# codeinterpd on the first connection, Northstar prints 8.25, `systemctl stop` drains a
# call in flight (it ends as cancelled) and the service exits cleanly, the journal has
# the service's lines, and a purge while the service runs stops it and leaves nothing.
# Writes /e2e.result (PASSED or FAILED: why), then powers off.
out=/e2e.result
fail() { echo "FAILED: $*" >"$out"; systemctl poweroff; exit 1; }
log() { echo "e2e: $*"; }
log "socket: $(systemctl is-active codeinterpd.socket), service: $(systemctl is-active codeinterpd.service)"
[ "$(systemctl is-enabled codeinterpd.socket)" = enabled ] || fail "the socket unit is not enabled"
[ "$(systemctl is-active codeinterpd.socket)" = active ] || fail "the socket unit is not listening"
[ "$(systemctl is-active codeinterpd.service)" = inactive ] || fail "the service runs before any connection"
code='measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours'
r=$(codeinterp exec --summary "Northstar mean runtime" -c "$code" 2>&1)
log "northstar: $r"
[ "$r" = 8.25 ] || fail "Northstar printed \"$r\""
[ "$(systemctl is-active codeinterpd.service)" = active ] || fail "the service did not start on the first connection"
codeinterp exec --json --summary "sleeper" -c 'import time
time.sleep(20)' >/tmp/sleeper.json 2>&1 &
sleeper=$!
sleep 2
systemctl stop codeinterpd.service
wait "$sleeper"
log "sleeper: $(head -c 300 /tmp/sleeper.json)"
grep -q '"outcome": *"cancelled"' /tmp/sleeper.json || fail "the call in flight did not end as cancelled"
result=$(systemctl show -p Result --value codeinterpd.service)
status=$(systemctl show -p ExecMainStatus --value codeinterpd.service)
log "service stopped: Result=$result ExecMainStatus=$status"
[ "$result" = success ] && [ "$status" = 0 ] || fail "stop: Result=$result ExecMainStatus=$status"
[ "$(systemctl is-active codeinterpd.socket)" = active ] || fail "the socket stopped with the service"
journalctl -u codeinterpd.service --no-pager -o cat >/tmp/journal.txt
grep -q '^Listening on the systemd-activated socket' /tmp/journal.txt || fail "no startup line in the journal"
grep -q 'call 1 finished: ok' /tmp/journal.txt || fail "no call line in the journal"
grep -q 'stopping' /tmp/journal.txt || fail "no shutdown line in the journal"
r=$(codeinterp exec -c '1 + 1' 2>&1)
[ "$r" = 2 ] || fail "the socket did not start the service again: \"$r\""
# Purging while the service runs: the prerm stops the socket, and the service's
# Requires=codeinterpd.socket stops codeinterpd with it (debian/rules).
[ "$(systemctl is-active codeinterpd.service)" = active ] || fail "the service is not running before the purge"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq codeinterp libcodeinterp-dev libcodeinterp0 >/dev/null || fail "apt-get purge"
sleep 1
procs=$(cat /proc/[0-9]*/comm 2>/dev/null | grep -E '^(codeinterp|ci-)' | tr '\n' ' ')
log "after purge: service $(systemctl is-active codeinterpd.service), socket $(systemctl is-active codeinterpd.socket), processes: ${procs:-none}"
[ -z "$procs" ] || fail "processes left after the purge: $procs"
[ "$(systemctl is-active codeinterpd.socket)" != active ] || fail "the socket still listens after the purge"
[ ! -e /etc/codeinterp ] && [ ! -e /lib/systemd/system/codeinterpd.socket ] || fail "files left after the purge"
[ -z "$(find /etc/systemd/system -name 'codeinterpd*')" ] || fail "unit links left after the purge"
echo PASSED >"$out"
systemctl poweroff
