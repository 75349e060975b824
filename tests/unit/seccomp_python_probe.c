/* SPDX-License-Identifier: MIT */
/* Does embedded CPython work under the worker's seccomp filter? Not a cmocka test: a
 * standalone program that sets no_new_privs, loads the filter, and only then initialises
 * CPython (isolated configuration, no site, home = the embedded Python's prefix) and runs
 * a snippet that imports the stdlib modules calculations use, does file I/O in /tmp, runs threads, and uses
 * random/hashlib/decimal. Exits 0 on success.
 *
 *   cc -std=gnu17 -D_GNU_SOURCE -I. tests/unit/seccomp_python_probe.c policy/seccomp.c \
 *      $(pkg-config --cflags --libs python3-embed) -lseccomp -o /tmp/seccomp_python_probe
 *   /tmp/seccomp_python_probe          # errno mode; also checks what must be denied
 *   /tmp/seccomp_python_probe kill     # kill mode; any stray syscall kills it (SIGSYS)
 *   strace -f -e trace=all -e status=failed /tmp/seccomp_python_probe   # what was refused
 *
 * The build passes the prefix of CODEINTERP_PYTHON (cmake/python.cmake); by hand, add
 * -DCODEINTERP_PY_PREFIX='"/usr"' for Debian's python3. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "policy/seccomp.h"

#ifndef CODEINTERP_PY_PREFIX
#define CODEINTERP_PY_PREFIX "/usr"
#endif

static const char probe_common[] =
        "import sys\n"
        "import math, statistics, json, csv, re, decimal, fractions, datetime, collections, itertools\n"
        "import functools, random, hashlib, zlib, struct, array, bisect, heapq, string, textwrap\n"
        "import unicodedata, io, os, pathlib, tempfile, glob, shutil, time, threading, operator\n"
        "import concurrent.futures, queue, copy, pprint, dataclasses, enum, typing, numbers, cmath\n"
        "import base64, binascii, codecs, locale, calendar, zoneinfo, difflib, fnmatch, uuid\n"
        "import contextlib, weakref, abc, gc, traceback, warnings, platform, sqlite3, ctypes\n"
        "import subprocess, socket, select, signal, errno, mmap, pickle, lzma, bz2, gzip, zipfile, tarfile\n"
        "\n"
        "assert statistics.mean([1, 2, 3, 4]) == 2.5\n"
        "assert math.isclose(math.sqrt(2) ** 2, 2)\n"
        "assert fractions.Fraction(1, 3) + fractions.Fraction(1, 6) == fractions.Fraction(1, 2)\n"
        "decimal.getcontext().prec = 50\n"
        "assert str(decimal.Decimal(1) / decimal.Decimal(7)).startswith('0.142857142857')\n"
        "assert json.loads(json.dumps({'a': [1, 2.5, None]})) == {'a': [1, 2.5, None]}\n"
        "buf = io.StringIO(); csv.writer(buf).writerow(['x', 'y,z']); buf.seek(0)\n"
        "assert next(csv.reader(buf)) == ['x', 'y,z']\n"
        "assert re.fullmatch(r'(\\d+)-(\\w+)', '12-ab').group(2) == 'ab'\n"
        "datetime.datetime.now(); datetime.date.today(); time.localtime(); time.strftime('%Y')\n"
        "assert datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc).timestamp() == 1704067200\n"
        "random.seed(); random.random(); random.SystemRandom().random(); assert len(os.urandom(16)) == 16\n"
        "assert hashlib.sha256(b'abc').hexdigest().startswith('ba7816bf')\n"
        "hashlib.md5(b'x').hexdigest(); hashlib.sha1(b'x'); hashlib.blake2b(b'x'); hashlib.sha3_256(b'x')\n"
        "hashlib.new('sha512', b'x'); hashlib.pbkdf2_hmac('sha256', b'p', b's', 1000)\n"
        "assert zlib.decompress(zlib.compress(b'x' * 1000)) == b'x' * 1000\n"
        "assert lzma.decompress(lzma.compress(b'abc')) == b'abc' and bz2.decompress(bz2.compress(b'a')) == b'a'\n"
        "assert struct.unpack('<I', struct.pack('<I', 7)) == (7,)\n"
        "a = array.array('d', [3.0, 1.0, 2.0]); assert sorted(a) == [1.0, 2.0, 3.0]\n"
        "h = [5, 1, 3]; heapq.heapify(h); assert heapq.heappop(h) == 1 and bisect.bisect([1, 2, 3], 2) == 2\n"
        "assert textwrap.fill('a b c', 3) == 'a b\\nc' and string.ascii_lowercase[0] == 'a'\n"
        "assert unicodedata.name('\\u00e9') == 'LATIN SMALL LETTER E WITH ACUTE'\n"
        "assert collections.Counter('aab')['a'] == 2 and list(itertools.islice(itertools.count(), 3)) == [0, 1, 2]\n"
        "assert functools.reduce(operator.add, range(10)) == 45\n"
        "time.sleep(0.01); time.process_time(); time.thread_time(); time.perf_counter(); time.monotonic()\n"
        "os.cpu_count(); os.getpid(); os.uname(); os.times(); os.getcwd(); os.umask(0o022)\n"
        "platform.system(); platform.python_version(); calendar.monthrange(2024, 2); uuid.uuid4()\n"
        "pickle.loads(pickle.dumps({'x': (1, 2)}))\n"
        "con = sqlite3.connect(':memory:'); con.execute('create table t (x)'); con.close()\n"
        "\n"
        "# threads\n"
        "results = []\n"
        "lock = threading.Lock()\n"
        "def work(n):\n"
        "    s = sum(i * i for i in range(n))\n"
        "    with lock:\n"
        "        results.append(s)\n"
        "ts = [threading.Thread(target=work, args=(10000 + i,)) for i in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "assert len(results) == 8\n"
        "ev = threading.Event(); assert not ev.wait(0.01)\n"
        "assert lock.acquire(timeout=0.01); lock.release()\n"
        "with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
        "    assert list(ex.map(lambda x: x * 2, range(10))) == [x * 2 for x in range(10)]\n"
        "q = queue.Queue(); q.put(1); assert q.get(timeout=1) == 1\n"
        "threading.get_native_id(); threading.current_thread().name\n"
        "\n"
        "# files in /tmp\n"
        "with open('/tmp/seccomp-probe-%d.txt' % os.getpid(), 'w') as f:\n"
        "    f.write('hello\\n')\n"
        "with open(f.name) as g:\n"
        "    assert g.read() == 'hello\\n'\n"
        "os.unlink(f.name)\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    p = pathlib.Path(d)\n"
        "    (p / 'a.txt').write_text('abc')\n"
        "    (p / 'sub').mkdir()\n"
        "    (p / 'sub' / 'b.bin').write_bytes(bytes(range(256)))\n"
        "    assert (p / 'a.txt').read_text() == 'abc' and (p / 'a.txt').stat().st_size == 3\n"
        "    assert sorted(x.name for x in p.iterdir()) == ['a.txt', 'sub']\n"
        "    assert len(glob.glob(d + '/**/*', recursive=True)) == 3 and len(list(p.rglob('*.bin'))) == 1\n"
        "    shutil.copy(p / 'a.txt', p / 'c.txt'); shutil.copy2(p / 'a.txt', p / 'd.txt')\n"
        "    shutil.copyfile(p / 'sub' / 'b.bin', p / 'e.bin')\n"
        "    assert (p / 'e.bin').read_bytes() == bytes(range(256))\n"
        "    shutil.copytree(p / 'sub', p / 'sub2'); shutil.move(str(p / 'c.txt'), str(p / 'sub2'))\n"
        "    os.rename(p / 'd.txt', p / 'f.txt'); os.symlink('f.txt', p / 'link')\n"
        "    assert os.readlink(p / 'link') == 'f.txt'\n"
        "    os.chmod(p / 'f.txt', 0o600); os.utime(p / 'f.txt', (1e9, 1e9))\n"
        "    assert os.stat(p / 'f.txt').st_mtime == 1e9\n"
        "    assert sum(len(files) for _, _, files in os.walk(d)) == 7\n"
        "    with zipfile.ZipFile(p / 'z.zip', 'w') as z: z.write(p / 'f.txt', 'f.txt')\n"
        "    with gzip.open(p / 'g.gz', 'wt') as z: z.write('x')\n"
        "    with open(p / 'f.txt', 'r+b') as fh:\n"
        "        m = mmap.mmap(fh.fileno(), 0); assert m[:3] == b'abc'; m.close()\n"
        "    shutil.rmtree(p / 'sub2'); shutil.disk_usage(d)\n"
        "with tempfile.NamedTemporaryFile('w+') as nt:\n"
        "    nt.write('x'); nt.flush(); nt.seek(0); assert nt.read() == 'x'\n"
        "fd, name = tempfile.mkstemp(); os.write(fd, b'y'); os.close(fd); os.unlink(name)\n"
        "r, w = os.pipe(); os.write(w, b'z'); assert os.read(r, 1) == b'z'; os.close(r); os.close(w)\n"
        "sys.stdout.write('probe: common checks passed\\n'); sys.stdout.flush()\n";

