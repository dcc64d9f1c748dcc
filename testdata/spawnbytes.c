/*
 * spawnbytes.c - PMIx_Spawn with the user's bytes: rank 0 spawns one
 * process of PROG ARGS... on HOST (PMIX_HOST), in its own working directory,
 * with PRUNB_S set to every byte value from 1 to 255. With PROG =
 * showbytes, the child prints what it was given as hex.
 * Prints "spawnbytes: spawned NSPACE" or exits 1 with the PMIx error.
 * Usage: spawnbytes HOST PROG [ARG...]
 */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    pmix_proc_t me;
    pmix_status_t rc;
    char every[256], env[300], cwd[4096], nspace[PMIX_MAX_NSLEN + 1];
    char *envv[] = {env, NULL};
    pmix_app_t app;
    pmix_info_t info;

    if (argc < 3) {
        fprintf(stderr, "usage: spawnbytes HOST PROG [ARG...]\n");
        return 2;
    }
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "spawnbytes: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    if (me.rank == 0) {
        for (int i = 1; i < 256; i++)
            every[i - 1] = (char)i;
        every[255] = 0;
        snprintf(env, sizeof env, "PRUNB_S=%s", every);
        if (!getcwd(cwd, sizeof cwd))
            return 1;
        PMIX_APP_CONSTRUCT(&app);
        app.cmd = argv[2];
        app.argv = argv + 2;
        app.env = envv;
        app.cwd = cwd;
        app.maxprocs = 1;
        PMIX_INFO_LOAD(&info, PMIX_HOST, argv[1], PMIX_STRING);
        app.info = &info;
        app.ninfo = 1;
        rc = PMIx_Spawn(NULL, 0, &app, 1, nspace);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "spawnbytes: PMIx_Spawn: %s\n", PMIx_Error_string(rc));
            PMIx_Finalize(NULL, 0);
            return 1;
        }
        fprintf(stderr, "spawnbytes: spawned %s\n", nspace);
    }
    PMIx_Finalize(NULL, 0);
    return 0;
}
