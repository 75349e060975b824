/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

/* The creator's side of a child in a new user namespace: write "id id 1" uid and gid
 * maps (the same number inside and on the host). Needs CAP_SETUID/CAP_SETGID over
 * the namespace's parent. */
int userns_write_id_maps(pid_t pid, uid_t uid, gid_t gid);
