/* Releasing the connections of departed clients, which libpmix 4.2 keeps.
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
 * about 3 KB per rank and 5 KB per job. (OpenPMIx's master releases the peer
 * on deregistration; 4.2.x and 5.0 do not.)
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

#if PMIX_VERSION_MAJOR == 4 && PMIX_VERSION_MINOR == 2

#include "src/include/pmix_globals.h"
#include "src/server/pmix_server_ops.h"

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
