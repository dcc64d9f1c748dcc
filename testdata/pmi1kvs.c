/*
 * pmi1kvs.c - a PMI-1 client on the raw wire (MPICH's PMI_FD protocol),
 * for testing a launcher's PMI-1 server without MPICH's internal library.
 *
 * Usage: pmi1kvs [KEYS_PER_RANK [ROUNDS]]   (defaults 100 and 1)
 *        pmi1kvs spawn N   rank 0 spawns N copies of itself (mcmd=spawn with a
 *                          preput key); each child checks the key and its
 *                          job, prints "pmi1kvs: child R of N ok"; with
 *                          PMI1KVS_CHILD_EXIT=C the last child exits C.
 * Every rank: init, get_maxes, get_my_kvsname, get_appnum,
 * get_universe_size, get PMI_process_mapping; then ROUNDS times: put
 * KEYS_PER_RANK keys, barrier, get every key of every rank and check it.
 * Rank 0 publishes a name that the last rank looks up after a barrier.
 * Prints "pmi1kvs: rank R ok" and, on rank 0, the mean time per barrier
 * ("pmi1kvs: fence N keys/rank x SIZE ranks: T us"); exits 1 with a message
 * naming the step on any failure.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd = -1, rank = -1, size = -1;
static char kvsname[256];

static void die(const char *step, const char *detail)
{
    fprintf(stderr, "pmi1kvs: rank %d: %s: %s\n", rank, step, detail);
    exit(1);
}

static void send_line(const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = write(fd, s + off, n - off);
        if (w <= 0)
            die("write", s);
        off += (size_t)w;
    }
}

/* recv_line reads one reply line (without the newline) into buf. */
static void recv_line(char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r <= 0)
            die("read", "server closed the connection");
        if (c == '\n')
            break;
        if (n + 1 >= cap)
            die("read", "reply too long");
        buf[n++] = c;
    }
    buf[n] = 0;
}

/* field copies the value of key from a reply line. */
static int field(const char *line, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    const char *p = line;
    while ((p = strstr(p, key)) != NULL) {
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            const char *v = p + kl + 1, *e = strchr(v, ' ');
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = 0;
            return 1;
        }
        p += kl;
    }
    return 0;
}

