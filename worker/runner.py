# codeinterp runner: the worker's execution rule (show the value of a final
# expression statement) and its typed exception report.
#
# This file is embedded in the worker binary at build time (cmake/embed.cmake
# turns it into a C array; it is never read from disk at run time). pyrun_init()
# compiles it as "<codeinterp-runner>" and executes it once into a private
# namespace that is not a module in sys.modules, with these globals set:
#
#   __builtins__  a snapshot (copy) of the builtins dict
#   __name__      "codeinterp.runner"
#   _PATHS        the import path: (stdlib directory, lib-dynload directory,
#                 then the site directories of the policy's pythonPackages)
#   _PACKAGES     the policy's pythonPackages names (optional; empty: none)
#   _NUMERIC      the text of worker/codeinterp_numeric.py (embedded the same
#                 way), served to "import codeinterp_numeric" by the finder
#                 below
#
# Every stdlib object the runner needs is bound here, before any user code
# runs, so user code that deletes builtins or patches stdlib modules cannot
# break the report. The C side then calls run() once per call; see run() for
# the report it returns. tests/python/test_runner.py loads it the same way.
import sys as _sys
import ast as _ast
import errno as _errno
import time as _time
import __future__ as _future
import importlib.util as _importlib_util
import importlib.machinery as _importlib_machinery
import linecache as _shared_linecache
import builtins as _builtins
import _warnings

_G = globals()
_PATHS = tuple(_G["_PATHS"])
_FILENAME = "<code>"
_EFBIG = _errno.EFBIG
_ONLY_AST = _ast.PyCF_ONLY_AST
_Module = _ast.Module
_Expression = _ast.Expression
_Expr = _ast.Expr
_type_qualname = type.__dict__["__qualname__"].__get__
_type_module = type.__dict__["__module__"].__get__
_settrace = _sys.settrace
_setprofile = _sys.setprofile
_setrecursionlimit = _sys.setrecursionlimit
_RECURSION_LIMIT = _sys.getrecursionlimit()
_STREAMS = (_sys.stdout, _sys.stderr)
_sys_mod = _sys
_warning_filters = _warnings.filters
_filters_mutated = _warnings._filters_mutated
_QUIET = ("error", None, Warning, None, 0)


