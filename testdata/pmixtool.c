/*
 * pmixtool.c - a PMIx tool (not a client of a job) that attaches to a
 * running launcher's PMIx server by its URI, as --report-uri prints it, and
 * lists the namespaces the server knows.
 *
 * Build: gcc -O2 -Wall pmixtool.c $(pkg-config --cflags --libs pmix)
 *
 *   pmixtool URI [NSPACE]
 *       Prints "pmixtool: namespaces NS1,NS2,..." and exits 0; exits 1 with
 *       the failing call on stderr. With NSPACE, the tool attaches as rank 0
 *       of NSPACE (PMIX_TOOL_NSPACE), an identity of its own choosing,
 *       instead of asking the server for one.
 *
 * A SIGALRM watchdog (20 s) ends a tool stuck in a PMIx call.
 */
#include <pmix_tool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "pmixtool: stuck in a PMIx call\n";
    write(2, msg, sizeof msg - 1);
    _exit(3);
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: pmixtool URI [NSPACE]\n");
        return 2;
    }
    signal(SIGALRM, watchdog);
    alarm(20);
    pmix_proc_t me;
    pmix_info_t info[4];
    size_t ninfo = 2;
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, argv[1], PMIX_STRING);
    bool no = false;
    PMIX_INFO_LOAD(&info[1], PMIX_CONNECT_TO_SYSTEM, &no, PMIX_BOOL);
    if (argc == 3) {
        pmix_rank_t rank = 0;
        PMIX_INFO_LOAD(&info[2], PMIX_TOOL_NSPACE, argv[2], PMIX_STRING);
        PMIX_INFO_LOAD(&info[3], PMIX_TOOL_RANK, &rank, PMIX_PROC_RANK);
        ninfo = 4;
    }
    pmix_status_t rc = PMIx_tool_init(&me, info, ninfo);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "pmixtool: PMIx_tool_init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    pmix_query_t q;
    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_NAMESPACES);
    pmix_info_t *res = NULL;
    size_t nres = 0;
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    if (rc != PMIX_SUCCESS || nres == 0 || res[0].value.type != PMIX_STRING) {
        fprintf(stderr, "pmixtool: PMIx_Query_info(PMIX_QUERY_NAMESPACES): %s\n", PMIx_Error_string(rc));
        PMIx_tool_finalize();
        return 1;
    }
    printf("pmixtool: namespaces %s\n", res[0].value.data.string);
    PMIX_INFO_FREE(res, nres);
    PMIx_tool_finalize();
    return 0;
}
