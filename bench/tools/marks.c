/*
 * marks: where a launch's time goes, from the fork. Runs a command N times
 * (after 2 untimed runs) with PRUN_DEBUG_TIMING=1 and PRUN_DEBUG_T0 set to
 * the time just before each fork, reads the "prun timing" lines the command
 * prints on stderr (prun, and testdata/pmixfloor.c), and prints each
 * milestone's mean with the step before it, then the mean time until the
 * process was reaped. stdout goes to /dev/null.
 *
 *   gcc -O2 -o marks bench/tools/marks.c
 *   ./marks 200 bin/prun -n 4 /bin/true
 *   ./marks 200 ./pmixfloor TOPOLOGY.xml 4 /bin/true
 *
 * A milestone is named by its text after "NSPACE: ", so that every run's
 * namespace counts as one.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXMARKS 64

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static char names[MAXMARKS][256];
static double sum[MAXMARKS];
static int count[MAXMARKS], nmarks;

static void record(const char *name, double ms) {
    int k;
    for (k = 0; k < nmarks && strcmp(names[k], name) != 0; k++) {}
    if (k == nmarks) {
        if (nmarks == MAXMARKS) return;
        snprintf(names[nmarks++], sizeof names[0], "%s", name);
    }
    sum[k] += ms;
    count[k]++;
}

int main(int argc, char **argv) {
    if (argc < 3 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: marks RUNS COMMAND [ARGS...]\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    double waited = 0;
    setenv("PRUN_DEBUG_TIMING", "1", 1);
    for (int i = 0; i < runs + 2; i++) {
        int p[2];
        if (pipe(p) != 0) { perror("pipe"); return 1; }
        char t0[32];
        long long start = now_ns();
        snprintf(t0, sizeof t0, "%lld", start);
        setenv("PRUN_DEBUG_T0", t0, 1);
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(p[1], 2);
            close(p[0]);
            execvp(argv[2], argv + 2);
            _exit(127);
        }
        close(p[1]);
        static char buf[1 << 20];
        size_t len = 0;
        ssize_t r;
        while (len < sizeof buf - 1 && (r = read(p[0], buf + len, sizeof buf - 1 - len)) > 0) len += r;
        buf[len] = 0;
        close(p[0]);
        int st;
        waitpid(pid, &st, 0);
        double ms = (now_ns() - start) / 1e6;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "marks: run %d: %s failed (status %#x)\n", i, argv[2], st);
            return 1;
        }
        if (i < 2) continue; /* warm-up */
        waited += ms;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            double at;
            int who;
            char name[256];
            if (sscanf(line, "prun timing %lf ms [%d] %255[^\n]", &at, &who, name) != 3) continue;
            char *sep = strstr(name, ": ");
            record(sep ? sep + 2 : name, at);
        }
    }
    double prev = 0;
    for (int k = 0; k < nmarks; k++) {
        double m = sum[k] / count[k];
        printf("%8.3f ms  %+7.3f  %s\n", m, m - prev, names[k]);
        prev = m;
    }
    printf("%8.3f ms  %+7.3f  process reaped\n", waited / runs, waited / runs - prev);
    return 0;
}
