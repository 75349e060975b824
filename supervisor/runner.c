/* SPDX-License-Identifier: MIT */
/* One worker's life (runner.h): the call's descriptors, asking a spawner for the worker
 * (zygote_client.c or exec_spawner.c) and taking it in one place, reading its pipes,
 * killing and reaping it; how it ended is classified by runner_classify.c. */
#include "supervisor/runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/util.h"
#include "contract/fds.h"
#include "contract/plan.h"
#include "supervisor/exec_spawner.h"
#include "supervisor/runner_classify.h"

#define READ_CHUNK 65536
/* Room for the worker's "ready" frame (13 bytes) in the report buffer until it is taken
 * off, so that maxWorkerMessageBytes bounds what follows it exactly. */
#define REPORT_READY_SLACK 16
/* How long a call killed while its worker is being made waits for the zygote's answer. */
#define KILL_SPAWN_GRACE_USEC 200000ULL

enum { CH_OUT, CH_ERR, CH_RESULT, CH_REPORT, _CH_MAX };

struct Runner {
        const Policy *policy;
        pid_t pid;
        int pidfd;
        sd_event_source *pid_source;
        int fds[_CH_MAX];
        sd_event_source *sources[_CH_MAX];
        FitStream *streams[CH_REPORT]; /* out, err, result */
        uint8_t *report;               /* bounded report buffer */
        size_t report_len;
        bool report_overflow;
        bool first_report_seen; /* the first frame has arrived (and was taken off if "ready") */
        bool confined;          /* the worker said "ready": sandbox complete, the code runs */
        bool finishing;         /* report bytes after "ready": the worker's last report began */
        RunnerFinishingFn finishing_fn;
        RunnerKill kill;
        RunnerDoneFn done;
        RunnerStartedFn started;
        void *userdata;
        uint64_t start_usec;
        sd_event *event;
        ZygoteClient *zygote; /* while spawning: the zygote asked for the worker */
        uint64_t spawn_token;
        bool spawning;
        sd_event_source *killed_source; /* killed while spawning: the grace for the zygote's answer */
        Cgroup *cgroup;                 /* the worker's own cgroup, or NULL */
        int go_fd;                      /* zygote mode: write end of the go pipe until the worker may go */
        uint64_t oom_kills;             /* read from the cgroup after the reap */
        int outputs_fd;                 /* the call's /outputs tmpfs (artifacts.h), or -1 */
        int mntns_fd;                   /* the worker's mount namespace, held until the result, or -1 */
        WorkerIds *ids;
        WorkerId id; /* the worker's host identity, while has_id */
        bool has_id;
        WorkerHow how; /* how the worker taken came (ready, preparing, cloned, exec); NONE without one */
};

/* The worker that had the runner's host id is reaped (reaped false: it may not be,
 * wait4 failed): the id goes back to the block, or waits in quarantine. */
static void runner_put_id(Runner *r, bool reaped) {
        if (!r->has_id)
                return;
        if (reaped)
                worker_id_release(r->ids, r->id.slot);
        else
                worker_id_quarantine(r->ids, r->id.slot);
        r->has_id = false;
}

pid_t runner_pid(const Runner *r) {
        return r->pid;
}

WorkerHow runner_worker_how(const Runner *r) {
        return r->how;
}

bool runner_confined(const Runner *r) {
        return r->confined;
}

bool runner_spawning(const Runner *r) {
        return r->spawning;
}

void runner_set_finishing_callback(Runner *r, RunnerFinishingFn fn) {
        r->finishing_fn = fn;
}

bool runner_finishing(const Runner *r) {
        return r->finishing;
}

uint64_t runner_stdout_chars(const Runner *r) {
        return r->streams[CH_OUT] ? fit_stream_chars(r->streams[CH_OUT]) : 0;
}

uint64_t runner_stderr_chars(const Runner *r) {
        return r->streams[CH_ERR] ? fit_stream_chars(r->streams[CH_ERR]) : 0;
}

