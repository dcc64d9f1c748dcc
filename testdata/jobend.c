/*
 * jobend.c - PMIX_EVENT_JOB_END as a spawner and as a tool hear it
 * (issue 29: a spawner that registered for its child's end waited forever).
 *
 * Build: gcc -O2 -Wall jobend.c $(pkg-config --cflags --libs pmix)
 *
 *   jobend spawn NP [HOST]
 *       A client (started by the launcher): spawns NP copies of itself
 *       ("child"; on HOST with PMIX_HOST), registers for PMIX_EVENT_JOB_END
 *       filtered on the child's namespace (PMIX_EVENT_AFFECTED_PROC), then
 *       lets the children finish (it publishes "go", they look it up with
 *       PMIX_WAIT: the job cannot end before the registration). Prints
 *       "jobend: parent heard CHILD end: status S exit E" and exits 0.
 *       Without HOST (the child on the parent's node) it then waits up to
 *       10 s for the child's session directory (beside its own PMIX_NSDIR)
 *       to go: "jobend: child's session directory removed" or "... kept".
 *   jobend tool URI NSPACE [FILE]
 *       A tool attached to the server at URI: registers for
 *       PMIX_EVENT_JOB_END (every job), prints "jobend: tool registered"
 *       (and creates FILE, when given), and waits for the end of NSPACE:
 *       "jobend: tool heard NSPACE end: status S exit E", exit 0.
 *
 * A SIGALRM watchdog (JOBEND_TIMEOUT seconds, default 60) names the wait
 * and exits 2: without the event, both wait forever.
 */
#include <pmix.h>
#include <pmix_tool.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *volatile phase = "init";

static void on_alarm(int sig)
{
    char buf[200];
    int n = snprintf(buf, sizeof buf, "jobend: timed out in %s\n", phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(2);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char want[PMIX_MAX_NSLEN + 1];
static int heard, term_status = -999, exit_code = -999;

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id, (void)source, (void)results, (void)nresults;
    const char *ns = NULL;
    int ts = -999, ec = -999;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            ns = info[i].value.data.proc->nspace;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_JOB_TERM_STATUS) && info[i].value.type == PMIX_STATUS)
            ts = info[i].value.data.status;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EXIT_CODE) && info[i].value.type == PMIX_INT)
            ec = info[i].value.data.integer;
    }
    if (status == PMIX_EVENT_JOB_END && ns != NULL) {
        pthread_mutex_lock(&mu);
        if (strcmp(ns, want) == 0 && !heard) {
            heard = 1, term_status = ts, exit_code = ec;
            pthread_cond_signal(&cv);
        }
        pthread_mutex_unlock(&mu);
    }
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void wait_heard(void)
{
    pthread_mutex_lock(&mu);
    while (!heard)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "jobend: %s: %s\n", what, PMIx_Error_string(rc));
    return 1;
}

static int child(void)
{
    pmix_pdata_t pd;
    pmix_info_t wait;
    pmix_status_t rc;
    bool yes = true;

    PMIX_PDATA_CONSTRUCT(&pd);
    PMIX_LOAD_KEY(pd.key, "jobend.go");
    PMIX_INFO_LOAD(&wait, PMIX_WAIT, &yes, PMIX_BOOL);
    phase = "child: PMIx_Lookup(jobend.go)";
    if ((rc = PMIx_Lookup(&pd, 1, &wait, 1)) != PMIX_SUCCESS)
        return fail(phase, rc);
    return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
}

