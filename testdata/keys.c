/*
 * keys.c - a PMIx client (not an MPI program) that checks every reserved key
 * and client service the launcher must provide for a single-node job.
 *
 * Build: gcc -O2 -Wall keys.c $(pkg-config --cflags --libs pmix)
 *
 * Expectations come from the environment (the launcher hands its
 * environment to the ranks):
 *   KEYS_EXPECT_APPS  comma list of the app sizes in order, e.g. "2,3"
 *                     (required)
 *   KEYS_EXPECT_HOST  expected PMIX_HOSTNAME (default: gethostname())
 *   KEYS_EXPECT_UNIV  expected PMIX_UNIV_SIZE, or "none" for no such key
 *                     (-usize INFINITE) (default: only require it)
 *   KEYS_TIMEOUT      seconds before a watchdog gives up on a hung call
 *                     (default 60)
 *   KEYS_VERBOSE      if set and not "0", print every value fetched to stderr
 *   KEYS_REALMS_ONLY  if set and not "0", only the checks of the app and node
 *                     realms' retrieval methods (check_realm_methods), which
 *                     hold on any number of nodes
 *   KEYS_STRICT       if set and not "0", also fail where OpenPMIx 4.x itself
 *                     cannot give the standard answer (see "Known libpmix 4
 *                     limits" below)
 *
 * All ranks are expected on ONE node (node id 0), unless KEYS_REALMS_ONLY. With N = the sum of the
 * app sizes, app a holds ranks offset(a) .. offset(a)+size(a)-1.
 *
 * Output: "keys: rank R ok (C checks)" on stdout and exit 0 when every check
 * passes; otherwise one line per failure on stderr,
 *     keys: rank R: KEY[context]: got X, want Y
 * then "keys: rank R: F of C checks failed" and exit 1.
 *
 * Known libpmix 4 limits (Debian's OpenPMIx 4.2.2, measured): whatever the
 * host registers, (1) PMIX_NODE_MAP and PMIX_PROC_MAP are parsed by
 * PMIx_server_register_nspace and never stored, so clients get NOT-FOUND;
 * (2) PMIx_Resolve_peers on a node the job does not use waits 2 s in the
 * server and returns PMIX_ERR_TIMEOUT instead of PMIX_SUCCESS with no procs.
 * (3) an app-realm key asked with PMIX_APPNUM and a valid rank is answered
 * from that rank's own data (its own app's value: the rank is not ignored);
 * (4) a non-specific key (PMIX_NUM_NODES) asked by a rank with PMIX_APP_INFO
 * waits for that rank's data and times out.
 * (5) PMIX_NODEID asked by the rank of a process on ANOTHER node, no
 * qualifier, is NOT-FOUND: PMIx_Get_nb (src/client/pmix_client_get.c)
 * treats it as a node-realm key, looks up the rank's PMIX_HOSTNAME and,
 * that not being its own node, asks {PMIX_NODE_INFO, PMIX_HOSTNAME} with
 * an undefined rank; gds/hash's fetch_nodeinfo then searches only the
 * node's info list, where pmix_gds_hash_process_node_array never stores
 * PMIX_NODEID or PMIX_HOSTNAME (they identify the node and are kept
 * apart). No registration can reach it: the rank's own PMIX_NODEID, which
 * the host registers, is never consulted. (A local rank's is answered
 * from its data; PMIX_HOSTNAME is returned by the lookup itself.)
 * Unless KEYS_STRICT is set, the answers of (1), (2) and (5) are accepted
 * (still counted as checks; for (5) the node id is then read from the
 * node's whole array, asked by host name), and (3) and (4) are asked the
 * other ways instead; anything else from those calls still fails.
 *
 * Every rank runs the same sequence of collective calls (fences) whatever
 * fails, so a failed check never turns into a hang; a SIGALRM watchdog ends
 * the rank (exit 1, naming the phase) if a PMIx call never returns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pmix.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXAPPS 64

/* K(PMIX_JOB_SIZE) passes both the key ("pmix.job.size") and its name. */
#define K(key) key, #key

static pmix_proc_t myproc;  /* who we are */
static pmix_proc_t wild;    /* our nspace, PMIX_RANK_WILDCARD: job realm */
static int nchecks, nfails, verbose, strict, realms_only;
static int libpmix4; /* the client library is OpenPMIx 4.x (see above) */
static char ctx[128];       /* appended to key names, e.g. "[rank 3]" */
static const char *volatile phase = "PMIx_Init";
static int timeout_secs = 60;

/* Expectations. */
static int napps, sizes[MAXAPPS], offsets[MAXAPPS];
static uint32_t N;          /* expected job size */
static char host[256];
static char cwd[PATH_MAX];

/* ---------- reporting ---------- */

static void setctx(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
}

/* failf reports one failed check of the key called name, as one write so
 * that the lines of concurrent ranks do not interleave. */
static void failf(const char *name, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    int n = snprintf(buf, sizeof buf, "keys: rank %u: %s%s: ", myproc.rank, name, ctx);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof buf)
        vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", buf);
    fflush(stderr);
    nfails++;
}

/* The watchdog: a PMIx call that never returns ends the rank with a reason. */
static void on_alarm(int sig)
{
    char buf[256];
    int n = snprintf(buf, sizeof buf, "keys: rank %u: timed out after %d s in %s\n",
                     myproc.rank, timeout_secs, phase);
    if (n > 0)
        (void)!write(2, buf, (size_t)n);
    _exit(1);
}

static const char *procstr(const pmix_proc_t *p)
{
    static char buf[PMIX_MAX_NSLEN + 32];
    if (p->rank == PMIX_RANK_WILDCARD)
        snprintf(buf, sizeof buf, "%s:*", p->nspace);
    else
        snprintf(buf, sizeof buf, "%s:%u", p->nspace, p->rank);
    return buf;
}

