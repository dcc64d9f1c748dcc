package remote

import (
	"encoding/json"
	"fmt"
	"prun/remote/wire"
	"syscall"
	"time"

	"prun/daemon"
	"prun/pmixsrv"
)

// Node is a remote node's daemon as the launcher drives it.
type Node struct {
	t *Tree
	v int
}

// Node returns the daemon of host.
func (t *Tree) Node(host string) *Node {
	if v := t.vertex[host]; v != 0 {
		return &Node{t: t, v: v}
	}
	return nil
}

// Launch hands the node a plan; failures come back as events. Every
// daemon registers every job, so the launcher hands each plan to every
// node: the first Launch of a plan broadcasts it down the tree (one frame
// per link, each daemon relaying it to its children) and the others have
// nothing left to send. Sent node by node, a plan, whose size grows with
// the job, cost the launcher a frame per node: O(N^2) bytes.
func (n *Node) Launch(p *daemon.Plan) error {
	t := n.t
	t.mu.Lock()
	sent := t.broadcast[p.Nspace]
	if t.broadcast == nil {
		t.broadcast = map[string]bool{}
	}
	t.broadcast[p.Nspace] = true
	t.mu.Unlock()
	if sent {
		return nil
	}
	b, err := t.encodePlan(p)
	if err != nil {
		return err
	}
	t.kids.Broadcast(wire.TLaunch, wire.Frame(wire.ToBroadcast, wire.ToLauncher, b))
	return nil
}

// encodePlan encodes p once for all the nodes the launcher hands it to.
func (t *Tree) encodePlan(p *daemon.Plan) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.plan != p {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		t.plan, t.planJSON = p, b
	}
	return t.planJSON, nil
}

// Signal sends sig to ranks of job nspace (nil: all of them) on the node.
func (n *Node) Signal(nspace string, ranks []int, sig syscall.Signal) {
	n.t.signal(nspace, ranks, sig, []int{n.v})
}

// Forget drops a job that is over from the node (a persistent runtime's).
func (n *Node) Forget(nspace string) {
	n.t.forget(nspace, []int{n.v})
}
func (n *Node) ServeDirectModex(target pmixsrv.Proc, done func([]byte, error)) {
	askNode(n.t, n.v, wire.TServeDmodex, &wire.DmodexReq{Proc: target}, done)
}
func (n *Node) DeliverEvent(code pmixsrv.Status, source pmixsrv.Proc, rng pmixsrv.DataRange, info []pmixsrv.Info) error {
	n.t.deliverEvent(&wire.Notify{Status: code, Source: source, Range: rng, Info: info}, []int{n.v})
	return nil
}

// Inspect asks the node for its ranks' states, waiting a bounded time.
func (n *Node) Inspect(nspace string, stacks bool) []daemon.RankState {
	ch := make(chan []daemon.RankState, 1)
	askNode(n.t, n.v, wire.TInspect, &wire.InspectReq{Nspace: nspace, Stacks: stacks}, func(st []daemon.RankState, _ error) { ch <- st })
	select {
	case st := <-ch:
		return st
	case <-time.After(10 * time.Second):
		return nil
	}
}

// OpenStdin opens the node's stdin stream for the ranks of job nspace,
// before the first Stdin.
func (n *Node) OpenStdin(nspace string) { n.t.window(n.v, nspace, true) }

// Stdin passes a chunk of the launcher's stdin to the ranks of job nspace
// on the node (nil: EOF, the stream's end). It waits while the node holds a
// window's worth its ranks have not read. A stream that is over (the node
// is lost, its ranks read no more, the job was forgotten) takes nothing.
func (n *Node) Stdin(nspace string, p []byte) error {
	w := n.t.window(n.v, nspace, false)
	if w == nil {
		return fmt.Errorf("%s: %w", n.t.cfg.Hosts[n.v-1], wire.ErrNodeGone)
	}
	if len(p) == 0 {
		defer n.t.dropWindow(n.v, nspace) // the stream's end
	}
	if err := w.Acquire(len(p)); err != nil {
		n.t.dropWindow(n.v, nspace)
		return fmt.Errorf("%s: %w", n.t.cfg.Hosts[n.v-1], err)
	}
	return n.t.kids.Send(n.v, wire.TStdin, wire.Frame(uint32(n.v), wire.ToLauncher, append(wire.AppendStream(nil, nspace), p...)))
}

// stdinKey names a stdin window: a node's (vertex) stream (namespace).
type stdinKey struct {
	v      int
	nspace string
}

// window is the stdin window of vertex v's stream nspace (nil: none);
// make makes it if it is not there (dead if the node is, or the tree
// closes).
func (t *Tree) window(v int, nspace string, create bool) *wire.Window {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := stdinKey{v, nspace}
	w := t.stdin[k]
	if w == nil && create {
		w = wire.NewWindow(wire.StdinWindow)
		if t.down[v] || t.closing {
			w.Kill()
		}
		t.stdin[k] = w
	}
	return w
}

// dropWindow ends a stream's window: whatever waits on it gives up.
func (t *Tree) dropWindow(v int, nspace string) {
	t.mu.Lock()
	k := stdinKey{v, nspace}
	w := t.stdin[k]
	delete(t.stdin, k)
	t.mu.Unlock()
	if w != nil {
		w.Kill()
	}
}
