"""The standard library as agents write it (issue 21, docs/security.md "What the worker's
root holds"): time zones, a home and a writable working directory, the worker's own
account, the C.UTF-8 locale, asyncio's event loop, a pool of 32 threads, the CPU clock
of the main thread, the MIME types table. Each is checked by what a program does with
it, under both profiles, both start modes (the start_mode marker) and in kill mode,
where a denied system call on the way would kill the worker instead of raising.

And what stays closed around the additions: only a connected AF_UNIX pair of sockets,
no other family; the added files are read-only; no host account is visible; chown and
setpriority, allowed for what programs expect of them, change nothing."""
import ast

import pytest

from testlib import running_supervisor, value

pytestmark = [pytest.mark.start_mode, pytest.mark.python]

PROFILES = ["reviewed", "data", "kill"]

# Each case: an expression evaluated in one call; its repr is compared.
CASES = {
    "zoneinfo": (
        "__import__('datetime').datetime(2026, 7, 1, 12, tzinfo=__import__('zoneinfo').ZoneInfo('Europe/Berlin'))"
        ".utcoffset().total_seconds()", "7200.0"),
    "zoneinfo_winter": (
        "__import__('datetime').datetime(2026, 1, 1, 12, tzinfo=__import__('zoneinfo').ZoneInfo('America/New_York'))"
        ".tzname()", "'EST'"),
    "available_timezones": ("len(__import__('zoneinfo').available_timezones()) > 300", "True"),
    "home": ("str(__import__('pathlib').Path.home())", "'/tmp'"),
    "expanduser": ("__import__('os').path.expanduser('~/x.csv')", "'/tmp/x.csv'"),
    "getuser": ("__import__('getpass').getuser()", "'sandbox'"),
    "pwd": ("(lambda p: (p.pw_name, p.pw_dir))(__import__('pwd').getpwuid(__import__('os').getuid()))",
            "('sandbox', '/tmp')"),
    "grp": ("__import__('grp').getgrgid(__import__('os').getgid()).gr_name", "'sandbox'"),
    # Only the names every Linux has besides the worker's own: nothing of the host's.
    # (nobody: the worker's own id in some configurations, then its account is sandbox.)
    "accounts": ("sorted({p.pw_name for p in __import__('pwd').getpwall()} - {'nobody'})", "['root', 'sandbox']"),
    "groups": ("sorted({g.gr_name for g in __import__('grp').getgrall()} - {'nogroup'})", "['root', 'sandbox']"),
    "root_by_id": ("(__import__('pwd').getpwuid(0).pw_dir, __import__('grp').getgrgid(0).gr_name)",
                   "('/nonexistent', 'root')"),
    # chown to its own ids is answered as on any host; nice can lower its priority.
    "chown_own": ("(open('c.txt', 'w').close(), __import__('shutil').chown('c.txt', 'sandbox', 'sandbox'))[1]",
                  "None"),
    "nice_lower": ("(lambda os: os.nice(1) == os.nice(0))(__import__('os'))", "True"),
    "tcgetpgrp_bad_fd": ("__import__('os').tcgetpgrp(-1)",
                         "OSError: [Errno 9] Bad file descriptor"),
    "cwd": ("__import__('os').getcwd()", "'/tmp'"),
    "write_relative": ("(open('results.txt', 'w').write('a,b\\n'), open('/tmp/results.txt').read())",
                       "(4, 'a,b\\n')"),
    "setlocale": ("__import__('locale').setlocale(__import__('locale').LC_ALL, 'C.UTF-8')", "'C.UTF-8'"),
    "locale_strcoll": ("(__import__('locale').setlocale(__import__('locale').LC_COLLATE, 'C.UTF-8'), "
                       "sorted(['b', 'a', 'B'], key=__import__('locale').strxfrm))[1]", "['B', 'a', 'b']"),
    "asyncio_gather": ("asyncio_gather()", "[0, 1, 2, 3, 4]"),
    "asyncio_queue": ("asyncio_queue()", "[0, 1, 2]"),
    "asyncio_to_thread": ("__import__('asyncio').run(__import__('asyncio').to_thread(pow, 2, 10))", "1024"),
    "thread_pool_32": ("sorted(__import__('concurrent.futures').futures.ThreadPoolExecutor(32)"
                       ".map(thread_work, range(32)))[-1]", "31"),
    "main_thread_cpu_clock": ("__import__('time').clock_gettime(__import__('time').pthread_getcpuclockid("
                              "__import__('threading').get_ident())) >= 0", "True"),
    "thread_time": ("__import__('time').thread_time() >= 0", "True"),
    "mimetypes": ("(__import__('mimetypes').init(), len(__import__('mimetypes').types_map) > 1000)[1]", "True"),
    "mimetypes_csv": ("__import__('mimetypes').guess_type('a.csv')[0]", "'text/csv'"),
    "env": ("{k: __import__('os').environ.get(k) for k in ('HOME', 'USER', 'LOGNAME')}",
            "{'HOME': '/tmp', 'USER': 'sandbox', 'LOGNAME': 'sandbox'}"),
    "socket_repr": ("'socket.socket' in repr(__import__('socket').socketpair()[0])", "True"),
}

PRELUDE = r"""
import threading
def thread_work(i):
    threading.Event().wait(0.01)
    return i
def asyncio_gather():
    import asyncio
    async def main():
        return await asyncio.gather(*[asyncio.sleep(0, result=i) for i in range(5)])
    return asyncio.run(main())
def asyncio_queue():
    import asyncio
    async def main():
        q = asyncio.Queue()
        async def produce():
            for i in range(3):
                await q.put(i)
        await asyncio.gather(produce())
        return [q.get_nowait() for _ in range(3)]
    return asyncio.run(main())
def probe(f):
    try:
        return repr(f())
    except BaseException as e:
        return "%s: %s" % (type(e).__name__, e)
"""


