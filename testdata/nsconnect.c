/*
 * nsconnect.c - MPI_Comm_accept/MPI_Comm_connect between two launches,
 * through a name server (Hydra's -nameserver).
 *   nsconnect server SERVICE: rank 0 opens a port and publishes it as
 *     SERVICE; the job accepts one connection on MPI_COMM_WORLD, and rank 0
 *     answers each remote rank R with R*10, printing
 *     "nsconnect: server got R".
 *   nsconnect client SERVICE: rank 0 looks SERVICE up (retrying for 10 s),
 *     the job connects on MPI_COMM_WORLD, and every rank sends its rank to
 *     the server's rank 0 and prints "nsconnect: client R got R*10".
 * Exits 1 on a wrong answer, 2 when the name never appears.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME] = "";
    int rank, bad = 0;
    MPI_Comm inter;

    if (argc < 3) {
        fprintf(stderr, "usage: nsconnect server|client SERVICE\n");
        return 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (strcmp(argv[1], "server") == 0) {
        int remote;
        if (rank == 0) {
            MPI_Open_port(MPI_INFO_NULL, port);
            MPI_Publish_name(argv[2], MPI_INFO_NULL, port);
        }
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        MPI_Comm_remote_size(inter, &remote);
        if (rank == 0) {
            for (int i = 0; i < remote; i++) {
                int got, answer;
                MPI_Status st;
                MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 0, inter, &st);
                printf("nsconnect: server got %d\n", got);
                fflush(stdout);
                answer = got * 10;
                MPI_Send(&answer, 1, MPI_INT, st.MPI_SOURCE, 0, inter);
            }
            MPI_Unpublish_name(argv[2], MPI_INFO_NULL, port);
        }
        MPI_Comm_disconnect(&inter);
        if (rank == 0)
            MPI_Close_port(port);
    } else {
        int answer = -1;
        if (rank == 0) {
            int tries;
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            for (tries = 0; tries < 1000; tries++) {
                if (MPI_Lookup_name(argv[2], MPI_INFO_NULL, port) == MPI_SUCCESS)
                    break;
                usleep(10000);
            }
            if (tries == 1000) {
                fprintf(stderr, "nsconnect: %s not published after 10 s\n", argv[2]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        MPI_Send(&rank, 1, MPI_INT, 0, 0, inter);
        MPI_Recv(&answer, 1, MPI_INT, 0, 0, inter, MPI_STATUS_IGNORE);
        MPI_Comm_disconnect(&inter);
        printf("nsconnect: client %d got %d\n", rank, answer);
        fflush(stdout);
        bad = answer != rank * 10;
    }
    MPI_Finalize();
    return bad;
}
