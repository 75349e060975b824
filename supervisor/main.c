/* SPDX-License-Identifier: MIT */
/* codeinterpd: flags, the listening socket (a path, or systemd socket activation),
 * sd_notify, signals. Everything else lives in the library. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/sched.h>
#include <sched.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "common/cleanup.h"
#include "common/clone.h"
#include "common/log.h"
#include "common/userns.h"
#include "common/util.h"
#include "policy/policy.h"
#include "policy/seccomp.h"
#include "supervisor/artifacts.h"
#include "supervisor/cgroup.h"
#include "supervisor/host_check.h"
#include "supervisor/id_leases.h"
#include "supervisor/worker_ids.h"
#include "supervisor/protocol.h"
#include "supervisor/scheduler.h"
#include "supervisor/self_check.h"
#include "supervisor/server.h"
#include "contract/runtime.h"
#include "common/landlock.h"

#ifndef CODEINTERP_WORKER_PATH
#error "CODEINTERP_WORKER_PATH (the installed codeinterp-worker) comes from cmake/install.cmake"
#endif

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

#define SHUTDOWN_GRACE_USEC (5 * 1000000ULL)
/* How often the idle exit looks whether the supervisor is unused. */
#define IDLE_CHECK_USEC (250 * 1000ULL)

static const char *arg_socket = NULL;
static const char *arg_policy = NULL;
static const char *arg_worker = NULL;
static bool arg_check = false;
static bool arg_check_policy = false;
static bool arg_self_check = true;
static const char *arg_cgroup_fs = "/sys/fs/cgroup";
static const char *arg_lease_dir = NULL; /* --lease-dir, else $CODEINTERP_LEASE_DIR, else the default */
/* The host-wide leases of the workers' host ids (root only): held until exit. */
static IdLeases *leases = NULL;

static Policy policy; /* as loaded at start; the server holds the current one */
static Server *server = NULL;
static bool socket_created = false;
static bool socket_activated = false;
static uint64_t shutdown_started = 0;
static uint64_t unused_since = 0; /* CLOCK_MONOTONIC usec of the first check that found it unused; 0: in use */
static int exit_status = 0;       /* once the loop ends: 1 when the self-check failed */

static void help(void) {
        printf("Usage: codeinterpd [OPTIONS]\n"
               "\n"
               "Run untrusted Python calculations in fresh, isolated workers, for clients on a Unix socket.\n"
               "\n"
               "  --socket PATH     listen on PATH (created 0600, or 0660 with the policy's socketGroup);\n"
               "                    without it, take the socket from systemd socket activation\n"
               "  --policy FILE     load the YAML policy FILE (default: the built-in reviewed profile)\n"
               "  --worker PATH     the codeinterp-worker binary (default: next to codeinterpd if there,\n"
               "                    else " CODEINTERP_WORKER_PATH ")\n"
               "  --check-config    load the policy, check that this host can run workers (root or\n"
               "                    rootless, namespaces, seccomp, the Python standard library, the\n"
               "                    policy's pythonPackages), then run the self-check: one worker\n"
               "                    through the path every call takes; print, exit 0, or 1 when a\n"
               "                    call would fail\n"
               "  --check-policy    load and validate the --policy FILE as a reload would, print its\n"
               "                    sha256, exit 0 (2: invalid; the unit's ExecReload= runs it first)\n"
               "  --no-self-check   serve without the start-up self-check (to look into a host where\n"
               "                    it fails: calls then fail as they would, status says why)\n"
               "  --cgroup-fs PATH  where the cgroup filesystem is mounted (default /sys/fs/cgroup)\n"
               "  --lease-dir PATH  where supervisors on this host lease the workers' host ids\n"
               "                    (default $CODEINTERP_LEASE_DIR, else " ID_LEASES_DIR_DEFAULT ";\n"
               "                    root only)\n"
               "  -v, --verbose     log debug messages\n"
               "  -h, --help        show this help\n"
               "      --version     show the version\n"
               "\n"
               "As root, each worker's user namespace maps the policy's workerUid/workerGid. Started by\n"
               "another user (rootless; needs unprivileged user namespaces), workers map that user's\n"
               "own uid and gid instead, and cgroups work only where delegated (docs/security.md).\n"
               "Before it serves (and says READY=1) it runs the self-check; if a call would fail, it\n"
               "logs why and exits 1.\n"
               "SIGTERM or SIGINT: stop accepting, cancel every call (running workers are killed and\n"
               "their callers get outcome \"cancelled\"), remove the socket it created, exit 0.\n"
               "SIGHUP (systemctl reload): read the --policy FILE again; new calls get the new policy,\n"
               "queued and running calls keep theirs; an invalid file keeps the old policy (logged).\n"
               "Under systemd: sd_notify READY=1, RELOADING=1, STOPPING=1, and WATCHDOG=1 at half of\n"
               "WatchdogSec; with a socket from systemd and the policy's idleExitSeconds, exit 0 when\n"
               "unused that long (systemd starts it again on the next connection).\n"
               "Protocol: docs/protocol.md. Policy keys: docs/policy.md.\n");
}

