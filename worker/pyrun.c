/* SPDX-License-Identifier: MIT */
/* Embedded CPython for the worker: isolated configuration, the interactive-shell
 * execution rule (show the value of a final expression statement) and typed
 * exception capture.
 *
 * The execution logic lives in a small Python "runner" (runner_source below),
 * compiled once by pyrun_init() into a private namespace that is not a module in
 * sys.modules. Its __builtins__ is a snapshot of the builtins dict, and it binds
 * every stdlib object it needs (including private copies of traceback and
 * linecache) before any user code runs, so code that deletes builtins or
 * monkey-patches stdlib modules cannot break the report. The C side only passes
 * data in, converts the report and writes the result bytes. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "worker/pyrun.h"

#ifndef CODEINTERP_PY_STDLIB
#error "CODEINTERP_PY_STDLIB (e.g. \"/usr/lib/python3.11\") must be defined by the build"
#endif
#ifndef CODEINTERP_PY_DYNLOAD
#error "CODEINTERP_PY_DYNLOAD (e.g. \"/usr/lib/python3.11/lib-dynload\") must be defined by the build"
#endif

#define WIDE(s) L"" s

/* Must match the runner's _limit(). */
_Static_assert(PYRUN_LIMIT_NONE == 0 && PYRUN_LIMIT_MEMORY == 1, "runner limit codes");
_Static_assert(PYRUN_LIMIT_FILE_SIZE == 2 && PYRUN_LIMIT_PROCESSES == 3, "runner limit codes");

static inline void py_decrefp(PyObject **p) {
        Py_XDECREF(*p);
}
#define _cleanup_pyobj_ _cleanup_(py_decrefp)

/* The runner's run(code: bytes, inputs: tuple, main: dict) ->
 *   (exception, has_result, limit, exc_type, exc_message, exc_traceback, result: bytes|None, exc|None)
 * Set by pyrun_init(); keeps the runner's private globals alive. */
static PyObject *runner_run = NULL;

/* Imported by pyrun_preload() in the zygote, so forked workers start warm. */
static const char *const preload_modules[] = {
        "math",      "statistics", "json",   "csv",    "re",       "decimal", "fractions", "datetime", "collections",
        "itertools", "functools",  "random", "string", "textwrap", "io",      "traceback", "ast",      "linecache",
};

