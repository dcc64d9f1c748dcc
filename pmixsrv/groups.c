/* libpmix 4.2.2's group trackers, mended from outside the library: the
 * timeout of a construct or destruct, and members that are gone.
 *
 * Gone members. The library holds a construct or destruct on a node until
 * every local member called it, and only then hands it to the host. When a
 * local member ends first, its lost connection is taken out of fences and
 * connects, not out of group trackers: the members that did call wait for
 * ever, and the host never hears of the operation. So the daemon tells this
 * file of every local rank that ended for good (prun_group_member_gone); on
 * the library's progress thread, and again after each construct or destruct
 * the library takes in (a tracker may be made after the member ended), every
 * group tracker that waits for a gone member and never reached the host is
 * completed with PMIX_GROUP_CONSTRUCT_ABORT through the library's own
 * completion, which answers each local caller and drops the tracker (as a
 * timeout does, below). Operations that reached the host fail there: the
 * launcher fails a collective whose member died (remote.Root.FailProc).
 *
 * The trackers are the library's private structures: their layout comes
 * from the private headers of the pinned 4.2.2 the build installs beside it
 * (pin.h refuses any other library). shim.c, the server's module, calls in
 * here (prun_group_upcall, prun_group_forget_nspace); nothing here calls
 * back into it.
 */
#include "pin.h"
#include "src/include/pmix_config.h"
#include "src/include/pmix_globals.h"
#include "src/server/pmix_server_ops.h"
#include <event2/event.h>
#include <pthread.h>
#include <pmix_version.h>
#include "shim.h"
#include "_cgo_export.h"

typedef void (*prun_group_done_fn)(pmix_status_t, pmix_info_t *, size_t, void *, pmix_release_cbfunc_t, void *);
static void prun_group_sweep(void);
static void prun_group_ops_seen(void);

/* ---- libpmix 4.2.2's group-construct timeout ----
 *
 * A construct given PMIX_TIMEOUT arms a timer on the library's tracker of the
 * collective (PMIX_THREADSHIFT_DELAY in pmix_server_grpconstruct), whose
 * callback, grp_timeout, takes the tracker for a caller's caddy: when it
 * fires it queues a reply to a peer read from the tracker's name bytes and
 * unlinks the tracker from a list it is not in: the server's progress thread
 * then spins in libevent forever, or the process crashes (4.2.3 rewrote it).
 * Every construct that a member does not join within the timeout ends so. The link routes
 * pmix_server_grpconstruct (-Wl,--wrap) through here, and the timers it
 * assigns (a pure timer: no descriptor, no events; -Wl,--wrap=event_assign)
 * get a callback of prun's instead (and are followed through event_del):
 *  - a tracker the library hands the host (every local member came) is the
 *    host's: its timer is cancelled at the upcall, and prun's collective
 *    enforces the timeout across the nodes (the launcher decides);
 *  - a tracker still waiting for a local member when its timer fires is
 *    completed with PMIX_ERR_TIMEOUT through the library's own completion,
 *    grpcbfunc (what the host would call), which replies to every local
 *    caller and forgets the tracker, so a later construct of the group
 *    starts afresh.
 * grpcbfunc is static: its address comes from the executable's symbol table
 * (goGroupCompletion; `go run` and `go test` strip it), else from any group
 * upcall before. Without it the timer does nothing, and a construct held on
 * its node waits for its late member.
 * pmix_server_grpdestruct arms the same timer: it is handled the same way.
 * Wrapped calls run on the library's progress thread, but event_del's may
 * come from any: the table has a lock. */
int __real_pmix_server_grpconstruct(void *cd, void *buf);
int __real_pmix_server_grpdestruct(void *cd, void *buf);
int __real_event_assign(struct event *ev, struct event_base *base, evutil_socket_t fd, short events,
                        event_callback_fn cb, void *arg);

int __real_event_del(struct event *ev);

static __thread int in_grpconstruct;

/* The completion an upcall came with: grpcbfunc, for a binary whose symbol
 * table is gone, once any group operation reached the host. */
