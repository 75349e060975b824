/* SPDX-License-Identifier: MIT */
/* The worker's seccomp tables: which syscalls are allowed unconditionally, which are
 * denied as dangerous, which are answered with a fixed errno, and which are conditional,
 * with the check that each syscall is in exactly one of them. The filter built from them,
 * its shape and the argument values of the conditional ones are in policy/seccomp.c. */
#include "policy/seccomp_tables.h"

#include <errno.h>
#include <seccomp.h>
#include <stddef.h>

#include "common/cleanup.h"

#if !defined(__x86_64__) || defined(__ILP32__)
#error "policy/seccomp_tables.c: the syscall tables are for x86_64 only"
#endif

/* ---------------------------------------------------------------------------------------
 * Allowed unconditionally: what embedded CPython 3.11 needs to start (isolated config,
 * no site), import the stdlib (including extension modules from lib-dynload and the
 * libraries they link, e.g. OpenSSL for _hashlib), do file I/O, and run threads.
 * --------------------------------------------------------------------------------------- */
const int seccomp_allow[] = {
        /* File descriptors and I/O. */
        SCMP_SYS(read),
        SCMP_SYS(write),
        SCMP_SYS(pread64),
        SCMP_SYS(pwrite64),
        SCMP_SYS(readv),
        SCMP_SYS(writev),
        SCMP_SYS(preadv),
        SCMP_SYS(pwritev),
        SCMP_SYS(preadv2),
        SCMP_SYS(pwritev2),
        SCMP_SYS(lseek),
        SCMP_SYS(close),
        SCMP_SYS(close_range),
        SCMP_SYS(dup),
        SCMP_SYS(dup2),
        SCMP_SYS(dup3),
        SCMP_SYS(fcntl),
        SCMP_SYS(flock),
        SCMP_SYS(pipe),
        SCMP_SYS(pipe2),
        SCMP_SYS(sendfile),        /* shutil.copyfile's fast path (file to file) */
        SCMP_SYS(copy_file_range), /* os.copy_file_range */

        /* Waiting on descriptors. */
        SCMP_SYS(poll),
        SCMP_SYS(ppoll),
        SCMP_SYS(select),
        SCMP_SYS(pselect6),
        SCMP_SYS(epoll_create),
        SCMP_SYS(epoll_create1),
        SCMP_SYS(epoll_ctl),
        SCMP_SYS(epoll_wait),
        SCMP_SYS(epoll_pwait),
        SCMP_SYS(eventfd2),

        /* Paths and file metadata (inside the sandbox's mount namespace). */
        SCMP_SYS(open),
        SCMP_SYS(openat),
        SCMP_SYS(creat),
        SCMP_SYS(stat),
        SCMP_SYS(fstat),
        SCMP_SYS(lstat),
        SCMP_SYS(newfstatat),
        SCMP_SYS(statx),
        SCMP_SYS(statfs),
        SCMP_SYS(fstatfs),
        SCMP_SYS(getdents64),
        SCMP_SYS(access),
        SCMP_SYS(faccessat),
        SCMP_SYS(faccessat2),
        SCMP_SYS(readlink),
        SCMP_SYS(readlinkat),
        SCMP_SYS(mkdir),
        SCMP_SYS(mkdirat),
        SCMP_SYS(rmdir),
        SCMP_SYS(unlink),
        SCMP_SYS(unlinkat),
        SCMP_SYS(rename),
        SCMP_SYS(renameat),
        SCMP_SYS(renameat2),
        SCMP_SYS(link),
        SCMP_SYS(linkat),
        SCMP_SYS(symlink),
        SCMP_SYS(symlinkat),
        SCMP_SYS(chmod),
        SCMP_SYS(fchmod),
        SCMP_SYS(fchmodat),
        /* Ownership: the kernel lets a process without CAP_CHOWN (a worker has no
         * capability) only keep a file's owner and give it a group of its own, and a
         * worker's namespace maps one uid and one gid: chown can change nothing but is
         * answered as on any host (shutil.chown, tarfile's extract, EBADF for a bad fd). */
        SCMP_SYS(chown),
        SCMP_SYS(fchown),
        SCMP_SYS(lchown),
        SCMP_SYS(fchownat),
        SCMP_SYS(truncate),
        SCMP_SYS(ftruncate),
        SCMP_SYS(fallocate),
        SCMP_SYS(fsync),
        SCMP_SYS(fdatasync),
        SCMP_SYS(utimensat),
        SCMP_SYS(umask),
        SCMP_SYS(getcwd),
        SCMP_SYS(chdir),
        SCMP_SYS(fchdir),

        /* Memory. */
        SCMP_SYS(brk),
        SCMP_SYS(mmap),
        SCMP_SYS(munmap),
        SCMP_SYS(mprotect),
        SCMP_SYS(mremap),
        SCMP_SYS(madvise),
        SCMP_SYS(msync), /* mmap.mmap.flush() */

        /* Threads (clone itself is conditional, below). */
        SCMP_SYS(futex),
        SCMP_SYS(set_robust_list),
        SCMP_SYS(set_tid_address),
        SCMP_SYS(rseq),
        SCMP_SYS(arch_prctl),
        SCMP_SYS(sched_yield),
        SCMP_SYS(gettid),
        SCMP_SYS(exit),
        SCMP_SYS(exit_group),
        SCMP_SYS(wait4),  /* no children: only ever ECHILD */
        SCMP_SYS(waitid), /* likewise */
        SCMP_SYS(restart_syscall),

        /* Signals. The worker is alone in its pid namespace, so kill/tgkill/tkill reach
         * only itself. */
        SCMP_SYS(rt_sigaction),
        SCMP_SYS(rt_sigprocmask),
        SCMP_SYS(rt_sigreturn),
        SCMP_SYS(rt_sigpending),
        SCMP_SYS(rt_sigsuspend),
        SCMP_SYS(rt_sigtimedwait),
        SCMP_SYS(sigaltstack),
        SCMP_SYS(pause),
        SCMP_SYS(kill),
        SCMP_SYS(tgkill),
        SCMP_SYS(tkill),

        /* Time (clock_gettime and gettimeofday usually go through the vDSO; the CPU-time
         * clocks of time.process_time()/thread_time() are real syscalls). */
        SCMP_SYS(clock_gettime),
        SCMP_SYS(clock_getres),
        SCMP_SYS(clock_nanosleep),
        SCMP_SYS(nanosleep),
        SCMP_SYS(gettimeofday),
        SCMP_SYS(time),
        SCMP_SYS(getitimer),
        SCMP_SYS(setitimer),
        SCMP_SYS(alarm),

        /* Identity and system information, read-only. */
        SCMP_SYS(getpid),
        SCMP_SYS(getppid),
        SCMP_SYS(getuid),
        SCMP_SYS(geteuid),
        SCMP_SYS(getgid),
        SCMP_SYS(getegid),
        SCMP_SYS(getresuid),
        SCMP_SYS(getresgid),
        SCMP_SYS(getgroups),
        SCMP_SYS(getpgrp),
        SCMP_SYS(getpgid),
        SCMP_SYS(getsid),
        SCMP_SYS(capget),
        SCMP_SYS(uname),
        SCMP_SYS(getrandom),
        SCMP_SYS(getrlimit), /* prlimit64 is conditional, below */
        SCMP_SYS(getrusage),
        SCMP_SYS(times),
        SCMP_SYS(getpriority),
        /* Lowering its own priority (os.nice, setpriority): raising one takes RLIMIT_NICE,
         * which the sandbox sets to 0, or CAP_SYS_NICE on the host; PRIO_PGRP and PRIO_USER
         * reach only the processes of the worker's own pid namespace and uid. */
        SCMP_SYS(setpriority),
        SCMP_SYS(sched_getaffinity), /* glibc's malloc sizes its arenas with it */
        SCMP_SYS(sched_getparam),
        SCMP_SYS(sched_getscheduler),
};