/* The runner (Python source): the whole execution rule and the report. */
static const char runner_source[] =
        "# codeinterp runner. Executed once by pyrun_init() into a private namespace\n"
        "# that is not a module in sys.modules. Its __builtins__ is a snapshot of the\n"
        "# builtins taken before any user code runs, and every stdlib object it needs\n"
        "# is bound here, so user code that deletes builtins or patches stdlib modules\n"
        "# cannot break the report. _PATHS is set by the C side.\n"
        "import sys as _sys\n"
        "import ast as _ast\n"
        "import errno as _errno\n"
        "import __future__ as _future\n"
        "import importlib.util as _importlib_util\n"
        "import linecache as _shared_linecache\n"
        "import builtins as _builtins\n"
        "import _warnings\n"
        "\n"
        "_G = globals()\n"
        "_FILENAME = \"<code>\"\n"
        "_EFBIG = _errno.EFBIG\n"
        "_ONLY_AST = _ast.PyCF_ONLY_AST\n"
        "_Module = _ast.Module\n"
        "_Expression = _ast.Expression\n"
        "_Expr = _ast.Expr\n"
        "_shared_cache = _shared_linecache.cache\n"
        "_type_qualname = type.__dict__[\"__qualname__\"].__get__\n"
        "_type_module = type.__dict__[\"__module__\"].__get__\n"
        "_settrace = _sys.settrace\n"
        "_setprofile = _sys.setprofile\n"
        "_setrecursionlimit = _sys.setrecursionlimit\n"
        "_RECURSION_LIMIT = _sys.getrecursionlimit()\n"
        "_STREAMS = (_sys.stdout, _sys.stderr)\n"
        "_sys_mod = _sys\n"
        "_warning_filters = _warnings.filters\n"
        "_filters_mutated = _warnings._filters_mutated\n"
        "_QUIET = (\"error\", None, Warning, None, 0)\n"
        "\n"
        "\n"
        "def _private_copy(name):\n"
        "    spec = _importlib_util.find_spec(name)\n"
        "    mod = _importlib_util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(mod)\n"
        "    return mod\n"
        "\n"
        "\n"
        "# Private copies of linecache and traceback: patching the shared modules (or\n"
        "# clearing the shared line cache) does not change how the report is formatted.\n"
        "_linecache = _private_copy(\"linecache\")\n"
        "_traceback = _private_copy(\"traceback\")\n"
        "_traceback.linecache = _linecache\n"
        "_cache = _linecache.cache\n"
        "_format_exception = _traceback.format_exception\n"
        "_format_exception_only = _traceback.format_exception_only\n"
        "\n"
        "_FUTURE_MASK = 0\n"
        "for _name in _future.all_feature_names:\n"
        "    _FUTURE_MASK |= getattr(_future, _name).compiler_flag\n"
        "del _name\n"
        "\n"
        "_BLOCKED = frozenset((\"pip\", \"ensurepip\", \"venv\"))\n"
        "\n"
        "\n"
        "class PackageInstallBlocker:\n"
        "    \"\"\"Meta path finder refusing the package installers.\"\"\"\n"
        "\n"
        "    @staticmethod\n"
        "    def find_spec(fullname, path=None, target=None):\n"
        "        if fullname.partition(\".\")[0] in _BLOCKED:\n"
        "            raise ModuleNotFoundError(\n"
        "                f\"No module named {fullname!r}: installing packages is not supported here\",\n"
        "                name=fullname)\n"
        "        return None\n"
        "\n"
        "    @staticmethod\n"
        "    def invalidate_caches():\n"
        "        pass\n"
        "\n"
        "\n"
        "_sys.meta_path.insert(0, PackageInstallBlocker)\n"
        "for _name in list(_sys.modules):\n"
        "    if _name.partition(\".\")[0] in _BLOCKED:\n"
        "        del _sys.modules[_name]\n"
        "del _name\n"
        "_sys.path[:] = list(_PATHS)\n"
        "_sys.path_importer_cache.clear()\n"
        "\n"
        "\n"
        "def _decode(code):\n"
        "    \"\"\"UTF-8 source text with newlines normalised, or raise SyntaxError.\"\"\"\n"
        "    try:\n"
        "        text = code.decode(\"utf-8\")\n"
        "    except UnicodeDecodeError as e:\n"
        "        start = e.start\n"
        "        lineno = code.count(b\"\\n\", 0, start) + 1\n"
        "        line_start = code.rfind(b\"\\n\", 0, start) + 1\n"
        "        line_end = code.find(b\"\\n\", start)\n"
        "        if line_end < 0:\n"
        "            line_end = len(code)\n"
        "        line = code[line_start:line_end].decode(\"utf-8\", \"backslashreplace\")\n"
        "        col = len(code[line_start:start].decode(\"utf-8\", \"backslashreplace\")) + 1\n"
        "        err = SyntaxError(f\"(unicode error) {e}\", (_FILENAME, lineno, col, line + \"\\n\"))\n"
        "    else:\n"
        "        err = None\n"
        "    if err is not None:\n"
        "        raise err\n"
        "    if text.startswith(\"\\ufeff\"):\n"
        "        text = text[1:]\n"
        "    text = text.replace(\"\\r\\n\", \"\\n\").replace(\"\\r\", \"\\n\")\n"
        "    nul = text.find(\"\\0\")\n"
        "    if nul >= 0:\n"
        "        lineno = text.count(\"\\n\", 0, nul) + 1\n"
        "        raise SyntaxError(\"source code string cannot contain null bytes\",\n"
        "                          (_FILENAME, lineno, nul - text.rfind(\"\\n\", 0, nul), None))\n"
        "    return text\n"
        "\n"
        "\n"
        "def _split_lines(text):\n"
        "    lines = text.split(\"\\n\")\n"
        "    if lines and lines[-1] == \"\":\n"
        "        lines.pop()\n"
        "    return [line + \"\\n\" for line in lines]\n"
        "\n"
        "\n"
        "def _register(text, lines):\n"
        "    entry = (len(text), None, lines, _FILENAME)\n"
        "    _cache[_FILENAME] = entry\n"
        "    try:\n"
        "        _shared_linecache.cache[_FILENAME] = entry\n"
        "    except BaseException:\n"
        "        pass\n"
        "\n"
        "\n"
        "def _suppressed(text, node):\n"
        "    \"\"\"True when the statement is followed by a ';' (ast offsets are UTF-8 bytes).\"\"\"\n"
        "    data = text.encode(\"utf-8\").split(b\"\\n\")\n"
        "    i = node.end_lineno - 1\n"
        "    rest = data[i][node.end_col_offset:] + b\"\\n\" + b\"\\n\".join(data[i + 1:])\n"
        "    return rest.lstrip(b\" \\t\\f\\\\\\n\").startswith(b\";\")\n"
        "\n"
        "\n"
        "def _expression(text):\n"
        "    \"\"\"The code compiled as one expression, or None. The fast path for the most\n"
        "    common call (no syntax tree is built); it either gives exactly what the full\n"
        "    path below would, or nothing: a compile-time warning makes it give up (the\n"
        "    full path then warns once), and so does any error (the full path reports it).\n"
        "    Runs before the user's code, so the warning filters are still ours.\"\"\"\n"
        "    _warning_filters.insert(0, _QUIET)\n"
        "    _filters_mutated()\n"
        "    try:\n"
        "        return compile(text, _FILENAME, \"eval\", dont_inherit=True)\n"
        "    except Exception:\n"
        "        return None\n"
        "    finally:\n"
        "        del _warning_filters[0]\n"
        "        _filters_mutated()\n"
        "\n"
        "\n"
        "def _compile_code(text):\n"
        "    \"\"\"(module code or None, expression code or None); raises SyntaxError and friends.\"\"\"\n"
        "    tail = _expression(text)\n"
        "    if tail is not None:\n"
        "        return None, tail\n"
        "    tree = compile(text, _FILENAME, \"exec\", _ONLY_AST, dont_inherit=True)\n"
        "    body = tree.body\n"
        "    last = body[-1] if body else None\n"
        "    if isinstance(last, _Expr) and not _suppressed(text, last):\n"
        "        head = _Module(body=body[:-1], type_ignores=[])\n"
        "        head = compile(head, _FILENAME, \"exec\", dont_inherit=True)\n"
        "        flags = head.co_flags & _FUTURE_MASK\n"
        "        tail = compile(_Expression(body=last.value), _FILENAME, \"eval\", flags, dont_inherit=True)\n"
        "        return head, tail\n"
        "    return compile(tree, _FILENAME, \"exec\", dont_inherit=True), None\n"
        "\n"
        "\n"
        "def _set_inputs(main, inputs):\n"
        "    files = {}\n"
        "    assets = {}\n"
        "    for ident, text_path, original_path, media_type in inputs:\n"
        "        files[ident] = text_path\n"
        "        if original_path is not None:\n"
        "            assets[ident] = {\"text\": text_path, \"original\": original_path, \"mediaType\": media_type}\n"
        "    main[\"input_files\"] = files\n"
        "    main[\"input_assets\"] = assets\n"
        "\n"
        "\n"
        "def _restore():\n"
        "    for f in (_settrace, _setprofile):\n"
        "        try:\n"
        "            f(None)\n"
        "        except BaseException:\n"
        "            pass\n"
        "    try:\n"
        "        _setrecursionlimit(_RECURSION_LIMIT)\n"
        "    except BaseException:\n"
        "        pass\n"
        "    streams = []\n"
        "    for name in (\"stdout\", \"stderr\"):\n"
        "        try:\n"
        "            streams.append(getattr(_sys_mod, name))\n"
        "        except BaseException:\n"
        "            pass\n"
        "    streams.extend(_STREAMS)\n"
        "    for s in streams:\n"
        "        try:\n"
        "            if s is not None:\n"
        "                s.flush()\n"
        "        except BaseException:\n"
        "            pass\n"
        "\n"
        "\n"
        "def _type_name(t):\n"
        "    try:\n"
        "        name = _type_qualname(t)\n"
        "        if type(name) is not str:\n"
        "            raise TypeError\n"
        "    except BaseException:\n"
        "        name = None\n"
        "    if name is None:\n"
        "        return None\n"
        "    try:\n"
        "        module = _type_module(t)\n"
        "    except BaseException:\n"
        "        module = None\n"
        "    if type(module) is str and module != \"builtins\":\n"
        "        try:\n"
        "            return module + \".\" + name\n"
        "        except BaseException:\n"
        "            pass\n"
        "    return name\n"
        "\n"
        "\n"
        "def _message(exc):\n"
        "    try:\n"
        "        return str(exc)\n"
        "    except BaseException:\n"
        "        pass\n"
        "    try:\n"
        "        return f\"<unprintable {_type_qualname(type(exc))} object>\"\n"
        "    except BaseException:\n"
        "        return \"<unprintable exception object>\"\n"
        "\n"
        "\n"
        "def _limit(exc):\n"
        "    try:\n"
        "        if isinstance(exc, MemoryError):\n"
        "            return 1\n"
        "        if isinstance(exc, OSError) and exc.errno == _EFBIG:\n"
        "            return 2\n"
        "        if isinstance(exc, RuntimeError) and \"can't start new thread\" in str(exc):\n"
        "            return 3\n"
        "    except BaseException:\n"
        "        pass\n"
        "    return 0\n"
        "\n"
        "\n"
        "def _strip_runner_frames(exc):\n"
        "    \"\"\"Drop the runner's own frames from exc and the exceptions chained to it.\"\"\"\n"
        "    seen = set()\n"
        "    while exc is not None and id(exc) not in seen:\n"
        "        seen.add(id(exc))\n"
        "        kept = []\n"
        "        tb = exc.__traceback__\n"
        "        while tb is not None:\n"
        "            if tb.tb_frame.f_globals is not _G:\n"
        "                kept.append(tb)\n"
        "            tb = tb.tb_next\n"
        "        for i in range(len(kept)):\n"
        "            kept[i].tb_next = kept[i + 1] if i + 1 < len(kept) else None\n"
        "        exc.__traceback__ = kept[0] if kept else None\n"
        "        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__\n"
        "\n"
        "\n"
        "def _fallback_format(exc, type_name, message, lines):\n"
        "    parts = []\n"
        "    tb = exc.__traceback__\n"
        "    if tb is not None:\n"
        "        parts.append(\"Traceback (most recent call last):\\n\")\n"
        "    while tb is not None:\n"
        "        code = tb.tb_frame.f_code\n"
        "        lineno = tb.tb_lineno\n"
        "        parts.append(f'  File \"{code.co_filename}\", line {lineno}, in {code.co_name}\\n')\n"
        "        if code.co_filename == _FILENAME and lineno is not None and 0 < lineno <= len(lines):\n"
        "            parts.append(f\"    {lines[lineno - 1].strip()}\\n\")\n"
        "        tb = tb.tb_next\n"
        "    parts.append(f\"{type_name}: {message}\\n\" if message else f\"{type_name}\\n\")\n"
        "    return \"\".join(parts)\n"
        "\n"
        "\n"
        "def _format(exc, only, type_name, message, text, lines):\n"
        "    _register(text, lines)\n"
        "    try:\n"
        "        parts = _format_exception_only(exc) if only else _format_exception(exc)\n"
        "        out = \"\".join(parts)\n"
        "        if type(out) is str:\n"
        "            return out\n"
        "    except BaseException:\n"
        "        pass\n"
        "    try:\n"
        "        return _fallback_format(exc, type_name or \"Exception\", message, lines)\n"
        "    except BaseException:\n"
        "        return None\n"
        "\n"
        "\n"
        "def _report(exc, only, text, lines):\n"
        "    try:\n"
        "        _strip_runner_frames(exc)\n"
        "    except BaseException:\n"
        "        pass\n"
        "    limit = _limit(exc)\n"
        "    type_name = _type_name(type(exc))\n"
        "    message = _message(exc)\n"
        "    formatted = _format(exc, only, type_name, message, text, lines)\n"
        "    return (True, False, limit, type_name, message, formatted, None, exc)\n"
        "\n"
        "\n"
        "def run(code, inputs, main):\n"
        "    \"\"\"Run code (bytes) in main (a dict). Returns (exception, has_result, limit,\n"
        "    exc_type, exc_message, exc_traceback, result bytes, exception object).\"\"\"\n"
        "    try:\n"
        "        return _run(code, inputs, main)\n"
        "    except BaseException as e:\n"
        "        # The runner itself failed (e.g. a signal while reporting): the C side\n"
        "        # names the exception from its type.\n"
        "        return (True, False, 0, None, None, None, None, e)\n"
        "\n"
        "\n"
        "def _run(code, inputs, main):\n"
        "    text = \"\"\n"
        "    lines = []\n"
        "    try:\n"
        "        text = _decode(code)\n"
        "        lines = _split_lines(text)\n"
        "        _register(text, lines)\n"
        "        head, tail = _compile_code(text)\n"
        "    except BaseException as e:\n"
        "        exc = e\n"
        "    else:\n"
        "        exc = None\n"
        "    if exc is not None:\n"
        "        return _report(exc, True, text, lines)\n"
        "\n"
        "    if \"__builtins__\" not in main:\n"
        "        main[\"__builtins__\"] = _builtins\n"
        "    _set_inputs(main, inputs)\n"
        "\n"
        "    result = None\n"
        "    try:\n"
        "        if head is not None:\n"
        "            exec(head, main)\n"
        "        if tail is not None:\n"
        "            value = eval(tail, main)\n"
        "            if value is not None:\n"
        "                result = str.encode(repr(value), \"utf-8\", \"backslashreplace\")\n"
        "            value = None\n"
        "    except BaseException as e:\n"
        "        exc = e\n"
        "    _restore()\n"
        "    if exc is not None:\n"
        "        return _report(exc, False, text, lines)\n"
        "    return (False, result is not None, 0, None, None, None, result, None)\n";