static int spawner(pmix_proc_t *me, int np, const char *host, const char *self)
{
    pmix_app_t app;
    pmix_info_t jinfo, reg[2], go;
    pmix_proc_t affected;
    pmix_status_t rc, code = PMIX_EVENT_JOB_END;
    char nspace[PMIX_MAX_NSLEN + 1];
    size_t nreg = 1;

    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup(self);
    PMIX_ARGV_APPEND(rc, app.argv, self);
    PMIX_ARGV_APPEND(rc, app.argv, "child");
    app.maxprocs = np;
    if (host != NULL) {
        PMIX_INFO_CREATE(app.info, 1);
        app.ninfo = 1;
        PMIX_INFO_LOAD(&app.info[0], PMIX_HOST, host, PMIX_STRING);
    }
    phase = "PMIx_Spawn";
    if ((rc = PMIx_Spawn(NULL, 0, &app, 1, nspace)) != PMIX_SUCCESS)
        return fail(phase, rc);
    (void)jinfo;
    pthread_mutex_lock(&mu);
    snprintf(want, sizeof want, "%s", nspace);
    pthread_mutex_unlock(&mu);
    PMIX_PROC_LOAD(&affected, nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&reg[0], PMIX_EVENT_AFFECTED_PROC, &affected, PMIX_PROC);
    phase = "PMIx_Register_event_handler(PMIX_EVENT_JOB_END)";
    if ((rc = PMIx_Register_event_handler(&code, 1, reg, nreg, on_event, NULL, NULL)) < 0)
        return fail(phase, rc);
    PMIX_INFO_LOAD(&go, "jobend.go", "yes", PMIX_STRING);
    phase = "PMIx_Publish(jobend.go)";
    if ((rc = PMIx_Publish(&go, 1)) != PMIX_SUCCESS)
        return fail(phase, rc);
    phase = "waiting for PMIX_EVENT_JOB_END of the child";
    wait_heard();
    printf("jobend: parent heard %s end: status %d exit %d\n", nspace, term_status, exit_code);
    fflush(stdout);
    pmix_value_t *dir = NULL;
    pmix_proc_t job;
    PMIX_PROC_LOAD(&job, me->nspace, PMIX_RANK_WILDCARD);
    if (host == NULL && PMIx_Get(&job, PMIX_NSDIR, NULL, 0, &dir) == PMIX_SUCCESS && dir->type == PMIX_STRING) {
        char child[4096];
        snprintf(child, sizeof child, "%s", dir->data.string);
        char *slash = strrchr(child, '/');
        if (slash != NULL)
            snprintf(slash + 1, sizeof child - (slash + 1 - child), "%s", nspace);
        int gone = 0;
        for (int i = 0; i < 100 && !gone; i++) {
            gone = access(child, F_OK) != 0;
            if (!gone)
                usleep(100000);
        }
        printf("jobend: child's session directory %s\n", gone ? "removed" : "kept");
        fflush(stdout);
        PMIX_VALUE_RELEASE(dir);
    }
    return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
}

static int tool(const char *uri, const char *nspace, const char *file)
{
    pmix_proc_t me;
    pmix_info_t info[2];
    pmix_status_t rc, code = PMIX_EVENT_JOB_END;
    bool no = false;

    snprintf(want, sizeof want, "%s", nspace);
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, uri, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_CONNECT_TO_SYSTEM, &no, PMIX_BOOL);
    phase = "PMIx_tool_init";
    if ((rc = PMIx_tool_init(&me, info, 2)) != PMIX_SUCCESS)
        return fail(phase, rc);
    phase = "PMIx_Register_event_handler(PMIX_EVENT_JOB_END)";
    if ((rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL)) < 0)
        return fail(phase, rc);
    printf("jobend: tool registered\n");
    fflush(stdout);
    if (file != NULL) {
        FILE *f = fopen(file, "w");
        if (f != NULL)
            fclose(f);
    }
    phase = "waiting for PMIX_EVENT_JOB_END";
    wait_heard();
    printf("jobend: tool heard %s end: status %d exit %d\n", nspace, term_status, exit_code);
    fflush(stdout);
    PMIx_tool_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;
    const char *t = getenv("JOBEND_TIMEOUT");

    signal(SIGALRM, on_alarm);
    alarm(t != NULL ? (unsigned)atoi(t) : 60);
    if (argc >= 4 && strcmp(argv[1], "tool") == 0)
        return tool(argv[2], argv[3], argc > 4 ? argv[4] : NULL);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS)
        return fail("PMIx_Init", rc);
    if (argc >= 2 && strcmp(argv[1], "child") == 0)
        return child();
    if (argc >= 3 && strcmp(argv[1], "spawn") == 0)
        return spawner(&me, atoi(argv[2]), argc > 3 ? argv[3] : NULL, argv[0]);
    fprintf(stderr, "usage: jobend spawn NP [HOST] | jobend tool URI NSPACE [FILE]\n");
    return 2;
}