/* ---------------------------------------------------------------------------------------
 * Denied explicitly: EPERM in errno mode, SCMP_ACT_KILL_PROCESS in kill mode. Unlisted
 * syscalls would be denied anyway (ENOSYS); listing these makes the intent reviewable and
 * gives the more truthful "not permitted".
 * --------------------------------------------------------------------------------------- */
const int seccomp_deny[] = {
        /* Networking: the net namespace is empty, and the worker's channels to the
         * supervisor are used with read/write only (send/recv* too, so a report path that
         * uses send() instead of write() fails loudly in tests rather than in review).
         * socket, socketpair, sendto and recvfrom are conditional (below): a connected
         * pair of AF_UNIX sockets, asyncio's self-pipe, reaches nothing outside the
         * process. */
        SCMP_SYS(connect),
        SCMP_SYS(bind),
        SCMP_SYS(listen),
        SCMP_SYS(accept),
        SCMP_SYS(accept4),
        SCMP_SYS(sendmsg),
        SCMP_SYS(recvmsg),
        SCMP_SYS(sendmmsg),
        SCMP_SYS(recvmmsg),
        SCMP_SYS(shutdown),
        SCMP_SYS(getsockopt),
        SCMP_SYS(setsockopt),

        /* New programs and processes: user code runs in this one process (clone without
         * CLONE_THREAD is denied by the conditional rules). */
        SCMP_SYS(execve),
        SCMP_SYS(execveat),
        SCMP_SYS(fork),
        SCMP_SYS(vfork),

        /* Reaching into other processes (memory, descriptors, signals, comparisons). */
        SCMP_SYS(ptrace),
        SCMP_SYS(process_vm_readv),
        SCMP_SYS(process_vm_writev),
        SCMP_SYS(process_madvise),
        SCMP_SYS(process_mrelease),
        SCMP_SYS(kcmp),
        SCMP_SYS(pidfd_open),
        SCMP_SYS(pidfd_getfd),
        SCMP_SYS(pidfd_send_signal),

        /* Namespaces, mounts, root changes: the sandbox's layout is final before user code. */
        SCMP_SYS(unshare),
        SCMP_SYS(setns),
        SCMP_SYS(mount),
        SCMP_SYS(umount2),
        SCMP_SYS(pivot_root),
        SCMP_SYS(chroot),
        SCMP_SYS(fsopen),
        SCMP_SYS(fsconfig),
        SCMP_SYS(fsmount),
        SCMP_SYS(fspick),
        SCMP_SYS(move_mount),
        SCMP_SYS(open_tree),
        SCMP_SYS(mount_setattr),

        /* Kernel keyrings: kernel-global state with a long history of bugs. */
        SCMP_SYS(keyctl),
        SCMP_SYS(add_key),
        SCMP_SYS(request_key),

        /* Large kernel attack surfaces an interpreter never needs. */
        SCMP_SYS(bpf),
        SCMP_SYS(perf_event_open),
        SCMP_SYS(io_uring_setup),
        SCMP_SYS(io_uring_enter),
        SCMP_SYS(io_uring_register),
        SCMP_SYS(userfaultfd),

        /* System administration: modules, kexec, reboot, swap, accounting, quotas, the
         * kernel log, the clocks and the host's names. */
        SCMP_SYS(init_module),
        SCMP_SYS(finit_module),
        SCMP_SYS(delete_module),
        SCMP_SYS(kexec_load),
        SCMP_SYS(kexec_file_load),
        SCMP_SYS(reboot),
        SCMP_SYS(swapon),
        SCMP_SYS(swapoff),
        SCMP_SYS(acct),
        SCMP_SYS(quotactl),
        SCMP_SYS(quotactl_fd),
        SCMP_SYS(syslog),
        SCMP_SYS(lookup_dcookie),
        SCMP_SYS(settimeofday),
        SCMP_SYS(clock_settime),
        SCMP_SYS(clock_adjtime),
        SCMP_SYS(adjtimex),
        SCMP_SYS(sethostname),
        SCMP_SYS(setdomainname),
        SCMP_SYS(vhangup),

        /* x86 I/O ports and the local descriptor table. */
        SCMP_SYS(ioperm),
        SCMP_SYS(iopl),
        SCMP_SYS(modify_ldt),

        /* File handles: open files by inode handle, bypassing path-based confinement. */
        SCMP_SYS(name_to_handle_at),
        SCMP_SYS(open_by_handle_at),

        /* Identity and capabilities: the worker keeps the ids and empty capability sets
         * the sandbox gave it. */
        SCMP_SYS(setuid),
        SCMP_SYS(setgid),
        SCMP_SYS(setreuid),
        SCMP_SYS(setregid),
        SCMP_SYS(setresuid),
        SCMP_SYS(setresgid),
        SCMP_SYS(setfsuid),
        SCMP_SYS(setfsgid),
        SCMP_SYS(setgroups),
        SCMP_SYS(capset),

        /* Filesystem-wide event monitoring. */
        SCMP_SYS(fanotify_init),
        SCMP_SYS(fanotify_mark),

        /* Page migration and NUMA homing: cross-process effects, a history of bugs.
         * (mbind, set_mempolicy and get_mempolicy are answered ENOSYS below.) */
        SCMP_SYS(migrate_pages),
        SCMP_SYS(move_pages),
        SCMP_SYS(set_mempolicy_home_node),

        /* Anonymous files: memory that escapes the /tmp tmpfs size bound. */
        SCMP_SYS(memfd_create),
        SCMP_SYS(memfd_secret),

        /* Resource limits are the sandbox's; reading them is allowed (prlimit64 below). */
        SCMP_SYS(setrlimit),

        /* Further sandboxing: seccomp filters and Landlock can only tighten, but they are
         * kernel surface (cBPF loading, user notification, rulesets) nothing needs. */
        SCMP_SYS(seccomp),
        SCMP_SYS(landlock_create_ruleset),
        SCMP_SYS(landlock_add_rule),
        SCMP_SYS(landlock_restrict_self),
};

