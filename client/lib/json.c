/* SPDX-License-Identifier: MIT */
/* libcodeinterp's msgpack to JSON writer: a reply or result printed as one JSON object
 * (codeinterp exec --json, hello, describe, status). */
#include "client/lib/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>

void ci_json_write_string(FILE *f, const char *s, size_t n) {
        const uint8_t *p = (const uint8_t *) s, *end = p + n;

        fputc('"', f);
        while (p < end) {
                uint8_t c = *p;
                if (c == '"' || c == '\\') {
                        fputc('\\', f);
                        fputc(c, f);
                        p++;
                } else if (c < 0x20 || c == 0x7f) {
                        switch (c) {
                        case '\n':
                                fputs("\\n", f);
                                break;
                        case '\r':
                                fputs("\\r", f);
                                break;
                        case '\t':
                                fputs("\\t", f);
                                break;
                        default:
                                fprintf(f, "\\u%04x", c);
                        }
                        p++;
                } else if (c < 0x80) {
                        fputc(c, f);
                        p++;
                } else {
                        /* Pass valid sequences through, replace anything else. */
                        size_t need = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c <= 0xDF ? 1 : 0;
                        bool ok = need > 0 && c <= 0xF4 && (size_t) (end - p) > need;
                        for (size_t i = 1; ok && i <= need; i++)
                                ok = (p[i] & 0xC0) == 0x80;
                        if (ok) {
                                fwrite(p, 1, need + 1, f);
                                p += need + 1;
                        } else {
                                fputs("\\ufffd", f);
                                p++;
                        }
                }
        }
        fputc('"', f);
}

static void write_base64(FILE *f, const uint8_t *p, size_t n) {
        static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        fputc('"', f);
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v =
                        (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
                fputc(tbl[v >> 18 & 63], f);
                fputc(tbl[v >> 12 & 63], f);
                fputc(i + 1 < n ? tbl[v >> 6 & 63] : '=', f);
                fputc(i + 2 < n ? tbl[v & 63] : '=', f);
        }
        fputc('"', f);
}

void ci_json_write(FILE *f, const msgpack_object *o) {
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                fputs("null", f);
                break;
        case MSGPACK_OBJECT_BOOLEAN:
                fputs(o->via.boolean ? "true" : "false", f);
                break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                fprintf(f, "%" PRIu64, o->via.u64);
                break;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                fprintf(f, "%" PRId64, o->via.i64);
                break;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                if (isfinite(o->via.f64))
                        fprintf(f, "%.17g", o->via.f64);
                else
                        fputs("null", f);
                break;
        case MSGPACK_OBJECT_STR:
                ci_json_write_string(f, o->via.str.ptr, o->via.str.size);
                break;
        case MSGPACK_OBJECT_BIN:
                write_base64(f, (const uint8_t *) o->via.bin.ptr, o->via.bin.size);
                break;
        case MSGPACK_OBJECT_ARRAY:
                fputc('[', f);
                for (uint32_t i = 0; i < o->via.array.size; i++) {
                        if (i)
                                fputc(',', f);
                        ci_json_write(f, &o->via.array.ptr[i]);
                }
                fputc(']', f);
                break;
        case MSGPACK_OBJECT_MAP:
                fputc('{', f);
                for (uint32_t i = 0; i < o->via.map.size; i++) {
                        const msgpack_object *k = &o->via.map.ptr[i].key;
                        if (i)
                                fputc(',', f);
                        if (k->type == MSGPACK_OBJECT_STR)
                                ci_json_write_string(f, k->via.str.ptr, k->via.str.size);
                        else
                                fputs("\"?\"", f);
                        fputc(':', f);
                        ci_json_write(f, &o->via.map.ptr[i].val);
                }
                fputc('}', f);
                break;
        default:
                fputs("null", f);
        }
}
