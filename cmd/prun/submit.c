/*
 * prun's submitter to a persistent runtime (a DVM), run before Go's runtime
 * starts: a constructor, called by the C library's start-up before the
 * Go runtime's own entry. Go's start (its runtime, threads and package
 * initialisation, in a process linked with cgo) is three quarters of a
 * prun process's start on the project's VMs, and a warm DVM's whole job
 * takes about as long as that start (docs/benchmarks.md). A submitter
 * needs none of it: it sends its command line unparsed, with its stdin,
 * stdout and stderr, and the DVM parses and runs it there (dvm/wire.go).
 *
 * It takes the common case only, and leaves anything else to Go's main,
 * which then does what it always did: a runtime named by --dvm, no runtime
 * found, any check that fails before the submission is sent (Go repeats it
 * and says why), and a command line the DVM answers is not a job
 * (Reply.Local: completion, --debug, --version). It finds the runtime as
 * dvm.Resolve and dvm.Default do (PRUN_DVM, else this allocation's default,
 * else outside any the one the user made every shell's default; none: the
 * job runs standalone) and checks it as dvm.Dial does (a directory of this
 * user's alone, a peer running as this user or root).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* launcher/signals.go's forwarded. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGTSTP, SIGWINCH};
#define NSIG_FWD (int)(sizeof forwarded / sizeof forwarded[0])

static int sig_w = -1;
static double t0_ms;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* internal/trace's Mark, for PRUN_DEBUG_TIMING=1. */
static void mark(const char *what) {
    const char *v = getenv("PRUN_DEBUG_TIMING");
    if (v && strcmp(v, "1") == 0)
        dprintf(2, "prun timing %8.2f ms [%d] %s\n", now_ms() - t0_ms, (int)getpid(), what);
}

static void on_signal(int sig) {
    int e = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_w, &b, 1);
    errno = e;
}

struct buf {
    char *p;
    size_t n, cap;
};