/* Only in errno mode: in kill mode these would (correctly) kill the probe. */
static const char probe_denied[] =
        "import os, socket, subprocess\n"
        "def denied(f, *a, **k):\n"
        "    try:\n"
        "        f(*a, **k)\n"
        "    except PermissionError:\n"
        "        return\n"
        "    raise AssertionError('not denied: %r' % (f,))\n"
        "denied(socket.socket, socket.AF_INET, socket.SOCK_STREAM)\n"
        "denied(socket.socket, socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "denied(socket.socketpair, socket.AF_INET)\n"
        "a, b = socket.socketpair()  # AF_UNIX: asyncio's self-pipe\n"
        "a.send(b'x'); assert b.recv(1) == b'x'; a.close(); b.close()\n"
        "denied(os.fork)\n"
        "denied(subprocess.run, ['/bin/true'])\n"
        "denied(os.execv, '/bin/true', ['true'])\n"
        "denied(os.setuid, os.getuid())\n"
        "denied(os.setresuid, -1, -1, -1)\n"
        "# platform.platform()/uname().processor run `uname -p` in a subprocess: EPERM here,\n"
        "# which platform swallows; in kill mode the same call kills the worker.\n"
        "import platform; platform.platform()\n"
        "print('probe: denied checks passed')\n";

