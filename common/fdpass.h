/* SPDX-License-Identifier: MIT */
/* Descriptors over a Unix socket (SCM_RIGHTS), written once for every channel that
 * carries them: supervisor <-> zygote, zygote -> pre-started worker. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX 12 /* a spawn: the call's 7 and its slot's cgroup.procs (3), with room */

/* Send len bytes of buf with n_fds descriptors (n_fds <= FDPASS_MAX; 0 sends none).
 * flags are sendmsg's (MSG_NOSIGNAL is always added). Returns 0 when the whole
 * message went, -errno otherwise (a short datagram is -EMSGSIZE). */
int fdpass_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds, int flags);

/* Receive one message into buf[0..len) and up to max_fds descriptors (close-on-exec).
 * Descriptors beyond max_fds, or arriving with a truncated message, are closed.
 * Returns the message's size (0 at EOF) and sets *ret_n_fds, or -errno; a message or
 * its control data truncated is -EMSGSIZE (with no descriptor kept). */
ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds, int flags);
/* As fdpass_recv(), except when the message is whole and only its control data was cut
 * short by the kernel (the descriptors this process had room for arrived, the rest
 * were dropped: RLIMIT_NOFILE): the descriptors that arrived are kept, in the order
 * sent, and *ret_fds_cut is set. */
ssize_t fdpass_recv_cut(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds, bool *ret_fds_cut,
                        int flags);

/* Close n descriptors (each >= 0) and set them to -1. */
void fdpass_close_all(int *fds, size_t n);
