/* SPDX-License-Identifier: MIT */
/* Processes this project kills and reaps, and what /proc says of this one. */
#pragma once

#include <stdbool.h>

#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* SIGKILL a child (through its pidfd when pidfd >= 0, which cannot hit a recycled
 * pid) and reap it, waiting out EINTR. Written once for every process this project
 * kills: workers, zygotes, probes. errno is preserved. No-op for pid <= 0. */
void kill_and_reap(pid_t pid, int pidfd);
/* SIGKILL through a pidfd only (the reap happens elsewhere, e.g. in the event loop). */
void pidfd_kill(int pidfd);
/* This process's children (from /proc/self/task/TID/children of the calling thread):
 * up to max pids into ret; how many. */
size_t proc_list_children(pid_t *ret, size_t max);

/* Whether a process this one can see in its /proc runs with uid (the host's numbering
 * when this process is in the initial user namespace) as its real, effective, saved or
 * filesystem uid. Scans every process: for rare paths only. */
bool proc_uid_in_use(uid_t uid);

/* Whether a seccomp filter sits around this process (the "Seccomp:" line of its
 * /proc/self/status says 2), such as a container engine's default profile. */
bool proc_under_seccomp_filter(void);

/* A reference to the mount namespace of pid, our child and not reaped (so not a recycled
 * pid). Whoever holds it keeps the namespace's filesystems alive after the child exits,
 * so that its exit does not tear them down. The open needs ptrace read access: a child
 * that has taken a uid of its own is not dumpable, and unless its memory belongs to its
 * own user namespace (it exec'd there), a caller without CAP_SYS_PTRACE, as the shipped
 * unit's, is refused. So a zygote's worker is opened right after its clone, before its
 * ids are mapped, and an exec'd one once it runs its own executable. A descriptor, or
 * -1 with errno set: the child runs on without. pidfd: the child's, or -1 (then /proc). */
int proc_open_mount_namespace(pid_t pid, int pidfd);

/* Whether a process may set another's nice back down to nice (the kernel's can_nice()):
 * with CAP_SYS_NICE on the host (cap_sys_nice), or when the target's RLIMIT_NICE (soft,
 * rlimit_nice) reaches it: a limit r allows a nice down to 20 - r. */
bool proc_nice_restorable(int nice, bool cap_sys_nice, rlim_t rlimit_nice);
