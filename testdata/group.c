/*
 * group.c - a PMIx client (not an MPI program) for PMIx groups: construct
 * and destruct, blocking and not, through prun's host.
 *
 * Build: gcc -O2 -Wall group.c $(pkg-config --cflags --libs pmix)
 *
 *   group ok
 *       Every rank puts "grp.blob" ("blob-R"), commits, and constructs
 *       group "all" of every rank (blocking, PMIX_GROUP_ASSIGN_CONTEXT_ID,
 *       PMIX_GROUP_INFO with its PMIX_GROUP_LOCAL_CID 1000+R), then group
 *       "half-P" of the ranks of its parity P (non-blocking, a context id
 *       too). It prints "group: rank R all cid C" and "group: rank R half-P
 *       cid C" with the context ids it got, reads the next member's blob
 *       from its own copy (PMIX_IMMEDIATE: the construct brought it) and its
 *       local context id (qualified by the group's context id), destructs
 *       half-P (non-blocking) and all (blocking), and prints "group: rank R
 *       ok", or why not (exit 1).
 *
 *   group die VICTIM
 *       Every rank fences; VICTIM then exits with status 7, the others
 *       construct group "doomed" of every rank (with a context id). A
 *       construct that fails prints "group: rank R construct failed: STATUS"
 *       and exits 3; one that succeeds prints "group: rank R passed" (wrong).
 *
 *   group die-destruct VICTIM
 *       Every rank constructs group "brief" of every rank (with a context
 *       id); VICTIM then exits with status 7, the others destruct the group.
 *       A destruct that fails prints "group: rank R destruct failed: STATUS"
 *       and exits 3; one that succeeds prints "group: rank R passed" (wrong).
 *
 *   group notify VICTIM
 *       Every rank registers for PMIX_GROUP_MEMBER_FAILED and constructs
 *       group "watch" of every rank with PMIX_GROUP_NOTIFY_TERMINATION (and
 *       a context id); VICTIM then exits with status 7; the others wait for
 *       the event and print "group: rank R heard rank V left group G".
 *       With GROUP_READY=FILE rank 0 creates FILE once the group exists;
 *       with GROUP_GO=FILE VICTIM waits for FILE to exist before it exits.
 *
 *   group watch-destruct
 *       Every rank constructs group "watch" of every rank with
 *       PMIX_GROUP_NOTIFY_TERMINATION, destructs it, and prints "group: rank
 *       R watch destructed" (another job's group of that name must live on).
 *
 *   group timeout LATE
 *       Every rank fences; LATE then sleeps 6 s while the others construct
 *       group "late" of every rank with PMIX_TIMEOUT 2 (and a context id):
 *       they print "group: rank R first construct: STATUS in S s" (want
 *       TIMEOUT within a few seconds). Then every rank, LATE included,
 *       constructs group "late" again (PMIX_TIMEOUT 30, a context id) and
 *       destructs it ("group: rank R late cid C"), constructs group "quick"
 *       (no context id) and destructs it, both with PMIX_TIMEOUT 2, fences
 *       after 3 s (the timers of what completed must not fire), and prints
 *       "group: rank R ok".
 *
 *   group invite
 *       Rank 0 invites every rank, itself included, into group "inv"
 *       (PMIx_Group_invite); each other waits for PMIX_GROUP_INVITED, joins
 *       (PMIx_Group_join, accept) and waits for the inviter's announcement
 *       of the group (PMIX_GROUP_CONSTRUCT_COMPLETE).
 *       The last rank L then leaves (PMIx_Group_leave); the others wait for
 *       PMIX_GROUP_LEFT from it and destruct "inv" (which must not wait for
 *       L). They print "group: rank 0 invite: STATUS", "group: rank R join:
 *       STATUS", "group: rank L leave: STATUS", "group: rank R heard rank L
 *       left inv" and "group: rank R destruct without L: STATUS".
 *
 *   group invite-timeout
 *       Rank 0 invites rank 1, which never answers, with PMIX_TIMEOUT 2 and
 *       prints "group: rank 0 invite with timeout: STATUS in S s" (want
 *       TIMEOUT in about 2 s; a client library that ignores the timeout holds
 *       it until the watchdog); then both fence.
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
    int n = snprintf(buf, sizeof buf, "group: rank %u: timed out in %s\n", myproc.rank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
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

/* members fills procs with the ranks r of the job with r % step == first. */
static size_t members(pmix_proc_t *procs, uint32_t size, uint32_t first, uint32_t step)
{
    size_t n = 0;
    for (uint32_t r = first; r < size; r += step, n++)
        PMIX_LOAD_PROCID(&procs[n], myproc.nspace, r); /* a macro: its arguments are evaluated more than once */
    return n;
}

