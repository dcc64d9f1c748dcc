/* What libpmix 4.2 leaks in a long-lived server, released by the host.
 *
 * 1. The connections of departed clients, which libpmix 4.2 keeps.
 *
 * libpmix 4.2's server makes a pmix_peer_t for every connection of a client
 * (ptl_base_connection_hdlr.c: PMIX_NEW, then pmix_pointer_array_add to
 * pmix_server_globals.clients, which holds that first reference) and never
 * takes it out of that array before PMIx_server_finalize: not when the
 * client's connection closes (ptl_base_sendrecv.c, lost_connection: events
 * deleted, socket closed, the peer left in place), not in
 * PMIx_server_deregister_client (_deregister_client closes the socket and
 * drops the rank's record only), not in PMIx_server_deregister_nspace
 * (_deregister_nspace releases the list's reference to the namespace; each
 * of its peers keeps one). Each peer (1,488 bytes) holds its rank's record
 * (pmix_rank_info_t, 184) and the namespace (pmix_namespace_t, 1,808, and
 * its packed job info, jobbkt: about 3 KB for a small job), so every job of
 * PMIx clients that a long-lived server (a DVM) ran stayed in its heap:
 * about 3 KB per rank and 5 KB per job. (OpenPMIx 6.0 and 5.0.10 release the
 * peers at deregistration, openpmix 6be456b6b; no 4.2 release does.)
 *
 * The host can hand back that reference once nothing in the library can
 * reach the peer through the array any more, which holds for a peer
 *  - whose connection is gone: socket closed and neither of its events
 *    pending (lost_connection's state; a peer that _deregister_client closed
 *    without deleting its events is left alone), and
 *  - whose namespace is no longer the library's (not in pmix_globals.nspaces):
 *    no rank record names its index (info->peerid) for a later lookup.
 * Every other holder of the peer took a reference of its own (server
 * caddies, event and IOF registrations, queued sends, collective trackers:
 * PMIX_RETAIN), so releasing the array's leaves them a valid object; the
 * slot is emptied first, so it can be reused. This runs on the library's
 * progress thread (the completion of a namespace's deregistration, called
 * from _deregister_nspace), where the library itself touches these
 * structures; it is compiled against the private headers of the library it
 * is linked with, the pinned 4.2.2 (pin.h refuses any other), whose
 * lifecycle this follows. */

#include "pin.h" /* first: the private headers below are 4.2.2's */

#include <pthread.h>
#include <stdlib.h>
#include <event2/event.h>
#include <pmix_version.h>

#include "shim.h"

#include "src/include/pmix_globals.h"
#include "src/mca/bfrops/base/base.h"
#include "src/event/pmix_event.h"
#include "src/mca/gds/base/base.h"
#include "src/server/pmix_server_ops.h"
#include "src/util/pmix_hash.h"

static int nspace_listed(pmix_namespace_t *nptr)
{
    pmix_namespace_t *ns;
    PMIX_LIST_FOREACH (ns, &pmix_globals.nspaces, pmix_namespace_t) {
        if (ns == nptr) {
            return 1;
        }
    }
    return 0;
}

size_t prun_release_departed(void)
{
    size_t n = 0;
    for (int i = 0; i < pmix_server_globals.clients.size; i++) {
        pmix_peer_t *peer = (pmix_peer_t *)pmix_pointer_array_get_item(&pmix_server_globals.clients, i);
        /* A connection's peer has its rank's record (info) and its own
         * index; the peers PMIx_Data_pack caches there for a namespace's
         * buffer format have neither, and are handed out without a
         * reference: never touched. */
        if (peer == NULL || peer->index != i || peer->info == NULL || peer->sd >= 0 ||
            peer->recv_ev_active || peer->send_ev_active || peer->nptr == NULL ||
            nspace_listed(peer->nptr)) {
            continue;
        }
        pmix_pointer_array_set_item(&pmix_server_globals.clients, i, NULL);
        PMIX_RELEASE(peer);
        n++;
    }
    return n;
}