/* fmtval renders a value for messages: 42, "text", true, <uint8 value>... */
static const char *fmtval(const pmix_value_t *v)
{
    static char buf[512];
    switch (v->type) {
    case PMIX_STRING:
        snprintf(buf, sizeof buf, "\"%s\"", v->data.string ? v->data.string : "(null)");
        break;
    case PMIX_UINT32:
        snprintf(buf, sizeof buf, "%u", v->data.uint32);
        break;
    case PMIX_UINT16:
        snprintf(buf, sizeof buf, "%u", v->data.uint16);
        break;
    case PMIX_PROC_RANK:
        snprintf(buf, sizeof buf, "%u", v->data.rank);
        break;
    case PMIX_INT:
        snprintf(buf, sizeof buf, "%d", v->data.integer);
        break;
    case PMIX_UINT64:
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v->data.uint64);
        break;
    case PMIX_SIZE:
        snprintf(buf, sizeof buf, "%zu", v->data.size);
        break;
    case PMIX_PID:
        snprintf(buf, sizeof buf, "%ld", (long)v->data.pid);
        break;
    case PMIX_BOOL:
        snprintf(buf, sizeof buf, "%s", v->data.flag ? "true" : "false");
        break;
    case PMIX_REGEX:
    case PMIX_BYTE_OBJECT:
        /* PMIx regexes are NUL-terminated text such as "pmix[host]". */
        snprintf(buf, sizeof buf, "<%s, %zu bytes: %.*s>", PMIx_Data_type_string(v->type),
                 v->data.bo.size, (int)strnlen(v->data.bo.bytes ? v->data.bo.bytes : "",
                                                v->data.bo.size > 200 ? 200 : v->data.bo.size),
                 v->data.bo.bytes ? v->data.bo.bytes : "");
        break;
    case PMIX_DATA_ARRAY:
        snprintf(buf, sizeof buf, "<array of %zu %s>", v->data.darray ? v->data.darray->size : 0,
                 v->data.darray ? PMIx_Data_type_string(v->data.darray->type) : "?");
        break;
    default:
        snprintf(buf, sizeof buf, "<%s value>", PMIx_Data_type_string(v->type));
    }
    return buf;
}

/* ---------- fetching and checking ---------- */

/*
 * get fetches key for proc p and counts one check. It reports a failed Get,
 * or a value whose type is not want (PMIX_UNDEF: any type), and then returns
 * NULL; otherwise the caller owns the value (PMIX_VALUE_RELEASE).
 */
static pmix_value_t *get(const pmix_proc_t *p, const char *key, const char *name,
                         const pmix_info_t *info, size_t ninfo, pmix_data_type_t want)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc;

    nchecks++;
    phase = name;
    rc = PMIx_Get(p, key, info, ninfo, &v);
    if (rc != PMIX_SUCCESS) {
        failf(name, "PMIx_Get(%s, \"%s\") failed: %s", procstr(p), key, PMIx_Error_string(rc));
        return NULL;
    }
    if (v == NULL) {
        failf(name, "PMIx_Get(%s, \"%s\") succeeded but returned no value", procstr(p), key);
        return NULL;
    }
    if (verbose)
        fprintf(stderr, "keys: rank %u: %s%s = %s (%s)\n", myproc.rank, name, ctx, fmtval(v),
                PMIx_Data_type_string(v->type));
    if (want != PMIX_UNDEF && v->type != want) {
        failf(name, "got type %s (value %s), want type %s", PMIx_Data_type_string(v->type),
              fmtval(v), PMIx_Data_type_string(want));
        PMIX_VALUE_RELEASE(v);
        return NULL;
    }
    return v;
}

static void want_u32(const pmix_proc_t *p, const char *key, const char *name,
                     const pmix_info_t *info, size_t ninfo, uint32_t want)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_UINT32);
    if (v && v->data.uint32 != want)
        failf(name, "got %u, want %u", v->data.uint32, want);
    if (v)
        PMIX_VALUE_RELEASE(v);
}

static void want_u16(const pmix_proc_t *p, const char *key, const char *name,
                     const pmix_info_t *info, size_t ninfo, uint16_t want)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_UINT16);
    if (v && v->data.uint16 != want)
        failf(name, "got %u, want %u", v->data.uint16, want);
    if (v)
        PMIX_VALUE_RELEASE(v);
}

static void want_rank(const pmix_proc_t *p, const char *key, const char *name,
                      const pmix_info_t *info, size_t ninfo, pmix_rank_t want)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_PROC_RANK);
    if (v && v->data.rank != want)
        failf(name, "got %u, want %u", v->data.rank, want);
    if (v)
        PMIX_VALUE_RELEASE(v);
}

static void want_bool(const pmix_proc_t *p, const char *key, const char *name,
                      const pmix_info_t *info, size_t ninfo, bool want)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_BOOL);
    if (v && v->data.flag != want)
        failf(name, "got %s, want %s", v->data.flag ? "true" : "false", want ? "true" : "false");
    if (v)
        PMIX_VALUE_RELEASE(v);
}

/* get_str returns a malloc'd copy of a string value, or NULL (reported). */
static char *get_str(const pmix_proc_t *p, const char *key, const char *name,
                     const pmix_info_t *info, size_t ninfo)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_STRING);
    char *s = NULL;
    if (v) {
        if (v->data.string == NULL)
            failf(name, "got a NULL string");
        else
            s = strdup(v->data.string);
        PMIX_VALUE_RELEASE(v);
    }
    return s;
}

static void want_str(const pmix_proc_t *p, const char *key, const char *name,
                     const pmix_info_t *info, size_t ninfo, const char *want)
{
    char *s = get_str(p, key, name, info, ninfo);
    if (s && strcmp(s, want) != 0)
        failf(name, "got \"%s\", want \"%s\"", s, want);
    free(s);
}

/* get_u32 fetches a uint32 value without comparing it; 1 on success. */
/* want_absent checks (one more check) that key is not there for p: a
 * PMIx_Get of it without waiting answers not-found. */
static void want_absent(const pmix_proc_t *p, const char *key, const char *name)
{
    pmix_value_t *v = NULL;
    pmix_info_t opt;
    pmix_status_t rc;
    bool yes = true;

    nchecks++;
    phase = name;
    PMIX_INFO_LOAD(&opt, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    rc = PMIx_Get(p, key, &opt, 1, &v);
    if (rc == PMIX_SUCCESS) {
        failf(name, "PMIx_Get(%s, \"%s\") = %s, want no such key", procstr(p), key, v ? fmtval(v) : "?");
        if (v)
            PMIX_VALUE_RELEASE(v);
    } else if (rc != PMIX_ERR_NOT_FOUND) {
        failf(name, "PMIx_Get(%s, \"%s\") failed: %s, want not found", procstr(p), key, PMIx_Error_string(rc));
    }
    PMIX_INFO_DESTRUCT(&opt);
}

static int get_u32(const pmix_proc_t *p, const char *key, const char *name,
                   const pmix_info_t *info, size_t ninfo, uint32_t *out)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, PMIX_UINT32);
    if (!v)
        return 0;
    *out = v->data.uint32;
    PMIX_VALUE_RELEASE(v);
    return 1;
}

/* check_dir checks (one more check) that path is an existing directory,
 * below parent if parent is not NULL, with permissions mode if mode >= 0. */
