/*
 * spawnloop.c - a PMIx client (not an MPI program) that spawns, connects to
 * and disconnects from one child, CYCLES times, letting each child finish
 * before the next cycle ends: the teardown of a finished spawned job racing
 * the start of the next one (issue 29: a child left in PMIx_Init, its first
 * request never read by the server).
 *
 * Build: gcc -O2 -Wall spawnloop.c $(pkg-config --cflags --libs pmix)
 * Usage: spawnloop CYCLES [HOST]   (the parent, started by the launcher;
 *        with HOST, every child is asked for on that host: PMIX_HOST)
 *
 * The child is this program again, told so by its argv ("child"): it
 * connects to its parent (PMIX_PARENT_ID), disconnects and finalizes.
 * Every cycle the parent waits for the child's "I finalized" datum
 * (published by the child, looked up with PMIX_WAIT), so the child has
 * finished with the server before the next spawn.
 *
 * Output: "spawnloop: N cycles ok" and exit 0; otherwise one line naming
 * the cycle and the call, exit 1. SPAWNLOOP_TIMEOUT (seconds, default 20)
 * is how long one cycle may take before a watchdog names it and exits 2.
 */
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int cycle;
static const char *volatile phase = "PMIx_Init";
static int cycle_timeout = 20;

static void on_alarm(int sig)
{
    char buf[160];
    int n = snprintf(buf, sizeof buf, "spawnloop: cycle %d: timed out after %d s in %s\n", cycle,
                     cycle_timeout, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(2);
}

static int fail(const char *what, pmix_status_t rc)
{
    fprintf(stderr, "spawnloop: cycle %d: %s: %s\n", cycle, what, PMIx_Error_string(rc));
    return 1;
}

static int child(pmix_proc_t *me)
{
    pmix_value_t *v = NULL;
    pmix_proc_t procs[2], wild;
    pmix_info_t info;
    pmix_status_t rc;
    char key[PMIX_MAX_KEYLEN + 1];

    PMIX_PROC_LOAD(&wild, me->nspace, PMIX_RANK_WILDCARD);
    phase = "PMIx_Get(PMIX_PARENT_ID)";
    if ((rc = PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &v)) != PMIX_SUCCESS || v->type != PMIX_PROC)
        return fail("child: PMIx_Get(PMIX_PARENT_ID)", rc);
    PMIX_PROC_LOAD(&procs[0], v->data.proc->nspace, v->data.proc->rank);
    PMIX_VALUE_RELEASE(v);
    PMIX_PROC_LOAD(&procs[1], me->nspace, PMIX_RANK_WILDCARD);
    phase = "PMIx_Connect";
    if ((rc = PMIx_Connect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
        return fail("child: PMIx_Connect", rc);
    phase = "PMIx_Disconnect";
    if ((rc = PMIx_Disconnect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
        return fail("child: PMIx_Disconnect", rc);
    snprintf(key, sizeof key, "spawnloop.%s", me->nspace);
    PMIX_INFO_LOAD(&info, key, "done", PMIX_STRING);
    phase = "PMIx_Publish";
    if ((rc = PMIx_Publish(&info, 1)) != PMIX_SUCCESS)
        return fail("child: PMIx_Publish", rc);
    PMIX_INFO_DESTRUCT(&info);
    phase = "PMIx_Finalize";
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS)
        return fail("child: PMIx_Finalize", rc);
    return 0;
}

int main(int argc, char **argv)
{
    pmix_proc_t me, procs[2];
    pmix_status_t rc;
    int cycles;
    const char *e;

    if (argc < 2) {
        fprintf(stderr, "usage: spawnloop CYCLES [HOST]\n");
        return 1;
    }
    if ((e = getenv("SPAWNLOOP_TIMEOUT")) && atoi(e) > 0)
        cycle_timeout = atoi(e);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)cycle_timeout);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS)
        return fail("PMIx_Init", rc);
    if (strcmp(argv[1], "child") == 0) {
        int r = child(&me);
        alarm(0);
        return r;
    }
    cycles = atoi(argv[1]);
    for (cycle = 1; cycle <= cycles; cycle++) {
        pmix_app_t app;
        pmix_nspace_t cns;
        pmix_pdata_t pd;
        pmix_info_t wait[2];
        int nwait = 1, tmo = cycle_timeout;
        char *cargv[] = {argv[0], "child", NULL};

        alarm((unsigned)cycle_timeout);
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = strdup(argv[0]);
        app.argv = calloc(3, sizeof(char *));
        app.argv[0] = strdup(cargv[0]);
        app.argv[1] = strdup(cargv[1]);
        app.maxprocs = 1;
        if (argc > 2) {
            PMIX_INFO_CREATE(app.info, 1);
            app.ninfo = 1;
            PMIX_INFO_LOAD(&app.info[0], PMIX_HOST, argv[2], PMIX_STRING);
        }
        phase = "PMIx_Spawn";
        rc = PMIx_Spawn(NULL, 0, &app, 1, cns);
        PMIX_APP_DESTRUCT(&app);
        if (rc != PMIX_SUCCESS)
            return fail("PMIx_Spawn", rc);
        PMIX_PROC_LOAD(&procs[0], me.nspace, me.rank);
        PMIX_PROC_LOAD(&procs[1], cns, PMIX_RANK_WILDCARD);
        phase = "PMIx_Connect";
        if ((rc = PMIx_Connect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
            return fail("PMIx_Connect", rc);
        phase = "PMIx_Disconnect";
        if ((rc = PMIx_Disconnect(procs, 2, NULL, 0)) != PMIX_SUCCESS)
            return fail("PMIx_Disconnect", rc);
        /* The child's last word before PMIx_Finalize. */
        PMIX_PDATA_CONSTRUCT(&pd);
        snprintf(pd.key, sizeof pd.key, "spawnloop.%s", cns);
        PMIX_INFO_LOAD(&wait[0], PMIX_WAIT, &nwait, PMIX_INT);
        PMIX_INFO_LOAD(&wait[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
        phase = "PMIx_Lookup(the child's last word)";
        if ((rc = PMIx_Lookup(&pd, 1, wait, 2)) != PMIX_SUCCESS)
            return fail("PMIx_Lookup", rc);
        PMIX_PDATA_DESTRUCT(&pd);
    }
    alarm(0);
    phase = "PMIx_Finalize";
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS)
        return fail("PMIx_Finalize", rc);
    printf("spawnloop: %d cycles ok\n", cycles);
    return 0;
}