/* 2. libpmix 4.2.0-4.2.2: 32 bytes lost by every keyed fetch from the
 * server's hash store.
 *
 * pmix_hash_fetch (src/util/pmix_hash.c), asked for one key, copies the
 * value it found into a new pmix_kval_t: PMIX_KVAL_NEW mallocs the kval's
 * value (sizeof(pmix_value_t), 32 bytes), and PMIX_BFROPS_COPY then
 * replaces that pointer with a copy of its own, so the first block is
 * never referenced again (fixed in 4.2.3, openpmix dd8ef2ebf). The server
 * fetches so for every client's PMIx_Get it answers from its store (a peer's
 * modex data, with the hash store prun selects): 32 bytes for each rank's
 * Get of each other's key (an Open MPI hello of 2 ranks: 2 a job), for the
 * runtime's life. Nothing can free
 * the block after the fact; the link routes pmix_hash_fetch and
 * pmix_bfrops_base_copy through here (-Wl,--wrap), and a copy of a
 * PMIX_VALUE that a keyed fetch makes directly frees the value its
 * destination still points to first: in 4.2.0-4.2.2 that call is
 * pmix_hash_fetch's only copy on the keyed path (lookup_proc and
 * lookup_keyval copy nothing), and its destination is always that fresh
 * block. Copies nested inside it (a value's own parts) are left alone. */

pmix_status_t __real_pmix_hash_fetch(pmix_hash_table_t *table, pmix_rank_t rank, const char *key,
                                     pmix_info_t *qualifiers, size_t nquals, pmix_list_t *kvals);
pmix_status_t __real_pmix_bfrops_base_copy(pmix_pointer_array_t *regtypes, void **dest, void *src,
                                           pmix_data_type_t type);

static __thread int in_keyed_fetch;

pmix_status_t __wrap_pmix_hash_fetch(pmix_hash_table_t *table, pmix_rank_t rank, const char *key,
                                     pmix_info_t *qualifiers, size_t nquals, pmix_list_t *kvals)
{
    pmix_status_t rc;
    in_keyed_fetch = key != NULL;
    rc = __real_pmix_hash_fetch(table, rank, key, qualifiers, nquals, kvals);
    in_keyed_fetch = 0;
    return rc;
}

pmix_status_t __wrap_pmix_bfrops_base_copy(pmix_pointer_array_t *regtypes, void **dest, void *src,
                                           pmix_data_type_t type)
{
    pmix_status_t rc;
    int keyed = in_keyed_fetch;
    if (keyed && type == PMIX_VALUE && dest != NULL && *dest != NULL) {
        free(*dest);
        *dest = NULL;
    }
    in_keyed_fetch = 0;
    rc = __real_pmix_bfrops_base_copy(regtypes, dest, src, type);
    in_keyed_fetch = keyed;
    return rc;
}

/* 3. libpmix 4.2 (and every release so far; OpenPMIx's master frees it
 * since e86932a19): the key of every PMIx_Get a client sends the server.
 *
 * pmix_server_get (src/server/pmix_server_get.c) unpacks the request's
 * namespace (freed at once), rank, directives and key; the key, a string
 * unpacked into a new allocation, is then only read (a fetch's cb.key, a
 * PMIX_REQUIRED_KEY directive that copies it, get_job_data) and never
 * freed, save on the path of a PMIX_GET_REFRESH_CACHE directive: every Get
 * the server handled kept its key (an Open MPI job's modex keys, a
 * "fence.blob"), 32 bytes of heap or more each. The link routes
 * pmix_server_get and pmix_bfrops_base_unpack through here: the second
 * string the request's own unpacking produces (at the top level: strings
 * inside the directives are unpacked below it) is the key, freed once
 * pmix_server_get has returned, as nothing the call left behind refers to
 * it. A request with a PMIX_GET_REFRESH_CACHE directive is left to the
 * library, which may free its key itself. */

pmix_status_t __real_pmix_server_get(pmix_buffer_t *buf, pmix_modex_cbfunc_t cbfunc, void *cbdata);
pmix_status_t __real_pmix_bfrops_base_unpack(pmix_pointer_array_t *regtypes, pmix_buffer_t *buffer, void *dst,
                                             int32_t *num_vals, pmix_data_type_t type);

/* The server-side get being unpacked on this thread (the library's). */
static __thread struct {
    pmix_server_caddy_t *cd; /* NULL: none */
    int depth;               /* nested unpacks */
    int strings;             /* top-level strings unpacked */
    char *key;
} sget;


