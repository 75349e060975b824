/* SPDX-License-Identifier: MIT */
/* supervisor/cgroup.c against a fake cgroup tree in a temporary directory (plain
 * directories, which hold no controller files): detection of v1 and v2 from the
 * process's own /proc/self/cgroup, off / auto / required, and a failed setup step that
 * names itself and leaves no directory behind. The real hierarchies are exercised by
 * tests/integration/test_cgroups.py. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/cgroup.h"

static char fs[PATH_MAX];

/* mkdir -p */
static void mkdirs(const char *path) {
        char p[PATH_MAX * 2];

        snprintf(p, sizeof p, "%s", path);
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        (void) mkdir(p, 0755);
                        *s = '/';
                }
        (void) mkdir(p, 0755);
}

static void put(const char *dir, const char *file, const char *text) {
        char p[PATH_MAX * 2];
        FILE *f;

        snprintf(p, sizeof p, "%s/%s", dir, file);
        f = fopen(p, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* Our own cgroups, as cgroup.c reads them. */
static void own(char *v2, char *memory, char *pids) {
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64];

        v2[0] = memory[0] = pids[0] = 0;
        assert_non_null(f);
        while (fgets(line, sizeof line, f)) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!b)
                        continue;
                *b++ = 0;
                b[strcspn(b, "\n")] = 0;
                if (strncmp(line, "0:", 2) == 0 && a[1] == 0)
                        strcpy(v2, b);
                if (strstr(a + 1, "memory"))
                        strcpy(memory, b);
                if (strstr(a + 1, "pids"))
                        strcpy(pids, b);
        }
        fclose(f);
}

static int count_entries(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

static int setup(void **state) {
        snprintf(fs, sizeof fs, "/tmp/ci-cgroup-test-XXXXXX");
        assert_non_null(mkdtemp(fs));
        return 0;
}

static int teardown(void **state) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", fs);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_off_is_none(void **state) {
        CgroupRoot *root = NULL;
        Cgroup *cg = (Cgroup *) 1;
        const char *step = NULL;
        char why[256];

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_OFF, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_int_equal(cgroup_new(root, 1 << 24, 4, &cg, &step), 0);
        assert_null(cg);
        cgroup_root_free(root);
}

static void test_empty_fs_auto_and_required(void **state) {
        CgroupRoot *root = NULL;
        char why[512];

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_AUTO, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_true(strlen(why) > 0);
        cgroup_root_free(root);
        root = NULL;
        assert_true(cgroup_root_open(POLICY_CGROUPS_REQUIRED, fs, false, &root, why, sizeof why) < 0);
        assert_null(root);
        assert_true(strlen(why) > 0);
}

/* A tree that looks usable, whose cgroups hold no limit files: the first limit fails,
 * names itself, and the worker's directory is removed again. */
static void test_failed_setup_leaves_nothing(void **state) {
        char v2[PATH_MAX], memory[PATH_MAX], pids[PATH_MAX], dir[PATH_MAX * 2], sub[PATH_MAX * 3];
        CgroupRoot *root = NULL;
        Cgroup *cg = NULL;
        const char *step = "";
        char why[512];

        own(v2, memory, pids);
        if (memory[0] && pids[0]) {
                assert_true(snprintf(dir, sizeof dir, "%s/memory%s", fs, strcmp(memory, "/") == 0 ? "" : memory) <
                            (int) sizeof dir);
                mkdirs(dir);
                assert_true(snprintf(dir, sizeof dir, "%s/pids%s", fs, strcmp(pids, "/") == 0 ? "" : pids) <
                            (int) sizeof dir);
                mkdirs(dir);
        } else if (v2[0]) {
                put(fs, "cgroup.controllers", "cpu memory pids\n");
                assert_true(snprintf(dir, sizeof dir, "%s%s", fs, strcmp(v2, "/") == 0 ? "" : v2) < (int) sizeof dir);
                mkdirs(dir);
                put(dir, "cgroup.controllers", "cpu memory pids\n");
                put(dir, "cgroup.subtree_control", "memory pids\n");
        } else
                skip();
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, fs, false, &root, why, sizeof why), 0);
        assert_int_not_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_int_equal(cgroup_new(root, 1 << 24, 4, &cg, &step), -ENOENT);
        assert_null(cg);
        assert_true(strncmp(step, "setting ", 8) == 0);
        if (cgroup_root_version(root) == CGROUP_V1) {
                assert_true(snprintf(sub, sizeof sub, "%s/memory%s/codeinterp", fs,
                                     strcmp(memory, "/") == 0 ? "" : memory) < (int) sizeof sub);
                assert_int_equal(count_entries(sub), 0);
                assert_true(snprintf(sub, sizeof sub, "%s/pids%s/codeinterp", fs, strcmp(pids, "/") == 0 ? "" : pids) <
                            (int) sizeof sub);
                assert_int_equal(count_entries(sub), 0);
        } else
                assert_int_equal(count_entries(dir), 2); /* the two files we put there */
        cgroup_root_free(root);
        /* v1's codeinterp goes at exit when empty. */
        if (memory[0] && pids[0])
                assert_int_equal(access(sub, F_OK), -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_off_is_none, setup, teardown),
                cmocka_unit_test_setup_teardown(test_empty_fs_auto_and_required, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_setup_leaves_nothing, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