static int config_set(PyConfig *config, wchar_t **field, const wchar_t *value) {
        PyStatus status = PyConfig_SetString(config, field, value);
        return PyStatus_Exception(status) ? -ENOMEM : 0;
}

static int pyrun_configure(PyConfig *config) {
        wchar_t *argv[] = { (wchar_t *) L"" };
        const struct {
                wchar_t **field;
                const wchar_t *value;
        } strings[] = {
                { &config->program_name, L"python3" },
                { &config->executable, WIDE(CODEINTERP_PY_EXECUTABLE) },
                { &config->base_executable, WIDE(CODEINTERP_PY_EXECUTABLE) },
                /* home also disables pyvenv.cfg and ._pth detection in getpath. */
                { &config->home, WIDE(CODEINTERP_PY_PREFIX) },
                { &config->prefix, WIDE(CODEINTERP_PY_PREFIX) },
                { &config->exec_prefix, WIDE(CODEINTERP_PY_PREFIX) },
                { &config->stdio_encoding, L"utf-8" },
                { &config->stdio_errors, L"backslashreplace" },
        };
        const wchar_t *search_paths[] = { WIDE(CODEINTERP_PY_STDLIB), WIDE(CODEINTERP_PY_DYNLOAD) };
        PyStatus status;
        int r;

        config->isolated = 1;
        config->use_environment = 0;
        config->site_import = 0;
        config->user_site_directory = 0;
        config->write_bytecode = 0;
        config->safe_path = 1;
        config->parse_argv = 0;
        config->install_signal_handlers = 1; /* SIGINT -> KeyboardInterrupt, SIGPIPE/SIGXFSZ ignored */
        config->buffered_stdio = 0;          /* like -u: output reaches the pipes even on SIGKILL */
        config->faulthandler = 0;
        config->pathconfig_warnings = 0;
        /* Without this, os, posixpath, codecs, ... are frozen and have no __file__: with
         * module_search_paths_set, 3.11's getpath leaves sys._stdlib_dir unset. */
        config->use_frozen_modules = 0;

        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                r = config_set(config, strings[i].field, strings[i].value);
                if (r < 0)
                        return r;
        }

        config->module_search_paths_set = 1;
        for (size_t i = 0; i < ELEMENTSOF(search_paths); i++) {
                status = PyWideStringList_Append(&config->module_search_paths, search_paths[i]);
                if (PyStatus_Exception(status))
                        return -ENOMEM;
        }

        status = PyConfig_SetArgv(config, ELEMENTSOF(argv), argv);
        if (PyStatus_Exception(status))
                return -ENOMEM;

        return 0;
}

