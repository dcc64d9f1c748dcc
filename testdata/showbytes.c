/*
 * showbytes.c - prints what a process was given, as hex, so that a test can
 * compare it byte for byte between a local and a remote run:
 *     arg I HEX         each argument after argv[0]
 *     env HEX           each environment entry that starts with "PRUNB_"
 *     cwd HEX           the working directory
 *     exe HEX           the program's path (/proc/self/exe)
 *     file HEX          each name in the working directory that starts with "f"
 * Lines in that order; the environment and the names sorted by their hex.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static char *hex(const char *s)
{
    size_t n = strlen(s);
    char *h = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        sprintf(h + 2 * i, "%02x", (unsigned char)s[i]);
    h[2 * n] = 0;
    return h;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void sorted(const char *tag, char **v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    for (int i = 0; i < n; i++)
        printf("%s %s\n", tag, v[i]);
}

int main(int argc, char **argv)
{
    char buf[8192];
    char *v[1024];
    int n = 0;
    ssize_t len;
    DIR *d;
    struct dirent *e;

    for (int i = 1; i < argc; i++)
        printf("arg %d %s\n", i, hex(argv[i]));
    for (char **p = environ; *p && n < 1024; p++)
        if (strncmp(*p, "PRUNB_", 6) == 0)
            v[n++] = hex(*p);
    sorted("env", v, n);
    if (getcwd(buf, sizeof buf))
        printf("cwd %s\n", hex(buf));
    if ((len = readlink("/proc/self/exe", buf, sizeof buf - 1)) > 0) {
        buf[len] = 0;
        printf("exe %s\n", hex(buf));
    }
    n = 0;
    if ((d = opendir("."))) {
        while ((e = readdir(d)) && n < 1024)
            if (e->d_name[0] == 'f')
                v[n++] = hex(e->d_name);
        closedir(d);
    }
    sorted("file", v, n);
    return 0;
}