/* ---------------------------------------------------------------------------------------
 * Answered with a fixed errno in both modes (never killed): callers probe these and
 * handle exactly this errno.
 * --------------------------------------------------------------------------------------- */
const SeccompFixedErrno seccomp_unsupported[] = {
        /* Host information no namespace hides: sysinfo(2) reports the host's task count,
         * memory, load averages and uptime (found by tests/adversarial,
         * host.sysinfo_process_count). Not killed in kill mode: glibc's qsort asks
         * sysconf(_SC_PHYS_PAGES), i.e. sysinfo, and takes ENOSYS as "unknown". */
        { SCMP_SYS(sysinfo), ENOSYS },
        /* NUMA memory policy: what a kernel without NUMA answers. Allocators and OpenMP
         * runtimes probe it and fall back on ENOSYS; under seccompDenyAction kill the data
         * policy's stack was killed by an mbind() on a fresh Debian 12 (found by
         * make fresh-system-check, test_datastack.py). Still denied, never killed. */
        { SCMP_SYS(mbind), ENOSYS },
        { SCMP_SYS(set_mempolicy), ENOSYS },
        { SCMP_SYS(get_mempolicy), ENOSYS },
        /* glibc >= 2.34 tries clone3 first (pthread_create) and falls back to clone on
         * ENOSYS; clone3's flags sit behind a pointer a filter cannot read. */
        { SCMP_SYS(clone3), ENOSYS },
        /* Extended attributes: shutil.copy2/copystat/copytree list and copy them and treat
         * EOPNOTSUPP as "this filesystem has none"; ENOSYS would make them raise. */
        { SCMP_SYS(listxattr), EOPNOTSUPP },
        { SCMP_SYS(llistxattr), EOPNOTSUPP },
        { SCMP_SYS(flistxattr), EOPNOTSUPP },
        { SCMP_SYS(getxattr), EOPNOTSUPP },
        { SCMP_SYS(lgetxattr), EOPNOTSUPP },
        { SCMP_SYS(fgetxattr), EOPNOTSUPP },
        { SCMP_SYS(setxattr), EOPNOTSUPP },
        { SCMP_SYS(lsetxattr), EOPNOTSUPP },
        { SCMP_SYS(fsetxattr), EOPNOTSUPP },
        { SCMP_SYS(removexattr), EOPNOTSUPP },
        { SCMP_SYS(lremovexattr), EOPNOTSUPP },
        { SCMP_SYS(fremovexattr), EOPNOTSUPP },
        /* A socket's names: repr() of a socket (asyncio logs its self-pipe's) asks them
         * and takes an OSError as "no name"; in kill mode it would kill the worker. */
        { SCMP_SYS(getsockname), EPERM },
        { SCMP_SYS(getpeername), EPERM },
        /* What an unprivileged process is refused anyway, answered as such in both
         * modes (the stdlib's tests and shutil expect EPERM, not "no such syscall"):
         * device and fifo nodes (Landlock refuses them in /tmp too) and pipe splicing
         * (shutil falls back to read/write; splice is where Dirty Pipe lived). */
        { SCMP_SYS(mknod), EPERM },
        { SCMP_SYS(mknodat), EPERM },
        { SCMP_SYS(splice), EPERM },
        { SCMP_SYS(tee), EPERM },
        { SCMP_SYS(vmsplice), EPERM },
};

