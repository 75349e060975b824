#!/bin/sh
# The stage timer of `make test` and `make test-fast` (docs/testing.md has the figures).
#
#   scripts/timed.sh FILE start         begin a run: FILE holds nothing yet
#   scripts/timed.sh FILE NAME CMD...   run CMD; print and record how long stage NAME took
#   scripts/timed.sh FILE end           print every stage's time and the total
#
# A stage that fails ends the run with its status, after its time is printed.
set -eu
file=$1
shift
case $1 in
start)
        mkdir -p "$(dirname "$file")"
        date +%s >"$file.start"
        : >"$file"
        exit 0
        ;;
end)
        total=$(($(date +%s) - $(cat "$file.start")))
        echo "== stage times"
        cat "$file"
        printf '%-22s %5d s (%d min %02d s)\n' total "$total" $((total / 60)) $((total % 60))
        exit 0
        ;;
esac
name=$1
shift
t0=$(date +%s)
rc=0
"$@" || rc=$?
secs=$(($(date +%s) - t0))
line=$(printf '%-22s %5d s%s' "$name" "$secs" "$([ "$rc" -eq 0 ] || echo "  FAILED (exit $rc)")")
echo "$line" >>"$file"
echo "== stage $line"
exit "$rc"
