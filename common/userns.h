/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

/* The creator's side of a child in a new user namespace: write one-id uid and gid maps,
 * "inside host 1" (the worker's ids inside its namespace and its own host ids). Needs
 * CAP_SETUID/CAP_SETGID over the namespace's parent. */
int userns_write_id_maps(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid);
