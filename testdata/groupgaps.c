/*
 * groupgaps.c - a PMIx client (not an MPI program) for the ways a PMIx
 * group operation can be left waiting for a member: a destruct that a
 * member does not join in time, and a member that ends normally without
 * taking part.
 *
 * Build: gcc -O2 -Wall groupgaps.c $(pkg-config --cflags --libs pmix)
 *
 *   groupgaps destruct-timeout LATE
 *       Every rank constructs group "dt" of every rank (with a context id);
 *       LATE then sleeps 6 s while the others destruct it with PMIX_TIMEOUT
 *       2: they print "groupgaps: rank R destruct: STATUS in S s" (want
 *       TIMEOUT within a few seconds). Every rank then fences (LATE after
 *       its sleep) and prints "groupgaps: rank R ok".
 *
 *   groupgaps quit QUIT
 *       Every rank fences; QUIT then finalizes and exits 0, the others
 *       construct group "gone" of every rank (with a context id, no
 *       timeout) and print "groupgaps: rank R construct: STATUS in S s";
 *       after a failed construct they fence among themselves (QUIT left
 *       out) and exit 3; one that succeeds prints "passed" (wrong).
 *
 *   groupgaps quit-destruct QUIT
 *       Every rank constructs group "left" of every rank; QUIT then
 *       finalizes and exits 0, the others destruct it (no timeout) and
 *       print "groupgaps: rank R destruct: STATUS in S s"; after a failed
 *       destruct they fence among themselves and exit 3.
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

static pmix_proc_t myproc;
static const char *volatile phase = "PMIx_Init";

static void on_alarm(int sig)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "groupgaps: rank %u: timed out in %s\n", myproc.rank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* everyone returns the job's ranks as procs (its size in *n). */
static pmix_proc_t *everyone(size_t *n)
{
    pmix_proc_t wild, *procs;
    pmix_value_t *val = NULL;
    uint32_t size = 0;
    PMIX_LOAD_PROCID(&wild, myproc.nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val) == PMIX_SUCCESS && val) {
        size = val->data.uint32;
        PMIX_VALUE_RELEASE(val);
    }
    procs = calloc(size ? size : 1, sizeof *procs);
    for (uint32_t r = 0; r < size; r++)
        PMIX_LOAD_PROCID(&procs[r], myproc.nspace, r);
    *n = size;
    return procs;
}

static int construct(const char *grp, pmix_proc_t *procs, size_t n)
{
    pmix_info_t info, *results = NULL;
    size_t nresults = 0;
    bool yes = true;
    pmix_status_t rc;
    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    phase = "PMIx_Group_construct";
    if ((rc = PMIx_Group_construct(grp, procs, n, &info, 1, &results, &nresults)) != PMIX_SUCCESS) {
        printf("groupgaps: rank %u construct %s: %s\n", myproc.rank, grp, PMIx_Error_string(rc));
        return 1;
    }
    return 0;
}

static int fence(void)
{
    pmix_status_t rc;
    phase = "PMIx_Fence";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        printf("groupgaps: rank %u fence: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    return 0;
}

static int destruct_timeout(uint32_t late)
{
    size_t n;
    pmix_proc_t *procs = everyone(&n);
    pmix_info_t info;
    int secs = 2;
    double t0;
    pmix_status_t rc;

    if (construct("dt", procs, n))
        return 1;
    if (myproc.rank == late) {
        phase = "sleep";
        sleep(6);
    } else {
        PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &secs, PMIX_INT);
        t0 = now();
        phase = "PMIx_Group_destruct(dt, PMIX_TIMEOUT)";
        rc = PMIx_Group_destruct("dt", &info, 1);
        printf("groupgaps: rank %u destruct: %s in %.0f s\n", myproc.rank, PMIx_Error_string(rc), now() - t0);
        if (rc == PMIX_SUCCESS)
            return 1;
    }
    if (fence())
        return 1;
    printf("groupgaps: rank %u ok\n", myproc.rank);
    return 0;
}

static int quit(uint32_t who, int destruct)
{
    size_t n;
    pmix_proc_t *procs = everyone(&n);
    const char *grp = destruct ? "left" : "gone";
    double t0;
    pmix_status_t rc;

    if (destruct ? construct(grp, procs, n) : fence())
        return 1;
    if (myproc.rank == who) {
        /* A normal end, without taking part. */
        fflush(stdout);
        PMIx_Finalize(NULL, 0);
        exit(0);
    }
    t0 = now();
    if (destruct) {
        phase = "PMIx_Group_destruct(left)";
        rc = PMIx_Group_destruct(grp, NULL, 0);
    } else {
        pmix_info_t info, *results = NULL;
        size_t nresults = 0;
        bool yes = true;
        PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
        phase = "PMIx_Group_construct(gone)";
        rc = PMIx_Group_construct(grp, procs, n, &info, 1, &results, &nresults);
    }
    printf("groupgaps: rank %u %s: %s in %.0f s\n", myproc.rank, destruct ? "destruct" : "construct",
           PMIx_Error_string(rc), now() - t0);
    fflush(stdout);
    if (rc != PMIX_SUCCESS) {
        /* The first failed end would end the job (and, a member's failure,
         * fail the others' operation): the survivors wait for each other. */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (procs[i].rank != who)
                procs[k++] = procs[i];
        phase = "PMIx_Fence(survivors)";
        if ((rc = PMIx_Fence(procs, k, NULL, 0)) != PMIX_SUCCESS)
            printf("groupgaps: rank %u survivors' fence: %s\n", myproc.rank, PMIx_Error_string(rc));
        _exit(3);
    }
    printf("groupgaps: rank %u passed\n", myproc.rank);
    return 0;
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    int ret = 2;

    signal(SIGALRM, on_alarm);
    alarm(60);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((rc = PMIx_Init(&myproc, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "groupgaps: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (argc == 3 && strcmp(argv[1], "destruct-timeout") == 0)
        ret = destruct_timeout((uint32_t)atoi(argv[2]));
    else if (argc == 3 && strcmp(argv[1], "quit") == 0)
        ret = quit((uint32_t)atoi(argv[2]), 0);
    else if (argc == 3 && strcmp(argv[1], "quit-destruct") == 0)
        ret = quit((uint32_t)atoi(argv[2]), 1);
    else
        fprintf(stderr, "usage: groupgaps destruct-timeout LATE | quit QUIT | quit-destruct QUIT\n");
    PMIx_Finalize(NULL, 0);
    return ret;
}
