/*
 * sessions.c - MPI 4's Sessions model and groups made into communicators
 * (Open MPI 5; no MPI_Init, no MPI_COMM_WORLD): what a launcher's PMIx
 * server must answer for process sets and PMIx groups.
 *
 * Build: mpicc -O2 -Wall sessions.c (an MPI 4 library)
 *
 *   sessions psets NAME=MEMBERS|NAME~MEMBERS...
 *       MPI_Session_init (errors returned), then MPI_Session_get_num_psets
 *       and MPI_Session_get_nth_pset for every index below the count (the
 *       length asked first, then the name); asking for the index equal to
 *       the count must fail. The names must be exactly the NAMEs given, each
 *       once. MEMBERS is FIRST-LAST, the ranks of mpi://WORLD in the set in
 *       order, or "self" (the caller alone); NSPACE in a NAME stands for
 *       $PMIX_NAMESPACE (a launcher's default name of an application
 *       context's set: NSPACE.app0). Then for every NAME=MEMBERS, in strcmp
 *       order: MPI_Group_from_session_pset, whose size and members
 *       (translated to mpi://WORLD's group) must be MEMBERS; a member makes
 *       the group a communicator (MPI_Comm_create_from_group, tag
 *       "prun-sessions:NAME") and allreduces its world rank + 1 on it, then
 *       frees it. A NAME~MEMBERS is listed only, never made a group: Open
 *       MPI 5.0's MPI_Group_from_session_pset of a set the launcher defines
 *       (through PMIx) takes the length of a member's set name for the
 *       group's count (ompi_instance_group_pmix_pset reuses its size for
 *       PMIX_VALUE_UNLOAD's), writes past the group and corrupts the heap,
 *       under its own prterun too (fixed after 5.0: it asks the launcher
 *       for PMIX_QUERY_PSET_MEMBERSHIP). Prints
 *           sessions: rank R psets: N: NAME NAME ...       (the server's order)
 *           sessions: rank R nth N fails: ERROR-CLASS
 *           sessions: rank R pset NAME size S sum T ok     (each set it is in)
 *           sessions: rank R psets ok
 *       A failed check prints "sessions: rank R psets FAILED: why" and the
 *       rank goes on with the next one (when the count is too small, with
 *       the names past it, up to the first index that fails); it ends with
 *       "sessions: rank R psets FAILED" and exit 1.
 *
 *   sessions halves
 *       MPI_Session_init; the group of mpi://WORLD (at least 2 ranks) split
 *       into its lower half (ranks below N/2) and upper half; each half
 *       makes an inter-communicator with the other
 *       (MPI_Intercomm_create_from_groups, leaders their ranks 0, tag
 *       "prun-sessions:halves"), allreduces world rank + 1 over it (each
 *       side gets the other's sum), merges it (MPI_Intercomm_merge, the
 *       lower half first) and allreduces again, then frees both. Prints
 *           sessions: rank R halves: remote size S sum T, merged size N sum U ok
 *       or "sessions: rank R halves FAILED: why" and exits 1.
 *
 * MPI errors are returned, never fatal: each failed call is named with its
 * error string. A SIGALRM watchdog (60 s) ends a rank stuck in a call,
 * naming it ("sessions: rank R: timed out in CALL").
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int wrank = -1; /* the rank in mpi://WORLD, once known */
static const char *volatile phase = "MPI_Session_init";

static void on_alarm(int sig)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "sessions: rank %d: timed out in %s\n", wrank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

static void fail(const char *what, const char *fmt, const char *arg)
{
    printf("sessions: rank %d %s FAILED: ", wrank, what);
    printf(fmt, arg);
    printf("\n");
    fflush(stdout);
    exit(1);
}

/* check fails unless rc is MPI_SUCCESS, naming the call and its error. A
 * code that is no MPI error code is not handed to MPI_Error_string, which
 * (without MPI_Init) would raise a fatal error of its own. */
static void check(const char *what, const char *call, int rc)
{
    char err[MPI_MAX_ERROR_STRING] = "not an MPI error code";
    int len = 0;
    if (rc == MPI_SUCCESS)
        return;
    if (rc > 0 && rc <= MPI_ERR_LASTCODE)
        MPI_Error_string(rc, err, &len);
    char msg[512];
    snprintf(msg, sizeof msg, "%s: error %d (%s)", call, rc, err);
    fail(what, "%s", msg);
}

static const char *errclass(int rc)
{
    int cls = rc;
    if (rc > 0 && rc <= MPI_ERR_LASTCODE)
        MPI_Error_class(rc, &cls);
    switch (cls) {
    case MPI_SUCCESS:
        return "MPI_SUCCESS";
    case MPI_ERR_ARG:
        return "MPI_ERR_ARG";
    case MPI_ERR_OTHER:
        return "MPI_ERR_OTHER";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "class %d", cls);
        return buf;
    }
    }
}

