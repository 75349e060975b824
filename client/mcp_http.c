/* SPDX-License-Identifier: MIT */
/* `codeinterp mcp --http`: the MCP Streamable HTTP transport (protocol 2025-06-18 and
 * 2025-11-25) over libmicrohttpd. One endpoint, MCP_HTTP_PATH: POST carries one JSON-RPC
 * message and is answered application/json (no SSE stream: GET is 405, progress
 * notifications are not sent); DELETE ends a session. A session is what `codeinterp mcp`
 * on stdio serves (client/mcp.c), one per Mcp-Session-Id, each with its own supervisor
 * connection and invocation.
 *
 * One thread, one poll() loop: libmicrohttpd runs from it (its epoll fd), beside every
 * session's supervisor socket and a signalfd. A tools/call's POST is suspended until its
 * result comes from the supervisor; the answer is routed to it by its JSON-RPC id through
 * the output sink (mcp_internal.h). Every request is checked in this order: path, bearer
 * token (401), Origin (403), method (405), content type (415), size (413), JSON (400 with
 * -32700), session (400 without one, 404 for an unknown one), MCP-Protocol-Version (400).
 * docs/client.md#codeinterp-mcp---http. */
#include "client/mcp_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/mcp_internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#define SESSION_ID_BYTES 32 /* random; the id is their hex */
#define SESSION_ID_LEN (SESSION_ID_BYTES * 2)
#define HTTP_CONNECTION_TIMEOUT 60   /* seconds an idle HTTP connection is kept (not a suspended one) */
#define RPC_SESSION_NOT_FOUND -32001 /* the code the MCP SDKs answer an unknown session with */
#define RPC_SERVER_LIMIT -32000      /* a server limit: too many sessions, the session's calls */
#define RPC_REQUEST_CANCELLED -32800 /* a cancelled call's POST still needs an answer */

typedef struct Session Session;

/* One HTTP request (libmicrohttpd's per-request context), freed when it completes. */
typedef struct Request {
        char *body;
        size_t body_len;
        bool too_big;
        bool checked; /* the headers passed */
        /* The answer: status and JSON body (NULL: none, 202), set once. */
        bool answered;
        unsigned status;
        char *answer;
        size_t answer_len;
        char session_header[SESSION_ID_LEN + 1]; /* Mcp-Session-Id to send with the answer */
        /* A POST waiting for its call's result. */
        struct MHD_Connection *connection;
        Session *waiting_in;
        json_object *rpc_id;
        struct Request *next;
} Request;

struct Session {
        bool used;
        char id[SESSION_ID_LEN + 1];
        Mcp mcp;
        uint64_t last_active_ms;
        unsigned calls;
        Request *waiting; /* suspended POSTs, each for a running call */
};

typedef struct Http {
        const McpHttpOptions *o;
        const char *socket;
        ToolSource *sources;
        size_t n_sources;
        char token[MCP_HTTP_TOKEN_MAX + 1];
        size_t token_len;
        struct MHD_Daemon *daemon;
        Session *sessions;
        Request *current; /* the POST being handled: synchronous answers are its */
        Session *serving; /* the session the sink answers for */
} Http;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* A session's id in logs: enough to tell sessions apart, not enough to use one. */
#define SHORT_ID(s) 8, (s)->id

/* ---- answers ---- */

static void answer(Request *r, unsigned status, char *json, size_t len) {
        if (r->answered) {
                free(json);
                return;
        }
        r->answered = true;
        r->status = status;
        r->answer = json;
        r->answer_len = len;
}

/* A JSON-RPC error as the answer (id may be NULL: null). */
static void answer_error(Request *r, unsigned status, json_object *id, int code, const char *message) {
        _cleanup_free_ char *id_text = NULL;
        char *json = NULL;
        int n;

        if (id) {
                size_t len = 0;
                FILE *f = open_memstream(&id_text, &len);
                if (f) {
                        mcp_write_json(f, id);
                        if (fclose(f) != 0) {
                                free(id_text);
                                id_text = NULL;
                        }
                }
        }
        /* message: the server's own text, never quoted input. */
        n = asprintf(&json, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
                     id_text ?: "null", code, message);
        if (n < 0)
                answer(r, 500, NULL, 0);
        else
                answer(r, status, json, (size_t) n);
}

