/* SPDX-License-Identifier: MIT */
/* Embedded CPython for the worker: isolated configuration, the interactive-shell
 * execution rule (show the value of a final expression statement) and typed
 * exception capture.
 *
 * The execution logic lives in a small Python "runner", worker/runner.py, which
 * the build embeds here as runner_source (cmake/embed.cmake; nothing is read from
 * disk at run time). pyrun_init() compiles it once into a private namespace that
 * is not a module in sys.modules. Its __builtins__ is a snapshot of the builtins
 * dict, and it binds every stdlib object it needs (including private copies of
 * traceback and linecache) before any user code runs, so code that deletes
 * builtins or monkey-patches stdlib modules cannot break the report. The C side
 * only passes data in, reads the report by key and writes the result bytes.
 *
 * worker/codeinterp_numeric.py (the numeric and missingness rules) is embedded the
 * same way as numeric_source and handed to the runner as the text _NUMERIC; the
 * runner installs a meta path finder that serves it to "import codeinterp_numeric". */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "contract/runtime.h"
#include "worker/pyrun.h"
#include "contract/report.h"

/* static const unsigned char runner_source[]: worker/runner.py, NUL-terminated. */
#include "runner_source.h"
/* static const unsigned char numeric_source[]: worker/codeinterp_numeric.py, NUL-terminated. */
#include "numeric_source.h"

#ifndef CODEINTERP_PY_STDLIB
#error "CODEINTERP_PY_STDLIB (e.g. \"/usr/lib/python3.11\") must be defined by the build"
#endif
#ifndef CODEINTERP_PY_DYNLOAD
#error "CODEINTERP_PY_DYNLOAD (e.g. \"/usr/lib/python3.11/lib-dynload\") must be defined by the build"
#endif

#define WIDE(s) L"" s

static inline void py_decrefp(PyObject **p) {
        Py_XDECREF(*p);
}
#define _cleanup_pyobj_ _cleanup_(py_decrefp)

/* The runner's run(code: bytes, inputs: tuple, main: dict) -> report (dict).
 * Set by pyrun_init(); keeps the runner's private globals alive. */
static PyObject *runner_run = NULL;

/* The report's keys (runner.py, run()); every one must be present. */
typedef enum ReportKey {
        REPORT_KEY_EXCEPTION,     /* bool */
        REPORT_KEY_LIMIT,         /* None or a name of report_limit_to_string() */
        REPORT_KEY_EXC_TYPE,      /* str or None */
        REPORT_KEY_EXC_MESSAGE,   /* str or None */
        REPORT_KEY_EXC_TRACEBACK, /* str or None */
        REPORT_KEY_RESULT,        /* bytes or None */
        REPORT_KEY_EXC,           /* the exception object or None */
        _REPORT_KEY_MAX,
} ReportKey;

static const char *const report_key_names[_REPORT_KEY_MAX] = {
        [REPORT_KEY_EXCEPTION] = "exception",
        [REPORT_KEY_LIMIT] = "limit",
        [REPORT_KEY_EXC_TYPE] = "exc_type",
        [REPORT_KEY_EXC_MESSAGE] = "exc_message",
        [REPORT_KEY_EXC_TRACEBACK] = "exc_traceback",
        [REPORT_KEY_RESULT] = "result",
        [REPORT_KEY_EXC] = "exc",
};

/* Interned by pyrun_init(). */
static PyObject *report_keys[_REPORT_KEY_MAX];

/* Imported by pyrun_preload() in the zygote, so forked workers start warm. */
static const char *const preload_modules[] = {
        "math",      "statistics", "json",   "csv",    "re",       "decimal", "fractions", "datetime", "collections",
        "itertools", "functools",  "random", "string", "textwrap", "io",      "traceback", "ast",      "linecache",
};
/* And the module the runner serves from numeric_source. */
#define PRELOAD_NUMERIC "codeinterp_numeric"

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

/* The policy's pythonPackages, set by pyrun_init_packages(). */
static uint32_t packages_mask = 0;

/* Every worker's: the account its /etc/passwd names (worker/sandbox.c), with the
 * call's /tmp as home (Path.home(), expanduser("~"), getpass.getuser()). The zygote
 * sets it before Python starts, so its workers' os.environ has it too. And one malloc
 * arena: each thread's own would reserve 64 MiB of address space, which counts
 * against memoryBytes (RLIMIT_AS), so a pool of 32 threads could not start. */
