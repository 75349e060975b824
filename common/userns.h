/* SPDX-License-Identifier: MIT */
/* User namespace id maps, written by a worker's creator, and rootless detection. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Rootless: the supervisor (and so the zygote) runs with an effective uid other than 0.
 * Detected, never configured (docs/security.md, "Rootless"). */
bool userns_rootless(void);

/* The creator's side of a child in a new user namespace: write the one-id maps
 * "inside host 1" for uid and gid (the worker's ids inside its namespace and its host
 * ids, which supervisor/worker_ids.c decides: a block of its own per worker as root, the
 * supervisor's own ids rootless, where the kernel lets an unprivileged creator map only
 * those). Rootless, "deny" goes to the child's setgroups file first (the kernel's
 * condition for an unprivileged gid_map). Needs CAP_SETUID/CAP_SETGID over the
 * namespace's parent, or, rootless, to be the namespace's owner. */
int userns_write_id_maps(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid);

/* The creator's side, as root: map every id this process's own user namespace has, to
 * itself, in the child's (each line of /proc/self/uid_map and gid_map "first host n"
 * becomes "first first n"), except uid 0: mapping it needs CAP_SETFCAP (Linux 5.12),
 * which a container usually drops. Needs CAP_SETUID and CAP_SETGID over this
 * namespace. The /outputs helper (supervisor/artifacts.c) uses it where it makes tmpfs
 * mounts for workers with host ids of their own. */
int userns_write_identity_maps(pid_t pid);

/* Whether setgroups(2) is denied in this process's user namespace (its
 * /proc/self/setgroups reads "deny"): the rootless worker cannot drop the
 * supplementary groups it inherited. */
bool userns_setgroups_denied(void);
