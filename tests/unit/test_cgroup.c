/* SPDX-License-Identifier: MIT */
/* supervisor/cgroup.c against a fake cgroup tree in a temporary directory (plain
 * directories, which hold no controller files): detection of v1 and v2 from the
 * process's own /proc/self/cgroup, off / auto / required, and a failed setup step that
 * names itself and leaves no directory behind, and a given-back cgroup's account reset
 * for its next worker. The real hierarchies are exercised by
 * tests/integration/test_cgroups.py. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/file.h>
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

/* Our own cgroups, as cgroup.c reads them (cpu: the v1 hierarchy whose controllers
 * include cpu; may be NULL). */
static void own(char *v2, char *memory, char *pids, char *cpu) {
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 64];

        v2[0] = memory[0] = pids[0] = 0;
        if (cpu)
                cpu[0] = 0;
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
                for (char *save = NULL, *c = strtok_r(a + 1, ",", &save); cpu && c; c = strtok_r(NULL, ",", &save))
                        if (strcmp(c, "cpu") == 0)
                                strcpy(cpu, b);
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

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_OFF, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_int_equal(cgroup_new(root, 1 << 24, 4, &cg, &step), 0);
        assert_null(cg);
        cgroup_root_free(root);
}

static void test_empty_fs_auto_and_required(void **state) {
        CgroupRoot *root = NULL;
        char why[512];

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_AUTO, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_true(strlen(why) > 0);
        cgroup_root_free(root);
        root = NULL;
        assert_true(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why) < 0);
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

        own(v2, memory, pids, NULL);
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
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_not_equal(cgroup_root_version(root), CGROUP_NONE);
        assert_int_equal(cgroup_new(root, 1 << 24, 4, &cg, &step), -ENOENT);
        assert_null(cg);
        assert_true(strncmp(step, "setting ", 8) == 0);
        /* Nothing of the worker is left in the supervisor's own subtree. */
        if (cgroup_root_version(root) == CGROUP_V1) {
                assert_true(snprintf(sub, sizeof sub, "%s/memory%s/codeinterp/ci-%s", fs,
                                     strcmp(memory, "/") == 0 ? "" : memory,
                                     cgroup_root_instance(root)) < (int) sizeof sub);
                assert_int_equal(count_entries(sub), 0);
                assert_true(snprintf(sub, sizeof sub, "%s/pids%s/codeinterp/ci-%s", fs,
                                     strcmp(pids, "/") == 0 ? "" : pids,
                                     cgroup_root_instance(root)) < (int) sizeof sub);
                assert_int_equal(count_entries(sub), 0);
                assert_true(snprintf(sub, sizeof sub, "%s/pids%s/codeinterp", fs, strcmp(pids, "/") == 0 ? "" : pids) <
                            (int) sizeof sub);
        } else {
                assert_true(snprintf(sub, sizeof sub, "%s/ci-%s", dir, cgroup_root_instance(root)) < (int) sizeof sub);
                assert_int_equal(count_entries(sub), 0);
                assert_int_equal(count_entries(dir), 3); /* the two files we put there, the subtree */
        }
        cgroup_root_free(root);
        if (!(memory[0] && pids[0]))
                assert_int_equal(count_entries(dir), 2); /* the subtree went at exit */
        /* v1's codeinterp goes at exit when empty. */
        if (memory[0] && pids[0])
                assert_int_equal(access(sub, F_OK), -1);
}

static void get(const char *dir, const char *file, char *buf, size_t size) {
        char p[PATH_MAX * 2];
        FILE *f;
        size_t n;

        snprintf(p, sizeof p, "%s/%s", dir, file);
        f = fopen(p, "re");
        assert_non_null(f);
        n = fread(buf, 1, size - 1, f);
        buf[n] = 0;
        fclose(f);
}

/* The cap's files in a worker's cgroup directory: v2 cpu.max, v1 the period and the
 * quota; 0 writes nothing; a missing file names its step. */
