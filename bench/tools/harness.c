/*
 * harness: launch latency of several commands, measured alike. Each round
 * starts every command once (stdout to /dev/null) and waits for it, each
 * round starting one command further on, so that every command takes every
 * place in a round as often; after 2 untimed rounds, N timed ones. Prints
 * each command's median, p10 and p90 in ms. Commands are separated by "--".
 *
 *   gcc -O2 -o harness bench/tools/harness.c
 *   ./harness 400 old/prun -n 4 /bin/true -- bin/prun -n 4 /bin/true -- \
 *       old/prun -n 4 /bin/true -- bin/prun -n 4 /bin/true
 *
 * Commands are started with fork, as a shell starts them; -s starts them
 * with posix_spawn (a vfork: the parent waits until the child has exec'd),
 * as Go's os/exec, GNU make and Python's subprocess do. On this project's
 * 2-CPU VMs the two differ for launchers (see docs/benchmarks.md): compare
 * only figures taken alike. -r also prints every time, one line per
 * command: "raw INDEX T1 T2 ...".
 *
 * No runtime of its own between the runs (bench/launch is a Go program).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXCMDS 16

extern char **environ;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) {
    fprintf(stderr, "usage: harness [-r] [-s] N CMD [ARGS...] [-- CMD [ARGS...]]...\n");
    exit(2);
}

int main(int argc, char **argv) {
    int raw = 0, spawn = 0, a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "-r") == 0)
            raw = 1;
        else if (strcmp(argv[a], "-s") == 0)
            spawn = 1;
        else
            usage();
    }
    if (argc - a < 2 || atoi(argv[a]) <= 0)
        usage();
    int n = atoi(argv[a]);
    char **cmds[MAXCMDS];
    int nc = 0;
    cmds[nc++] = &argv[a + 1];
    for (int i = a + 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            if (nc == MAXCMDS || i + 1 >= argc) {
                fprintf(stderr, "harness: at most %d commands, none empty\n", MAXCMDS);
                return 2;
            }
            argv[i] = NULL;
            cmds[nc++] = &argv[i + 1];
        }
    }
    double *t = malloc(sizeof(double) * n * nc);
    int devnull = open("/dev/null", O_WRONLY);
    posix_spawn_file_actions_t fa;
    if (t == NULL || devnull < 0 || posix_spawn_file_actions_init(&fa) != 0 ||
        posix_spawn_file_actions_adddup2(&fa, devnull, 1) != 0) {
        perror("harness");
        return 1;
    }
    for (int r = -2; r < n; r++) {
        for (int k = 0; k < nc; k++) {
            int c = (r + 2 + k) % nc;
            double t0 = now_ms();
            pid_t p;
            if (spawn) {
                int err = posix_spawnp(&p, cmds[c][0], &fa, NULL, cmds[c], environ);
                if (err != 0) {
                    fprintf(stderr, "harness: %s: %s\n", cmds[c][0], strerror(err));
                    return 1;
                }
            } else if ((p = fork()) == 0) {
                dup2(devnull, 1);
                execvp(cmds[c][0], cmds[c]);
                _exit(127);
            }
            int st;
            waitpid(p, &st, 0);
            double d = now_ms() - t0;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "harness: command %d (%s) failed: status %#x\n", c, cmds[c][0], st);
                return 1;
            }
            if (r >= 0)
                t[c * n + r] = d;
        }
    }
    for (int c = 0; c < nc; c++) {
        double *x = t + c * n;
        if (raw) {
            printf("raw %d", c);
            for (int r = 0; r < n; r++)
                printf(" %.4f", x[r]);
            printf("\n");
        }
        qsort(x, n, sizeof(double), cmp);
        printf("%-2d %-36s median %.2f p10 %.2f p90 %.2f\n", c, cmds[c][0], x[n / 2], x[n / 10], x[n * 9 / 10]);
    }
    return 0;
}
