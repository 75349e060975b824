/* SPDX-License-Identifier: MIT */
/* The steps a worker takes between its clone and its first line of Python. A failing
 * step travels to the supervisor as data, (stage name, errno) in a setup report
 * (contract/report.h), and becomes the result's workerError. */
#pragma once

typedef enum SetupStage {
        SETUP_STAGE_NONE,
        SETUP_STAGE_SYNC,      /* waiting for the creator to write the id maps */
        SETUP_STAGE_CGROUP,    /* entering the worker's own cgroup */
        SETUP_STAGE_IDENTITY,  /* setgroups / setresgid / setresuid */
        SETUP_STAGE_CAPS_KEEP, /* keeping namespace capabilities for setup */
        SETUP_STAGE_EXEC,      /* exec of the worker binary (exec mode) */
        SETUP_STAGE_PLAN,      /* reading or decoding the plan */
        SETUP_STAGE_MOUNT_PRIVATE,
        SETUP_STAGE_MOUNT_ROOT, /* tmpfs for the new root */
        SETUP_STAGE_MOUNT_BIND, /* read-only binds of the runtime */
        SETUP_STAGE_MOUNT_DEV,
        SETUP_STAGE_MOUNT_TMP,
        SETUP_STAGE_MOUNT_INPUTS,
        SETUP_STAGE_WRITE_INPUTS,
        SETUP_STAGE_MOUNT_OUTPUTS, /* moving the supervisor's tmpfs onto /outputs */
        SETUP_STAGE_PIVOT_ROOT,
        SETUP_STAGE_REMOUNT_RO,
        SETUP_STAGE_HOSTNAME,
        SETUP_STAGE_FDS,
        SETUP_STAGE_CAPS_DROP,
        SETUP_STAGE_NO_NEW_PRIVS,
        SETUP_STAGE_LANDLOCK,
        SETUP_STAGE_RLIMITS,
        SETUP_STAGE_SECCOMP,
        SETUP_STAGE_PYTHON_INIT,
        SETUP_STAGE_PYTHON_RUN,
        _SETUP_STAGE_MAX,
} SetupStage;

/* The stage's wire name ("mount_root", ...); "unknown" for an out-of-range value. */
const char *setup_stage_to_string(SetupStage s);