/* ---------------------------------------------------------------------------------------
 * Denied to the call (each is in one of the tables above, never in seccomp_allow[]), but
 * used under the early filter and before the late one (see policy/seccomp.c, "Two
 * parts"): by the zygote, which loads the early filter into itself once it serves, and
 * by a pre-started worker, which inherits it at its clone. The early filter allows them
 * unconditionally, the late one gives each the verdict of the whole filter.
 * --------------------------------------------------------------------------------------- */
const int seccomp_late[] = {
        /* The zygote. */
        SCMP_SYS(clone3),            /* a worker, into its namespaces (common/clone.h) */
        SCMP_SYS(clone),             /* the same where clone3 is answered ENOSYS (a runtime's profile) */
        SCMP_SYS(sendmsg),           /* a worker's pidfd and mount namespace to the supervisor */
        SCMP_SYS(pidfd_send_signal), /* a worker whose ids could not be mapped */
        /* A pre-started worker, before its call. */
        SCMP_SYS(setresuid),               /* its ids (sandbox_become()) */
        SCMP_SYS(setresgid),               /* (the same) */
        SCMP_SYS(setgroups),               /* (the same) */
        SCMP_SYS(pivot_root),              /* its minimal root */
        SCMP_SYS(umount2),                 /* the old root, detached */
        SCMP_SYS(sethostname),             /* "codeinterp" */
        SCMP_SYS(shutdown),                /* saying it is prepared (zygote.c, say_prepared) */
        SCMP_SYS(recvmsg),                 /* its call's descriptors (SCM_RIGHTS) */
        SCMP_SYS(prctl),                   /* PR_SET_PDEATHSIG, then PR_SET_NO_NEW_PRIVS */
        SCMP_SYS(mount),                   /* its root, /tmp; for the call, /tmp's size and /inputs */
        SCMP_SYS(move_mount),              /* attaching the supervisor's /outputs tmpfs */
        SCMP_SYS(capset),                  /* clearing the capability sets */
        SCMP_SYS(landlock_create_ruleset), /* its ruleset, built ahead */
        SCMP_SYS(landlock_add_rule),       /* /outputs, for the call */
        SCMP_SYS(landlock_restrict_self),  /* applied, for the call */
        SCMP_SYS(prlimit64),               /* setting the call's limits */
        SCMP_SYS(seccomp),                 /* loading the late filter itself */
};