def _private_copy(name):
    spec = _importlib_util.find_spec(name)
    mod = _importlib_util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Private copies of linecache and traceback: patching the shared modules (or
# clearing the shared line cache) does not change how the report is formatted.
_linecache = _private_copy("linecache")
_traceback = _private_copy("traceback")
_traceback.linecache = _linecache
_cache = _linecache.cache
_format_exception = _traceback.format_exception
_format_exception_only = _traceback.format_exception_only

_FUTURE_MASK = 0
for _name in _future.all_feature_names:
    _FUTURE_MASK |= getattr(_future, _name).compiler_flag
del _name

_BLOCKED = frozenset(("pip", "ensurepip", "venv"))


class PackageInstallBlocker:
    """Meta path finder refusing the package installers."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: {_INSTALLS}",
                name=fullname)
        return None

    @staticmethod
    def invalidate_caches():
        pass


_NUMERIC_NAME = "codeinterp_numeric"
_NUMERIC_FILENAME = "<codeinterp_numeric>"
_NUMERIC_CODE = compile(_G["_NUMERIC"], _NUMERIC_FILENAME, "exec", dont_inherit=True)
_NUMERIC_LINES = _G["_NUMERIC"].splitlines(True)
# Its lines for tracebacks through it (see _register).
_NUMERIC_ENTRY = (len(_G["_NUMERIC"]), None, _NUMERIC_LINES, _NUMERIC_FILENAME)
# The module's own builtins: a copy per import of the builtins as they are now,
# so user code that deletes or replaces builtins does not reach the module's
# functions (and the module does not expose the runner's snapshot).
_NUMERIC_BUILTINS = dict(_G["__builtins__"])
_ModuleSpec = _importlib_machinery.ModuleSpec
_dict_copy = dict.copy
_dict_update = dict.update
del _G["_NUMERIC"]


class NumericModuleFinder:
    """Meta path finder and loader serving codeinterp_numeric from the text
    embedded in the worker binary (never from disk). Each import after the
    module was removed from sys.modules runs the compiled text again into a
    fresh module."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname != _NUMERIC_NAME:
            return None
        return _ModuleSpec(_NUMERIC_NAME, NumericModuleFinder, origin=_NUMERIC_FILENAME)

    @staticmethod
    def invalidate_caches():
        pass

    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        namespace = module.__dict__
        _dict_update(namespace, {"__builtins__": _dict_copy(_NUMERIC_BUILTINS)})
        exec(_NUMERIC_CODE, namespace)

    @staticmethod
    def get_source(fullname):
        return "".join(_NUMERIC_LINES) if fullname == _NUMERIC_NAME else None


_sys.meta_path.insert(0, NumericModuleFinder)
_sys.meta_path.insert(0, PackageInstallBlocker)
for _name in list(_sys.modules):
    if _name.partition(".")[0] in _BLOCKED:
        del _sys.modules[_name]
del _name
_sys.path[:] = list(_PATHS)
_sys.path_importer_cache.clear()


def _no_uname_subprocess():
    """platform.processor() runs `uname -p` in a subprocess, and pandas asks for it
    at import (pandas.compat, through platform.uname()). A worker can run no program
    (seccompDenyAction kill ends it at the vfork), so the answer is given here:
    '', which is what Debian's `uname -p` ("unknown") becomes."""
    import platform
    platform._Processor.get_linux = staticmethod(lambda: "")


# ---- What the sandbox forbids, and what the code is told ----
#
# The worker's seccomp filter is the enforcement: no process can be started, no socket
# made (so no connection and no name lookup), and with neither no package installed.
# Left to the kernel, code sees a bare "[Errno 1] Operation not permitted", a 32512
# from os.system(), or a FileNotFoundError from multiprocessing's semaphores (no
# /dev/shm). The guards below raise first, with one message per rule, as the exception
# a library expects there (OSError subclasses with the errno the kernel would give), so
# its own error handling still works. They are set when the runner is loaded (the
# zygote's workers inherit them) and are not a barrier: code that goes around them
# (ctypes, a saved original) meets the filter. docs/security.md, "What the code is told".

_PROCESSES = "no processes can be started in this sandbox; use threads or do the work in this program"
_NETWORK = ("there is no network in this sandbox: no connections and no name lookups; "
            "work with the data and files already here")
_INSTALLS = ("packages cannot be installed in this sandbox; use what is already here: the standard library"
             + "".join(", " + name for name in _G.get("_PACKAGES") or ()))
_EPERM = _errno.EPERM
_SHELL_PUNCTUATION = ";&|()<>'\"`="
_INSTALLERS = frozenset(("pip", "pip3", "conda", "mamba", "micromamba", "ensurepip", "easy_install"))


def _names_installer(words):
    """Whether a program's arguments (or a shell command line) name a package installer:
    pip (pip3, pip3.11, python -m pip), conda, mamba."""
    try:
        if type(words) in (str, bytes):
            words = (words,)
        for word in words:
            if type(word) is bytes:
                word = word.decode("utf-8", "replace")
            if type(word) is not str:
                continue
            for c in _SHELL_PUNCTUATION:
                word = word.replace(c, " ")
            for token in word.split():
                name = token.rpartition("/")[2]
                if name in _INSTALLERS or (name[:3] == "pip" and name[3:].strip("0123456789.") == ""):
                    return True
    except Exception:
        pass
    return False


def _argv_words(path, argv):
    return (path, *argv) if isinstance(argv, (list, tuple)) else (path,)


def _refuse_program(words=()):
    raise PermissionError(_EPERM, _INSTALLS if _names_installer(words) else _PROCESSES)


def _guard_processes():
    """Every stdlib way to start a program or a process: os.fork, forkpty, exec*,
    posix_spawn(p), system (and so os.spawn*, os.popen, pty) and _posixsubprocess.fork_exec
    (subprocess, multiprocessing's spawn and forkserver). Raising here also matters in
    kill mode: matplotlib runs fc-list when it builds its font list (in an exec-mode
    worker, at import) and handles the PermissionError, where the filter would end the
    worker."""
    import posix
    import os
    import _posixsubprocess

    def fork():
        _refuse_program()

    def forkpty():
        _refuse_program()

    def execv(path, argv):
        _refuse_program(_argv_words(path, argv))

    def execve(path, argv, env):
        _refuse_program(_argv_words(path, argv))

    def posix_spawn(path, argv, env, **kwargs):
        _refuse_program(_argv_words(path, argv))

    def posix_spawnp(path, argv, env, **kwargs):
        _refuse_program(_argv_words(path, argv))

    def system(command):
        _refuse_program(command)

    def fork_exec(args, executable_list, *rest, **kwargs):
        _refuse_program((*(args or ()), *(executable_list or ())))

    for f in (fork, forkpty, execv, execve, posix_spawn, posix_spawnp, system):
        f.__module__ = "posix"
        for mod in (posix, os):
            if hasattr(mod, f.__name__):
                setattr(mod, f.__name__, f)
    fork_exec.__module__ = "_posixsubprocess"
    _posixsubprocess.fork_exec = fork_exec


def _guard_network():
    """socket.socket (and _socket.socket under it) for any family, and the name lookups.
    A socket made from a descriptor (fileno=, socket.fromfd, the two ends of
    socket.socketpair(), which the filter may allow) is not refused here. Numeric
    addresses still resolve (getaddrinfo("127.0.0.1", 80) needs no network); a name
    raises socket.gaierror EAI_FAIL (a lookup that cannot succeed, not a temporary
    failure to retry)."""
    import _socket

    real_socket = _socket.socket
    real_getaddrinfo = _socket.getaddrinfo
    real_gethostbyname = _socket.gethostbyname
    real_gethostbyname_ex = _socket.gethostbyname_ex
    gaierror = _socket.gaierror
    herror = _socket.herror
    numeric = _socket.AI_NUMERICHOST
    eai_fail = _socket.EAI_FAIL
    eai_noname = _socket.EAI_NONAME

    class socket(real_socket):
        __slots__ = ()

        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None:
                raise PermissionError(_EPERM, _NETWORK)
            real_socket.__init__(self, family, type, proto, fileno)

    socket.__module__ = "_socket"

    def is_numeric(host):
        if host is None:
            return True
        try:
            real_getaddrinfo(host, None, 0, 0, 0, numeric)
        except gaierror as e:
            if e.errno == eai_noname:
                return False
        return True

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        if not is_numeric(host):
            raise gaierror(eai_fail, _NETWORK)
        return real_getaddrinfo(host, port, family, type, proto, flags | numeric)

    def gethostbyname(hostname):
        if not is_numeric(hostname):
            raise gaierror(eai_fail, _NETWORK)
        return real_gethostbyname(hostname)

    def gethostbyname_ex(hostname):
        if not is_numeric(hostname):
            raise gaierror(eai_fail, _NETWORK)
        return real_gethostbyname_ex(hostname)

    def gethostbyaddr(ip_address):
        if not is_numeric(ip_address):
            raise gaierror(eai_fail, _NETWORK)
        raise herror(3, _NETWORK)  # NO_RECOVERY: a reverse lookup is a name lookup

    for f in (getaddrinfo, gethostbyname, gethostbyname_ex, gethostbyaddr):
        f.__module__ = "_socket"
        setattr(_socket, f.__name__, f)
    _socket.socket = _socket.SocketType = socket


def _refuse_processes(*args, **kwargs):
    _refuse_program()


def _refuse_shared_memory(*args, **kwargs):
    """multiprocessing's locks, queues and thread pools work (their semaphores live in
    the worker's /dev/shm, the call's /tmp); shared memory is for other processes, and
    making it starts the resource tracker's."""
    raise PermissionError(
        _EPERM, _PROCESSES + " (multiprocessing's shared memory is for sharing with other processes: "
        "keep the data in this program)")


def _guard_process(module):
    module.BaseProcess.start = _refuse_processes


def _guard_shared_memory(module):
    module.SharedMemory.__init__ = _refuse_shared_memory


def _guard_pty(module):
    """pty.fork falls back to openpty() and os.fork() when os.forkpty() fails: its
    OSError would be "out of pty devices"."""
    module.fork = _refuse_processes


def _guard_process_pool(module):
    module.ProcessPoolExecutor.__init__ = _refuse_processes


def _guard_pandas_optional(module):
    """pandas' import_optional_dependency says "Use pip or conda to install X" for a
    missing optional package (openpyxl for read_excel, pyarrow for parquet, ...)."""
    real = module.import_optional_dependency
    mapping = getattr(module, "INSTALL_MAPPING", None) or {}

    def import_optional_dependency(name, extra="", errors="raise", min_version=None):
        try:
            return real(name, extra, errors, min_version)
        except ImportError as e:
            if "Use pip or conda" not in str(e):
                raise
            missing = mapping.get(name, name)
        raise ImportError(f"Missing optional dependency '{missing}'. {_INSTALLS}", name=missing)

    import_optional_dependency.__module__ = module.__name__
    import_optional_dependency.__doc__ = real.__doc__
    module.import_optional_dependency = import_optional_dependency


# Modules guarded when they are imported (their own code runs first).
_ON_IMPORT = {
    "multiprocessing.process": _guard_process,
    "multiprocessing.shared_memory": _guard_shared_memory,
    "concurrent.futures.process": _guard_process_pool,
    "pty": _guard_pty,
    "pandas.compat._optional": _guard_pandas_optional,
}


class ForbiddenActionGuard:
    """Meta path finder guarding the modules in _ON_IMPORT: it finds each with the
    finders after it and has the loader apply the guard once the module's code ran."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        guard = _ON_IMPORT.get(fullname)
        if guard is None:
            return None
        spec = None
        for finder in _sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is ForbiddenActionGuard or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = spec.loader if spec is not None else None
        if loader is None or isinstance(loader, type):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            guard(module)

        loader.exec_module = exec_module
        return spec

    @staticmethod
    def invalidate_caches():
        pass


if _G.get("_GUARDS", True):
    _guard_processes()
    _guard_network()
    for _name, _guard in _ON_IMPORT.items():
        if _name in _sys.modules:
            _guard(_sys.modules[_name])
    _sys.meta_path.insert(0, ForbiddenActionGuard)
    del _name, _guard

if _G.get("_PACKAGES"):
    _no_uname_subprocess()


def _decode(code):
    """UTF-8 source text with newlines normalised, or raise SyntaxError."""
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError as e:
        start = e.start
        lineno = code.count(b"\n", 0, start) + 1
        line_start = code.rfind(b"\n", 0, start) + 1
        line_end = code.find(b"\n", start)
        if line_end < 0:
            line_end = len(code)
        line = code[line_start:line_end].decode("utf-8", "backslashreplace")
        col = len(code[line_start:start].decode("utf-8", "backslashreplace")) + 1
        err = SyntaxError(f"(unicode error) {e}", (_FILENAME, lineno, col, line + "\n"))
    else:
        err = None
    if err is not None:
        raise err
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    nul = text.find("\0")
    if nul >= 0:
        lineno = text.count("\n", 0, nul) + 1
        raise SyntaxError("source code string cannot contain null bytes",
                          (_FILENAME, lineno, nul - text.rfind("\n", 0, nul), None))
    return text


def _split_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line + "\n" for line in lines]


def _register(text, lines):
    entry = (len(text), None, lines, _FILENAME)
    _cache[_FILENAME] = entry
    _cache[_NUMERIC_FILENAME] = _NUMERIC_ENTRY
    try:
        _shared_linecache.cache[_FILENAME] = entry
        _shared_linecache.cache[_NUMERIC_FILENAME] = _NUMERIC_ENTRY
    except BaseException:
        pass


def _suppressed(text, node):
    """True when the statement is followed by a ';' (ast offsets are UTF-8 bytes)."""
    data = text.encode("utf-8").split(b"\n")
    i = node.end_lineno - 1
    rest = data[i][node.end_col_offset:] + b"\n" + b"\n".join(data[i + 1:])
    return rest.lstrip(b" \t\f\\\n").startswith(b";")


def _expression(text):
    """The code compiled as one expression, or None. The fast path for the most
    common call (no syntax tree is built); it either gives exactly what the full
    path below would, or nothing: a compile-time warning makes it give up (the
    full path then warns once), and so does any error (the full path reports it).
    Runs before the user's code, so the warning filters are still ours."""
    _warning_filters.insert(0, _QUIET)
    _filters_mutated()
    try:
        return compile(text, _FILENAME, "eval", dont_inherit=True)
    except Exception:
        return None
    finally:
        del _warning_filters[0]
        _filters_mutated()


def _compile_code(text):
    """(module code or None, expression code or None); raises SyntaxError and friends."""
    tail = _expression(text)
    if tail is not None:
        return None, tail
    tree = compile(text, _FILENAME, "exec", _ONLY_AST, dont_inherit=True)
    body = tree.body
    last = body[-1] if body else None
    if isinstance(last, _Expr) and not _suppressed(text, last):
        head = _Module(body=body[:-1], type_ignores=[])
        head = compile(head, _FILENAME, "exec", dont_inherit=True)
        flags = head.co_flags & _FUTURE_MASK
        tail = compile(_Expression(body=last.value), _FILENAME, "eval", flags, dont_inherit=True)
        return head, tail
    return compile(tree, _FILENAME, "exec", dont_inherit=True), None


def _set_inputs(main, inputs):
    files = {}
    assets = {}
    for ident, text_path, original_path, media_type in inputs:
        files[ident] = text_path
        if original_path is not None:
            assets[ident] = {"text": text_path, "original": original_path, "mediaType": media_type}
    main["input_files"] = files
    main["input_assets"] = assets


def _restore():
    for f in (_settrace, _setprofile):
        try:
            f(None)
        except BaseException:
            pass
    try:
        _setrecursionlimit(_RECURSION_LIMIT)
    except BaseException:
        pass
    streams = []
    for name in ("stdout", "stderr"):
        try:
            streams.append(getattr(_sys_mod, name))
        except BaseException:
            pass
    streams.extend(_STREAMS)
    for s in streams:
        try:
            if s is not None:
                s.flush()
        except BaseException:
            pass


def _type_name(t):
    try:
        name = _type_qualname(t)
        if type(name) is not str:
            raise TypeError
    except BaseException:
        name = None
    if name is None:
        return None
    try:
        module = _type_module(t)
    except BaseException:
        module = None
    if type(module) is str and module != "builtins":
        try:
            return module + "." + name
        except BaseException:
            pass
    return name


def _message(exc):
    try:
        return str(exc)
    except BaseException:
        pass
    try:
        return f"<unprintable {_type_qualname(type(exc))} object>"
    except BaseException:
        return "<unprintable exception object>"


def _limit(exc):
    """The resource limit that caused exc, by its report name, or None."""
    try:
        if isinstance(exc, MemoryError):
            return "memory"
        if isinstance(exc, OSError) and exc.errno == _EFBIG:
            return "file_size"
        if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
            return "processes"
    except BaseException:
        pass
    return None


def _strip_runner_frames(exc):
    """Drop the runner's own frames from exc and the exceptions chained to it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        kept = []
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_globals is not _G:
                kept.append(tb)
            tb = tb.tb_next
        for i in range(len(kept)):
            kept[i].tb_next = kept[i + 1] if i + 1 < len(kept) else None
        exc.__traceback__ = kept[0] if kept else None
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__


def _fallback_format(exc, type_name, message, lines):
    parts = []
    tb = exc.__traceback__
    if tb is not None:
        parts.append("Traceback (most recent call last):\n")
    while tb is not None:
        code = tb.tb_frame.f_code
        lineno = tb.tb_lineno
        parts.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        if code.co_filename == _FILENAME and lineno is not None and 0 < lineno <= len(lines):
            parts.append(f"    {lines[lineno - 1].strip()}\n")
        tb = tb.tb_next
    parts.append(f"{type_name}: {message}\n" if message else f"{type_name}\n")
    return "".join(parts)


def _format(exc, only, type_name, message, text, lines):
    _register(text, lines)
    try:
        parts = _format_exception_only(exc) if only else _format_exception(exc)
        out = "".join(parts)
        if type(out) is str:
            return out
    except BaseException:
        pass
    try:
        return _fallback_format(exc, type_name or "Exception", message, lines)
    except BaseException:
        return None


def _report(exc, only, text, lines):
    try:
        _strip_runner_frames(exc)
    except BaseException:
        pass
    limit = _limit(exc)
    type_name = _type_name(type(exc))
    message = _message(exc)
    formatted = _format(exc, only, type_name, message, text, lines)
    return {"exception": True, "limit": limit, "exc_type": type_name, "exc_message": message,
            "exc_traceback": formatted, "result": None, "exc": exc}


def run(code, inputs, main):
    """Run code (bytes) in main (a dict); inputs is a tuple of (id, text path,
    original path or None, media type or None). Returns the report, a dict the
    C side reads by key (pyrun.c, report_from_dict), always with all of these:

      exception      True when an uncaught exception (also SystemExit or
                     KeyboardInterrupt) ended the code, else False
      limit          "memory", "file_size", "processes" (the resource limit
                     that caused the exception) or None
      exc_type       e.g. "json.decoder.JSONDecodeError", or None
      exc_message    str(exception), or None
      exc_traceback  the formatted exception, user frames only, or None
      result         the final expression's repr, UTF-8 bytes, or None (no
                     value shown)
      exc            the exception object, or None

    A None among the exc_* strings of an exception report means the runner
    could not compute it; the C side then names the exception from exc's type.
    """
    try:
        return _run(code, inputs, main)
    except BaseException as e:
        # The runner itself failed (e.g. a signal while reporting, or its own
        # namespace wiped by user code). A literal, so it needs no globals.
        return {"exception": True, "limit": None, "exc_type": None, "exc_message": None,
                "exc_traceback": None, "result": None, "exc": e}


def _run(code, inputs, main):
    text = ""
    lines = []
    try:
        text = _decode(code)
        lines = _split_lines(text)
        _register(text, lines)
        head, tail = _compile_code(text)
    except BaseException as e:
        exc = e
    else:
        exc = None
    if exc is not None:
        return _report(exc, True, text, lines)

    if "__builtins__" not in main:
        main["__builtins__"] = _builtins
    _set_inputs(main, inputs)

    result = None
    try:
        if head is not None:
            exec(head, main)
        if tail is not None:
            value = eval(tail, main)
            if value is not None:
                result = str.encode(repr(value), "utf-8", "backslashreplace")
            value = None
    except BaseException as e:
        exc = e
    _restore()
    if exc is not None:
        return _report(exc, False, text, lines)
    return {"exception": False, "limit": None, "exc_type": None, "exc_message": None,
            "exc_traceback": None, "result": result, "exc": None}


# The packages the zygote imports before any call. The others of the allow-list are
# bound and importable but imported by the calls that use them: their modules would
# add tens of megabytes to the zygote (sklearn, sympy, seaborn), which every fork pays
# in page tables and copy-on-write faults whether the call uses them or not
# (docs/policy.md, "What is preloaded").
PRELOADED = ("numpy", "pandas", "matplotlib")


def preload(names):
    """Zygote only, before any call: import the policy's pythonPackages that are
    PRELOADED once, so every worker forked later has them ready. matplotlib gets the
    Agg backend and builds its font manager now, with a private temporary config
    directory (the zygote runs in the host's file system) that is removed afterwards;
    a worker's own writes go to MPLCONFIGDIR in its /tmp (set by pyrun.c)."""
    import os
    import shutil
    import tempfile
    for name in names:
        if name not in PRELOADED:
            continue
        if name != "matplotlib":
            __import__(name)
            continue
        saved = os.environ.get("MPLCONFIGDIR")
        tmp = tempfile.mkdtemp(prefix="codeinterp-mpl-")
        os.environ["MPLCONFIGDIR"] = tmp
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot
            import matplotlib.font_manager
            matplotlib.font_manager.fontManager.findfont("DejaVu Sans")
            _warm_matplotlib(matplotlib.pyplot)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            if saved is None:
                del os.environ["MPLCONFIGDIR"]
            else:
                os.environ["MPLCONFIGDIR"] = saved


def _warm_matplotlib(plt):
    """One line plot rendered to PNG in memory and closed: the fonts, the text
    layout and tick machinery, the Agg renderer and the PNG writer are then made
    once in the zygote instead of in every call. Leaves no figure open."""
    import io
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [1, 4, 9], label="x")
    ax.set_title("t")
    ax.set_xlabel("x")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    plt.close("all")


