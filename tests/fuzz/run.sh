#!/bin/sh
# Run the libFuzzer targets of a -DCODEINTERP_FUZZ=ON build from the seeds kept in
# tests/fuzz/corpus/<target>/ (docs/testing.md).
#
#   tests/fuzz/run.sh BUILD_DIR smoke|long [TARGET...]
#
# smoke: each target runs its seeds, then fuzzes for FUZZ_SECONDS (default 15).
# long:  each target runs FUZZ_RUNS executions (default 10000000).
# Targets (default: every fuzz_* binary in BUILD_DIR/bin) run FUZZ_JOBS at a time, each
# on one core: by default two at a time in smoke mode (make test runs nothing else
# meanwhile), one after the other in long mode.
# Inputs the fuzzer finds go to a temporary directory, never into the tree. A crash,
# leak, timeout (FUZZ_TIMEOUT seconds per input, default 10) or out-of-memory stops
# that target with a failure (the others still run); the input is kept in BUILD_DIR/fuzz-artifacts/ and the log
# in BUILD_DIR/fuzz-logs/<target>.<mode>.log. One summary line per target is printed.
set -eu

[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR smoke|long [TARGET...]" >&2; exit 2; }
build=$1
mode=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)

case $mode in
smoke) budget="-max_total_time=${FUZZ_SECONDS:-15}" ;;
long) budget="-runs=${FUZZ_RUNS:-10000000}" ;;
*) echo "$0: mode must be smoke or long" >&2; exit 2 ;;
esac

if [ $# -eq 0 ]; then
        for b in "$build"/bin/fuzz_*; do
                [ -x "$b" ] && set -- "$@" "$(basename "$b")"
        done
fi
[ $# -gt 0 ] || { echo "$0: no fuzz targets in $build/bin (configure with -DCODEINTERP_FUZZ=ON)" >&2; exit 1; }

# One target: its summary line on stdout, exit status 1 when it failed.
run_one() {
        t=$1
        seeds=$here/corpus/$t
        [ -d "$seeds" ] || { echo "$0: no seeds for $t in $seeds" >&2; exit 1; }
        log=$build/fuzz-logs/$t.$mode.log
        new=$(mktemp -d)
        start=$(date +%s)
        rc=0
        # The first corpus directory receives new inputs: a temporary one.
        "$build/bin/$t" "$new" "$seeds" "$budget" -max_len=4096 -timeout="${FUZZ_TIMEOUT:-10}" \
                -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" \
                >"$log" 2>&1 || rc=$?
        rm -rf "$new"
        wall=$(($(date +%s) - start))
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
        last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' || true)
        if [ "$rc" -eq 0 ]; then
                res=ok
        else
                res="FAILED (exit $rc)"
        fi
        printf '%-14s %-6s %s execs, %s exec/s, %s, peak rss %s MB, %ss: %s\n' \
                "$t" "$mode" "${execs:-?}" "${rate:-?}" "${last:-?}" "${rss:-?}" "$wall" "$res"
        if [ "$rc" -ne 0 ]; then
                grep -E 'ERROR|SUMMARY|Test unit written|artifact_prefix' "$log" >&2 || tail -n 20 "$log" >&2
                echo "$t: log in $log" >&2
                exit 1
        fi
}

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
if [ "${FUZZ_ONE:-}" = 1 ]; then
        run_one "$1"
        exit 0
fi
jobs=${FUZZ_JOBS:-$([ "$mode" = smoke ] && echo 2 || echo 1)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
status=0
# Each target in a process of its own (this script again, FUZZ_ONE=1), FUZZ_JOBS at a
# time; the lines are printed in target order once all are done.
printf '%s\n' "$@" | FUZZ_ONE=1 xargs -P "$jobs" -I{} sh -c \
        '"$0" "$1" "$2" "$3" >"$4/$3.line" 2>"$4/$3.err"; echo $? >"$4/$3.rc"' "$0" "$build" "$mode" {} "$out" || true
for t in "$@"; do
        cat "$out/$t.line" "$out/$t.err" 2>/dev/null || true
        [ "$(cat "$out/$t.rc" 2>/dev/null)" = 0 ] || status=1
done
exit $status