static void test_cpu_cap_files(void **state) {
        const char *step = "";
        char buf[64];
        int dir;

        put(fs, "cpu.max", "");
        put(fs, "cpu.cfs_period_us", "");
        put(fs, "cpu.cfs_quota_us", "");
        dir = open(fs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V2, 0, &step), 0);
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V1, 0, &step), 0);
        get(fs, "cpu.max", buf, sizeof buf);
        assert_string_equal(buf, "");
        get(fs, "cpu.cfs_quota_us", buf, sizeof buf);
        assert_string_equal(buf, "");
        get(fs, "cpu.cfs_period_us", buf, sizeof buf);
        assert_string_equal(buf, "");
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V2, 20, &step), 0);
        get(fs, "cpu.max", buf, sizeof buf);
        assert_string_equal(buf, "20000 100000");
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V1, 150, &step), 0);
        get(fs, "cpu.cfs_period_us", buf, sizeof buf);
        assert_string_equal(buf, "100000");
        get(fs, "cpu.cfs_quota_us", buf, sizeof buf);
        assert_string_equal(buf, "150000");
        assert_int_equal(unlink(strcat(strcpy(buf, fs), "/cpu.cfs_quota_us")), 0);
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V1, 20, &step), -ENOENT);
        assert_string_equal(step, "setting cpu.cfs_quota_us");
        assert_int_equal(unlink(strcat(strcpy(buf, fs), "/cpu.max")), 0);
        assert_int_equal(cgroup_write_cpu_cap(dir, CGROUP_V2, 20, &step), -ENOENT);
        assert_string_equal(step, "setting cpu.max");
        close(dir);
}

/* The supervisor's own cgroup in the v1 hierarchy hier of the fake tree (made), or
 * false when the process has none there. */
static bool fake_v1(const char *hier, char *dir, size_t size) {
        char v2[PATH_MAX], memory[PATH_MAX], pids[PATH_MAX], cpu[PATH_MAX];
        const char *own_path;

        own(v2, memory, pids, cpu);
        own_path = strcmp(hier, "memory") == 0 ? memory : strcmp(hier, "pids") == 0 ? pids : cpu;
        if (!own_path[0])
                return false;
        assert_true(snprintf(dir, size, "%s/%s%s", fs, hier, strcmp(own_path, "/") == 0 ? "" : own_path) < (int) size);
        mkdirs(dir);
        return true;
}

/* A cap of cpu percent the tree cannot give: required refuses, with a reason that holds
 * refused, and auto runs without the cap, its cpu reason holding fallback. The version
 * auto found. */
static CgroupVersion cap_falls_back(uint32_t cpu, const char *refused, const char *fallback) {
        CgroupRoot *root = NULL;
        CgroupVersion v;
        char why[512];

        assert_true(cgroup_root_open(POLICY_CGROUPS_REQUIRED, cpu, fs, false, &root, why, sizeof why) < 0);
        assert_null(root);
        assert_non_null(strstr(why, refused));
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_AUTO, cpu, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        assert_non_null(strstr(cgroup_root_cpu_why(root), fallback));
        v = cgroup_root_version(root);
        cgroup_root_free(root);
        return v;
}

/* v1 (a hybrid host like this one): the cpu hierarchy is opened, and its "codeinterp"
 * made, only with the cap on; without it required refuses with a reason naming the
 * cpu controller and auto runs without the cap. */
