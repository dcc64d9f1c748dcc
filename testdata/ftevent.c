/*
 * ftevent.c - a fault-tolerant PMIx client: one rank dies, the others hear
 * it (PMIX_EVENT_PROC_TERMINATED or PMIX_ERR_PROC_ABORTED) and finish
 * normally (issue 29; run under --enable-recovery).
 *
 * Build: gcc -O2 -Wall ftevent.c $(pkg-config --cflags --libs pmix)
 * Usage: ftevent VICTIM [CODE]
 *
 * Every rank registers for both events, then fences (so every handler is
 * in place before anyone dies). Rank VICTIM then exits with CODE (default
 * 3) without finalizing; the others wait for an event whose
 * PMIX_EVENT_AFFECTED_PROC is the victim and print
 * "ftevent: rank R heard rank V end: EVENT exit E" (EVENT as
 * PMIx_Error_string names it), finalize, exit 0.
 * A SIGALRM watchdog (FTEVENT_TIMEOUT seconds, default 60) names the wait
 * and exits 2.
 */
#include <pmix.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *volatile phase = "PMIx_Init";
static pmix_proc_t me;

static void on_alarm(int sig)
{
    char buf[200];
    int n = snprintf(buf, sizeof buf, "ftevent: rank %u: timed out in %s\n", me.rank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(2);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int heard, victim, exit_code = -999;
static pmix_status_t heard_code;

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)source, (void)results, (void)nresults;
    const pmix_proc_t *p = NULL;
    int ec = -999;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            p = info[i].value.data.proc;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
            ec = info[i].value.data.integer;
    }
    pthread_mutex_lock(&mu);
    if (p != NULL && PMIX_CHECK_NSPACE(p->nspace, me.nspace) && p->rank == (pmix_rank_t)victim && !heard) {
        heard = 1, heard_code = status, exit_code = ec;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

int main(int argc, char **argv)
{
    pmix_status_t rc, codes[2] = {PMIX_EVENT_PROC_TERMINATED, PMIX_ERR_PROC_ABORTED};
    const char *t = getenv("FTEVENT_TIMEOUT");

    if (argc < 2) {
        fprintf(stderr, "usage: ftevent VICTIM [CODE]\n");
        return 2;
    }
    victim = atoi(argv[1]);
    signal(SIGALRM, on_alarm);
    alarm(t != NULL ? (unsigned)atoi(t) : 60);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "ftevent: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    phase = "PMIx_Register_event_handler";
    if ((rc = PMIx_Register_event_handler(codes, 2, NULL, 0, on_event, NULL, NULL)) < 0) {
        fprintf(stderr, "ftevent: rank %u: %s: %s\n", me.rank, phase, PMIx_Error_string(rc));
        return 1;
    }
    phase = "PMIx_Fence";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "ftevent: rank %u: %s: %s\n", me.rank, phase, PMIx_Error_string(rc));
        return 1;
    }
    if (me.rank == (pmix_rank_t)victim)
        _exit(argc > 2 ? atoi(argv[2]) : 3);
    phase = "waiting for the victim's end";
    pthread_mutex_lock(&mu);
    while (!heard)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    printf("ftevent: rank %u heard rank %d end: %s exit %d\n", me.rank, victim, PMIx_Error_string(heard_code),
           exit_code);
    fflush(stdout);
    phase = "PMIx_Finalize";
    return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
}
