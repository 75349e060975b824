/* SPDX-License-Identifier: MIT */
/* The closed set of outcomes. Every `result` carries exactly one; every `error` reply
 * carries one as its code. Documented in docs/protocol.md. */
#pragma once

typedef enum Outcome {
        OUTCOME_OK,                 /* the code ran to the end */
        OUTCOME_PYTHON_EXCEPTION,   /* an uncaught exception ended the code */
        OUTCOME_TIMEOUT,            /* the whole-call deadline passed (queued or running) */
        OUTCOME_CANCELLED,          /* the caller cancelled, disconnected, or the supervisor shut down */
        OUTCOME_INVALID_INPUT,      /* the request was malformed or out of bounds; no worker */
        OUTCOME_UNAVAILABLE_SOURCE, /* a source ID is unknown, expired or not the caller's; no worker */
        OUTCOME_QUOTA_EXHAUSTED,    /* the invocation has spent its calls; no worker */
        OUTCOME_RESOURCE_LIMIT,     /* memory, cpu, file size or processes limit ended the code */
        OUTCOME_WORKER_ERROR,       /* sandbox setup failed, the worker died or sent garbage */
        OUTCOME_OVERLOADED,         /* the queue is full; no worker */
        OUTCOME_NOT_FOUND,          /* (errors) cancel/close of an unknown or finished call/invocation */
        OUTCOME_PERMISSION_DENIED,  /* (errors) the peer is not allowed */
        _OUTCOME_MAX,
} Outcome;

const char *outcome_to_string(Outcome o);