static void *upcall_completion;

/* The group timers armed and not yet fired or deleted: an entry's event is
 * live (libpmix deletes a tracker's timer, through event_del, before it
 * lets the tracker go), so cancelling it is safe. */
struct grptimer {
    struct grptimer *next;
    struct event *ev;
    void *trk;
};
static struct grptimer *grptimers;
static pthread_mutex_t grptimers_mu = PTHREAD_MUTEX_INITIALIZER;

/* grptimer_take unlinks the entry of trk (or, trk NULL, of event ev). */
static struct grptimer *grptimer_take(void *trk, struct event *ev)
{
    struct grptimer **t, *x = NULL;
    pthread_mutex_lock(&grptimers_mu);
    for (t = &grptimers; *t; t = &(*t)->next)
        if (trk ? (*t)->trk == trk : (*t)->ev == ev) {
            x = *t;
            *t = x->next;
            break;
        }
    pthread_mutex_unlock(&grptimers_mu);
    return x;
}

static void grptimer_drop(void *trk, int cancel)
{
    struct grptimer *x = grptimer_take(trk, NULL);
    if (!x)
        return;
    if (cancel)
        __real_event_del(x->ev);
    free(x);
}

/* __wrap_event_del: libpmix deleting a timer of ours (a construct that
 * completed in the library) ends its entry. */
int __wrap_event_del(struct event *ev)
{
    free(grptimer_take(NULL, ev));
    return __real_event_del(ev);
}

/* prun_group_completion is the library's completion of a group tracker,
 * grpcbfunc, or NULL while unknown. */
static prun_group_done_fn prun_group_completion(void)
{
    prun_group_done_fn done = (prun_group_done_fn)goGroupCompletion();
    if (!done)
        done = (prun_group_done_fn)__atomic_load_n(&upcall_completion, __ATOMIC_RELAXED);
    return done;
}

static void prun_group_timer_cancel(void *trk) { grptimer_drop(trk, 1); }

static void grptimer_fired(evutil_socket_t fd, short what, void *trk)
{
    prun_group_done_fn done = prun_group_completion();
    (void)fd;
    (void)what;
    grptimer_drop(trk, 0);
    if (done && trk)
        done(PMIX_ERR_TIMEOUT, NULL, 0, trk, NULL, NULL);
}

int __wrap_pmix_server_grpconstruct(void *cd, void *buf)
{
    int rc;
    in_grpconstruct = 1;
    prun_group_ops_seen();
    rc = __real_pmix_server_grpconstruct(cd, buf);
    in_grpconstruct = 0;
    prun_group_sweep(); /* its tracker may wait for a member already gone */
    return rc;
}

int __wrap_pmix_server_grpdestruct(void *cd, void *buf)
{
    int rc;
    in_grpconstruct = 1;
    prun_group_ops_seen();
    rc = __real_pmix_server_grpdestruct(cd, buf);
    in_grpconstruct = 0;
    prun_group_sweep();
    return rc;
}

int __wrap_event_assign(struct event *ev, struct event_base *base, evutil_socket_t fd, short events,
                        event_callback_fn cb, void *arg)
{
    struct grptimer *t;
    if (!in_grpconstruct || fd != -1 || events != 0)
        return __real_event_assign(ev, base, fd, events, cb, arg);
    /* The group timer of tracker arg. Each local member with a timeout
     * assigns it again: never reassign a pending event. */
    grptimer_drop(arg, 1);
    t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->ev = ev;
    t->trk = arg;
    pthread_mutex_lock(&grptimers_mu);
    t->next = grptimers;
    grptimers = t;
    pthread_mutex_unlock(&grptimers_mu);
    return __real_event_assign(ev, base, fd, events, grptimer_fired, arg);
}

/* prun_group_upcall: the library handed tracker trk to the host. */
void prun_group_upcall(void *trk, void *cb)
{
    __atomic_store_n(&upcall_completion, cb, __ATOMIC_RELAXED);
    grptimer_drop(trk, 1);
}