bool runner_outputs_usage(const Runner *r, uint64_t *ret_count, uint64_t *ret_bytes) {
        struct statfs st;

        if (r->outputs_fd < 0 || fstatfs(r->outputs_fd, &st) < 0)
                return false;
        /* The root directory takes one inode. */
        *ret_count = st.f_files > st.f_ffree ? (uint64_t) (st.f_files - st.f_ffree) - 1 : 0;
        *ret_bytes = st.f_blocks > st.f_bfree ? (uint64_t) (st.f_blocks - st.f_bfree) * (uint64_t) st.f_bsize : 0;
        return true;
}

static void close_channel(Runner *r, int ch) {
        r->sources[ch] = sd_event_source_disable_unref(r->sources[ch]);
        if (r->fds[ch] >= 0) {
                close(r->fds[ch]);
                r->fds[ch] = -1;
        }
}

/* The worker's first report frame, once complete: a "ready" is taken off the buffer
 * (the worker is confined and its code runs next, contract/report.h); anything else
 * stays for parse_report() at the end. Written before user code exists, so it is the
 * worker's own. */
static void take_ready(Runner *r) {
        WorkerReport rep = {};
        uint32_t n;

        if (r->first_report_seen || r->report_len < 4)
                return;
        n = frame_get_len(r->report);
        if ((size_t) n + 4 > r->report_len)
                return;
        r->first_report_seen = true;
        if (report_parse(r->report + 4, n, r->policy->max_output_characters, &rep) < 0)
                return;
        if (rep.kind == REPORT_READY) {
                r->confined = true;
                /* Exec mode: the worker runs its own executable now, whose memory belongs
                 * to its user namespace, ours to read (common/proc.h): hold it from here. */
                if (r->mntns_fd < 0 && r->how == WORKER_HOW_EXEC)
                        r->mntns_fd = proc_open_mount_namespace(r->pid, r->pidfd);
                memmove(r->report, r->report + 4 + n, r->report_len - 4 - n);
                r->report_len -= 4 + n;
        }
        report_done(&rep);
}

/* Bytes after the "ready" frame are the worker's last report (contract/report.h): its
 * code has run and it exits next. Said once, as a hint (RunnerFinishingFn). */
static void note_finishing(Runner *r) {
        if (r->finishing || !r->confined || r->report_len == 0)
                return;
        r->finishing = true;
        if (r->finishing_fn)
                r->finishing_fn(r, r->userdata);
}

