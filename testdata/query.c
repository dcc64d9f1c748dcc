/*
 * query.c - PMIx_Query_info for what issue 29 lists, from a client or a
 * tool: namespaces, a job's status, its process table (whole and this
 * node's), its process sets, this node's memory use.
 *
 * Build: gcc -O2 -Wall query.c $(pkg-config --cflags --libs pmix)
 *
 *   query client [NSPACE]   a rank of a job (started by the launcher): rank
 *                           0 asks about NSPACE (default its own) once every
 *                           rank is in a fence, the others wait in another
 *   query tool URI NSPACE   a tool attached to the server at URI
 *
 * Prints one line per query, "query: KEY VALUE", where VALUE is:
 *   namespaces      the comma list, sorted
 *   jobstatus       the job's state (PMIx_Job_state_string)
 *   proctable       N procs: rank@host:state,... (by rank; the state as
 *                   PMIx_Proc_state_string names it)
 *   localproctable  N procs: rank@host,... (by rank)
 *   numpsets        the number
 *   psetnames       the comma list
 *   psetmembers     NAME N procs: nspace:rank,... (by rank) for the last
 *                   process set by name ("none": there is no process set)
 *   memory          daemon>0 or daemon=0, and the clients' average as
 *                   clients>0 or clients=0
 * or "query: KEY failed: STATUS". Exit 0 when every query succeeded.
 * A SIGALRM watchdog (30 s) exits 2.
 */
#include <pmix.h>
#include <pmix_tool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_alarm(int sig)
{
    static const char msg[] = "query: stuck in a PMIx call\n";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    _exit(2);
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void print_sorted_list(const char *s)
{
    char *copy = strdup(s), *words[1024], *save = NULL;
    int n = 0;
    for (char *w = strtok_r(copy, ",", &save); w != NULL && n < 1024; w = strtok_r(NULL, ",", &save))
        words[n++] = w;
    qsort(words, n, sizeof words[0], cmpstr);
    for (int i = 0; i < n; i++)
        printf("%s%s", i ? "," : "", words[i]);
    free(copy);
}

static int cmpproc(const void *a, const void *b)
{
    const pmix_proc_info_t *x = a, *y = b;
    return (x->proc.rank > y->proc.rank) - (x->proc.rank < y->proc.rank);
}

/* value finds the answer to key among results, looking into
 * PMIX_QUERY_RESULTS arrays too. */
static pmix_value_t *value(pmix_info_t *res, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (PMIX_CHECK_KEY(&res[i], key))
            return &res[i].value;
        if (res[i].value.type == PMIX_DATA_ARRAY && res[i].value.data.darray != NULL &&
            res[i].value.data.darray->type == PMIX_INFO) {
            pmix_value_t *v = value(res[i].value.data.darray->array, res[i].value.data.darray->size, key);
            if (v != NULL)
                return v;
        }
    }
    return NULL;
}

static int ask(const char *name, const char *key, const char *nspace)
{
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc;

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, key);
    if (nspace != NULL) {
        PMIX_INFO_CREATE(q.qualifiers, 1);
        q.nqual = 1;
        PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_NSPACE, nspace, PMIX_STRING);
    }
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    pmix_value_t *v = rc == PMIX_SUCCESS ? value(res, nres, key) : NULL;
    if (v == NULL) {
        printf("query: %s failed: %s\n", name, rc == PMIX_SUCCESS ? "no answer" : PMIx_Error_string(rc));
        fflush(stdout);
        return 1;
    }
    printf("query: %s ", name);
    int bad = 0;
    if (strcmp(key, PMIX_QUERY_NAMESPACES) == 0 || strcmp(key, PMIX_QUERY_PSET_NAMES) == 0) {
        if (v->type == PMIX_STRING)
            print_sorted_list(v->data.string);
        else
            printf("type %s", PMIx_Data_type_string(v->type)), bad = 1;
    } else if (strcmp(key, PMIX_QUERY_JOB_STATUS) == 0) {
        if (v->type == PMIX_JOB_STATE)
            printf("%s", PMIx_Job_state_string(v->data.jstate));
        else
            printf("type %s", PMIx_Data_type_string(v->type)), bad = 1;
    } else if (strcmp(key, PMIX_QUERY_PROC_TABLE) == 0 || strcmp(key, PMIX_QUERY_LOCAL_PROC_TABLE) == 0) {
        if (v->type == PMIX_DATA_ARRAY && v->data.darray->type == PMIX_PROC_INFO) {
            pmix_proc_info_t *pi = v->data.darray->array;
            size_t n = v->data.darray->size;
            qsort(pi, n, sizeof pi[0], cmpproc);
            printf("%zu procs:", n);
            for (size_t i = 0; i < n; i++) {
                printf("%s%u@%s", i ? "," : " ", pi[i].proc.rank, pi[i].hostname);
                if (strcmp(key, PMIX_QUERY_PROC_TABLE) == 0)
                    printf(":%s", PMIx_Proc_state_string(pi[i].state));
            }
        } else
            printf("type %s", PMIx_Data_type_string(v->type)), bad = 1;
    } else if (strcmp(key, PMIX_QUERY_NUM_PSETS) == 0) {
        size_t n = 0;
        if (v->type == PMIX_SIZE)
            n = v->data.size;
        else if (v->type == PMIX_UINT32)
            n = v->data.uint32;
        else
            bad = 1;
        printf("%zu", n);
    } else if (strcmp(key, PMIX_QUERY_MEMORY_USAGE) == 0) {
        pmix_value_t *d = NULL, *c = NULL;
        if (v->type == PMIX_DATA_ARRAY && v->data.darray->type == PMIX_INFO) {
            d = value(v->data.darray->array, v->data.darray->size, PMIX_DAEMON_MEMORY);
            c = value(v->data.darray->array, v->data.darray->size, PMIX_CLIENT_AVG_MEMORY);
        }
        if (d == NULL || c == NULL || d->type != PMIX_FLOAT || c->type != PMIX_FLOAT)
            printf("malformed"), bad = 1;
        else
            printf("daemon%s clients%s", d->data.fval > 0 ? ">0" : "=0", c->data.fval > 0 ? ">0" : "=0");
    }
    printf("\n");
    fflush(stdout);
    PMIX_INFO_FREE(res, nres);
    return bad;
}