static void unwait(Request *r) {
        Session *s = r->waiting_in;

        if (!s)
                return;
        for (Request **p = &s->waiting; *p; p = &(*p)->next)
                if (*p == r) {
                        *p = r->next;
                        break;
                }
        r->waiting_in = NULL;
        r->next = NULL;
        json_object_put(r->rpc_id);
        r->rpc_id = NULL;
        MHD_resume_connection(r->connection); /* its handler runs again and sends the answer */
}

/* The sink: a response goes to the POST being handled if it is for it, else to the
 * suspended POST waiting for its id. Notifications (progress) have no POST to go to. */
static int sink_send(void *userdata, json_object *msg) {
        Http *h = userdata;
        Session *s = h->serving;
        json_object *id = NULL;
        char *json = NULL;
        size_t len = 0;
        FILE *f;

        if (!json_object_object_get_ex(msg, "id", &id))
                return 0;
        f = open_memstream(&json, &len);
        if (!f)
                return -ENOMEM;
        mcp_write_json(f, msg);
        if (fclose(f) != 0) {
                free(json);
                return -ENOMEM;
        }
        /* A parse error or an invalid request (id null) is the client's mistake: 400. */
        unsigned status = !id && json_object_object_get_ex(msg, "error", NULL) ? 400 : 200;
        if (h->current && !h->current->answered) {
                answer(h->current, status, json, len);
                return 0;
        }
        for (Request *r = s ? s->waiting : NULL; r; r = r->next)
                if (json_object_equal(r->rpc_id, id)) {
                        answer(r, status, json, len);
                        unwait(r);
                        return 0;
                }
        free(json);
        return 0;
}

static int sink_send_oom(void *userdata, json_object *id) {
        Http *h = userdata;
        Session *s = h->serving;

        if (h->current && !h->current->answered) {
                answer(h->current, 500, NULL, 0);
                return 0;
        }
        for (Request *r = s ? s->waiting : NULL; r; r = r->next)
                if (json_object_equal(r->rpc_id, id)) {
                        answer(r, 500, NULL, 0);
                        unwait(r);
                        return 0;
                }
        return 0;
}

/* ---- sessions ---- */

static void serve(Http *h, Session *s, Request *current) {
        static McpSink sink;

        sink = (McpSink){ .send = sink_send, .send_oom = sink_send_oom, .userdata = h };
        h->serving = s;
        h->current = current;
        mcp_output_set_sink(&sink);
}

/* Answer the POSTs of calls that are over without an answer (cancelled). */
static void answer_cancelled(Session *s) {
        Request *r = s->waiting, *next;

        for (; r; r = next) {
                next = r->next;
                if (!mcp_call_pending(&s->mcp, r->rpc_id)) {
                        answer_error(r, 200, r->rpc_id, RPC_REQUEST_CANCELLED, "the request was cancelled");
                        unwait(r);
                }
        }
}

static void session_end(Http *h, Session *s, const char *why) {
        serve(h, s, NULL);
        mcp_session_end(&s->mcp, strcmp(why, "supervisor lost") == 0);
        while (s->waiting) {
                Request *r = s->waiting;
                answer_error(r, 200, r->rpc_id, RPC_INTERNAL_ERROR, "the session ended");
                unwait(r);
        }
        fprintf(stderr, "codeinterp mcp: session %.*s ended (%s)\n", SHORT_ID(s), why);
        *s = (Session){};
}

static Session *session_find(Http *h, const char *id) {
        if (!id || strlen(id) != SESSION_ID_LEN)
                return NULL;
        for (unsigned i = 0; i < h->o->max_sessions; i++)
                if (h->sessions[i].used && !strcmp(h->sessions[i].id, id))
                        return &h->sessions[i];
        return NULL;
}

/* A new session: its own supervisor connection, invocation and sources. NULL with the
 * request answered when there is no room or the supervisor refuses. */
static Session *session_new(Http *h, Request *r) {
        uint8_t rnd[SESSION_ID_BYTES];
        Session *s = NULL;
        int k;

        for (unsigned i = 0; i < h->o->max_sessions && !s; i++)
                if (!h->sessions[i].used)
                        s = &h->sessions[i];
        if (!s) {
                answer_error(r, 503, NULL, RPC_SERVER_LIMIT, "too many sessions: end one (DELETE) or try later");
                return NULL;
        }
        if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
                answer_error(r, 500, NULL, RPC_INTERNAL_ERROR, "cannot make a session id");
                return NULL;
        }
        for (size_t i = 0; i < sizeof rnd; i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        if ((k = mcp_session_start(&s->mcp, h->socket, h->sources, h->n_sources)) != 0) {
                mcp_session_end(&s->mcp, false);
                answer_error(r, 503, NULL, RPC_INTERNAL_ERROR, "cannot open a session on the supervisor");
                return NULL;
        }
        s->used = true;
        s->last_active_ms = now_ms();
        fprintf(stderr, "codeinterp mcp: session %.*s started\n", SHORT_ID(s));
        return s;
}

