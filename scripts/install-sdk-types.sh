#!/bin/sh
# Install the npm packages of tests/sdk-types (the vendors' SDKs, TypeScript, the MCP
# client) into tests/sdk-types/node_modules, never globally: only when node_modules is
# missing or package-lock.json changed since the last install. Needs the npm registry.
set -eu
dir="$(cd "$(dirname "$0")/../tests/sdk-types" && pwd)"
# One install at a time: test processes running in parallel may each find it missing.
exec 9>"$dir/.install-lock"
flock 9
stamp="$dir/node_modules/.codeinterp-lock-sha256"
want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
        echo "install-sdk-types: npm is not installed (scripts/install-deps.sh installs it)" >&2
        exit 1
fi
echo "install-sdk-types: npm ci in $dir"
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
echo "$want" >"$stamp"