pmix_status_t __wrap_pmix_server_get(pmix_buffer_t *buf, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    pmix_status_t rc;
    char *key;
    sget.cd = (pmix_server_caddy_t *)cbdata;
    sget.depth = sget.strings = 0;
    sget.key = NULL;
    rc = __real_pmix_server_get(buf, cbfunc, cbdata);
    key = sget.key;
    sget.cd = NULL;
    sget.key = NULL;
    free(key);
    return rc;
}

static int refreshes_cache(const pmix_server_caddy_t *cd)
{
    for (size_t n = 0; cd->info != NULL && n < cd->ninfo; n++) {
        if (PMIX_CHECK_KEY(&cd->info[n], PMIX_GET_REFRESH_CACHE)) {
            return 1;
        }
    }
    return 0;
}

pmix_status_t __wrap_pmix_bfrops_base_unpack(pmix_pointer_array_t *regtypes, pmix_buffer_t *buffer, void *dst,
                                             int32_t *num_vals, pmix_data_type_t type)
{
    pmix_status_t rc;
    if (sget.cd == NULL) {
        return __real_pmix_bfrops_base_unpack(regtypes, buffer, dst, num_vals, type);
    }
    sget.depth++;
    rc = __real_pmix_bfrops_base_unpack(regtypes, buffer, dst, num_vals, type);
    sget.depth--;
    /* Counted whether or not it succeeded: the second attempt is the key's,
     * and nothing unpacked later (in an upcall made from this thread) is. */
    if (sget.depth == 0 && type == PMIX_STRING && ++sget.strings == 2 && rc == PMIX_SUCCESS &&
        num_vals != NULL && *num_vals == 1 && !refreshes_cache(sget.cd)) {
        sget.key = *(char **)dst;
    }
    return rc;
}

/* 4. libpmix 4.2 (and every release so far): what it made for a tool's
 * connection (pps, pquery, a debugger), kept after the tool is gone.
 *
 * A tool that attaches to a server that has not registered it (it asks
 * for an identity, or brings one of its own) gets a namespace of its own:
 * process_tool_request (ptl_base_connection_hdlr.c) makes a
 * pmix_namespace_t, and process_cbfunc lists it in pmix_globals.nspaces,
 * stores the tool's version through PMIX_GDS_CACHE_JOB_INFO (the hash
 * store's job tracker for the namespace: three hash tables of about 17 KB
 * each), and adds the tool's peer (1,488 bytes, with its rank record and an
 * IOF request) to pmix_server_globals.clients. When the tool's connection
 * closes, lost_connection (ptl_base_sendrecv.c) purges the peer's event and
 * IOF registrations, reports PMIX_ERR_LOST_CONNECTION, and keeps the rest:
 * about 60 KB an attach for the server's life (a DVM that a script watched
 * with `pps` every second grew by 5 GB a day). OpenPMIx's master frees a
 * finalized tool's peer since e534315b6 (in no release yet, 6.1.0 included);
 * the tool's namespace and its job tracker stay listed there too.
 *
 * The host deregisters such a namespace once its tool is gone: the link
 * routes lost_connection's call of pmix_server_purge_events through here
 * (-Wl,--wrap; pmix_server.c's own calls are not routed), and after the
 * purge, on the library's progress thread, the namespace is dropped as
 * _deregister_nspace (pmix_server.c) drops one: the hash store's data
 * (PMIX_GDS_DEL_NSPACE), registrations and cached events naming it, its
 * epilog, then out of the list (pnet and pmdl hold nothing for a namespace
 * the host never registered). It is done in place, not through
 * PMIx_server_deregister_nspace: that takes the library's global lock, which
 * PMIx_server_finalize holds while it waits for this thread. The peer
 * keeps its reference to the namespace, so lost_connection goes on with
 * both intact; the peer is released (section 1) from an event queued on
 * the same thread, after lost_connection returned. Only a namespace that
 * provably belongs to that connection alone is dropped:
 *  - the peer is a tool, not a client, its socket closed and neither of
 *    its events pending (lost_connection's state; a tool's finalize purges
 *    with its socket still open);
 *  - its namespace is listed, under a name no other listed namespace has
 *    (a tool may claim a running job's namespace as its identity: the
 *    library then lists a second one of that name, and the hash store's
 *    data is found by name), and no other connection uses it;
 *  - the name is not one this host registered (prun_nspace_registered): a
 *    tool that a job started, with the job's identity in its environment,
 *    connects as the library's PMIX_TOOL_CLIENT and shares the job's
 *    namespace, the host's to deregister. A registration names itself here
 *    before the library's thread takes it in (_register_nspace reuses a
 *    listed namespace of its name), and a drop runs on that thread: a job is
 *    never joined to a departing tool's namespace that is then dropped. */

