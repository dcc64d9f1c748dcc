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
 * structures; it is compiled against libpmix's own devel headers, so the
 * layouts are the linked library's, and only for the 4.2 series, whose
 * lifecycle this follows (other versions: nothing is released here). */

#include <pmix_version.h>

#include "shim.h"

#include "src/include/pmix_globals.h"
#include "src/mca/bfrops/base/base.h"
#include "src/server/pmix_server_ops.h"
#include "src/util/pmix_hash.h"

#if PMIX_VERSION_MAJOR == 4 && PMIX_VERSION_MINOR == 2

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

#else

size_t prun_release_departed(void) { return 0; }

#endif

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

#if PMIX_NUMERIC_VERSION >= 0x00040200 && PMIX_NUMERIC_VERSION < 0x00040203
#define PRUN_FIX_HASH_FETCH 1
#endif

static __thread int in_keyed_fetch;

pmix_status_t __wrap_pmix_hash_fetch(pmix_hash_table_t *table, pmix_rank_t rank, const char *key,
                                     pmix_info_t *qualifiers, size_t nquals, pmix_list_t *kvals)
{
    pmix_status_t rc;
#ifdef PRUN_FIX_HASH_FETCH
    in_keyed_fetch = key != NULL;
#endif
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

#if PMIX_VERSION_MAJOR == 4 && PMIX_VERSION_MINOR == 2
#define PRUN_FIX_SERVER_GET_KEY 1
#endif

pmix_status_t __wrap_pmix_server_get(pmix_buffer_t *buf, pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
    pmix_status_t rc;
    char *key;
#ifdef PRUN_FIX_SERVER_GET_KEY
    sget.cd = (pmix_server_caddy_t *)cbdata;
#endif
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
