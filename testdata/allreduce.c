/*
 * allreduce.c - MPI_Allreduce(MPI_SUM) correctness over MPI_COMM_WORLD.
 *
 * For each message size (1, 1000 and 100000 ints) and ITERS iterations,
 * element j of rank r's buffer is (r+1)*(it+1) + j%7, so the sum must be
 * (it+1)*N*(N+1)/2 + N*(j%7). Every element of every result is checked.
 * Prints "allreduce: rank R ok"; on a wrong element prints the first
 * mismatch to stderr and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 100

int main(int argc, char **argv)
{
    static const int counts[] = {1, 1000, 100000};
    int rank, size, bad = 0, stop = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int maxcount = counts[sizeof counts / sizeof counts[0] - 1];
    int *in = malloc(sizeof(int) * maxcount), *out = malloc(sizeof(int) * maxcount);
    if (!in || !out) {
        fprintf(stderr, "allreduce: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    for (size_t c = 0; c < sizeof counts / sizeof counts[0] && !stop; c++) {
        int n = counts[c];
        for (int it = 0; it < ITERS && !stop; it++) {
            for (int j = 0; j < n; j++) {
                in[j] = (rank + 1) * (it + 1) + j % 7;
                out[j] = -1;
            }
            MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int j = 0; j < n; j++) {
                int want = (it + 1) * size * (size + 1) / 2 + size * (j % 7);
                if (out[j] != want) {
                    fprintf(stderr, "allreduce: rank %d: count %d, iteration %d, element %d: "
                            "got %d, want %d\n", rank, n, it, j, out[j], want);
                    bad = 1;
                    break;
                }
            }
            /* Keep every rank in the same number of collectives: agree on
             * whether anybody failed before going on. */
            MPI_Allreduce(&bad, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        }
    }

    if (!bad) {
        printf("allreduce: rank %d ok\n", rank);
        fflush(stdout);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return bad;
}
