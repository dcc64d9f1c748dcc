/* Group members that are gone (libpmix 4.2.2).
 *
 * The library holds a construct or destruct on a node until every local
 * member called it, and only then hands it to the host. When a local member
 * ends first, its lost connection is taken out of fences and connects, not
 * out of group trackers: the members that did call wait for ever, and the
 * host never hears of the operation. So the daemon tells this file of every
 * local rank that ended for good (prun_group_member_gone); on the library's
 * progress thread, and again after each construct or destruct the library
 * takes in (a tracker may be made after the member ended), every group
 * tracker that waits for a gone member and never reached the host is
 * completed with PMIX_GROUP_CONSTRUCT_ABORT through the library's own
 * completion, which answers each local caller and drops the tracker (as a
 * timeout does: see shim.c). Operations that reached the host fail there:
 * the launcher fails a collective whose member died (remote.Root.FailProc).
 *
 * The trackers are the library's private structures: their layout comes
 * from the private headers of the pinned 4.2.2 the build installs beside it
 * (pin.h refuses any other library).
 */
#include "pin.h"
#include "src/include/pmix_config.h"
#include "src/include/pmix_globals.h"
#include "src/server/pmix_server_ops.h"
#include <event2/event.h>
#include <pthread.h>
#include <pmix_version.h>
#include "shim.h"

/* The gone ranks, by namespace (dropped with it). Written by Go's threads,
 * read on the progress thread: a lock. */
struct gone {
    struct gone *next;
    pmix_proc_t p;
};
static struct gone *gone_list;
static int group_ops; /* a construct or destruct reached this server */

void prun_group_ops_seen(void) { __atomic_store_n(&group_ops, 1, __ATOMIC_RELEASE); }
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
void prun_group_sweep(void)
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
