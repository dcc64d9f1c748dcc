/*
 * spawn.c - MPI dynamic processes: the parents (started by the launcher)
 * spawn NCHILD copies of this program (default 2), parents and children
 * merge the inter-communicator and allreduce 1 from every process.
 * Everyone checks the sum (parents + children) and prints
 * "spawn: parent|child R of N: merged sum S (merged rank M of T) on HOST".
 * Exits 1 on a wrong sum. With HOST, the children are asked for on that
 * host (or --host style list) through the "host" info key. A child exits
 * with $SPAWN_CHILD_EXIT, when set, after finalizing.
 * Usage: spawn [NCHILD [HOST]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Comm parent, inter, merged;
    int rank, size, nchild = argc > 1 ? atoi(argv[1]) : 2, one = 1, sum = 0, mrank, msize;
    int errcodes[64];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        if (nchild < 1 || nchild > 64) {
            fprintf(stderr, "spawn: bad child count %d\n", nchild);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        char *child_argv[] = {argc > 1 ? argv[1] : "2", NULL};
        MPI_Info info = MPI_INFO_NULL;
        if (argc > 2) {
            MPI_Info_create(&info);
            MPI_Info_set(info, "host", argv[2]);
        }
        MPI_Comm_spawn(argv[0], child_argv, nchild, info, 0, MPI_COMM_WORLD, &inter, errcodes);
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
        for (int i = 0; i < nchild; i++) {
            if (errcodes[i] != MPI_SUCCESS) {
                fprintf(stderr, "spawn: child %d failed to start\n", i);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        MPI_Intercomm_merge(inter, 0, &merged);
    } else {
        inter = parent;
        MPI_Intercomm_merge(inter, 1, &merged);
    }
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    char host[MPI_MAX_PROCESSOR_NAME];
    int hostlen;
    MPI_Get_processor_name(host, &hostlen);
    printf("spawn: %s %d of %d: merged sum %d (merged rank %d of %d) on %s\n", parent == MPI_COMM_NULL ? "parent" : "child",
           rank, size, sum, mrank, msize, host);
    fflush(stdout);
    int bad = sum != msize;
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    MPI_Finalize();
    if (parent != MPI_COMM_NULL && getenv("SPAWN_CHILD_EXIT") != NULL)
        return atoi(getenv("SPAWN_CHILD_EXIT"));
    return bad;
}
