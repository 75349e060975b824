"""The embedded Python the build chose (cmake/python.cmake, BUILD/python.json): the
worker runs that version from its paths, its extension modules find their libraries,
the interpreter's site-packages is hidden, and --check-config reports all of it.
Run against Debian's 3.11 by make test and against pyenv's builds by
make test-python-versions (marker python), in both start modes (the runtime's binds
are made by each mode's sandbox setup)."""
import os
import subprocess

import pytest

from testlib import DAEMON, PYTHON, WAIT_LIMIT, require_sandbox, value

pytestmark = [pytest.mark.python, pytest.mark.start_mode]


def test_worker_runs_the_configured_python(shared_conn):
    r = shared_conn.execute("import sys\n(sys.version.split()[0], sys.prefix, sys.path)")
    assert value(r) == repr((PYTHON["version"], PYTHON["prefix"], [PYTHON["stdlib"], PYTHON["dynload"]]))


def test_extension_modules_find_their_libraries(shared_conn):
    # Each of these loads a shared library besides libc (ssl, sqlite3, ffi, zlib,
    # lzma, bz2, expat, mpdec or the bundled one): the binds computed with ldd.
    code = ("import ssl, sqlite3, ctypes, zlib, lzma, bz2, pyexpat, _decimal, hashlib\n"
            "(zlib.decompress(zlib.compress(b'x')), sqlite3.connect(':memory:').execute('select 1').fetchone(),"
            " hashlib.sha256(b'').hexdigest()[:8])")
    assert value(shared_conn.execute(code)) == "(b'x', (1,), 'e3b0c442')"


def test_site_packages_hidden(shared_conn):
    code = "import os\n[(p, os.path.isdir(p), os.listdir(p) if os.path.isdir(p) else None) for p in %r]" % (
        PYTHON["hidden"],)
    assert value(shared_conn.execute(code)) == repr([(p, True, []) for p in PYTHON["hidden"]])
    for p in PYTHON["hidden"]:
        assert os.listdir(p)  # on the host it is not empty: the check above means something


def test_check_config_reports_the_python():
    require_sandbox()
    out = subprocess.run([DAEMON, "--check-config"], capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "embedded python: %s, from %s" % (PYTHON["version"], PYTHON["interpreter"]) in out.stdout
    for p in PYTHON["runtime"]:
        assert "    %s: present;" % p in out.stdout, out.stdout
    for p in PYTHON["hidden"]:
        assert "    %s: hidden" % p in out.stdout, out.stdout
