#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <event2/event.h>
#include "shim.h"
#include "_cgo_export.h"

/* ---- server module: each upcall goes straight to Go ---- */

static pmix_status_t tr_connected(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb, void *cbd)
{
    (void)obj;
    return goClientConnected((pmix_proc_t *)p, cb, cbd);
}

static pmix_status_t tr_finalized(const pmix_proc_t *p, void *obj, pmix_op_cbfunc_t cb, void *cbd)
{
    (void)obj;
    return goClientFinalized((pmix_proc_t *)p, cb, cbd);
}

static pmix_status_t tr_abort(const pmix_proc_t *p, void *obj, int status, const char msg[],
                              pmix_proc_t procs[], size_t nprocs, pmix_op_cbfunc_t cb, void *cbd)
{
    (void)obj;
    return goAbort((pmix_proc_t *)p, status, (char *)msg, procs, nprocs, cb, cbd);
}

static pmix_status_t tr_fence(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                              size_t ninfo, char *data, size_t ndata, pmix_modex_cbfunc_t cb, void *cbd)
{
    return goFence((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, data, ndata, cb, cbd);
}

static pmix_status_t tr_dmodex(const pmix_proc_t *p, const pmix_info_t info[], size_t ninfo,
                               pmix_modex_cbfunc_t cb, void *cbd)
{
    return goDirectModex((pmix_proc_t *)p, (pmix_info_t *)info, ninfo, cb, cbd);
}

static pmix_status_t tr_publish(const pmix_proc_t *p, const pmix_info_t info[], size_t ninfo,
                                pmix_op_cbfunc_t cb, void *cbd)
{
    return goPublish((pmix_proc_t *)p, (pmix_info_t *)info, ninfo, cb, cbd);
}

static pmix_status_t tr_lookup(const pmix_proc_t *p, char **keys, const pmix_info_t info[], size_t ninfo,
                               pmix_lookup_cbfunc_t cb, void *cbd)
{
    return goLookup((pmix_proc_t *)p, keys, (pmix_info_t *)info, ninfo, cb, cbd);
}

static pmix_status_t tr_unpublish(const pmix_proc_t *p, char **keys, const pmix_info_t info[],
                                  size_t ninfo, pmix_op_cbfunc_t cb, void *cbd)
{
    return goUnpublish((pmix_proc_t *)p, keys, (pmix_info_t *)info, ninfo, cb, cbd);
}

static pmix_status_t tr_spawn(const pmix_proc_t *p, const pmix_info_t job_info[], size_t ninfo,
                              const pmix_app_t apps[], size_t napps, pmix_spawn_cbfunc_t cb, void *cbd)
{
    return goSpawn((pmix_proc_t *)p, (pmix_info_t *)job_info, ninfo, (pmix_app_t *)apps, napps, cb, cbd);
}

static pmix_status_t tr_connect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                size_t ninfo, pmix_op_cbfunc_t cb, void *cbd)
{
    return goConnect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, 0, cb, cbd);
}

