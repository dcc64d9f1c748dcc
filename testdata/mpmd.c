/*
 * mpmd.c - checks MPI_APPNUM in MPMD runs.
 *
 * Every rank prints
 *     mpmd: rank R appnum A
 * A is the MPI_APPNUM attribute of MPI_COMM_WORLD, or -1 when it is not set.
 * With argv[1], a comma separated list of the expected appnum of every world
 * rank in order (e.g. "0,0,1,1,1" for "-n 2 ./mpmd L : -n 3 ./mpmd L"), each
 * rank checks its own entry and the list's length against the world size,
 * and exits 1 with a message on stderr on a mismatch.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, flag = 0, appnum = -1, bad = 0;
    int *attr = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag && attr != NULL)
        appnum = *attr;

    printf("mpmd: rank %d appnum %d\n", rank, appnum);
    fflush(stdout);

    if (argc > 1) {
        /* Walk the list: entry i is the expected appnum of rank i. */
        const char *p = argv[1];
        int n = 0, want = -1;
        while (*p) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || (*end != ',' && *end != '\0')) {
                fprintf(stderr, "mpmd: rank %d: bad expectation list \"%s\"\n", rank, argv[1]);
                bad = 1;
                break;
            }
            if (n == rank)
                want = (int)v;
            n++;
            p = *end ? end + 1 : end;
        }
        if (!bad && n != size) {
            fprintf(stderr, "mpmd: rank %d: expectation list has %d entries, world size is %d\n",
                    rank, n, size);
            bad = 1;
        }
        if (!bad && appnum != want) {
            fprintf(stderr, "mpmd: rank %d: MPI_APPNUM: got %d, want %d\n", rank, appnum, want);
            bad = 1;
        }
    }

    MPI_Finalize();
    return bad;
}
