/*
 * pmi2kvs.c - a PMI-2 client on the raw wire (length-prefixed commands on
 * PMI_FD, after a PMI-1 style "cmd=init pmi_version=2" handshake; or, as
 * MPICH's client does without PMI_FD, on a TCP connection to PMI_PORT
 * (host:port), naming itself pmiid=PMI_ID in fullinit), for
 * testing a launcher's PMI-2 server: fullinit, job-getid, kvs-put/fence/get
 * of every rank's key, info-getjobattr (PMI_process_mapping, universeSize),
 * info-putnodeattr / info-getnodeattr with wait, name-publish/lookup,
 * finalize. Prints "pmi2kvs: rank R ok"; exits 1 naming the step otherwise.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>

static int fd = -1, rank = -1, size = -1;

static void die(const char *step, const char *detail)
{
    fprintf(stderr, "pmi2kvs: rank %d: %s: %s\n", rank, step, detail);
    exit(1);
}

static void writeall(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            die("write", s);
        s += w;
        n -= (size_t)w;
    }
}

static void readall(char *b, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, b, n);
        if (r <= 0)
            die("read", "server closed the connection");
        b += r;
        n -= (size_t)r;
    }
}

/* cmd2 sends one PMI-2 command and reads the reply into buf. Length and
 * body go in one write, as MPICH's client sends them: on a TCP PMI port two
 * small writes would wait for a delayed ACK each time (Nagle). */
static void cmd2(const char *body, char *buf, size_t cap)
{
    char hdr[7], out[2100];
    int len = snprintf(out, sizeof out, "%-6d%s", (int)strlen(body), body);
    if (len < 0 || (size_t)len >= sizeof out)
        die("command too long", body);
    writeall(out, (size_t)len);
    readall(hdr, 6);
    hdr[6] = 0;
    int n = atoi(hdr);
    if (n <= 0 || (size_t)n >= cap)
        die("reply length", hdr);
    readall(buf, (size_t)n);
    buf[n] = 0;
}

/* val copies the value of key (";key=" ... ";") from a PMI-2 reply. */
static int val(const char *reply, const char *key, char *out, size_t cap)
{
    char pat[128];
    snprintf(pat, sizeof pat, ";%s=", key);
    const char *p = strstr(reply, pat);
    if (!p)
        return 0;
    p += strlen(pat);
    size_t n = 0;
    while (*p && !(p[0] == ';' && p[1] != ';') && n + 1 < cap) {
        if (p[0] == ';' && p[1] == ';')
            p++;
        out[n++] = *p++;
    }
    out[n] = 0;
    return 1;
}

static void expect(const char *body, const char *reply_cmd, char *buf, size_t cap)
{
    char rc[16], want[128];
    cmd2(body, buf, cap);
    snprintf(want, sizeof want, "cmd=%s;", reply_cmd);
    if (strncmp(buf, want, strlen(want)) != 0 || !val(buf, "rc", rc, sizeof rc) || strcmp(rc, "0") != 0)
        die(body, buf);
}