static pmix_status_t tr_disconnect(const pmix_proc_t procs[], size_t nprocs, const pmix_info_t info[],
                                   size_t ninfo, pmix_op_cbfunc_t cb, void *cbd)
{
    return goConnect((pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, 1, cb, cbd);
}


static pmix_status_t tr_group(pmix_group_operation_t op, char grp[], const pmix_proc_t procs[], size_t nprocs,
                              const pmix_info_t info[], size_t ninfo, pmix_info_cbfunc_t cb, void *cbd)
{
    prun_group_upcall(cbd, (void *)cb);
    return goGroup((int)op, grp, (pmix_proc_t *)procs, nprocs, (pmix_info_t *)info, ninfo, cb, cbd);
}

static pmix_status_t tr_register_events(pmix_status_t *codes, size_t ncodes, const pmix_info_t info[],
                                        size_t ninfo, pmix_op_cbfunc_t cb, void *cbd)
{
    return goRegisterEvents(codes, ncodes, (pmix_info_t *)info, ninfo, 0, cb, cbd);
}

static pmix_status_t tr_deregister_events(pmix_status_t *codes, size_t ncodes, pmix_op_cbfunc_t cb,
                                          void *cbd)
{
    return goRegisterEvents(codes, ncodes, NULL, 0, 1, cb, cbd);
}

static pmix_status_t tr_notify(pmix_status_t code, const pmix_proc_t *source, pmix_data_range_t range,
                               pmix_info_t info[], size_t ninfo, pmix_op_cbfunc_t cb, void *cbd)
{
    return goNotifyEvent(code, (pmix_proc_t *)source, range, info, ninfo, cb, cbd);
}

static pmix_status_t tr_query(pmix_proc_t *p, pmix_query_t *queries, size_t nqueries,
                              pmix_info_cbfunc_t cb, void *cbd)
{
    return goQuery(p, queries, nqueries, cb, cbd);
}

static void tr_log(const pmix_proc_t *p, const pmix_info_t data[], size_t ndata,
                   const pmix_info_t dirs[], size_t ndirs, pmix_op_cbfunc_t cb, void *cbd)
{
    goLog((pmix_proc_t *)p, (pmix_info_t *)data, ndata, (pmix_info_t *)dirs, ndirs, cb, cbd);
}

static pmix_status_t tr_job_control(const pmix_proc_t *req, const pmix_proc_t targets[], size_t ntargets,
                                    const pmix_info_t dirs[], size_t ndirs, pmix_info_cbfunc_t cb, void *cbd)
{
    return goJobControl((pmix_proc_t *)req, (pmix_proc_t *)targets, ntargets, (pmix_info_t *)dirs, ndirs,
                        cb, cbd);
}

/* A tool (pps, pquery, pattrs, a debugger) connected: it gets the identity
 * it asked for, else a namespace of its own, rank 0. Who it is was settled
 * when its connection was accepted (__wrap_accept: the kernel's owner of its
 * socket is this user or root); the uid it claims in its request (info's
 * PMIX_USERID) must say the same, or it is refused too. Answered here, at
 * once: there is nothing for the launcher to decide, and the library's
 * thread must not wait. */
static void tr_tool_connected(pmix_info_t *info, size_t ninfo, pmix_tool_connection_cbfunc_t cb, void *cbd)
{
    static unsigned long ntools;
    pmix_proc_t proc;
    char ns[PMIX_MAX_NSLEN + 1];
    PMIX_PROC_CONSTRUCT(&proc);
    snprintf(ns, sizeof ns, "prun-tool-%d-%lu", (int)getpid(), __atomic_add_fetch(&ntools, 1, __ATOMIC_RELAXED));
    PMIX_LOAD_NSPACE(proc.nspace, ns);
    proc.rank = 0;
    for (size_t i = 0; i < ninfo; i++) {
        if (PMIX_CHECK_KEY(&info[i], PMIX_USERID) && info[i].value.type == PMIX_UINT32 &&
            info[i].value.data.uint32 != 0 && info[i].value.data.uint32 != (uint32_t)geteuid()) {
            cb(PMIX_ERR_NO_PERMISSIONS, NULL, cbd);
            return;
        }
        if (PMIX_CHECK_KEY(&info[i], PMIX_NSPACE) && info[i].value.type == PMIX_STRING) {
            PMIX_LOAD_NSPACE(proc.nspace, info[i].value.data.string);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_RANK) && info[i].value.type == PMIX_PROC_RANK) {
            proc.rank = info[i].value.data.rank;
        }
    }
    cb(PMIX_SUCCESS, &proc, cbd);
}

/* Every connection to the library's listener (clients and tools alike) is
 * accepted through here: the link maps libpmix's accept() to this
 * (-Wl,--wrap=accept). libpmix 4.2 speaks only TCP, and over TCP it takes
 * the peer's uid and gid from the peer's own connection message (psec
 * "native" compares them with the registered client's, and hands a tool's
 * to tool_connected): another local user who claims to be root passes as
 * any rank of a job, or as a tool. So the host establishes the peer itself
 * before libpmix reads a byte: goAdmitPeer asks the kernel who owns the
 * peer's socket. A refused connection is closed and reported to libpmix's
 * listener as one the peer aborted (ECONNABORTED), on which it goes on
 * accepting. */
int __real_accept(int fd, struct sockaddr *addr, socklen_t *len);
static void prompt_socket(int fd);

