/*
 * exitcode.c - one rank exits non-zero after a clean MPI_Finalize.
 *
 *     exitcode RANK CODE [SLEEP]
 * All ranks MPI_Init, MPI_Barrier and MPI_Finalize. Then RANK prints
 *     exitcode: rank R exiting with CODE
 * and exits with CODE, while every other rank prints
 *     exitcode: rank R sleeping S s
 * and sleeps SLEEP seconds (default 30) before exiting 0, so that a test can
 * prove the launcher killed them when RANK failed (the job should take far
 * less than SLEEP seconds and exit with CODE).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, target, code, secs = 30;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: exitcode RANK CODE [SLEEP]\n");
        MPI_Finalize();
        return 2;
    }
    target = atoi(argv[1]);
    code = atoi(argv[2]);
    if (argc > 3)
        secs = atoi(argv[3]);

    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();

    if (rank == target) {
        printf("exitcode: rank %d exiting with %d\n", rank, code);
        fflush(stdout);
        return code;
    }
    printf("exitcode: rank %d sleeping %d s\n", rank, secs);
    fflush(stdout);
    sleep(secs);
    return 0;
}
