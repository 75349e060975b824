/* SPDX-License-Identifier: MIT */
/* The zygote: one CPython initialised once (never running user code) that clones a
 * fresh worker per call, answering the supervisor's control messages
 * (contract/zygote_proto.h) on ZYGOTE_CTL_FD.
 *
 * The zygote keeps up to POOL_SIZE workers pre-started (namespaces, minimal root,
 * after-fork work done), each in a slot the supervisor gave it (a host uid and gid,
 * and a cgroup it enters first), each waiting on its own socket for one call's fds; a
 * worker is used for exactly one call. It prepares them after its start and after an
 * IDLE hint (or EXITING, with an empty pool), not while a call runs: on a virtualised
 * host, creating a process slows every other process's page faults (TLB shootdowns),
 * so a refill during a call costs that call more than the pool saves it. Except when
 * the pool is behind: once a call has found no worker ready (the calls come faster
 * than the moments without one), the zygote refills while calls run, until a call
 * finds one ready again; otherwise every queued call would wait for its own clone. */
#pragma once

/* argv: codeinterp-zygote --zygote UID GID POOL_SIZE PACKAGES TMP_BYTES, UID and GID the
 * ids inside every worker's namespace (workerUid, workerGid), POOL_SIZE the number of
 * workers kept pre-started, PACKAGES the policy's pythonPackages bit mask (preloaded,
 * and bound in every worker) and TMP_BYTES its tmpBytes, the size a pre-started
 * worker's /tmp is mounted with (a call whose plan says otherwise, after a reload,
 * gets it remounted); the host ids come with the supervisor's slots. Runs the zygote loop on
 * fd ZYGOTE_CTL_FD; returns the process exit status. */
int zygote_main(int argc, char **argv);