static int base_environment(void) {
        static const char *const vars[][2] = {
                { "HOME", "/tmp" },
                { "USER", "sandbox" },
                { "LOGNAME", "sandbox" },
        };

        for (size_t i = 0; i < ELEMENTSOF(vars); i++)
                if (setenv(vars[i][0], vars[i][1], 1) < 0)
                        return -errno;
        /* Not fatal where malloc is not glibc's (a sanitizer's allocator answers 0). */
        (void) mallopt(M_ARENA_MAX, 1);
        return 0;
}

/* The environment the packages read when their libraries load: one thread in every
 * BLAS/OpenMP pool (a worker is one process with RLIMIT_NPROC of threads), and
 * matplotlib's non-interactive Agg backend with a config directory in the call's /tmp
 * (the zygote imports it with a private one, see the runner's preload()). */
static int packages_environment(void) {
        static const char *const vars[][2] = {
                { "OPENBLAS_NUM_THREADS", "1" },   { "OMP_NUM_THREADS", "1" },
                { "MKL_NUM_THREADS", "1" },        { "NUMEXPR_NUM_THREADS", "1" },
                { "VECLIB_MAXIMUM_THREADS", "1" }, { "GOTO_NUM_THREADS", "1" },
                { "MPLBACKEND", "Agg" },           { "MPLCONFIGDIR", "/tmp/.matplotlib" },
        };

        for (size_t i = 0; i < ELEMENTSOF(vars); i++)
                if (setenv(vars[i][0], vars[i][1], 1) < 0)
                        return -errno;
        /* And what the packages themselves need (contract/runtime.h: MATPLOTLIBRC). */
        for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                const char *cursor = NULL, *end;
                int r;

                if (!(packages_mask & POLICY_PACKAGE_BIT(p)))
                        continue;
                for (cursor = runtime_packages[p].env; *cursor; cursor = *end ? end + 1 : end) {
                        char item[PATH_MAX], *eq;
                        size_t len;

                        end = strchrnul(cursor, ':');
                        len = (size_t) (end - cursor);
                        if (len >= sizeof item)
                                return -EINVAL;
                        memcpy(item, cursor, len);
                        item[len] = 0;
                        eq = strchr(item, '=');
                        if (!eq || eq == item)
                                return -EINVAL;
                        *eq = 0;
                        r = setenv(item, eq + 1, 1);
                        if (r < 0)
                                return -errno;
                }
        }
        return 0;
}

/* The libraries the packages' extension modules need by a soname whose symlink leads
 * out of the worker's root (contract/runtime.h): loaded by their real path first, so
 * the loader finds them among the loaded objects. Never unloaded. */
static int packages_preload_libraries(void) {
        PolicyPackage p = 0;
        const char *cursor = NULL;
        char path[PATH_MAX];
        int r;

        while ((r = runtime_package_path_next(packages_mask, RUNTIME_PRELOAD, &p, &cursor, path)) > 0)
                if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL))
                        return -ENOENT;
        return r;
}

/* The import path: the stdlib, lib-dynload, then each site directory of the policy's
 * packages once. */
static PyObject *import_paths(void) {
        _cleanup_pyobj_ PyObject *list = Py_BuildValue("[ss]", CODEINTERP_PY_STDLIB, CODEINTERP_PY_DYNLOAD);
        PolicyPackage p = 0;
        const char *cursor = NULL;
        char path[PATH_MAX];
        int r;

        if (!list)
                return NULL;
        while ((r = runtime_package_path_next(packages_mask, RUNTIME_SITES, &p, &cursor, path)) > 0) {
                _cleanup_pyobj_ PyObject *s = PyUnicode_DecodeFSDefault(path);
                int k;

                if (!s)
                        return NULL;
                k = PySequence_Contains(list, s);
                if (k < 0 || (k == 0 && PyList_Append(list, s) < 0))
                        return NULL;
        }
        if (r < 0) {
                PyErr_SetString(PyExc_ValueError, "malformed site directory list");
                return NULL;
        }
        return PyList_AsTuple(list);
}

/* The names of the policy's packages, in allow-list order. */
static PyObject *package_names(void) {
        _cleanup_pyobj_ PyObject *list = PyList_New(0);

        if (!list)
                return NULL;
        for (PolicyPackage p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                _cleanup_pyobj_ PyObject *s = NULL;

                if (!(packages_mask & POLICY_PACKAGE_BIT(p)))
                        continue;
                s = PyUnicode_FromString(policy_package_to_string(p));
                if (!s || PyList_Append(list, s) < 0)
                        return NULL;
        }
        return PyList_AsTuple(list);
}