int __wrap_accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    int c = __real_accept(fd, addr, len);
    if (c < 0) {
        return c;
    }
    if (goAdmitPeer(c)) {
        prompt_socket(c);
        return c;
    }
    close(c);
    errno = ECONNABORTED;
    return -1;
}

/* The kernel's owner of a connection's peer socket, for the library's native
 * authentication (openpmix/patches/0004): admitted by __wrap_accept, a peer
 * is whoever the kernel says, whatever uid it claims (a rank in a user
 * namespace claims its namespace's). Runs on the library's progress thread,
 * once per connection. */
int pmix_host_socket_uid(int sd, uid_t *uid)
{
    long u = goPeerUID(sd);
    if (u < 0) {
        return -1;
    }
    *uid = (uid_t)u;
    return 0;
}

/* libpmix 4.2 sets no socket option on its connections (its
 * pmix_ptl_base_setup_socket, which would set TCP_NODELAY, is never
 * called), so its small messages meet Nagle's algorithm and delayed
 * acknowledgements: a client that sends a message the server does not
 * answer (PMIx_Deregister_event_handler's, in every MPI_Finalize of Open
 * MPI) and then another (PMIx_Finalize's) has the second held back by
 * Nagle until the server's delayed ACK of the first, 40 ms later. So the
 * server's end of each admitted connection sends without Nagle, and
 * acknowledges at once whatever it has read (TCP_QUICKACK is not sticky:
 * the kernel returns to delayed ACKs once the server answers, so it is set
 * again after each read, through -Wl,--wrap=read). quick marks those
 * descriptors; a mark left on a descriptor that was closed and reused for
 * something else costs one refused setsockopt, which clears it. */
#define QUICK_FDS 65536
static unsigned char quick[QUICK_FDS];

static void prompt_socket(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd < QUICK_FDS) {
        __atomic_store_n(&quick[fd], 1, __ATOMIC_RELAXED);
    }
}

ssize_t __real_read(int fd, void *buf, size_t n);

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
    ssize_t got = __real_read(fd, buf, n);
    if (got > 0 && fd >= 0 && fd < QUICK_FDS && __atomic_load_n(&quick[fd], __ATOMIC_RELAXED)) {
        int saved = errno, one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one) != 0) {
            __atomic_store_n(&quick[fd], 0, __ATOMIC_RELAXED);
        }
        errno = saved;
    }
    return got;
}

static pmix_server_module_t module = {
    .client_connected = tr_connected,
    .client_finalized = tr_finalized,
    .abort = tr_abort,
    .fence_nb = tr_fence,
    .direct_modex = tr_dmodex,
    .publish = tr_publish,
    .lookup = tr_lookup,
    .unpublish = tr_unpublish,
    .spawn = tr_spawn,
    .connect = tr_connect,
    .disconnect = tr_disconnect,
    .register_events = tr_register_events,
    .deregister_events = tr_deregister_events,
    .notify_event = tr_notify,
    .query = tr_query,
    .log = tr_log,
    .job_control = tr_job_control,
    .tool_connected = tr_tool_connected,
    .group = tr_group,
};

pmix_status_t prun_server_init(pmix_info_t *info, size_t ninfo)
{
    return PMIx_server_init(&module, info, ninfo);
}

/* ---- building info arrays ---- */

pmix_info_t *prun_info_create(size_t n)
{
    pmix_info_t *a;
    if (n == 0) {
        return NULL;
    }
    PMIX_INFO_CREATE(a, n);
    return a;
}

void prun_info_free(pmix_info_t *a, size_t n)
{
    if (a != NULL) {
        PMIX_INFO_FREE(a, n);
    }
}

pmix_info_t *prun_info_at(pmix_info_t *a, size_t i) { return &a[i]; }

void prun_info_string(pmix_info_t *a, size_t i, const char *key, const char *v)
{
    PMIX_INFO_LOAD(&a[i], key, v, PMIX_STRING);
}

/* Generated regexes may be binary ("blob:" compressed), so they never pass
 * through Go strings: generate and load here. */
