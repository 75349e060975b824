/* SPDX-License-Identifier: MIT */
/* Host ids leased host-wide (id_leases.h): the lease file and its OFD locks. */
#include "supervisor/id_leases.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"

struct IdLeases {
        int top;        /* the lease directory */
        int ids;        /* "host-ids": one OFD lock per leased uid */
        int state;      /* "state-<base>-<count>": a record per id of the block (below) */
        int registered; /* our "blocks/…" file, flock'ed */
        int blocks;     /* the directory of registrations */
        char registration[NAME_MAX + 1], state_name[64];
        uint32_t base, count;
        uint64_t quarantine_ns;
};

/* An id's record in the state file, read and written only under the id's lease: FREE
 * (or past the end of the file) when its last holder dropped it, LEASED while held. A
 * lease whose lock is free but whose record says LEASED was held by a supervisor that
 * died: the kernel dropped the lock as the supervisor went, but its workers (killed as it
 * died) may still be leaving, with that uid. Such an id is stamped with the time it was
 * found (CLOCK_BOOTTIME, ns) and not leased again until ID_ORPHAN_QUARANTINE_NS later,
 * nor while a process still has it as a uid (then stamped again). */
enum { ID_FREE = 0, ID_LEASED = 1 };

/* A directory owned by us and writable by nobody else, opened without following a
 * symlink; made (0755) when missing. */
static int open_safe_dir(int at, const char *path, char *why, size_t why_len) {
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (mkdirat(at, path, 0755) < 0 && errno != EEXIST) {
                int k = -errno;
                set_why(why, why_len, "cannot make %s: %s", path, strerror(-k));
                return k;
        }
        fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                int k = -errno;
                set_why(why, why_len, "cannot open %s: %s", path, strerror(-k));
                return k;
        }
        if (st.st_uid != geteuid() || (st.st_mode & 0022)) {
                set_why(why, why_len,
                        "%s is owned by uid %u with mode %04o: it must be this user's (uid %u) and "
                        "writable by nobody else",
                        path, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777), (unsigned) geteuid());
                return -EPERM;
        }
        return TAKE_FD(fd);
}

static uint64_t boottime_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static int open_file(int dir, const char *name) {
        int fd = openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        return fd < 0 ? -errno : fd;
}

/* Each registration in blocks/: a dead owner's goes; a live one's block must be ours or
 * disjoint from it. */