struct want {
    char name[MPI_MAX_PSET_NAME_LEN + 1];
    int listonly;    /* NAME~MEMBERS: listed, not made a group */
    int self;        /* the caller alone */
    int first, last; /* else: world ranks first..last */
    int seen;
};

static int bystr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* flaw reports a failed check that does not stop the rank: it goes on to
 * the next set, and exits 1 at the end. */
static int flawed;

static void flaw(const char *msg)
{
    printf("sessions: rank %d psets FAILED: %s\n", wrank, msg);
    fflush(stdout);
    flawed = 1;
}

/* nth returns the name of set i (length first, then the name), or NULL with
 * *rc set. */
static char *nth(MPI_Session s, int i, int *rc)
{
    int len = 0;
    *rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL);
    if (*rc != MPI_SUCCESS)
        return NULL;
    if (len <= 0 || len > MPI_MAX_PSET_NAME_LEN + 1) {
        *rc = MPI_ERR_LASTCODE + 1;
        return NULL;
    }
    char *name = calloc(1, (size_t)len + 1);
    *rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
    if (*rc != MPI_SUCCESS) {
        free(name);
        return NULL;
    }
    return name;
}

static void errtext(int rc, char *buf, size_t size)
{
    char err[MPI_MAX_ERROR_STRING] = "not an MPI error code";
    int len = 0;
    if (rc > 0 && rc <= MPI_ERR_LASTCODE)
        MPI_Error_string(rc, err, &len);
    snprintf(buf, size, "error %d (%s)", rc, err);
}

/* oneSet checks the set named name against w, as a group and, for a
 * member, as a communicator. */
static void oneSet(MPI_Session s, MPI_Group world, const char *name, const struct want *w)
{
    char line[1024], err[MPI_MAX_ERROR_STRING + 64];
    MPI_Group g;
    phase = "MPI_Group_from_session_pset";
    int rc = MPI_Group_from_session_pset(s, name, &g);
    if (rc != MPI_SUCCESS) {
        errtext(rc, err, sizeof err);
        snprintf(line, sizeof line, "MPI_Group_from_session_pset(%s): %s", name, err);
        flaw(line);
        return;
    }
    int size = -1, me = MPI_UNDEFINED;
    MPI_Group_size(g, &size);
    MPI_Group_rank(g, &me);
    int wsize = w->self ? 1 : w->last - w->first + 1;
    int member = w->self || (wrank >= w->first && wrank <= w->last);
    long sum = 0;
    int ok = 1;
    if (size != wsize) {
        snprintf(line, sizeof line, "%s has %d members, want %d", name, size, wsize);
        flaw(line);
        ok = 0;
    } else {
        int *in = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size);
        for (int k = 0; k < size; k++)
            in[k] = k;
        MPI_Group_translate_ranks(g, size, in, world, out);
        for (int k = 0; k < size; k++) {
            int wantrank = w->self ? wrank : w->first + k;
            if (out[k] != wantrank) {
                snprintf(line, sizeof line, "member %d of %s is world rank %d, want %d", k, name, out[k], wantrank);
                flaw(line);
                ok = 0;
                break;
            }
            sum += out[k] + 1;
        }
        free(in);
        free(out);
    }
    if (ok && member != (me != MPI_UNDEFINED)) {
        snprintf(line, sizeof line, "in %s: my rank there %d, want %s", name, me, member ? "one" : "none");
        flaw(line);
        ok = 0;
    }
    if (ok && member) {
        MPI_Comm c;
        char tag[MPI_MAX_PSET_NAME_LEN + 32];
        snprintf(tag, sizeof tag, "prun-sessions:%s", name);
        phase = "MPI_Comm_create_from_group";
        rc = MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
        if (rc != MPI_SUCCESS) {
            errtext(rc, err, sizeof err);
            snprintf(line, sizeof line, "MPI_Comm_create_from_group(%s): %s", name, err);
            flaw(line);
        } else {
            long mine = wrank + 1, got = -1;
            phase = "MPI_Allreduce";
            rc = MPI_Allreduce(&mine, &got, 1, MPI_LONG, MPI_SUM, c);
            if (rc != MPI_SUCCESS || got != sum) {
                errtext(rc, err, sizeof err);
                snprintf(line, sizeof line, "MPI_Allreduce on %s: %s, sum %ld, want %ld", name, err, got, sum);
                flaw(line);
            }
            phase = "MPI_Comm_free";
            rc = MPI_Comm_free(&c);
            if (rc != MPI_SUCCESS) {
                errtext(rc, err, sizeof err);
                snprintf(line, sizeof line, "MPI_Comm_free(%s): %s", name, err);
                flaw(line);
            } else if (got == sum)
                printf("sessions: rank %d pset %s size %d sum %ld ok\n", wrank, name, size, sum);
        }
    }
    MPI_Group_free(&g);
}