pmix_status_t prun_info_regex(pmix_info_t *a, size_t i, const char *key, const char *raw, int ppn)
{
    char *regex = NULL;
    pmix_status_t rc = ppn ? PMIx_generate_ppn(raw, &regex) : PMIx_generate_regex(raw, &regex);
    if (rc != PMIX_SUCCESS) {
        return rc;
    }
    PMIX_INFO_LOAD(&a[i], key, regex, PMIX_REGEX);
    free(regex);
    return PMIX_SUCCESS;
}

void prun_info_bool(pmix_info_t *a, size_t i, const char *key, int v)
{
    bool b = v != 0;
    PMIX_INFO_LOAD(&a[i], key, &b, PMIX_BOOL);
}

void prun_info_uint(pmix_info_t *a, size_t i, const char *key, uint64_t v, pmix_data_type_t t)
{
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    size_t sz = (size_t)v;
    switch (t) {
    case PMIX_UINT8: PMIX_INFO_LOAD(&a[i], key, &u8, t); break;
    case PMIX_UINT16: PMIX_INFO_LOAD(&a[i], key, &u16, t); break;
    case PMIX_UINT32:
    case PMIX_PROC_RANK: PMIX_INFO_LOAD(&a[i], key, &u32, t); break;
    case PMIX_SIZE: PMIX_INFO_LOAD(&a[i], key, &sz, t); break;
    default: PMIX_INFO_LOAD(&a[i], key, &v, PMIX_UINT64); break;
    }
}

void prun_info_int(pmix_info_t *a, size_t i, const char *key, int64_t v, pmix_data_type_t t)
{
    int iv = (int)v;
    int8_t i8 = (int8_t)v;
    int16_t i16 = (int16_t)v;
    int32_t i32 = (int32_t)v;
    pid_t pid = (pid_t)v;
    pmix_status_t st = (pmix_status_t)v;
    pmix_data_range_t rng = (pmix_data_range_t)v;
    pmix_persistence_t per = (pmix_persistence_t)v;
    pmix_job_state_t js = (pmix_job_state_t)v;
    switch (t) {
    case PMIX_INT: PMIX_INFO_LOAD(&a[i], key, &iv, t); break;
    case PMIX_INT8: PMIX_INFO_LOAD(&a[i], key, &i8, t); break;
    case PMIX_INT16: PMIX_INFO_LOAD(&a[i], key, &i16, t); break;
    case PMIX_INT32: PMIX_INFO_LOAD(&a[i], key, &i32, t); break;
    case PMIX_PID: PMIX_INFO_LOAD(&a[i], key, &pid, t); break;
    case PMIX_STATUS: PMIX_INFO_LOAD(&a[i], key, &st, t); break;
    case PMIX_DATA_RANGE: PMIX_INFO_LOAD(&a[i], key, &rng, t); break;
    case PMIX_PERSIST: PMIX_INFO_LOAD(&a[i], key, &per, t); break;
    case PMIX_JOB_STATE: PMIX_INFO_LOAD(&a[i], key, &js, t); break;
    default: PMIX_INFO_LOAD(&a[i], key, &v, PMIX_INT64); break;
    }
}

void prun_info_double(pmix_info_t *a, size_t i, const char *key, double v)
{
    PMIX_INFO_LOAD(&a[i], key, &v, PMIX_DOUBLE);
}

void prun_info_float(pmix_info_t *a, size_t i, const char *key, float v)
{
    PMIX_INFO_LOAD(&a[i], key, &v, PMIX_FLOAT);
}

void prun_info_bytes(pmix_info_t *a, size_t i, const char *key, const char *b, size_t n)
{
    pmix_byte_object_t bo;
    bo.bytes = (char *)b;
    bo.size = n;
    PMIX_INFO_LOAD(&a[i], key, &bo, PMIX_BYTE_OBJECT); /* copies */
}

void prun_info_proc(pmix_info_t *a, size_t i, const char *key, const char *ns, uint32_t rank)
{
    pmix_proc_t p;
    PMIX_PROC_LOAD(&p, ns, rank);
    PMIX_INFO_LOAD(&a[i], key, &p, PMIX_PROC);
}

/* The data-array setters take ownership of the element array: loading through
 * PMIX_INFO_LOAD would deep-copy it. */
