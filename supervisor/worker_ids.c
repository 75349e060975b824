/* SPDX-License-Identifier: MIT */
/* The workers' host identities (worker_ids.h): the block, acquisition, quarantine. */
#include "supervisor/worker_ids.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/proc.h"
#include "common/userns.h"
#include "common/util.h"

typedef enum SlotState {
        SLOT_FREE,
        SLOT_USED,        /* a worker (or a zygote, for its next workers) has it */
        SLOT_QUARANTINED, /* its worker may still exist, and no runner serves it */
} SlotState;

struct WorkerIds {
        uint32_t base, count;
        uint32_t next; /* where the search for a free slot starts */
        uint32_t in_use;
        uint32_t quarantined;
        uint8_t *state;   /* SlotState per slot */
        IdLeases *leases; /* host-wide leases of the ids (NULL: rootless, or none) */
};

static bool in_block(uint64_t id, uint32_t base, uint32_t count) {
        return id >= base && id < (uint64_t) base + count;
}

static bool ranges_overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len) {
        return a < b + b_len && b < a + a_len;
}

/* "name:start:count" lines; comments and malformed lines are skipped, as shadow-utils
 * does. A missing file holds no range. */
static int check_sub_ids(const char *path, uint32_t base, uint32_t count, char *why, size_t why_len) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char line[512];

        if (!f)
                return errno == ENOENT ? 0 : -errno;
        while (fgets(line, sizeof line, f)) {
                char *start = strchr(line, ':'), *len, *end;
                uint64_t s, n;

                if (line[0] == '#' || !start || !(len = strchr(start + 1, ':')))
                        continue;
                *start++ = 0;
                errno = 0;
                s = strtoull(start, &end, 10);
                if (errno != 0 || end == start || *end != ':')
                        continue;
                n = strtoull(len + 1, &end, 10);
                if (errno != 0 || end == len + 1)
                        continue;
                if (ranges_overlap(base, count, s, n)) {
                        set_why(why, why_len, "it overlaps %s's range %" PRIu64 "-%" PRIu64 " in %s", line, s,
                                s + n - 1, path);
                        return -EEXIST;
                }
        }
        return 0;
}

/* Whether [base, base + count) lies inside one line "inside outside count" of the map
 * of our own user namespace (seen from it, inside = the ids we can write to a child's
 * map). */
static int check_mapped(const char *path, uint32_t base, uint32_t count, char *why, size_t why_len) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        uint64_t in, out, n;

        if (!f)
                return errno == ENOENT ? 0 : -errno; /* no /proc: nothing to learn here */
        while (fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &in, &out, &n) == 3)
                if (base >= in && (uint64_t) base + count <= in + n)
                        return 0;
        set_why(why, why_len, "ids %" PRIu32 "-%" PRIu64 " are not all mapped in the supervisor's user namespace (%s)",
                base, (uint64_t) base + count - 1, path);
        return -ERANGE;
}

/* -EEXIST, and why says so, if id (a user's uid or a group's gid) is inside the block. */
static int id_taken(const char *kind, const char *name, const char *id_kind, uint32_t id, uint32_t base, uint32_t count,
                    char *why, size_t why_len) {
        if (!in_block(id, base, count))
                return 0;
        set_why(why, why_len, "%s %s has %s %u, inside the block", kind, name, id_kind, (unsigned) id);
        return -EEXIST;
}

int worker_ids_check(uint32_t base, uint32_t count, const char *subuid, const char *subgid, char *why, size_t why_len) {
        struct passwd *pw;
        struct group *gr;
        int k = 0;

        why[0] = 0;
        /* The users, then (if none is inside) the groups. */
        setpwent();
        while (k == 0 && (pw = getpwent()))
                k = id_taken("user", pw->pw_name, "uid", pw->pw_uid, base, count, why, why_len);
        endpwent();
        setgrent();
        while (k == 0 && (gr = getgrent()))
                k = id_taken("group", gr->gr_name, "gid", gr->gr_gid, base, count, why, why_len);
        endgrent();
        if (k < 0)
                return k;
        if ((k = check_sub_ids(subuid ?: "/etc/subuid", base, count, why, why_len)) < 0 ||
            (k = check_sub_ids(subgid ?: "/etc/subgid", base, count, why, why_len)) < 0)
                return k;
        if ((k = check_mapped("/proc/self/uid_map", base, count, why, why_len)) < 0 ||
            (k = check_mapped("/proc/self/gid_map", base, count, why, why_len)) < 0)
                return k;
        return 0;
}

