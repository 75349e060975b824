/* SPDX-License-Identifier: MIT */
/* The names of a worker's setup steps, as a setup report carries them. */
#include "contract/stage.h"

static const char *const stage_names[_SETUP_STAGE_MAX] = {
        [SETUP_STAGE_NONE] = "none",
        [SETUP_STAGE_SYNC] = "sync",
        [SETUP_STAGE_CGROUP] = "cgroup",
        [SETUP_STAGE_IDENTITY] = "identity",
        [SETUP_STAGE_CAPS_KEEP] = "caps_keep",
        [SETUP_STAGE_EXEC] = "exec",
        [SETUP_STAGE_PLAN] = "plan",
        [SETUP_STAGE_MOUNT_PRIVATE] = "mount_private",
        [SETUP_STAGE_MOUNT_ROOT] = "mount_root",
        [SETUP_STAGE_MOUNT_BIND] = "mount_bind",
        [SETUP_STAGE_MOUNT_DEV] = "mount_dev",
        [SETUP_STAGE_MOUNT_TMP] = "mount_tmp",
        [SETUP_STAGE_MOUNT_INPUTS] = "mount_inputs",
        [SETUP_STAGE_WRITE_INPUTS] = "write_inputs",
        [SETUP_STAGE_MOUNT_OUTPUTS] = "mount_outputs",
        [SETUP_STAGE_PIVOT_ROOT] = "pivot_root",
        [SETUP_STAGE_REMOUNT_RO] = "remount_ro",
        [SETUP_STAGE_HOSTNAME] = "hostname",
        [SETUP_STAGE_FDS] = "fds",
        [SETUP_STAGE_CAPS_DROP] = "caps_drop",
        [SETUP_STAGE_NO_NEW_PRIVS] = "no_new_privs",
        [SETUP_STAGE_LANDLOCK] = "landlock",
        [SETUP_STAGE_RLIMITS] = "rlimits",
        [SETUP_STAGE_SECCOMP] = "seccomp",
        [SETUP_STAGE_PYTHON_INIT] = "python_init",
        [SETUP_STAGE_PYTHON_RUN] = "python_run",
};

const char *setup_stage_to_string(SetupStage s) {
        if (s < 0 || s >= _SETUP_STAGE_MAX || !stage_names[s])
                return "unknown";
        return stage_names[s];
}
