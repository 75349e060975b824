"""The shared context of an attack (ctx) and the prelude every snippet runs after. The
supervisors and connections are the tests' one helper module's (tests/lib/testlib)."""
import secrets

# The marker an attempt prints when its attack worked: "ESCAPED-<token>". The token is
# random per run and appears in the snippet only reversed, so no traceback or echo of the
# source can contain the marker.
TOKEN = secrets.token_hex(8)
MARKER = "ESCAPED-" + TOKEN
ENV_CANARY_NAME = "CODEINTERP_ADV_CANARY"

PRELUDE = r'''
import os as _os, sys as _sys
_T = %(rtoken)r[::-1]
CTX = %(ctx)r


def escaped(why=""):
    _sys.stdout.write("ESCAPED-" + _T + " " + str(why) + "\n")
    _sys.stdout.flush()


def syscall(nr, *args):
    """A raw system call through libc's syscall(): (return value, errno)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    f = libc.syscall
    f.restype = ctypes.c_long
    conv = []
    for a in args:
        if isinstance(a, int):
            conv.append(ctypes.c_long(a))
        elif isinstance(a, (bytes, str)):
            conv.append(ctypes.c_char_p(a.encode() if isinstance(a, str) else a))
        else:
            conv.append(a)
    ctypes.set_errno(0)
    r = f(ctypes.c_long(nr), *conv)
    return r, ctypes.get_errno()


def reached(nr, *args):
    """True when a system call got past any filter to its kernel implementation: it
    succeeded or failed with an errno other than EPERM (a filter's or a missing
    capability's answer) and ENOSYS (the filter's default answer)."""
    r, e = syscall(nr, *args)
    return r >= 0 or e not in (1, 38)
'''


def prelude(ctx):
    return PRELUDE % {"rtoken": TOKEN[::-1], "ctx": ctx}


def program(attempt, ctx):
    return prelude(ctx) + "\n" + attempt.code.strip() + "\n"


def has_marker(*texts):
    return any(t and MARKER in t for t in texts)