static int parse_argv(int argc, char **argv) {
        enum {
                ARG_SOCKET = 0x100,
                ARG_POLICY,
                ARG_WORKER,
                ARG_CHECK,
                ARG_CHECK_POLICY,
                ARG_NO_SELF_CHECK,
                ARG_VERSION,
                ARG_CGROUP_FS,
                ARG_LEASE_DIR,
        };
        static const struct option options[] = {
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "policy", required_argument, NULL, ARG_POLICY },
                { "worker", required_argument, NULL, ARG_WORKER },
                { "check-config", no_argument, NULL, ARG_CHECK },
                { "check-policy", no_argument, NULL, ARG_CHECK_POLICY },
                { "no-self-check", no_argument, NULL, ARG_NO_SELF_CHECK },
                { "cgroup-fs", required_argument, NULL, ARG_CGROUP_FS },
                { "lease-dir", required_argument, NULL, ARG_LEASE_DIR },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "hv", options, NULL)) >= 0)
                switch (c) {
                case ARG_SOCKET:
                        arg_socket = optarg;
                        break;
                case ARG_POLICY:
                        arg_policy = optarg;
                        break;
                case ARG_WORKER:
                        arg_worker = optarg;
                        break;
                case ARG_CHECK:
                        arg_check = true;
                        break;
                case ARG_CHECK_POLICY:
                        arg_check_policy = true;
                        break;
                case ARG_NO_SELF_CHECK:
                        arg_self_check = false;
                        break;
                case ARG_CGROUP_FS:
                        arg_cgroup_fs = optarg;
                        break;
                case ARG_LEASE_DIR:
                        arg_lease_dir = optarg;
                        break;
                case 'v':
                        log_set_max_level(LOG_DEBUG);
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("codeinterpd %s (Python %s)\n", CODEINTERP_VERSION, CODEINTERP_PY_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }
        if (!arg_lease_dir)
                arg_lease_dir = getenv("CODEINTERP_LEASE_DIR") ?: ID_LEASES_DIR_DEFAULT;
        if (optind < argc) {
                log_error("Unexpected argument \"%s\"; see --help", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

/* A sealed in-memory copy of the worker binary: exec'd by fd, so neither a path the
 * worker uid cannot traverse nor a replaced file on disk can change what runs. */
static int load_worker(int *ret_fd) {
        char self[PATH_MAX], path[PATH_MAX + 32];
        _cleanup_close_ int src = -1, mfd = -1;
        ssize_t n;

        if (arg_worker)
                snprintf(path, sizeof path, "%s", arg_worker);
        else {
                n = readlink("/proc/self/exe", self, sizeof self - 1);
                if (n < 0)
                        return log_error_errno(errno, "Cannot find my own executable: %m");
                self[n] = 0;
                /* Next to codeinterpd in a build tree (and only there: an installed
                 * codeinterpd has none next to it), otherwise the installed one. A build
                 * tree's supervisor never picks up an installed worker of another version. */
                snprintf(path, sizeof path, "%s/codeinterp-worker", dirname(self));
                if (access(path, F_OK) < 0 && errno == ENOENT)
                        snprintf(path, sizeof path, "%s", CODEINTERP_WORKER_PATH);
        }
        src = open(path, O_RDONLY | O_CLOEXEC);
        if (src < 0)
                return log_error_errno(errno, "Cannot open the worker binary \"%s\": %m", path);
        mfd = memfd_create("codeinterp-worker", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
        if (mfd < 0 && errno == EINVAL)
                mfd = memfd_create("codeinterp-worker", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (mfd < 0)
                return log_error_errno(errno, "memfd_create failed: %m");
        for (;;) {
                char buf[65536];
                n = read(src, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return log_error_errno(errno, "Reading \"%s\" failed: %m", path);
                if (n == 0)
                        break;
                if (write_full(mfd, buf, (size_t) n) < 0)
                        return log_error_errno(errno, "Copying the worker failed: %m");
        }
        if (fchmod(mfd, 0555) < 0 ||
            fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return log_error_errno(errno, "Sealing the worker copy failed: %m");
        *ret_fd = TAKE_FD(mfd);
        return 0;
}

/* 0 when path is free, or holds a stale socket file (from a dead supervisor); -errno
 * (logged) when it is something else or a live supervisor listens there. */
static int socket_path_free(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct stat st;

        if (lstat(path, &st) < 0)
                return 0;
        if (!S_ISSOCK(st.st_mode))
                return log_error_errno(EEXIST, "\"%s\" exists and is not a socket", path);
        strcpy(sa.sun_path, path);
        if (probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof sa) == 0)
                return log_error_errno(EADDRINUSE, "Another supervisor is listening on \"%s\"", path);
        return 0;
}

/* Socket activation: take systemd's listening socket (*ret_fd). With --socket: check
 * the path (a live supervisor there is refused, a stale socket file is replaced) and
 * leave *ret_fd at -1: the socket is made by bind_socket() once the self-check passed,
 * so that its path appearing means the supervisor serves. */
static int take_socket(int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        int n;

        *ret_fd = -1;
        if (!arg_socket) {
                n = sd_listen_fds(1);
                if (n < 0)
                        return log_error_errno(n, "Reading LISTEN_FDS failed: %m");
                if (n != 1)
                        return log_error_errno(EINVAL, "No --socket given and %d sockets passed by systemd (need 1)",
                                               n);
                if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0)
                        return log_error_errno(EINVAL,
                                               "The socket passed by systemd is not a listening AF_UNIX stream");
                fd = SD_LISTEN_FDS_START;
                if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
                        return log_error_errno(errno, "fcntl on the activated socket failed: %m");
                socket_activated = true;
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        /* Room for the temporary name bind_socket() uses too. */
        if (strlen(arg_socket) + 16 >= sizeof sa.sun_path)
                return log_error_errno(ENAMETOOLONG, "Socket path \"%s\" is too long", arg_socket);
        return socket_path_free(arg_socket);
}

/* --socket: make the listening socket. */
static int bind_socket(int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -1;
        mode_t old;
        int n;

        /* Again: another supervisor may have come while this one checked itself. The
         * rename below replaces a stale file. */
        n = socket_path_free(arg_socket);
        if (n < 0)
                return n;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "socket failed: %m");

        /* Bind under a temporary name, finish (mode, group, listen), then rename into
         * place: a client that sees the path can connect, with the final permissions. */
        /* Random, not the pid: two supervisors that are each pid 1 of their own pid
         * namespace must not remove each other's temporary name. */
        char tmp[sizeof sa.sun_path];
        uint32_t rnd;
        if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t) sizeof rnd)
                rnd = (uint32_t) now_usec() ^ (uint32_t) getpid();
        n = snprintf(tmp, sizeof tmp, "%s.%08" PRIx32 ".tmp", arg_socket, rnd);
        if (n < 0 || (size_t) n >= sizeof tmp)
                return log_error_errno(ENAMETOOLONG, "Socket path \"%s\" is too long", arg_socket);
        strcpy(sa.sun_path, tmp);
        (void) unlink(tmp);
        /* socketGroup: the file is created with it as this process's fsgid (CAP_SETGID,
         * which a root supervisor has for the id maps anyway), so no chown and no
         * CAP_CHOWN is needed. Where the fsgid cannot be set, chown() as before (a
         * group this user is a member of needs no capability either). */
        gid_t old_fsgid = policy.has_socket_group ? (gid_t) setfsgid(policy.socket_group) : (gid_t) -1;
        old = umask(0177);
        n = bind(fd, (struct sockaddr *) &sa, sizeof sa);
        umask(old);
        if (policy.has_socket_group)
                (void) setfsgid(old_fsgid);
        if (n < 0)
                return log_error_errno(errno, "Binding \"%s\" failed: %m", tmp);
        if (policy.has_socket_group) {
                struct stat st;
                if (lstat(tmp, &st) < 0 ||
                    (st.st_gid != policy.socket_group && chown(tmp, (uid_t) -1, policy.socket_group) < 0) ||
                    chmod(tmp, 0660) < 0) {
                        n = -errno;
                        unlink(tmp);
                        return log_error_errno(n, "Setting the socket's group %u failed: %m",
                                               (unsigned) policy.socket_group);
                }
        }
        if (listen(fd, 128) < 0 || rename(tmp, arg_socket) < 0) {
                n = -errno;
                unlink(tmp);
                return log_error_errno(n, "Listening on \"%s\" failed: %m", arg_socket);
        }
        socket_created = true;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int on_shutdown_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        if (server_idle(server) || now_usec() - shutdown_started > SHUTDOWN_GRACE_USEC) {
                sd_event_exit(sd_event_source_get_event(s), 0);
                return 0;
        }
        sd_event_source_set_time_relative(s, 10000);
        sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

/* Stop accepting, cancel every call; the loop ends once nothing runs (at most
 * SHUTDOWN_GRACE_USEC later). */
static void begin_shutdown(sd_event *e) {
        int k;

        sd_notify(0, "STOPPING=1");
        shutdown_started = now_usec();
        server_shutdown(server);
        k = sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, 1000, 1000, on_shutdown_tick, NULL);
        if (k < 0) {
                log_error_errno(k, "Waiting for the calls to end failed, exiting now: %m");
                sd_event_exit(e, k);
        }
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        if (shutdown_started)
                return 0;
        log_info("Received %s: stopping", strsignal((int) si->ssi_signo));
        begin_shutdown(sd_event_source_get_event(s));
        return 0;
}

/* The signals the loop takes (signalfd) are blocked; SIGPIPE is ignored (a client that
 * goes away is an EPIPE, never a death). */
static void block_signals(sigset_t *mask) {
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(mask);
        sigaddset(mask, SIGTERM);
        sigaddset(mask, SIGINT);
        sigaddset(mask, SIGCHLD);
        sigaddset(mask, SIGHUP);
        sigprocmask(SIG_BLOCK, mask, NULL);
}

/* SIGHUP: the policy file again. Only a complete, valid file changes anything; the keys
 * read only at start keep their running values (with a notice). */
static int on_reload(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        const char *changed[POLICY_MAX_RESTART_KEYS];
        PolicySnapshot *snap = NULL;
        const Policy *cur;
        Policy np;
        char err[512];
        int k, n;

        if (shutdown_started)
                return 0;
        if (!arg_policy) {
                log_notice("Received SIGHUP, but no --policy file was given: nothing to reload");
                return 0;
        }
        (void) sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long) now_usec());
        cur = server_policy(server);
        policy_init_defaults(&np);
        k = policy_load_file(&np, arg_policy, err, sizeof err);
        if (k < 0) {
                log_error("Reloading the policy \"%s\" failed, keeping sha256 %.12s…: %s", arg_policy, cur->sha256,
                          err[0] ? err : strerror(-k));
                goto done;
        }
        n = policy_keep_restart_keys(&np, cur, changed);
        for (int i = 0; i < n; i++)
                log_notice("Policy key %s changed in \"%s\"; it takes effect after a restart", changed[i], arg_policy);
        if (strcmp(np.sha256, cur->sha256) == 0) {
                log_info("Reloaded the policy \"%s\": unchanged (sha256 %.12s…)", arg_policy, cur->sha256);
                goto done;
        }
        k = policy_snapshot_new(&np, &snap);
        if (k < 0) {
                log_error_errno(k, "Reloading the policy failed: %m");
                goto done;
        }
        log_info("Reloaded the policy \"%s\": %s, sha256 %.12s… (was %.12s…); queued and running calls keep theirs",
                 arg_policy, np.name, np.sha256, cur->sha256);
        server_set_policy(server, snap);
        policy_snapshot_unref(snap);
        artifacts_mount_ahead_drop();
done:
        (void) sd_notify(0, "READY=1");
        return 0;
}

/* Socket activation's idle exit: unused (no connection, nothing queued, running or
 * unsent) for idleExitSeconds of the current policy. */
static int on_idle_check(sd_event_source *s, uint64_t usec, void *userdata) {
        uint32_t idle = server_policy(server)->idle_exit_seconds;
        uint64_t now = now_usec();

        if (shutdown_started)
                return 0;
        /* Counted from the first check that finds it unused: the exit comes at least
         * idleExitSeconds after the last use, and at most one check period later. */
        if (idle == 0 || !server_unused(server))
                unused_since = 0;
        else if (unused_since == 0)
                unused_since = now;
        else if (now - unused_since >= (uint64_t) idle * 1000000) {
                log_info("Unused for %u s (idleExitSeconds): exiting; systemd starts codeinterpd again on the next "
                         "connection",
                         idle);
                (void) sd_notify(0, "STOPPING=1");
                shutdown_started = now;
                server_shutdown(server);
                sd_event_exit(sd_event_source_get_event(s), 0);
                return 0;
        }
        sd_event_source_set_time(s, now + IDLE_CHECK_USEC);
        sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

static int on_sigchld(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        if (server)
                server_reap_strays(server);
        return 0;
}

static int engine_start(int worker_fd, ServerSelfCheckFn fn, void *userdata, sd_event **ret_e);
static void on_check_self_check(Server *s, const char *problem, uint64_t elapsed_usec, void *userdata);

/* The self-check, as the daemon runs it before it serves: one worker through the path
 * every call takes (docs/operations.md, "Self-check"). Whatever the checks above found,
 * it is tried: its answer names the stage and errno of what a call would meet. Returns
 * true when anything failed (bad included). */
static bool check_self(bool bad) {
        _cleanup_close_ int worker_fd = -1;
        sd_event *e = NULL;
        sigset_t mask;
        int failed = 1, k;

        fflush(stdout);
        block_signals(&mask);
        if (load_worker(&worker_fd) < 0) {
                printf("self-check: FAILED: the worker binary cannot be loaded (above)\n");
                return true;
        }
        k = engine_start(worker_fd, on_check_self_check, &failed, &e);
        if (k >= 0)
                k = sd_event_loop(e);
        if (k < 0)
                printf("self-check: FAILED: the supervisor could not start: %s\n", strerror(-k));
        server = server_free(server);
        artifacts_helper_stop();
        sd_event_unref(e);
        return bad || failed || k < 0;
}

static int check_config(void) {
        bool bad = check_self(host_check_report(&policy, arg_cgroup_fs, arg_lease_dir, &leases));

        artifacts_helper_stop();
        leases = id_leases_free(leases); /* the block's registration and state go with it */
        return bad ? 1 : 0;
}

/* Listen, say READY=1 (or stop with exit status 1 if that fails). */
static void serve(Server *s, int *listen_fd) {
        int k;

        k = *listen_fd >= 0 ? 0 : bind_socket(listen_fd);
        if (k >= 0)
                k = server_listen(s, *listen_fd);
        if (k < 0) {
                log_error_errno(k, "Listening failed: %m");
                exit_status = 1;
                begin_shutdown(server_event(s));
                return;
        }
        *listen_fd = -1; /* the server's now */
        /* The idle exit is socket activation's: a supervisor on its own --socket has nobody
         * to start it again. */
        if (socket_activated) {
                k = sd_event_add_time_relative(server_event(s), NULL, CLOCK_MONOTONIC, IDLE_CHECK_USEC, 10000,
                                               on_idle_check, NULL);
                if (k < 0)
                        log_warning_errno(k, "Setting up the idle exit failed, running without: %m");
        }
        log_info("Listening on %s (policy %s, sha256 %.12s…, %u active workers, %s start%s)",
                 arg_socket ?: "the systemd-activated socket", policy.name, policy.sha256,
                 policy_active_workers(&policy), policy_worker_start_to_string(policy.worker_start),
                 userns_rootless() ? ", rootless: workers run as this user on the host" : "");
        sd_notify(0, "READY=1");
}

/* After the self-check: serve, or stop with exit status 1. */
static void on_self_check(Server *s, const char *problem, uint64_t elapsed_usec, void *userdata) {
        if (shutdown_started)
                return;
        if (problem) {
                log_error("A call would fail here, so codeinterpd does not serve: %s. `codeinterpd --check-config` "
                          "under the same confinement says more (docs/operations.md, \"Self-check\")",
                          problem);
                exit_status = 1;
                begin_shutdown(server_event(s));
                return;
        }
        log_info("Self-check: a worker ran " SELF_CHECK_CODE " in %llu ms (%s start, /outputs %s)",
                 (unsigned long long) elapsed_usec / 1000, policy_worker_start_to_string(policy.worker_start),
                 policy.max_artifacts > 0 ? "read back" : "off");
        serve(s, userdata);
}

/* --check-config's last line: the self-check's answer; then the loop ends. */
static void on_check_self_check(Server *s, const char *problem, uint64_t elapsed_usec, void *userdata) {
        int *bad = userdata;

        if (problem)
                printf("self-check: FAILED: %s\n", problem);
        else
                printf("self-check: a worker ran " SELF_CHECK_CODE " = 42 in %llu ms%s\n",
                       (unsigned long long) elapsed_usec / 1000,
                       policy.max_artifacts > 0 ? ", and the file it left in /outputs came back" : "");
        fflush(stdout);
        *bad = problem != NULL;
        if (!shutdown_started)
                begin_shutdown(server_event(s));
}

/* Everything a call needs before its first worker, in the order the daemon takes it:
 * signals, the /outputs mounts, the workers' cgroups, the server (the zygote starts
 * here), then the self-check, whose answer comes to fn from the loop (fn NULL: no
 * self-check, serve at once on the listen_fd userdata points to). On success the loop
 * is *ret_e and the server is `server`. */
static int engine_start(int worker_fd, ServerSelfCheckFn fn, void *userdata, sd_event **ret_e) {
        PolicySnapshot *snapshot = NULL;
        CgroupRoot *cgroups = NULL;
        sd_event *e = NULL;
        char err[1024];
        int k;

        k = sd_event_new(&e);
        if (k < 0)
                return log_error_errno(k, "sd_event_new failed: %m");
        /* WATCHDOG=1 from the loop at half of WATCHDOG_USEC, when systemd asks for it: a
         * loop that stops turning stops them. */
        k = sd_event_set_watchdog(e, true);
        if (k < 0) {
                log_error_errno(k, "Enabling the watchdog failed: %m");
                goto fail;
        }
        if (k > 0)
                log_debug("systemd watchdog enabled");
        if ((k = sd_event_add_signal(e, NULL, SIGTERM, on_signal, NULL)) < 0 ||
            (k = sd_event_add_signal(e, NULL, SIGHUP, on_reload, NULL)) < 0 ||
            (k = sd_event_add_signal(e, NULL, SIGINT, on_signal, NULL)) < 0 ||
            (k = sd_event_add_signal(e, NULL, SIGCHLD, on_sigchld, NULL)) < 0) {
                log_error_errno(k, "Installing signal handlers failed: %m");
                goto fail;
        }
        /* Before any child, so workers and the zygote start from it. */
        k = artifacts_prepare();
        if (k == ARTIFACTS_PRIVATE_NAMESPACE)
                log_info("This user namespace does not own the mount namespace: running in a private one "
                         "(slave mounts), so that calls can have an /outputs tmpfs");
        else if (k == ARTIFACTS_BY_HELPER && !userns_rootless())
                log_info("No CAP_SYS_ADMIN over this mount namespace: each /outputs tmpfs is made by a helper "
                         "in a user namespace of its own");
        else if (k < 0)
                log_warning_errno(k, "Cannot create tmpfs mounts (%m): calls with an /outputs (maxArtifacts > 0) "
                                     "will fail as worker_error");
        /* Before any child: on cgroup v2 the supervisor may move itself into a leaf. */
        k = cgroup_root_open(policy.cgroups, policy.cpu_bandwidth_percent, arg_cgroup_fs, false, &cgroups, err,
                             sizeof err);
        if (k < 0) {
                log_error_errno(k, "The policy requires a cgroup per worker, but %s", err);
                goto fail;
        }
        if (cgroup_root_version(cgroups) == CGROUP_NONE && policy.cgroups == POLICY_CGROUPS_AUTO)
                log_notice("Workers run without a cgroup of their own: %s", err);
        else if (cgroup_root_version(cgroups) != CGROUP_NONE)
                log_info("Workers' cgroups are made in this supervisor's subtree ci-%s", cgroup_root_instance(cgroups));
        if (policy.cpu_bandwidth_percent > 0 && cgroup_root_cpu_percent(cgroups) == 0)
                log_notice("Workers run without the CPU cap (cpuBandwidthPercent %u): %s",
                           (unsigned) policy.cpu_bandwidth_percent, cgroup_root_cpu_why(cgroups));
        k = policy_snapshot_new(&policy, &snapshot);
        if (k >= 0)
                k = server_new(e, snapshot, worker_fd, cgroups, leases, &server);
        if (k >= 0)
                cgroups = NULL; /* the server's now */
        snapshot = policy_snapshot_unref(snapshot);
        if (k < 0) {
                log_error_errno(k, "Starting the server failed: %m");
                goto fail;
        }
        *ret_e = e;
        if (!fn) {
                log_notice("Serving without the self-check (--no-self-check): calls fail as they would");
                serve(server, userdata);
                return 0;
        }
        k = server_self_check(server, fn, userdata);
        if (k < 0) {
                log_error_errno(k, "Starting the self-check failed: %m");
                *ret_e = NULL;
                goto fail;
        }
        return 0;
fail:
        server = server_free(server);
        cgroup_root_free(cgroups);
        sd_event_unref(e);
        return k;
}

/* What the policy asks that this host cannot give, refused before the socket exists
 * (a client never connects to a supervisor about to refuse): 0, or the exit status. */
static int refuse_unusable_host(void) {
        char err[1024];
        int k;

        if (host_check_packages(&policy, err, sizeof err) < 0) {
                log_error("Policy \"%s\": %s", arg_policy ?: "(defaults)", err);
                return 2;
        }
        /* The workers' host ids belong to nobody else (docs/security.md); refused before
         * the socket exists. Rootless there is no block: every worker is this user. */
        k = userns_rootless() ? 0
                              : worker_ids_check(policy.worker_host_id_base, policy.worker_host_id_count, NULL, NULL,
                                                 err, sizeof err);
        if (k < 0) {
                log_error("The worker host id block %u-%llu (workerHostIdBase, workerHostIdCount) cannot be used: %s",
                          (unsigned) policy.worker_host_id_base,
                          (unsigned long long) policy.worker_host_id_base + policy.worker_host_id_count - 1, err);
                return 1;
        }
        /* Leased host-wide: no live worker of another supervisor on this host has a
         * worker's host id (id_leases.h); a block overlapping another's is refused. */
        k = userns_rootless() ? 0
                              : id_leases_open(arg_lease_dir, policy.worker_host_id_base, policy.worker_host_id_count,
                                               &leases, err, sizeof err);
        if (k < 0) {
                log_error("The worker host id block %u-%llu cannot be leased in %s (--lease-dir): %s",
                          (unsigned) policy.worker_host_id_base,
                          (unsigned long long) policy.worker_host_id_base + policy.worker_host_id_count - 1,
                          arg_lease_dir, err);
                return 1;
        }
        /* Likewise a policy that requires cgroups (or a CPU cap with them) this host cannot
         * give: checked without changing anything (the real open comes later, before the
         * first child), so a client never connects to a supervisor about to refuse. */
        {
                CgroupRoot *probe = NULL;
                k = cgroup_root_open(policy.cgroups, policy.cpu_bandwidth_percent, arg_cgroup_fs, true, &probe, err,
                                     sizeof err);
                cgroup_root_free(probe);
                if (k < 0) {
                        log_error_errno(k, "The policy requires a cgroup per worker, but %s", err);
                        return 1;
                }
        }
        return 0;
}

int main(int argc, char **argv) {
        _cleanup_close_ int listen_fd = -1, worker_fd = -1;
        sd_event *e = NULL;
        sigset_t mask;
        char err[1024];
        int k;

        log_set_prefix("codeinterpd");
        k = parse_argv(argc, argv);
        if (k <= 0)
                return k < 0 ? 2 : 0;

        policy_init_defaults(&policy);
        if (arg_policy) {
                k = policy_load_file(&policy, arg_policy, err, sizeof err);
                if (k < 0) {
                        log_error("Policy \"%s\": %s", arg_policy, err[0] ? err : strerror(-k));
                        return 2;
                }
        }
        if (arg_check_policy) {
                printf("policy %s: %s, sha256 %s\n", arg_policy ?: "(built-in defaults)", policy.name, policy.sha256);
                return 0;
        }
        if (arg_check)
                return check_config();
        k = refuse_unusable_host();
        if (k > 0)
                return k;

        block_signals(&mask);
        /* systemd's socket is taken before the self-check (a client that connects
         * meanwhile waits in its backlog and is served once the check passed); with
         * --socket the socket is made only then, so its path appearing means it serves. */
        if (load_worker(&worker_fd) < 0 || take_socket(&listen_fd) < 0)
                return 1;
        k = engine_start(worker_fd, arg_self_check ? on_self_check : NULL, &listen_fd, &e);
        if (k < 0)
                goto out;
        k = sd_event_loop(e);
        if (k < 0)
                log_error_errno(k, "Event loop failed: %m");
out:
        server = server_free(server);
        artifacts_helper_stop();
        sd_event_unref(e);
        leases = id_leases_free(leases);
        if (socket_created)
                unlink(arg_socket);
        return k < 0 ? 1 : exit_status;
}
