/* SPDX-License-Identifier: MIT */
/* Artifacts: the files a call leaves in /outputs (docs/design.md, "Artifacts").
 *
 * The supervisor makes each call's /outputs itself: a tmpfs created with fsopen()/
 * fsmount() whose size (maxArtifactBytes) and inode count (maxArtifacts + 1, the root
 * takes one) are set here, so the kernel enforces them whatever the worker does
 * (rootless, in a helper the supervisor clones into a user and mount namespace of its
 * own, because fsopen() is refused in the host's mount namespace). The worker only
 * attaches the detached mount with move_mount() (WORKER_FD_OUTPUTS). The
 * supervisor keeps its own descriptor and reads the files only after the worker has
 * been reaped (its pid namespace is empty then: nothing can write any more).
 *
 * The reader trusts nothing in the tree: it lists the top level only, resolves every
 * name with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) and O_NOFOLLOW | O_NONBLOCK, takes regular files only, whose names are
 * valid UTF-8 without control characters, keeps the first maxArtifacts of them by name
 * (bytewise order), reads at most maxArtifactBytes in all and counts everything else
 * it did not return, exactly, in omitted / omitted_bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A name longer than this (in bytes) is not returned. */
#define ARTIFACT_NAME_MAX 255

typedef struct Artifact {
        char *name;             /* NUL-terminated, valid UTF-8, no '/', no control characters */
        const char *media_type; /* sniffed from the bytes (static string) */
        uint8_t *data;
        size_t len;
        char sha256[65];
} Artifact;

typedef struct ArtifactSet {
        Artifact *items; /* sorted by name */
        size_t n;
        uint64_t omitted;       /* entries of /outputs not in items (files and anything else) */
        uint64_t omitted_bytes; /* the sizes of the omitted regular files */
} ArtifactSet;

/* At start, before any child: make sure this process may create tmpfs superblocks.
 * fsopen() needs CAP_SYS_ADMIN over the user namespace that owns the caller's mount
 * namespace; a supervisor started in a user namespace of its own that still shares its
 * parent's mounts (unshare -r) lacks it. It then moves into a private mount namespace
 * (its mounts slaves of the old ones, so what is mounted outside still appears), which
 * its own user namespace owns. 0: nothing needed (always rootless: there the mounts
 * come from a helper); 1: made one; -errno: neither works (calls with an /outputs then
 * fail as worker_error naming the step). */
int artifacts_prepare(void);

/* A fresh detached tmpfs for one call's /outputs: size max_bytes, max_files + 1 inodes,
 * root directory mode 0700 owned by uid:gid as the host sees them, nosuid, nodev,
 * noexec. *ret_fd is the mount's descriptor (close-on-exec). The runner makes it with
 * the creator's ids (root's; rootless, this user's: the only ones its helper can name)
 * and gives it to the worker's host ids (fchownat) once they are known, before the
 * worker may go. Rootless it is made by a short-lived child in a user namespace of
 * its own (mapping only this user's ids) and a mount namespace that one owns, which
 * sends the descriptor back and is reaped here; its failure is its errno. */
int artifacts_mount_new(uint64_t max_bytes, uint32_t max_files, uid_t uid, gid_t gid, int *ret_fd);

/* Read the artifacts under dir_fd (the mount's descriptor, or any directory). Fails only
 * for -ENOMEM or when dir_fd itself cannot be opened or listed; every bad entry is
 * counted, never an error. */
int artifacts_collect(int dir_fd, uint32_t max_files, uint64_t max_bytes, ArtifactSet *ret);

/* Move item i out of the set into the omitted counts (used when fitting a result). */
void artifact_set_omit(ArtifactSet *s, size_t i);
void artifact_set_done(ArtifactSet *s);

/* The media type of a file's content, never of its name: PNG, JPEG, GIF, WebP, PDF by
 * their magic bytes; valid UTF-8 without NUL as image/svg+xml, application/xml,
 * application/json (when it parses), text/csv (a consistent comma count per line) or
 * text/plain; anything else application/octet-stream. */
const char *artifact_sniff(const void *data, size_t len);

/* A name the reader returns: 1..ARTIFACT_NAME_MAX bytes of valid UTF-8, not "." or "..",
 * no '/', no C0 control character and no DEL. */
bool artifact_name_valid(const char *name, size_t len);
