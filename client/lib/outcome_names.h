/* SPDX-License-Identifier: MIT */
/* The outcome names the client knows (docs/protocol.md's closed set), for the command's
 * files over the library: not exported from libcodeinterp.so (not ci_*). */
#pragma once

#include <msgpack.h>

/* The known outcome o names (a static string), or NULL for anything else. */
const char *client_outcome_name(const msgpack_object *o);