static void check_dir(const char *name, const char *path, const char *parent,
                      const char *parent_name, int mode)
{
    struct stat st;
    nchecks++;
    if (stat(path, &st) != 0) {
        failf(name, "\"%s\": %s, want an existing directory", path, strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        failf(name, "\"%s\" is not a directory", path);
        return;
    }
    if (mode >= 0 && (int)(st.st_mode & 07777) != mode)
        failf(name, "\"%s\" has mode %04o, want %04o", path, (unsigned)(st.st_mode & 07777),
              (unsigned)mode);
    if (parent) {
        size_t n = strlen(parent);
        while (n > 1 && parent[n - 1] == '/')
            n--;
        if (strncmp(path, parent, n) != 0 || path[n] != '/' || path[n + 1] == '\0')
            failf(name, "\"%s\" is not below %s \"%s\"", path, parent_name, parent);
    }
}

/* app_of returns the app that expected rank r belongs to. */
static int app_of(uint32_t r)
{
    for (int a = 0; a < napps; a++)
        if (r < (uint32_t)(offsets[a] + sizes[a]))
            return a;
    return -1;
}

/* parse_apps reads KEYS_EXPECT_APPS; 0 with a message on a bad value. */
static int parse_apps(void)
{
    const char *s = getenv("KEYS_EXPECT_APPS");
    if (s == NULL || *s == '\0') {
        fprintf(stderr, "keys: rank %u: KEYS_EXPECT_APPS is not set: want the size of every app "
                "in order, e.g. KEYS_EXPECT_APPS=2,3 for \"-n 2 keys : -n 3 keys\"\n", myproc.rank);
        return 0;
    }
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || v > 1000000 || (*end != ',' && *end != '\0') || napps == MAXAPPS) {
            fprintf(stderr, "keys: rank %u: bad KEYS_EXPECT_APPS \"%s\": want a comma list of "
                    "positive app sizes (at most %d)\n", myproc.rank, s, MAXAPPS);
            return 0;
        }
        offsets[napps] = (int)N;
        sizes[napps++] = (int)v;
        N += (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    return 1;
}

static void fence(const pmix_info_t *info, size_t ninfo, const char *what)
{
    pmix_status_t rc;
    phase = what;
    nchecks++;
    rc = PMIx_Fence(&wild, 1, info, ninfo);
    if (rc != PMIX_SUCCESS)
        failf(what, "PMIx_Fence failed: %s", PMIx_Error_string(rc));
}

/* ---------- the checks, realm by realm ---------- */

/* check_map checks PMIX_NODE_MAP or PMIX_PROC_MAP: a string or PMIX_REGEX
 * when present. libpmix 4 consumes both at registration and never hands
 * them to clients, so NOT-FOUND passes there unless KEYS_STRICT is set. */
static void check_map(const char *key, const char *name)
{
    pmix_value_t *v = NULL;
    pmix_status_t rc;

    nchecks++;
    phase = name;
    rc = PMIx_Get(&wild, key, NULL, 0, &v);
    if (rc == PMIX_ERR_NOT_FOUND && libpmix4 && !strict) {
        if (verbose)
            fprintf(stderr, "keys: rank %u: %s: NOT-FOUND, accepted: libpmix 4 does not store "
                    "it for clients\n", myproc.rank, name);
        return;
    }
    if (rc != PMIX_SUCCESS) {
        failf(name, "PMIx_Get(%s, \"%s\") failed: %s", procstr(&wild), key, PMIx_Error_string(rc));
        return;
    }
    if (v == NULL) {
        failf(name, "PMIx_Get succeeded but returned no value");
        return;
    }
    if (verbose)
        fprintf(stderr, "keys: rank %u: %s = %s (%s)\n", myproc.rank, name, fmtval(v),
                PMIx_Data_type_string(v->type));
    if (v->type != PMIX_STRING && v->type != PMIX_REGEX)
        failf(name, "got type %s (value %s), want string or regex",
              PMIx_Data_type_string(v->type), fmtval(v));
    PMIX_VALUE_RELEASE(v);
}

static char *tmpdir, *nsdir;
static uint32_t nprocs; /* the job's actual size, for loops over ranks */

static void check_session(void)
{
    const char *univ = getenv("KEYS_EXPECT_UNIV");
    uint32_t u;

    if (univ && strcmp(univ, "none") == 0)
        want_absent(&wild, K(PMIX_UNIV_SIZE));
    else if (univ && *univ)
        want_u32(&wild, K(PMIX_UNIV_SIZE), NULL, 0, (uint32_t)strtoul(univ, NULL, 10));
    else
        get_u32(&wild, K(PMIX_UNIV_SIZE), NULL, 0, &u);

    tmpdir = get_str(&wild, K(PMIX_TMPDIR), NULL, 0);
    if (tmpdir)
        check_dir("PMIX_TMPDIR", tmpdir, NULL, NULL, 0700);
    want_bool(&wild, K(PMIX_TDIR_RMCLEAN), NULL, 0, true);
    want_str(&wild, K(PMIX_RM_NAME), NULL, 0, "prun");
    char *ver = get_str(&wild, K(PMIX_RM_VERSION), NULL, 0);
    if (ver && *ver == '\0')
        failf("PMIX_RM_VERSION", "got \"\", want a non-empty string");
    free(ver);
}

static void check_job(void)
{
    char *s;
    uint32_t u;

    s = get_str(&wild, K(PMIX_JOBID), NULL, 0);
    if (s && *s == '\0')
        failf("PMIX_JOBID", "got \"\", want a non-empty string");
    free(s);

    nprocs = N;
    if (get_u32(&wild, K(PMIX_JOB_SIZE), NULL, 0, &u)) {
        if (u != N)
            failf("PMIX_JOB_SIZE", "got %u, want %u", u, N);
        else
            nprocs = u;
    }
    want_u32(&wild, K(PMIX_JOB_NUM_APPS), NULL, 0, (uint32_t)napps);

    nsdir = get_str(&wild, K(PMIX_NSDIR), NULL, 0);
    if (nsdir)
        check_dir("PMIX_NSDIR", nsdir, tmpdir, "PMIX_TMPDIR", -1);

    want_u32(&wild, K(PMIX_NUM_NODES), NULL, 0, 1);
    if (get_u32(&wild, K(PMIX_MAX_PROCS), NULL, 0, &u) && u < N)
        failf("PMIX_MAX_PROCS", "got %u, want >= %u (the job size)", u, N);

    s = get_str(&wild, K(PMIX_CMD_LINE), NULL, 0);
    if (s && strstr(s, "keys") == NULL)
        failf("PMIX_CMD_LINE", "got \"%s\", want a command line containing \"keys\"", s);
    free(s);

    want_rank(&wild, K(PMIX_NPROC_OFFSET), NULL, 0, 0);
    want_str(&wild, K(PMIX_NODE_LIST), NULL, 0, host);

    /* The maps are regexes: a string, or PMIx's own PMIX_REGEX type. */
    check_map(K(PMIX_NODE_MAP));
    check_map(K(PMIX_PROC_MAP));

    char want[64];
    snprintf(want, sizeof want, "(vector,(0,1,%u))", N);
    want_str(&wild, K(PMIX_ANL_MAP), NULL, 0, want);

    /* "0,1,...,N-1": local ranks ordered like global ranks. */
    size_t len = (size_t)N * 11 + 1;
    char *peers = malloc(len), *p = peers;
    for (uint32_t r = 0; r < N; r++)
        p += snprintf(p, len - (size_t)(p - peers), r ? ",%u" : "%u", r);
    *p = '\0';
    want_str(&wild, K(PMIX_LOCAL_PEERS), NULL, 0, peers);
    free(peers);

    want_rank(&wild, K(PMIX_LOCALLDR), NULL, 0, 0);
    want_u32(&wild, K(PMIX_LOCAL_SIZE), NULL, 0, N);
}

static void check_apps(void)
{
    pmix_info_t info[2];
    bool t = true;

    for (int a = 0; a < napps; a++) {
        uint32_t an = (uint32_t)a;
        PMIX_INFO_LOAD(&info[0], PMIX_APP_INFO, &t, PMIX_BOOL);
        PMIX_INFO_LOAD(&info[1], PMIX_APPNUM, &an, PMIX_UINT32);
        setctx("[app %d]", a);

        want_u32(&wild, K(PMIX_APP_SIZE), info, 2, (uint32_t)sizes[a]);
        want_rank(&wild, K(PMIX_APPLDR), info, 2, (pmix_rank_t)offsets[a]);

        char *s = get_str(&wild, K(PMIX_APP_ARGV), info, 2);
        if (s) {
            /* The first word is the executable, maybe with a path. */
            size_t w = strcspn(s, " \t");
            if (w < 4 || strncmp(s + w - 4, "keys", 4) != 0)
                failf("PMIX_APP_ARGV", "got \"%s\", want a first word ending in \"keys\"", s);
        }
        free(s);
        want_str(&wild, K(PMIX_WDIR), info, 2, cwd);

        PMIX_INFO_DESTRUCT(&info[0]);
        PMIX_INFO_DESTRUCT(&info[1]);
    }
    setctx("");
}

static void check_procs(void)
{
    pmix_proc_t p;

    for (uint32_t r = 0; r < nprocs; r++) {
        int a = app_of(r);
        PMIX_PROC_LOAD(&p, myproc.nspace, r);
        setctx("[rank %u]", r);
        want_u32(&p, K(PMIX_APPNUM), NULL, 0, (uint32_t)a);
        want_rank(&p, K(PMIX_APP_RANK), NULL, 0, r - (uint32_t)offsets[a]);
        want_rank(&p, K(PMIX_GLOBAL_RANK), NULL, 0, r);
        want_u16(&p, K(PMIX_LOCAL_RANK), NULL, 0, (uint16_t)r);
        want_u16(&p, K(PMIX_NODE_RANK), NULL, 0, (uint16_t)r);
        want_str(&p, K(PMIX_HOSTNAME), NULL, 0, host);
        want_u32(&p, K(PMIX_NODEID), NULL, 0, 0);
        if (r == myproc.rank) {
            char *s = get_str(&p, K(PMIX_PROCDIR), NULL, 0);
            if (s)
                check_dir("PMIX_PROCDIR", s, nsdir, "PMIX_NSDIR", -1);
            free(s);
        }
    }
    setctx("");
}

static void check_node(void)
{
    pmix_info_t info;
    bool t = true;

    PMIX_INFO_LOAD(&info, PMIX_NODE_INFO, &t, PMIX_BOOL);
    setctx("[node info]");
    want_str(&wild, K(PMIX_HOSTNAME), &info, 1, host);
    want_u32(&wild, K(PMIX_NODEID), &info, 1, 0);
    want_u32(&wild, K(PMIX_NODE_SIZE), &info, 1, N);
    want_u32(&wild, K(PMIX_LOCAL_SIZE), &info, 1, N);
    setctx("");
    PMIX_INFO_DESTRUCT(&info);
}

/* get_same fetches key for p with the given qualifiers, and checks it
 * against ref (when ref is not NULL) with PMIx_Value_compare: the same
 * value asked another way. Returns the value (caller releases) or NULL. */
static pmix_value_t *get_same(const pmix_proc_t *p, const char *key, const char *name,
                              const pmix_info_t *info, size_t ninfo, const pmix_value_t *ref,
                              const char *how)
{
    pmix_value_t *v = get(p, key, name, info, ninfo, ref ? ref->type : PMIX_UNDEF);
    if (v && ref && PMIx_Value_compare(v, (pmix_value_t *)ref) != PMIX_EQUAL) {
        char was[512];
        snprintf(was, sizeof was, "%s", fmtval(ref));
        failf(name, "%s: got %s, want %s (as asked by rank)", how, fmtval(v), was);
    }
    return v;
}

/* find_u32 looks for key in v, descending into arrays of pmix_info_t. */
static int find_u32(const pmix_value_t *v, const char *key, uint32_t *out)
{
    const pmix_info_t *in;
    if (v->type != PMIX_DATA_ARRAY || !v->data.darray || v->data.darray->type != PMIX_INFO)
        return 0;
    in = (const pmix_info_t *)v->data.darray->array;
    for (size_t i = 0; i < v->data.darray->size; i++) {
        if (PMIX_CHECK_KEY(&in[i], key) && in[i].value.type == PMIX_UINT32) {
            *out = in[i].value.data.uint32;
            return 1;
        }
        if (find_u32(&in[i].value, key, out))
            return 1;
    }
    return 0;
}

/* node_id_of: PMIX_NODEID of rank p (one check), whose host is hn. On
 * another node than ours, libpmix 4 answers NOT-FOUND (known limit (5)):
 * accepted unless KEYS_STRICT, the id then read from that node's whole
 * array (a NULL key asked with PMIX_NODE_INFO and the host name). */
static int node_id_of(const pmix_proc_t *p, const char *hn, const char *myhost, uint32_t *nid)
{
    pmix_value_t *v = NULL;
    pmix_proc_t undef;
    pmix_info_t q[2];
    pmix_status_t rc;
    bool t = true;
    int ok;

    nchecks++;
    phase = "PMIX_NODEID";
    rc = PMIx_Get(p, PMIX_NODEID, NULL, 0, &v);
    if (rc == PMIX_SUCCESS && v && v->type == PMIX_UINT32) {
        *nid = v->data.uint32;
        PMIX_VALUE_RELEASE(v);
        return 1;
    }
    if (rc != PMIX_ERR_NOT_FOUND || !libpmix4 || strict || !hn || !myhost || strcmp(hn, myhost) == 0) {
        failf("PMIX_NODEID", "PMIx_Get(%s, \"%s\"): %s", procstr(p), PMIX_NODEID,
              rc == PMIX_SUCCESS ? fmtval(v) : PMIx_Error_string(rc));
        if (v)
            PMIX_VALUE_RELEASE(v);
        return 0;
    }
    if (verbose)
        fprintf(stderr, "keys: rank %u: PMIX_NODEID%s: NOT-FOUND for a rank on %s, accepted: libpmix 4 "
                "limit (5)\n", myproc.rank, ctx, hn);
    PMIX_PROC_LOAD(&undef, p->nspace, PMIX_RANK_UNDEF);
    PMIX_INFO_LOAD(&q[0], PMIX_NODE_INFO, &t, PMIX_BOOL);
    PMIX_INFO_LOAD(&q[1], PMIX_HOSTNAME, hn, PMIX_STRING);
    nchecks++;
    v = NULL;
    rc = PMIx_Get(&undef, NULL, q, 2, &v);
    PMIX_INFO_DESTRUCT(&q[0]);
    PMIX_INFO_DESTRUCT(&q[1]);
    ok = rc == PMIX_SUCCESS && v && find_u32(v, PMIX_NODEID, nid);
    if (!ok)
        failf("PMIX_NODEID", "the node array of %s (NULL key, PMIX_NODE_INFO, PMIX_HOSTNAME): %s", hn,
              rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "no PMIX_NODEID in it");
    if (v)
        PMIX_VALUE_RELEASE(v);
    return ok;
}

/*
 * check_realm_methods: every app-realm key by each of the retrieval methods
 * of the standard (PMIx v2 5.1.5.3), for every rank's app:
 *   1. the namespace and the rank of a process of the app, no qualifier
 *      (non-specific keys, e.g. PMIX_NUM_NODES, with PMIX_APP_INFO);
 *   2. PMIX_APPNUM naming the app, the proc's namespace naming the job
 *      (its rank ignored);
 *   3. PMIX_APPNUM and PMIX_NSPACE naming both (the proc ignored);
 * and every node-realm key by each method of 5.1.5.5: by the rank of a
 * process on the node, by PMIX_NODEID and by PMIX_HOSTNAME (the proc
 * ignored), non-specific keys with PMIX_NODE_INFO. Every method must give
 * the same value; where the test knows it (one node, the local node), the
 * value must be the expected one.
 */
static void check_realm_methods(void)
{
    static const struct {
        const char *key, *name;
        int specific; /* an app-only key: no PMIX_APP_INFO needed */
    } appkeys[] = {
        {K(PMIX_APP_SIZE), 1}, {K(PMIX_APPLDR), 1}, {K(PMIX_APP_ARGV), 1},
        {K(PMIX_WDIR), 0},     {K(PMIX_MAX_PROCS), 0}, {K(PMIX_NUM_NODES), 0},
    };
    static const struct {
        const char *key, *name;
    } nodekeys[] = {
        {K(PMIX_NODE_SIZE)}, {K(PMIX_LOCAL_SIZE)}, {K(PMIX_LOCALLDR)}, {K(PMIX_LOCAL_PEERS)},
    };
    char *myhost = NULL;
    uint32_t mynode = 0;
    pmix_proc_t self = myproc, p;

    get_u32(&self, K(PMIX_NODEID), NULL, 0, &mynode);
    myhost = get_str(&self, K(PMIX_HOSTNAME), NULL, 0);
    for (uint32_t r = 0; r < nprocs; r++) {
        int a = app_of(r);
        uint32_t an = (uint32_t)a, nid = 0;
        bool t = true;
        PMIX_PROC_LOAD(&p, myproc.nspace, r);
        for (size_t k = 0; k < sizeof appkeys / sizeof appkeys[0]; k++) {
            pmix_info_t q[3];
            size_t nq = 0;
            pmix_value_t *ref, *v;
            setctx("[rank %u, no qualifier]", r);
            if (!appkeys[k].specific)
                PMIX_INFO_LOAD(&q[nq++], PMIX_APP_INFO, &t, PMIX_BOOL);
            if (appkeys[k].specific || strict) {
                ref = get(&p, appkeys[k].key, appkeys[k].name, q, nq, PMIX_UNDEF);
            } else {
                /* libpmix 4.2.2 sends a non-specific key asked by a rank
                 * with PMIX_APP_INFO to the server as that rank's data, and
                 * waits for it (TIMEOUT): asked by app number instead. */
                setctx("[app %d by PMIX_APPNUM, wildcard rank]", a);
                PMIX_INFO_LOAD(&q[nq], PMIX_APPNUM, &an, PMIX_UINT32);
                ref = get(&wild, appkeys[k].key, appkeys[k].name, q, nq + 1, PMIX_UNDEF);
                PMIX_INFO_DESTRUCT(&q[nq]);
            }
            if (ref && strcmp(appkeys[k].key, PMIX_APP_SIZE) == 0 &&
                (ref->type != PMIX_UINT32 || ref->data.uint32 != (uint32_t)sizes[a]))
                failf(appkeys[k].name, "got %s, want %d", fmtval(ref), sizes[a]);
            if (ref && strcmp(appkeys[k].key, PMIX_APPLDR) == 0 &&
                (ref->type != PMIX_PROC_RANK || ref->data.rank != (pmix_rank_t)offsets[a]))
                failf(appkeys[k].name, "got %s, want %d", fmtval(ref), offsets[a]);
            /* 2: PMIX_APPNUM; the rank is to be ignored, but libpmix 4.2.2
             * answers from a valid rank's own data first (its own app's
             * value), so the wildcard rank unless KEYS_STRICT */
            setctx("[app %d by PMIX_APPNUM]", a);
            PMIX_INFO_LOAD(&q[nq], PMIX_APPNUM, &an, PMIX_UINT32);
            v = get_same(strict ? &self : &wild, appkeys[k].key, appkeys[k].name, q, nq + 1, ref, "by PMIX_APPNUM");
            if (v)
                PMIX_VALUE_RELEASE(v);
            /* 3: PMIX_APPNUM and PMIX_NSPACE; a proc of no job */
            setctx("[app %d by PMIX_APPNUM+PMIX_NSPACE]", a);
            PMIX_INFO_LOAD(&q[nq + 1], PMIX_NSPACE, myproc.nspace, PMIX_STRING);
            v = get_same(&wild, appkeys[k].key, appkeys[k].name, q, nq + 2, ref,
                         "by PMIX_APPNUM and PMIX_NSPACE");
            if (v)
                PMIX_VALUE_RELEASE(v);
            for (size_t i = 0; i < nq + 2; i++)
                PMIX_INFO_DESTRUCT(&q[i]);
            if (ref)
                PMIX_VALUE_RELEASE(ref);
        }

        setctx("[rank %u]", r);
        char *hn = get_str(&p, K(PMIX_HOSTNAME), NULL, 0);
        if (!node_id_of(&p, hn, myhost, &nid)) {
            free(hn);
            continue;
        }
        for (size_t k = 0; k < sizeof nodekeys / sizeof nodekeys[0]; k++) {
            pmix_info_t q[2];
            pmix_value_t *ref, *v, *local;
            setctx("[rank %u, no qualifier]", r);
            ref = get(&p, nodekeys[k].key, nodekeys[k].name, NULL, 0, PMIX_UNDEF);
            /* The local node's value is also the job-level one. */
            if (ref && nid == mynode) {
                local = get(&wild, nodekeys[k].key, nodekeys[k].name, NULL, 0, PMIX_UNDEF);
                if (local && PMIx_Value_compare(local, ref) != PMIX_EQUAL) {
                    char was[512];
                    snprintf(was, sizeof was, "%s", fmtval(local));
                    failf(nodekeys[k].name, "got %s, want %s (this node's, asked with the wildcard rank)",
                          fmtval(ref), was);
                }
                if (local)
                    PMIX_VALUE_RELEASE(local);
            }
            setctx("[node %u by PMIX_NODEID]", nid);
            PMIX_INFO_LOAD(&q[0], PMIX_NODE_INFO, &t, PMIX_BOOL);
            PMIX_INFO_LOAD(&q[1], PMIX_NODEID, &nid, PMIX_UINT32);
            v = get_same(&self, nodekeys[k].key, nodekeys[k].name, q, 2, ref, "by PMIX_NODEID");
            if (v)
                PMIX_VALUE_RELEASE(v);
            PMIX_INFO_DESTRUCT(&q[1]);
            if (hn) {
                setctx("[node %s by PMIX_HOSTNAME]", hn);
                PMIX_INFO_LOAD(&q[1], PMIX_HOSTNAME, hn, PMIX_STRING);
                v = get_same(&self, nodekeys[k].key, nodekeys[k].name, q, 2, ref, "by PMIX_HOSTNAME");
                if (v)
                    PMIX_VALUE_RELEASE(v);
                PMIX_INFO_DESTRUCT(&q[1]);
            }
            PMIX_INFO_DESTRUCT(&q[0]);
            if (ref)
                PMIX_VALUE_RELEASE(ref);
        }
        free(hn);
    }
    free(myhost);
    setctx("");
}

static void check_resolve(void)
{
    pmix_proc_t *procs = NULL;
    size_t n = 0;
    char *nodes = NULL;
    pmix_status_t rc;

    phase = "PMIx_Resolve_peers";
    nchecks++;
    setctx("(%s)", host);
    rc = PMIx_Resolve_peers(host, myproc.nspace, &procs, &n);
    if (rc != PMIX_SUCCESS) {
        failf("PMIx_Resolve_peers", "failed: %s", PMIx_Error_string(rc));
    } else {
        /* Want exactly ranks 0..N-1 of our nspace, each once. */
        char *seen = calloc(N ? N : 1, 1);
        if (n != N)
            failf("PMIx_Resolve_peers", "got %zu procs, want %u", n, N);
        for (size_t i = 0; i < n; i++) {
            if (!PMIX_CHECK_NSPACE(procs[i].nspace, myproc.nspace))
                failf("PMIx_Resolve_peers", "proc %zu: got nspace \"%s\", want \"%s\"", i,
                      procs[i].nspace, myproc.nspace);
            else if (procs[i].rank >= N)
                failf("PMIx_Resolve_peers", "proc %zu: got rank %u, want < %u", i, procs[i].rank, N);
            else if (seen[procs[i].rank]++)
                failf("PMIx_Resolve_peers", "proc %zu: got rank %u twice", i, procs[i].rank);
        }
        free(seen);
        if (procs)
            PMIX_PROC_FREE(procs, n);
    }

    /* An unknown node is "no peers there", not an error. */
    procs = NULL;
    n = 0;
    nchecks++;
    setctx("(no-such-host.invalid)");
    rc = PMIx_Resolve_peers("no-such-host.invalid", myproc.nspace, &procs, &n);
    if (rc != PMIX_SUCCESS && libpmix4 && !strict &&
        (rc == PMIX_ERR_TIMEOUT || rc == PMIX_ERR_NOT_FOUND) && n == 0) {
        /* libpmix 4's own answer for a node it does not know (see above). */
        if (verbose)
            fprintf(stderr, "keys: rank %u: PMIx_Resolve_peers%s: %s, accepted from libpmix 4\n",
                    myproc.rank, ctx, PMIx_Error_string(rc));
    } else if (rc != PMIX_SUCCESS) {
        failf("PMIx_Resolve_peers", "got %s, want PMIX_SUCCESS with 0 procs",
              PMIx_Error_string(rc));
    } else if (n != 0) {
        failf("PMIx_Resolve_peers", "got %zu procs, want 0", n);
    }
    if (procs)
        PMIX_PROC_FREE(procs, n);

    phase = "PMIx_Resolve_nodes";
    nchecks++;
    setctx("");
    rc = PMIx_Resolve_nodes(myproc.nspace, &nodes);
    if (rc != PMIX_SUCCESS)
        failf("PMIx_Resolve_nodes", "failed: %s", PMIx_Error_string(rc));
    else if (nodes == NULL || strcmp(nodes, host) != 0)
        failf("PMIx_Resolve_nodes", "got \"%s\", want \"%s\"", nodes ? nodes : "(null)", host);
    free(nodes);
}

/* One round of put / commit / fence / get-everybody's-value. */
static void modex_round(const char *key, int collect)
{
    char val[PMIX_MAX_NSLEN + 32], want[PMIX_MAX_NSLEN + 32];
    pmix_value_t pv;
    pmix_info_t info;
    pmix_status_t rc;
    bool t = true;
    const char *what = collect ? "PMIx_Fence(collect)" : "PMIx_Fence(no collect)";

    snprintf(val, sizeof val, "v-%u-%s", myproc.rank, myproc.nspace);
    PMIX_VALUE_LOAD(&pv, val, PMIX_STRING);
    phase = "PMIx_Put";
    nchecks++;
    if ((rc = PMIx_Put(PMIX_GLOBAL, key, &pv)) != PMIX_SUCCESS)
        failf(key, "PMIx_Put failed: %s", PMIx_Error_string(rc));
    PMIX_VALUE_DESTRUCT(&pv);
    phase = "PMIx_Commit";
    nchecks++;
    if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
        failf(key, "PMIx_Commit failed: %s", PMIx_Error_string(rc));

    if (collect) {
        PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &t, PMIX_BOOL);
        fence(&info, 1, what);
        PMIX_INFO_DESTRUCT(&info);
    } else {
        fence(NULL, 0, what);
    }

    for (uint32_t r = 0; r < nprocs; r++) {
        pmix_proc_t p;
        PMIX_PROC_LOAD(&p, myproc.nspace, r);
        snprintf(want, sizeof want, "v-%u-%s", r, myproc.nspace);
        setctx("[rank %u, after %s]", r, what);
        want_str(&p, key, key, NULL, 0, want);
    }
    setctx("");
}

