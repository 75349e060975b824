/* SPDX-License-Identifier: MIT */
/* msgpack to JSON for the command (client/lib/json.c). */
#pragma once

#include <msgpack.h>
#include <stdio.h>

/* Write a msgpack object as one line of JSON. Strings are escaped per RFC 8259
 * (invalid UTF-8 bytes become U+FFFD); bin becomes a base64 string. */
void ci_json_write(FILE *f, const msgpack_object *o);
/* One JSON string, escaped the same way. */
void ci_json_write_string(FILE *f, const char *s, size_t n);