static void sessions_expire(Http *h) {
        uint64_t now = now_ms();

        for (unsigned i = 0; i < h->o->max_sessions; i++) {
                Session *s = &h->sessions[i];
                if (s->used && !s->waiting && now - s->last_active_ms >= (uint64_t) h->o->idle_timeout * 1000)
                        session_end(h, s, "idle");
        }
}

/* Milliseconds until the next session expires; -1: none. */
static int64_t sessions_next_expiry(const Http *h) {
        uint64_t now = now_ms();
        int64_t best = -1;

        for (unsigned i = 0; i < h->o->max_sessions; i++) {
                const Session *s = &h->sessions[i];
                if (!s->used || s->waiting)
                        continue;
                uint64_t at = s->last_active_ms + (uint64_t) h->o->idle_timeout * 1000;
                int64_t left = at > now ? (int64_t) (at - now) : 0;
                if (best < 0 || left < best)
                        best = left;
        }
        return best;
}

static void on_supervisor(Http *h, Session *s) {
        serve(h, s, NULL);
        int k = mcp_on_supervisor(&s->mcp);
        if (k < 0) {
                session_end(h, s, "supervisor lost");
                return;
        }
        s->last_active_ms = now_ms();
        answer_cancelled(s);
}

/* ---- requests ---- */

/* Constant time in the token's contents: every byte of the expected token is looked at. */
static bool token_equal(const Http *h, const char *given) {
        size_t n = strlen(given);
        unsigned char d = n != h->token_len;

        for (size_t i = 0; i < h->token_len; i++)
                d |= (unsigned char) h->token[i] ^ (unsigned char) (i < n ? given[i] : 0);
        return d == 0;
}

static bool authorized(const Http *h, struct MHD_Connection *c) {
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);

        if (!v || strncasecmp(v, "Bearer ", 7) != 0)
                return false;
        v += 7;
        while (*v == ' ')
                v++;
        return token_equal(h, v);
}

static bool origin_allowed(const Http *h, struct MHD_Connection *c) {
        const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");

        if (!v)
                return true; /* not a browser: DNS rebinding needs one */
        for (size_t i = 0; i < h->o->n_origins; i++)
                if (!strcmp(v, h->o->origins[i]))
                        return true;
        return false;
}

/* Content-Type application/json, parameters (charset) allowed. */
static bool is_json_type(const char *v) {
        size_t n = strlen("application/json");
        return v && !strncasecmp(v, "application/json", n) && (v[n] == 0 || v[n] == ';' || v[n] == ' ');
}

/* An Accept header, when sent, must take application/json. */
static bool accepts_json(const char *v) {
        return !v || strcasestr(v, "application/json") || strstr(v, "*/*") || strcasestr(v, "application/*");
}

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        return json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static bool method_is(json_object *msg, const char *name) {
        json_object *m = get(msg, "method");
        return m && json_object_is_type(m, json_type_string) && !strcmp(json_object_get_string(m), name);
}

