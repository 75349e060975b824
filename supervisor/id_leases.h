/* SPDX-License-Identifier: MIT */
/* Host ids leased host-wide. Every root supervisor on a host whose block of worker host
 * ids (workerHostIdBase, workerHostIdCount) is the same shares the ids through leases:
 * a worker's uid is leased (an OFD write lock on the byte at offset uid of the file
 * "host-ids" in the lease directory) for as long as the worker may exist, so no two
 * live workers of any supervisors on the host have the same host uid. The kernel drops a
 * dead supervisor's leases with its last descriptor of the file; its workers, killed as
 * it dies, may outlive it briefly, so an id whose record ("state-<base>-<count>") says it
 * was never given back is not leased again until ID_ORPHAN_QUARANTINE_NS after a
 * supervisor first finds it so, nor after that while a process this supervisor can see
 * still has it as a uid (a worker the host has frozen or stalled).
 *
 * The last supervisor of a block to stop, with every record FREE, removes the state file.
 *
 * At start each supervisor registers its block ("blocks/<base>-<count>-<pid>-<random>", flock'ed
 * while it lives) under the directory's flock: a block that overlaps a live supervisor's
 * without being the same is refused, naming both; a registration whose lock can be taken
 * is a dead supervisor's and goes. Supervisors with disjoint blocks never contend.
 *
 * The directory (--lease-dir, default /run/codeinterp-ids) is made 0755 if missing and
 * must be a directory (not a symlink) owned by this user and writable by nobody else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ID_LEASES_DIR_DEFAULT "/run/codeinterp-ids"
/* How long an id a dead supervisor held stays unused: its workers get SIGKILL as it dies
 * (their parent-death signal) and are gone within milliseconds unless the host stalls
 * them; 10 s is that margin. */
#define ID_ORPHAN_QUARANTINE_NS (10ULL * 1000000000ULL)

typedef struct IdLeases IdLeases;

/* Open the lease directory and register the block. -errno with why naming what refused
 * (for an overlap: both blocks, and the other's registration). */
int id_leases_open(const char *dir, uint32_t base, uint32_t count, IdLeases **ret, char *why, size_t why_len);
IdLeases *id_leases_free(IdLeases *l);
/* Lease id: true when taken, false when another supervisor holds it (or the lock could
 * not be taken: the id is then not used either). */
bool id_lease_take(IdLeases *l, uint32_t id);
void id_lease_drop(IdLeases *l, uint32_t id);
/* For tests: the quarantine of a dead supervisor's ids (default ID_ORPHAN_QUARANTINE_NS). */
void id_leases_set_quarantine(IdLeases *l, uint64_t ns);
