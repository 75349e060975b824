/* SPDX-License-Identifier: MIT */
/* Sending and receiving descriptors over a Unix socket (SCM_RIGHTS), closing what a
 * short or refused message leaves behind (fdpass.h). */
#include "common/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef union FdControl {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
} FdControl;

int fdpass_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds, int flags) {
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        FdControl u = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (n_fds > FDPASS_MAX)
                return -EINVAL;
        if (n_fds > 0) {
                struct cmsghdr *cm;

                mh.msg_control = u.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        do
                n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EMSGSIZE;
}

void fdpass_close_all(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

ssize_t fdpass_recv_cut(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds, bool *ret_fds_cut,
                        int flags) {
        struct iovec iov = { .iov_base = buf, .iov_len = len };
        FdControl u;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        size_t n_fds = 0;
        ssize_t n;

        *ret_n_fds = 0;
        *ret_fds_cut = false;
        do
                n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < cnt; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                        if (n_fds < max_fds)
                                fds[n_fds++] = fd;
                        else
                                close(fd);
                }
        }
        if (mh.msg_flags & MSG_TRUNC) {
                fdpass_close_all(fds, n_fds);
                return -EMSGSIZE;
        }
        *ret_n_fds = n_fds;
        *ret_fds_cut = mh.msg_flags & MSG_CTRUNC;
        return n;
}

ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, size_t max_fds, size_t *ret_n_fds, int flags) {
        bool cut;
        ssize_t n = fdpass_recv_cut(sock, buf, len, fds, max_fds, ret_n_fds, &cut, flags);

        if (n >= 0 && cut) {
                fdpass_close_all(fds, *ret_n_fds);
                *ret_n_fds = 0;
                return -EMSGSIZE;
        }
        return n;
}
