/* SPDX-License-Identifier: MIT */
/* The worker's seccomp filter: built here (policy_seccomp_build()) from the syscall tables
 * in policy/seccomp_tables.c, compiled to BPF and loaded.
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
 * Two parts (policy_seccomp_compile_early()/_late()). Loading the whole filter (≈ 500
 * instructions, converted and JIT-compiled by the kernel) is the dearest step of a
 * worker's last setup on the call's path. Most of it is therefore in place before the
 * call exists: the early part is the errno-mode filter in which the few syscalls still
 * needed under it (seccomp_late[]: the zygote's clones and answers, a pre-started
 * worker's ids, root, mounts, capabilities, Landlock, limits, receiving its call, the
 * late load itself) are allowed. The zygote loads it into itself once it serves and
 * every worker it clones inherits it, one program for all (if that fails, each worker
 * loads its own while it prepares). When the call
 * arrives it loads the late part: on a default of allow, exactly the rules the whole
 * filter has for those syscalls (errno mode), or the whole kill-mode filter (kill mode,
 * where everything the early part answers with an errno must kill). The kernel runs
 * every stacked filter and keeps the most restrictive verdict (between two errnos, the
 * newest filter's), so for every syscall and argument the pair decides as the whole
 * filter of the call's mode: a syscall outside seccomp_late[] gets the early part's
 * verdict (the late part allows it), one inside gets the late part's (the early part
 * allows it). tests/unit/test_seccomp.c checks this by evaluating both programs on
 * every syscall number and the conditional syscalls' argument values, and on the
 * kernel. Exec mode loads the whole filter, once, as before.
 *
 * Each syscall appears in exactly one table; policy_seccomp_build() checks that (and that
 * every number is a real x86_64 one, not a libseccomp pseudo-syscall) before adding rules,
 * because libseccomp silently lets a later unconditional rule replace earlier ones.
 *
 * What this means for the worker: everything it must do with a denied syscall happens
 * before policy_seccomp_load() - compiling the filter (memfd_create), setrlimit,
 * PR_SET_PDEATHSIG, namespace and mount setup (or, after the early part, only with the
 * syscalls in seccomp_late[]). After it, the process cannot fork (a zygote under the
 * early part clones with clone3 or clone, which seccomp_late[] lets it have until the
 * late part), exec, create sockets other than a connected AF_UNIX pair, send or receive
 * with flags or addresses, pass descriptors (sendmsg), or change its limits or ids.
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
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "policy/seccomp_tables.h"

#if !defined(__x86_64__) || defined(__ILP32__)
#error "policy/seccomp.c: the syscall tables and the x32/i386 reasoning are for x86_64 only"
#endif

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

/* ioctl(fd, request, ...): isatty() (TCGETS), os.tcgetpgrp() (TIOCGPGRP, a read),
 * os.get_terminal_size() (TIOCGWINSZ), FIONREAD, FIONBIO, and CPython's
 * os.set_inheritable() (FIONCLEX/FIOCLEX); in ascending order. TIOCSTI (pushing input
 * into a terminal) is the classic escape this shuts; no request that changes a
 * terminal is allowed (a worker has no terminal, but the filter does not rely on it). */