int main(void)
{
    char buf[8192], body[2048], v[1100], want[256], jobid[256];
    const char *e, *port = getenv("PMI_PORT");
    int byport = 0;
    if ((e = getenv("PMI_FD")) && getenv("PMI_RANK") && getenv("PMI_SIZE")) {
        fd = atoi(e);
        rank = atoi(getenv("PMI_RANK"));
        size = atoi(getenv("PMI_SIZE"));
    } else if (port && getenv("PMI_ID")) {
        char host[256];
        const char *colon = strrchr(port, ':');
        if (!colon || colon == port || (size_t)(colon - port) >= sizeof host)
            die("PMI_PORT", port);
        memcpy(host, port, colon - port);
        host[colon - port] = 0;
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
        if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
            die("PMI_PORT", port);
        fd = socket(ai->ai_family, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
            die("connect", port);
        freeaddrinfo(ai);
        rank = atoi(getenv("PMI_ID"));
        byport = 1;
    } else {
        die("environment", "PMI_FD, PMI_RANK and PMI_SIZE, or PMI_PORT and PMI_ID, must be set");
    }

    /* The PMI-1 style handshake that selects PMI-2. */
    const char *init = "cmd=init pmi_version=2 pmi_subversion=0\n";
    writeall(init, strlen(init));
    size_t n = 0;
    for (char c = 0; c != '\n' && n + 1 < sizeof buf;) {
        readall(&c, 1);
        buf[n++] = c;
    }
    buf[n] = 0;
    if (!strstr(buf, "pmi_version=2") || !strstr(buf, "rc=0"))
        die("init pmi_version=2", buf);

    snprintf(body, sizeof body, "cmd=fullinit;%s=%d;threaded=FALSE;", byport ? "pmiid" : "pmirank", rank);
    expect(body, "fullinit-response", buf, sizeof buf);
    if (byport && val(buf, "size", v, sizeof v))
        size = atoi(v); /* only the server knows it */
    if (!val(buf, "rank", v, sizeof v) || atoi(v) != rank || !val(buf, "size", v, sizeof v) || atoi(v) != size)
        die("fullinit rank/size", buf);
    expect("cmd=job-getid;", "job-getid-response", buf, sizeof buf);
    if (!val(buf, "jobid", jobid, sizeof jobid) || !jobid[0])
        die("job-getid", buf);

    /* A value with ';' checks the ";;" escaping both ways. */
    snprintf(body, sizeof body, "cmd=kvs-put;key=k%d;value=v;;%d;", rank, rank);
    expect(body, "kvs-put-response", buf, sizeof buf);
    expect("cmd=kvs-fence;", "kvs-fence-response", buf, sizeof buf);
    for (int r = 0; r < size; r++) {
        snprintf(body, sizeof body, "cmd=kvs-get;jobid=%s;srcid=-1;key=k%d;", jobid, r);
        expect(body, "kvs-get-response", buf, sizeof buf);
        snprintf(want, sizeof want, "v;%d", r);
        if (!val(buf, "found", v, sizeof v) || strcmp(v, "TRUE") != 0 || !val(buf, "value", v, sizeof v) ||
            strcmp(v, want) != 0)
            die("kvs-get after fence", buf);
    }
    expect("cmd=info-getjobattr;key=PMI_process_mapping;", "info-getjobattr-response", buf, sizeof buf);
    if (!val(buf, "value", v, sizeof v) || strncmp(v, "(vector,", 8) != 0)
        die("PMI_process_mapping", buf);
    expect("cmd=info-getjobattr;key=universeSize;", "info-getjobattr-response", buf, sizeof buf);
    if (!val(buf, "value", v, sizeof v) || atoi(v) < size)
        die("universeSize", buf);

    /* Node attributes: rank 0 puts after everyone else started waiting. */
    if (rank == 0) {
        usleep(100000);
        expect("cmd=info-putnodeattr;key=shm;value=seg-1;", "info-putnodeattr-response", buf, sizeof buf);
    }
    expect("cmd=info-getnodeattr;key=shm;wait=TRUE;", "info-getnodeattr-response", buf, sizeof buf);
    if (!val(buf, "value", v, sizeof v) || strcmp(v, "seg-1") != 0)
        die("info-getnodeattr wait", buf);

    if (rank == 0)
        expect("cmd=name-publish;name=pmi2svc;port=p#2;", "name-publish-response", buf, sizeof buf);
    expect("cmd=kvs-fence;", "kvs-fence-response", buf, sizeof buf);
    expect("cmd=name-lookup;name=pmi2svc;", "name-lookup-response", buf, sizeof buf);
    if (!val(buf, "port", v, sizeof v) || strcmp(v, "p#2") != 0)
        die("name-lookup", buf);
    expect("cmd=kvs-fence;", "kvs-fence-response", buf, sizeof buf);
    if (rank == 0)
        expect("cmd=name-unpublish;name=pmi2svc;", "name-unpublish-response", buf, sizeof buf);
    expect("cmd=finalize;", "finalize-response", buf, sizeof buf);
    printf("pmi2kvs: rank %d ok\n", rank);
    return 0;
}
