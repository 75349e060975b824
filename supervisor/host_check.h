/* SPDX-License-Identifier: MIT */
/* What this host gives the policy (host_check.c): --check-config's report, and the
 * check of the policy's pythonPackages against this build. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "policy/policy.h"
#include "supervisor/id_leases.h"

/* Print --check-config's lines for p, the self-check aside; true when anything would
 * make calls fail. cgroup_fs: where the cgroupfs is mounted; lease_dir: the host ids'
 * lease directory, whose leases are taken into *leases as the daemon would. */
bool host_check_report(const Policy *p, const char *cgroup_fs, const char *lease_dir, IdLeases **leases);
/* The policy's pythonPackages against what this build's interpreter has (configure
 * time, contract/runtime.h): 0, or -ENOPKG with the first missing one and why in msg. */
int host_check_packages(const Policy *p, char *msg, size_t size);