int worker_ids_new(const Policy *p, IdLeases *leases, WorkerIds **ret) {
        WorkerIds *ids = calloc(1, sizeof *ids);

        if (!ids)
                return -ENOMEM;
        ids->leases = leases;
        ids->base = p->worker_host_id_base;
        ids->count = p->worker_host_id_count;
        ids->state = calloc(ids->count, 1);
        if (!ids->state) {
                free(ids);
                return -ENOMEM;
        }
        *ret = ids;
        return 0;
}

WorkerIds *worker_ids_free(WorkerIds *ids) {
        if (ids) {
                free(ids->state);
                free(ids);
        }
        return NULL;
}

bool worker_id_of_slot(const WorkerIds *ids, uint32_t slot, WorkerId *ret) {
        if (!ids || slot >= ids->count)
                return false;
        /* Rootless the kernel lets us map only our own ids: every slot is this user
         * (docs/security.md, "Rootless"); the slots still count live workers. */
        if (userns_rootless())
                *ret = (WorkerId){ .slot = slot, .uid = geteuid(), .gid = getegid() };
        else
                *ret = (WorkerId){ .slot = slot, .uid = ids->base + slot, .gid = ids->base + slot };
        return true;
}

uint32_t worker_ids_in_use(const WorkerIds *ids) {
        return ids ? ids->in_use : 0;
}

/* A slot free here whose id no other supervisor on the host has leased (leased now). */
static bool find_free(WorkerIds *ids, uint32_t *ret) {
        for (uint32_t i = 0; i < ids->count; i++) {
                uint32_t slot = (ids->next + i) % ids->count;
                if (ids->state[slot] == SLOT_FREE &&
                    (userns_rootless() || id_lease_take(ids->leases, ids->base + slot))) {
                        *ret = slot;
                        return true;
                }
        }
        return false;
}

int worker_id_acquire(WorkerIds *ids, WorkerId *ret) {
        uint32_t slot;

        if (!find_free(ids, &slot)) {
                if (ids->quarantined == 0)
                        return -EUSERS;
                worker_ids_sweep(ids);
                if (!find_free(ids, &slot))
                        return -EUSERS;
        }
        ids->state[slot] = SLOT_USED;
        ids->in_use++;
        ids->next = (slot + 1) % ids->count;
        worker_id_of_slot(ids, slot, ret);
        return 0;
}

void worker_id_release(WorkerIds *ids, uint32_t slot) {
        if (!ids || slot >= ids->count || ids->state[slot] == SLOT_FREE)
                return;
        if (ids->state[slot] != SLOT_USED)
                ids->quarantined--;
        ids->state[slot] = SLOT_FREE;
        if (!userns_rootless())
                id_lease_drop(ids->leases, ids->base + slot);
        ids->in_use--;
}

void worker_id_quarantine(WorkerIds *ids, uint32_t slot) {
        if (!ids || slot >= ids->count || ids->state[slot] != SLOT_USED)
                return;
        ids->state[slot] = SLOT_QUARANTINED;
        ids->quarantined++;
}

/* Whether the child's user namespace maps a quarantined slot: 1 (and the slot), 0, or
 * -errno when the map cannot be read for another reason than the child being gone. */
static int child_in_quarantine(const WorkerIds *ids, pid_t pid, uint32_t *ret_slot) {
        char path[64];
        _cleanup_fclose_ FILE *f = NULL;
        uint64_t in, out, n;

        snprintf(path, sizeof path, "/proc/%d/uid_map", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT || errno == ESRCH ? 0 : -errno;
        /* A worker's map is one id of the block. A map that reaches outside it is no
         * worker's: the zygote's, say, which shares our namespace and so "maps" every id. */
        while (fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &in, &out, &n) == 3)
                if (n == 1 && in_block(out, ids->base, ids->count) && ids->state[out - ids->base] == SLOT_QUARANTINED) {
                        *ret_slot = (uint32_t) (out - ids->base);
                        return 1;
                }
        return 0;
}

void worker_ids_sweep(WorkerIds *ids) {
        pid_t pids[512];
        size_t n;
        bool unsure;

        if (!ids || ids->quarantined == 0)
                return;
        n = proc_list_children(pids, ELEMENTSOF(pids));
        unsure = n == ELEMENTSOF(pids);
        for (size_t i = 0; i < n; i++) {
                uint32_t slot;
                int k = child_in_quarantine(ids, pids[i], &slot);
                if (k < 0)
                        unsure = true;
                else if (k > 0)
                        /* A worker no runner serves (a pre-started one of a zygote that
                         * went away, or the answer to an abandoned request): ended now,
                         * so its id need not wait for it. */
                        kill_and_reap(pids[i], -1);
        }
        if (unsure)
                return;
        for (uint32_t slot = 0; slot < ids->count; slot++)
                if (ids->state[slot] == SLOT_QUARANTINED)
                        worker_id_release(ids, slot);
}