/* A POST's body as one JSON value, or NULL with the request answered (400 and -32700). */
static json_object *parse_body(Request *r) {
        json_tokener *tok = json_tokener_new_ex(MCP_JSON_DEPTH);
        json_object *msg;
        size_t end;
        bool parsed;

        if (!tok) {
                answer(r, 500, NULL, 0);
                return NULL;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        msg = r->body_len ? json_tokener_parse_ex(tok, r->body, (int) r->body_len) : NULL;
        end = json_tokener_get_parse_end(tok);
        while (msg && end < r->body_len && strchr(" \t\r\n", r->body[end]))
                end++;
        parsed = msg && json_tokener_get_error(tok) == json_tokener_success && end == r->body_len;
        json_tokener_free(tok);
        if (!parsed) {
                json_object_put(msg);
                answer_error(r, 400, NULL, RPC_PARSE_ERROR, "parse error: not one JSON value");
                return NULL;
        }
        return msg;
}

/* The session msg is for: a new one for an initialize without Mcp-Session-Id (*created),
 * or the one the header names, counting its tools/call against --session-calls. NULL
 * with the request answered when there is none, or it may not be served. */
static Session *session_of(Http *h, struct MHD_Connection *c, Request *r, json_object *msg, json_object *id,
                           bool *created) {
        const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id");
        const char *version = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "MCP-Protocol-Version");
        Session *s;

        if (!sid) {
                if (!method_is(msg, "initialize")) {
                        answer_error(r, 400, id, RPC_INVALID_REQUEST,
                                     "bad request: no Mcp-Session-Id header (send initialize to start a session)");
                        return NULL;
                }
                *created = true;
                return session_new(h, r);
        }
        if (!(s = session_find(h, sid))) {
                answer_error(r, 404, id, RPC_SESSION_NOT_FOUND, "session not found: start a new one (initialize)");
                return NULL;
        }
        if (version && !mcp_version_supported(version)) {
                answer_error(r, 400, id, RPC_INVALID_REQUEST, "bad request: unsupported MCP-Protocol-Version");
                return NULL;
        }
        if (method_is(msg, "tools/call") && id) {
                if (s->calls >= h->o->session_calls) {
                        answer_error(r, 200, id, RPC_SERVER_LIMIT,
                                     "this session has made all its calls (--session-calls): start a new session");
                        return NULL;
                }
                s->calls++;
        }
        return s;
}

/* A session just made for an initialize is kept only when the initialize succeeded;
 * false (the session gone, the request answered) otherwise. */
static bool keep_new_session(Session *s, Request *r) {
        if (s->mcp.version) {
                memcpy(r->session_header, s->id, sizeof r->session_header);
                return true;
        }
        mcp_session_end(&s->mcp, false);
        fprintf(stderr, "codeinterp mcp: session %.*s ended (not initialized)\n", SHORT_ID(s));
        *s = (Session){};
        if (!r->answered) /* initialize sent as a notification */
                answer_error(r, 400, NULL, RPC_INVALID_REQUEST,
                             "bad request: initialize must be a request (with an id)");
        return false;
}

/* A POST's whole body has arrived: check it and hand it to its session. */
static void handle_post(Http *h, struct MHD_Connection *c, Request *r) {
        json_object *msg, *id;
        Session *s;
        bool created = false;
        int k;

        if (r->too_big) {
                answer_error(r, 413, NULL, RPC_INVALID_REQUEST, "the request body is too large (--max-body)");
                return;
        }
        if (!(msg = parse_body(r)))
                return;
        id = get(msg, "id");
        if (id && !json_object_is_type(id, json_type_string) && !json_object_is_type(id, json_type_int))
                id = NULL; /* not an id JSON-RPC allows: answered with null */
        if (!(s = session_of(h, c, r, msg, id, &created)))
                goto out;
        s->last_active_ms = now_ms();
        serve(h, s, r);
        k = mcp_handle_message(&s->mcp, r->body, r->body_len);
        h->current = NULL;
        if (k < 0) {
                if (!r->answered)
                        answer_error(r, 200, id, RPC_INTERNAL_ERROR, "lost the supervisor");
                session_end(h, s, "supervisor lost");
                goto out;
        }
        answer_cancelled(s); /* notifications/cancelled: the call's POST is answered */
        if (created && !keep_new_session(s, r))
                goto out;
        if (!r->answered && id && mcp_call_pending(&s->mcp, id)) {
                /* A tools/call: its answer comes with the result. */
                r->rpc_id = json_object_get(id);
                r->connection = c;
                r->waiting_in = s;
                r->next = s->waiting;
                s->waiting = r;
                MHD_suspend_connection(c);
        } else if (!r->answered)
                answer(r, 202, NULL, 0); /* a notification or a response: accepted */
out:
        if (!r->answered && !r->waiting_in) /* every request gets an answer; not reached */
                answer_error(r, 500, NULL, RPC_INTERNAL_ERROR, "internal error: no answer");
        json_object_put(msg);
}