static int psets(MPI_Session s, MPI_Group world, int nwant, struct want *want)
{
    const char *what = "psets";
    int n = -1, rc;
    char line[8192], err[MPI_MAX_ERROR_STRING + 64];
    phase = "MPI_Session_get_num_psets";
    check(what, "MPI_Session_get_num_psets", MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    if (n < 0 || n > 1000)
        fail(what, "MPI_Session_get_num_psets gave %s", n < 0 ? "a negative count" : "more than 1000");
    /* The names below the count; then one past the last must fail. When it
     * does not, the count is wrong: the names go on until one fails (at
     * most 100 more), so the rest of the checks see them all. */
    char **names = calloc((size_t)n + 101, sizeof *names);
    int listed = 0;
    phase = "MPI_Session_get_nth_pset";
    for (; listed < n; listed++) {
        names[listed] = nth(s, listed, &rc);
        if (names[listed] == NULL) {
            errtext(rc, err, sizeof err);
            snprintf(line, sizeof line, "MPI_Session_get_nth_pset(%d) of a count of %d: %s", listed, n, err);
            flaw(line);
            break;
        }
    }
    int off = snprintf(line, sizeof line, "sessions: rank %d psets: %d:", wrank, n);
    for (int i = 0; i < listed; i++)
        if (off < (int)sizeof line)
            off += snprintf(line + off, sizeof line - (size_t)off, " %s", names[i]);
    printf("%s\n", line);
    fflush(stdout);
    if (listed == n) {
        char *extra = nth(s, n, &rc);
        if (extra == NULL)
            printf("sessions: rank %d nth %d fails: %s\n", wrank, n, errclass(rc));
        else {
            printf("sessions: rank %d nth %d fails: no\n", wrank, n);
            off = snprintf(line, sizeof line, "the count is %d, and MPI_Session_get_nth_pset goes on:", n);
            while (extra != NULL && listed < n + 100) {
                names[listed++] = extra;
                off += snprintf(line + off, sizeof line - (size_t)off, " %d: %s", listed - 1, extra);
                extra = nth(s, listed, &rc);
            }
            free(extra);
            flaw(line);
        }
        fflush(stdout);
    }
    /* Exactly the names wanted, each once. */
    for (int i = 0; i < listed; i++) {
        int found = 0;
        for (int j = 0; j < nwant; j++)
            if (strcmp(names[i], want[j].name) == 0) {
                if (want[j].seen++) {
                    snprintf(line, sizeof line, "%s is listed twice", names[i]);
                    flaw(line);
                }
                found = 1;
            }
        if (!found) {
            snprintf(line, sizeof line, "an unexpected set %s", names[i]);
            flaw(line);
        }
    }
    for (int j = 0; j < nwant; j++)
        if (!want[j].seen) {
            snprintf(line, sizeof line, "%s is not listed", want[j].name);
            flaw(line);
        }

    /* Every set wanted and listed, as a group, and as a communicator of
     * its members (in the same order in every rank). */
    qsort(names, (size_t)listed, sizeof *names, bystr);
    for (int i = 0; i < listed; i++) {
        if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
            continue;
        for (int j = 0; j < nwant; j++)
            if (strcmp(names[i], want[j].name) == 0 && !want[j].listonly)
                oneSet(s, world, names[i], &want[j]);
    }
    for (int i = 0; i < listed; i++)
        free(names[i]);
    free(names);
    if (flawed) {
        printf("sessions: rank %d psets FAILED\n", wrank);
        fflush(stdout);
        exit(1);
    }
    printf("sessions: rank %d psets ok\n", wrank);
    return 0;
}

static int halves(MPI_Group world)
{
    const char *what = "halves";
    int n = 0;
    MPI_Group_size(world, &n);
    if (n < 2)
        fail(what, "%s", "mpi://WORLD has fewer than 2 ranks");
    int low[3] = {0, n / 2 - 1, 1}, high[3] = {n / 2, n - 1, 1};
    MPI_Group lg, hg;
    check(what, "MPI_Group_range_incl", MPI_Group_range_incl(world, 1, &low, &lg));
    check(what, "MPI_Group_range_incl", MPI_Group_range_incl(world, 1, &high, &hg));
    int lower = wrank < n / 2;
    MPI_Comm inter, merged;
    phase = "MPI_Intercomm_create_from_groups";
    check(what, "MPI_Intercomm_create_from_groups",
          MPI_Intercomm_create_from_groups(lower ? lg : hg, 0, lower ? hg : lg, 0, "prun-sessions:halves",
                                           MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
    int rsize = -1;
    MPI_Comm_remote_size(inter, &rsize);
    int wantr = lower ? n - n / 2 : n / 2;
    long mine = wrank + 1, got = -1, want = 0;
    for (int r = lower ? n / 2 : 0; r < (lower ? n : n / 2); r++)
        want += r + 1;
    phase = "MPI_Allreduce (inter)";
    check(what, "MPI_Allreduce on the inter-communicator", MPI_Allreduce(&mine, &got, 1, MPI_LONG, MPI_SUM, inter));
    char line[256];
    if (rsize != wantr || got != want) {
        snprintf(line, sizeof line, "remote size %d sum %ld, want %d and %ld", rsize, got, wantr, want);
        fail(what, "%s", line);
    }
    phase = "MPI_Intercomm_merge";
    check(what, "MPI_Intercomm_merge", MPI_Intercomm_merge(inter, lower ? 0 : 1, &merged));
    int msize = -1, mrank = -1;
    long total = -1;
    MPI_Comm_size(merged, &msize);
    MPI_Comm_rank(merged, &mrank);
    phase = "MPI_Allreduce (merged)";
    check(what, "MPI_Allreduce on the merged communicator", MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, merged));
    if (msize != n || mrank != wrank || total != (long)n * (n + 1) / 2) {
        snprintf(line, sizeof line, "merged: rank %d of %d sum %ld, want %d of %d sum %ld", mrank, msize, total, wrank, n,
                 (long)n * (n + 1) / 2);
        fail(what, "%s", line);
    }
    phase = "MPI_Comm_free";
    check(what, "MPI_Comm_free (merged)", MPI_Comm_free(&merged));
    check(what, "MPI_Comm_free (inter)", MPI_Comm_free(&inter));
    MPI_Group_free(&lg);
    MPI_Group_free(&hg);
    printf("sessions: rank %d halves: remote size %d sum %ld, merged size %d sum %ld ok\n", wrank, rsize, got, msize,
           total);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "psets") != 0 && strcmp(argv[1], "halves") != 0)) {
        fprintf(stderr, "usage: sessions psets NAME=FIRST-LAST|NAME=self|NAME~FIRST-LAST... | sessions halves\n");
        return 2;
    }
    int nwant = argc - 2;
    struct want *want = calloc((size_t)nwant + 1, sizeof *want);
    const char *ns = getenv("PMIX_NAMESPACE");
    for (int i = 0; i < nwant; i++) {
        const char *arg = argv[i + 2], *eq = strrchr(arg, '='), *tilde = strrchr(arg, '~');
        const char *at = strstr(arg, "NSPACE");
        if (tilde != NULL && (eq == NULL || tilde > eq)) {
            eq = tilde;
            want[i].listonly = 1;
        }
        if (eq == NULL) {
            fprintf(stderr, "sessions: %s: want NAME=FIRST-LAST, NAME=self or NAME~...\n", arg);
            return 2;
        }
        if (at != NULL && at < eq)
            snprintf(want[i].name, sizeof want[i].name, "%.*s%s%.*s", (int)(at - arg), arg, ns ? ns : "",
                     (int)(eq - at - 6), at + 6);
        else
            snprintf(want[i].name, sizeof want[i].name, "%.*s", (int)(eq - arg), arg);
        if (strcmp(eq + 1, "self") == 0)
            want[i].self = 1;
        else if (sscanf(eq + 1, "%d-%d", &want[i].first, &want[i].last) != 2 || want[i].last < want[i].first) {
            fprintf(stderr, "sessions: %s: want NAME=FIRST-LAST or NAME=self\n", arg);
            return 2;
        }
    }
    signal(SIGALRM, on_alarm);
    alarm(60);

    MPI_Session s;
    check("init", "MPI_Session_init", MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    MPI_Group world;
    phase = "MPI_Group_from_session_pset(mpi://WORLD)";
    check("init", "MPI_Group_from_session_pset(mpi://WORLD)", MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    MPI_Group_rank(world, &wrank);

    if (strcmp(argv[1], "psets") == 0)
        psets(s, world, nwant, want);
    else
        halves(world);
    fflush(stdout);
    MPI_Group_free(&world);
    phase = "MPI_Session_finalize";
    check("finalize", "MPI_Session_finalize", MPI_Session_finalize(&s));
    free(want);
    return 0;
}