/* Compile and run the runner into a private namespace; bind its run(). */
static int pyrun_runner_setup(void) {
        _cleanup_pyobj_ PyObject *globals = NULL, *builtins = NULL, *name = NULL, *paths = NULL, *code = NULL,
                                 *ret = NULL;
        PyObject *run;

        globals = PyDict_New();
        builtins = PyDict_Copy(PyEval_GetBuiltins());
        name = PyUnicode_FromString("codeinterp.runner");
        paths = Py_BuildValue("(ss)", CODEINTERP_PY_STDLIB, CODEINTERP_PY_DYNLOAD);
        if (!globals || !builtins || !name || !paths)
                goto fail;
        if (PyDict_SetItemString(globals, "__builtins__", builtins) < 0 ||
            PyDict_SetItemString(globals, "__name__", name) < 0 || PyDict_SetItemString(globals, "_PATHS", paths) < 0)
                goto fail;

        code = Py_CompileString(runner_source, "<codeinterp-runner>", Py_file_input);
        if (!code)
                goto fail;
        ret = PyEval_EvalCode(code, globals, globals);
        if (!ret)
                goto fail;

        run = PyDict_GetItemString(globals, "run"); /* borrowed */
        if (!run || !PyCallable_Check(run))
                return -EIO;
        runner_run = Py_NewRef(run);
        return 0;

fail:
        /* Never PyErr_Print(): it would exit the process on SystemExit. */
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
                PyErr_Clear();
                return -ENOMEM;
        }
        PyErr_Clear();
        return -EIO;
}