static enum MHD_Result send_answer(struct MHD_Connection *c, Request *r) {
        static const char oom[] =
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"out of memory\"}}";
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (r->answer)
                resp = MHD_create_response_from_buffer(r->answer_len, r->answer, MHD_RESPMEM_MUST_FREE);
        else if (r->status == 500)
                resp = MHD_create_response_from_buffer(sizeof oom - 1, (void *) oom, MHD_RESPMEM_PERSISTENT);
        else
                resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        if (r->answer) {
                r->answer = NULL; /* the response frees it */
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        } else if (r->status == 500)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        if (r->session_header[0])
                MHD_add_response_header(resp, "Mcp-Session-Id", r->session_header);
        if (r->status == 401)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        if (r->status == 405)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "POST, DELETE");
        ret = MHD_queue_response(c, r->status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* The headers have arrived: everything that can be decided before the body. */
static void check_headers(Http *h, struct MHD_Connection *c, Request *r, const char *url, const char *method) {
        const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        r->checked = true;
        if (strcmp(url, MCP_HTTP_PATH) != 0)
                answer_error(r, 404, NULL, RPC_INVALID_REQUEST, "not found: the MCP endpoint is " MCP_HTTP_PATH);
        else if (!authorized(h, c))
                answer_error(r, 401, NULL, RPC_INVALID_REQUEST, "unauthorized: send Authorization: Bearer TOKEN");
        else if (!origin_allowed(h, c))
                answer_error(r, 403, NULL, RPC_INVALID_REQUEST, "forbidden: this Origin is not allowed");
        else if (!strcmp(method, MHD_HTTP_METHOD_DELETE)) {
                Session *s = session_find(h, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Mcp-Session-Id"));
                if (!s)
                        answer_error(r, 404, NULL, RPC_SESSION_NOT_FOUND, "session not found");
                else {
                        session_end(h, s, "deleted");
                        answer(r, 204, NULL, 0);
                }
        } else if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
                /* No server-initiated stream (GET) is offered. */
                answer_error(r, 405, NULL, RPC_INVALID_REQUEST, "method not allowed: POST and DELETE only");
        else if (!is_json_type(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
                answer_error(r, 415, NULL, RPC_INVALID_REQUEST, "unsupported media type: send application/json");
        else if (!accepts_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT)))
                answer_error(r, 406, NULL, RPC_INVALID_REQUEST, "not acceptable: the answer is application/json");
        else if (length && strtoull(length, NULL, 10) > h->o->max_body)
                answer_error(r, 413, NULL, RPC_INVALID_REQUEST, "the request body is too large (--max-body)");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **ctx) {
        Http *h = cls;
        Request *r = *ctx;

        (void) version;
        if (!r) {
                if (!(r = calloc(1, sizeof *r)))
                        return MHD_NO;
                *ctx = r;
                check_headers(h, c, r, url, method);
                /* An answer decided from the headers goes at once; the body is not read. */
                return r->answered ? send_answer(c, r) : MHD_YES;
        }
        if (*data_size > 0 && r->answered) { /* answered from the headers: the body is dropped */
                *data_size = 0;
                return MHD_YES;
        }
        if (*data_size > 0) {
                if (!r->too_big && r->body_len + *data_size > h->o->max_body) {
                        r->too_big = true; /* the rest is read and dropped */
                        free(r->body);
                        r->body = NULL;
                        r->body_len = 0;
                }
                if (!r->too_big) {
                        char *p = realloc(r->body, r->body_len + *data_size + 1);
                        if (!p)
                                return MHD_NO;
                        memcpy(p + r->body_len, data, *data_size);
                        r->body = p;
                        r->body_len += *data_size;
                        r->body[r->body_len] = 0;
                }
                *data_size = 0;
                return MHD_YES;
        }
        if (!r->answered && !r->waiting_in)
                handle_post(h, c, r);
        return r->answered ? send_answer(c, r) : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode toe) {
        Request *r = *ctx;

        (void) cls;
        (void) c;
        (void) toe;
        if (!r)
                return;
        if (r->waiting_in) { /* cannot happen while suspended; kept safe */
                Session *s = r->waiting_in;
                for (Request **p = &s->waiting; *p; p = &(*p)->next)
                        if (*p == r) {
                                *p = r->next;
                                break;
                        }
        }
        json_object_put(r->rpc_id);
        free(r->body);
        free(r->answer);
        free(r);
        *ctx = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
        (void) cls;
        fputs("codeinterp mcp: http: ", stderr);
        vfprintf(stderr, fmt, ap);
}

/* ---- start ---- */

/* At start, one session is opened and closed: a supervisor that cannot be reached, or
 * sources it refuses, end the command now rather than fail every client later. */
static int check_supervisor(Http *h) {
        Mcp m = {};
        int status = mcp_session_start(&m, h->socket, h->sources, h->n_sources);

        mcp_session_end(&m, false);
        return status;
}

/* libmicrohttpd over the listening socket lfd (it takes it), run from our loop. */
static bool start_daemon(Http *h, int lfd) {
        h->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h,
                MHD_OPTION_LISTEN_SOCKET, lfd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_EXTERNAL_LOGGER,
                log_mhd, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) HTTP_CONNECTION_TIMEOUT,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) (h->o->max_sessions * MCP_MAX_CALLS + 64), MHD_OPTION_END);
        if (!h->daemon) {
                fprintf(stderr, "codeinterp mcp: cannot start the HTTP server\n");
                close(lfd);
        }
        return h->daemon;
}

