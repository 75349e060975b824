#!/bin/sh
# make demo: a private supervisor on a temporary socket runs the Northstar calculation
# through the codeinterp client, then stops and leaves nothing behind.
set -eu
BUILD=${1:-build}
dir=$(mktemp -d /tmp/codeinterp-demo.XXXXXX)
sock="$dir/codeinterp.sock"
pid=""
cleanup() {
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid"
                wait "$pid" || true
        fi
        rm -rf "$dir"
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -ne 0 ]; then
        echo "make demo: codeinterpd needs root (it creates user namespaces for its workers)" >&2
        exit 1
fi
"$BUILD/bin/codeinterpd" --socket "$sock" 2>"$dir/codeinterpd.log" &
pid=$!
i=0
while [ ! -S "$sock" ]; do
        i=$((i + 1))
        if [ $i -gt 500 ] || ! kill -0 "$pid" 2>/dev/null; then
                echo "make demo: codeinterpd did not start:" >&2
                cat "$dir/codeinterpd.log" >&2
                exit 1
        fi
        sleep 0.01
done

code='measured_runtime_hours = [9.0, 7.5]
assert all(isinstance(value, (int, float)) for value in measured_runtime_hours)
mean_runtime_hours = sum(measured_runtime_hours) / len(measured_runtime_hours)
mean_runtime_hours'
echo "Northstar: mean of the measured runtimes 9 and 7.5 hours, computed in a fresh sandboxed worker:"
printf '%s\n' "$code" | sed 's/^/    >>> /'
"$BUILD/bin/codeinterp" --socket "$sock" exec --summary "Northstar mean runtime" -c "$code"
