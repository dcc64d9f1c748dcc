/*
 * connect.c - MPI_Comm_accept/MPI_Comm_connect through a published name.
 * Rank 0 opens a port, publishes it as SERVICE (default "prun-connect") and
 * accepts on MPI_COMM_SELF, once per other rank; every other rank looks the
 * name up (retrying until it is published) and connects on MPI_COMM_SELF,
 * in rank order.
 * Over each inter-communicator the client sends its rank and the server
 * answers with rank*10; both print what they got:
 *   "connect: server got R", "connect: client R got R*10".
 * Exits 1 on a wrong answer.
 * Usage: connect [SERVICE]
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *service = argc > 1 ? argv[1] : "prun-connect";
    char port[MPI_MAX_PORT_NAME];
    int rank, size, bad = 0;
    MPI_Comm inter;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        MPI_Open_port(MPI_INFO_NULL, port);
        MPI_Publish_name(service, MPI_INFO_NULL, port);
        for (int i = 1; i < size; i++) {
            int got, answer;
            MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
            MPI_Recv(&got, 1, MPI_INT, 0, 0, inter, MPI_STATUS_IGNORE);
            printf("connect: server got %d\n", got);
            fflush(stdout);
            answer = got * 10;
            MPI_Send(&answer, 1, MPI_INT, 0, 0, inter);
            MPI_Comm_disconnect(&inter);
        }
        MPI_Unpublish_name(service, MPI_INFO_NULL, port);
        MPI_Close_port(port);
    } else {
        int answer = -1;
        /* The name may not be published yet: a failed lookup returns an
         * error instead of aborting. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        for (int tries = 0;; tries++) {
            if (MPI_Lookup_name(service, MPI_INFO_NULL, port) == MPI_SUCCESS)
                break;
            if (tries == 500) {
                fprintf(stderr, "connect: rank %d: %s not published after 5 s\n", rank, service);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            usleep(10000);
        }
        /* Clients connect in turn, each let go by the one before: Open MPI
         * names a connection's exchange after the port alone, so two
         * connects to one port at once collide (under mpirun as well). */
        if (rank > 1)
            MPI_Recv(NULL, 0, MPI_INT, rank - 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
        MPI_Send(&rank, 1, MPI_INT, 0, 0, inter);
        MPI_Recv(&answer, 1, MPI_INT, 0, 0, inter, MPI_STATUS_IGNORE);
        MPI_Comm_disconnect(&inter);
        if (rank + 1 < size)
            MPI_Send(NULL, 0, MPI_INT, rank + 1, 1, MPI_COMM_WORLD);
        printf("connect: client %d got %d\n", rank, answer);
        fflush(stdout);
        bad = answer != rank * 10;
    }
    MPI_Finalize();
    return bad;
}