static void test_cpu_cap_v1_root(void **state) {
        char mem[PATH_MAX * 2], pids[PATH_MAX * 2], cpu[PATH_MAX * 2], sub[PATH_MAX * 3], why[512];
        CgroupRoot *root = NULL;
        Cgroup *cg = NULL;
        const char *step = "";

        if (!fake_v1("memory", mem, sizeof mem) || !fake_v1("pids", pids, sizeof pids))
                skip();
        /* Off: nothing of the cpu hierarchy, even where it exists. */
        if (!fake_v1("cpu", cpu, sizeof cpu))
                skip();
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_V1);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        assert_string_equal(cgroup_root_cpu_why(root), "");
        snprintf(sub, sizeof sub, "%s/codeinterp", cpu);
        assert_int_equal(access(sub, F_OK), -1);
        /* The first limit (memory) fails in the fake tree, not a cpu one. */
        assert_int_equal(cgroup_new(root, 1 << 24, 4, &cg, &step), -ENOENT);
        assert_string_equal(step, "setting memory.limit_in_bytes");
        root = cgroup_root_free(root);

        /* On: the cpu hierarchy's codeinterp; the worker's cgroup gets the cap there. */
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 20, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_cpu_percent(root), 20);
        assert_int_equal(access(sub, F_OK), 0);
        root = cgroup_root_free(root);
        assert_int_equal(access(sub, F_OK), -1); /* removed at exit when empty */

        /* No cpu hierarchy: required refuses, auto runs without the cap. */
        snprintf(sub, sizeof sub, "rm -rf '%s/cpu'", fs);
        assert_int_equal(system(sub), 0);
        assert_true(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 20, fs, false, &root, why, sizeof why) < 0);
        assert_null(root);
        assert_non_null(strstr(why, "cpuBandwidthPercent"));
        assert_non_null(strstr(why, "cpu"));
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_AUTO, 20, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_V1);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        assert_true(strlen(cgroup_root_cpu_why(root)) > 0);
        root = cgroup_root_free(root);
        /* The dry run (--check-config) says the same. */
        assert_true(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 20, fs, true, &root, why, sizeof why) < 0);
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_AUTO, 20, fs, true, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        root = cgroup_root_free(root);

        /* The cpu cgroup is there but "codeinterp" cannot be made in it (a /proc
         * directory stands for it): the same, with that reason. */
        mkdirs(cpu);
        assert_int_equal(rmdir(cpu), 0);
        assert_int_equal(symlink("/proc/self", cpu), 0);
        cap_falls_back(20, "cannot make", "cannot make");
}

/* At exit, once none of its processes is left, a supervisor removes what is left of its
 * own workers' cgroups (a removal that gave up while a killed worker was still leaving)
 * and its subtree. At start it removes the subtrees of supervisors that are gone (whose
 * flock nobody holds), never one a live supervisor holds, whatever its pid namespace. */