/* members asks PMIX_QUERY_PSET_MEMBERSHIP of the last process set by name. */
static int members(void)
{
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc;
    char name[256] = "";

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PSET_NAMES);
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    pmix_value_t *v = rc == PMIX_SUCCESS ? value(res, nres, PMIX_QUERY_PSET_NAMES) : NULL;
    if (v != NULL && v->type == PMIX_STRING) {
        char *copy = strdup(v->data.string), *save = NULL;
        for (char *w = strtok_r(copy, ",", &save); w != NULL; w = strtok_r(NULL, ",", &save))
            if (strcmp(w, name) > 0)
                snprintf(name, sizeof name, "%s", w);
        free(copy);
    }
    PMIX_INFO_FREE(res, nres);
    PMIX_QUERY_DESTRUCT(&q);
    if (name[0] == '\0') {
        printf("query: psetmembers none\n");
        fflush(stdout);
        return 0;
    }

    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_PSET_MEMBERSHIP);
    PMIX_INFO_CREATE(q.qualifiers, 1);
    q.nqual = 1;
    PMIX_INFO_LOAD(&q.qualifiers[0], PMIX_PSET_NAME, name, PMIX_STRING);
    res = NULL, nres = 0;
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    v = rc == PMIX_SUCCESS ? value(res, nres, PMIX_QUERY_PSET_MEMBERSHIP) : NULL;
    if (v == NULL || v->type != PMIX_DATA_ARRAY || v->data.darray->type != PMIX_PROC) {
        printf("query: psetmembers failed: %s\n", rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : v == NULL ? "no answer" : "not procs");
        fflush(stdout);
        return 1;
    }
    pmix_proc_t *p = v->data.darray->array;
    size_t n = v->data.darray->size;
    printf("query: psetmembers %s %zu procs:", name, n);
    for (size_t i = 0; i < n; i++)
        printf("%s%s:%u", i ? "," : " ", p[i].nspace, p[i].rank);
    printf("\n");
    fflush(stdout);
    PMIX_INFO_FREE(res, nres);
    return 0;
}

static int all(const char *nspace)
{
    int bad = 0;
    bad |= ask("namespaces", PMIX_QUERY_NAMESPACES, NULL);
    bad |= ask("jobstatus", PMIX_QUERY_JOB_STATUS, nspace);
    bad |= ask("proctable", PMIX_QUERY_PROC_TABLE, nspace);
    bad |= ask("localproctable", PMIX_QUERY_LOCAL_PROC_TABLE, nspace);
    bad |= ask("numpsets", PMIX_QUERY_NUM_PSETS, NULL);
    bad |= ask("psetnames", PMIX_QUERY_PSET_NAMES, NULL);
    bad |= members();
    bad |= ask("memory", PMIX_QUERY_MEMORY_USAGE, nspace);
    return bad;
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;

    signal(SIGALRM, on_alarm);
    alarm(30);
    if (argc >= 4 && strcmp(argv[1], "tool") == 0) {
        pmix_info_t info[2];
        bool no = false;
        PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, argv[2], PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], PMIX_CONNECT_TO_SYSTEM, &no, PMIX_BOOL);
        if ((rc = PMIx_tool_init(&me, info, 2)) != PMIX_SUCCESS) {
            fprintf(stderr, "query: PMIx_tool_init: %s\n", PMIx_Error_string(rc));
            return 1;
        }
        int bad = all(argv[3]);
        PMIx_tool_finalize();
        return bad;
    }
    if (argc < 2 || strcmp(argv[1], "client") != 0) {
        fprintf(stderr, "usage: query client [NSPACE] | query tool URI NSPACE\n");
        return 2;
    }
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "query: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    int bad = 0;
    PMIx_Fence(NULL, 0, NULL, 0); /* every rank started */
    if (me.rank == 0)
        bad = all(argc > 2 ? argv[2] : me.nspace);
    PMIx_Fence(NULL, 0, NULL, 0);
    PMIx_Finalize(NULL, 0);
    return bad;
}