/* put appends s and its NUL; 0 when out of memory. */
static int put(struct buf *b, const char *s) {
    size_t n = strlen(s) + 1;
    if (b->n + n > b->cap) {
        size_t cap = (b->cap + n) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 1;
}

static int append(char *dst, size_t cap, const char *s) {
    size_t n = strlen(dst), m = strlen(s);
    if (n + m >= cap)
        return 0;
    memcpy(dst + n, s, m + 1);
    return 1;
}

/* owned_dir: d is a directory of uid's that no one else may write to (dvm's usersOwn). */
static int owned_dir(const char *d, uid_t uid) {
    struct stat st;
    return lstat(d, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && (st.st_mode & 022) == 0;
}

/* absolute: set and an absolute path (Go's filepath.IsAbs). */
static const char *absolute(const char *v) { return v && v[0] == '/' ? v : NULL; }

/*
 * base_dir is dvm.BaseDir, in its order: $XDG_RUNTIME_DIR/prun-dvm,
 * /run/user/UID/prun-dvm when it is the user's, /run/prun-dvm for root,
 * $XDG_STATE_HOME/prun/run-HOST or $HOME/.local/state/prun/run-HOST, else
 * $TMPDIR/prun-dvm-UID. 0 when Go's main must decide.
 */
static int base_dir(char *dir, size_t cap) {
    uid_t uid = getuid();
    char run[64];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    dir[0] = 0;
    if (xdg && *xdg)
        return append(dir, cap, xdg) && append(dir, cap, "/prun-dvm");
    snprintf(run, sizeof run, "/run/user/%u", (unsigned)uid);
    if (owned_dir(run, uid))
        return append(dir, cap, run) && append(dir, cap, "/prun-dvm");
    if (uid == 0)
        return append(dir, cap, "/run/prun-dvm");
    const char *state = absolute(getenv("XDG_STATE_HOME")), *home = absolute(getenv("HOME"));
    if (state || home) {
        char host[256];
        if (gethostname(host, sizeof host) != 0)
            return 0;
        host[sizeof host - 1] = 0;
        for (char *h = host; *h; h++) {
            if ((unsigned char)*h >= 0x80)
                return 0; /* Go maps runes, not bytes: let it */
            if (*h == '/' || (unsigned char)*h < ' ')
                *h = '_';
        }
        return (state ? append(dir, cap, state) && append(dir, cap, "/prun")
                      : append(dir, cap, home) && append(dir, cap, "/.local/state/prun")) &&
               append(dir, cap, "/run-") && append(dir, cap, host);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(run, sizeof run, "/prun-dvm-%u", (unsigned)uid);
    return append(dir, cap, tmp && *tmp ? tmp : "/tmp") && append(dir, cap, run);
}

/* good_name is dvm.CheckName: one path element, not starting with a dot. */
static int good_name(const char *name) { return name[0] != 0 && name[0] != '.' && !strchr(name, '/'); }

/*
 * scope appends dvm.Allocation's suffix (".slurm-42": the first batch
 * system's job id, sanitised) when in an allocation; *in says whether it
 * is. 0 when Go's main must decide.
 */
static int scope(char *dir, size_t cap, int *in) {
    static const char *const ids[][2] = {{"SLURM_JOB_ID", "slurm"}, {"PBS_JOBID", "pbs"}, {"LSB_JOBID", "lsf"}};
    *in = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *id = getenv(ids[i][0]);
        if (!id || !*id)
            continue;
        char s[256];
        size_t n = strlen(id);
        if (n >= sizeof s)
            return 0;
        for (size_t k = 0; k <= n; k++) {
            unsigned char c = (unsigned char)id[k];
            if (c >= 0x80)
                return 0; /* Go maps runes, not bytes: let it */
            s[k] = (c == '/' || (c < ' ' && c != 0)) ? '_' : (char)c;
        }
        *in = 1;
        return append(dir, cap, ".") && append(dir, cap, ids[i][1]) && append(dir, cap, "-") && append(dir, cap, s);
    }
    return 1;
}

/*
 * runtime_dir is the runtime a job goes to, as Go's main finds it: PRUN_DVM's
 * (dvm.Resolve: a path, its directory or its socket, or a name in this
 * allocation's scope), else dvm.Default: inside an allocation its default,
 * outside any the one the user made every shell's (the base directory's
 * .default link). 0: none, or Go's main must decide.
 */
static int runtime_dir(char *dir, size_t cap) {
    const char *v = getenv("PRUN_DVM");
    dir[0] = 0;
    if (v && *v && strchr(v, '/')) {
        size_t n = strlen(v);
        if (n >= cap)
            return 0;
        memcpy(dir, v, n + 1);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = 0;
        if (n >= 5 && strcmp(dir + n - 5, "/sock") == 0)
            dir[n - 5] = 0; /* filepath.Dir would clean it; the kernel reads it alike */
        return dir[0] != 0;
    }
    if (!base_dir(dir, cap))
        return 0;
    int in;
    if (v && *v) {
        if (!good_name(v))
            return 0;
        return append(dir, cap, "/") && append(dir, cap, v) && scope(dir, cap, &in);
    }
    size_t base = strlen(dir);
    if (!append(dir, cap, "/default") || !scope(dir, cap, &in))
        return 0;
    if (in)
        return 1;
    /* Outside an allocation: the one made every shell's default, or none. */
    char link[PATH_MAX], name[256];
    dir[base] = 0;
    if (snprintf(link, sizeof link, "%s/.default", dir) >= (int)sizeof link)
        return 0;
    ssize_t n = readlink(link, name, sizeof name - 1);
    if (n <= 0)
        return 0;
    name[n] = 0;
    return good_name(name) && append(dir, cap, "/") && append(dir, cap, name);
}

/* dial connects to the runtime in dir as dvm.Dial does; -1 when it cannot. */
static int dial(const char *dir) {
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir) >= (int)sizeof sa.sun_path)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != getuid() && cred.uid != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        c += w;
        n -= (size_t)w;
    }
    return 1;
}

static int send_frame(int fd, const char *p, size_t n) {
    unsigned char hdr[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n};
    return send_all(fd, hdr, 4) && send_all(fd, p, n);
}

static int send_signal(int fd, int sig) {
    char msg[32];
    int n = snprintf(msg, sizeof msg, "{\"Signal\":%d}", sig);
    return send_frame(fd, msg, (size_t)n);
}

static int read_full(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        c += r;
        n -= (size_t)r;
    }
    return 1;
}

/*
 * reply reads a dvm.Reply's fields this client needs from a flat JSON
 * object (numbers, booleans, and strings it skips): 0 when malformed.
 */
static int reply(const char *p, const char *end, int *done, int *exitc, int *local) {
    while (p < end && *p != '{')
        p++;
    for (p++; p < end;) {
        while (p < end && (*p == ' ' || *p == ',' || *p == '\n'))
            p++;
        if (p >= end || *p == '}')
            return 1;
        if (*p++ != '"')
            return 0;
        const char *key = p;
        while (p < end && *p != '"')
            p++;
        size_t klen = (size_t)(p - key);
        p++;
        if (p >= end || *p++ != ':')
            return 0;
        const char *val = p;
        if (p < end && *p == '"') {
            for (p++; p < end && *p != '"'; p++)
                if (*p == '\\')
                    p++;
            p++;
            continue;
        }
        while (p < end && *p != ',' && *p != '}')
            p++;
        int yes = (size_t)(p - val) == 4 && memcmp(val, "true", 4) == 0;
        if (klen == 4 && memcmp(key, "Done", 4) == 0)
            *done = yes;
        else if (klen == 5 && memcmp(key, "Local", 5) == 0)
            *local = yes;
        else if (klen == 4 && memcmp(key, "Exit", 4) == 0)
            *exitc = (int)strtol(val, NULL, 10);
    }
    return 0;
}

