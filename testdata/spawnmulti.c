/*
 * spawnmulti.c - MPI_Comm_spawn_multiple of two apps, each asked for on a
 * host of its own through the "host" info key: app A (1 process) on HOST_A,
 * app B (2 processes) on HOST_B. The parents (started by the launcher) and
 * the children merge the inter-communicator and allreduce 1 from every
 * process; everyone prints
 *   "spawnmulti: parent|child-a|child-b R: merged sum S on HOST"
 * and exits 1 on a wrong sum.
 * Usage: spawnmulti HOST_A HOST_B
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter, merged;
    int rank, one = 1, sum = 0, msize, errcodes[3];
    char host[MPI_MAX_PROCESSOR_NAME];
    const char *role = "parent";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        if (argc < 3) {
            fprintf(stderr, "usage: spawnmulti HOST_A HOST_B\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        char *cmds[2] = {argv[0], argv[0]};
        char *argv_a[] = {"child-a", NULL}, *argv_b[] = {"child-b", NULL};
        char **argvs[2] = {argv_a, argv_b};
        int np[2] = {1, 2};
        MPI_Info infos[2];
        MPI_Info_create(&infos[0]);
        MPI_Info_set(infos[0], "host", argv[1]);
        MPI_Info_create(&infos[1]);
        MPI_Info_set(infos[1], "host", argv[2]);
        MPI_Comm_spawn_multiple(2, cmds, argvs, np, infos, 0, MPI_COMM_WORLD, &inter, errcodes);
        MPI_Info_free(&infos[0]);
        MPI_Info_free(&infos[1]);
        MPI_Intercomm_merge(inter, 0, &merged);
    } else {
        role = argc > 1 ? argv[1] : "child-?";
        inter = parent;
        MPI_Intercomm_merge(inter, 1, &merged);
    }
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    int len;
    MPI_Get_processor_name(host, &len);
    printf("spawnmulti: %s %d: merged sum %d on %s\n", role, rank, sum, host);
    fflush(stdout);
    int bad = sum != msize;
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    return bad;
}