/* The runner's preload(names), forget_host_facts() and renew_worker(), bound by
 * pyrun_runner_setup(). */
static PyObject *runner_preload = NULL;
static PyObject *runner_forget_host_facts = NULL;
static PyObject *runner_renew_worker = NULL;

/* The runner's functions that C calls, each bound by name once the runner has run. */
static const struct {
        const char *name;
        PyObject **ret;
} runner_entries[] = {
        { "run", &runner_run },
        { "preload", &runner_preload },
        { "forget_host_facts", &runner_forget_host_facts },
        { "renew_worker", &runner_renew_worker },
};

/* Compile and run the runner into a private namespace; bind its run(). */
static int pyrun_runner_setup(void) {
        _cleanup_pyobj_ PyObject *globals = NULL, *builtins = NULL, *name = NULL, *paths = NULL, *numeric = NULL,
                                 *names = NULL, *code = NULL, *ret = NULL;
        const char *source = (const char *) runner_source;
        const char *numeric_text = (const char *) numeric_source;

        /* embed.cmake refuses a NUL byte; these are the C strings the compiler sees. */
        if (strlen(source) != sizeof runner_source - 1 || strlen(numeric_text) != sizeof numeric_source - 1)
                return -EBADMSG;

        for (size_t i = 0; i < ELEMENTSOF(report_keys); i++)
                if (!report_keys[i]) {
                        report_keys[i] = PyUnicode_InternFromString(report_key_names[i]);
                        if (!report_keys[i])
                                goto fail;
                }

        globals = PyDict_New();
        builtins = PyDict_Copy(PyEval_GetBuiltins());
        name = PyUnicode_FromString("codeinterp.runner");
        paths = import_paths();
        names = package_names();
        numeric = PyUnicode_FromStringAndSize(numeric_text, (Py_ssize_t) (sizeof numeric_source - 1));
        if (!globals || !builtins || !name || !paths || !numeric || !names)
                goto fail;
        if (PyDict_SetItemString(globals, "__builtins__", builtins) < 0 ||
            PyDict_SetItemString(globals, "__name__", name) < 0 || PyDict_SetItemString(globals, "_PATHS", paths) < 0 ||
            PyDict_SetItemString(globals, "_NUMERIC", numeric) < 0 ||
            PyDict_SetItemString(globals, "_PACKAGES", names) < 0)
                goto fail;

        code = Py_CompileString(source, "<codeinterp-runner>", Py_file_input);
        if (!code)
                goto fail;
        ret = PyEval_EvalCode(code, globals, globals);
        if (!ret)
                goto fail;

        for (size_t i = 0; i < ELEMENTSOF(runner_entries); i++) {
                PyObject *fn = PyDict_GetItemString(globals, runner_entries[i].name); /* borrowed */
                if (!fn || !PyCallable_Check(fn))
                        return -EIO;
                *runner_entries[i].ret = Py_NewRef(fn);
        }
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
        return pyrun_init_packages(0);
}

