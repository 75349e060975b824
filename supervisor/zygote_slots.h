/* SPDX-License-Identifier: MIT */
/* The slots a zygote holds, for the supervisor's side of it (zygote_client.c): a slot is
 * a worker's host identity and (with cgroups) its cgroup, given to the zygote with each
 * pre-started worker (SLOT) or spawn request and held until the zygote's answer gives it
 * back. Slots are made ahead, two spares at idle priority, so that a spawn request
 * does not make one on its call's path. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "contract/zygote_proto.h"
#include "policy/policy.h"
#include "supervisor/cgroup.h"
#include "supervisor/worker_ids.h"

#define ZYGOTE_SPARE_SLOTS 2

/* A slot the zygote holds, and its cgroup (NULL without cgroups). */
typedef struct HeldSlot {
        uint32_t slot;
        Cgroup *cgroup;
} HeldSlot;

/* A slot made ahead, not given to any zygote yet. */
typedef struct SpareSlot {
        WorkerId id;
        Cgroup *cgroup;
} SpareSlot;

typedef struct ZygoteSlots {
        sd_event *event;
        const Policy *policy; /* the start policy: the slots' cgroups' limits */
        WorkerIds *ids;       /* where slots come from (the server's) */
        CgroupRoot *cgroups;  /* where slots' cgroups are made (the server's) */
        HeldSlot *held;       /* given with SLOT or SPAWN, not given back */
        size_t n_held, held_cap;
        SpareSlot spare[ZYGOTE_SPARE_SLOTS]; /* with cgroups: slots made ahead, in idle time */
        size_t n_spare;
        sd_event_source *spare_source; /* idle priority: makes spares while there are too few */
} ZygoteSlots;

/* ids and cgroups are the caller's and outlive s; policy too. */
void zygote_slots_init(ZygoteSlots *s, sd_event *e, const Policy *policy, WorkerIds *ids, CgroupRoot *cgroups);
/* Free the spares and the held set's memory (the held slots themselves are released by
 * zygote_slots_quarantine_all() or given back before). */
void zygote_slots_done(ZygoteSlots *s);
/* A new slot for zygote generation (sent as SLOT or with a spawn request): a spare if
 * there is one, else made now; its cgroup's cgroup.procs descriptors in fds (the caller
 * closes them once sent). Held from now on. 0 or -errno. */
int zygote_slots_give(ZygoteSlots *s, unsigned generation, ZygoteSlot *ret, int fds[static ZYGOTE_CGROUP_FDS_MAX]);
/* Take back a slot whose message could not be sent: released. */
void zygote_slots_take_back(ZygoteSlots *s, uint32_t slot);
bool zygote_slots_held(const ZygoteSlots *s, uint32_t slot);
/* Take slot out of the held set, with its cgroup: false if it is not held. */
bool zygote_slots_take(ZygoteSlots *s, uint32_t slot, Cgroup **ret_cgroup);
/* A slot that is no worker's (failed, or never used): its cgroup goes, its id is free. */
void zygote_slots_release(ZygoteSlots *s, uint32_t slot, Cgroup *cg);
/* The zygote is gone: the pre-started workers of its slots may still live until they
 * notice (they are the supervisor's children, reaped as strays). Their cgroups name
 * them: they are killed and the cgroups removed; their ids wait in quarantine until
 * they are reaped. */
void zygote_slots_quarantine_all(ZygoteSlots *s);
/* Drop the spares (their cgroups removed, their ids free). */
void zygote_slots_spares_free(ZygoteSlots *s);