static void set_darray(pmix_info_t *a, size_t i, const char *key, void *arr, size_t n, pmix_data_type_t t)
{
    pmix_data_array_t *d = (pmix_data_array_t *)calloc(1, sizeof(*d));
    PMIX_LOAD_KEY(a[i].key, key);
    d->type = t;
    d->size = n;
    d->array = arr;
    a[i].value.type = PMIX_DATA_ARRAY;
    a[i].value.data.darray = d;
}

void prun_info_infos(pmix_info_t *a, size_t i, const char *key, pmix_info_t *sub, size_t n)
{
    set_darray(a, i, key, sub, n, PMIX_INFO);
}

pmix_proc_info_t *prun_procinfo_create(size_t n)
{
    pmix_proc_info_t *a;
    PMIX_PROC_INFO_CREATE(a, n);
    return a;
}

void prun_procinfo_set(pmix_proc_info_t *a, size_t i, const char *ns, uint32_t rank, const char *host,
                       const char *exe, int pid, int exit_code, int state)
{
    PMIX_PROC_LOAD(&a[i].proc, ns, rank);
    a[i].hostname = strdup(host);
    a[i].executable_name = strdup(exe);
    a[i].pid = pid;
    a[i].exit_code = exit_code;
    a[i].state = (pmix_proc_state_t)state;
}

void prun_info_procinfos(pmix_info_t *a, size_t i, const char *key, pmix_proc_info_t *arr, size_t n)
{
    set_darray(a, i, key, arr, n, PMIX_PROC_INFO);
}

pmix_proc_t *prun_procs_create(size_t n)
{
    pmix_proc_t *a;
    PMIX_PROC_CREATE(a, n);
    return a;
}

void prun_procs_set(pmix_proc_t *a, size_t i, const char *ns, uint32_t rank)
{
    PMIX_PROC_LOAD(&a[i], ns, rank);
}

void prun_info_procs(pmix_info_t *a, size_t i, const char *key, pmix_proc_t *arr, size_t n)
{
    set_darray(a, i, key, arr, n, PMIX_PROC);
}

/* ---- reading values ---- */

pmix_data_type_t prun_value_type(const pmix_value_t *v) { return v->type; }

const char *prun_value_string(const pmix_value_t *v) { return v->data.string; }

uint64_t prun_value_uint(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_UINT8: return v->data.uint8;
    case PMIX_UINT16: return v->data.uint16;
    case PMIX_UINT32: return v->data.uint32;
    case PMIX_PROC_RANK: return v->data.rank;
    case PMIX_SIZE: return v->data.size;
    case PMIX_UINT64: return v->data.uint64;
    case PMIX_UINT: return v->data.uint;
    case PMIX_BOOL: return v->data.flag ? 1 : 0;
    default: return 0;
    }
}

int64_t prun_value_int(const pmix_value_t *v)
{
    switch (v->type) {
    case PMIX_INT: return v->data.integer;
    case PMIX_INT8: return v->data.int8;
    case PMIX_INT16: return v->data.int16;
    case PMIX_INT32: return v->data.int32;
    case PMIX_INT64: return v->data.int64;
    case PMIX_PID: return v->data.pid;
    case PMIX_STATUS: return v->data.status;
    case PMIX_DATA_RANGE: return v->data.range;
    case PMIX_PERSIST: return v->data.persist;
    default: return (int64_t)prun_value_uint(v);
    }
}

double prun_value_double(const pmix_value_t *v)
{
    return v->type == PMIX_FLOAT ? v->data.fval : v->data.dval;
}

const char *prun_value_bytes(const pmix_value_t *v, size_t *n)
{
    *n = v->data.bo.size;
    return v->data.bo.bytes;
}

const pmix_proc_t *prun_value_proc(const pmix_value_t *v) { return v->data.proc; }

void *prun_value_darray(const pmix_value_t *v, pmix_data_type_t *t, size_t *n)
{
    if (v->data.darray == NULL) {
        *n = 0;
        return NULL;
    }
    *t = v->data.darray->type;
    *n = v->data.darray->size;
    return v->data.darray->array;
}

/* ---- completing the library's requests ---- */

void prun_op_cb(pmix_op_cbfunc_t cb, pmix_status_t st, void *cbdata)
{
    if (cb != NULL) {
        cb(st, cbdata);
    }
}