/* Read what is there. Returns 1 at EOF, 0 when drained for now, -errno on error. */
static int read_channel(Runner *r, int ch) {
        uint8_t buf[READ_CHUNK];

        for (int rounds = 0; rounds < 16; rounds++) {
                ssize_t n = read(r->fds[ch], buf, sizeof buf);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        return -errno;
                }
                if (n == 0)
                        return 1;
                if (ch == CH_REPORT) {
                        size_t max = (size_t) r->policy->max_worker_message_bytes + 4 +
                                     (r->confined ? 0 : REPORT_READY_SLACK);
                        if (r->report_len + (size_t) n > max) {
                                r->report_overflow = true;
                                return 1; /* stop reading; the worker is killed */
                        }
                        memcpy(r->report + r->report_len, buf, (size_t) n);
                        r->report_len += (size_t) n;
                        take_ready(r);
                        note_finishing(r);
                } else {
                        int k = fit_stream_feed(r->streams[ch], buf, (size_t) n);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

static int on_channel(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Runner *r = userdata;
        int ch;

        for (ch = 0; ch < _CH_MAX; ch++)
                if (r->sources[ch] == s)
                        break;
        if (ch == _CH_MAX)
                return 0;
        int k = read_channel(r, ch);
        if (k != 0)
                close_channel(r, ch);
        if (ch == CH_REPORT && r->report_overflow)
                runner_kill(r, RUNNER_KILL_REPORT);
        return 0;
}

static void complete(Runner *r, RunnerResult *resp, int status, const struct rusage *ru);

static int on_exit_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Runner *r = userdata;
        RunnerResult res = {};
        struct rusage ru = {};
        int status = 0;
        pid_t p;

        do
                p = wait4(r->pid, &status, WNOHANG | __WALL, &ru);
        while (p < 0 && errno == EINTR);
        if (p == 0)
                return 0; /* spurious */
        r->pid_source = sd_event_source_disable_unref(r->pid_source);
        res.pid = r->pid;
        if (p < 0) {
                log_warning_errno(errno, "wait4(%d) failed: %m", (int) r->pid);
                status = W_EXITCODE(127, 0);
        }
        r->pid = 0;
        if (r->has_id) {
                res.has_host_uid = true;
                res.host_uid = r->id.uid;
        }
        runner_put_id(r, p > 0);
        complete(r, &res, status, &ru);
        return 0;
}

/* Only a reaped worker's /outputs is read, as its owner (r->id, released to the block
 * already, still names it): its pid namespace is empty, nothing writes there any more.
 * (Without a worker the mount may still be on its way to one the zygote makes later; it
 * is not touched.) A tmpfs whose only inode is its root holds nothing to read: most
 * calls write no file, and the fstatfs() spares them the listing's dozen system calls
 * (two fsuid switches, the open, fdopendir()'s checks, getdents64). */
static void collect_outputs(Runner *r, RunnerResult *res) {
        uint64_t entries = 0, bytes = 0;
        int k;

        if (r->outputs_fd < 0 || res->pid <= 0 || !res->has_host_uid)
                return;
        if (runner_outputs_usage(r, &entries, &bytes) && entries == 0) {
                res->has_outputs = true;
                return;
        }
        k = artifacts_collect(r->outputs_fd, r->id.uid, r->id.gid, r->policy->max_artifacts,
                              r->policy->max_artifact_bytes, &res->artifacts);
        if (k >= 0)
                res->has_outputs = true;
        else if (runner_outputs_usage(r, &entries, &bytes)) {
                /* Out of descriptors or memory: nothing is read, but nothing goes
                 * silently. The tmpfs's own counters (fstatfs() needs no new
                 * descriptor) say what is omitted: its entries, and its allocated
                 * bytes, whole pages (docs/protocol.md). */
                res->artifacts = (ArtifactSet){ .omitted = entries, .omitted_bytes = bytes };
                res->has_outputs = true;
                log_warning_errno(k,
                                  "Reading the worker's /outputs failed (%m); its %llu entries are "
                                  "reported as omitted",
                                  (unsigned long long) entries);
        } else
                log_warning_errno(k, "Reading the worker's /outputs failed: %m");
}

/* The worker is gone (or never came): drain, classify, fit, and hand over the result. */
static void complete(Runner *r, RunnerResult *resp, int status, const struct rusage *ru) {
        RunnerResult res = *resp;

        /* The process and its whole pid namespace are gone: what is in the pipes is all
         * there will ever be. Drain it. */
        for (int ch = 0; ch < _CH_MAX; ch++) {
                if (r->fds[ch] < 0)
                        continue;
                for (int i = 0; i < 64; i++)
                        if (read_channel(r, ch) != 0)
                                break;
                close_channel(r, ch);
        }

        res.start_usec = r->start_usec;
        res.end_usec = now_usec();
        res.worker_how = r->how;
        /* The cgroup's account is read after the reap and before it is removed. */
        if (r->cgroup) {
                CgroupStats st;
                int k = cgroup_stats(r->cgroup, &st);
                if (k >= 0) {
                        r->oom_kills = st.oom_kills;
                        res.has_memory_peak = st.has_peak && res.pid > 0;
                        res.memory_peak_bytes = st.peak_bytes;
                } else
                        log_warning_errno(k, "Reading the worker cgroup %s failed: %m", cgroup_path(r->cgroup));
        }
        runner_classify(&(RunnerEnding){ .policy = r->policy,
                                         .kill = r->kill,
                                         .report = r->report,
                                         .report_len = r->report_len,
                                         .oom_kills = r->oom_kills },
                        status, ru, &res);
        collect_outputs(r, &res);

        FitText *outs[] = { &res.out, &res.err, &res.result };
        for (int ch = 0; ch < CH_REPORT; ch++) {
                int k = fit_stream_finish(r->streams[ch], outs[ch]);
                fit_stream_free(r->streams[ch]);
                r->streams[ch] = NULL;
                if (k < 0)
                        log_warning_errno(k, "fitting output failed: %m");
        }
        if (!res.has_result)
                fit_text_done(&res.result);

        /* Once the result is on its way (done sends it, may free r), the worker's mount
         * namespace and /outputs tmpfs go (ours are their last references), then, their
         * pages uncharged, the empty cgroup is given back for reuse or removed (declared
         * first, cleared last). None of it is part of the call's latency. */
        _cleanup_(cgroup_recyclep) __attribute__((unused)) Cgroup *cg = TAKE_PTR(r->cgroup);
        _cleanup_close_ __attribute__((unused)) int outputs = TAKE_FD(r->outputs_fd);
        _cleanup_close_ __attribute__((unused)) int mntns = TAKE_FD(r->mntns_fd);
        r->done(r, &res, r->userdata);
}

bool runner_finish_if_exited(Runner *r) {
        struct pollfd exited = { .fd = r->pidfd, .events = POLLIN };

        if (r->pid <= 0 || !r->pid_source || poll(&exited, 1, 0) != 1)
                return false;
        /* Exactly what the loop would do for the pidfd event: reap, drain, finish. The
         * done callback may free r. */
        on_exit_event(r->pid_source, r->pidfd, EPOLLIN, r);
        return true;
}

/* The call was killed (deadline, cancel, shutdown) before a worker existed. */
static void complete_without_worker(Runner *r) {
        RunnerResult res = { .exit_code = -1 };
        struct rusage ru = {};

        complete(r, &res, W_EXITCODE(0, SIGKILL), &ru);
}

/* Killed before the zygote answered, and still no answer after KILL_SPAWN_GRACE_USEC
 * (normally it comes within milliseconds, and then the worker is killed and the call
 * ends through its exit like any other): the call ends now, without a worker; one that
 * the zygote announces later is killed by the zygote client. */
static int on_killed_while_spawning(sd_event_source *s, uint64_t usec, void *userdata) {
        Runner *r = userdata;

        r->killed_source = sd_event_source_disable_unref(r->killed_source);
        if (!r->spawning)
                return 0; /* the worker came first: its exit ends the call */
        zygote_client_spawn_abandon(r->zygote, r->spawn_token);
        r->spawning = false;
        complete_without_worker(r);
        return 0;
}

bool runner_kill(Runner *r, RunnerKill why) {
        struct pollfd exited = { .fd = r ? r->pidfd : -1, .events = POLLIN };

        if (!r)
                return false;
        if (r->spawning) {
                if (r->kill == RUNNER_KILL_NONE)
                        r->kill = why;
                if (!r->killed_source &&
                    sd_event_add_time_relative(r->event, &r->killed_source, CLOCK_MONOTONIC, KILL_SPAWN_GRACE_USEC,
                                               1000, on_killed_while_spawning, r) < 0)
                        r->killed_source = NULL; /* then on_spawned() kills the worker it gets */
                return true;
        }
        if (r->kill != RUNNER_KILL_NONE)
                return true; /* an earlier reason is already on its way */
        /* A worker that has already exited (its pidfd is readable, the reap is pending in
         * this loop turn) finished on its own: its outcome is what it did, not the kill. */
        if (r->pid > 0 && poll(&exited, 1, 0) == 1)
                return false;
        r->kill = why;
        if (r->pid > 0)
                pidfd_kill(r->pidfd);
        return true;
}

Runner *runner_free(Runner *r) {
        if (!r)
                return NULL;
        if (r->spawning)
                zygote_client_spawn_abandon(r->zygote, r->spawn_token);
        sd_event_source_disable_unref(r->killed_source);
        /* Never leave a worker behind, nor its cgroup, nor its host id taken. */
        kill_and_reap(r->pid, r->pidfd);
        runner_put_id(r, true);
        cgroup_free(r->cgroup);
        if (r->go_fd >= 0)
                close(r->go_fd);
        closep(&r->outputs_fd);
        closep(&r->mntns_fd);
        sd_event_source_disable_unref(r->pid_source);
        if (r->pidfd >= 0)
                close(r->pidfd);
        for (int ch = 0; ch < _CH_MAX; ch++)
                close_channel(r, ch);
        for (int ch = 0; ch < CH_REPORT; ch++)
                fit_stream_free(r->streams[ch]);
        free(r->report);
        free(r);
        return NULL;
}

void runner_result_done(RunnerResult *res) {
        fit_text_done(&res->out);
        fit_text_done(&res->err);
        fit_text_done(&res->result);
        report_done(&res->report);
        artifact_set_done(&res->artifacts);
}

/* Zygote mode: the worker may read its plan now (it is in its cgroup, or has none). A
 * worker that died meanwhile makes the write fail; its exit is seen through its pidfd. */
static void release_worker(Runner *r) {
        if (r->go_fd < 0)
                return;
        if (write(r->go_fd, "g", 1) != 1)
                log_debug_errno(errno, "Releasing the worker failed: %m");
        close(r->go_fd);
        r->go_fd = -1;
}

/* Where a worker arrives, whatever the mode (exec_spawner.h, zygote_client.h): its pid,
 * pidfd, host identity and cgroup are the runner's from here on. */
static void take_worker(Runner *r, const SpawnedWorker *w) {
        r->id = w->id;
        r->has_id = true;
        r->cgroup = w->cgroup; /* it runs in it already, or moves itself in once released */
        r->pid = w->pid;
        r->pidfd = w->pidfd;
        r->how = w->how;
        r->mntns_fd = w->mntns_fd;
}

/* A worker taken that cannot be run: nothing of the call ran; kill and reap it. */
static void drop_worker(Runner *r) {
        kill_and_reap(r->pid, r->pidfd);
        runner_put_id(r, true);
        r->cgroup = cgroup_free(r->cgroup);
        closep(&r->mntns_fd);
        close(r->pidfd);
        r->pidfd = -1;
        r->pid = 0;
        r->how = WORKER_HOW_NONE;
}

/* Zygote mode: make the worker taken ready to run the call. */
static int ready_zygote_worker(Runner *r, const char **ret_cause) {
        int k;

        /* A reload since the slot's cgroup was made may have changed the limits: the
         * worker has not read its plan yet, it waits for the go byte. */
        if (r->cgroup) {
                k = cgroup_update_limits(r->cgroup, r->policy->memory_bytes, r->policy->processes, ret_cause);
                if (k < 0)
                        return k;
        }
        /* Pre-started workers prepare at a lower priority; this one has a call now
         * and runs it at ours (an operator's Nice= holds for the calls too). */
        errno = 0;
        int own_nice = getpriority(PRIO_PROCESS, 0);
        if (errno == 0)
                (void) setpriority(PRIO_PROCESS, (id_t) r->pid, own_nice);
        release_worker(r);
        k = sd_event_add_io(r->event, &r->pid_source, r->pidfd, EPOLLIN, on_exit_event, r);
        if (k < 0)
                *ret_cause = "watching the worker failed"; /* without it the worker cannot be run */
        return k;
}

/* The zygote's answer. r may be freed by the callbacks called here. */
static void on_spawned(ZygoteAnswer answer, int error, const char *cause, const SpawnedWorker *w, void *userdata) {
        Runner *r = userdata;
        RunnerStartError err = { .error = error };
        int k;

        r->spawning = false;
        r->killed_source = sd_event_source_disable_unref(r->killed_source);
        if (answer == ZYGOTE_ANSWER_WORKER) {
                take_worker(r, w);
                k = ready_zygote_worker(r, &cause);
                if (k >= 0) {
                        if (r->kill != RUNNER_KILL_NONE) /* cancelled or timed out meanwhile */
                                pidfd_kill(r->pidfd);
                        r->started(r, RUNNER_STARTED, NULL, r->userdata);
                        return;
                }
                drop_worker(r);
                answer = ZYGOTE_ANSWER_FAILED;
                err.error = k;
        }
        if (r->kill != RUNNER_KILL_NONE) {
                complete_without_worker(r);
                return;
        }
        snprintf(err.detail, sizeof err.detail, "could not start a worker: %s: %s", cause ?: "?",
                 strerror(abs(err.error)));
        r->started(r, answer == ZYGOTE_ANSWER_RETRY ? RUNNER_RETRY : RUNNER_FAILED, &err, r->userdata);
}

/* Exec mode's answer, before exec_spawner_spawn() returns: always a worker. */
static void on_exec_spawned(ZygoteAnswer answer, int error, const char *cause, const SpawnedWorker *w, void *userdata) {
        (void) answer, (void) error, (void) cause;
        take_worker(userdata, w);
}

static Runner *runner_new(sd_event *e, const Policy *p, WorkerIds *ids, RunnerDoneFn done, RunnerStartedFn started,
                          void *userdata) {
        Runner *r = calloc(1, sizeof *r);

        if (!r)
                return NULL;
        *r = (Runner){
                .policy = p,
                .pid = 0,
                .pidfd = -1,
                .go_fd = -1,
                .outputs_fd = -1,
                .mntns_fd = -1,
                .done = done,
                .started = started,
                .userdata = userdata,
                .event = e,
                .ids = ids,
        };
        for (int ch = 0; ch < _CH_MAX; ch++)
                r->fds[ch] = -1;
        r->report = malloc((size_t) p->max_worker_message_bytes + 4 + REPORT_READY_SLACK);
        if (!r->report)
                return runner_free(r);
        for (int ch = 0; ch < CH_REPORT; ch++)
                if (fit_stream_new(p->max_output_characters, &r->streams[ch]) < 0)
                        return runner_free(r);
        return r;
}

/* The call's plan, in a sealed memfd. */
static int make_plan_fd(const Policy *p, const RunnerRequest *req, int *ret_fd) {
        MpWriter w;
        int k;

        mp_writer_init(&w, 0);
        k = plan_encode(req->code, req->code_len, p, req->inputs, req->n_inputs, &w);
        if (k >= 0)
                k = memfd_from_buffer("codeinterp-plan", w.sb.data, w.sb.size, ret_fd);
        mp_writer_done(&w);
        return k;
}

static void close_pipes(int pipes[][2]) {
        for (int ch = 0; ch < _CH_MAX; ch++)
                fdpass_close_all(pipes[ch], 2);
}

/* The call's descriptors, made before its worker: the plan, the pipes, and its
 * /outputs, a tmpfs made and bounded here (artifacts.h); without one the worker's
 * descriptor slot holds /dev/null and the plan says not to mount. */
static int open_call_fds(Runner *r, const Policy *p, const RunnerRequest *req, int pipes[][2], int *ret_plan_fd,
                         int *ret_no_outputs, const char **ret_step) {
        int k;

        *ret_step = "writing its plan";
        k = make_plan_fd(p, req, ret_plan_fd);
        if (k < 0)
                return k;
        *ret_step = "creating its pipes";
        for (int ch = 0; ch < _CH_MAX; ch++)
                if (pipe2(pipes[ch], O_CLOEXEC) < 0)
                        return -errno;
        if (p->max_artifacts > 0) {
                *ret_step = "creating its /outputs tmpfs";
                return artifacts_mount_new(p->max_artifact_bytes, p->max_artifacts, &r->outputs_fd);
        }
        *ret_step = "opening /dev/null";
        *ret_no_outputs = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (*ret_no_outputs < 0)
                return -errno;
        return 0;
}

/* ask_zygote()'s answer when no zygote is running: ret_err says so. */
#define ASK_REFUSED 2

/* Zygote mode: the worker comes in a slot's cgroup, made ahead (docs/design.md); the
 * answer (pid and pidfd) comes later, in on_spawned(). fds[SPAWN_FD_GO] is set here.
 * Returns 0 when asked, RUNNER_START_LATER, ASK_REFUSED, or -errno (*ret_step says
 * where). */
static int ask_zygote(Runner *r, const Policy *p, const RunnerSpawner *sp, int fds[_SPAWN_FD_MAX], int *ret_go_r,
                      const char **ret_step, RunnerStartError *ret_err) {
        uint64_t slot_memory;
        uint32_t slot_processes;
        int go[2], k;

        *ret_step = "creating its go pipe";
        if (pipe2(go, O_CLOEXEC) < 0)
                return -errno;
        *ret_go_r = go[0];
        r->go_fd = go[1];
        fds[SPAWN_FD_GO] = go[0];
        /* Nothing to wait for unless the slot's cgroup needs other limits than it was
         * made with (a reload): go at once. */
        zygote_client_slot_limits(sp->zygote, &slot_memory, &slot_processes);
        if (cgroup_root_version(sp->cgroups) == CGROUP_NONE ||
            (slot_memory == p->memory_bytes && slot_processes == p->processes))
                release_worker(r);
        if (zygote_client_state(sp->zygote) == ZYGOTE_STATE_BROKEN) {
                ret_err->error = -ECHILD;
                snprintf(ret_err->detail, sizeof ret_err->detail, "could not start a worker: no zygote is running (%s)",
                         zygote_client_last_error(sp->zygote));
                return ASK_REFUSED;
        }
        *ret_step = "asking the zygote";
        k = zygote_client_spawn(sp->zygote, fds, on_spawned, r, &r->spawn_token);
        if (k == ZYGOTE_SPAWN_LATER)
                return RUNNER_START_LATER;
        if (k < 0)
                return k;
        r->zygote = sp->zygote;
        r->spawning = true;
        return 0;
}

/* Read the worker's pipes (our ends, non-blocking) and, once it exists, its exit. */
static int watch_worker(Runner *r, int pipes[][2]) {
        int k;

        for (int ch = 0; ch < _CH_MAX; ch++) {
                fdpass_close_all(&pipes[ch][1], 1);
                r->fds[ch] = TAKE_FD(pipes[ch][0]);
                if (fcntl(r->fds[ch], F_SETFL, O_NONBLOCK) < 0)
                        return -errno;
        }
        for (int ch = 0; ch < _CH_MAX; ch++) {
                k = sd_event_add_io(r->event, &r->sources[ch], r->fds[ch], EPOLLIN, on_channel, r);
                if (k < 0)
                        return k;
        }
        if (r->spawning)
                return 0;
        return sd_event_add_io(r->event, &r->pid_source, r->pidfd, EPOLLIN, on_exit_event, r);
}

int runner_start(sd_event *e, const Policy *p, const RunnerSpawner *sp, const RunnerRequest *req, RunnerDoneFn done,
                 RunnerStartedFn started, void *userdata, Runner **ret, RunnerStartError *ret_err) {
        _cleanup_close_ int plan_fd = -1, go_r = -1, no_outputs = -1;
        int pipes[_CH_MAX][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
        const char *step = "allocating its state";
        Runner *r;
        int k;

        if (sp->zygote && zygote_client_state(sp->zygote) == ZYGOTE_STATE_STARTING)
                return RUNNER_START_LATER;
        r = runner_new(e, p, sp->ids, done, started, userdata);
        k = r ? open_call_fds(r, p, req, pipes, &plan_fd, &no_outputs, &step) : -ENOMEM;
        if (k < 0)
                goto fail;
        int fds[_SPAWN_FD_MAX] = {
                [SPAWN_FD_STDOUT] = pipes[CH_OUT][1],
                [SPAWN_FD_STDERR] = pipes[CH_ERR][1],
                [SPAWN_FD_REPORT] = pipes[CH_REPORT][1],
                [SPAWN_FD_RESULT] = pipes[CH_RESULT][1],
                [SPAWN_FD_PLAN] = plan_fd,
                [SPAWN_FD_OUTPUTS] = r->outputs_fd >= 0 ? r->outputs_fd : no_outputs,
                [SPAWN_FD_GO] = -1,
        };
        if (sp->zygote) {
                k = ask_zygote(r, p, sp, fds, &go_r, &step, ret_err);
                if (k == RUNNER_START_LATER || k == ASK_REFUSED) {
                        close_pipes(pipes);
                        runner_free(r);
                        return k == ASK_REFUSED ? -ECHILD : k;
                }
        } else {
                const ExecSpawner x = { .worker_exec_fd = sp->worker_exec_fd, .cgroups = sp->cgroups, .ids = sp->ids };
                k = exec_spawner_spawn(&x, p, fds, on_exec_spawned, r, &step);
        }
        if (k < 0)
                goto fail;
        r->start_usec = now_usec();
        step = "watching it";
        k = watch_worker(r, pipes);
        if (k < 0)
                goto fail;
        /* While the worker starts, the next call's /outputs. */
        if (p->max_artifacts > 0)
                artifacts_mount_ahead(p->max_artifact_bytes, p->max_artifacts);
        *ret = r;
        return 0;
fail:
        close_pipes(pipes);
        runner_free(r);
        ret_err->error = k;
        snprintf(ret_err->detail, sizeof ret_err->detail, "could not start a worker: %s: %s", step, strerror(abs(k)));
        return k;
}
