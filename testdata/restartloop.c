/*
 * restartloop.c - a PMIx client that fails right after PMIx_Init, so that
 * the launcher starts it again (--max-restarts), TIMES times, then
 * succeeds: every incarnation's connection to the server ends while the
 * next one's begins (issue 29: a restarted rank left in PMIx_Init when the
 * server closed the previous incarnation's socket behind libpmix's event
 * loop and the new connection got the same descriptor number).
 *
 * Build: gcc -O2 -Wall restartloop.c $(pkg-config --cflags --libs pmix)
 * Usage: restartloop TIMES COUNTFILE   (under prun --max-restarts TIMES)
 *
 * COUNTFILE counts the incarnations (it need not exist at first). The
 * incarnation numbered TIMES prints "restartloop: rank R ok after N
 * restarts" and exits 0; the earlier ones exit 3 without PMIx_Finalize.
 * RESTARTLOOP_TIMEOUT (seconds, default 20) bounds one incarnation: a
 * watchdog names the call it hung in and exits 2 (not restarted only once
 * the restarts are used up, so a hang shows as a run that never ends well).
 */
#include <pmix.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *volatile phase = "PMIx_Init";
static int n;

static void on_alarm(int sig)
{
    char buf[160];
    int k = snprintf(buf, sizeof buf, "restartloop: incarnation %d: timed out in %s\n", n, phase);
    (void)sig;
    if (k > 0)
        (void)!write(2, buf, (size_t)k);
    _exit(2);
}

int main(int argc, char **argv)
{
    pmix_proc_t me, wild;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    int times, tmo = 20;
    const char *e;
    FILE *f;

    if (argc < 3) {
        fprintf(stderr, "usage: restartloop TIMES COUNTFILE\n");
        return 1;
    }
    times = atoi(argv[1]);
    if ((e = getenv("RESTARTLOOP_TIMEOUT")) && atoi(e) > 0)
        tmo = atoi(e);
    if ((f = fopen(argv[2], "r"))) {
        if (fscanf(f, "%d", &n) != 1)
            n = 0;
        fclose(f);
    }
    if (!(f = fopen(argv[2], "w")) || fprintf(f, "%d\n", n + 1) < 0 || fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    signal(SIGALRM, on_alarm);
    alarm((unsigned)tmo);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "restartloop: incarnation %d: PMIx_Init: %s\n", n, PMIx_Error_string(rc));
        return 1;
    }
    if (n < times)
        _exit(3); /* fail with the connection open: the next incarnation follows */
    phase = "PMIx_Get(PMIX_JOB_SIZE)";
    PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
    if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v)) != PMIX_SUCCESS) {
        fprintf(stderr, "restartloop: incarnation %d: PMIx_Get: %s\n", n, PMIx_Error_string(rc));
        return 1;
    }
    PMIX_VALUE_RELEASE(v);
    phase = "PMIx_Finalize";
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "restartloop: incarnation %d: PMIx_Finalize: %s\n", n, PMIx_Error_string(rc));
        return 1;
    }
    printf("restartloop: rank %u ok after %d restarts\n", me.rank, n);
    return 0;
}
