/* SPDX-License-Identifier: MIT */
/* A small strict JSON parser into msgpack objects, for reading back what the
 * client wrote with ci_json_write() (replay records). */
#include "client/json_parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

#define JSON_MAX_DEPTH 64

typedef struct JsonParser {
        const char *p, *end;
        msgpack_zone *zone;
        unsigned depth;
} JsonParser;

static int parse_value(JsonParser *j, msgpack_object *o);

static void skip_ws(JsonParser *j) {
        while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
                j->p++;
}

static bool take(JsonParser *j, char c) {
        skip_ws(j);
        if (j->p < j->end && *j->p == c) {
                j->p++;
                return true;
        }
        return false;
}

static bool take_word(JsonParser *j, const char *w) {
        size_t n = strlen(w);
        if ((size_t) (j->end - j->p) < n || memcmp(j->p, w, n) != 0)
                return false;
        j->p += n;
        return true;
}

static int hex4(const char *p, uint32_t *ret) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
                char c = p[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                        v |= (uint32_t) (c - '0');
                else if (c >= 'a' && c <= 'f')
                        v |= (uint32_t) (c - 'a' + 10);
                else if (c >= 'A' && c <= 'F')
                        v |= (uint32_t) (c - 'A' + 10);
                else
                        return -EBADMSG;
        }
        *ret = v;
        return 0;
}

static size_t put_utf8(char *out, uint32_t cp) {
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xC0 | cp >> 6);
                out[1] = (char) (0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xE0 | cp >> 12);
                out[1] = (char) (0x80 | (cp >> 6 & 0x3F));
                out[2] = (char) (0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (char) (0xF0 | cp >> 18);
        out[1] = (char) (0x80 | (cp >> 12 & 0x3F));
        out[2] = (char) (0x80 | (cp >> 6 & 0x3F));
        out[3] = (char) (0x80 | (cp & 0x3F));
        return 4;
}

