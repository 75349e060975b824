/* SPDX-License-Identifier: MIT */
/* What client/replay.c (running and comparing) takes from client/replay_record.c (the
 * record read back): the record's calls, checked, whatever its version. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "client/lib/libcodeinterp.h"
#include "client/replay.h"

/* One recorded call; every pointer points into the record (in its zone). */
typedef struct RecordCall {
        const msgpack_object *summary;     /* a string */
        const msgpack_object *code;        /* a string */
        const msgpack_object *code_sha256; /* a string, or NULL */
        const msgpack_object *message;     /* a map */
        bool has_keep;                     /* keepOutputs was sent: keep below */
        CiKeep keep;
        const char *keep_names[CI_KEEP_OUTPUTS_MAX]; /* NUL-terminated */
} RecordCall;

typedef struct Record {
        unsigned version;              /* 1 or 2 */
        const msgpack_object *sources; /* an array */
        RecordCall calls[REPLAY_MAX_CALLS];
        size_t n_calls; /* 1 for version 1 */
} Record;

/* The record at path, read into zone and checked (version 1 or 2, the fields replay
 * needs). 0, or a negative errno after saying why on stderr. */
int replay_load_record(const char *path, msgpack_zone *zone, Record *ret);
