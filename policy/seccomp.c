/* SPDX-License-Identifier: MIT */
/* The worker's seccomp allow-list.
 *
 * Shape of the filter (x86_64 only):
 *
 *   - The native architecture (AUDIT_ARCH_X86_64) is the only one in the filter. Any other
 *     audit arch (i386 through `int $0x80`, or any other) gets the bad-arch action, which
 *     is always SCMP_ACT_KILL_PROCESS. The x32 ABI shares AUDIT_ARCH_X86_64 and is told
 *     apart by __X32_SYSCALL_BIT (0x40000000) in the syscall number: libseccomp 2.5.4 emits,
 *     right after the arch check of an x86_64 filter without x32, "if nr >= 0x40000000 and
 *     nr != 0xffffffff: bad-arch action", so x32 syscalls are killed too (nr == -1 is the
 *     number a tracer uses to skip a syscall; it falls through to the default action).
 *     tests/unit/test_seccomp.c checks both paths, on the running kernel and (for kernels
 *     without ia32 emulation, where `int $0x80` faults before seccomp) by evaluating the
 *     compiled BPF on synthetic seccomp_data.
 *   - seccomp_allow[]: allowed unconditionally.
 *   - The conditional syscalls (clone, prctl, prlimit64, ioctl, personality, socketpair,
 *     sendto, recvfrom): allowed for the listed argument values; the rest is denied (see
 *     seccomp_add_conditional()).
 *   - seccomp_deny[]: explicitly dangerous; EPERM, or the kill action in kill mode.
 *   - seccomp_unsupported[]: answered with a fixed errno in BOTH modes, because glibc or
 *     the stdlib probes them and handles exactly that errno (clone3 -> ENOSYS makes glibc
 *     fall back to clone, whose flags the filter can see; xattrs -> EOPNOTSUPP makes
 *     shutil.copy2 skip extended attributes).
 *   - Everything else: the default action, ENOSYS (errno mode: "this kernel does not have
 *     it", the answer every libc fallback understands) or kill (kill mode).
 *
 * Each syscall appears in exactly one table; policy_seccomp_build() checks that (and that
 * every number is a real x86_64 one, not a libseccomp pseudo-syscall) before adding rules,
 * because libseccomp silently lets a later unconditional rule replace earlier ones.
 *
 * What this means for the worker: everything it must do with a denied syscall happens
 * before policy_seccomp_load() - compiling the filter (memfd_create), setrlimit,
 * PR_SET_PDEATHSIG, namespace and mount setup. After it, the process cannot fork (so a
 * zygote must load the filter in each cloned worker, never in itself), exec, create
 * sockets other than a connected AF_UNIX pair, send or receive with flags or
 * addresses, pass descriptors (sendmsg), or change its limits or ids.
 *
 * Not set here: no_new_privs. The worker sets PR_SET_NO_NEW_PRIVS itself before calling
 * policy_seccomp_load(), and the filter is loaded with the seccomp(2) syscall rather than
 * seccomp_load(), so SCMP_FLTATR_CTL_NNP is 0 (it would only matter for seccomp_load()).
 */
#include "policy/seccomp.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"

#if !defined(__x86_64__) || defined(__ILP32__)
#error "policy/seccomp.c: the syscall tables and the x32/i386 reasoning are for x86_64 only"
#endif

/* ---------------------------------------------------------------------------------------
 * Allowed unconditionally: what embedded CPython 3.11 needs to start (isolated config,
 * no site), import the stdlib (including extension modules from lib-dynload and the
 * libraries they link, e.g. OpenSSL for _hashlib), do file I/O, and run threads.
 * --------------------------------------------------------------------------------------- */
static const int seccomp_allow[] = {
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
        SCMP_SYS(sched_getaffinity), /* glibc's malloc sizes its arenas with it */
        SCMP_SYS(sched_getparam),
        SCMP_SYS(sched_getscheduler),
};

/* ---------------------------------------------------------------------------------------
 * Denied explicitly: EPERM in errno mode, SCMP_ACT_KILL_PROCESS in kill mode. Unlisted
 * syscalls would be denied anyway (ENOSYS); listing these makes the intent reviewable and
 * gives the more truthful "not permitted".
 * --------------------------------------------------------------------------------------- */