int main(int argc, char **argv) {
        PolicyDenyAction mode = POLICY_DENY_ERRNO;
        struct sock_fprog prog;
        PyConfig config;
        PyStatus status;
        int r;

        if (argc > 1 && strcmp(argv[1], "kill") == 0)
                mode = POLICY_DENY_KILL;
        else if (argc > 1) {
                fprintf(stderr, "usage: %s [errno|kill]\n", argv[0]);
                return 2;
        }

        r = policy_seccomp_compile(mode, &prog);
        if (r < 0) {
                fprintf(stderr, "probe: compile: %s\n", strerror(-r));
                return 1;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                perror("probe: PR_SET_NO_NEW_PRIVS");
                return 1;
        }
        r = policy_seccomp_load(&prog);
        policy_seccomp_fprog_free(&prog);
        if (r < 0) {
                fprintf(stderr, "probe: load: %s\n", strerror(-r));
                return 1;
        }

        PyConfig_InitIsolatedConfig(&config);
        config.site_import = 0;
        status = PyConfig_SetString(&config, &config.home, L"" CODEINTERP_PY_PREFIX);
        if (PyStatus_Exception(status))
                goto py_fail;
        status = Py_InitializeFromConfig(&config);
        if (PyStatus_Exception(status))
                goto py_fail;
        PyConfig_Clear(&config);

        r = PyRun_SimpleString(probe_common);
        if (r == 0 && mode == POLICY_DENY_ERRNO)
                r = PyRun_SimpleString(probe_denied);
        if (Py_FinalizeEx() < 0 && r == 0)
                r = -1;
        if (r != 0) {
                fprintf(stderr, "probe: FAILED (%s mode)\n", mode == POLICY_DENY_KILL ? "kill" : "errno");
                return 1;
        }
        printf("probe: OK (%s mode)\n", mode == POLICY_DENY_KILL ? "kill" : "errno");
        return 0;

py_fail:
        PyConfig_Clear(&config);
        fprintf(stderr, "probe: Python initialisation failed: %s\n", status.err_msg ? status.err_msg : "?");
        return 1;
}
