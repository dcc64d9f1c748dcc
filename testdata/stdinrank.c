/*
 * stdinrank.c - which ranks of an MPI job read the launcher's stdin, and
 * whether every byte arrives.
 *
 * Build: mpicc -O2 -Wall stdinrank.c
 *
 * Every rank calls MPI_Init, reads its stdin to the end and prints
 *     stdinrank: rank R read B bytes, L lines, fnv F
 * (F: the 32-bit FNV-1a hash of the bytes, in hex), then the job sums B over
 * MPI_COMM_WORLD (MPI_Allreduce) and rank 0 prints
 *     stdinrank: world read B bytes
 * A launcher that gives its stdin to rank 0 alone (the default) makes every
 * other rank read 0 bytes at once.
 *
 * A SIGALRM watchdog (60 s) ends a rank stuck in a read or a call, naming
 * it ("stdinrank: rank R: timed out in WHERE").
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int rank = -1;
static const char *volatile phase = "MPI_Init";

static void on_alarm(int sig)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, "stdinrank: rank %d: timed out in %s\n", rank, phase);
    (void)sig;
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

int main(int argc, char **argv)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    phase = "read(stdin)";
    static char buf[65536];
    long long bytes = 0, lines = 0, total = 0;
    uint32_t h = 2166136261u;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0) {
            perror("stdinrank: read");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            h = (h ^ (unsigned char)buf[i]) * 16777619u;
            lines += buf[i] == '\n';
        }
        bytes += n;
    }
    printf("stdinrank: rank %d read %lld bytes, %lld lines, fnv %08x\n", rank, bytes, lines, h);
    fflush(stdout);
    phase = "MPI_Allreduce";
    MPI_Allreduce(&bytes, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("stdinrank: world read %lld bytes\n", total);
    phase = "MPI_Finalize";
    MPI_Finalize();
    return 0;
}