static void release_free(void *p) { free(p); }

void prun_modex_cb(pmix_modex_cbfunc_t cb, pmix_status_t st, const char *data, size_t n, void *cbdata)
{
    char *copy = NULL;
    if (cb == NULL) {
        return;
    }
    if (n > 0) {
        copy = (char *)malloc(n);
        memcpy(copy, data, n);
    }
    cb(st, copy, n, cbdata, release_free, copy);
}

typedef struct {
    pmix_info_t *info;
    size_t n;
} info_rel_t;

static void release_info(void *p)
{
    info_rel_t *r = (info_rel_t *)p;
    prun_info_free(r->info, r->n);
    free(r);
}

void prun_info_cb(pmix_info_cbfunc_t cb, pmix_status_t st, pmix_info_t *info, size_t n, void *cbdata)
{
    info_rel_t *r;
    if (cb == NULL) {
        prun_info_free(info, n);
        return;
    }
    r = (info_rel_t *)malloc(sizeof(*r));
    r->info = info;
    r->n = n;
    cb(st, info, n, cbdata, release_info, r);
}

/* The library packs lookup results before returning, so we free them after. */
void prun_lookup_cb(pmix_lookup_cbfunc_t cb, pmix_status_t st, pmix_pdata_t *d, size_t n, void *cbdata)
{
    if (cb != NULL) {
        cb(st, d, n, cbdata);
    }
    prun_pdata_free(d, n);
}

void prun_spawn_cb(pmix_spawn_cbfunc_t cb, pmix_status_t st, const char *nspace, void *cbdata)
{
    pmix_nspace_t ns;
    PMIX_LOAD_NSPACE(ns, nspace);
    if (cb != NULL) {
        cb(st, ns, cbdata);
    }
}

pmix_pdata_t *prun_pdata_create(size_t n)
{
    pmix_pdata_t *d;
    if (n == 0) {
        return NULL;
    }
    PMIX_PDATA_CREATE(d, n);
    return d;
}

/* Moves the value out of val (a one-element info array built by Go). */
void prun_pdata_set(pmix_pdata_t *d, size_t i, const char *ns, uint32_t rank, const char *key, pmix_info_t *val)
{
    PMIX_PROC_LOAD(&d[i].proc, ns, rank);
    PMIX_LOAD_KEY(d[i].key, key);
    d[i].value = val->value;
    val->value.type = PMIX_UNDEF;
}

void prun_pdata_free(pmix_pdata_t *d, size_t n)
{
    if (d != NULL) {
        PMIX_PDATA_FREE(d, n);
    }
}

/* ---- our own calls into the library, completed through goOpDone ---- */

static void opdone(pmix_status_t st, void *cbdata) { goOpDone((uintptr_t)cbdata, st); }

/* Registrations are waited for here, on a semaphore: the library's thread
 * completes them within tens of microseconds, and completing them through a
 * Go callback instead costs that thread a borrowed Go thread and a wait for
 * a processor each time. Neither registration calls back into the host. */
struct syncop {
    sem_t sem;
    pmix_status_t st;
};

static void syncdone(pmix_status_t st, void *cbdata)
{
    struct syncop *op = cbdata;
    op->st = st;
    sem_post(&op->sem);
}

/* syncwait returns the operation's status once it is complete; rc is what
 * the call that started it returned (no callback comes unless PMIX_SUCCESS). */
static pmix_status_t syncwait(struct syncop *op, pmix_status_t rc)
{
    if (rc == PMIX_SUCCESS) {
        while (sem_wait(&op->sem) != 0) {
        }
        rc = op->st;
    } else if (rc == PMIX_OPERATION_SUCCEEDED) {
        rc = PMIX_SUCCESS;
    }
    sem_destroy(&op->sem);
    return rc;
}

pmix_status_t prun_register_nspace(const char *ns, int nlocal, pmix_info_t *info, size_t n)
{
    pmix_nspace_t nspace;
    struct syncop op;
    pmix_status_t rc;
    PMIX_LOAD_NSPACE(nspace, ns);
    sem_init(&op.sem, 0, 0);
    /* Named before the library takes it in: a departing tool's namespace of
     * this name is then never dropped under the job (leaks.c). */
    prun_nspace_registered(ns);
    rc = syncwait(&op, PMIx_server_register_nspace(nspace, nlocal, info, n, syncdone, &op));
    if (rc != PMIX_SUCCESS) {
        prun_nspace_forgotten(ns);
    }
    return rc;
}

