/* SPDX-License-Identifier: MIT */
/* codeinterp exec --save FILE and codeinterp replay FILE (docs/client.md). */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

/* One source registered for the call, as exec's options named it. */
typedef struct ReplaySource {
        const char *id;
        bool attachment;
        const char *file;       /* read_source: the text; attachment: the original bytes */
        const char *text_file;  /* attachment: the canonical text's file; NULL: file itself */
        const char *media_type; /* attachment: NULL for the default */
} ReplaySource;

/* Write the record of one exec call to path (replaced atomically): the summary,
 * the code, each source's files (absolute) with the digests of what they hold
 * now, and the call's whole result or error message. 0 or -errno. */
int replay_save(const char *path, const char *summary, const char *code, size_t code_len, const ReplaySource *sources,
                size_t n_sources, const msgpack_object *message);

/* codeinterp replay [-h] FILE (argv[0] is "replay"): run the recorded call again
 * against the supervisor at socket (NULL: the default) and report what is
 * identical. Returns the exit status: 0 identical, 1 not, 2 error. */
int replay_main(const char *socket, int argc, char **argv);
