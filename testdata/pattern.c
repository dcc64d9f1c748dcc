/*
 * pattern.c - writes a deterministic stream, so that a test can compare
 * every byte a rank wrote with what prun delivered.
 * Usage: pattern CYCLES LEN...
 * Writes CYCLES times one line of each LEN bytes (newline included). Line n
 * (counting from 0 over the whole stream) starts "r<rank> l<n> " and goes
 * on with byte k of the line 'a' + (7n + k + 3 rank) % 26; the test builds
 * the same stream (e2e/iofbp_test.go). Writes go out in 64 KiB pieces.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[1 << 16];
static size_t fill;

static int put(char c)
{
    buf[fill++] = c;
    if (fill == sizeof buf) {
        if (write(1, buf, fill) != (ssize_t)fill)
            return -1;
        fill = 0;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *r = getenv("PRUN_RANK");
    int rank = r ? atoi(r) : 0;
    long cycles = argc > 1 ? atol(argv[1]) : 1;
    long n = 0;
    for (long c = 0; c < cycles; c++) {
        for (int a = 2; a < argc; a++, n++) {
            long len = atol(argv[a]);
            char head[64];
            int h = snprintf(head, sizeof head, "r%d l%ld ", rank, n);
            for (long k = 0; k < len - 1; k++) {
                char ch = k < h ? head[k] : (char)('a' + (7 * n + k + 3 * rank) % 26);
                if (put(ch))
                    return 1;
            }
            if (put('\n'))
                return 1;
        }
    }
    if (fill && write(1, buf, fill) != (ssize_t)fill)
        return 1;
    return 0;
}
