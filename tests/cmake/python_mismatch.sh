#!/bin/sh
# cmake/python.cmake must refuse an embed library that is not the interpreter's own.
# A wrapper around /usr/bin/python3 reports a LIBPC holding a python-X.Y-embed.pc with
# the right version but another interpreter's headers and library; configure must
# fail and say "Mismatch". Run by make test-python-versions.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
xy=$("$py" -I -S -c 'import sys; print("%d.%d" % sys.version_info[:2])')
libpc=$("$py" -I -S -c 'import sysconfig; print(sysconfig.get_config_var("LIBPC"))')
mkdir "$tmp/pc"
sed 's|^includedir=.*|includedir=/nonexistent/include|' "$libpc/python-$xy-embed.pc" >"$tmp/pc/python-$xy-embed.pc"
cat >"$tmp/python3" <<WRAP
#!/bin/sh
$py "\$@" | sed "s|^$libpc\$|$tmp/pc|"
WRAP
chmod +x "$tmp/python3"
if cmake -S "$src" -B "$tmp/build" -DCODEINTERP_PYTHON="$tmp/python3" >"$tmp/log" 2>&1; then
        echo "python_mismatch: configure accepted a foreign python-$xy-embed.pc" >&2
        exit 1
fi
if ! grep -q Mismatch "$tmp/log"; then
        echo "python_mismatch: configure failed, but not with the mismatch message:" >&2
        cat "$tmp/log" >&2
        exit 1
fi
echo "python_mismatch: a foreign python-$xy-embed.pc is refused"
