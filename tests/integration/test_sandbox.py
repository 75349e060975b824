"""Core slice: what the code inside a worker can and cannot reach. All of it depends on
how the worker was made (both start modes, rootless) and on the CPython it runs."""
import os
import secrets

import pytest

from testlib import raised, runtime_ancestors, unavailable, value

pytestmark = [pytest.mark.start_mode, pytest.mark.rootless, pytest.mark.python]

TMP_BYTES = 1048576
SHARED_POLICY = "tmpBytes: %d\n" % TMP_BYTES


def attempts(conn, code):
    """{attempt: what came of it}: code builds a dict r of them and ends with sorted(r.items())."""
    return dict(eval(value(conn.execute(code))))


def assert_all_refused(got):
    """Every attempt in got failed with PermissionError or OSError."""
    for name, what in got.items():
        assert what in ("PermissionError", "OSError"), (name, what)


def test_no_network_sockets(shared_conn):
    code = """import socket
r = {}
for name in ('AF_INET', 'AF_INET6', 'AF_UNIX', 'AF_NETLINK', 'AF_PACKET'):
    try:
        s = socket.socket(getattr(socket, name), socket.SOCK_DGRAM if name == 'AF_NETLINK' else socket.SOCK_STREAM)
        r[name] = 'created'
        s.close()
    except OSError as e:
        r[name] = type(e).__name__
for name in ('AF_INET', 'AF_INET6', 'AF_UNIX'):
    try:
        socket.socketpair(getattr(socket, name))
        r['socketpair ' + name] = 'created'
    except OSError as e:
        r['socketpair ' + name] = type(e).__name__
sorted(r.items())
"""
    got = attempts(shared_conn, code)
    # A connected AF_UNIX pair (asyncio's self-pipe) is the one socket a worker may have.
    assert got.pop("socketpair AF_UNIX") == "created"
    assert set(got) == {"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK", "AF_PACKET", "socketpair AF_INET",
                        "socketpair AF_INET6"}
    assert_all_refused(got)


@pytest.mark.parametrize("code", [
    "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)",
    "import os\nos.fork()",
    # /usr/bin/python3 is not in the worker's root: any error but EPERM would mean the
    # fork itself succeeded.
    "import subprocess\nsubprocess.run(['/usr/bin/python3', '-c', 'print(1)'])",
    "import os\nos.posix_spawn('/usr/bin/python3', ['python3'], {})",
], ids=["af_inet", "fork", "subprocess", "posix_spawn"])
def test_raises_permission_error(shared_conn, code):
    raised(shared_conn.execute(code), "PermissionError")


EXISTING_EXECUTABLE = """import glob, os
exe = sorted(glob.glob('/usr/lib/x86_64-linux-gnu/ld-linux-*.so*') + glob.glob('/lib64/ld-linux-*.so*'))[0]
assert os.access(exe, os.X_OK), exe
"""


def test_no_exec(shared_conn):
    # Exec a file that exists and is executable in the worker's root: the runner's guard
    # answers first (test_forbidden.py has its message), the filter below it.
    r = shared_conn.execute(EXISTING_EXECUTABLE + "os.execv(exe, [exe, '--version'])")
    assert r["outcome"] == "python_exception", (r["outcome"], r.get("detail"), r.get("exception"))
    assert r["exception"]["type"] == "PermissionError"


def test_the_filter_answers_around_the_runners_guards(shared_conn):
    # The C library's fork, execv (of a file that exists and is executable in the
    # worker's root) and socket, called past the runner's guards: -1 with EPERM from
    # the filter (errno mode).
    code = EXISTING_EXECUTABLE + """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def call(f, *args):
    ctypes.set_errno(0)
    return f(*args), ctypes.get_errno()
argv = (ctypes.c_char_p * 3)(exe.encode(), b'--version', None)
[call(libc.fork), call(libc.execv, exe.encode(), argv), call(libc.socket, 2, 1, 0)]"""
    assert value(shared_conn.execute(code)) == "[(-1, 1), (-1, 1), (-1, 1)]"


def test_os_system_runs_nothing(shared_conn):
    # os.system raises (the runner's guard; glibc's system() would report the failed
    # spawn as exit status 127, 32512); nothing runs.
    r = shared_conn.execute("import os\nos.system('echo from-the-shell; echo from-the-shell >&2')")
    assert r["outcome"] == "python_exception", (r["outcome"], r.get("detail"), r.get("exception"))
    assert r["exception"]["type"] == "PermissionError"
    assert "from-the-shell" not in r["stdout"]["text"]
    assert "from-the-shell" not in r["stderr"]["text"]


