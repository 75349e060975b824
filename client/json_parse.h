/* SPDX-License-Identifier: MIT */
#pragma once

#include <msgpack.h>
#include <stddef.h>

/* Parse one JSON text (RFC 8259; surrounding whitespace allowed) into a msgpack
 * object tree allocated in zone: objects become maps (str keys), arrays arrays,
 * strings str (UTF-8, escapes decoded), integers that fit 64 bits positive or
 * negative integers, other numbers float64, true/false booleans, null nil. The
 * inverse of ci_json_write() for what it writes. 0, -EBADMSG for text that is
 * not JSON (or nested deeper than 64), -ENOMEM. */
int ci_json_parse(const char *text, size_t len, msgpack_zone *zone, msgpack_object *ret);