static void test_own_leftovers_removed_at_exit(void **state) {
        char mem[PATH_MAX * 2], pids[PATH_MAX * 2], mine[PATH_MAX * 3], theirs[PATH_MAX * 3], dead[PATH_MAX * 3],
                subtree[PATH_MAX * 3], why[512];
        CgroupRoot *root = NULL;
        int live;

        if (!fake_v1("memory", mem, sizeof mem) || !fake_v1("pids", pids, sizeof pids))
                skip();
        snprintf(theirs, sizeof theirs, "%s/codeinterp/ci-0123456789abcdef/w7", mem);
        snprintf(dead, sizeof dead, "%s/codeinterp/ci-fedcba9876543210/w3", mem);
        mkdirs(theirs);
        mkdirs(dead);
        snprintf(subtree, sizeof subtree, "%s/codeinterp/ci-0123456789abcdef", mem);
        live = open(subtree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(live >= 0);
        assert_int_equal(flock(live, LOCK_EX | LOCK_NB), 0); /* a live supervisor's */
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(access(theirs, F_OK), 0);
        snprintf(subtree, sizeof subtree, "%s/codeinterp/ci-fedcba9876543210", mem);
        assert_int_equal(access(subtree, F_OK), -1); /* the dead one's, gone */
        snprintf(mine, sizeof mine, "%s/codeinterp/ci-%s/w7", mem, cgroup_root_instance(root));
        mkdirs(mine);
        cgroup_root_remove_own(root);
        assert_int_equal(access(mine, F_OK), -1);
        assert_int_equal(access(theirs, F_OK), 0);
        snprintf(subtree, sizeof subtree, "%s/codeinterp/ci-%s", mem, cgroup_root_instance(root));
        root = cgroup_root_free(root);
        assert_int_equal(access(subtree, F_OK), -1);
        /* A supervisor starting now leaves the live one's alone, too; once it is gone
         * (its lock released), the next start removes it. */
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(access(theirs, F_OK), 0);
        root = cgroup_root_free(root);
        close(live);
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(access(theirs, F_OK), -1);
        cgroup_root_free(root);
}

/* v2 (the unified hierarchy of the fake tree, where this process has a v2 cgroup):
 * the cap enables cpu in the workers' parent's subtree_control; without the cpu
 * controller required refuses and auto runs without the cap; off writes nothing. */
static void test_cpu_cap_v2_root(void **state) {
        char v2[PATH_MAX], memory[PATH_MAX], pids[PATH_MAX], dir[PATH_MAX * 2], buf[64], why[512];
        CgroupRoot *root = NULL;

        own(v2, memory, pids, NULL);
        if (!v2[0])
                skip();
        assert_true(snprintf(dir, sizeof dir, "%s/unified%s", fs, strcmp(v2, "/") == 0 ? "" : v2) < (int) sizeof dir);
        mkdirs(dir);
        put(dir, "cgroup.controllers", "cpu memory pids\n");
        put(dir, "cgroup.subtree_control", "memory pids\n");
        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 0, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_version(root), CGROUP_V2);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        root = cgroup_root_free(root);
        get(dir, "cgroup.subtree_control", buf, sizeof buf);
        assert_string_equal(buf, "memory pids\n");

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_REQUIRED, 50, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_cpu_percent(root), 50);
        root = cgroup_root_free(root);
        get(dir, "cgroup.subtree_control", buf, sizeof buf);
        assert_int_equal(strncmp(buf, "+cpu", 4), 0);

        put(dir, "cgroup.controllers", "memory pids\n");
        put(dir, "cgroup.subtree_control", "memory pids\n");
        assert_int_equal(cap_falls_back(50, "the cpu controller is not available", "cpu controller"), CGROUP_V2);

        /* The controller is there but cannot be enabled: a subtree_control that reads
         * fine and refuses writes (a write-sealed memfd). */
        {
                char sc[PATH_MAX * 3], target[64];
                int mfd = memfd_create("subtree_control", MFD_CLOEXEC | MFD_ALLOW_SEALING);

                assert_true(mfd >= 0);
                assert_int_equal(write(mfd, "memory pids\n", 12), 12);
                assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE), 0);
                put(dir, "cgroup.controllers", "cpu memory pids\n");
                snprintf(sc, sizeof sc, "%s/cgroup.subtree_control", dir);
                assert_int_equal(unlink(sc), 0);
                snprintf(target, sizeof target, "/proc/%d/fd/%d", (int) getpid(), mfd);
                assert_int_equal(symlink(target, sc), 0);
                cap_falls_back(50, "cannot enable cpu", "cannot enable cpu");
                close(mfd);
        }
}

/* cgroups: off with a cap: no cap, and the reason says so. */
static void test_cpu_cap_cgroups_off(void **state) {
        CgroupRoot *root = NULL;
        char why[256];

        assert_int_equal(cgroup_root_open(POLICY_CGROUPS_OFF, 20, fs, false, &root, why, sizeof why), 0);
        assert_int_equal(cgroup_root_cpu_percent(root), 0);
        assert_string_equal(cgroup_root_cpu_why(root), "cgroups: off");
        cgroup_root_free(root);
}

/* A given-back cgroup's account reset for its next worker (cgroup_account_reset()), in
 * fake directories: v1 writes 0 to the peak and takes the OOM kills so far (or, on a
 * kernel that does not count them, the failed charges) as the base; v2 writes "reset" to
 * memory.peak through a descriptor it keeps (the kernel's reset holds for reads through
 * it) and takes memory.events' oom_kill. A peak that cannot be reset is an error: such a
 * cgroup is removed, not reused. The real v1 hierarchy: test_cgroups.py. */
