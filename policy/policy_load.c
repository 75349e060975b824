/* SPDX-License-Identifier: MIT */
/* The policy loader: the strict YAML reader (libyaml events, one mapping of known keys,
 * each value checked against its type and range in the key table), the checks across
 * keys, and the messages that name the line and key of each mistake. The key table,
 * the defaults and the digest are in policy/policy.c. */
#include "policy/policy.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "common/cleanup.h"
#include "policy/policy_keys.h"

/* ---- loading ---- */

typedef struct Loader {
        yaml_parser_t parser;
        yaml_event_t ev;
        Policy policy;        /* the copy being built */
        size_t lines[_K_MAX]; /* line where each key was set, 0 = not in this document */
        const char *data;
        size_t len;
        size_t n_lines;       /* lines in the document: libyaml reports end of stream one line further */
        const char *last_key; /* for syntax errors: the last key seen */
        char *err;
        size_t errlen;
} Loader;

/* A short, printable, single-line rendering of untrusted text for messages. */
static const char *sanitize(const char *s, size_t n, char buf[static 48]) {
        size_t k = 0;

        for (size_t i = 0; i < n && k < 40; i++) {
                unsigned char ch = (unsigned char) s[i];
                buf[k++] = (ch >= 0x20 && ch < 0x7f) ? (char) ch : '?';
        }
        if (n > 40) {
                memcpy(buf + k, "...", 3);
                k += 3;
        }
        buf[k] = '\0';
        return buf;
}