def test_threads_still_work(shared_conn):
    # Control for the fork/exec tests: clone(CLONE_THREAD) is allowed.
    code = "import threading\nout = []\nt = threading.Thread(target=lambda: out.append(6 * 7))\nt.start(); t.join()\nout"
    assert value(shared_conn.execute(code)) == "[42]"


@pytest.fixture
def host_canaries():
    """Files on the host, with random names and contents, that the worker must not see."""
    token = secrets.token_hex(12)
    paths = ["/tmp/codeinterp-canary-%s" % token, "/root/codeinterp-canary-%s" % token,
             "/var/tmp/codeinterp-canary-%s" % token]
    made = []
    try:
        for p in paths:
            try:
                with open(p, "w") as f:
                    f.write("secret-%s\n" % token)
                made.append(p)
            except OSError:
                pass  # e.g. a read-only /usr on this host
        assert made[:2] == paths[:2]
        yield token, made
    finally:
        for p in made:
            os.unlink(p)


def test_host_files_invisible(shared_supervisor, shared_conn, host_canaries):
    msup = shared_supervisor()
    token, paths = host_canaries
    sock_dir = os.path.dirname(msup.socket)
    code = """import os
token = %r
found = []
for root, dirs, files in os.walk('/'):
    for n in dirs + files:
        if token in n:
            found.append(os.path.join(root, n))
checks = {p: os.path.exists(p) for p in %r}
checks['/etc/shadow'] = os.path.exists('/etc/shadow')
checks['/etc/hostname'] = os.path.exists('/etc/hostname')
checks['/proc'] = os.path.exists('/proc')
checks['/sys'] = os.path.exists('/sys')
checks['/root'] = os.path.exists('/root')
checks[%r] = os.path.exists(%r)
checks[%r] = os.path.exists(%r)
# The worker's own account file, not the host's.
checks['host /etc/passwd'] = 'daemon:x:1:' in open('/etc/passwd').read()
(found, sorted(k for k, v in checks.items() if v))
""" % (token, paths, msup.socket, msup.socket, sock_dir, sock_dir)
    # The host paths really exist (the test would be vacuous otherwise).
    for p in paths:
        assert os.path.exists(p)
    assert os.path.exists(msup.socket) and os.path.exists("/etc/passwd")
    # /root exists in the worker only as the empty path to a pyenv interpreter's binds.
    visible = sorted(p for p in ("/root",) if p in runtime_ancestors())
    assert value(shared_conn.execute(code)) == "([], %r)" % visible


def test_root_and_inputs_read_only(shared_conn):
    code = """import errno
r = []
for p in ('/x', '/usr/x', '/usr/lib/x', '/inputs/x', '/dev/x', '/lib/x'):
    try:
        with open(p, 'w') as f:
            f.write('x')
        r.append((p, 'written'))
    except OSError as e:
        r.append((p, errno.errorcode.get(e.errno, e.errno)))
try:
    import os
    os.mkdir('/newdir')
    r.append(('/newdir', 'written'))
except OSError as e:
    r.append(('/newdir', errno.errorcode.get(e.errno, e.errno)))
r
"""
    got = eval(value(shared_conn.execute(code)))
    assert len(got) == 7
    for path, what in got:
        assert what in ("EROFS", "EACCES", "EPERM"), (path, what)


def test_tmp_writable(shared_conn):
    code = """with open('/tmp/data.bin', 'wb') as f:
    f.write(b'x' * 300000)
import os
os.path.getsize('/tmp/data.bin')
"""
    assert value(shared_conn.execute(code)) == "300000"


