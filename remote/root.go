package remote

import (
	"fmt"
	"prun/remote/wire"
	"slices"
	"strings"
	"sync"

	"prun/pmixsrv"
)

// Root is the launcher's vertex (0) of the collectives: the root of their
// combination along the tree, where each completes (Finish) and where their
// failures are decided. Without remote nodes it is the only vertex.
type Root struct {
	cs *wire.Collectives
	// Finish completes a collective from every contribution (combined in
	// vertex order); nil: the result is that combination (an allgather).
	// It runs once per collective, on whichever goroutine brought its last
	// contribution.
	Finish func(kind string, procs []pmixsrv.Proc, all []byte) ([]byte, error)

	// TimedOut, if set, is told of each construct that timed out, with the
	// words that name the nodes whose members did not come.
	TimedOut func(error)

	mu    sync.Mutex
	verts map[string]int         // remote hosts' vertices (attach)
	down  func(typ uint8, m any) // a broadcast to every daemon (attach)
}

// NewRoot returns the root of a launch (or of a persistent runtime, whose
// jobs share it).
func NewRoot() *Root {
	r := &Root{verts: map[string]int{}}
	r.cs = wire.NewCollectives(0, 1, nil)
	r.cs.Expire = func(key string, c *wire.Coll, missing []int) { r.timedOut(key, c.Kind, c.Gen, missing) }
	r.cs.Finish = func(c *wire.Coll, all []byte) ([]byte, error) {
		if r.Finish == nil {
			return all, nil
		}
		return r.Finish(c.Kind, c.Procs, all)
	}
	return r
}

// attach makes the root the top of a tree of daemons on hosts (vertex i+1
// for hosts[i]), with fanout children a vertex; down broadcasts to them.
func (r *Root) attach(hosts []string, fanout int, down func(typ uint8, m any)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, h := range hosts {
		r.verts[h] = i + 1
	}
	r.down = down
	r.cs.Mu.Lock()
	r.cs.Fanout = fanout
	r.cs.Mu.Unlock()
}

// Contribute is the launcher's own node's contribution to a collective
// among procs, whose nodes are named: every other participating node's
// comes up the tree.
func (r *Root) Contribute(kind string, procs []pmixsrv.Proc, nodes []string, data []byte, done func([]byte, error)) {
	r.mu.Lock()
	verts := make([]int, 0, len(nodes))
	for _, n := range nodes {
		verts = append(verts, r.verts[n]) // 0: the launcher's node
	}
	r.mu.Unlock()
	slices.Sort(verts)
	verts = slices.Compact(verts)
	r.cs.Contribute(0, wire.CollKey(kind, procs), kind, procs, verts, data, done)
}

// FailProc fails, everywhere, the collectives that fail on a
// participant's death (group constructs) in which p takes part, and later
// ones, with err.
func (r *Root) FailProc(p pmixsrv.Proc, err error) {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down != nil {
		down(wire.TCollFail, &wire.CollFail{Procs: []pmixsrv.Proc{p}, Status: wire.StatusOf(err)})
	}
	r.cs.FailProc(p, err)
}

// timedOut decides that collective key (a group construct or destruct), of failure
// generation gen at the vertex that reported it, timed out waiting for the
// contributors missing (vertices): it fails everywhere, for the members
// that came, with PMIX_ERR_TIMEOUT, and every vertex forgets it, so a later
// construct of the same group and members starts afresh. A report of a
// generation already failed is stale: the collective it timed is over.
func (r *Root) timedOut(key, kind string, gen uint64, missing []int) {
	r.mu.Lock()
	names := make([]string, 0, len(missing))
	for _, v := range missing {
		name := "the launcher's node"
		for h, w := range r.verts {
			if w == v {
				name = h
			}
		}
		names = append(names, name)
	}
	down := r.down
	r.mu.Unlock()
	op, group := wire.GroupOp(kind)
	where := strings.Join(names, ", ")
	if len(names) > 1 {
		where = "one or more of " + where
	}
	err := wire.NewStatusError(fmt.Sprintf("group %s: %s timed out (PMIX_TIMEOUT) waiting for members on %s", group, op, where),
		pmixsrv.ErrTimeout)
	if !r.cs.TimedOut(key, gen+1, err) {
		return
	}
	if r.TimedOut != nil {
		r.TimedOut(err)
	}
	if down != nil {
		down(wire.TCollFail, &wire.CollFail{Coll: key, Gen: gen + 1, Status: wire.StatusOf(err)})
	}
}

// Ended tells the root that rank p ended (however: a normal end too). The
// launcher hears of every end, as every vertex on its way does: the group
// operations naming p that wait here fail, and later ones (see rankSet).
func (r *Root) Ended(p pmixsrv.Proc) { r.cs.ProcEnded(p) }

// Forget drops what the root keeps of a namespace that is over.
func (r *Root) Forget(nspace string) { r.cs.Forget(nspace) }
