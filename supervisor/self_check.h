/* SPDX-License-Identifier: MIT */
/* The self-check (docs/operations.md, "Self-check"): before codeinterpd serves, and
 * in --check-config, one worker made and run through the path every call takes after
 * the queue (the runner, the zygote's slot or the exec spawner, the worker's cgroup, its
 * id maps and /outputs, seccomp, the embedded interpreter), outside the scheduler: it
 * is no client's call, so it has no call id, spends no quota, is held by no memory gate
 * and counts in no status counter. It runs SELF_CHECK_CODE and, when the policy gives
 * calls an /outputs, leaves a file there that must come back. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "policy/policy.h"
#include "supervisor/runner.h"

#define SELF_CHECK_CODE "6 * 7"
#define SELF_CHECK_VALUE "42"

typedef struct SelfCheck SelfCheck;

/* problem: NULL when all of it worked, else what went wrong (an outcome and its detail,
 * the failed setup stage and errno: no user content, there is none). Called once, from
 * the loop; the check may be freed from it. */
typedef void (*SelfCheckFn)(SelfCheck *c, const char *problem, uint64_t elapsed_usec, void *userdata);

/* Start it now, or as soon as the spawner is ready (self_check_kick()). Its deadline is
 * the policy's timeoutMs, but at least SELF_CHECK_MIN_TIMEOUT_MS: the check asks whether a
 * worker can be made and run here, not how fast on a busy host (a policy with a timeoutMs of
 * a few hundred ms would otherwise refuse to serve whenever it starts during a load peak).
 * p and sp must outlive it. */
#define SELF_CHECK_MIN_TIMEOUT_MS 30000
int self_check_start(sd_event *e, const Policy *p, const RunnerSpawner *sp, SelfCheckFn fn, void *userdata,
                     SelfCheck **ret);
/* The spawner may be ready now (a zygote became ready): start if still waiting. */
void self_check_kick(SelfCheck *c);
/* Shutdown: a worker is killed (fn gets "cancelled"), a waiting check ends at once. */
void self_check_cancel(SelfCheck *c);
/* Whether pid is its worker (so that nobody else reaps it). */
bool self_check_owns_pid(const SelfCheck *c, pid_t pid);
/* Whether fn has not been called yet. */
bool self_check_pending(const SelfCheck *c);
SelfCheck *self_check_free(SelfCheck *c);