/* Until SIGTERM or SIGINT on sfd: HTTP (libmicrohttpd's epoll fd), every session's
 * supervisor socket, and the sessions' idle expiry. */
static void run(Http *h, int sfd) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        struct pollfd fds[MCP_HTTP_MAX_SESSIONS + 2];
        Session *polled[MCP_HTTP_MAX_SESSIONS];

        for (;;) {
                MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
                int64_t timeout = sessions_next_expiry(h);
                size_t nfds = 2;

                if (MHD_get_timeout(h->daemon, &mhd_ms) == MHD_YES && (timeout < 0 || (int64_t) mhd_ms < timeout))
                        timeout = (int64_t) MIN(mhd_ms, (MHD_UNSIGNED_LONG_LONG) INT32_MAX);
                fds[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
                fds[1] = (struct pollfd){ .fd = info ? info->epoll_fd : -1, .events = POLLIN };
                for (unsigned i = 0; i < h->o->max_sessions; i++)
                        if (h->sessions[i].used) {
                                polled[nfds - 2] = &h->sessions[i];
                                fds[nfds++] =
                                        (struct pollfd){ .fd = ci_fd(h->sessions[i].mcp.client), .events = POLLIN };
                        }
                if (poll(fds, nfds, timeout < 0 ? -1 : (int) MIN(timeout, (int64_t) INT32_MAX)) < 0 && errno != EINTR) {
                        fprintf(stderr, "codeinterp mcp: poll: %m\n");
                        return;
                }
                if (fds[0].revents & POLLIN)
                        return;
                for (size_t i = 2; i < nfds; i++)
                        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR) && polled[i - 2]->used)
                                on_supervisor(h, polled[i - 2]);
                sessions_expire(h);
                MHD_run(h->daemon);
        }
}

int mcp_http_serve(const char *socket, ToolSource *sources, size_t n, const McpHttpOptions *o) {
        Http h = { .o = o, .socket = socket, .sources = sources, .n_sources = n };
        _cleanup_close_ int sfd = -1;
        sigset_t mask;
        int status, lfd;

        if (!o->token_file) {
                fprintf(stderr, "codeinterp mcp: --http needs --token-file: the bearer token clients send\n");
                return EXIT_USAGE;
        }
        if (mcp_http_read_token(o->token_file, h.token, &h.token_len) < 0)
                return EXIT_USAGE;
        if ((status = check_supervisor(&h)) != 0)
                return status;
        h.sessions = calloc(o->max_sessions, sizeof *h.sessions);
        if (!h.sessions) {
                fprintf(stderr, "codeinterp mcp: %s\n", strerror(ENOMEM));
                return EXIT_CONNECT;
        }
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
                fprintf(stderr, "codeinterp mcp: signalfd: %m\n");
                free(h.sessions);
                return EXIT_CONNECT;
        }
        if ((lfd = mcp_http_listen(o->address)) < 0) {
                free(h.sessions);
                return EXIT_USAGE;
        }
        if (!start_daemon(&h, lfd)) {
                free(h.sessions);
                return EXIT_CONNECT;
        }
        run(&h, sfd);
        /* Every session ends (their invocations close); waiting POSTs get their answer. */
        for (unsigned i = 0; i < o->max_sessions; i++)
                if (h.sessions[i].used)
                        session_end(&h, &h.sessions[i], "server stopping");
        MHD_run(h.daemon);
        MHD_stop_daemon(h.daemon);
        mcp_output_set_sink(NULL);
        free(h.sessions);
        return 0;
}
