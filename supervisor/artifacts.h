/* SPDX-License-Identifier: MIT */
/* Artifacts: the files a call leaves in /outputs (docs/design.md, "Artifacts").
 *
 * The supervisor makes each call's /outputs itself: a tmpfs created with fsopen()/
 * fsmount() whose size (maxArtifactBytes) and inode count (maxArtifacts + 1, the root
 * takes one) are set here, so the kernel enforces them whatever the worker does. It is
 * made in the supervisor's mount namespace where it may (root with CAP_SYS_ADMIN), or
 * by a short-lived helper the supervisor clones into a user and mount namespace of its
 * own (rootless, or a container without CAP_SYS_ADMIN). Its root belongs to the
 * supervisor's ids (a root supervisor's helper: nobody's, 65534) and is never handed
 * over, so nothing needs CAP_CHOWN: as root it is mode 0777, since each worker has host
 * ids of its own; rootless 0700, the workers being this user. The
 * worker only attaches the detached mount with move_mount() (WORKER_FD_OUTPUTS). The
 * supervisor keeps its own descriptor and reads the files only after the worker has
 * been reaped (its pid namespace is empty then: nothing can write any more).
 *
 * The reader trusts nothing in the tree and needs no capability to read it (no
 * CAP_DAC_READ_SEARCH): it takes the worker's host ids as its fsuid and fsgid (which
 * CAP_SETUID and CAP_SETGID allow, needed for the id maps anyway), lists the top level
 * only, opens every name as one component with O_NOFOLLOW | O_NONBLOCK (no openat2():
 * sandboxes deny it), takes regular files on the tmpfs's own device only, whose names
 * are valid UTF-8 without control characters, gives a file the code made unreadable
 * its owner's read bit back, keeps the first maxArtifacts of them by name (bytewise
 * order), reads at most maxArtifactBytes in all and counts everything else it did not
 * return, exactly, in omitted / omitted_bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

/* How this process gets its tmpfs mounts (artifacts_prepare()). */
enum {
        ARTIFACTS_HERE,              /* fsopen() in its own mount namespace */
        ARTIFACTS_PRIVATE_NAMESPACE, /* the same, after moving into a private one (below) */
        ARTIFACTS_BY_HELPER,         /* from a helper process, kept (rootless, no CAP_SYS_ADMIN) */
};

/* At start, before any child: make sure this process can have tmpfs superblocks.
 * fsopen() needs CAP_SYS_ADMIN over the user namespace that owns the caller's mount
 * namespace; a supervisor started in a user namespace of its own that still shares its
 * parent's mounts (unshare -r) lacks it, and moves into a private mount namespace (its
 * mounts slaves of the old ones, so what is mounted outside still appears), which its
 * own user namespace owns. Without CAP_SYS_ADMIN at all, one mount is made by a helper
 * as a probe. Returns how (above), or -errno: no way works (calls with an /outputs
 * then fail as worker_error naming the step). */
int artifacts_prepare(void);

/* A fresh detached tmpfs for one call's /outputs: size max_bytes, max_files + 1 inodes,
 * nosuid, nodev, noexec, its root as the header comment says. *ret_fd is the mount's
 * descriptor (O_PATH, close-on-exec). The one made ahead if it has these bounds, else
 * made now: here, or (rootless, or -EPERM here) by the helper, started at the first
 * need and kept, which sends the descriptor back; its failure is its errno. */
int artifacts_mount_new(uint64_t max_bytes, uint32_t max_files, int *ret_fd);
/* Make the next call's mount ahead, off its path (while a call runs), unless one with
 * these bounds is kept already. It stays empty and ours until a call takes it; a failure
 * only means the next call makes its own (and reports that one's failure). */
void artifacts_mount_ahead(uint64_t max_bytes, uint32_t max_files);
/* Close the mount made ahead, if any: at a reload, whose bounds may differ (a call
 * queued before it keeps its own, and one made ahead with other bounds than a call's is
 * never given to it either). The next call makes its own, and one ahead again. */
void artifacts_mount_ahead_drop(void);
/* The helper's pid (0 while there is none): our child, reaped only by us. */
pid_t artifacts_helper_pid(void);
/* Kill and reap the helper, if any (at exit; the next mount starts another). */
void artifacts_helper_stop(void);

/* Read the artifacts under dir_fd (the mount's descriptor, or any directory) as uid and
 * gid (the worker's host ids). Fails only for -ENOMEM or when dir_fd itself cannot be
 * opened or listed; every bad entry is counted, never an error. */
int artifacts_collect(int dir_fd, uid_t uid, gid_t gid, uint32_t max_files, uint64_t max_bytes, ArtifactSet *ret);

/* Move item i out of the set into the omitted counts (used when fitting a result). */
void artifact_set_omit(ArtifactSet *s, size_t i);
void artifact_set_done(ArtifactSet *s);

/* The media type of a file's content, never of its name: PNG, JPEG, GIF, WebP, PDF by
 * their magic bytes; valid UTF-8 without NUL as image/svg+xml, application/xml,
 * application/json (when it parses), text/csv (a consistent comma count per line) or
 * text/plain; anything else application/octet-stream. */
const char *artifact_sniff(const void *data, size_t len);
