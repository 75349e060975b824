/* SPDX-License-Identifier: MIT */
/* What the `codeinterp` command's files share: the exit statuses of the command, the
 * usage text, each subcommand's entry and two readers of a reply's fields. The library
 * (libcodeinterp) knows none of it. */
#pragma once

#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>

#include "common/mp.h"

#define EXIT_USAGE 2
#define EXIT_CONNECT 12
#define EXIT_ARTIFACTS 13 /* the call ended ok, but --save-artifacts could not save every file */
#define EXIT_NOT_READY 14 /* status --ready: the supervisor answered that it is not ready */

/* codeinterp --help and codeinterp exec --help (client/codeinterp.c). */
void cli_help(void);
void cli_exec_help(void);

/* codeinterp exec (client/exec.c). */
int exec_main(const char *socket_path, int argc, char **argv);

/* A string field into buf, or dflt when it is not a string. */
static inline const char *cli_str_or(const msgpack_object *o, char *buf, size_t n, const char *dflt) {
        if (!mp_is_str(o))
                return dflt;
        snprintf(buf, n, "%.*s", (int) o->via.str.size, o->via.str.ptr);
        return buf;
}

static inline uint64_t cli_uint_or0(const msgpack_object *o) {
        return mp_is_uint(o) ? o->via.u64 : 0;
}
