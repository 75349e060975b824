/* SPDX-License-Identifier: MIT */
/* A new worker's first steps before its sandbox (child_start.h). */
#include "common/child_start.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/cleanup.h"

/* What an exec-mode worker carries across its exec: what setup needs inside its user
 * namespace, and what changing identity afterwards needs. */
static const cap_value_t carry_caps[] = { CAP_SYS_ADMIN, CAP_SETPCAP, CAP_SETUID, CAP_SETGID };

int child_enter_cgroup(const int *fds, size_t n) {
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                if (r == 0 && write(fds[i], "0", 1) != 1)
                        r = -errno;
                close(fds[i]);
        }
        return r;
}

/* First move every source above the target range, then dup2 down (dup2 clears
 * close-on-exec on the result), so a source already sitting on a target is safe. */
int child_install_fds(const int *src, int n) {
        int tmp[8];

        if (n > 8)
                return -EINVAL;
        for (int i = 0; i < n; i++) {
                tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 16);
                if (tmp[i] < 0)
                        return -errno;
        }
        for (int i = 0; i < n; i++)
                if (dup2(tmp[i], i) < 0)
                        return -errno;
        return 0;
}

int child_carry_caps(void) {
        cap_t caps = cap_get_proc();
        int r = 0;

        if (!caps)
                return -errno;
        if (cap_set_flag(caps, CAP_INHERITABLE, ELEMENTSOF(carry_caps), carry_caps, CAP_SET) < 0 ||
            cap_set_proc(caps) < 0)
                r = -errno;
        cap_free(caps);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(carry_caps); i++)
                if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, carry_caps[i], 0, 0) < 0)
                        return -errno;
        return 0;
}