struct regname {
    struct regname *next;
    char ns[PMIX_MAX_NSLEN + 1];
};
static struct regname *registered;
static int registered_lost; /* a name could not be kept: every name counts as the host's */
static pthread_mutex_t registered_mu = PTHREAD_MUTEX_INITIALIZER;

void prun_nspace_registered(const char *ns)
{
    struct regname *r = calloc(1, sizeof *r);
    pthread_mutex_lock(&registered_mu);
    if (r == NULL) {
        registered_lost = 1;
    } else {
        PMIX_LOAD_NSPACE(r->ns, ns);
        r->next = registered;
        registered = r;
    }
    pthread_mutex_unlock(&registered_mu);
}

void prun_nspace_forgotten(const char *ns)
{
    pthread_mutex_lock(&registered_mu);
    for (struct regname **p = &registered; *p != NULL; p = &(*p)->next) {
        if (PMIX_CHECK_NSPACE((*p)->ns, ns)) {
            struct regname *r = *p;
            *p = r->next;
            free(r);
            break;
        }
    }
    pthread_mutex_unlock(&registered_mu);
}

void __real_pmix_server_purge_events(pmix_peer_t *peer, pmix_proc_t *proc);

static int host_registered(const char *ns)
{
    int found;
    pthread_mutex_lock(&registered_mu);
    found = registered_lost;
    for (struct regname *r = registered; r != NULL && !found; r = r->next) {
        found = PMIX_CHECK_NSPACE(r->ns, ns);
    }
    pthread_mutex_unlock(&registered_mu);
    return found;
}

/* A namespace the library no longer lists. */
static int unlisted(const char *nspace)
{
    pmix_namespace_t *ns;
    PMIX_LIST_FOREACH (ns, &pmix_globals.nspaces, pmix_namespace_t) {
        if (ns->nspace != NULL && PMIX_CHECK_NSPACE(ns->nspace, nspace)) {
            return 0;
        }
    }
    return 1;
}

/* The lost-connection event that lost_connection reported for departed
 * tools, dropped while it waits in the library's caching window, when no
 * one can ever receive it. PMIX_REPORT_EVENT (event/pmix_event.h) keeps one
 * chain per status for pmix_event_caching_window (1 s), adding each later
 * source to it and starting the window again; once the window passes, the
 * event goes to the server's clients and into the notification cache (120
 * s). A script that attaches a tool more often than once a second so kept
 * one chain growing for ever (about 550 bytes a departure, the whole array
 * copied at each). The event's range is PMIX_RANGE_PROC_LOCAL: only its
 * source can receive it, or a handler of this process's for that code, and
 * prun registers none (the library's own handles another code). So a chain whose sources (the first, and each PMIX_PROCID added)
 * are all of namespaces the library no longer lists (the tools' dropped
 * above) reaches nobody: its timer is stopped and it is released as its
 * processing would (final_cbfunc). Any other chain, a client's abnormal end
 * among them, is left to the library. */
static int handles(pmix_list_t *handlers, pmix_status_t code)
{
    pmix_event_hdlr_t *h;
    PMIX_LIST_FOREACH (h, handlers, pmix_event_hdlr_t) {
        for (size_t n = 0; n < h->ncodes; n++) {
            if (h->codes == NULL || h->codes[n] == code) {
                return 1;
            }
        }
    }
    return 0;
}