static const int seccomp_deny[] = {
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

        /* Ownership: one uid in the sandbox, so chown can only fail or mislead. */
        SCMP_SYS(chown),
        SCMP_SYS(fchown),
        SCMP_SYS(lchown),
        SCMP_SYS(fchownat),

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
typedef struct SeccompFixedErrno {
        int nr;
        int error;
} SeccompFixedErrno;

static const SeccompFixedErrno seccomp_unsupported[] = {
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
         * device and fifo nodes (Landlock refuses them in /tmp too), a higher or lower
         * scheduling priority, and pipe splicing (shutil falls back to read/write). */
        { SCMP_SYS(mknod), EPERM },
        { SCMP_SYS(mknodat), EPERM },
        { SCMP_SYS(setpriority), EPERM },
        { SCMP_SYS(splice), EPERM },
        { SCMP_SYS(tee), EPERM },
        { SCMP_SYS(vmsplice), EPERM },
};

/* ---------------------------------------------------------------------------------------
 * Allowed only for these argument values (compared as full 64-bit registers, so a value
 * with high garbage bits that the kernel would truncate is not allowed). Other values:
 * EPERM (ioctl: ENOTTY, "not a request this descriptor supports", which callers treat as
 * unsupported) or kill in kill mode. Each list must be sorted and free of duplicates.
 * --------------------------------------------------------------------------------------- */

/* prctl(option, ...): naming threads and read-only queries. Everything else (dumpable,
 * seccomp, no_new_privs, PR_SET_MM, PR_SET_PDEATHSIG - nothing in the stdlib sets a
 * parent-death signal - ...) is denied. */
static const uint64_t seccomp_prctl_options[] = {
        PR_GET_DUMPABLE,     /* 3 */
        PR_SET_NAME,         /* 15 */
        PR_GET_NAME,         /* 16 */
        PR_GET_SECCOMP,      /* 21 */
        PR_CAPBSET_READ,     /* 23 */
        PR_GET_NO_NEW_PRIVS, /* 39 */
};

/* ioctl(fd, request, ...): isatty() (TCGETS), os.get_terminal_size() (TIOCGWINSZ),
 * FIONREAD, FIONBIO, and CPython's os.set_inheritable() (FIONCLEX/FIOCLEX). TIOCSTI
 * (pushing input into a terminal) is the classic escape this shuts. */
static const uint64_t seccomp_ioctl_requests[] = {
        TCGETS,     /* 0x5401 */
        TIOCGWINSZ, /* 0x5413 */
        FIONREAD,   /* 0x541B */
        FIONBIO,    /* 0x5421 */
        FIONCLEX,   /* 0x5450 */
        FIOCLEX,    /* 0x5451 */
};

/* personality(persona): PER_LINUX and the 0xffffffff query only. The complement of
 * {0, 0xffffffff} cannot be written as a few non-overlapping single-comparison rules,
 * so other values get the default action (ENOSYS, or kill), not EPERM. */
static const uint64_t seccomp_personality_values[] = {
        0x00000000, /* PER_LINUX */
        0xffffffff, /* query */
};

/* clone(flags, ...): threads only. Allowed when CLONE_THREAD is set and none of the
 * namespace flags are (the kernel would refuse most of those combinations anyway; this
 * does not depend on it). fork() (glibc: clone with SIGCHLD), vfork-style clones and
 * posix_spawn are denied. */
static const uint64_t seccomp_clone_namespace_flags[] = {
        CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
};

/* prlimit64(pid, resource, new, old): reading only, i.e. new == NULL. */

/* socket(domain, ...): EPERM for AF_UNIX in both modes, the deny action for every other
 * family. glibc asks nscd's socket first on every user and group lookup (pwd, grp,
 * Path.owner()), whatever nsswitch.conf says, and goes on to the files on failure; in
 * kill mode that lookup would kill the worker. An AF_UNIX socket could reach nothing
 * here anyway (no socket file in the root, connect denied, an empty net namespace for
 * abstract names), and it is still refused. */

/* socketpair(domain, ...): AF_UNIX only, two connected ends inside the worker. */
static const uint64_t seccomp_socketpair_domains[] = {
        AF_UNIX, /* 1 */
};

/* sendto(fd, buf, len, flags, addr, addrlen) and recvfrom(..., flags, addr, addrlen):
 * send() and recv() on such a pair, i.e. flags == 0 and no address; an address would
 * name a destination, which no descriptor of the worker can reach anyway. */

/* ------------------------------------------------------------------------------------- */

static const int seccomp_conditional[] = {
        SCMP_SYS(clone),  SCMP_SYS(prlimit64),  SCMP_SYS(prctl),  SCMP_SYS(ioctl),    SCMP_SYS(personality),
        SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(sendto), SCMP_SYS(recvfrom),
};

static int seccomp_tables_check(void) {
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
        return 0;
}

/* libseccomp refuses (-EACCES) a rule whose action equals the default action; such a rule
 * would change nothing, so skip it. */
static int seccomp_rule(scmp_filter_ctx ctx, uint32_t def, uint32_t action, int nr, unsigned n,
                        const struct scmp_arg_cmp *cmp) {
        if (action == def)
                return 0;
        return seccomp_rule_add_exact_array(ctx, action, nr, n, cmp);
}

/* Designated initialisers: libseccomp's SCMP_CMP() leaves datum_b implicit, which clang's
 * -Wmissing-field-initializers reports. For MASKED_EQ, a is the mask and b the value. */
static struct scmp_arg_cmp seccomp_cmp(unsigned arg, enum scmp_compare op, uint64_t a, uint64_t b) {
        return (struct scmp_arg_cmp){ .arg = arg, .op = op, .datum_a = a, .datum_b = b };
}

static int seccomp_rule1(scmp_filter_ctx ctx, uint32_t def, uint32_t action, int nr, struct scmp_arg_cmp cmp) {
        return seccomp_rule(ctx, def, action, nr, 1, &cmp);
}

/* Give `action` to every value of argument `arg` in [lo, hi] (1 <= lo <= hi < UINT64_MAX),
 * as aligned power-of-two blocks, each one MASKED_EQ rule. */
static int seccomp_add_range(scmp_filter_ctx ctx, uint32_t def, uint32_t action, int nr, unsigned arg, uint64_t lo,
                             uint64_t hi) {
        while (lo <= hi) {
                uint64_t size = lo & -lo; /* largest block aligned at lo */
                while (size > hi - lo + 1)
                        size >>= 1;
                int r = seccomp_rule1(ctx, def, action, nr, seccomp_cmp(arg, SCMP_CMP_MASKED_EQ, ~(size - 1), lo));
                if (r < 0)
                        return r;
                lo += size;
        }
        return 0;
}

/* Allow syscall `nr` when argument `arg` equals one of `allowed` (sorted, distinct) and
 * give `deny` to every other value. libseccomp does not define which rule wins when rules
 * with different actions match the same call (libseccomp issues #118, #148), so the deny
 * rules cover exactly the complement and never overlap an allow rule: "< first",
 * "> last", and each gap as aligned blocks. When `deny` equals the default action the
 * deny rules are unnecessary and skipped. */
static int seccomp_add_values(scmp_filter_ctx ctx, uint32_t def, uint32_t deny, int nr, unsigned arg,
                              const uint64_t *allowed, size_t n, bool deny_complement) {
        int r;

        for (size_t i = 0; i < n; i++) {
                if (i > 0 && allowed[i] <= allowed[i - 1])
                        return -EINVAL;
                r = seccomp_rule1(ctx, def, SCMP_ACT_ALLOW, nr, seccomp_cmp(arg, SCMP_CMP_EQ, allowed[i], 0));
                if (r < 0)
                        return r;
        }
        if (!deny_complement || deny == def || n == 0)
                return 0;

        if (allowed[0] > 0) {
                r = seccomp_rule1(ctx, def, deny, nr, seccomp_cmp(arg, SCMP_CMP_LT, allowed[0], 0));
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i + 1 < n; i++)
                if (allowed[i] + 1 < allowed[i + 1]) {
                        r = seccomp_add_range(ctx, def, deny, nr, arg, allowed[i] + 1, allowed[i + 1] - 1);
                        if (r < 0)
                                return r;
                }
        if (allowed[n - 1] < UINT64_MAX) {
                r = seccomp_rule1(ctx, def, deny, nr, seccomp_cmp(arg, SCMP_CMP_GT, allowed[n - 1], 0));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Allow nr when arguments 3 (flags) and 4 (address) are both 0; deny the rest, as two
 * rules that overlap neither the allow rule nor each other. */
static int seccomp_add_plain_transfer(scmp_filter_ctx ctx, uint32_t def, uint32_t deny, int nr) {
        struct scmp_arg_cmp plain[] = { seccomp_cmp(3, SCMP_CMP_EQ, 0, 0), seccomp_cmp(4, SCMP_CMP_EQ, 0, 0) };
        struct scmp_arg_cmp addressed[] = { seccomp_cmp(3, SCMP_CMP_EQ, 0, 0), seccomp_cmp(4, SCMP_CMP_NE, 0, 0) };
        int r;

        r = seccomp_rule(ctx, def, SCMP_ACT_ALLOW, nr, ELEMENTSOF(plain), plain);
        if (r < 0)
                return r;
        r = seccomp_rule1(ctx, def, deny, nr, seccomp_cmp(3, SCMP_CMP_NE, 0, 0));
        if (r < 0)
                return r;
        return seccomp_rule(ctx, def, deny, nr, ELEMENTSOF(addressed), addressed);
}

static int seccomp_add_conditional(scmp_filter_ctx ctx, uint32_t def, uint32_t deny, uint32_t deny_ioctl) {
        int r;

        /* clone: allow (flags & (CLONE_THREAD | ns)) == CLONE_THREAD. Deny, without
         * overlapping the allow rule: CLONE_THREAD clear; or CLONE_THREAD set, the first
         * i-1 namespace flags clear and flag i set. */
        uint64_t mask = CLONE_THREAD;
        for (size_t i = 0; i < ELEMENTSOF(seccomp_clone_namespace_flags); i++)
                mask |= seccomp_clone_namespace_flags[i];
        r = seccomp_rule1(ctx, def, SCMP_ACT_ALLOW, SCMP_SYS(clone),
                          seccomp_cmp(0, SCMP_CMP_MASKED_EQ, mask, CLONE_THREAD));
        if (r < 0)
                return r;
        r = seccomp_rule1(ctx, def, deny, SCMP_SYS(clone), seccomp_cmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        if (r < 0)
                return r;
        uint64_t seen = CLONE_THREAD;
        for (size_t i = 0; i < ELEMENTSOF(seccomp_clone_namespace_flags); i++) {
                uint64_t f = seccomp_clone_namespace_flags[i];
                r = seccomp_rule1(ctx, def, deny, SCMP_SYS(clone),
                                  seccomp_cmp(0, SCMP_CMP_MASKED_EQ, seen | f, CLONE_THREAD | f));
                if (r < 0)
                        return r;
                seen |= f;
        }

        /* prlimit64: allow new == NULL, deny new != NULL. */
        r = seccomp_rule1(ctx, def, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), seccomp_cmp(2, SCMP_CMP_EQ, 0, 0));
        if (r < 0)
                return r;
        r = seccomp_rule1(ctx, def, deny, SCMP_SYS(prlimit64), seccomp_cmp(2, SCMP_CMP_NE, 0, 0));
        if (r < 0)
                return r;

        r = seccomp_add_values(ctx, def, deny, SCMP_SYS(prctl), 0, seccomp_prctl_options,
                               ELEMENTSOF(seccomp_prctl_options), true);
        if (r < 0)
                return r;
        r = seccomp_add_values(ctx, def, deny_ioctl, SCMP_SYS(ioctl), 1, seccomp_ioctl_requests,
                               ELEMENTSOF(seccomp_ioctl_requests), true);
        if (r < 0)
                return r;
        r = seccomp_rule1(ctx, def, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), seccomp_cmp(0, SCMP_CMP_EQ, AF_UNIX, 0));
        if (r < 0)
                return r;
        if ((r = seccomp_rule1(ctx, def, deny, SCMP_SYS(socket), seccomp_cmp(0, SCMP_CMP_LT, AF_UNIX, 0))) < 0 ||
            (r = seccomp_rule1(ctx, def, deny, SCMP_SYS(socket), seccomp_cmp(0, SCMP_CMP_GT, AF_UNIX, 0))) < 0)
                return r;
        r = seccomp_add_values(ctx, def, deny, SCMP_SYS(socketpair), 0, seccomp_socketpair_domains,
                               ELEMENTSOF(seccomp_socketpair_domains), true);
        if (r < 0)
                return r;
        if ((r = seccomp_add_plain_transfer(ctx, def, deny, SCMP_SYS(sendto))) < 0 ||
            (r = seccomp_add_plain_transfer(ctx, def, deny, SCMP_SYS(recvfrom))) < 0)
                return r;
        return seccomp_add_values(ctx, def, deny, SCMP_SYS(personality), 0, seccomp_personality_values,
                                  ELEMENTSOF(seccomp_personality_values), false);
}

int policy_seccomp_build(PolicyDenyAction deny, scmp_filter_ctx *ret) {
        uint32_t def, act_deny, act_deny_ioctl;
        int r;

        if (!ret)
                return -EINVAL;

        r = seccomp_tables_check();
        if (r < 0)
                return r;

        switch (deny) {
        case POLICY_DENY_ERRNO:
                def = SCMP_ACT_ERRNO(ENOSYS);
                act_deny = SCMP_ACT_ERRNO(EPERM);
                act_deny_ioctl = SCMP_ACT_ERRNO(ENOTTY);
                break;
        case POLICY_DENY_KILL:
                def = act_deny = act_deny_ioctl = SCMP_ACT_KILL_PROCESS;
                break;
        default:
                return -EINVAL;
        }

        scmp_filter_ctx ctx = seccomp_init(def);
        if (!ctx)
                return -ENOMEM;

        /* Only the native arch is in the filter (seccomp_init adds it); everything else,
         * including x32 numbers on the x86_64 arch, is killed regardless of mode. */
        if (seccomp_arch_native() != SCMP_ARCH_X86_64) {
                r = -EOPNOTSUPP;
                goto fail;
        }
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                goto fail;
        /* The caller sets no_new_privs itself and loads with seccomp(2). */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                goto fail;
        /* Binary search over syscall numbers instead of a linear chain of ~150 compares. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r < 0)
                goto fail;

        for (size_t i = 0; i < ELEMENTSOF(seccomp_allow); i++) {
                r = seccomp_rule(ctx, def, SCMP_ACT_ALLOW, seccomp_allow[i], 0, NULL);
                if (r < 0)
                        goto fail;
        }
        for (size_t i = 0; i < ELEMENTSOF(seccomp_deny); i++) {
                r = seccomp_rule(ctx, def, act_deny, seccomp_deny[i], 0, NULL);
                if (r < 0)
                        goto fail;
        }
        for (size_t i = 0; i < ELEMENTSOF(seccomp_unsupported); i++) {
                r = seccomp_rule(ctx, def, SCMP_ACT_ERRNO(seccomp_unsupported[i].error), seccomp_unsupported[i].nr, 0,
                                 NULL);
                if (r < 0)
                        goto fail;
        }
        r = seccomp_add_conditional(ctx, def, act_deny, act_deny_ioctl);
        if (r < 0)
                goto fail;

        *ret = ctx;
        return 0;

fail:
        seccomp_release(ctx);
        return r;
}

int policy_seccomp_compile(PolicyDenyAction deny, struct sock_fprog *ret) {
        scmp_filter_ctx ctx = NULL;
        _cleanup_close_ int fd = -1;
        _cleanup_free_ struct sock_filter *insns = NULL;
        struct stat st;
        int r;

        if (!ret)
                return -EINVAL;

        r = policy_seccomp_build(deny, &ctx);
        if (r < 0)
                return r;

        fd = memfd_create("codeinterp-seccomp-bpf", MFD_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                seccomp_release(ctx);
                return r;
        }
        r = seccomp_export_bpf(ctx, fd);
        seccomp_release(ctx);
        if (r < 0)
                return r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0)
                return -EBADMSG;
        size_t n = (size_t) st.st_size / sizeof(struct sock_filter);
        if (n > BPF_MAXINSNS)
                return -E2BIG;

        insns = malloc((size_t) st.st_size);
        if (!insns)
                return -ENOMEM;
        for (size_t done = 0; done < (size_t) st.st_size;) {
                ssize_t k = pread(fd, (char *) insns + done, (size_t) st.st_size - done, (off_t) done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                done += (size_t) k;
        }

        *ret = (struct sock_fprog){
                .len = (unsigned short) n,
                .filter = TAKE_PTR(insns),
        };
        return 0;
}

void policy_seccomp_fprog_free(struct sock_fprog *p) {
        if (!p)
                return;
        free(p->filter);
        p->filter = NULL;
        p->len = 0;
}

int policy_seccomp_load(const struct sock_fprog *p) {
        if (!p || !p->filter || p->len == 0)
                return -EINVAL;

        /* TSYNC: should any other thread exist, it gets the filter too (or the load fails),
         * instead of staying unfiltered. The kernel refuses with EACCES unless
         * no_new_privs is set (or the caller has CAP_SYS_ADMIN). */
        long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, p);
        if (r < 0)
                return -errno;
        if (r > 0)
                return -EBUSY; /* r is the id of a thread that could not be synchronised */
        return 0;
}