static int check_blocks(int blocks, uint32_t base, uint32_t count, char *why, size_t why_len) {
        int fd = fcntl(blocks, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int k = 0;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return -errno;
        }
        while (k == 0 && (de = readdir(d))) {
                _cleanup_close_ int f = -1;
                uint32_t b, c;
                int pid, n = 0;

                if (sscanf(de->d_name, "%" SCNu32 "-%" SCNu32 "-%d-%*16[0-9a-f]%n", &b, &c, &pid, &n) != 3 || n == 0 ||
                    de->d_name[n] != 0)
                        continue;
                f = openat(blocks, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (f < 0)
                        continue;
                if (flock(f, LOCK_EX | LOCK_NB) == 0) {
                        (void) unlinkat(blocks, de->d_name, 0); /* its supervisor is gone */
                        continue;
                }
                if ((b == base && c == count) || (uint64_t) b + c <= base || (uint64_t) base + count <= b)
                        continue;
                set_why(why, why_len,
                        "it overlaps the block %" PRIu32 "-%" PRIu64 " of a running supervisor (pid %d as it saw "
                        "itself; registered as %s): give each supervisor the same block or disjoint ones",
                        b, (uint64_t) b + c - 1, pid, de->d_name);
                k = -EEXIST;
        }
        closedir(d);
        return k;
}

int id_leases_open(const char *dir, uint32_t base, uint32_t count, IdLeases **ret, char *why, size_t why_len) {
        _cleanup_close_ int top = -1, blocks = -1, ids = -1, state = -1, reg = -1;
        char name[NAME_MAX + 1], state_name[64], sub[PATH_MAX + 16];
        IdLeases *l;
        int k;

        why[0] = 0;
        if ((top = open_safe_dir(AT_FDCWD, dir, why, why_len)) < 0)
                return top;
        snprintf(sub, sizeof sub, "%s/blocks", dir);
        if ((blocks = open_safe_dir(top, "blocks", why, why_len)) < 0)
                return blocks;
        if ((ids = open_file(top, "host-ids")) < 0) {
                set_why(why, why_len, "cannot open %s/host-ids: %s", dir, strerror(-ids));
                return ids;
        }
        /* Registrations are checked and made, and the state file opened, under the
         * directory's lock: two supervisors starting at once cannot both miss each other,
         * and the last of a block to stop removes the state file under it too. */
        if (flock(top, LOCK_EX) < 0) {
                k = -errno;
                set_why(why, why_len, "cannot lock %s: %s", dir, strerror(-k));
                return k;
        }
        snprintf(state_name, sizeof state_name, "state-%" PRIu32 "-%" PRIu32, base, count);
        if ((state = open_file(top, state_name)) < 0) {
                k = state;
                set_why(why, why_len, "cannot open %s/%s: %s", dir, state_name, strerror(-k));
        } else
                k = check_blocks(blocks, base, count, why, why_len);
        if (k == 0) {
                uint64_t r = 0;
                /* The pid says who to an operator; the random part keeps two supervisors
                 * of the same pid (in different pid namespaces) apart. */
                if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t) sizeof r)
                        r = (uint64_t) getpid() * 0x9e3779b97f4a7c15ULL ^ (uint64_t) time(NULL);
                snprintf(name, sizeof name, "%" PRIu32 "-%" PRIu32 "-%d-%016" PRIx64, base, count, (int) getpid(), r);
                reg = openat(blocks, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (reg < 0 || flock(reg, LOCK_EX | LOCK_NB) < 0) {
                        k = -errno;
                        set_why(why, why_len, "cannot register in %s: %s", sub, strerror(-k));
                }
        }
        (void) flock(top, LOCK_UN);
        if (k < 0)
                return k;
        l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        l->top = TAKE_FD(top);
        l->blocks = TAKE_FD(blocks);
        l->ids = TAKE_FD(ids);
        l->state = TAKE_FD(state);
        l->registered = TAKE_FD(reg);
        strcpy(l->registration, name);
        strcpy(l->state_name, state_name);
        l->base = base;
        l->count = count;
        l->quarantine_ns = ID_ORPHAN_QUARANTINE_NS;
        *ret = l;
        return 0;
}

