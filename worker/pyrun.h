/* SPDX-License-Identifier: MIT */
/* Embedded CPython: isolated configuration, the interactive-shell execution rule,
 * typed exception capture. Knows nothing about sockets, sandboxes or msgpack. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* sys.prefix and sys.executable: fixed so that nothing is derived from the
 * worker binary's location or from $PATH (getpath searches $PATH for
 * program_name even when use_environment is 0). The build may override them. */
#ifndef CODEINTERP_PY_PREFIX
#define CODEINTERP_PY_PREFIX "/usr"
#endif
#ifndef CODEINTERP_PY_EXECUTABLE
#define CODEINTERP_PY_EXECUTABLE "/usr/bin/python3"
#endif

typedef struct PyrunInput {
        const char *id;            /* source ID */
        const char *text_path;     /* "/inputs/<id>.txt" */
        const char *original_path; /* attachments only, else NULL */
        const char *media_type;    /* attachments only, else NULL */
} PyrunInput;

typedef enum PyrunLimit {
        PYRUN_LIMIT_NONE,
        PYRUN_LIMIT_MEMORY,    /* MemoryError */
        PYRUN_LIMIT_FILE_SIZE, /* OSError with errno EFBIG */
        PYRUN_LIMIT_PROCESSES, /* thread creation failed (RLIMIT_NPROC) */
} PyrunLimit;

typedef struct PyrunReport {
        bool exception;      /* an uncaught exception (incl. SystemExit, KeyboardInterrupt) ended the code */
        bool has_result;     /* the last statement was a shown expression; its repr went to result_fd */
        PyrunLimit limit;    /* for exceptions caused by a resource limit */
        char *exc_type;      /* e.g. "ZeroDivisionError", "json.decoder.JSONDecodeError" (UTF-8, malloc'd) */
        char *exc_message;   /* str(exc) (UTF-8, malloc'd, may be large) */
        char *exc_traceback; /* formatted traceback, user frames only ("<code>"), malloc'd */
} PyrunReport;

/* Initialise CPython once per process with the isolated configuration. */
int pyrun_init(void);
/* The same, with the policy's pythonPackages (a POLICY_PACKAGE_BIT() mask): their site
 * directories join the import path, and the environment pins the numeric libraries'
 * thread pools to one thread and matplotlib to the Agg backend (set before any import). */
int pyrun_init_packages(uint32_t packages);
/* Import the modules calculations use, and the policy's packages (zygote; matplotlib
 * with the Agg backend and its font manager built, its config directory a private
 * temporary directory removed afterwards). */
int pyrun_preload(void);
/* Zygote: run the runner once on built-in constants so lazily built interpreter state
 * (AST types, compiler and type caches) is made once and shared copy-on-write. Leaves
 * __main__ as it was. Never runs user code. */
int pyrun_warmup(void);
/* In a worker the zygote made, once its sandbox is complete: fresh randomness (the
 * random module's state, and numpy's global RandomState when numpy is loaded), and the
 * time zone read again from the worker's root (the runner's renew_worker()). */
int pyrun_renew_worker(void);
/* Run code (UTF-8). The final expression's repr (UTF-8) is written to result_fd,
 * which is then closed (always, also on failure; -1 discards the value). Returns 0
 * when the code ran (with or without exception, see ret), -errno when the runner
 * itself failed (then ret is untouched). */
int pyrun_execute(const char *code, size_t code_len, const PyrunInput *inputs, size_t n_inputs, int result_fd,
                  PyrunReport *ret);
void pyrun_report_done(PyrunReport *r);