/* At the opening quote. The decoded text is never longer than the escaped one. */
static int parse_string(JsonParser *j, msgpack_object *o) {
        const char *start = ++j->p;
        const char *q = start;
        char *out, *w;

        while (q < j->end && *q != '"')
                q += *q == '\\' && q + 1 < j->end ? 2 : 1;
        if (q >= j->end)
                return -EBADMSG;
        out = msgpack_zone_malloc(j->zone, (size_t) (q - start) + 1);
        if (!out)
                return -ENOMEM;
        w = out;
        for (const char *p = start; p < q;) {
                unsigned char c = (unsigned char) *p;
                if (c < 0x20)
                        return -EBADMSG;
                if (c != '\\') {
                        *w++ = (char) c;
                        p++;
                        continue;
                }
                p++;
                switch (*p++) {
                case '"':
                        *w++ = '"';
                        break;
                case '\\':
                        *w++ = '\\';
                        break;
                case '/':
                        *w++ = '/';
                        break;
                case 'b':
                        *w++ = '\b';
                        break;
                case 'f':
                        *w++ = '\f';
                        break;
                case 'n':
                        *w++ = '\n';
                        break;
                case 'r':
                        *w++ = '\r';
                        break;
                case 't':
                        *w++ = '\t';
                        break;
                case 'u': {
                        uint32_t cp, lo;
                        if (q - p < 4 || hex4(p, &cp) < 0)
                                return -EBADMSG;
                        p += 4;
                        if (cp >= 0xD800 && cp <= 0xDBFF && q - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                            hex4(p + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                p += 6;
                        } else if (cp >= 0xD800 && cp <= 0xDFFF)
                                cp = 0xFFFD; /* a lone surrogate is not UTF-8 */
                        w += put_utf8(w, cp);
                        break;
                }
                default:
                        return -EBADMSG;
                }
        }
        j->p = q + 1;
        o->type = MSGPACK_OBJECT_STR;
        o->via.str.ptr = out;
        o->via.str.size = (uint32_t) (w - out);
        return 0;
}

static int parse_number(JsonParser *j, msgpack_object *o) {
        const char *s = j->p, *p = s;
        bool integer = true;
        char buf[64], *e;

        if (p < j->end && *p == '-')
                p++;
        if (p >= j->end || *p < '0' || *p > '9')
                return -EBADMSG;
        if (*p == '0')
                p++;
        else
                while (p < j->end && *p >= '0' && *p <= '9')
                        p++;
        if (p < j->end && *p == '.') {
                integer = false;
                if (++p >= j->end || *p < '0' || *p > '9')
                        return -EBADMSG;
                while (p < j->end && *p >= '0' && *p <= '9')
                        p++;
        }
        if (p < j->end && (*p == 'e' || *p == 'E')) {
                integer = false;
                p++;
                if (p < j->end && (*p == '+' || *p == '-'))
                        p++;
                if (p >= j->end || *p < '0' || *p > '9')
                        return -EBADMSG;
                while (p < j->end && *p >= '0' && *p <= '9')
                        p++;
        }
        if ((size_t) (p - s) >= sizeof buf)
                return -EBADMSG; /* nothing ci_json_write() writes is this long */
        memcpy(buf, s, (size_t) (p - s));
        buf[p - s] = 0;
        j->p = p;
        errno = 0;
        if (integer && buf[0] == '-') {
                long long v = strtoll(buf, &e, 10);
                if (errno == 0 && *e == 0) {
                        o->type = v < 0 ? MSGPACK_OBJECT_NEGATIVE_INTEGER : MSGPACK_OBJECT_POSITIVE_INTEGER;
                        o->via.i64 = v;
                        return 0;
                }
        } else if (integer) {
                unsigned long long v = strtoull(buf, &e, 10);
                if (errno == 0 && *e == 0) {
                        o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                        o->via.u64 = v;
                        return 0;
                }
        }
        errno = 0;
        o->type = MSGPACK_OBJECT_FLOAT64;
        o->via.f64 = strtod(buf, &e);
        return *e == 0 ? 0 : -EBADMSG;
}

/* Grow *items (each size bytes) to hold one more than *n. */
static int grow(void **items, size_t *cap, size_t n, size_t size) {
        if (n < *cap)
                return 0;
        size_t c = *cap ? *cap * 2 : 8;
        void *p = reallocarray(*items, c, size);
        if (!p)
                return -ENOMEM;
        *items = p;
        *cap = c;
        return 0;
}

static int parse_array(JsonParser *j, msgpack_object *o) {
        _cleanup_free_ msgpack_object *items = NULL;
        size_t n = 0, cap = 0;
        int k;

        j->p++;
        if (!take(j, ']')) {
                do {
                        k = grow((void **) &items, &cap, n, sizeof *items);
                        if (k < 0)
                                return k;
                        k = parse_value(j, &items[n]);
                        if (k < 0)
                                return k;
                        n++;
                } while (take(j, ','));
                if (!take(j, ']'))
                        return -EBADMSG;
        }
        if (n > UINT32_MAX)
                return -EBADMSG;
        o->type = MSGPACK_OBJECT_ARRAY;
        o->via.array.size = (uint32_t) n;
        o->via.array.ptr = NULL;
        if (n > 0) {
                o->via.array.ptr = msgpack_zone_malloc(j->zone, n * sizeof *items);
                if (!o->via.array.ptr)
                        return -ENOMEM;
                memcpy(o->via.array.ptr, items, n * sizeof *items);
        }
        return 0;
}

static int parse_object(JsonParser *j, msgpack_object *o) {
        _cleanup_free_ msgpack_object_kv *items = NULL;
        size_t n = 0, cap = 0;
        int k;

        j->p++;
        if (!take(j, '}')) {
                do {
                        k = grow((void **) &items, &cap, n, sizeof *items);
                        if (k < 0)
                                return k;
                        skip_ws(j);
                        if (j->p >= j->end || *j->p != '"')
                                return -EBADMSG;
                        k = parse_string(j, &items[n].key);
                        if (k < 0)
                                return k;
                        if (!take(j, ':'))
                                return -EBADMSG;
                        k = parse_value(j, &items[n].val);
                        if (k < 0)
                                return k;
                        n++;
                } while (take(j, ','));
                if (!take(j, '}'))
                        return -EBADMSG;
        }
        if (n > UINT32_MAX)
                return -EBADMSG;
        o->type = MSGPACK_OBJECT_MAP;
        o->via.map.size = (uint32_t) n;
        o->via.map.ptr = NULL;
        if (n > 0) {
                o->via.map.ptr = msgpack_zone_malloc(j->zone, n * sizeof *items);
                if (!o->via.map.ptr)
                        return -ENOMEM;
                memcpy(o->via.map.ptr, items, n * sizeof *items);
        }
        return 0;
}

static int parse_value(JsonParser *j, msgpack_object *o) {
        int k;

        skip_ws(j);
        if (j->p >= j->end)
                return -EBADMSG;
        *o = (msgpack_object){ .type = MSGPACK_OBJECT_NIL };
        switch (*j->p) {
        case '{':
        case '[':
                if (j->depth >= JSON_MAX_DEPTH)
                        return -EBADMSG;
                j->depth++;
                k = *j->p == '{' ? parse_object(j, o) : parse_array(j, o);
                j->depth--;
                return k;
        case '"':
                return parse_string(j, o);
        case 't':
        case 'f':
                o->type = MSGPACK_OBJECT_BOOLEAN;
                o->via.boolean = *j->p == 't';
                return take_word(j, o->via.boolean ? "true" : "false") ? 0 : -EBADMSG;
        case 'n':
                return take_word(j, "null") ? 0 : -EBADMSG;
        default:
                return parse_number(j, o);
        }
}

int ci_json_parse(const char *text, size_t len, msgpack_zone *zone, msgpack_object *ret) {
        JsonParser j;
        msgpack_object o;
        int k;

        if (!text || !zone || !ret)
                return -EINVAL;
        j = (JsonParser){ .p = text, .end = text + len, .zone = zone };
        k = parse_value(&j, &o);
        if (k < 0)
                return k;
        skip_ws(&j);
        if (j.p != j.end)
                return -EBADMSG;
        *ret = o;
        return 0;
}
