/*
 * hello2.c - the second demo program, for MPMD runs such as
 *     prun -n 4 ./hello : -n 2 ./hello2
 *
 * Every rank prints one line:
 *     hello2: rank R of N (app A) says hi; world sum of ranks = S
 * S comes from an MPI_Allreduce over MPI_COMM_WORLD, so it proves that the
 * hello2 ranks share one world with the other application's ranks
 * (S = N*(N-1)/2). Exits 1 if the sum is wrong.
 *
 * Every rank of the world must join that MPI_Allreduce, so hello2 runs alone
 * or next to hello (which joins it too), not next to other programs.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, flag = 0, appnum = 0;
    int *attr = NULL;
    long mine, sum = 0, want;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &attr, &flag);
    if (flag && attr != NULL)
        appnum = *attr;

    mine = rank;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    want = (long)size * (size - 1) / 2;

    printf("hello2: rank %d of %d (app %d) says hi; world sum of ranks = %ld\n",
           rank, size, appnum, sum);
    fflush(stdout);
    if (sum != want) {
        fprintf(stderr, "hello2: rank %d: sum of ranks: got %ld, want %ld\n", rank, sum, want);
        MPI_Finalize();
        return 1;
    }
    MPI_Finalize();
    return 0;
}