static void check_publish(void)
{
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_status_t rc;
    pmix_rank_t last = nprocs - 1;

    snprintf(key, sizeof key, "keys.svc.%s", myproc.nspace);

    if (myproc.rank == 0) {
        pmix_info_t info;
        PMIX_INFO_LOAD(&info, key, "port-42", PMIX_STRING);
        phase = "PMIx_Publish";
        nchecks++;
        if ((rc = PMIx_Publish(&info, 1)) != PMIX_SUCCESS)
            failf("PMIx_Publish", "(%s) failed: %s", key, PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&info);
    }
    if (myproc.rank == last) {
        /* Wait for the one key, but not forever. */
        pmix_pdata_t pd;
        pmix_info_t info[2];
        int nwait = 1, tmo = 10;
        PMIX_INFO_LOAD(&info[0], PMIX_WAIT, &nwait, PMIX_INT);
        PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &tmo, PMIX_INT);
        PMIX_PDATA_CONSTRUCT(&pd);
        PMIX_LOAD_KEY(pd.key, key);
        phase = "PMIx_Lookup(wait)";
        nchecks++;
        setctx("(%s, wait)", key);
        rc = PMIx_Lookup(&pd, 1, info, 2);
        if (rc != PMIX_SUCCESS) {
            failf("PMIx_Lookup", "failed: %s", PMIx_Error_string(rc));
        } else {
            if (pd.value.type != PMIX_STRING || pd.value.data.string == NULL ||
                strcmp(pd.value.data.string, "port-42") != 0)
                failf("PMIx_Lookup", "got %s (%s), want \"port-42\"", fmtval(&pd.value),
                      PMIx_Data_type_string(pd.value.type));
            if (!PMIX_CHECK_NSPACE(pd.proc.nspace, myproc.nspace) || pd.proc.rank != 0)
                failf("PMIx_Lookup", "publisher: got %s, want %s:0", procstr(&pd.proc),
                      myproc.nspace);
        }
        PMIX_PDATA_DESTRUCT(&pd);
        PMIX_INFO_DESTRUCT(&info[0]);
        PMIX_INFO_DESTRUCT(&info[1]);
        setctx("");
    }
    fence(NULL, 0, "PMIx_Fence(after lookup)");

    if (myproc.rank == 0) {
        char *keys[2] = {key, NULL};
        phase = "PMIx_Unpublish";
        nchecks++;
        if ((rc = PMIx_Unpublish(keys, NULL, 0)) != PMIX_SUCCESS)
            failf("PMIx_Unpublish", "(%s) failed: %s", key, PMIx_Error_string(rc));
    }
    fence(NULL, 0, "PMIx_Fence(after unpublish)");

    if (myproc.rank == last) {
        pmix_pdata_t pd;
        PMIX_PDATA_CONSTRUCT(&pd);
        PMIX_LOAD_KEY(pd.key, key);
        phase = "PMIx_Lookup(after unpublish)";
        nchecks++;
        setctx("(%s, after unpublish)", key);
        rc = PMIx_Lookup(&pd, 1, NULL, 0);
        if (rc == PMIX_SUCCESS)
            failf("PMIx_Lookup", "got PMIX_SUCCESS with %s, want an error (not found)",
                  fmtval(&pd.value));
        else if (verbose)
            fprintf(stderr, "keys: rank %u: PMIx_Lookup%s: %s (as wanted)\n", myproc.rank, ctx,
                    PMIx_Error_string(rc));
        PMIX_PDATA_DESTRUCT(&pd);
        setctx("");
    }
}