__attribute__((constructor)) static void prun_submit(int argc, char **argv) {
    if (argc < 2 || strncmp(argv[1], "-test.", 6) == 0 || strcmp(argv[1], "dvm") == 0 ||
        strcmp(argv[1], "daemon") == 0 || strcmp(argv[1], "top") == 0 || strcmp(argv[1], "stack") == 0)
        return;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--dvm", 5) == 0 || strncmp(argv[i], "-dvm", 4) == 0)
            return;
    const char *t0 = getenv("PRUN_DEBUG_T0");
    t0_ms = t0 && *t0 ? strtod(t0, NULL) / 1e6 : now_ms();
    char dir[PATH_MAX], cwd[PATH_MAX];
    if (!runtime_dir(dir, sizeof dir))
        return;
    int fd = dial(dir);
    if (fd < 0)
        return;
    if (!getcwd(cwd, sizeof cwd)) {
        close(fd);
        return;
    }
    mark("main (the C submitter: no Go runtime)");

    const char *nc = getenv("NO_COLOR");
    int color = !(nc && *nc);
    char opt[3] = {0}, *o = opt, count[16];
    if (color && isatty(1))
        *o++ = 't';
    if (color && isatty(2))
        *o++ = 'e';
    snprintf(count, sizeof count, "%d", argc - 1);
    struct buf b = {0};
    int ok = put(&b, opt) && put(&b, cwd) && put(&b, count);
    for (int i = 1; ok && i < argc; i++)
        ok = put(&b, argv[i]);
    for (char **e = environ; ok && *e; e++)
        ok = put(&b, *e);

    int pfd[2];
    struct sigaction old[NSIG_FWD];
    int caught = 0;
    if (ok && pipe2(pfd, O_CLOEXEC | O_NONBLOCK) == 0) {
        sig_w = pfd[1];
        struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        for (; caught < NSIG_FWD; caught++)
            if (sigaction(forwarded[caught], &sa, &old[caught]) != 0)
                break;
        ok = caught == NSIG_FWD;
    } else {
        ok = 0;
        pfd[0] = pfd[1] = -1;
    }
    /* The hello: one byte, with stdin, stdout and stderr. */
    if (ok) {
        char hello = 'R';
        int fds[3] = {0, 1, 2};
        union {
            char buf[CMSG_SPACE(sizeof fds)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {.iov_base = &hello, .iov_len = 1};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(cm), fds, sizeof fds);
        ok = sendmsg(fd, &mh, MSG_NOSIGNAL) == 1 && send_frame(fd, b.p, b.n);
    }
    free(b.p);
    if (ok)
        mark("sent");

    int done = 0, exitc = 0, local = 0; /* Exit 0 is omitted (omitempty) */
    const char *lost = NULL;
    while (ok && !done) {
        struct pollfd pf[2] = {{.fd = fd, .events = POLLIN}, {.fd = pfd[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            lost = strerror(errno);
            break;
        }
        unsigned char sigs[16];
        ssize_t ns = pf[1].revents ? read(pfd[0], sigs, sizeof sigs) : 0;
        for (ssize_t i = 0; i < ns; i++) {
            send_signal(fd, sigs[i]);
            if (sigs[i] == SIGTSTP) {
                raise(SIGSTOP); /* the job's ranks stop; so does this prun, as a standalone one does */
                send_signal(fd, SIGCONT);
            }
        }
        if (!pf[0].revents)
            continue;
        unsigned char hdr[4];
        if (!read_full(fd, hdr, 4)) {
            lost = "the connection closed";
            break;
        }
        uint32_t n = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        char small[512], *msg = n <= sizeof small ? small : n <= (64u << 20) ? malloc(n) : NULL;
        int good = msg && read_full(fd, msg, n) && reply(msg, msg + n, &done, &exitc, &local);
        if (msg != small)
            free(msg);
        if (!good) {
            lost = "a malformed reply";
            break;
        }
    }
    if (done && !local) {
        mark("exit");
        _exit(exitc);
    }
    if (lost) {
        dprintf(2, "prun: lost the DVM at %s: %s\n", dir, lost);
        _exit(1);
    }
    /*
     * Not sent, or not a job: Go's main takes it from the start, with the
     * signals as they were; one caught meanwhile is raised again.
     */
    for (int i = 0; i < caught; i++)
        sigaction(forwarded[i], &old[i], NULL);
    if (pfd[0] >= 0) {
        unsigned char sigs[16];
        ssize_t ns;
        while ((ns = read(pfd[0], sigs, sizeof sigs)) > 0)
            for (ssize_t i = 0; i < ns; i++)
                raise(sigs[i]);
        close(pfd[0]);
        close(pfd[1]);
    }
    sig_w = -1;
    close(fd);
}
