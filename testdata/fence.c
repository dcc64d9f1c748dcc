/*
 * fence.c - a PMIx client (not an MPI program) for the collectives that
 * combine along prun's daemon tree.
 *
 * Build: gcc -O2 -Wall fence.c $(pkg-config --cflags --libs pmix)
 *
 *   fence data BYTES [REPS]
 *       Every rank puts BYTES bytes of its own pattern under "fence.blob",
 *       commits, fences once without data (the ranks started at different
 *       times), then REPS times (default 1) with PMIX_COLLECT_DATA;
 *       then it reads the blob of the next rank (from its local copy: no
 *       direct modex) and checks it. Rank 0 prints "fence: N ranks, B bytes
 *       each, R fences in U us" (the time of the fences alone); every rank
 *       prints "fence: rank R ok", or why not (exit 1).
 *
 *   fence lose VICTIM
 *       Every rank but VICTIM prints "fence: rank R waiting" and enters a
 *       fence; VICTIM sleeps (its node is the one the test kills). A fence
 *       that fails prints "fence: rank R failed: STATUS" and exits 3; one
 *       that succeeds prints "fence: rank R passed" and exits 0 (wrong:
 *       VICTIM never entered). SIGTERM is blocked, so that the launcher's
 *       ending of the job cannot hide what the fence returned.
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
    int n = snprintf(buf, sizeof buf, "fence: rank %u: timed out in %s\n", myproc.rank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

static unsigned char pattern(uint32_t rank, size_t i) { return (unsigned char)(rank * 31 + i * 7); }

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static uint32_t job_size(void)
{
    pmix_proc_t wild;
    pmix_value_t *val = NULL;
    uint32_t size = 0;
    PMIX_LOAD_PROCID(&wild, myproc.nspace, PMIX_RANK_WILDCARD);
    if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val) == PMIX_SUCCESS && val) {
        size = val->data.uint32;
        PMIX_VALUE_RELEASE(val);
    }
    return size;
}

static int data(size_t bytes, int reps)
{
    uint32_t size = job_size();
    unsigned char *blob = malloc(bytes ? bytes : 1);
    pmix_value_t v, *got = NULL;
    pmix_proc_t peer;
    pmix_info_t info;
    pmix_status_t rc;
    bool collect = true;
    double t0;
    size_t i;

    for (i = 0; i < bytes; i++)
        blob[i] = pattern(myproc.rank, i);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)blob;
    v.data.bo.size = bytes;
    phase = "PMIx_Put";
    if ((rc = PMIx_Put(PMIX_GLOBAL, "fence.blob", &v)) != PMIX_SUCCESS || (rc = PMIx_Commit()) != PMIX_SUCCESS) {
        printf("fence: rank %u put: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    /* A fence without data first: the ranks start at different times, and
       the timed fences should not measure that. */
    phase = "PMIx_Fence (start)";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        printf("fence: rank %u first fence: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    phase = "PMIx_Fence";
    t0 = now_us();
    for (int r = 0; r < reps; r++) {
        if ((rc = PMIx_Fence(NULL, 0, &info, 1)) != PMIX_SUCCESS) {
            printf("fence: rank %u fence %d: %s\n", myproc.rank, r, PMIx_Error_string(rc));
            return 1;
        }
    }
    if (myproc.rank == 0)
        printf("fence: %u ranks, %zu bytes each, %d fences in %.0f us\n", size, bytes, reps, now_us() - t0);
    if (size > 1) {
        /* The peer's data must be here already: no direct modex. */
        pmix_info_t opt;
        bool immediate = true;
        PMIX_INFO_LOAD(&opt, PMIX_IMMEDIATE, &immediate, PMIX_BOOL);
        PMIX_LOAD_PROCID(&peer, myproc.nspace, (myproc.rank + 1) % size);
        phase = "PMIx_Get";
        if ((rc = PMIx_Get(&peer, "fence.blob", &opt, 1, &got)) != PMIX_SUCCESS || !got) {
            printf("fence: rank %u get of rank %u: %s\n", myproc.rank, peer.rank, PMIx_Error_string(rc));
            return 1;
        }
        if (got->type != PMIX_BYTE_OBJECT || got->data.bo.size != bytes) {
            printf("fence: rank %u: rank %u's blob has %zu bytes, want %zu\n", myproc.rank, peer.rank,
                   got->data.bo.size, bytes);
            return 1;
        }
        for (i = 0; i < bytes; i++)
            if ((unsigned char)got->data.bo.bytes[i] != pattern(peer.rank, i)) {
                printf("fence: rank %u: rank %u's blob differs at byte %zu\n", myproc.rank, peer.rank, i);
                return 1;
            }
        PMIX_VALUE_RELEASE(got);
    }
    printf("fence: rank %u ok\n", myproc.rank);
    return 0;
}

static int lose(uint32_t victim)
{
    pmix_status_t rc;
    if (myproc.rank == victim) {
        phase = "sleep (the victim)";
        sleep(50);
        return 0;
    }
    printf("fence: rank %u waiting\n", myproc.rank);
    fflush(stdout);
    phase = "PMIx_Fence";
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        printf("fence: rank %u failed: %s\n", myproc.rank, PMIx_Error_string(rc));
        fflush(stdout);
        _exit(3); /* PMIx_Finalize would wait for the lost node */
    }
    printf("fence: rank %u passed\n", myproc.rank);
    return 0;
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    int ret = 2;

    signal(SIGALRM, on_alarm);
    alarm(60);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: fence data BYTES [REPS] | fence lose VICTIM\n");
        return 2;
    }
    if (strcmp(argv[1], "lose") == 0) {
        /* Before PMIx_Init: its threads inherit the mask. */
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, NULL);
    }
    if ((rc = PMIx_Init(&myproc, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "fence: PMIx_Init failed: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (strcmp(argv[1], "data") == 0)
        ret = data((size_t)atol(argv[2]), argc > 3 ? atoi(argv[3]) : 1);
    else if (strcmp(argv[1], "lose") == 0)
        ret = lose((uint32_t)atoi(argv[2]));
    phase = "PMIx_Finalize";
    PMIx_Finalize(NULL, 0);
    return ret;
}