/* dump_results prints query results, recursing into arrays (verbose). */
static void dump_results(const char *what, pmix_info_t *res, size_t n, int depth)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "keys: rank %u: %s: %*s%s = %s (%s)\n", myproc.rank, what, 2 * depth, "",
                res[i].key, fmtval(&res[i].value), PMIx_Data_type_string(res[i].value.type));
        if (res[i].value.type == PMIX_DATA_ARRAY && res[i].value.data.darray &&
            res[i].value.data.darray->type == PMIX_INFO)
            dump_results(what, res[i].value.data.darray->array, res[i].value.data.darray->size,
                         depth + 1);
    }
}

/* find_result finds key in query results, looking inside PMIX_QUERY_RESULTS
 * arrays (PMIx 4 wraps each query's answers in one). */
static pmix_value_t *find_result(pmix_info_t *res, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (PMIX_CHECK_KEY(&res[i], key))
            return &res[i].value;
        if (res[i].value.type == PMIX_DATA_ARRAY && res[i].value.data.darray &&
            res[i].value.data.darray->type == PMIX_INFO) {
            pmix_value_t *v = find_result(res[i].value.data.darray->array,
                                          res[i].value.data.darray->size, key);
            if (v)
                return v;
        }
    }
    return NULL;
}

static void check_query(void)
{
    pmix_query_t *q;
    pmix_info_t *res = NULL;
    size_t nres = 0;
    pmix_status_t rc;
    pmix_value_t *v;

    /* PMIX_QUERY_NAMESPACES: a comma list that holds our nspace. */
    PMIX_QUERY_CREATE(q, 1);
    q[0].keys = calloc(2, sizeof(char *));
    q[0].keys[0] = strdup(PMIX_QUERY_NAMESPACES);
    phase = "PMIx_Query_info(PMIX_QUERY_NAMESPACES)";
    nchecks++;
    rc = PMIx_Query_info(q, 1, &res, &nres);
    if (verbose && res)
        dump_results("PMIX_QUERY_NAMESPACES results", res, nres, 0);
    if (rc != PMIX_SUCCESS) {
        failf("PMIX_QUERY_NAMESPACES", "PMIx_Query_info failed: %s", PMIx_Error_string(rc));
    } else if ((v = find_result(res, nres, PMIX_QUERY_NAMESPACES)) == NULL) {
        failf("PMIX_QUERY_NAMESPACES", "not among the %zu results", nres);
    } else if (v->type != PMIX_STRING || v->data.string == NULL) {
        failf("PMIX_QUERY_NAMESPACES", "got type %s (value %s), want string",
              PMIx_Data_type_string(v->type), fmtval(v));
    } else {
        /* Look for our nspace as a whole element of the list. */
        int found = 0;
        char *list = strdup(v->data.string), *save = NULL;
        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (strcmp(tok, myproc.nspace) == 0)
                found = 1;
        free(list);
        if (verbose)
            fprintf(stderr, "keys: rank %u: PMIX_QUERY_NAMESPACES = \"%s\"\n", myproc.rank,
                    v->data.string);
        if (!found)
            failf("PMIX_QUERY_NAMESPACES", "got \"%s\", want a list containing \"%s\"",
                  v->data.string, myproc.nspace);
    }
    if (res)
        PMIX_INFO_FREE(res, nres);
    PMIX_QUERY_FREE(q, 1);

    /* PMIX_QUERY_PROC_TABLE for our nspace: N pmix_proc_info_t. */
    res = NULL;
    nres = 0;
    PMIX_QUERY_CREATE(q, 1);
    q[0].keys = calloc(2, sizeof(char *));
    q[0].keys[0] = strdup(PMIX_QUERY_PROC_TABLE);
    PMIX_INFO_CREATE(q[0].qualifiers, 1);
    q[0].nqual = 1;
    PMIX_INFO_LOAD(&q[0].qualifiers[0], PMIX_NSPACE, myproc.nspace, PMIX_STRING);
    phase = "PMIx_Query_info(PMIX_QUERY_PROC_TABLE)";
    nchecks++;
    rc = PMIx_Query_info(q, 1, &res, &nres);
    if (verbose && res)
        dump_results("PMIX_QUERY_PROC_TABLE results", res, nres, 0);
    if (rc != PMIX_SUCCESS) {
        failf("PMIX_QUERY_PROC_TABLE", "PMIx_Query_info failed: %s", PMIx_Error_string(rc));
    } else if ((v = find_result(res, nres, PMIX_QUERY_PROC_TABLE)) == NULL) {
        failf("PMIX_QUERY_PROC_TABLE", "not among the %zu results", nres);
    } else if (v->type != PMIX_DATA_ARRAY || v->data.darray == NULL ||
               v->data.darray->type != PMIX_PROC_INFO) {
        failf("PMIX_QUERY_PROC_TABLE", "got %s (%s), want an array of %s", fmtval(v),
              PMIx_Data_type_string(v->type), PMIx_Data_type_string(PMIX_PROC_INFO));
    } else {
        pmix_proc_info_t *pi = v->data.darray->array;
        size_t n = v->data.darray->size;
        char *seen = calloc(N ? N : 1, 1);
        int self = 0;
        if (n != N)
            failf("PMIX_QUERY_PROC_TABLE", "got %zu entries, want %u", n, N);
        for (size_t i = 0; i < n; i++) {
            setctx("[entry %zu]", i);
            if (verbose)
                fprintf(stderr, "keys: rank %u: PMIX_QUERY_PROC_TABLE%s = {%s, host \"%s\", "
                        "exe \"%s\", pid %ld, state %d}\n", myproc.rank, ctx, procstr(&pi[i].proc),
                        pi[i].hostname ? pi[i].hostname : "(null)",
                        pi[i].executable_name ? pi[i].executable_name : "(null)",
                        (long)pi[i].pid, (int)pi[i].state);
            if (!PMIX_CHECK_NSPACE(pi[i].proc.nspace, myproc.nspace))
                failf("PMIX_QUERY_PROC_TABLE", "nspace: got \"%s\", want \"%s\"",
                      pi[i].proc.nspace, myproc.nspace);
            if (pi[i].proc.rank >= N) {
                failf("PMIX_QUERY_PROC_TABLE", "rank: got %u, want < %u", pi[i].proc.rank, N);
                continue;
            }
            if (seen[pi[i].proc.rank]++)
                failf("PMIX_QUERY_PROC_TABLE", "rank %u appears twice", pi[i].proc.rank);
            if (pi[i].hostname == NULL || strcmp(pi[i].hostname, host) != 0)
                failf("PMIX_QUERY_PROC_TABLE", "rank %u: hostname: got \"%s\", want \"%s\"",
                      pi[i].proc.rank, pi[i].hostname ? pi[i].hostname : "(null)", host);
            if (pi[i].proc.rank == myproc.rank) {
                self = 1;
                if (pi[i].pid != getpid())
                    failf("PMIX_QUERY_PROC_TABLE", "rank %u (self): pid: got %ld, want %ld",
                          pi[i].proc.rank, (long)pi[i].pid, (long)getpid());
            }
        }
        setctx("");
        if (!self)
            failf("PMIX_QUERY_PROC_TABLE", "no entry for self (rank %u)", myproc.rank);
        free(seen);
    }
    if (res)
        PMIX_INFO_FREE(res, nres);
    PMIX_QUERY_FREE(q, 1);
}