def test_tmp_size_capped(shared_conn):
    code = """with open('/tmp/big.bin', 'wb') as f:
    for i in range(%d):
        f.write(b'y' * 65536)
""" % (2 * TMP_BYTES // 65536)
    r = shared_conn.execute(code)
    assert r["outcome"] == "python_exception", r.get("outcome")
    exc = r["exception"]
    assert exc["type"] == "OSError"
    assert "[Errno 28]" in exc["message"]["text"]  # ENOSPC
    assert r["limit"] is None


def test_not_root(shared_conn):
    uid, euid, gid, egid = eval(value(shared_conn.execute("import os\n(os.getuid(), os.geteuid(), os.getgid(), os.getegid())")))
    assert 0 not in (uid, euid, gid, egid)
    assert (uid, gid) == (65534, 65534)  # workerUid/workerGid defaults


def test_cannot_regain_privileges(shared_conn):
    code = """import os
r = {}
for name, f in (('setuid', lambda: os.setuid(0)), ('setgid', lambda: os.setgid(0)),
                ('setgroups', lambda: os.setgroups([0])), ('chroot', lambda: os.chroot('/tmp')),
                ('sethostname', lambda: __import__('socket').sethostname('x'))):
    try:
        f()
        r[name] = 'succeeded'
    except OSError as e:
        r[name] = type(e).__name__
sorted(r.items())
"""
    got = attempts(shared_conn, code)
    assert got["setuid"] == "PermissionError"
    assert got["chroot"] == "PermissionError"
    assert_all_refused(got)


def test_setuid_zero_raises(shared_conn):
    r = shared_conn.execute("import os\nos.setuid(0)")
    raised(r, "PermissionError")


def test_hostname(shared_conn):
    assert value(shared_conn.execute("import socket, os\n(socket.gethostname(), os.uname().nodename)")) == \
        "('codeinterp', 'codeinterp')"


def test_environment_is_minimal(shared_conn):
    got = eval(value(shared_conn.execute("import os\nsorted((k, os.environ[k]) for k in os.environ)")))
    # LANG (LC_* when CPython coerces the locale), and the worker's own account.
    assert dict(got).items() >= {"HOME": "/tmp", "USER": "sandbox", "LOGNAME": "sandbox"}.items(), got
    assert {k for k, _ in got} <= {"LANG", "LC_ALL", "LC_CTYPE", "HOME", "USER", "LOGNAME"}, got


@pytest.mark.parametrize("module", ["pip", "ensurepip", "venv"])
def test_package_installers_unavailable(shared_conn, module):
    r = shared_conn.execute("import %s" % module)
    assert r["outcome"] == "python_exception"
    assert r["exception"]["type"] in ("ImportError", "ModuleNotFoundError")


def test_package_installer_import_error_catchable(shared_conn):
    code = """r = []
for name in ('pip', 'ensurepip'):
    try:
        __import__(name)
        r.append('imported')
    except ImportError:
        r.append('ImportError')
r
"""
    assert value(shared_conn.execute(code)) == "['ImportError', 'ImportError']"


def test_code_sees_only_its_own_descriptors(shared_conn):
    """The code finds stdin, stdout, stderr, the report and the result open, and nothing
    else: not the plan, the /outputs mount, the runtime's or the zygote's descriptors,
    nor the Landlock ruleset a pre-started worker built before its call (closed once
    applied; every other descriptor is closed around it before)."""
    code = """import os
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
[fd for fd in range(1024) if is_open(fd)]"""
    for _ in range(3):
        assert value(shared_conn.execute(code)) == "[0, 1, 2, 3, 4]"


def test_landlock_fence_inside_the_minimal_root(shared_conn):
    """Landlock (where the kernel has it) fences the worker inside its root: writes only
    to /tmp and /dev/null. A device opened for writing is the one write the read-only
    mounts do not stop (devices ignore a read-only mount), so it shows the fence;
    ordinary file work in /tmp still works."""
    r = shared_conn.execute("open('/dev/urandom', 'wb').write(b'entropy?')")
    abi = r["evidence"]["runtime"]["landlock"]
    if abi == 0:
        unavailable("the kernel offers no Landlock")
    assert r["outcome"] == "python_exception", r
    assert r["exception"]["type"] == "PermissionError"
    r = shared_conn.execute("import os, shutil, tempfile\n"
                      "d = tempfile.mkdtemp()\n"
                      "open(d + '/a', 'w').write('x')\n"
                      "os.rename(d + '/a', '/tmp/b')\n"
                      "os.symlink('/tmp/b', '/tmp/c')\n"
                      "shutil.copy2('/tmp/b', '/tmp/d')\n"
                      "os.truncate('/tmp/d', 0)\n"
                      "shutil.rmtree(d)\n"
                      "open('/dev/null', 'w').write('gone')\n"
                      "sorted(os.listdir('/tmp')), open('/tmp/c').read(), os.path.getsize('/tmp/d')")
    assert r["outcome"] == "ok", (r["outcome"], r.get("exception"))
    assert r["result"]["text"] == "(['b', 'c', 'd'], 'x', 0)"