int pyrun_init(void) {
        PyPreConfig preconfig;
        PyConfig config;
        PyStatus status;
        int r;

        if (Py_IsInitialized())
                return -EALREADY;

        PyPreConfig_InitIsolatedConfig(&preconfig);
        preconfig.utf8_mode = 1;
        status = Py_PreInitialize(&preconfig);
        if (PyStatus_Exception(status))
                return -EIO;

        PyConfig_InitIsolatedConfig(&config);
        r = pyrun_configure(&config);
        if (r < 0) {
                PyConfig_Clear(&config);
                return r;
        }
        status = Py_InitializeFromConfig(&config);
        PyConfig_Clear(&config);
        if (PyStatus_Exception(status)) /* never Py_ExitStatusException(): it exits */
                return -EIO;

        return pyrun_runner_setup();
}

static int resolve_reseed(void);

int pyrun_preload(void) {
        if (!runner_run)
                return -ENXIO;

        for (size_t i = 0; i < ELEMENTSOF(preload_modules); i++) {
                PyObject *m = PyImport_ImportModule(preload_modules[i]);
                if (!m) {
                        /* The failing module is preload_modules[i]; ImportError means the
                         * stdlib is incomplete (e.g. a missing Debian package). */
                        int r = PyErr_ExceptionMatches(PyExc_ImportError) ? -ENOENT : -EIO;
                        PyErr_Clear();
                        return r;
                }
                Py_DECREF(m);
        }
        return resolve_reseed();
}