static const uint64_t seccomp_ioctl_requests[] = {
        TCGETS,     /* 0x5401 */
        TIOCGPGRP,  /* 0x540F */
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

/* Which syscalls' rules a part of the filter holds (see "Two parts" above). */
typedef enum SeccompPart {
        SECCOMP_WHOLE, /* everything: exec mode's filter, and the late part in kill mode */
        SECCOMP_EARLY, /* everything but seccomp_late[], which it allows */
        SECCOMP_LATE,  /* only seccomp_late[], on a default of allow */
} SeccompPart;

static bool part_has(SeccompPart part, int nr) {
        switch (part) {
        case SECCOMP_EARLY:
                return !seccomp_is_late(nr);
        case SECCOMP_LATE:
                return seccomp_is_late(nr);
        default:
                return true;
        }
}

static int seccomp_add_conditional(scmp_filter_ctx ctx, SeccompPart part, uint32_t def, uint32_t deny,
                                   uint32_t deny_ioctl) {
        int r;

        /* clone: allow (flags & (CLONE_THREAD | ns)) == CLONE_THREAD. Deny, without
         * overlapping the allow rule: CLONE_THREAD clear; or CLONE_THREAD set, the first
         * i-1 namespace flags clear and flag i set. */
        if (part_has(part, SCMP_SYS(clone))) {
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
        }

        /* prlimit64: allow new == NULL, deny new != NULL. */
        if (part_has(part, SCMP_SYS(prlimit64))) {
                r = seccomp_rule1(ctx, def, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), seccomp_cmp(2, SCMP_CMP_EQ, 0, 0));
                if (r < 0)
                        return r;
                r = seccomp_rule1(ctx, def, deny, SCMP_SYS(prlimit64), seccomp_cmp(2, SCMP_CMP_NE, 0, 0));
                if (r < 0)
                        return r;
        }

        if (part_has(part, SCMP_SYS(prctl)) &&
            (r = seccomp_add_values(ctx, def, deny, SCMP_SYS(prctl), 0, seccomp_prctl_options,
                                    ELEMENTSOF(seccomp_prctl_options), true)) < 0)
                return r;
        if (part_has(part, SCMP_SYS(ioctl)) &&
            (r = seccomp_add_values(ctx, def, deny_ioctl, SCMP_SYS(ioctl), 1, seccomp_ioctl_requests,
                                    ELEMENTSOF(seccomp_ioctl_requests), true)) < 0)
                return r;
        if (part_has(part, SCMP_SYS(socket))) {
                r = seccomp_rule1(ctx, def, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket),
                                  seccomp_cmp(0, SCMP_CMP_EQ, AF_UNIX, 0));
                if (r < 0)
                        return r;
                if ((r = seccomp_rule1(ctx, def, deny, SCMP_SYS(socket), seccomp_cmp(0, SCMP_CMP_LT, AF_UNIX, 0))) <
                            0 ||
                    (r = seccomp_rule1(ctx, def, deny, SCMP_SYS(socket), seccomp_cmp(0, SCMP_CMP_GT, AF_UNIX, 0))) < 0)
                        return r;
        }
        if (part_has(part, SCMP_SYS(socketpair)) &&
            (r = seccomp_add_values(ctx, def, deny, SCMP_SYS(socketpair), 0, seccomp_socketpair_domains,
                                    ELEMENTSOF(seccomp_socketpair_domains), true)) < 0)
                return r;
        if ((part_has(part, SCMP_SYS(sendto)) &&
             (r = seccomp_add_plain_transfer(ctx, def, deny, SCMP_SYS(sendto))) < 0) ||
            (part_has(part, SCMP_SYS(recvfrom)) &&
             (r = seccomp_add_plain_transfer(ctx, def, deny, SCMP_SYS(recvfrom))) < 0))
                return r;
        /* Never late (seccomp_tables_check()): its other values take the default action. */
        if (part_has(part, SCMP_SYS(personality)))
                return seccomp_add_values(ctx, def, deny, SCMP_SYS(personality), 0, seccomp_personality_values,
                                          ELEMENTSOF(seccomp_personality_values), false);
        return 0;
}

