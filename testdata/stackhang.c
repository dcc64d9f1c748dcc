/*
 * stackhang.c - a process that blocks in a known function, for stacktree's
 * tests of real debugger output.
 *
 *     stackhang          blocks in hang_at_barrier (called from wait_step)
 *     stackhang lone     blocks in hang_alone (called from wait_step)
 *
 * Either way a second thread blocks in helper_sleep, so every process has
 * two threads. It prints "ready" once both are in place.
 *
 * The functions are noinline and each call is followed by a volatile store,
 * so -O2 neither inlines them nor turns the calls into jumps: each stays a
 * frame of its own in the stack.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) void hang_at_barrier(void)
{
	for (;;)
		pause();
}

__attribute__((noinline)) void hang_alone(void)
{
	for (;;)
		pause();
}

__attribute__((noinline)) void wait_step(int lone)
{
	if (lone)
		hang_alone();
	else
		hang_at_barrier();
	sink = 1;
}

__attribute__((noinline)) void *helper_sleep(void *arg)
{
	(void)arg;
	for (;;)
		sleep(1000);
	sink = 2;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	int lone = argc > 1 && strcmp(argv[1], "lone") == 0;

	if (pthread_create(&t, NULL, helper_sleep, NULL) != 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	wait_step(lone);
	sink = 3;
	return 0;
}
