/* SPDX-License-Identifier: MIT */
/* codeinterp exec --save FILE and codeinterp replay FILE (docs/client.md), and the rule
 * both follow for the sources each call of a chain names. */
#pragma once

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

#include "client/lib/libcodeinterp.h"

/* How many calls one exec runs (and a record holds): each -c or FILE is one. */
#define REPLAY_MAX_CALLS 16
/* How many sourceIds one execute names (the supervisor's PROTO_MAX_SOURCE_IDS). */
#define REPLAY_MAX_SOURCE_IDS 4
/* A source ID's longest form (out-<call>-<name> included). */
#define REPLAY_SOURCE_ID_MAX 64

/* One source registered for the call, as exec's options named it. */
typedef struct ReplaySource {
        const char *id;
        bool attachment;
        const char *file;       /* read_source: the text; attachment: the original bytes */
        const char *text_file;  /* attachment: the canonical text's file; NULL: file itself */
        const char *media_type; /* attachment: NULL for the default */
} ReplaySource;

/* One call that got an answer: what was sent and the result or error message. */
typedef struct ReplayCall {
        const char *summary;
        const char *code;
        size_t code_len;
        const CiKeep *keep; /* NULL: no keepOutputs */
        const msgpack_object *message;
} ReplayCall;

/* Write the record to path (replaced atomically): each source's files (absolute) with
 * the digests of what they hold now, and per call its summary, code, keepOutputs and
 * whole message. Version 1 for one call without keepOutputs, else version 2. 0 or
 * -errno. */
int replay_save(const char *path, const ReplaySource *sources, size_t n_sources, const ReplayCall *calls,
                size_t n_calls);

/* The sourceIds of a chain's call: the registered sources, then each source the call
 * before it kept, in keptOutputs' order (so call 2 mounts out-1-NAME). */
typedef struct ReplayChainIds {
        const char *ids[REPLAY_MAX_SOURCE_IDS];
        char kept[REPLAY_MAX_SOURCE_IDS][REPLAY_SOURCE_ID_MAX + 1];
        size_t n;      /* how many ids[] holds */
        size_t wanted; /* how many there would be: > REPLAY_MAX_SOURCE_IDS with -E2BIG */
} ReplayChainIds;

/* registered: the n registered IDs; prev: the message of the call before (NULL for the
 * first). 0, -E2BIG when more than REPLAY_MAX_SOURCE_IDS would be named, -EBADMSG for a
 * kept ID longer than REPLAY_SOURCE_ID_MAX. */
int replay_chain_ids(const char *const *registered, size_t n, const msgpack_object *prev, ReplayChainIds *ret);

/* codeinterp replay [-h] FILE (argv[0] is "replay"): run the recorded call (or chain of
 * calls) again against the supervisor at socket (NULL: the default) and report what is
 * identical. Returns the exit status: 0 identical, 1 not, 2 error. */
int replay_main(const char *socket, int argc, char **argv);