/* One table's syscalls that the part holds, each given action unconditionally. */
static int add_table(scmp_filter_ctx ctx, SeccompPart part, uint32_t ctx_def, uint32_t action, const int *nrs,
                     size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = part_has(part, nrs[i]) ? seccomp_rule(ctx, ctx_def, action, nrs[i], 0, NULL) : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The part's rules, on a context whose default action is ctx_def; act_deny and
 * act_deny_ioctl are the whole filter's (of the mode being built). */
static int add_rules(scmp_filter_ctx ctx, SeccompPart part, uint32_t ctx_def, uint32_t act_deny,
                     uint32_t act_deny_ioctl) {
        int r;

        if ((r = add_table(ctx, part, ctx_def, SCMP_ACT_ALLOW, seccomp_allow, seccomp_allow_count)) < 0 ||
            (r = add_table(ctx, part, ctx_def, act_deny, seccomp_deny, seccomp_deny_count)) < 0)
                return r;
        for (size_t i = 0; i < seccomp_unsupported_count; i++) {
                if (!part_has(part, seccomp_unsupported[i].nr))
                        continue;
                r = seccomp_rule(ctx, ctx_def, SCMP_ACT_ERRNO(seccomp_unsupported[i].error), seccomp_unsupported[i].nr,
                                 0, NULL);
                if (r < 0)
                        return r;
        }
        r = seccomp_add_conditional(ctx, part, ctx_def, act_deny, act_deny_ioctl);
        if (r < 0 || part != SECCOMP_EARLY)
                return r;
        /* The early part lets through what the late part decides. */
        return add_table(ctx, SECCOMP_WHOLE, ctx_def, SCMP_ACT_ALLOW, seccomp_late, seccomp_late_count);
}

static int build_part(PolicyDenyAction deny, SeccompPart part, scmp_filter_ctx *ret) {
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

        /* The late part starts from allow: it only takes back what the early one let
         * through. Its rules give the late syscalls the whole filter's verdicts. */
        uint32_t ctx_def = part == SECCOMP_LATE ? SCMP_ACT_ALLOW : def;
        scmp_filter_ctx ctx = seccomp_init(ctx_def);
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

        r = add_rules(ctx, part, ctx_def, act_deny, act_deny_ioctl);
        if (r < 0)
                goto fail;

        *ret = ctx;
        return 0;

fail:
        seccomp_release(ctx);
        return r;
}

int policy_seccomp_build(PolicyDenyAction deny, scmp_filter_ctx *ret) {
        return build_part(deny, SECCOMP_WHOLE, ret);
}

/* Export a built filter to a malloc'd BPF program; releases ctx. */
static int compile_ctx(scmp_filter_ctx ctx, struct sock_fprog *ret) {
        _cleanup_close_ int fd = -1;
        _cleanup_free_ struct sock_filter *insns = NULL;
        void *buf;
        size_t len;
        int r;

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

        r = read_fd_all(fd, (size_t) BPF_MAXINSNS * sizeof(struct sock_filter), &buf, &len);
        if (r == -EFBIG)
                return -E2BIG;
        if (r < 0)
                return r;
        insns = buf;
        if (len == 0 || len % sizeof(struct sock_filter) != 0)
                return -EBADMSG;
        size_t n = len / sizeof(struct sock_filter);

        *ret = (struct sock_fprog){
                .len = (unsigned short) n,
                .filter = TAKE_PTR(insns),
        };
        return 0;
}

static int compile_part(PolicyDenyAction deny, SeccompPart part, struct sock_fprog *ret) {
        scmp_filter_ctx ctx = NULL;
        int r;

        if (!ret)
                return -EINVAL;
        r = build_part(deny, part, &ctx);
        if (r < 0)
                return r;
        return compile_ctx(ctx, ret);
}

int policy_seccomp_compile(PolicyDenyAction deny, struct sock_fprog *ret) {
        return compile_part(deny, SECCOMP_WHOLE, ret);
}

int policy_seccomp_compile_early(struct sock_fprog *ret) {
        return compile_part(POLICY_DENY_ERRNO, SECCOMP_EARLY, ret);
}

int policy_seccomp_compile_late(PolicyDenyAction deny, struct sock_fprog *ret) {
        /* In kill mode a syscall the errno-mode early part denies must kill instead:
         * only the whole kill-mode filter says so for all of them. */
        return compile_part(deny, deny == POLICY_DENY_KILL ? SECCOMP_WHOLE : SECCOMP_LATE, ret);
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