/* Whether a live supervisor other than us has the block registered. */
static bool block_in_use(const IdLeases *l) {
        int fd = fcntl(l->blocks, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        bool used = false;

        if (!d) {
                if (fd >= 0)
                        close(fd);
                return true; /* cannot tell: keep the file */
        }
        rewinddir(d); /* the descriptor's offset is shared with l->blocks, read before */
        while (!used && (de = readdir(d))) {
                _cleanup_close_ int f = -1;
                uint32_t b, c;

                if (sscanf(de->d_name, "%" SCNu32 "-%" SCNu32 "-", &b, &c) != 2 || b != l->base || c != l->count)
                        continue;
                f = openat(l->blocks, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                used = f >= 0 && flock(f, LOCK_EX | LOCK_NB) < 0; /* its supervisor holds it */
        }
        closedir(d);
        return used;
}

/* Whether every id of the block was given back: each record FREE (or never written). */
static bool all_free(const IdLeases *l) {
        uint64_t rec;

        for (uint32_t i = 0; i < l->count; i++) {
                ssize_t n = pread(l->state, &rec, sizeof rec, (off_t) i * (off_t) sizeof rec);
                if (n < 0)
                        return false;
                if (n < (ssize_t) sizeof rec)
                        return true; /* the rest were never written */
                if (rec != ID_FREE)
                        return false;
        }
        return true;
}

IdLeases *id_leases_free(IdLeases *l) {
        if (!l)
                return NULL;
        /* The last supervisor of a block to stop, with every id given back, removes the
         * block's state file: it holds nothing a later one needs (a record that is not
         * FREE, a dead holder's id in quarantine, keeps it). Under the directory's lock,
         * which a starting supervisor takes before it opens the file. */
        if (flock(l->top, LOCK_EX) == 0) {
                (void) unlinkat(l->blocks, l->registration, 0);
                close(l->registered);
                l->registered = -1;
                if (!block_in_use(l) && all_free(l))
                        (void) unlinkat(l->top, l->state_name, 0);
                (void) flock(l->top, LOCK_UN);
        }
        /* Every lease goes with ids. */
        const int fds[] = { l->ids, l->state, l->registered, l->blocks, l->top };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        free(l);
        return NULL;
}

static int lock_id(IdLeases *l, uint32_t id, short type) {
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t) id, .l_len = 1 };

        return fcntl(l->ids, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

void id_leases_set_quarantine(IdLeases *l, uint64_t ns) {
        if (l)
                l->quarantine_ns = ns;
}

static off_t record_at(const IdLeases *l, uint32_t id) {
        return (off_t) (id - l->base) * (off_t) sizeof(uint64_t);
}

static int write_record(IdLeases *l, uint32_t id, uint64_t v) {
        ssize_t n = pwrite(l->state, &v, sizeof v, record_at(l, id));
        return n == (ssize_t) sizeof v ? 0 : n < 0 ? -errno : -EIO;
}

bool id_lease_take(IdLeases *l, uint32_t id) {
        uint64_t rec = ID_FREE, now;
        ssize_t n;
        int k;

        if (!l)
                return true;
        if (id < l->base || id - l->base >= l->count)
                return false;
        k = lock_id(l, id, F_WRLCK);
        if (k < 0) {
                if (k != -EAGAIN && k != -EACCES)
                        log_warning_errno(k, "Could not lease host id %" PRIu32 ": %m", id);
                return false;
        }
        n = pread(l->state, &rec, sizeof rec, record_at(l, id));
        if (n < 0) {
                log_warning_errno(-errno, "Could not read the lease record of host id %" PRIu32 ": %m", id);
                goto refuse;
        }
        if (n != (ssize_t) sizeof rec)
                rec = ID_FREE; /* never written: past the end of the file */
        if (rec != ID_FREE) {
                now = boottime_ns();
                if (rec == ID_LEASED || rec > now) {
                        /* Its holder died holding it (or stamped it by another clock:
                         * another time namespace): from now on. */
                        if (rec == ID_LEASED)
                                log_info("Host id %" PRIu32 " was leased by a supervisor that is gone: not used for "
                                         "%" PRIu64 " ms, while its workers leave",
                                         id, l->quarantine_ns / 1000000);
                        (void) write_record(l, id, now > ID_LEASED ? now : ID_LEASED + 1);
                        goto refuse;
                }
                if (now - rec < l->quarantine_ns)
                        goto refuse;
                /* The margin is over; a worker of the dead supervisor that the host still
                 * holds (frozen, stalled) keeps its uid from being shared all the same. */
                if (proc_uid_in_use(id)) {
                        log_info("Host id %" PRIu32 " is still the uid of a process: not used while it lives", id);
                        (void) write_record(l, id, now > ID_LEASED ? now : ID_LEASED + 1);
                        goto refuse;
                }
        }
        k = write_record(l, id, ID_LEASED);
        if (k < 0) {
                log_warning_errno(k, "Could not write the lease record of host id %" PRIu32 ": %m", id);
                goto refuse;
        }
        return true;
refuse:
        (void) lock_id(l, id, F_UNLCK);
        return false;
}

void id_lease_drop(IdLeases *l, uint32_t id) {
        int k;

        if (!l || id < l->base || id - l->base >= l->count)
                return;
        if ((k = write_record(l, id, ID_FREE)) < 0)
                /* Left LEASED: the next to take it waits out the quarantine. */
                log_warning_errno(k, "Could not write the lease record of host id %" PRIu32 ": %m", id);
        (void) lock_id(l, id, F_UNLCK);
}