@pytest.fixture(scope="module", params=PROFILES)
def sup(request):
    if request.param == "reviewed":
        policy = None
    elif request.param == "kill":
        policy = "seccompDenyAction: kill\n"
    else:
        from test_datastack import data_policy, require_stack
        require_stack()
        policy = data_policy() + "timeoutMs: 120000\n"
    with running_supervisor(policy) as s:
        yield s


def run(sup, cases):
    code = PRELUDE + "{\n" + "".join("    %r: probe(lambda: %s),\n" % (k, e) for k, e in cases.items()) + "}"
    c = sup.connect()
    try:
        r = c.execute(code)
    finally:
        c.close()
    return ast.literal_eval(value(r))


def test_what_ordinary_programs_expect_works(sup):
    got = run(sup, {k: e for k, (e, _) in CASES.items()})
    wrong = {k: (got.get(k), want) for k, (_, want) in CASES.items() if got.get(k) != want}
    assert not wrong, "\n".join("%s\n  got      %s\n  expected %s" % (k, g, w) for k, (g, w) in wrong.items())


CLOSED = {
    # Only a connected AF_UNIX pair: no other family, no socket of its own.
    "socketpair_inet": "__import__('socket').socketpair(__import__('socket').AF_INET)",
    "socket_unix": "__import__('_socket').socket.__mro__[-2](1, 1, 0)",
    # The pair carries no descriptors and no addresses.
    "sendmsg_fds": ("(lambda a, b: a.sendmsg([b'x'], [(__import__('socket').SOL_SOCKET, "
                    "__import__('socket').SCM_RIGHTS, __import__('array').array('i', [0]))]))"
                    "(*__import__('socket').socketpair())"),
    "recv_peek": "(lambda a, b: (a.send(b'x'), b.recv(1, __import__('socket').MSG_PEEK)))(*__import__('socket').socketpair())",
    # What was added to the root is read-only.
    "write_zoneinfo": "open('/usr/share/zoneinfo/UTC', 'ab')",
    "write_passwd": "open('/etc/passwd', 'a')",
    "write_mime": "open('/etc/mime.types', 'a')",
    "new_etc_file": "open('/etc/hosts', 'w')",
    "fifo": "__import__('os').mkfifo('/tmp/f')",
    # Nothing to gain from the allowed chown and setpriority: RLIMIT_NICE is 0, the
    # namespace maps no other id, and no capability is left.
    "nice_raise": "__import__('os').setpriority(__import__('os').PRIO_PROCESS, 0, -1)",
    "chown_root": "(open('r.txt', 'w').close(), __import__('os').chown('r.txt', 0, 0))",
    "chown_host_id": "(open('h.txt', 'w').close(), __import__('os').chown('h.txt', 1, -1))",
    "chown_input": "__import__('os').chown('/usr/lib', __import__('os').getuid(), -1)",
}
CLOSED_ERRORS = {
    "socketpair_inet": "PermissionError: [Errno 1] Operation not permitted",
    "socket_unix": "PermissionError: [Errno 1] Operation not permitted",
    "sendmsg_fds": "PermissionError: [Errno 1] Operation not permitted",
    "recv_peek": "PermissionError: [Errno 1] Operation not permitted",
    "write_zoneinfo": "PermissionError: [Errno 13] Permission denied: '/usr/share/zoneinfo/UTC'",
    "write_passwd": "OSError: [Errno 30] Read-only file system: '/etc/passwd'",
    "write_mime": "PermissionError: [Errno 13] Permission denied: '/etc/mime.types'",
    "new_etc_file": "OSError: [Errno 30] Read-only file system: '/etc/hosts'",
    "fifo": "PermissionError: [Errno 1] Operation not permitted",
    "nice_raise": "PermissionError: [Errno 13] Permission denied",
    "chown_root": "OSError: [Errno 22] Invalid argument: 'r.txt'",  # no id but its own is mapped
    "chown_host_id": "OSError: [Errno 22] Invalid argument: 'h.txt'",
    "chown_input": "OSError: [Errno 30] Read-only file system: '/usr/lib'",
}


@pytest.mark.parametrize("profile", ["reviewed", "data"])
def test_what_stays_closed_around_the_additions(shared_supervisor, profile):
    if profile == "reviewed":
        s = shared_supervisor(None)
    else:
        from test_datastack import data_policy, require_stack
        require_stack()
        s = shared_supervisor(data_policy() + "timeoutMs: 120000\n")
    got = run(s, CLOSED)
    wrong = {k: (got.get(k), want) for k, want in CLOSED_ERRORS.items() if got.get(k) != want}
    assert not wrong, "\n".join("%s\n  got      %s\n  expected %s" % (k, g, w) for k, (g, w) in wrong.items())


@pytest.mark.parametrize("case", ["socketpair_inet", "sendmsg_fds", "recv_peek"])
def test_kill_mode_kills_what_the_pair_may_not_do(shared_supervisor, case):
    """In kill mode the denied forms are fatal, whatever the runner says first."""
    s = shared_supervisor("seccompDenyAction: kill\n")
    c = s.connect()
    try:
        r = c.execute("import socket, array\n" + CLOSED[case])
    finally:
        c.close()
    assert r.get("outcome") == "worker_error", r