static int fail(Loader *l, size_t line, const char *key, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(Loader *l, size_t line, const char *key, const char *fmt, ...) {
        va_list ap;
        size_t n = 0;
        int k;

        if (!l->err || l->errlen == 0)
                return -EINVAL;
        l->err[0] = '\0';

        if (line > 0)
                k = snprintf(l->err, l->errlen, "line %zu: ", MIN(line, l->n_lines));
        else
                k = 0;
        if (k > 0)
                n = MIN((size_t) k, l->errlen - 1);
        if (key) {
                k = snprintf(l->err + n, l->errlen - n, "%s: ", key);
                if (k > 0)
                        n = MIN(n + (size_t) k, l->errlen - 1);
        }
        va_start(ap, fmt);
        (void) vsnprintf(l->err + n, l->errlen - n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static size_t line_of_offset(const Loader *l, size_t offset) {
        size_t line = 1;

        offset = MIN(offset, l->len);
        for (size_t i = 0; i < offset; i++)
                if (l->data[i] == '\n')
                        line++;
        return line;
}

static int syntax_error(Loader *l) {
        const yaml_parser_t *y = &l->parser;
        const char *problem = y->problem ?: "malformed document";
        char ctx[128] = "";
        size_t line;

        if (y->error == YAML_MEMORY_ERROR) {
                if (l->err && l->errlen > 0)
                        snprintf(l->err, l->errlen, "out of memory while parsing the policy");
                return -ENOMEM;
        }

        if (y->error == YAML_READER_ERROR)
                line = line_of_offset(l, y->problem_offset);
        else
                line = y->problem_mark.line + 1;

        if (l->last_key)
                snprintf(ctx, sizeof(ctx), " (after key %s)", l->last_key);

        return fail(l, line, NULL, "YAML syntax error: %s%s", problem, ctx);
}

static int next_event(Loader *l) {
        yaml_event_delete(&l->ev);
        if (!yaml_parser_parse(&l->parser, &l->ev))
                return syntax_error(l);
        return 0;
}

static size_t ev_line(const yaml_event_t *ev) {
        return ev->start_mark.line + 1;
}

static const char *event_kind(yaml_event_type_t t) {
        switch (t) {
        case YAML_SCALAR_EVENT:
                return "a scalar";
        case YAML_SEQUENCE_START_EVENT:
                return "a sequence";
        case YAML_MAPPING_START_EVENT:
                return "a mapping";
        case YAML_ALIAS_EVENT:
                return "an alias";
        default:
                return "nothing";
        }
}

/* Anchors, aliases and tags are refused everywhere: the policy is plain data. */
static int check_node(Loader *l, const char *key) {
        const yaml_event_t *ev = &l->ev;
        const yaml_char_t *anchor = NULL, *tag = NULL;

        switch (ev->type) {
        case YAML_ALIAS_EVENT:
                return fail(l, ev_line(ev), key, "aliases are not allowed");
        case YAML_SCALAR_EVENT:
                anchor = ev->data.scalar.anchor;
                tag = ev->data.scalar.tag;
                break;
        case YAML_SEQUENCE_START_EVENT:
                anchor = ev->data.sequence_start.anchor;
                tag = ev->data.sequence_start.tag;
                break;
        case YAML_MAPPING_START_EVENT:
                anchor = ev->data.mapping_start.anchor;
                tag = ev->data.mapping_start.tag;
                break;
        default:
                break;
        }
        if (anchor)
                return fail(l, ev_line(ev), key, "anchors are not allowed");
        if (tag)
                return fail(l, ev_line(ev), key, "tags are not allowed");
        return 0;
}

/* Decimal only: no sign, no leading zeros (YAML 1.1 would read 010 as octal), no
 * underscores, no exponent. Returns -ERANGE on overflow. */
static int parse_decimal(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        if (n == 0 || (n > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                unsigned d;

                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                d = (unsigned) (s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static int scalar_integer(Loader *l, const KeyDef *d, uint64_t min, uint64_t max, uint64_t *ret) {
        const yaml_event_t *ev = &l->ev;
        const char *s = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        char buf[48];
        uint64_t v;
        int r;

        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
                return fail(l, ev_line(ev), d->key, "expected an unquoted decimal integer, got a quoted string");
        r = parse_decimal(s, n, &v);
        if (r == -ERANGE || (r >= 0 && (v < min || v > max)))
                return fail(l, ev_line(ev), d->key, "value %s out of range %" PRIu64 "..%" PRIu64, sanitize(s, n, buf),
                            min, max);
        if (r < 0)
                return fail(l, ev_line(ev), d->key, "expected a decimal integer, got '%s'", sanitize(s, n, buf));
        *ret = v;
        return 0;
}

static int resolve_group(const char *name, gid_t *ret) {
        long sz = sysconf(_SC_GETGR_R_SIZE_MAX);

        if (sz <= 0)
                sz = 4096;
        for (;;) {
                _cleanup_free_ char *buf = malloc((size_t) sz);
                struct group grp, *result = NULL;
                int r;

                if (!buf)
                        return -ENOMEM;
                r = getgrnam_r(name, &grp, buf, (size_t) sz, &result);
                if (r == ERANGE && sz < 1024 * 1024) {
                        sz *= 2;
                        continue;
                }
                if (r == ENOMEM)
                        return -ENOMEM;
                if (r != 0 || !result)
                        return -ENOENT;
                *ret = grp.gr_gid;
                return 0;
        }
}

static bool valid_name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
}

static int parse_group(Loader *l, const KeyDef *d) {
        const yaml_event_t *ev = &l->ev;
        const char *s = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        char buf[48], name[256];
        bool digits = n > 0;
        gid_t gid;
        int r;

        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        digits = false;

        if (digits && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
                uint64_t v;

                r = scalar_integer(l, d, d->min, d->max, &v);
                if (r < 0)
                        return r;
                l->policy.socket_group = (gid_t) v;
                l->policy.has_socket_group = true;
                return 0;
        }

        if (n == 0 || n >= sizeof(name) || s[0] == '-')
                return fail(l, ev_line(ev), d->key, "invalid group name '%s'", sanitize(s, n, buf));
        for (size_t i = 0; i < n; i++)
                if (!valid_name_char(s[i]))
                        return fail(l, ev_line(ev), d->key, "invalid group name '%s'", sanitize(s, n, buf));
        memcpy(name, s, n);
        name[n] = '\0';

        r = resolve_group(name, &gid);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(l, ev_line(ev), d->key, "unknown group '%s'", name);
        if (gid == (gid_t) -1)
                return fail(l, ev_line(ev), d->key, "group '%s' has an invalid gid", name);
        l->policy.socket_group = gid;
        l->policy.has_socket_group = true;
        return 0;
}

/* A sequence's entries, one scalar at a time: sequence_start() checks that the loader
 * stands at a sequence (of `entries`, for the message), then each sequence_next()
 * leaves the next entry in l->ev and returns 1, or returns 0 at the sequence's end. An
 * entry that is not a scalar fails as not being `entry`. The loop:
 * `r = sequence_start(); while (r >= 0 && (r = sequence_next()) > 0) ...; if (r < 0) ...`. */
static int sequence_start(Loader *l, const KeyDef *d, const char *entries) {
        if (l->ev.type != YAML_SEQUENCE_START_EVENT)
                return fail(l, ev_line(&l->ev), d->key, "expected a sequence of %s, got %s", entries,
                            event_kind(l->ev.type));
        return 0;
}

static int sequence_next(Loader *l, const KeyDef *d, const char *entry) {
        int r = next_event(l);

        if (r < 0)
                return r;
        if (l->ev.type == YAML_SEQUENCE_END_EVENT)
                return 0;
        r = check_node(l, d->key);
        if (r < 0)
                return r;
        if (l->ev.type != YAML_SCALAR_EVENT)
                return fail(l, ev_line(&l->ev), d->key, "expected %s, got %s", entry, event_kind(l->ev.type));
        return 1;
}

static int parse_id_list(Loader *l, const KeyDef *d, uint32_t *ids, size_t *n_ids) {
        uint32_t tmp[POLICY_MAX_PEERS];
        size_t n = 0;
        int r = sequence_start(l, d, "integers");

        while (r >= 0 && (r = sequence_next(l, d, "an integer list entry")) > 0) {
                uint64_t v;

                if (n >= POLICY_MAX_PEERS)
                        return fail(l, ev_line(&l->ev), d->key, "more than %d entries", POLICY_MAX_PEERS);
                r = scalar_integer(l, d, d->min, d->max, &v);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n; i++)
                        if (tmp[i] == v)
                                return fail(l, ev_line(&l->ev), d->key, "duplicate entry %" PRIu64, v);
                tmp[n++] = (uint32_t) v;
        }
        if (r < 0)
                return r;

        memcpy(ids, tmp, n * sizeof(uint32_t));
        *n_ids = n;
        return 0;
}

/* A sequence of allow-listed package names, each at most once. */
static int parse_packages(Loader *l, const KeyDef *d) {
        uint32_t mask = 0;
        int r = sequence_start(l, d, "package names");

        while (r >= 0 && (r = sequence_next(l, d, "a package name")) > 0) {
                const char *s = (const char *) l->ev.data.scalar.value;
                size_t n = l->ev.data.scalar.length;
                char buf[48];
                PolicyPackage p;

                for (p = 0; p < _POLICY_PACKAGE_MAX; p++) {
                        const char *name = policy_package_to_string(p);
                        if (strlen(name) == n && memcmp(s, name, n) == 0)
                                break;
                }
                if (p == _POLICY_PACKAGE_MAX) {
                        char all[POLICY_PACKAGES_NAMES_MAX];
                        policy_packages_format(POLICY_PACKAGE_BIT(_POLICY_PACKAGE_MAX) - 1, all, sizeof all);
                        return fail(l, ev_line(&l->ev), d->key, "'%s' is not in the allow-list (%s)",
                                    sanitize(s, n, buf), all);
                }
                if (mask & POLICY_PACKAGE_BIT(p))
                        return fail(l, ev_line(&l->ev), d->key, "duplicate entry %s", policy_package_to_string(p));
                mask |= POLICY_PACKAGE_BIT(p);
        }
        if (r < 0)
                return r;
        l->policy.python_packages = mask;
        return 0;
}

static int parse_name(Loader *l, const KeyDef *d, const char *s, size_t n) {
        const yaml_event_t *ev = &l->ev;
        char buf[48];

        if (n < d->min || n > d->max)
                return fail(l, ev_line(ev), d->key, "must be %" PRIu64 "..%" PRIu64 " characters long", d->min, d->max);
        for (size_t i = 0; i < n; i++)
                if (!valid_name_char(s[i]))
                        return fail(l, ev_line(ev), d->key, "'%s' contains a character outside [A-Za-z0-9_.-]",
                                    sanitize(s, n, buf));
        memset(l->policy.name, 0, sizeof(l->policy.name));
        memcpy(l->policy.name, s, n);
        return 0;
}

static int parse_integer(Loader *l, const KeyDef *d) {
        uint64_t v;
        int r = scalar_integer(l, d, d->min, d->max, &v);

        if (r < 0)
                return r;
        if (d->type == KEY_U32)
                *field_u32(&l->policy, d) = (uint32_t) v;
        else
                *field_u64(&l->policy, d) = v;
        return 0;
}

/* One of two words: the first gives value a, the second b. */
static int parse_choice(Loader *l, const KeyDef *d, const char *s, size_t n, const char *a, const char *b, int *ret) {
        char buf[48];

        if (strlen(a) == n && memcmp(s, a, n) == 0)
                *ret = 0;
        else if (strlen(b) == n && memcmp(s, b, n) == 0)
                *ret = 1;
        else
                return fail(l, ev_line(&l->ev), d->key, "expected %s or %s, got '%s'", a, b, sanitize(s, n, buf));
        return 0;
}

static int parse_value(Loader *l, const KeyDef *d) {
        const yaml_event_t *ev = &l->ev;
        const char *s;
        size_t n;
        int r, choice;

        r = next_event(l);
        if (r < 0)
                return r;
        r = check_node(l, d->key);
        if (r < 0)
                return r;

        if (d->type == KEY_UID_LIST)
                return parse_id_list(l, d, l->policy.allowed_uids, &l->policy.n_allowed_uids);
        if (d->type == KEY_GID_LIST)
                return parse_id_list(l, d, l->policy.allowed_gids, &l->policy.n_allowed_gids);
        if (d->type == KEY_PACKAGES)
                return parse_packages(l, d);

        if (ev->type != YAML_SCALAR_EVENT)
                return fail(l, ev_line(ev), d->key, "expected a scalar value, got %s", event_kind(ev->type));
        s = (const char *) ev->data.scalar.value;
        n = ev->data.scalar.length;

        switch (d->type) {
        case KEY_NAME:
                return parse_name(l, d, s, n);
        case KEY_U32:
        case KEY_U64:
                return parse_integer(l, d);
        case KEY_DENY:
                if ((r = parse_choice(l, d, s, n, "errno", "kill", &choice)) < 0)
                        return r;
                l->policy.seccomp_deny = choice ? POLICY_DENY_KILL : POLICY_DENY_ERRNO;
                return 0;
        case KEY_START:
                if ((r = parse_choice(l, d, s, n, "exec", "zygote", &choice)) < 0)
                        return r;
                l->policy.worker_start = choice ? POLICY_WORKER_START_ZYGOTE : POLICY_WORKER_START_EXEC;
                return 0;
        case KEY_CGROUPS:
                for (PolicyCgroups c = POLICY_CGROUPS_AUTO; c <= POLICY_CGROUPS_OFF; c++) {
                        const char *name = policy_cgroups_to_string(c);
                        if (strlen(name) == n && memcmp(s, name, n) == 0) {
                                l->policy.cgroups = c;
                                return 0;
                        }
                }
                {
                        char buf[48];
                        return fail(l, ev_line(ev), d->key, "expected auto, required or off, got '%s'",
                                    sanitize(s, n, buf));
                }
        case KEY_GROUP:
                return parse_group(l, d);
        case KEY_UID_LIST:
        case KEY_GID_LIST:
        case KEY_PACKAGES:
                break;
        }
        return fail(l, ev_line(ev), d->key, "internal error: unhandled key type");
}

static const KeyDef *find_key(const char *s, size_t n) {
        for (size_t i = 0; i < _K_MAX; i++)
                if (strlen(policy_key_defs[i].key) == n && memcmp(policy_key_defs[i].key, s, n) == 0)
                        return &policy_key_defs[i];
        return NULL;
}

static int parse_mapping(Loader *l) {
        int r;

        for (;;) {
                const KeyDef *d;
                const char *s;
                size_t n, line, id;
                char buf[48];

                r = next_event(l);
                if (r < 0)
                        return r;
                if (l->ev.type == YAML_MAPPING_END_EVENT)
                        return 0;
                line = ev_line(&l->ev);
                if (l->ev.type == YAML_ALIAS_EVENT)
                        return fail(l, line, NULL, "aliases are not allowed%s%s%s", l->last_key ? " (after key " : "",
                                    l->last_key ?: "", l->last_key ? ")" : "");
                if (l->ev.type != YAML_SCALAR_EVENT)
                        return fail(l, line, NULL, "expected a key, got %s%s%s%s", event_kind(l->ev.type),
                                    l->last_key ? " (after key " : "", l->last_key ?: "", l->last_key ? ")" : "");

                s = (const char *) l->ev.data.scalar.value;
                n = l->ev.data.scalar.length;
                r = check_node(l, sanitize(s, n, buf));
                if (r < 0)
                        return r;
                d = find_key(s, n);
                if (!d)
                        return fail(l, line, NULL, "unknown key '%s'", sanitize(s, n, buf));
                id = (size_t) (d - policy_key_defs);
                if (l->lines[id] > 0)
                        return fail(l, line, d->key, "duplicate key (first set on line %zu)", l->lines[id]);
                l->lines[id] = line;
                l->last_key = d->key;

                r = parse_value(l, d);
                if (r < 0)
                        return r;
        }
}

/* Names the key of the pair that was set later in this document (its line),
 * since that is where the inconsistency was introduced. */
static int fail_pair(Loader *l, KeyId a, KeyId b, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_pair(Loader *l, KeyId a, KeyId b, const char *fmt, ...) {
        KeyId k = l->lines[b] > l->lines[a] ? b : a;
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return fail(l, l->lines[k], policy_key_defs[k].key, "%s", msg);
}

static int check_cross(Loader *l) {
        const Policy *p = &l->policy;
        uint64_t need;

        /* An exec request carries the code as UTF-8, at most 4 bytes per character. */
        need = (uint64_t) p->max_code_characters * 4 + POLICY_FRAME_OVERHEAD;
        if (need > p->max_message_bytes)
                return fail_pair(l, K_MAX_MESSAGE_BYTES, K_MAX_CODE_CHARACTERS,
                                 "maxMessageBytes (%" PRIu32 ") must be at least maxCodeCharacters * 4 + %d (%" PRIu64
                                 ")",
                                 p->max_message_bytes, POLICY_FRAME_OVERHEAD, need);

        /* A source.put carries one source: its text and original together are at most maxSourceBytes. */
        need = p->max_source_bytes + POLICY_FRAME_OVERHEAD;
        if (need > p->max_message_bytes)
                return fail_pair(l, K_MAX_MESSAGE_BYTES, K_MAX_SOURCE_BYTES,
                                 "maxMessageBytes (%" PRIu32 ") must be at least maxSourceBytes + %d (%" PRIu64 ")",
                                 p->max_message_bytes, POLICY_FRAME_OVERHEAD, need);

        if (p->max_source_bytes > p->max_invocation_bytes)
                return fail_pair(l, K_MAX_INVOCATION_BYTES, K_MAX_SOURCE_BYTES,
                                 "maxInvocationBytes (%" PRIu64 ") must be at least maxSourceBytes (%" PRIu64 ")",
                                 p->max_invocation_bytes, p->max_source_bytes);

        /* One complete result must fit in a connection's reply queue. */
        if (p->max_result_bytes > p->max_connection_output_bytes)
                return fail_pair(l, K_MAX_CONNECTION_OUTPUT_BYTES, K_MAX_RESULT_BYTES,
                                 "maxConnectionOutputBytes (%" PRIu64 ") must be at least maxResultBytes (%" PRIu32 ")",
                                 p->max_connection_output_bytes, p->max_result_bytes);

        /* One peer's share of the connections: below the whole, so one peer cannot take them all.
         * Not set in the file, it is the default or the whole, whichever is smaller (a
         * file from before the key that lowers maxConnections keeps loading). */
        if (l->lines[K_MAX_CONNECTIONS_PER_PEER] == 0 && p->max_connections_per_peer > p->max_connections)
                l->policy.max_connections_per_peer = p->max_connections;
        if (p->max_connections_per_peer > p->max_connections)
                return fail_pair(l, K_MAX_CONNECTIONS, K_MAX_CONNECTIONS_PER_PEER,
                                 "maxConnectionsPerPeer (%" PRIu32 ") must be at most maxConnections (%" PRIu32 ")",
                                 p->max_connections_per_peer, p->max_connections);

        /* The last host id of the block must be a real id: (uid_t) -1 means "no change". */
        if ((uint64_t) p->worker_host_id_base + p->worker_host_id_count > UINT32_MAX)
                return fail_pair(l, K_WORKER_HOST_ID_COUNT, K_WORKER_HOST_ID_BASE,
                                 "workerHostIdBase + workerHostIdCount (%" PRIu64 ") must be at most %" PRIu32,
                                 (uint64_t) p->worker_host_id_base + p->worker_host_id_count, UINT32_MAX);
        return 0;
}

static bool is_null_scalar(const yaml_event_t *ev) {
        return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.length == 0 &&
               ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.anchor && !ev->data.scalar.tag;
}

/* The next event, which must be of type; else the error names the event's line and what
 * is wrong. */
static int next_event_of(Loader *l, yaml_event_type_t type, const char *wrong) {
        int r = next_event(l);

        if (r < 0)
                return r;
        if (l->ev.type != type)
                return fail(l, ev_line(&l->ev), NULL, "%s", wrong);
        return 0;
}

static int load_document(Loader *l) {
        int r;

        r = next_event_of(l, YAML_STREAM_START_EVENT, "malformed YAML stream");
        if (r < 0)
                return r;

        r = next_event(l);
        if (r < 0)
                return r;
        if (l->ev.type == YAML_STREAM_END_EVENT)
                return 0; /* empty, or only comments */
        if (l->ev.type != YAML_DOCUMENT_START_EVENT)
                return fail(l, ev_line(&l->ev), NULL, "malformed YAML stream");

        r = next_event(l);
        if (r < 0)
                return r;
        if (is_null_scalar(&l->ev)) {
                /* "---" alone: an empty document, keep everything. */
        } else {
                r = check_node(l, NULL);
                if (r < 0)
                        return r;
                if (l->ev.type != YAML_MAPPING_START_EVENT)
                        return fail(l, ev_line(&l->ev), NULL,
                                    "the document must be a mapping of keys to values, got %s", event_kind(l->ev.type));
                r = parse_mapping(l);
                if (r < 0)
                        return r;
        }

        r = next_event_of(l, YAML_DOCUMENT_END_EVENT, "malformed YAML document");
        if (r < 0)
                return r;
        return next_event_of(l, YAML_STREAM_END_EVENT, "only one YAML document is allowed");
}

int policy_load_string(Policy *p, const char *data, size_t len, char *err, size_t errlen) {
        Loader *l;
        int r;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!p || (!data && len > 0))
                return -EINVAL;

        if (len > POLICY_DOCUMENT_MAX) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "policy document larger than %d bytes", POLICY_DOCUMENT_MAX);
                return -EINVAL;
        }

        /* The loader is a few KiB (parser state, the policy copy): keep it off the stack. */
        l = calloc(1, sizeof(Loader));
        if (!l)
                return -ENOMEM;
        l->policy = *p;
        l->data = data ?: "";
        l->len = len;
        l->n_lines = line_of_offset(l, len) - (len > 0 && l->data[len - 1] == '\n');
        l->n_lines = MAX(l->n_lines, (size_t) 1);
        l->err = err;
        l->errlen = errlen;

        if (!yaml_parser_initialize(&l->parser)) {
                free(l);
                return -ENOMEM;
        }
        yaml_parser_set_input_string(&l->parser, (const unsigned char *) l->data, len);

        r = load_document(l);
        if (r >= 0)
                r = check_cross(l);
        if (r >= 0) {
                policy_finalize(&l->policy);
                *p = l->policy;
        }

        yaml_event_delete(&l->ev);
        yaml_parser_delete(&l->parser);
        free(l);
        return r < 0 ? r : 0;
}

int policy_load_file(Policy *p, const char *path, char *err, size_t errlen) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, cap = POLICY_DOCUMENT_MAX + 1;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!p || !path)
                return -EINVAL;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;
                if (err && errlen > 0)
                        snprintf(err, errlen, "cannot open %s: %m", path);
                return r;
        }

        buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        while (n < cap) {
                ssize_t k = read(fd, buf + n, cap - n);
                if (k < 0) {
                        int r = -errno;
                        if (r == -EINTR)
                                continue;
                        if (err && errlen > 0)
                                snprintf(err, errlen, "cannot read %s: %m", path);
                        return r;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        if (n > POLICY_DOCUMENT_MAX) {
                if (err && errlen > 0)
                        snprintf(err, errlen, "%s: policy file larger than %d bytes", path, POLICY_DOCUMENT_MAX);
                return -EFBIG;
        }

        return policy_load_string(p, buf, n, err, errlen);
}
