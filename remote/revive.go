package remote

import (
	"errors"
	"fmt"
	"prun/remote/wire"
	"slices"
	"strings"
	"time"

	"prun/ctl"
)

// A persistent runtime brings a lost node back (`prun dvm add`) in its
// place in the tree: the same vertex, host list, secret and fanout, so that
// routes, collectives and the nodes' view of one another are as they were.
// The lost vertex's parent starts its daemon again (the launcher's spawner,
// or a daemon's on tRespawn), and the new daemon starts its own children as
// at the start: the nodes cut off with it come back with it. Until each
// says hello the vertex stays down; what the lost daemon's session and link
// report late is stale (spawner.gen). Once back, every vertex forgets the
// loss in its collectives (tCollRevive); those that failed again are lost
// again, everywhere (tCollFail).

// revival is one Revive's wait: the vertices started again, until each
// said hello or failed.
type revival struct {
	left map[int]bool
	errs []error
	done chan struct{}
}

// back and failed record a vertex's end of the wait (t.mu held).
func (r *revival) back(v int) { r.end(v) }

func (r *revival) failed(v int, err error) {
	r.errs = append(r.errs, err)
	r.end(v)
}

func (r *revival) end(v int) {
	if r.left[v] {
		delete(r.left, v)
		if len(r.left) == 0 {
			close(r.done)
		}
	}
}

// reviveWait bounds Revive's wait past what the spawners themselves allow a
// daemon to connect back (ConnectTimeout + 10 s from its session's start),
// for a vertex deep below slow ones.
const reviveWait = 2 * time.Minute

// Revive starts the daemon of the lost host again, with the daemons of the
// hosts cut off with it, and returns once each said hello or failed: the
// hosts back, and why others are not (nil: all are). A host below a lost one
// comes back with the topmost lost vertex above it.
func (t *Tree) Revive(host string) (back []string, err error) {
	if t.cfg.Agent == wire.AgentSlurm {
		return nil, errors.New("the daemons are one Slurm step: a node that left it comes back only with a new DVM (prun dvm stop, then start)")
	}
	fanout, n := t.cfg.Fanout, len(t.cfg.Hosts)
	t.mu.Lock()
	v := t.vertex[host]
	switch {
	case v == 0:
		t.mu.Unlock()
		return nil, fmt.Errorf("%s is not one of the DVM's nodes", host)
	case t.closing:
		t.mu.Unlock()
		return nil, errors.New("the DVM is stopping")
	case t.revival[v] != nil:
		t.mu.Unlock()
		return nil, fmt.Errorf("%s is being started again already", host)
	case !t.down[v]:
		t.mu.Unlock()
		return nil, fmt.Errorf("%s is not lost", host)
	}
	u := v
	for p := ctl.Parent(u, fanout); p != 0 && t.down[p]; p = ctl.Parent(u, fanout) {
		u = p
	}
	r := &revival{left: map[int]bool{}, done: make(chan struct{})}
	var verts []int
	for _, w := range ctl.Subtree(u, fanout, n) {
		if !t.down[w] || t.revival[w] != nil {
			// Below a lost vertex every one is lost (nodeFailed), and no
			// revival is under way there (checked above for v's topmost).
			t.mu.Unlock()
			return nil, fmt.Errorf("%s: the launch tree below %s is not all lost", host, t.cfg.Hosts[u-1])
		}
		verts = append(verts, w)
	}
	for _, w := range verts {
		r.left[w] = true
		t.revival[w] = r
		delete(t.hellos, w)
		t.preload[w-1] = wire.NewWindow(wire.PreloadWindow)
		for k := range t.stdin {
			if k.v == w {
				delete(t.stdin, k) // killed with the loss
			}
		}
	}
	t.mu.Unlock()
	if p := ctl.Parent(u, fanout); p == 0 {
		t.kids.Relaunch(u)
	} else if body, err := wire.Encode(&wire.Respawn{Vertex: u}); err != nil || t.kids.Send(p, wire.TRespawn, wire.Frame(uint32(p), wire.ToLauncher, body)) != nil {
		t.nodeFailed(t.cfg.Hosts[u-1], fmt.Errorf("cannot ask %s's daemon to start it again", t.cfg.Hosts[p-1]))
	}
	select {
	case <-r.done:
	case <-time.After(reviveWait):
	}
	t.mu.Lock()
	var lost []int
	for _, w := range verts {
		if t.down[w] {
			lost = append(lost, w)
			if t.revival[w] == r { // still waiting: given up, as lost as before
				delete(t.revival, w)
				r.errs = append(r.errs, fmt.Errorf("%s: no hello within %v", t.cfg.Hosts[w-1], reviveWait))
			}
		} else {
			back = append(back, t.cfg.Hosts[w-1])
		}
	}
	errs := slices.Clone(r.errs)
	var down []int // every vertex lost still, this revival's and others'
	for w := range t.down {
		down = append(down, w)
	}
	t.mu.Unlock()
	if len(back) > 0 && len(down) > 0 {
		// The daemons back, new to the collectives, learn which nodes are
		// lost still (the others know: it changes nothing for them).
		t.failCollectives(down, errors.New("lost still"))
	}
	if backVerts := vertsOf(verts, lost); len(backVerts) > 0 {
		if body, err := wire.Encode(&wire.CollRevive{Verts: wire.PackVerts(backVerts)}); err == nil {
			t.kids.Broadcast(wire.TCollRevive, wire.Frame(wire.ToBroadcast, wire.ToLauncher, body))
		}
		t.root.cs.Revive(backVerts)
	}
	if len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return back, errors.New(strings.Join(msgs, "; "))
	}
	if len(lost) > 0 {
		return back, fmt.Errorf("%d node%s did not come back", len(lost), map[bool]string{true: "s"}[len(lost) > 1])
	}
	return back, nil
}

// vertsOf is verts less those in not.
func vertsOf(verts, not []int) []int {
	var out []int
	for _, w := range verts {
		if !slices.Contains(not, w) {
			out = append(out, w)
		}
	}
	return out
}
