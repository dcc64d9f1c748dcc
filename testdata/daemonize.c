/* daemonize.c: a rank that leaves a daemon behind and exits, as daemon(3)
 * and double-forking services do: fork, setsid, fork again; the grandchild
 * (no parent, no terminal, a session and process group of its own) closes
 * its standard streams and sleeps for ever.
 *
 *   daemonize [clearenv|holdout] [DIR]
 *
 * clearenv: the daemon execs `sleep` with an empty environment, so nothing
 * in it says which job it came from. holdout: it keeps the rank's stdout
 * and stderr open. The rank prints "daemon PID" once the daemon runs and,
 * with DIR, also writes PID to DIR/daemon.$PRUN_RANK.$PRUN_NSPACE (read by
 * a test that kills prun before it prints anything).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	const char *dir = argc > 2 ? argv[2] : NULL;
	int p[2];
	if (pipe(p) != 0) {
		perror("daemonize: pipe");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("daemonize: fork");
		return 1;
	}
	if (child == 0) {
		setsid();
		pid_t d = fork();
		if (d != 0)
			_exit(d < 0);
		/* The daemon. */
		close(p[0]);
		pid_t self = getpid();
		if (write(p[1], &self, sizeof self) != sizeof self)
			_exit(1);
		close(p[1]);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		if (strcmp(mode, "holdout") != 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		if (null > 2)
			close(null);
		char *args[] = {"sleep", "600", NULL};
		char *noenv[] = {NULL};
		if (strcmp(mode, "clearenv") == 0)
			execve("/bin/sleep", args, noenv);
		else
			execv("/bin/sleep", args);
		_exit(127);
	}
	close(p[1]);
	pid_t d;
	if (read(p[0], &d, sizeof d) != sizeof d) {
		fprintf(stderr, "daemonize: no daemon\n");
		return 1;
	}
	waitpid(child, NULL, 0);
	if (dir) {
		char path[4096];
		snprintf(path, sizeof path, "%s/daemon.%s.%s", dir, getenv("PRUN_RANK") ? getenv("PRUN_RANK") : "x",
		         getenv("PRUN_NSPACE") ? getenv("PRUN_NSPACE") : "x");
		FILE *f = fopen(path, "w");
		if (!f || fprintf(f, "%d\n", (int)d) < 0 || fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	printf("daemon %d\n", (int)d);
	return 0;
}