/* cidOf returns the PMIX_GROUP_CONTEXT_ID among a construct's results. */
static size_t cidOf(pmix_info_t *results, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (PMIX_CHECK_KEY(&results[i], PMIX_GROUP_CONTEXT_ID))
            return results[i].value.data.size;
    return SIZE_MAX;
}

static volatile int nb_done;
static pmix_status_t nb_status;
static size_t nb_cid = SIZE_MAX;

static void construct_cb(pmix_status_t status, pmix_info_t *info, size_t ninfo, void *cbdata,
                         pmix_release_cbfunc_t release, void *relcbdata)
{
    (void)cbdata;
    nb_status = status;
    nb_cid = cidOf(info, ninfo);
    if (release)
        release(relcbdata);
    __atomic_store_n(&nb_done, 1, __ATOMIC_SEQ_CST);
}

static void op_cb(pmix_status_t status, void *cbdata)
{
    (void)cbdata;
    nb_status = status;
    __atomic_store_n(&nb_done, 1, __ATOMIC_SEQ_CST);
}

static void wait_nb(void)
{
    while (!__atomic_load_n(&nb_done, __ATOMIC_SEQ_CST))
        usleep(1000);
    nb_done = 0;
}

static int ok(void)
{
    uint32_t size = job_size(), next = (myproc.rank + 1) % size;
    pmix_proc_t *procs = calloc(size, sizeof *procs);
    pmix_info_t info[2], *results = NULL, qual, opt;
    pmix_value_t v, *got = NULL;
    pmix_data_array_t darray;
    pmix_info_t lcid;
    size_t nresults = 0, n, cid, mylcid = 1000 + myproc.rank;
    bool yes = true;
    char blob[32], want[32], half[16];
    pmix_status_t rc;

    snprintf(blob, sizeof blob, "blob-%u", myproc.rank);
    v.type = PMIX_STRING;
    v.data.string = blob;
    phase = "PMIx_Put";
    if ((rc = PMIx_Put(PMIX_GLOBAL, "grp.blob", &v)) != PMIX_SUCCESS || (rc = PMIx_Commit()) != PMIX_SUCCESS) {
        printf("group: rank %u put: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }

    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&lcid, PMIX_GROUP_LOCAL_CID, &mylcid, PMIX_SIZE);
    darray.type = PMIX_INFO;
    darray.size = 1;
    darray.array = &lcid;
    PMIX_INFO_LOAD(&info[1], PMIX_GROUP_INFO, &darray, PMIX_DATA_ARRAY);
    n = members(procs, size, 0, 1);
    phase = "PMIx_Group_construct(all)";
    if ((rc = PMIx_Group_construct("all", procs, n, info, 2, &results, &nresults)) != PMIX_SUCCESS) {
        printf("group: rank %u construct all: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    cid = cidOf(results, nresults);
    printf("group: rank %u all cid %zu\n", myproc.rank, cid);
    if (cid == SIZE_MAX) {
        printf("group: rank %u: no context id\n", myproc.rank);
        return 1;
    }

    snprintf(half, sizeof half, "half-%u", myproc.rank % 2);
    n = members(procs, size, myproc.rank % 2, 2);
    phase = "PMIx_Group_construct_nb(half)";
    if ((rc = PMIx_Group_construct_nb(half, procs, n, info, 1, construct_cb, NULL)) != PMIX_SUCCESS) {
        printf("group: rank %u construct_nb %s: %s\n", myproc.rank, half, PMIx_Error_string(rc));
        return 1;
    }
    wait_nb();
    if (nb_status != PMIX_SUCCESS) {
        printf("group: rank %u construct_nb %s: %s\n", myproc.rank, half, PMIx_Error_string(nb_status));
        return 1;
    }
    printf("group: rank %u %s cid %zu\n", myproc.rank, half, nb_cid);

    /* The construct brought every member's data: no direct modex. */
    PMIX_INFO_LOAD(&opt, PMIX_IMMEDIATE, &yes, PMIX_BOOL);
    PMIX_LOAD_PROCID(&procs[0], myproc.nspace, next);
    phase = "PMIx_Get(grp.blob)";
    snprintf(want, sizeof want, "blob-%u", next);
    if ((rc = PMIx_Get(&procs[0], "grp.blob", &opt, 1, &got)) != PMIX_SUCCESS || !got) {
        printf("group: rank %u get of rank %u's blob: %s\n", myproc.rank, next, PMIx_Error_string(rc));
        return 1;
    }
    if (got->type != PMIX_STRING || strcmp(got->data.string, want) != 0) {
        printf("group: rank %u: rank %u's blob is not %s\n", myproc.rank, next, want);
        return 1;
    }
    PMIX_VALUE_RELEASE(got);
    got = NULL;

    /* The next member's local context id, as Open MPI 5 reads it. */
    PMIX_INFO_LOAD(&qual, PMIX_GROUP_CONTEXT_ID, &cid, PMIX_SIZE);
    PMIX_INFO_SET_QUALIFIER(&qual);
    phase = "PMIx_Get(PMIX_GROUP_LOCAL_CID)";
    if ((rc = PMIx_Get(&procs[0], PMIX_GROUP_LOCAL_CID, &qual, 1, &got)) != PMIX_SUCCESS || !got) {
        printf("group: rank %u get of rank %u's local cid: %s\n", myproc.rank, next, PMIx_Error_string(rc));
        return 1;
    }
    if (got->data.size != 1000 + next) {
        printf("group: rank %u: rank %u's local cid is %zu, want %u\n", myproc.rank, next, got->data.size, 1000 + next);
        return 1;
    }
    PMIX_VALUE_RELEASE(got);

    phase = "PMIx_Group_destruct_nb(half)";
    if ((rc = PMIx_Group_destruct_nb(half, NULL, 0, op_cb, NULL)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct_nb %s: %s\n", myproc.rank, half, PMIx_Error_string(rc));
        return 1;
    }
    wait_nb();
    if (nb_status != PMIX_SUCCESS) {
        printf("group: rank %u destruct_nb %s: %s\n", myproc.rank, half, PMIx_Error_string(nb_status));
        return 1;
    }
    phase = "PMIx_Group_destruct(all)";
    if ((rc = PMIx_Group_destruct("all", NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct all: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    printf("group: rank %u ok\n", myproc.rank);
    return 0;
}

static int die(uint32_t victim)
{
    uint32_t size = job_size();
    pmix_proc_t *procs = calloc(size, sizeof *procs);
    pmix_info_t info, *results = NULL;
    size_t nresults = 0, n;
    bool yes = true;
    pmix_status_t rc;

    phase = "PMIx_Fence";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u fence: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    if (myproc.rank == victim) {
        fflush(stdout);
        _exit(7);
    }
    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    n = members(procs, size, 0, 1);
    printf("group: rank %u constructing\n", myproc.rank);
    fflush(stdout);
    phase = "PMIx_Group_construct(doomed)";
    rc = PMIx_Group_construct("doomed", procs, n, &info, 1, &results, &nresults);
    if (rc != PMIX_SUCCESS) {
        printf("group: rank %u construct failed: %s\n", myproc.rank, PMIx_Error_string(rc));
        fflush(stdout);
        _exit(3);
    }
    printf("group: rank %u passed\n", myproc.rank);
    return 0;
}

static int die_destruct(uint32_t victim)
{
    uint32_t size = job_size();
    pmix_proc_t *procs = calloc(size, sizeof *procs);
    pmix_info_t info, *results = NULL;
    size_t nresults = 0, n;
    bool yes = true;
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info, PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    n = members(procs, size, 0, 1);
    phase = "PMIx_Group_construct(brief)";
    if ((rc = PMIx_Group_construct("brief", procs, n, &info, 1, &results, &nresults)) != PMIX_SUCCESS) {
        printf("group: rank %u construct brief: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    if (myproc.rank == victim) {
        fflush(stdout);
        _exit(7);
    }
    phase = "PMIx_Group_destruct(brief)";
    if ((rc = PMIx_Group_destruct("brief", NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct failed: %s\n", myproc.rank, PMIx_Error_string(rc));
        fflush(stdout);
        _exit(3);
    }
    printf("group: rank %u passed\n", myproc.rank);
    return 0;
}

static volatile int heard;

static void member_failed(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                          pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                          void *cbdata)
{
    const char *grp = "?";
    uint32_t who = source ? source->rank : PMIX_RANK_UNDEF;
    (void)id;
    (void)status;
    (void)results;
    (void)nresults;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_GROUP_ID) && info[i].value.type == PMIX_STRING)
            grp = info[i].value.data.string;
        else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && info[i].value.type == PMIX_PROC)
            who = info[i].value.data.proc->rank;
    }
    printf("group: rank %u heard rank %u left group %s\n", myproc.rank, who, grp);
    fflush(stdout);
    heard = 1;
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* construct_watch constructs group "watch" of every rank, with a context id
 * and PMIX_GROUP_NOTIFY_TERMINATION. */
static int construct_watch(void)
{
    uint32_t size = job_size();
    pmix_proc_t *procs = calloc(size, sizeof *procs);
    pmix_info_t info[2], *results = NULL;
    size_t nresults = 0, n;
    bool yes = true;
    pmix_status_t rc;

    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_GROUP_NOTIFY_TERMINATION, &yes, PMIX_BOOL);
    n = members(procs, size, 0, 1);
    phase = "PMIx_Group_construct(watch)";
    if ((rc = PMIx_Group_construct("watch", procs, n, info, 2, &results, &nresults)) != PMIX_SUCCESS) {
        printf("group: rank %u construct watch: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    return 0;
}

static int notify(uint32_t victim)
{
    pmix_status_t code = PMIX_GROUP_MEMBER_FAILED;

    phase = "PMIx_Register_event_handler";
    PMIx_Register_event_handler(&code, 1, NULL, 0, member_failed, NULL, NULL);
    if (construct_watch() != 0)
        return 1;
    if (myproc.rank == 0 && getenv("GROUP_READY")) {
        FILE *f = fopen(getenv("GROUP_READY"), "w");
        if (f)
            fclose(f);
    }
    if (myproc.rank == victim) {
        phase = "waiting for GROUP_GO";
        while (getenv("GROUP_GO") && access(getenv("GROUP_GO"), F_OK) != 0)
            usleep(10000);
        fflush(stdout);
        _exit(7);
    }
    phase = "waiting for PMIX_GROUP_MEMBER_FAILED";
    while (!heard)
        usleep(10000);
    return 0;
}

static int watch_destruct(void)
{
    pmix_status_t rc;

    if (construct_watch() != 0)
        return 1;
    phase = "PMIx_Group_destruct(watch)";
    if ((rc = PMIx_Group_destruct("watch", NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct watch: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    printf("group: rank %u watch destructed\n", myproc.rank);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int timeout(uint32_t late)
{
    uint32_t size = job_size();
    pmix_proc_t *procs = calloc(size, sizeof *procs);
    pmix_info_t info[2], *results = NULL;
    size_t nresults = 0, n, cid;
    bool yes = true;
    int secs = 2;
    double t0;
    pmix_status_t rc;

    phase = "PMIx_Fence";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u fence: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    PMIX_INFO_LOAD(&info[0], PMIX_GROUP_ASSIGN_CONTEXT_ID, &yes, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    n = members(procs, size, 0, 1);
    if (myproc.rank == late) {
        phase = "sleep";
        sleep(6);
    } else {
        t0 = now();
        phase = "PMIx_Group_construct(late, PMIX_TIMEOUT)";
        rc = PMIx_Group_construct("late", procs, n, info, 2, &results, &nresults);
        printf("group: rank %u first construct: %s in %.0f s\n", myproc.rank, PMIx_Error_string(rc), now() - t0);
        if (rc == PMIX_SUCCESS)
            return 1;
    }
    /* Timeouts that do not expire: the timers must go quietly. */
    secs = 30;
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    phase = "PMIx_Group_construct(late)";
    results = NULL;
    nresults = 0;
    if ((rc = PMIx_Group_construct("late", procs, n, info, 2, &results, &nresults)) != PMIX_SUCCESS) {
        printf("group: rank %u second construct: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    cid = cidOf(results, nresults);
    printf("group: rank %u late cid %zu\n", myproc.rank, cid);
    phase = "PMIx_Group_destruct(late)";
    if ((rc = PMIx_Group_destruct("late", NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct late: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    secs = 2;
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
    phase = "PMIx_Group_construct(quick)";
    results = NULL;
    nresults = 0;
    if ((rc = PMIx_Group_construct("quick", procs, n, &info[1], 1, &results, &nresults)) != PMIX_SUCCESS) {
        printf("group: rank %u construct quick: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    phase = "PMIx_Group_destruct(quick)";
    if ((rc = PMIx_Group_destruct("quick", &info[1], 1)) != PMIX_SUCCESS) {
        printf("group: rank %u destruct quick: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    sleep(3);
    phase = "PMIx_Fence(after quick)";
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
        printf("group: rank %u fence after quick: %s\n", myproc.rank, PMIx_Error_string(rc));
        return 1;
    }
    printf("group: rank %u ok\n", myproc.rank);
    return 0;
}

static volatile int invited, left, complete;
static char inviter_ns[PMIX_MAX_NSLEN + 1];
static pmix_rank_t inviter_rank, leaver_rank;

static void on_invited(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                       pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id;
    (void)status;
    (void)info;
    (void)ninfo;
    (void)results;
    (void)nresults;
    if (source) {
        PMIX_LOAD_NSPACE(inviter_ns, source->nspace);
        inviter_rank = source->rank;
    }
    __atomic_store_n(&invited, 1, __ATOMIC_SEQ_CST);
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* on_complete records that the inviter announced group "inv" (the end of
 * its blocking PMIx_Group_invite), after which the servers know it. */
static void on_complete(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                        pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc,
                        void *cbdata)
{
    (void)id;
    (void)status;
    (void)source;
    (void)info;
    (void)ninfo;
    (void)results;
    (void)nresults;
    __atomic_store_n(&complete, 1, __ATOMIC_SEQ_CST);
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

/* on_left records who left group "inv". */
static void on_left(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                    pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id;
    (void)status;
    (void)results;
    (void)nresults;
    for (size_t i = 0; source && i < ninfo; i++)
        if (PMIX_CHECK_KEY(&info[i], PMIX_GROUP_ID) && info[i].value.type == PMIX_STRING &&
            strcmp(info[i].value.data.string, "inv") == 0) {
            leaver_rank = source->rank;
            __atomic_store_n(&left, 1, __ATOMIC_SEQ_CST);
        }
    if (cbfunc)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static int invite(void)
{
    uint32_t size = job_size(), last = size - 1;
    pmix_proc_t *procs = calloc(size, sizeof *procs), leader;
    pmix_info_t *results = NULL;
    pmix_status_t code = PMIX_GROUP_INVITED, lcode = PMIX_GROUP_LEFT, ccode = PMIX_GROUP_CONSTRUCT_COMPLETE, rc;
    size_t nresults = 0, n;

    PMIx_Register_event_handler(&code, 1, NULL, 0, on_invited, NULL, NULL);
    PMIx_Register_event_handler(&lcode, 1, NULL, 0, on_left, NULL, NULL);
    PMIx_Register_event_handler(&ccode, 1, NULL, 0, on_complete, NULL, NULL);
    phase = "PMIx_Fence";
    PMIx_Fence(NULL, 0, NULL, 0);
    if (myproc.rank == 0) {
        n = members(procs, size, 0, 1); /* the inviter is a member too */
        phase = "PMIx_Group_invite";
        rc = PMIx_Group_invite("inv", procs, n, NULL, 0, &results, &nresults);
        printf("group: rank 0 invite: %s\n", PMIx_Error_string(rc));
    } else {
        phase = "waiting for PMIX_GROUP_INVITED";
        while (!__atomic_load_n(&invited, __ATOMIC_SEQ_CST))
            usleep(1000);
        PMIX_LOAD_PROCID(&leader, inviter_ns, inviter_rank);
        phase = "PMIx_Group_join";
        rc = PMIx_Group_join("inv", &leader, PMIX_GROUP_ACCEPT, NULL, 0, &results, &nresults);
        printf("group: rank %u join: %s\n", myproc.rank, PMIx_Error_string(rc));
        phase = "waiting for PMIX_GROUP_CONSTRUCT_COMPLETE";
        while (!__atomic_load_n(&complete, __ATOMIC_SEQ_CST))
            usleep(1000);
    }
    if (myproc.rank == last) {
        phase = "PMIx_Group_leave";
        rc = PMIx_Group_leave("inv", NULL, 0);
        printf("group: rank %u leave: %s\n", myproc.rank, PMIx_Error_string(rc));
    } else {
        phase = "waiting for PMIX_GROUP_LEFT";
        while (!__atomic_load_n(&left, __ATOMIC_SEQ_CST))
            usleep(1000);
        printf("group: rank %u heard rank %u left inv\n", myproc.rank, leaver_rank);
        phase = "PMIx_Group_destruct(inv)";
        rc = PMIx_Group_destruct("inv", NULL, 0);
        printf("group: rank %u destruct without %u: %s\n", myproc.rank, last, PMIx_Error_string(rc));
    }
    phase = "PMIx_Fence(end)";
    PMIx_Fence(NULL, 0, NULL, 0);
    return 0;
}

static int invite_timeout(void)
{
    pmix_proc_t invitee;
    pmix_info_t tmo;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    struct timespec t0, t1;
    pmix_status_t rc;
    int secs = 2;

    if (myproc.rank == 0) {
        PMIX_LOAD_PROCID(&invitee, myproc.nspace, 1);
        PMIX_INFO_LOAD(&tmo, PMIX_TIMEOUT, &secs, PMIX_INT);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        phase = "PMIx_Group_invite(PMIX_TIMEOUT 2)";
        rc = PMIx_Group_invite("ignored", &invitee, 1, &tmo, 1, &results, &nresults);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("group: rank 0 invite with timeout: %s in %.0f s\n", PMIx_Error_string(rc),
               (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    }
    phase = "PMIx_Fence";
    PMIx_Fence(NULL, 0, NULL, 0);
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
        fprintf(stderr, "group: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (argc == 2 && strcmp(argv[1], "ok") == 0)
        ret = ok();
    else if (argc == 3 && strcmp(argv[1], "die") == 0)
        ret = die((uint32_t)atoi(argv[2]));
    else if (argc == 3 && strcmp(argv[1], "die-destruct") == 0)
        ret = die_destruct((uint32_t)atoi(argv[2]));
    else if (argc == 3 && strcmp(argv[1], "timeout") == 0)
        ret = timeout((uint32_t)atoi(argv[2]));
    else if (argc == 2 && strcmp(argv[1], "watch-destruct") == 0)
        ret = watch_destruct();
    else if (argc == 2 && strcmp(argv[1], "invite") == 0)
        ret = invite();
    else if (argc == 2 && strcmp(argv[1], "invite-timeout") == 0)
        ret = invite_timeout();
    else if (argc == 3 && strcmp(argv[1], "notify") == 0)
        ret = notify((uint32_t)atoi(argv[2]));
    else
        fprintf(stderr, "usage: group ok | die VICTIM | die-destruct VICTIM | notify VICTIM | watch-destruct | timeout LATE | invite | invite-timeout\n");
    PMIx_Finalize(NULL, 0);
    return ret;
}