const size_t seccomp_allow_count = ELEMENTSOF(seccomp_allow);
const size_t seccomp_deny_count = ELEMENTSOF(seccomp_deny);
const size_t seccomp_unsupported_count = ELEMENTSOF(seccomp_unsupported);
const size_t seccomp_late_count = ELEMENTSOF(seccomp_late);

/* ------------------------------------------------------------------------------------- */

static const int seccomp_conditional[] = {
        SCMP_SYS(clone),  SCMP_SYS(prlimit64),  SCMP_SYS(prctl),  SCMP_SYS(ioctl),    SCMP_SYS(personality),
        SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(sendto), SCMP_SYS(recvfrom),
};

static bool listed(const int *nrs, size_t n, int nr) {
        for (size_t i = 0; i < n; i++)
                if (nrs[i] == nr)
                        return true;
        return false;
}

int seccomp_tables_check(void) {
        int all[ELEMENTSOF(seccomp_allow) + ELEMENTSOF(seccomp_deny) + ELEMENTSOF(seccomp_unsupported) +
                ELEMENTSOF(seccomp_conditional)];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(seccomp_allow); i++)
                all[n++] = seccomp_allow[i];
        for (size_t i = 0; i < ELEMENTSOF(seccomp_deny); i++)
                all[n++] = seccomp_deny[i];
        for (size_t i = 0; i < ELEMENTSOF(seccomp_unsupported); i++)
                all[n++] = seccomp_unsupported[i].nr;
        for (size_t i = 0; i < ELEMENTSOF(seccomp_conditional); i++)
                all[n++] = seccomp_conditional[i];

        for (size_t i = 0; i < n; i++) {
                if (all[i] < 0) /* a pseudo-syscall number: not an x86_64 syscall */
                        return -EINVAL;
                for (size_t j = i + 1; j < n; j++)
                        if (all[i] == all[j])
                                return -ENOTUNIQ;
        }
        /* A late syscall is one the call is denied (for some arguments at least): in a
         * table, never the allow table, listed once; not personality, whose other values
         * rely on the default action, which the late filter (default allow) does not
         * have. Being in a table, its rules give it the whole filter's verdicts. */
        for (size_t i = 0; i < ELEMENTSOF(seccomp_late); i++) {
                int nr = seccomp_late[i];
                if (!listed(all, n, nr) || listed(seccomp_allow, ELEMENTSOF(seccomp_allow), nr) ||
                    nr == SCMP_SYS(personality))
                        return -EINVAL;
                if (listed(seccomp_late + i + 1, ELEMENTSOF(seccomp_late) - i - 1, nr))
                        return -ENOTUNIQ;
        }
        return 0;
}

bool seccomp_is_late(int nr) {
        return listed(seccomp_late, ELEMENTSOF(seccomp_late), nr);
}