static void drop_unreachable_lost_connection(void)
{
    pmix_event_chain_t *ch, *next;
    /* This process's handlers: the library's own DEBUGGER-AGGREGATOR
     * (PMIX_DEBUG_WAITING_FOR_NOTIFY) alone, unless a handler was added. */
    if (pmix_globals.events.first != NULL || pmix_globals.events.last != NULL ||
        pmix_list_get_size(&pmix_globals.events.default_events) != 0 ||
        handles(&pmix_globals.events.single_events, PMIX_ERR_LOST_CONNECTION) ||
        handles(&pmix_globals.events.multi_events, PMIX_ERR_LOST_CONNECTION)) {
        return;
    }
    PMIX_LIST_FOREACH_SAFE (ch, next, &pmix_globals.cached_events, pmix_event_chain_t) {
        int reachable = ch->status != PMIX_ERR_LOST_CONNECTION || ch->range != PMIX_RANGE_PROC_LOCAL ||
                        ch->final_cbfunc == NULL || !unlisted(ch->source.nspace);
        for (size_t n = 0; !reachable && n < ch->ninfo; n++) {
            reachable = !PMIX_CHECK_KEY(&ch->info[n], PMIX_PROCID) || ch->info[n].value.type != PMIX_PROC ||
                        ch->info[n].value.data.proc == NULL || !unlisted(ch->info[n].value.data.proc->nspace);
        }
        if (reachable) {
            continue;
        }
        if (ch->timer_active) {
            pmix_event_del(&ch->ev);
            ch->timer_active = false;
        }
        pmix_list_remove_item(&pmix_globals.cached_events, &ch->super);
        ch->final_cbfunc(PMIX_SUCCESS, ch->final_cbdata);
    }
}

/* After lost_connection returned: the departed tool's peer is released,
 * with its event if no one can receive it. */
static void release_departed_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    drop_unreachable_lost_connection();
    prun_release_departed();
}

/* The namespace is the tool's alone. Runs on the library's progress thread. */
static int own_namespace(pmix_peer_t *peer)
{
    pmix_namespace_t *ns;
    int listed = 0;
    PMIX_LIST_FOREACH (ns, &pmix_globals.nspaces, pmix_namespace_t) {
        if (ns == peer->nptr) {
            listed = 1;
        } else if (ns->nspace != NULL && PMIX_CHECK_NSPACE(ns->nspace, peer->nptr->nspace)) {
            return 0;
        }
    }
    if (!listed) {
        return 0;
    }
    for (int i = 0; i < pmix_server_globals.clients.size; i++) {
        pmix_peer_t *p = (pmix_peer_t *)pmix_pointer_array_get_item(&pmix_server_globals.clients, i);
        if (p != NULL && p != peer && p->nptr == peer->nptr) {
            return 0;
        }
    }
    return !host_registered(peer->nptr->nspace);
}

static void tool_departed(pmix_peer_t *peer)
{
    pmix_namespace_t *nptr = peer->nptr;
    pmix_proc_t proc;
    pmix_status_t rc;
    struct timeval now = {0, 0};

    if (!PMIX_PEER_IS_TOOL(peer) || PMIX_PEER_IS_CLIENT(peer) || peer->sd >= 0 || peer->recv_ev_active ||
        peer->send_ev_active || peer->info == NULL || nptr == NULL || nptr->nspace == NULL || peer->index < 0 ||
        pmix_pointer_array_get_item(&pmix_server_globals.clients, peer->index) != peer ||
        pmix_globals.mypeer->finalized || !own_namespace(peer)) {
        return;
    }
    PMIX_LOAD_PROCID(&proc, nptr->nspace, PMIX_RANK_WILDCARD);
    PMIX_GDS_DEL_NSPACE(rc, proc.nspace);
    (void)rc;
    __real_pmix_server_purge_events(NULL, &proc);
    pmix_execute_epilog(&nptr->epilog);
    pmix_list_remove_item(&pmix_globals.nspaces, &nptr->super);
    PMIX_RELEASE(nptr); /* the list's reference: the peer holds its own */
    event_base_once(pmix_globals.evbase, -1, EV_TIMEOUT, release_departed_cb, NULL, &now);
}

void __wrap_pmix_server_purge_events(pmix_peer_t *peer, pmix_proc_t *proc)
{
    __real_pmix_server_purge_events(peer, proc);
    if (peer != NULL && proc == NULL) {
        tool_departed(peer);
    }
}
