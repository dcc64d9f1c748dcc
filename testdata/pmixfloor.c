/*
 * pmixfloor: the least a launcher that hosts a PMIx server must do to run
 * N copies of a program on this node, in C, for the launch benchmark's
 * floor: a session directory, PMIx_server_init (hwloc reads the topology
 * XML given, as prun's does), a namespace, then per rank register_client,
 * setup_fork and posix_spawn, wait for all, and tear down.
 *
 *   pmixfloor TOPOLOGY.xml|- N PROGRAM [ARGS...]
 *
 * No stdio forwarding, no signals, no mapping: whatever prun spends beyond
 * this is prun's own. With PRUN_DEBUG_TIMING=1 it prints milestones as prun
 * does (from PRUN_DEBUG_T0, a harness's fork time, when given), so that
 * bench/tools/marks.c can set the two side by side.
 */
#define _GNU_SOURCE
#include <pmix_server.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <semaphore.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long t0; /* Unix ns: PRUN_DEBUG_T0, else main's start */
static int timing;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void mark(const char *what) {
    if (timing)
        fprintf(stderr, "prun timing %8.2f ms [%d] %s\n", (now_ns() - t0) / 1e6, (int)getpid(), what);
}

extern char **environ;

static sem_t done;
static void opdone(pmix_status_t st, void *cbdata) { (void)st; (void)cbdata; sem_post(&done); }
static void waitdone(void) { while (sem_wait(&done) != 0) {} }

static int rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

int main(int argc, char **argv) {
    timing = getenv("PRUN_DEBUG_TIMING") && strcmp(getenv("PRUN_DEBUG_TIMING"), "1") == 0;
    t0 = getenv("PRUN_DEBUG_T0") ? atoll(getenv("PRUN_DEBUG_T0")) : now_ns();
    mark("main");
    if (argc < 4) {
        fprintf(stderr, "usage: pmixfloor TOPOLOGY.xml|- N PROGRAM [ARGS...]\n");
        return 2;
    }
    if (strcmp(argv[1], "-") != 0) {
        setenv("HWLOC_XMLFILE", argv[1], 1);
        setenv("HWLOC_THISSYSTEM", "1", 1);
        /* as prun does: no hwloc plugins (libxml2 alone costs 1 ms to load) */
        setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_opencl,hwloc_gl,hwloc_pci,hwloc_xml_libxml", 1);
    }
    setenv("PMIX_MCA_gds", "hash", 1);
    int n = atoi(argv[2]);
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pmixfloor.%d", tmp ? tmp : "/tmp", (int)getpid());
    if (mkdir(dir, 0700) != 0) { perror(dir); return 1; }
    sem_init(&done, 0, 0);

    static pmix_server_module_t module; /* no callbacks: the ranks never call */
    pmix_info_t info[3];
    PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, dir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, dir, PMIX_STRING);
    PMIX_INFO_LOAD(&info[2], PMIX_HOSTNAME, "localhost", PMIX_STRING);
    if (PMIx_server_init(&module, info, 3) != PMIX_SUCCESS) { fprintf(stderr, "PMIx_server_init failed\n"); return 1; }

    mark("server up");
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, "floor.1");
    pmix_info_t jinfo[2];
    uint32_t size = (uint32_t)n;
    PMIX_INFO_LOAD(&jinfo[0], PMIX_JOB_SIZE, &size, PMIX_UINT32);
    PMIX_INFO_LOAD(&jinfo[1], PMIX_LOCAL_SIZE, &size, PMIX_UINT32);
    PMIx_server_register_nspace(ns, n, jinfo, 2, opdone, NULL);
    waitdone();

    mark("namespace registered");
    pid_t *pids = calloc(n, sizeof *pids);
    for (int r = 0; r < n; r++) {
        pmix_proc_t p;
        PMIX_PROC_LOAD(&p, ns, r);
        PMIx_server_register_client(&p, getuid(), getgid(), NULL, opdone, NULL);
        waitdone();
        /* setup_fork appends to the array with realloc: give it a copy */
        int ne = 0;
        while (environ[ne]) ne++;
        char **env = calloc(ne + 1, sizeof *env);
        for (int i = 0; i < ne; i++) env[i] = strdup(environ[i]);
        PMIx_server_setup_fork(&p, &env);
        if (posix_spawn(&pids[r], argv[3], NULL, NULL, argv + 3, env) != 0) {
            perror(argv[3]);
            return 1;
        }
        for (char **e = env; *e; e++) free(*e);
        free(env);
    }
    mark("ranks started");
    int rc = 0;
    for (int r = 0; r < n; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    mark("ranks reaped");
    PMIx_server_deregister_nspace(ns, NULL, NULL);
    PMIx_server_finalize();
    mark("server finalized");
    if (nftw(dir, rm, 16, FTW_DEPTH | FTW_PHYS) != 0) rc = 1;
    mark("session directory removed");
    return rc;
}
