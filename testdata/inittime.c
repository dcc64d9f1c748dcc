/*
 * inittime.c - where an MPI rank's time goes (bench/slurm -profile).
 *
 * Every rank prints one line of CLOCK_REALTIME nanoseconds:
 *     inittime R main MAIN init INIT bar BAR fin FIN
 * at main's entry, after MPI_Init, after one MPI_Barrier (the first
 * message between the nodes) and after MPI_Finalize, which the
 * benchmark subtracts from the time it started the launcher.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

static long long now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int rank = -1;
    long long t0 = now(), t1, t2, t3;

    MPI_Init(&argc, &argv);
    t1 = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    t2 = now();
    MPI_Finalize();
    t3 = now();
    printf("inittime %d main %lld init %lld bar %lld fin %lld\n", rank, t0, t1, t2, t3);
    return 0;
}