int pyrun_warmup(void) {
        _cleanup_pyobj_ PyObject *saved = NULL;
        PyObject *main_module, *main_dict;
        PyrunReport rep = {};
        int r;

        main_module = PyImport_AddModule("__main__"); /* borrowed */
        main_dict = main_module ? PyModule_GetDict(main_module) : NULL;
        saved = main_dict ? PyDict_Copy(main_dict) : NULL;
        if (!saved) {
                PyErr_Clear();
                return -ENOMEM;
        }
        /* Our own constant, never user code: a final expression, and a statement that raises
         * and is caught, so both report paths are built once here. */
        static const char *const snippets[] = { "1 + 1" };
        for (size_t i = 0; i < sizeof snippets / sizeof snippets[0]; i++) {
                r = pyrun_execute(snippets[i], strlen(snippets[i]), NULL, 0, -1, &rep);
                pyrun_report_done(&rep);
                if (r < 0)
                        return r;
        }
        if (PyDict_Clear(main_dict), PyDict_Update(main_dict, saved) < 0) {
                PyErr_Clear();
                return -ENOMEM;
        }
        return 0;
}

/* random._inst.seed, resolved once (at preload, in the zygote) so that a worker's
 * reseed is one call, not a trip through the import machinery (each page that trip
 * touches is copied into the worker). */
