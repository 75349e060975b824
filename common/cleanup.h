/* SPDX-License-Identifier: MIT */
/* Scope-bound cleanup helpers, in the manner of systemd's macro.h.
 * Every destructor accepts the "empty" value (NULL, -1, 0) and does nothing. */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proc.h"

/* type *name_ref(type *p) and type *name_unref(type *p) for a struct counted by its
 * unsigned n_ref (systemd's DEFINE_TRIVIAL_REF_UNREF_FUNC): _ref() counts one more,
 * _unref() one less and, at 0, hands p to free_func(); both accept NULL, _unref()
 * returns NULL. */
#define DEFINE_TRIVIAL_REF_UNREF_FUNC(type, name, free_func)                                                           \
        type *name##_ref(type *p) {                                                                                    \
                if (p)                                                                                                 \
                        p->n_ref++;                                                                                    \
                return p;                                                                                              \
        }                                                                                                              \
        type *name##_unref(type *p) {                                                                                  \
                if (p && --p->n_ref == 0)                                                                              \
                        free_func(p);                                                                                  \
                return NULL;                                                                                           \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}

/* Close and forget: *fd becomes -1, so a second closep() (a later cleanup of the same
 * variable or field) is a no-op instead of closing whatever took the number since. */
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
                *fd = -1;
        }
}

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* SIGKILL and reap a child (crun's cleanup_pid). */
static inline void killpidp(pid_t *pid) {
        kill_and_reap(*pid, -1);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_pid_ _cleanup_(killpidp)

#define TAKE_PTR(p)                                                                                                    \
        ({                                                                                                             \
                __typeof__(p) _tp = (p);                                                                               \
                (p) = NULL;                                                                                            \
                _tp;                                                                                                   \
        })
#define TAKE_FD(fd)                                                                                                    \
        ({                                                                                                             \
                int _tf = (fd);                                                                                        \
                (fd) = -1;                                                                                             \
                _tf;                                                                                                   \
        })

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                                        \
        static inline void func##p(type *p) {                                                                          \
                if (*p)                                                                                                \
                        func(*p);                                                                                      \
        }
