/*
 * nsname.c - MPI_Publish_name and MPI_Lookup_name across launches.
 *   nsname publish SERVICE VALUE: rank 0 publishes VALUE as SERVICE, prints
 *     "nsname: published SERVICE", waits for a line on its stdin (or its
 *     end), then unpublishes it unless the line is "keep".
 *   nsname lookup SERVICE: every rank looks SERVICE up (retrying for 10 s
 *     while it is not published) and prints "nsname: rank R found VALUE";
 *     exits 2 when it never appears.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char value[MPI_MAX_PORT_NAME];
    int rank;

    if (argc < 3 || (strcmp(argv[1], "publish") == 0 && argc < 4)) {
        fprintf(stderr, "usage: nsname publish SERVICE VALUE | nsname lookup SERVICE\n");
        return 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (strcmp(argv[1], "publish") == 0) {
        if (rank == 0) {
            char line[64] = "";
            if (MPI_Publish_name(argv[2], MPI_INFO_NULL, argv[3]) != MPI_SUCCESS) {
                fprintf(stderr, "nsname: cannot publish %s\n", argv[2]);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            printf("nsname: published %s\n", argv[2]);
            fflush(stdout);
            if (fgets(line, sizeof line, stdin) == NULL || strncmp(line, "keep", 4) != 0)
                MPI_Unpublish_name(argv[2], MPI_INFO_NULL, argv[3]);
        }
    } else {
        int tries;
        for (tries = 0; tries < 1000; tries++) {
            if (MPI_Lookup_name(argv[2], MPI_INFO_NULL, value) == MPI_SUCCESS)
                break;
            usleep(10000);
        }
        if (tries == 1000) {
            fprintf(stderr, "nsname: rank %d: %s not published after 10 s\n", rank, argv[2]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        printf("nsname: rank %d found %s\n", rank, value);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