static void test_account_reset(void **state) {
        char v1[PATH_MAX + 8], v2[PATH_MAX + 8], buf[64];
        uint64_t base = 99;
        int dir, peak_fd = -1;

        snprintf(v1, sizeof v1, "%s/v1", fs);
        mkdirs(v1);
        dir = open(v1, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        assert_int_equal(cgroup_account_reset(dir, CGROUP_V1, &peak_fd, &base), -ENOENT);
        put(v1, "memory.max_usage_in_bytes", "734003200\n");
        put(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
        assert_int_equal(cgroup_account_reset(dir, CGROUP_V1, &peak_fd, &base), 0);
        assert_int_equal(base, 3);
        assert_int_equal(peak_fd, -1);
        get(v1, "memory.max_usage_in_bytes", buf, sizeof buf);
        assert_int_equal(buf[0], '0');
        put(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n"); /* before 4.13 */
        put(v1, "memory.failcnt", "5\n");
        assert_int_equal(cgroup_account_reset(dir, CGROUP_V1, &peak_fd, &base), 0);
        assert_int_equal(base, 5);
        close(dir);

        snprintf(v2, sizeof v2, "%s/v2", fs);
        mkdirs(v2);
        dir = open(v2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dir >= 0);
        put(v2, "memory.events", "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n");
        assert_int_equal(cgroup_account_reset(dir, CGROUP_V2, &peak_fd, &base), -ENOENT); /* no memory.peak */
        assert_int_equal(peak_fd, -1);
        put(v2, "memory.peak", "734003200\n");
        assert_int_equal(cgroup_account_reset(dir, CGROUP_V2, &peak_fd, &base), 0);
        assert_int_equal(base, 2);
        assert_true(peak_fd >= 0);
        get(v2, "memory.peak", buf, sizeof buf);
        assert_int_equal(strncmp(buf, "reset\n", 6), 0);
        /* Again, through the same descriptor. */
        {
                int kept = peak_fd;
                put(v2, "memory.events", "oom_kill 7\n");
                assert_int_equal(cgroup_account_reset(dir, CGROUP_V2, &peak_fd, &base), 0);
                assert_int_equal(peak_fd, kept);
                assert_int_equal(base, 7);
                close(peak_fd);
                peak_fd = -1;
        }
        /* A memory.peak that takes no write (kernels before 6.12): a write-sealed memfd. */
        {
                char peak[PATH_MAX * 2], target[64];
                int mfd = memfd_create("memory.peak", MFD_CLOEXEC | MFD_ALLOW_SEALING);

                assert_true(mfd >= 0);
                assert_int_equal(write(mfd, "4096\n", 5), 5);
                assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE), 0);
                snprintf(peak, sizeof peak, "%s/memory.peak", v2);
                assert_int_equal(unlink(peak), 0);
                snprintf(target, sizeof target, "/proc/%d/fd/%d", (int) getpid(), mfd);
                assert_int_equal(symlink(target, peak), 0);
                assert_int_equal(cgroup_account_reset(dir, CGROUP_V2, &peak_fd, &base), -EPERM);
                if (peak_fd >= 0)
                        close(peak_fd);
                close(mfd);
        }
        close(dir);
}

/* Every test in a fresh temporary directory, fs (setup), that teardown removes. */
#define IN_FS(test) cmocka_unit_test_setup_teardown(test, setup, teardown)
UNIT_MAIN(NULL, NULL, IN_FS(test_off_is_none), IN_FS(test_empty_fs_auto_and_required),
          IN_FS(test_failed_setup_leaves_nothing), IN_FS(test_cpu_cap_files), IN_FS(test_cpu_cap_v1_root),
          IN_FS(test_cpu_cap_v2_root), IN_FS(test_cpu_cap_cgroups_off), IN_FS(test_own_leftovers_removed_at_exit),
          IN_FS(test_account_reset))