static PyObject *reseed_fn = NULL;

static int resolve_reseed(void) {
        _cleanup_pyobj_ PyObject *random = NULL, *inst = NULL;

        if (reseed_fn)
                return 0;
        random = PyImport_ImportModule("random");
        if (random)
                inst = PyObject_GetAttrString(random, "_inst");
        if (inst)
                reseed_fn = PyObject_GetAttrString(inst, "seed");
        if (!reseed_fn) {
                PyErr_Clear();
                return -EIO;
        }
        return 0;
}

int pyrun_reseed(void) {
        _cleanup_pyobj_ PyObject *ret = NULL;
        int r;

        if (!runner_run)
                return -ENXIO;
        r = resolve_reseed();
        if (r < 0)
                return r;
        ret = PyObject_CallNoArgs(reseed_fn); /* no argument: seeds from os.urandom() */
        if (!ret) {
                PyErr_Clear();
                return -EIO;
        }
        return 0;
}

static PyObject *str_or_none(const char *s) {
        if (!s)
                Py_RETURN_NONE;
        /* UTF-8 with surrogateescape (UTF-8 mode): never fails on odd bytes. */
        return PyUnicode_DecodeFSDefault(s);
}

static PyObject *pyrun_build_inputs(const PyrunInput *inputs, size_t n_inputs) {
        _cleanup_pyobj_ PyObject *tuple = NULL;

        if (n_inputs > (size_t) PY_SSIZE_T_MAX)
                return PyErr_NoMemory();
        tuple = PyTuple_New((Py_ssize_t) n_inputs);
        if (!tuple)
                return NULL;
        for (size_t i = 0; i < n_inputs; i++) {
                _cleanup_pyobj_ PyObject *id = NULL, *text = NULL, *original = NULL, *media = NULL;
                PyObject *item;

                id = str_or_none(inputs[i].id);
                text = str_or_none(inputs[i].text_path);
                original = str_or_none(inputs[i].original_path);
                media = str_or_none(inputs[i].media_type);
                if (!id || !text || !original || !media)
                        return NULL;
                item = PyTuple_Pack(4, id, text, original, media);
                if (!item)
                        return NULL;
                PyTuple_SET_ITEM(tuple, (Py_ssize_t) i, item); /* steals */
        }
        return TAKE_PTR(tuple);
}

static char *memdup_str(const char *p, size_t n) {
        char *s = malloc(n + 1);
        if (!s)
                return NULL;
        memcpy(s, p, n);
        s[n] = '\0';
        return s;
}

/* str -> malloc'd UTF-8 (lone surrogates backslash-escaped). NULL if o is not a
 * str or on failure (no Python error left set). */
static char *str_to_utf8(PyObject *o) {
        _cleanup_pyobj_ PyObject *b = NULL;
        char *p;
        Py_ssize_t n;

        if (!o || !PyUnicode_Check(o))
                return NULL;
        b = PyUnicode_AsEncodedString(o, "utf-8", "backslashreplace");
        if (!b || PyBytes_AsStringAndSize(b, &p, &n) < 0) {
                PyErr_Clear();
                return NULL;
        }
        return memdup_str(p, (size_t) n);
}

static const char *exc_type_fallback(PyObject *exc) {
        return exc && exc != Py_None ? Py_TYPE(exc)->tp_name : "BaseException";
}

/* Fill the string fields of an exception report. The runner passes None for a
 * part it could not compute (e.g. MemoryError while formatting); then the type
 * name comes from C and the traceback is the type name alone. */
static int report_strings(PyrunReport *r, PyObject *type, PyObject *message, PyObject *traceback,
                          const char *fallback_type) {
        r->exc_type = str_to_utf8(type);
        if (!r->exc_type)
                r->exc_type = strdup(fallback_type);
        r->exc_message = str_to_utf8(message);
        if (!r->exc_message)
                r->exc_message = strdup("");
        r->exc_traceback = str_to_utf8(traceback);
        if (!r->exc_traceback && r->exc_type && asprintf(&r->exc_traceback, "%s\n", r->exc_type) < 0)
                r->exc_traceback = NULL;
        if (!r->exc_type || !r->exc_message || !r->exc_traceback)
                return -ENOMEM;
        return 0;
}

