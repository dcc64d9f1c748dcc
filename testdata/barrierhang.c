/*
 * barrierhang.c - an MPI job hung at a barrier: the last rank never reaches
 * it, blocking in never_arrives, while every other rank waits in
 * MPI_Barrier. Each rank prints "rank R pid P" once it is in place (the
 * last one before it blocks), for stacktree's tests of merged stacks.
 */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) void never_arrives(void)
{
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d pid %d\n", rank, (int)getpid());
	fflush(stdout);
	if (rank == size - 1)
		never_arrives();
	MPI_Barrier(MPI_COMM_WORLD);
	sink = 1;
	MPI_Finalize();
	return 0;
}
