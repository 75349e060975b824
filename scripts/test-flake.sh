#!/bin/sh
# make test-flake: the integration suite FLAKE_ROUNDS times (default 5) while stress-ng
# keeps every core busy, and a report of each test that failed and in how many rounds
# (docs/testing.md, "Flakiness"). A round is what make test runs of the suite: every test
# in the reference configuration (zygote mode), then the tests marked start_mode in exec
# mode (FLAKE_CONFIGS="zygote exec" by default; "zygote" for the first alone).
#
#   scripts/test-flake.sh BUILD
#
# Root (as make test). stress-ng runs one CPU worker per core (FLAKE_STRESS, default
# "--cpu 0", at nice 0 like the tests) for the whole run and is stopped, by its pid, on
# every exit. The rounds' JUnit reports and logs stay in BUILD/flake/. Exit status 1 if
# any test failed in any round.
set -eu

build=$(cd "${1:-build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=${FLAKE_ROUNDS:-5}
configs=${FLAKE_CONFIGS:-zygote exec}
out="$build/flake"
stress_pid=""

cleanup() {
        rc=$?
        trap - EXIT INT TERM HUP
        if [ -n "$stress_pid" ]; then
                kill -TERM "$stress_pid" 2>/dev/null || true
                wait "$stress_pid" 2>/dev/null || true
        fi
        exit "$rc"
}

command -v stress-ng >/dev/null || { echo "test-flake: stress-ng is missing (make deps installs it)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
# shellcheck disable=SC2086 # FLAKE_STRESS is a list of options
stress-ng ${FLAKE_STRESS:---cpu 0} --timeout 0 --quiet >"$out/stress-ng.log" 2>&1 &
stress_pid=$!
echo "test-flake: stress-ng (pid $stress_pid) keeps $(nproc) cores busy; $rounds rounds of: $configs"

cd "$src"
start=$(date +%s)
for r in $(seq 1 "$rounds"); do
        for c in $configs; do
                t0=$(date +%s)
                rc=0
                CODEINTERP_BUILD="$build" CODEINTERP_WORKER_START="$c" \
                        /usr/bin/python3 -m pytest -q -n "${TEST_JOBS:-3}" --junitxml="$out/round$r-$c.xml" \
                        tests/integration >"$out/round$r-$c.log" 2>&1 || rc=$?
                echo "test-flake: round $r, $c: $(tail -n 1 "$out/round$r-$c.log") ($(($(date +%s) - t0)) s)"
                # 1: tests failed (reported below); anything else: the run itself broke.
                [ "$rc" -le 1 ] || { tail -n 30 "$out/round$r-$c.log" >&2; exit "$rc"; }
        done
done
kill -TERM "$stress_pid" 2>/dev/null || true
wait "$stress_pid" 2>/dev/null || true
stress_pid=""

/usr/bin/python3 - "$out" "$rounds" "$configs" "$(($(date +%s) - start))" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET

out, rounds, configs, took = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4])
failed, runs = {}, {}
for path in sorted(glob.glob(os.path.join(out, "round*.xml"))):
    config = os.path.basename(path).split("-", 1)[1][:-4]
    for case in ET.parse(path).iter("testcase"):
        name = "%s::%s [%s]" % (case.get("classname"), case.get("name"), config)
        runs[name] = runs.get(name, 0) + 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed[name] = failed.get(name, 0) + 1
print("test-flake: %d rounds of %s under stress-ng, %d test runs, %d min %02d s" % (
    rounds, " + ".join(configs), sum(runs.values()), took // 60, took % 60))
if not failed:
    print("test-flake: no test failed in any round")
    sys.exit(0)
print("test-flake: failures per test (rounds failed / rounds run):")
for name in sorted(failed, key=lambda n: (-failed[n], n)):
    print("  %d/%d  %s" % (failed[name], runs[name], name))
sys.exit(1)
PY
