/*
 * abort.c - one rank calls MPI_Abort while the others hang.
 *
 *     abort [RANK [CODE]]
 * RANK defaults to 1 (0 when the world has a single rank), CODE to 17.
 * All ranks MPI_Init and MPI_Barrier; then RANK prints
 *     abort: rank R aborting with CODE
 * and calls MPI_Abort(MPI_COMM_WORLD, CODE), while every other rank blocks
 * forever in an MPI_Recv from MPI_ANY_SOURCE that nobody will match. The job
 * ends only if the launcher kills those ranks; it should exit with CODE.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, victim, code = 17, buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    victim = size == 1 ? 0 : 1;
    if (argc > 1)
        victim = atoi(argv[1]);
    if (argc > 2)
        code = atoi(argv[2]);
    if (victim < 0 || victim >= size) {
        if (rank == 0)
            fprintf(stderr, "abort: rank %d does not exist in a world of %d\n", victim, size);
        MPI_Finalize();
        return 2;
    }

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        printf("abort: rank %d aborting with %d\n", rank, code);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, code);
        return 3; /* not reached */
    }
    /* Never matched: only the launcher can end this rank. */
    MPI_Recv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fprintf(stderr, "abort: rank %d: MPI_Recv returned, which it never should\n", rank);
    return 4;
}
