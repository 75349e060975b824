/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Rootless: the supervisor (and so the zygote) runs with an effective uid other than 0.
 * Detected, never configured (docs/security.md, "Rootless"). */
bool userns_rootless(void);

/* The one place that says which host ids a worker's user namespace maps to. Inside, the
 * worker is always (uid, gid), the policy's workerUid/workerGid. On the host that is the
 * same (uid, gid) when the creator is root; rootless, the kernel lets an unprivileged
 * creator map only its own effective uid and gid, so every worker is the supervisor's
 * user on the host. */
void userns_host_ids(uid_t uid, gid_t gid, uid_t *ret_host_uid, gid_t *ret_host_gid);

/* The creator's side of a child in a new user namespace: write the single-id maps
 * "uid host_uid 1" and "gid host_gid 1" with the host ids of userns_host_ids(). Rootless,
 * "deny" goes to the child's setgroups file first (the kernel's condition for an
 * unprivileged gid_map). Needs CAP_SETUID/CAP_SETGID over the namespace's parent, or,
 * rootless, to be the namespace's owner. */
int userns_write_id_maps(pid_t pid, uid_t uid, gid_t gid);

/* Called by a process that has just entered a user namespace of its own, as the
 * namespace's owner: map its own host ids to themselves, "host_uid host_uid 1" and
 * "host_gid host_gid 1", "deny" to setgroups first. The host ids are the caller's
 * effective ids from before the namespace (inside an unmapped one geteuid() reads the
 * overflow uid). The rootless /outputs helper (supervisor/artifacts.c) uses it. */
int userns_write_own_id_maps(uid_t host_uid, gid_t host_gid);

/* Whether setgroups(2) is denied in this process's user namespace (its
 * /proc/self/setgroups reads "deny"): the rootless worker cannot drop the
 * supplementary groups it inherited. */
bool userns_setgroups_denied(void);