def forget_host_facts():
    """Zygote only, at the end of its preload, before any worker is forked: drop what
    the preload memoised about the host it ran on, so that a worker works each fact out
    again, from inside its own sandbox, when its code first asks. The zygote runs in
    the host's UTS namespace and file system: platform.uname() there names the host
    (pandas asks for it at import) and reads its /etc/os-release; matplotlib memoises
    its config and cache directories (the zygote's private temporary one, see
    preload()). The C library's time zone is renewed in each worker (renew_worker()).
    tests/adversarial ("host.preload_*") looks for host facts in a worker's objects."""
    platform = _sys.modules.get("platform")
    if platform is not None:
        platform._uname_cache = None
        platform._platform_cache.clear()
        platform._os_release_cache = None
    uuid = _sys.modules.get("uuid")
    if uuid is not None:
        uuid._node = None  # the host's MAC address, once uuid1() or getnode() ran
    mpl = _sys.modules.get("matplotlib")
    if mpl is not None:
        for name, fmt in (("get_configdir", "CONFIGDIR=%s"), ("get_cachedir", "CACHEDIR=%s")):
            fresh = mpl._logged_cached(fmt)(getattr(mpl, name).__wrapped__)
            setattr(mpl, name, fresh)


def renew_worker():
    """In each zygote-made worker once its sandbox is complete, before its call: the
    C library's time zone is read again, from the worker's root (the zygote read the
    host's /etc/localtime when it imported time; without TZ and /etc/localtime the
    worker's zone is UTC, as in exec mode), and time.tzname and the offsets with it;
    and numpy's global RandomState is reseeded (np.random.seed() without an argument
    draws fresh OS entropy), so two workers of one zygote never draw the same numbers."""
    _time.tzset()
    numpy = _sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