/* Deregistration is fire-and-forget: some libpmix releases never call the
 * callback of deregister_client, and later calls are queued behind it on the
 * library's thread anyway. */
static void nop_opcb(pmix_status_t st, void *cbdata) { (void)st; (void)cbdata; }

/* A namespace's deregistration completes on the library's progress thread
 * (PMIX_ERR_INIT alone comes at once, on the caller's, with no server to
 * clean): the connections of departed clients that the library keeps are
 * released there (leaks.c), this namespace's and any earlier one's whose
 * connections closed only after it was deregistered. */
static void nspace_deregistered(pmix_status_t st, void *cbdata)
{
    char *ns = cbdata;
    if (st != PMIX_ERR_INIT) {
        prun_release_departed();
    }
    /* The host's no more once the library dropped it (leaks.c). */
    prun_nspace_forgotten(ns);
    free(ns);
}

void prun_deregister_nspace(const char *ns)
{
    pmix_nspace_t nspace;
    char *copy = malloc(sizeof nspace);
    PMIX_LOAD_NSPACE(nspace, ns);
    prun_group_forget_nspace(ns);
    if (copy == NULL) {
        prun_nspace_forgotten(ns);
        PMIx_server_deregister_nspace(nspace, nop_opcb, NULL);
        return;
    }
    memcpy(copy, nspace, sizeof nspace);
    PMIx_server_deregister_nspace(nspace, nspace_deregistered, copy);
}

/* prun_register_clients registers n ranks of ns, all in flight at once,
 * and leaves each one's status in st. */
void prun_register_clients(const char *ns, const uint32_t *ranks, size_t n, uid_t uid, gid_t gid, pmix_status_t *st)
{
    struct syncop *ops = calloc(n, sizeof *ops);
    if (ops == NULL) {
        for (size_t i = 0; i < n; i++)
            st[i] = PMIX_ERR_NOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        pmix_proc_t p;
        PMIX_PROC_LOAD(&p, ns, ranks[i]);
        sem_init(&ops[i].sem, 0, 0);
        st[i] = PMIx_server_register_client(&p, uid, gid, NULL, syncdone, &ops[i]);
    }
    for (size_t i = 0; i < n; i++)
        st[i] = syncwait(&ops[i], st[i]);
    free(ops);
}

void prun_deregister_client(const char *ns, uint32_t rank)
{
    pmix_proc_t p;
    PMIX_PROC_LOAD(&p, ns, rank);
    PMIx_server_deregister_client(&p, nop_opcb, NULL);
}

pmix_status_t prun_setup_fork(const char *ns, uint32_t rank, char ***env)
{
    pmix_proc_t p;
    PMIX_PROC_LOAD(&p, ns, rank);
    *env = (char **)calloc(1, sizeof(char *));
    return PMIx_server_setup_fork(&p, env);
}

void prun_env_free(char **env)
{
    for (char **e = env; e != NULL && *e != NULL; e++) {
        free(*e);
    }
    free(env);
}

static void dmodex_done(pmix_status_t st, char *data, size_t sz, void *cbdata)
{
    goDmodexDone((uintptr_t)cbdata, st, data, sz);
}

pmix_status_t prun_dmodex_request(const char *ns, uint32_t rank, uintptr_t h)
{
    pmix_proc_t p;
    PMIX_PROC_LOAD(&p, ns, rank);
    return PMIx_server_dmodex_request(&p, dmodex_done, (void *)h);
}

pmix_status_t prun_notify(pmix_status_t code, const char *ns, uint32_t rank, pmix_data_range_t range,
                          pmix_info_t *info, size_t n, uintptr_t h)
{
    pmix_proc_t p;
    PMIX_PROC_LOAD(&p, ns, rank);
    return PMIx_Notify_event(code, &p, range, info, n, opdone, (void *)h);
}

uintptr_t prun_server_init_addr(void)
{
    return (uintptr_t)&PMIx_server_init;
}