int main(int argc, char **argv)
{
    pmix_status_t rc;
    const char *e;

    if ((e = getenv("KEYS_TIMEOUT")) && atoi(e) > 0)
        timeout_secs = atoi(e);
    verbose = (e = getenv("KEYS_VERBOSE")) && *e && strcmp(e, "0") != 0;
    strict = (e = getenv("KEYS_STRICT")) && *e && strcmp(e, "0") != 0;
    realms_only = (e = getenv("KEYS_REALMS_ONLY")) && *e && strcmp(e, "0") != 0;
    libpmix4 = strncmp(PMIx_Get_version(), "OpenPMIx 4.", 11) == 0;
    signal(SIGALRM, on_alarm);
    alarm((unsigned)timeout_secs);

    myproc.rank = PMIX_RANK_UNDEF;
    if ((rc = PMIx_Init(&myproc, NULL, 0)) != PMIX_SUCCESS) {
        fprintf(stderr, "keys: PMIx_Init failed: %s (was this started by a PMIx launcher?)\n",
                PMIx_Error_string(rc));
        return 1;
    }
    PMIX_PROC_LOAD(&wild, myproc.nspace, PMIX_RANK_WILDCARD);
    if (!parse_apps()) {
        PMIx_Finalize(NULL, 0);
        return 1;
    }
    if ((e = getenv("KEYS_EXPECT_HOST")) && *e)
        snprintf(host, sizeof host, "%s", e);
    else if (gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "localhost");
    if (getcwd(cwd, sizeof cwd) == NULL) {
        fprintf(stderr, "keys: rank %u: getcwd: %s\n", myproc.rank, strerror(errno));
        PMIx_Finalize(NULL, 0);
        return 1;
    }

    nchecks++;
    if (myproc.rank >= N)
        failf("rank", "got %u, want < %u (the sum of KEYS_EXPECT_APPS)", myproc.rank, N);

    if (realms_only) {
        /* any number of nodes: only the checks that compare methods */
        nprocs = N;
        check_realm_methods();
        fence(NULL, 0, "PMIx_Fence(final)");
        goto done;
    }
    check_session();
    check_job();
    check_apps();
    check_procs();
    check_node();
    check_realm_methods();
    check_resolve();
    modex_round("keys.val", 1);
    modex_round("keys.val2", 0);
    if (nprocs >= 2)
        check_publish();
    check_query();
    /* Nobody leaves while a peer may still want its data. */
    fence(NULL, 0, "PMIx_Fence(final)");

done:
    phase = "PMIx_Finalize";
    if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) {
        nchecks++;
        failf("PMIx_Finalize", "failed: %s", PMIx_Error_string(rc));
    }
    alarm(0);
    if (nfails) {
        fprintf(stderr, "keys: rank %u: %d of %d checks failed\n", myproc.rank, nfails, nchecks);
        return 1;
    }
    printf("keys: rank %u ok (%d checks)\n", myproc.rank, nchecks);
    return 0;
}
