/*
 * harness: launch latency of several commands, measured alike. Each round
 * forks every command once, in order (stdout to /dev/null), and waits for
 * it; after 2 untimed rounds, N timed ones. Prints each command's median,
 * p10 and p90 in ms. Commands are separated by "--".
 *
 *   gcc -O2 -o harness bench/tools/harness.c
 *   ./harness 400 old/prun -n 4 /bin/true -- bin/prun -n 4 /bin/true -- \
 *       old/prun -n 4 /bin/true -- bin/prun -n 4 /bin/true
 *
 * No runtime of its own between the runs (bench/launch is a Go program).
 * The place in a round matters by 0.1-0.3 ms on a 2-CPU VM: compare A B A' B'.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXCMDS 16

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: harness N CMD [ARGS...] [-- CMD [ARGS...]]...\n");
        return 2;
    }
    int n = atoi(argv[1]);
    char **cmds[MAXCMDS];
    int nc = 0;
    cmds[nc++] = &argv[2];
    for (int i = 2; i < argc; i++) {
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
    if (t == NULL || devnull < 0) {
        perror("harness");
        return 1;
    }
    for (int r = -2; r < n; r++) {
        for (int c = 0; c < nc; c++) {
            double t0 = now_ms();
            pid_t p = fork();
            if (p == 0) {
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
        qsort(x, n, sizeof(double), cmp);
        printf("%-2d %-36s median %.2f p10 %.2f p90 %.2f\n", c, cmds[c][0], x[n / 2], x[n / 10], x[n * 9 / 10]);
    }
    return 0;
}