/* call sends a command and checks the reply's cmd and rc=0. */
static void call(const char *cmd, const char *want, char *reply, size_t cap)
{
    char got[64], rc[16];
    send_line(cmd);
    recv_line(reply, cap);
    if (!field(reply, "cmd", got, sizeof got) || strcmp(got, want) != 0)
        die(cmd, reply);
    if (field(reply, "rc", rc, sizeof rc) && strcmp(rc, "0") != 0)
        die(cmd, reply);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* spawn_mode: the parent side sends mcmd=spawn; children check what the
 * launcher gave them. */
static int spawn_mode(int argc, char **argv)
{
    char reply[4096], cmd[4096], val[1100], tmp[256];
    int n = argc > 2 ? atoi(argv[2]) : 2;
    int child = argc > 3 && strcmp(argv[3], "child") == 0;

    call("cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", reply, sizeof reply);
    call("cmd=get_my_kvsname\n", "my_kvsname", reply, sizeof reply);
    field(reply, "kvsname", kvsname, sizeof kvsname);
    if (child) {
        snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=PARENT_ROOT_PORT_NAME\n", kvsname);
        call(cmd, "get_result", reply, sizeof reply);
        if (!field(reply, "value", val, sizeof val) || strcmp(val, "tag#0$port") != 0)
            die("preput key in the child's KVS", reply);
        if (size != n)
            die("child job size", getenv("PMI_SIZE"));
        call("cmd=barrier_in\n", "barrier_out", reply, sizeof reply);
        call("cmd=finalize\n", "finalize_ack", reply, sizeof reply);
        printf("pmi1kvs: child %d of %d ok\n", rank, size);
        /* PMI1KVS_CHILD_EXIT makes the last child fail, for launcher tests. */
        if (getenv("PMI1KVS_CHILD_EXIT") && rank == size - 1)
            return atoi(getenv("PMI1KVS_CHILD_EXIT"));
        return 0;
    }
    /* Without a spawn, the parents' KVS has no parent port. */
    snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=PARENT_ROOT_PORT_NAME\n", kvsname);
    send_line(cmd);
    recv_line(reply, sizeof reply);
    if (!field(reply, "rc", tmp, sizeof tmp) || strcmp(tmp, "0") == 0)
        die("parent has a PARENT_ROOT_PORT_NAME", reply);
    if (rank == 0) {
        snprintf(cmd, sizeof cmd,
                 "mcmd=spawn\nnprocs=%d\nexecname=%s\ntotspawns=1\nspawnssofar=1\nargcnt=3\narg1=spawn\n"
                 "arg2=%d\narg3=child\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\n"
                 "preput_val_0=tag#0$port\ninfo_num=0\nendcmd\n",
                 n, argv[0], n);
        call(cmd, "spawn_result", reply, sizeof reply);
    }
    call("cmd=barrier_in\n", "barrier_out", reply, sizeof reply);
    call("cmd=finalize\n", "finalize_ack", reply, sizeof reply);
    printf("pmi1kvs: parent %d spawned ok\n", rank);
    return 0;
}

int main(int argc, char **argv)
{
    char reply[4096], cmd[2048], val[1100], want[1100], tmp[256];
    int nkeys = argc > 1 ? atoi(argv[1]) : 100;
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    const char *e;

    if (!(e = getenv("PMI_FD")) || !getenv("PMI_RANK") || !getenv("PMI_SIZE"))
        die("environment", "PMI_FD, PMI_RANK and PMI_SIZE must be set");
    fd = atoi(e);
    rank = atoi(getenv("PMI_RANK"));
    size = atoi(getenv("PMI_SIZE"));
    if (argc > 1 && strcmp(argv[1], "spawn") == 0)
        return spawn_mode(argc, argv);

    call("cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", reply, sizeof reply);
    call("cmd=get_maxes\n", "maxes", reply, sizeof reply);
    if (!field(reply, "vallen_max", tmp, sizeof tmp) || atoi(tmp) < 64)
        die("get_maxes", reply);
    call("cmd=get_my_kvsname\n", "my_kvsname", reply, sizeof reply);
    if (!field(reply, "kvsname", kvsname, sizeof kvsname) || !kvsname[0])
        die("get_my_kvsname", reply);
    call("cmd=get_appnum\n", "appnum", reply, sizeof reply);
    call("cmd=get_universe_size\n", "universe_size", reply, sizeof reply);
    /* Hydra answers -1 ("unknown"); a launcher that knows must say at
     * least the job size. */
    if (!field(reply, "size", tmp, sizeof tmp) || (atoi(tmp) < size && atoi(tmp) != -1))
        die("get_universe_size", reply);
    if (getenv("PMI1KVS_WANT_UNIVERSE") && atoi(tmp) != atoi(getenv("PMI1KVS_WANT_UNIVERSE")))
        die("get_universe_size (PMI1KVS_WANT_UNIVERSE)", reply);
    snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=PMI_process_mapping\n", kvsname);
    call(cmd, "get_result", reply, sizeof reply);
    if (!field(reply, "value", val, sizeof val) || strncmp(val, "(vector,", 8) != 0)
        die("PMI_process_mapping", reply);

    double total = 0;
    for (int round = 0; round < rounds; round++) {
        for (int k = 0; k < nkeys; k++) {
            snprintf(cmd, sizeof cmd, "cmd=put kvsname=%s key=r%d.k%d.%d value=v-%d-%d-%d\n", kvsname, rank, k,
                     round, rank, k, round);
            call(cmd, "put_result", reply, sizeof reply);
        }
        double t0 = now_us();
        call("cmd=barrier_in\n", "barrier_out", reply, sizeof reply);
        total += now_us() - t0;
        for (int r = 0; r < size; r++) {
            for (int k = 0; k < nkeys; k++) {
                snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=r%d.k%d.%d\n", kvsname, r, k, round);
                call(cmd, "get_result", reply, sizeof reply);
                snprintf(want, sizeof want, "v-%d-%d-%d", r, k, round);
                if (!field(reply, "value", val, sizeof val) || strcmp(val, want) != 0)
                    die("get after barrier", reply);
            }
        }
    }

    /* A key nobody put is reported missing, not invented. */
    snprintf(cmd, sizeof cmd, "cmd=get kvsname=%s key=no.such.key\n", kvsname);
    send_line(cmd);
    recv_line(reply, sizeof reply);
    if (!field(reply, "rc", tmp, sizeof tmp) || strcmp(tmp, "0") == 0)
        die("get of a missing key", reply);

    /* Names: rank 0 publishes, the last rank looks up after a barrier. */
    if (rank == 0)
        call("cmd=publish_name service=pmi1kvs-svc port=port#42\n", "publish_result", reply, sizeof reply);
    call("cmd=barrier_in\n", "barrier_out", reply, sizeof reply);
    if (rank == size - 1) {
        call("cmd=lookup_name service=pmi1kvs-svc\n", "lookup_result", reply, sizeof reply);
        if (!field(reply, "port", val, sizeof val) || strcmp(val, "port#42") != 0)
            die("lookup_name", reply);
    }
    call("cmd=barrier_in\n", "barrier_out", reply, sizeof reply);
    if (rank == 0)
        call("cmd=unpublish_name service=pmi1kvs-svc\n", "unpublish_result", reply, sizeof reply);

    call("cmd=finalize\n", "finalize_ack", reply, sizeof reply);
    printf("pmi1kvs: rank %d ok\n", rank);
    if (rank == 0)
        printf("pmi1kvs: fence %d keys/rank x %d ranks: %.0f us\n", nkeys, size, total / rounds);
    return 0;
}
