package daemon

import (
	"fmt"

	"prun/internal/peercred"
)

// refused reports a connection to one of the node's local services (the
// PMIx server, a job's PMI port) refused because its peer is neither the
// jobs' user nor root. One line for the first refusal of each uid, none
// for the later ones: another user may try again and again, and the
// owner's output is not theirs to flood; what the owner must know is that
// someone tried, and who.
func (d *Daemon) refused(service string, p peercred.Peer, why string) {
	d.mu.Lock()
	if d.refusedUIDs == nil {
		d.refusedUIDs = map[int]bool{}
	}
	seen := d.refusedUIDs[p.UID]
	d.refusedUIDs[p.UID] = true
	d.mu.Unlock()
	if seen {
		return
	}
	d.up.Event(Event{Kind: Refused, Node: d.cfg.Name,
		Msg: fmt.Sprintf("refused a %s connection from %s: %s (later ones from the same user are not shown)", service, p, why)})
}