int pyrun_init_packages(uint32_t packages) {
        PyPreConfig preconfig;
        PyConfig config;
        PyStatus status;
        int r;

        if (Py_IsInitialized())
                return -EALREADY;
        if (packages >> _POLICY_PACKAGE_MAX)
                return -EINVAL;
        packages_mask = packages;
        if ((r = base_environment()) < 0)
                return r;
        if (packages && ((r = packages_environment()) < 0 || (r = packages_preload_libraries()) < 0))
                return r;

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

static int preload_module(const char *name) {
        PyObject *m = PyImport_ImportModule(name);
        if (!m) {
                /* ImportError means the stdlib is incomplete (e.g. a missing Debian package). */
                int r = PyErr_ExceptionMatches(PyExc_ImportError) ? -ENOENT : -EIO;
                PyErr_Clear();
                return r;
        }
        Py_DECREF(m);
        return 0;
}

int pyrun_preload(void) {
        int r;

        if (!runner_run)
                return -ENXIO;

        for (size_t i = 0; i < ELEMENTSOF(preload_modules); i++) {
                r = preload_module(preload_modules[i]);
                if (r < 0)
                        return r;
        }
        r = preload_module(PRELOAD_NUMERIC);
        if (r < 0)
                return r;
        if (packages_mask) {
                _cleanup_pyobj_ PyObject *names = package_names(), *ret = NULL;

                ret = names ? PyObject_CallOneArg(runner_preload, names) : NULL;
                if (!ret) {
                        r = PyErr_ExceptionMatches(PyExc_ImportError) ? -ENOPKG : -EIO;
                        PyErr_Clear();
                        return r;
                }
        }
        /* Nothing the preload learnt about the host may reach a worker. */
        _cleanup_pyobj_ PyObject *forgot = PyObject_CallNoArgs(runner_forget_host_facts);
        if (!forgot) {
                PyErr_Clear();
                return -EIO;
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
        /* Our own constants, never user code: a final expression with a float value (its
         * repr runs the float formatting a typical call's result needs), and, when pandas is
         * preloaded, the core of a typical pandas call (a frame built, a column reduced).
         * In a pre-started worker this copies, while it waits, the pages of the zygote's
         * objects that such a call writes (reference counts): ~800 copy-on-write faults
         * taken off a pandas call's path (docs/performance.md, "Prefaulting"). */
        static const char *const snippets[] = { "sum([1.5, 0.25]) / 2" };
        static const char pandas_snippet[] = "__import__('pandas').DataFrame({'h': [1.5, 0.5]})['h'].mean()";
        for (size_t i = 0; i <= ELEMENTSOF(snippets); i++) {
                const char *s = i < ELEMENTSOF(snippets) ? snippets[i] : pandas_snippet;

                if (i == ELEMENTSOF(snippets) && !(packages_mask & POLICY_PACKAGE_BIT(POLICY_PACKAGE_PANDAS)))
                        break;
                r = pyrun_execute(s, strlen(s), NULL, 0, -1, &rep);
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

int pyrun_renew_worker(void) {
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
        Py_CLEAR(ret);
        ret = PyObject_CallNoArgs(runner_renew_worker);
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

static int limit_from_name(PyObject *name, PyrunLimit *ret) {
        if (name == Py_None) {
                *ret = PYRUN_LIMIT_NONE;
                return 0;
        }
        if (!PyUnicode_Check(name))
                return -EPROTO;
        for (PyrunLimit l = PYRUN_LIMIT_MEMORY; l <= PYRUN_LIMIT_PROCESSES; l++)
                if (PyUnicode_CompareWithASCIIString(name, report_limit_to_string((ReportLimit) l)) == 0) {
                        *ret = l;
                        return 0;
                }
        return -EPROTO;
}

/* Convert the runner's report, read by key; *ret_result borrows the result bytes
 * from res. -EPROTO when res is not the report run() promises: not a dict, a key
 * missing, a value of the wrong type, or a result beside an exception. */
static int report_from_dict(PyrunReport *r, PyObject *res, PyObject **ret_result) {
        PyObject *v[_REPORT_KEY_MAX];
        PyrunLimit limit;
        int k;

        if (!PyDict_CheckExact(res))
                return -EPROTO;
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                v[i] = PyDict_GetItemWithError(res, report_keys[i]); /* borrowed */
                if (!v[i]) {
                        PyErr_Clear();
                        return -EPROTO;
                }
        }
        if (!PyBool_Check(v[REPORT_KEY_EXCEPTION]))
                return -EPROTO;
        k = limit_from_name(v[REPORT_KEY_LIMIT], &limit);
        if (k < 0)
                return k;
        for (size_t i = REPORT_KEY_EXC_TYPE; i <= REPORT_KEY_EXC_TRACEBACK; i++)
                if (v[i] != Py_None && !PyUnicode_Check(v[i]))
                        return -EPROTO;
        if (v[REPORT_KEY_RESULT] != Py_None && !PyBytes_Check(v[REPORT_KEY_RESULT]))
                return -EPROTO;

        if (v[REPORT_KEY_EXCEPTION] == Py_True) {
                if (v[REPORT_KEY_RESULT] != Py_None)
                        return -EPROTO;
                r->exception = true;
                r->limit = limit;
                return report_strings(r, v[REPORT_KEY_EXC_TYPE], v[REPORT_KEY_EXC_MESSAGE], v[REPORT_KEY_EXC_TRACEBACK],
                                      exc_type_fallback(v[REPORT_KEY_EXC]));
        }

        if (limit != PYRUN_LIMIT_NONE)
                return -EPROTO;
        if (v[REPORT_KEY_RESULT] != Py_None) {
                r->has_result = true;
                *ret_result = v[REPORT_KEY_RESULT];
        }
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
        r = res ? report_from_dict(&report, res, &result) : report_from_error(&report);
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