/* The gone ranks, by namespace (dropped with it). Written by Go's threads,
 * read on the progress thread: a lock. */
struct gone {
    struct gone *next;
    pmix_proc_t p;
};
static struct gone *gone_list;
static int group_ops; /* a construct or destruct reached this server */

static void prun_group_ops_seen(void) { __atomic_store_n(&group_ops, 1, __ATOMIC_RELEASE); }
static pthread_mutex_t gone_mu = PTHREAD_MUTEX_INITIALIZER;

static int is_gone(const pmix_proc_t *member)
{
    int found = 0;
    pthread_mutex_lock(&gone_mu);
    for (struct gone *g = gone_list; g && !found; g = g->next)
        found = PMIX_CHECK_PROCID(member, &g->p); /* a wildcard member: any rank of its job */
    pthread_mutex_unlock(&gone_mu);
    return found;
}

/* prun_group_sweep runs on the library's progress thread. */
static void prun_group_sweep(void)
{
    pmix_server_trkr_t *trk, *next;
    prun_group_done_fn done;

    if (__atomic_load_n(&gone_list, __ATOMIC_RELAXED) == NULL)
        return;
    done = prun_group_completion();
    if (!done)
        return;
    PMIX_LIST_FOREACH_SAFE (trk, next, &pmix_server_globals.collectives, pmix_server_trkr_t) {
        if ((trk->type != PMIX_GROUP_CONSTRUCT_CMD && trk->type != PMIX_GROUP_DESTRUCT_CMD) || trk->host_called)
            continue;
        for (size_t n = 0; n < trk->npcs; n++) {
            if (is_gone(&trk->pcs[n])) {
                /* Ours now: neither the library nor a later sweep may hand
                 * it on before the completion (thread-shifted) drops it. */
                trk->host_called = true;
                prun_group_timer_cancel(trk);
                prun_group_keep_record(trk);
                done(PMIX_GROUP_CONSTRUCT_ABORT, NULL, 0, trk, NULL, NULL);
                break;
            }
        }
    }
}

/* prun_group_keep_record: a destruct that fails leaves the node's record of
 * the group (its members) in place; the library's completion drops it
 * whatever the status, and a member that called later got NOT-FOUND. */
void prun_group_keep_record(void *trk)
{
    pmix_server_trkr_t *t = trk;
    if (t && t->type == PMIX_GROUP_DESTRUCT_CMD)
        t->cbdata = NULL;
}

/* prun_group_tracker_nlocal is the tracker's count of local participants,
 * or UINT32_MAX when it cannot be read. */
uint32_t prun_group_tracker_nlocal(void *trk)
{
    return ((pmix_server_trkr_t *)trk)->nlocal;
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    prun_group_sweep();
}

void prun_group_member_gone(const char *ns, uint32_t rank)
{
    struct gone *g = calloc(1, sizeof *g);
    struct timeval now = {0, 0};
    if (!g)
        return;
    PMIX_LOAD_PROCID(&g->p, ns, rank);
    pthread_mutex_lock(&gone_mu);
    g->next = gone_list;
    __atomic_store_n(&gone_list, g, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&gone_mu);
    /* Only a server that took in a group operation can hold a tracker:
     * the others (nearly every job's) are not woken for nothing (a sweep
     * per rank's end cost a short job 2.5 ms, most of it in finalize). */
    if (__atomic_load_n(&group_ops, __ATOMIC_ACQUIRE) && pmix_globals.evbase)
        event_base_once(pmix_globals.evbase, -1, EV_TIMEOUT, sweep_cb, NULL, &now);
}

void prun_group_forget_nspace(const char *ns)
{
    pthread_mutex_lock(&gone_mu);
    for (struct gone **g = &gone_list; *g;) {
        if (PMIX_CHECK_NSPACE((*g)->p.nspace, ns)) {
            struct gone *x = *g;
            *g = x->next;
            free(x);
        } else {
            g = &(*g)->next;
        }
    }
    pthread_mutex_unlock(&gone_mu);
}
