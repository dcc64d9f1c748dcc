/*
 * pmixctl.c - a PMIx client (not an MPI program) that exercises the
 * launcher's job-control, logging and event services.
 *
 * Build: gcc -O2 -Wall pmixctl.c $(pkg-config --cflags --libs pmix)
 *
 *   pmixctl log
 *       Rank 0 calls PMIx_Log with {PMIX_LOG_STDERR = "pmixctl: hello from the
 *       log"} and no directives; the launcher should print that text on its
 *       stderr. Every rank prints "pmixctl: rank R log ok" and exits 0 (rank 0
 *       exits 1 if PMIx_Log fails).
 *
 *   pmixctl kill
 *       All ranks fence; rank 0 then calls PMIx_Job_control (blocking) on the
 *       wildcard proc of its own nspace with PMIX_JOB_CTRL_KILL=true. Every
 *       rank then sleeps 30 s: the launcher must kill the whole job long
 *       before that. A rank still alive after 30 s says so on stderr and
 *       exits 1; rank 0 exits 2 at once if PMIx_Job_control fails.
 *
 *   pmixctl events
 *       Every rank registers a handler for PMIXCTL_EVENT (a code in the
 *       range the standard leaves to users, below PMIX_EXTERNAL_ERR_BASE),
 *       then all fence; rank 0 calls PMIx_Notify_event with range
 *       PMIX_RANGE_NAMESPACE and prints "pmixctl: rank 0 sent event"; every
 *       other rank waits up to 10 s for the event and prints "pmixctl: rank R
 *       got event" (exit 1 on timeout). All fence again before finalizing, so
 *       that rank 0 stays until everybody has its event.
 *
 * A SIGALRM watchdog (60 s) ends a rank stuck in a PMIx call, naming it.
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PMIXCTL_EVENT (PMIX_EXTERNAL_ERR_BASE - 5)

static pmix_proc_t myproc;
static const char *volatile phase = "PMIx_Init";
static volatile int got_event;

static void on_alarm(int sig)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "pmixctl: rank %u: timed out in %s\n", myproc.rank, phase);
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

/* Runs in PMIx's progress thread: note the event, tell PMIx we are done. */
static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source,
                     pmix_info_t info[], size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    if (status == PMIXCTL_EVENT)
        __atomic_store_n(&got_event, 1, __ATOMIC_SEQ_CST);
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int fence(const char *what)
{
    pmix_status_t rc;
    phase = what;
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmixctl: rank %u: %s failed: %s\n", myproc.rank, what,
                PMIx_Error_string(rc));
        return 1;
    }
    return 0;
}

static int do_log(void)
{
    pmix_status_t rc;
    pmix_info_t data;

    if (myproc.rank == 0) {
        PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, "pmixctl: hello from the log", PMIX_STRING);
        phase = "PMIx_Log";
        rc = PMIx_Log(&data, 1, NULL, 0);
        PMIX_INFO_DESTRUCT(&data);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "pmixctl: rank 0: PMIx_Log failed: %s\n", PMIx_Error_string(rc));
            return 1;
        }
    }
    printf("pmixctl: rank %u log ok\n", myproc.rank);
    return 0;
}

static int do_kill(void)
{
    pmix_status_t rc;
    pmix_proc_t target;
    pmix_info_t directive;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    bool t = true;

    if (fence("PMIx_Fence(before kill)"))
        return 1;
    if (myproc.rank == 0) {
        PMIX_PROC_LOAD(&target, myproc.nspace, PMIX_RANK_WILDCARD);
        PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_KILL, &t, PMIX_BOOL);
        phase = "PMIx_Job_control(PMIX_JOB_CTRL_KILL)";
        printf("pmixctl: rank 0 asks for the job to be killed\n");
        fflush(stdout);
        rc = PMIx_Job_control(&target, 1, &directive, 1, &results, &nresults);
        PMIX_INFO_DESTRUCT(&directive);
        if (results)
            PMIX_INFO_FREE(results, nresults);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "pmixctl: rank 0: PMIx_Job_control(PMIX_JOB_CTRL_KILL) failed: %s\n",
                    PMIx_Error_string(rc));
            return 2;
        }
    }
    /* The launcher must end us during this sleep. */
    alarm(0);
    sleep(30);
    fprintf(stderr, "pmixctl: rank %u: still alive 30 s after the kill request\n", myproc.rank);
    return 1;
}

static int do_events(void)
{
    pmix_status_t rc, code = PMIXCTL_EVENT;
    int bad = 0;

    phase = "PMIx_Register_event_handler";
    /* Blocking form (no callback): returns the handler id, or an error < 0. */
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "pmixctl: rank %u: PMIx_Register_event_handler failed: %s\n",
                myproc.rank, PMIx_Error_string(rc));
        bad = 1; /* still take part in the fences */
    }
    if (fence("PMIx_Fence(after registering)"))
        return 1;

    if (myproc.rank == 0) {
        phase = "PMIx_Notify_event";
        rc = PMIx_Notify_event(PMIXCTL_EVENT, &myproc, PMIX_RANGE_NAMESPACE, NULL, 0, NULL, NULL);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "pmixctl: rank 0: PMIx_Notify_event failed: %s\n",
                    PMIx_Error_string(rc));
            bad = 1;
        } else {
            printf("pmixctl: rank 0 sent event\n");
        }
    } else {
        /* Wait up to 10 s, polling every 10 ms. */
        struct timespec ts = {0, 10 * 1000 * 1000};
        int i;
        phase = "waiting for the event";
        for (i = 0; i < 1000 && !__atomic_load_n(&got_event, __ATOMIC_SEQ_CST); i++)
            nanosleep(&ts, NULL);
        if (__atomic_load_n(&got_event, __ATOMIC_SEQ_CST)) {
            printf("pmixctl: rank %u got event\n", myproc.rank);
        } else {
            fprintf(stderr, "pmixctl: rank %u: no event %d from rank 0 within 10 s\n",
                    myproc.rank, PMIXCTL_EVENT);
            bad = 1;
        }
    }
    fflush(stdout);
    if (fence("PMIx_Fence(after the event)"))
        return 1;
    return bad;
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    int ret;
    const char *mode = argc > 1 ? argv[1] : "";

    if (strcmp(mode, "log") != 0 && strcmp(mode, "kill") != 0 && strcmp(mode, "events") != 0) {
        fprintf(stderr, "usage: pmixctl log|kill|events\n");
        return 2;
    }
    signal(SIGALRM, on_alarm);
    alarm(60);

    myproc.rank = PMIX_RANK_UNDEF;
    if ((rc = PMIx_Init(&myproc, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "pmixctl: PMIx_Init failed: %s (was this started by a PMIx launcher?)\n",
                PMIx_Error_string(rc));
        return 1;
    }
    if (strcmp(mode, "log") == 0)
        ret = do_log();
    else if (strcmp(mode, "kill") == 0)
        ret = do_kill();
    else
        ret = do_events();
    fflush(stdout);

    phase = "PMIx_Finalize";
    alarm(60);
    PMIx_Finalize(NULL, 0);
    return ret;
}
