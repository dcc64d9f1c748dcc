/*
 * ring.c - passes a token around MPI_COMM_WORLD, LAPS times.
 *
 * Each lap rank 0 starts the token at 0; every rank adds its own rank and
 * passes it to rank+1; the last rank sends it back to rank 0, which checks
 * that it came back as N*(N-1)/2. Each rank also checks the value it receives
 * (the sum of all lower ranks). Output:
 *     ring: rank R ok                      (every rank)
 *     ring: N ranks, L laps, sum ok        (rank 0, after its own line)
 * Works for N=1 (rank 0 is its own neighbour, no messages). Exits 1 with a
 * message on stderr on a wrong value.
 */
#include <mpi.h>
#include <stdio.h>

#define LAPS 10

int main(int argc, char **argv)
{
    int rank, size, lap, bad = 0;
    long token, want;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    for (lap = 0; lap < LAPS; lap++) {
        if (size == 1) {
            token = 0 + rank;
        } else if (rank == 0) {
            token = 0; /* + rank 0 */
            MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            want = (long)rank * (rank - 1) / 2;
            if (token != want) {
                fprintf(stderr, "ring: rank %d: lap %d: received %ld from rank %d, want %ld\n",
                        rank, lap, token, prev, want);
                bad = 1;
            }
            token += rank;
            MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD);
        }
        if (rank == 0) {
            want = (long)size * (size - 1) / 2;
            if (token != want) {
                fprintf(stderr, "ring: rank 0: lap %d: token came back as %ld, want %ld\n",
                        lap, token, want);
                bad = 1;
            }
        }
    }

    if (!bad) {
        printf("ring: rank %d ok\n", rank);
        if (rank == 0)
            printf("ring: %d ranks, %d laps, sum ok\n", size, LAPS);
        fflush(stdout);
    }
    MPI_Finalize();
    return bad;
}
