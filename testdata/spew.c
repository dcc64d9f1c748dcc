/*
 * spew.c - writes output fast, for forwarding tests and benchmarks.
 * Usage: spew BYTES [LINELEN]
 * Writes BYTES bytes to stdout as lines of LINELEN bytes (default 100,
 * newline included; LINELEN 0 means one line with no newline at all), each
 * line "rank R line N" padded with 'x'. Exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long long total = argc > 1 ? atoll(argv[1]) : 1000000;
    int len = argc > 2 ? atoi(argv[2]) : 100;
    const char *r = getenv("PRUN_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (!r)
        r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = "?";
    static char buf[1 << 16];
    long long done = 0, n = 0;
    if (len <= 0) {
        memset(buf, 'z', sizeof buf);
        while (done < total) {
            size_t k = total - done < (long long)sizeof buf ? (size_t)(total - done) : sizeof buf;
            if (write(1, buf, k) != (ssize_t)k)
                return 1;
            done += k;
        }
        return 0;
    }
    if (len > 4096)
        len = 4096;
    size_t fill = 0;
    while (done < total) {
        char line[4097];
        int k = snprintf(line, sizeof line, "rank %s line %lld ", r, n++);
        if (k >= len)
            k = len - 1;
        memset(line + k, 'x', (size_t)(len - 1 - k));
        line[len - 1] = '\n';
        if (fill + (size_t)len > sizeof buf) {
            if (write(1, buf, fill) != (ssize_t)fill)
                return 1;
            fill = 0;
        }
        memcpy(buf + fill, line, (size_t)len);
        fill += (size_t)len;
        done += len;
    }
    if (fill && write(1, buf, fill) != (ssize_t)fill)
        return 1;
    return 0;
}