static PyrunLimit limit_from_long(long l) {
        switch (l) {
        case PYRUN_LIMIT_MEMORY:
        case PYRUN_LIMIT_FILE_SIZE:
        case PYRUN_LIMIT_PROCESSES:
                return (PyrunLimit) l;
        default:
                return PYRUN_LIMIT_NONE;
        }
}

/* Convert the runner's tuple; *ret_result borrows the result bytes from res. */
static int report_from_tuple(PyrunReport *r, PyObject *res, PyObject **ret_result) {
        PyObject *result;
        long limit;

        if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 8)
                return -EIO;

        r->exception = PyTuple_GET_ITEM(res, 0) == Py_True;
        limit = PyLong_Check(PyTuple_GET_ITEM(res, 2)) ? PyLong_AsLong(PyTuple_GET_ITEM(res, 2)) : 0;
        if (limit == -1 && PyErr_Occurred())
                PyErr_Clear();
        r->limit = limit_from_long(limit);

        if (r->exception)
                return report_strings(r, PyTuple_GET_ITEM(res, 3), PyTuple_GET_ITEM(res, 4), PyTuple_GET_ITEM(res, 5),
                                      exc_type_fallback(PyTuple_GET_ITEM(res, 7)));

        r->limit = PYRUN_LIMIT_NONE;
        if (PyTuple_GET_ITEM(res, 1) != Py_True)
                return 0;
        result = PyTuple_GET_ITEM(res, 6);
        if (!PyBytes_Check(result))
                return -EIO;
        r->has_result = true;
        *ret_result = result;
        return 0;
}

/* The runner raised instead of returning a report (e.g. a second SIGINT while it
 * was formatting): report that exception by its type name. */
static int report_from_error(PyrunReport *r) {
        PyObject *type, *value, *tb;
        const char *name;
        int k;

        PyErr_Fetch(&type, &value, &tb);
        if (!type)
                return -EIO;
        name = PyType_Check(type) ? ((PyTypeObject *) type)->tp_name : "BaseException";
        r->exception = true;
        r->limit = PyErr_GivenExceptionMatches(type, PyExc_MemoryError) ? PYRUN_LIMIT_MEMORY : PYRUN_LIMIT_NONE;
        k = report_strings(r, NULL, NULL, NULL, name);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return k;
}

int pyrun_execute(const char *code, size_t code_len, const PyrunInput *inputs, size_t n_inputs, int result_fd,
                  PyrunReport *ret) {
        _cleanup_close_ int fd = result_fd;
        _cleanup_(pyrun_report_done) PyrunReport report = {};
        _cleanup_pyobj_ PyObject *code_obj = NULL, *inputs_obj = NULL, *res = NULL;
        PyObject *main_module, *main_dict = NULL, *result = NULL;
        int r;

        if (!ret || (!code && code_len > 0) || (!inputs && n_inputs > 0) || code_len > (size_t) PY_SSIZE_T_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n_inputs; i++)
                if (!inputs[i].id || !inputs[i].text_path)
                        return -EINVAL;
        if (!runner_run)
                return -ENXIO;

        code_obj = PyBytes_FromStringAndSize(code ?: "", (Py_ssize_t) code_len);
        inputs_obj = code_obj ? pyrun_build_inputs(inputs, n_inputs) : NULL;
        main_module = inputs_obj ? PyImport_AddModule("__main__") : NULL; /* borrowed */
        if (main_module)
                main_dict = PyModule_GetDict(main_module); /* borrowed */
        if (!main_dict) {
                PyErr_Clear();
                return -ENOMEM;
        }

        res = PyObject_CallFunctionObjArgs(runner_run, code_obj, inputs_obj, main_dict, NULL);
        r = res ? report_from_tuple(&report, res, &result) : report_from_error(&report);
        if (r < 0)
                return r;

        if (result && fd >= 0) {
                r = write_full(fd, PyBytes_AS_STRING(result), (size_t) PyBytes_GET_SIZE(result));
                if (r < 0)
                        return r;
        }

        *ret = report;
        report = (PyrunReport){};
        return 0;
}

void pyrun_report_done(PyrunReport *r) {
        if (!r)
                return;
        free(r->exc_type);
        free(r->exc_message);
        free(r->exc_traceback);
        *r = (PyrunReport){};
}
