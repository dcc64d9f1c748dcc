/*
 * ckpt.c - a PMIx client: every rank declares itself preemptible and how it
 * wants to be told to checkpoint (PMIx_Job_control_nb with
 * PMIX_JOB_CTRL_PREEMPTIBLE and PMIX_JOB_CTRL_CHECKPOINT_SIGNAL = SIGUSR2 on
 * even ranks, PMIX_JOB_CTRL_CHECKPOINT_EVENT on odd ones); after a fence,
 * rank 0 asks for a checkpoint of the whole job (PMIX_JOB_CTRL_CHECKPOINT),
 * and every rank waits for its own trigger.
 * With the argument "wildcard", rank 0 alone declares the signal method for
 * the whole namespace (the wildcard rank: every rank, on every node), and
 * every rank expects the signal.
 *
 * Build: gcc -O2 -Wall ckpt.c $(pkg-config --cflags --libs pmix)
 * Output: "ckpt: rank R got the signal|event" and exit 0; a failed call or
 * no trigger within 20 s: one line naming it, exit 1.
 */
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal, got_event;
static pmix_proc_t me;

static void on_usr2(int sig) { (void)sig; got_signal = 1; }

static void on_ckpt(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                    size_t ninfo, pmix_info_t results[], size_t nresults,
                    pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)status; (void)source; (void)info; (void)ninfo; (void)results; (void)nresults;
    got_event = 1;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

struct op { volatile int done; pmix_status_t st; };

static void jcdone(pmix_status_t st, pmix_info_t *info, size_t ninfo, void *cbdata,
                   pmix_release_cbfunc_t rel, void *relcb)
{
    struct op *o = cbdata;
    (void)info; (void)ninfo;
    o->st = st;
    o->done = 1;
    if (rel)
        rel(relcb);
}

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "ckpt: rank %u: %s: %s\n", me.rank, what, PMIx_Error_string(rc));
    return 1;
}

int main(int argc, char **argv)
{
    pmix_status_t rc, code = PMIX_JCTRL_CHECKPOINT;
    pmix_info_t dirs[2];
    pmix_proc_t wild;
    struct op o = {0, 0};
    bool t = true;
    int sig = SIGUSR2;
    int wildcard = argc > 1 && strcmp(argv[1], "wildcard") == 0;

    signal(SIGUSR2, on_usr2);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS)
        return fail("PMIx_Init", rc);
    PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_ckpt, NULL, NULL);
    if (rc < 0)
        return fail("PMIx_Register_event_handler", rc);

    PMIX_INFO_LOAD(&dirs[0], PMIX_JOB_CTRL_PREEMPTIBLE, &t, PMIX_BOOL);
    if (me.rank % 2 == 0 || wildcard)
        PMIX_INFO_LOAD(&dirs[1], PMIX_JOB_CTRL_CHECKPOINT_SIGNAL, &sig, PMIX_INT);
    else
        PMIX_INFO_LOAD(&dirs[1], PMIX_JOB_CTRL_CHECKPOINT_EVENT, &t, PMIX_BOOL);
    if (wildcard && me.rank != 0)
        o.done = 1;
    else if ((rc = PMIx_Job_control_nb(wildcard ? &wild : &me, 1, dirs, 2, jcdone, &o)) != PMIX_SUCCESS)
        return fail("PMIx_Job_control_nb(preemptible)", rc);
    for (int i = 0; i < 2000 && !o.done; i++)
        usleep(10000);
    if (!o.done)
        return fail("PMIx_Job_control_nb(preemptible)", PMIX_ERR_TIMEOUT);
    if (o.st != PMIX_SUCCESS)
        return fail("PMIx_Job_control_nb(preemptible)", o.st);

    if ((rc = PMIx_Fence(&wild, 1, NULL, 0)) != PMIX_SUCCESS)
        return fail("PMIx_Fence", rc);
    if (me.rank == 0) {
        pmix_info_t ck;
        pmix_info_t *res = NULL;
        size_t nres = 0;
        PMIX_INFO_LOAD(&ck, PMIX_JOB_CTRL_CHECKPOINT, "ckpt-1", PMIX_STRING);
        if ((rc = PMIx_Job_control(&wild, 1, &ck, 1, &res, &nres)) != PMIX_SUCCESS)
            return fail("PMIx_Job_control(checkpoint)", rc);
    }
    for (int i = 0; i < 2000 && !got_signal && !got_event; i++)
        usleep(10000);
    if ((me.rank % 2 == 0 || wildcard) && !got_signal)
        return fail("waiting for SIGUSR2", PMIX_ERR_TIMEOUT);
    if (me.rank % 2 == 1 && !wildcard && !got_event)
        return fail("waiting for PMIX_JCTRL_CHECKPOINT", PMIX_ERR_TIMEOUT);
    printf("ckpt: rank %u got the %s\n", me.rank, got_signal ? "signal" : "event");
    fflush(stdout);
    PMIx_Fence(&wild, 1, NULL, 0);
    PMIx_Finalize(NULL, 0);
    return 0;
}
