/* SPDX-License-Identifier: MIT */
/* The slots a zygote holds and the spares made ahead (zygote_slots.h). */
#include "supervisor/zygote_slots.h"

#include <errno.h>
#include <stdlib.h>

#include "common/fdpass.h"
#include "common/log.h"

_Static_assert(ZYGOTE_CGROUP_FDS_MAX == CGROUP_PROCS_MAX, "a slot carries every cgroup.procs of its cgroup");

void zygote_slots_init(ZygoteSlots *s, sd_event *e, const Policy *policy, WorkerIds *ids, CgroupRoot *cgroups) {
        *s = (ZygoteSlots){ .event = e, .policy = policy, .ids = ids, .cgroups = cgroups };
}

void zygote_slots_done(ZygoteSlots *s) {
        zygote_slots_spares_free(s);
        free(s->held);
        s->held = NULL;
        s->n_held = s->held_cap = 0;
}

static int held_add(ZygoteSlots *s, uint32_t slot, Cgroup *cg) {
        if (s->n_held == s->held_cap) {
                size_t cap = s->held_cap ? s->held_cap * 2 : 16;
                HeldSlot *h = reallocarray(s->held, cap, sizeof *h);
                if (!h)
                        return -ENOMEM;
                s->held = h;
                s->held_cap = cap;
        }
        s->held[s->n_held++] = (HeldSlot){ .slot = slot, .cgroup = cg };
        return 0;
}

bool zygote_slots_take(ZygoteSlots *s, uint32_t slot, Cgroup **ret_cgroup) {
        for (size_t i = 0; i < s->n_held; i++)
                if (s->held[i].slot == slot) {
                        *ret_cgroup = s->held[i].cgroup;
                        s->held[i] = s->held[--s->n_held];
                        return true;
                }
        return false;
}

bool zygote_slots_held(const ZygoteSlots *s, uint32_t slot) {
        for (size_t i = 0; i < s->n_held; i++)
                if (s->held[i].slot == slot)
                        return true;
        return false;
}

void zygote_slots_release(ZygoteSlots *s, uint32_t slot, Cgroup *cg) {
        cgroup_free(cg);
        worker_id_release(s->ids, slot);
}

void zygote_slots_quarantine_all(ZygoteSlots *s) {
        for (size_t i = 0; i < s->n_held; i++) {
                cgroup_kill_members(s->held[i].cgroup);
                cgroup_free(s->held[i].cgroup);
                worker_id_quarantine(s->ids, s->held[i].slot);
        }
        s->n_held = 0;
        worker_ids_sweep(s->ids);
}

/* A slot: its id and (with cgroups) its cgroup, made with the start policy's limits. */
static int slot_make(ZygoteSlots *s, SpareSlot *ret) {
        const char *step = NULL;
        Cgroup *cg = NULL;
        WorkerId id;
        int k;

        if ((k = worker_id_acquire(s->ids, &id)) < 0)
                return k;
        if ((k = cgroup_new(s->cgroups, s->policy->memory_bytes, s->policy->processes, &cg, &step)) < 0) {
                log_warning_errno(k, "Making a worker cgroup failed at %s: %m", step);
                worker_id_release(s->ids, id.slot);
                return k;
        }
        *ret = (SpareSlot){ .id = id, .cgroup = cg };
        return 0;
}

/* Idle time (nothing else for the loop to do): make one spare slot, and stop once
 * there are enough. */
static int on_make_spare(sd_event_source *source, void *userdata) {
        ZygoteSlots *s = userdata;

        if (s->n_spare >= ZYGOTE_SPARE_SLOTS || slot_make(s, &s->spare[s->n_spare]) < 0) {
                /* Full, or failing: wait until a spare is taken (a failure shows there). */
                sd_event_source_set_enabled(source, SD_EVENT_OFF);
                return 0;
        }
        s->n_spare++;
        return 0;
}

static void spares_wanted(ZygoteSlots *s) {
        if (cgroup_root_version(s->cgroups) == CGROUP_NONE)
                return; /* an id alone costs nothing to take */
        if (!s->spare_source) {
                if (sd_event_add_defer(s->event, &s->spare_source, on_make_spare, s) < 0 ||
                    sd_event_source_set_priority(s->spare_source, SD_EVENT_PRIORITY_IDLE) < 0) {
                        s->spare_source = sd_event_source_disable_unref(s->spare_source);
                        return; /* then every slot is made when it is needed */
                }
        }
        sd_event_source_set_enabled(s->spare_source, SD_EVENT_ON);
}

void zygote_slots_spares_free(ZygoteSlots *s) {
        s->spare_source = sd_event_source_disable_unref(s->spare_source);
        while (s->n_spare > 0) {
                SpareSlot *sp = &s->spare[--s->n_spare];
                cgroup_free(sp->cgroup);
                worker_id_release(s->ids, sp->id.slot);
        }
}

int zygote_slots_give(ZygoteSlots *s, unsigned generation, ZygoteSlot *ret, int fds[static ZYGOTE_CGROUP_FDS_MAX]) {
        SpareSlot sp;
        size_t n_fds = 0;
        int k = 0;

        if (s->n_spare > 0)
                sp = s->spare[--s->n_spare];
        else if ((k = slot_make(s, &sp)) < 0)
                return k;
        if (sp.cgroup && (k = cgroup_open_procs(sp.cgroup, fds, &n_fds)) == -ENOENT) {
                /* A cgroup made ahead was removed under us (not by us: an administrator's
                 * cleanup, say). So may the other spares be: all are dropped, and this
                 * slot is made again now, once. */
                log_warning("Zygote %u: a worker cgroup made ahead is gone; making new ones", generation);
                zygote_slots_release(s, sp.id.slot, sp.cgroup);
                zygote_slots_spares_free(s);
                if ((k = slot_make(s, &sp)) < 0)
                        return k;
                k = sp.cgroup ? cgroup_open_procs(sp.cgroup, fds, &n_fds) : 0;
        }
        spares_wanted(s);
        if ((sp.cgroup && k < 0) || (k = held_add(s, sp.id.slot, sp.cgroup)) < 0) {
                fdpass_close_all(fds, n_fds);
                zygote_slots_release(s, sp.id.slot, sp.cgroup);
                return k;
        }
        *ret = (ZygoteSlot){ .slot = sp.id.slot, .uid = sp.id.uid, .gid = sp.id.gid, .n_cgroup_fds = (uint32_t) n_fds };
        return 0;
}

void zygote_slots_take_back(ZygoteSlots *s, uint32_t slot) {
        Cgroup *cg = NULL;

        if (zygote_slots_take(s, slot, &cg))
                zygote_slots_release(s, slot, cg);
}
