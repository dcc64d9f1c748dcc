/*
 * hello.c - the friendly demo program (`make demo`).
 *
 * Every rank prints one line:
 *     hello from rank R of N on HOST (app A)
 * where A is the MPI_APPNUM attribute of MPI_COMM_WORLD, i.e. the index of
 * the application context ("-n 4 ./hello : -n 2 ./hello2" gives 0 and 1).
 * When the launcher does not set MPI_APPNUM, A is printed as 0.
 *
 * hello also joins one MPI_Allreduce over MPI_COMM_WORLD (the sum of the
 * ranks) without printing it: hello2 prints that sum, and a collective over
 * the world needs every rank of the world, so the MPMD demo
 * "-n 4 ./hello : -n 2 ./hello2" only works if both programs take part.
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, flag = 0, appnum = 0;
    int *attr = NULL;
    long mine, sum = 0;
    char host[256] = "unknown";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag && attr != NULL)
        appnum = *attr;
    gethostname(host, sizeof host - 1);

    /* The world sum of ranks that hello2 prints (see above). */
    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    printf("hello from rank %d of %d on %s (app %d)\n", rank, size, host, appnum);
    fflush(stdout);

    MPI_Finalize();
    return 0;
}
