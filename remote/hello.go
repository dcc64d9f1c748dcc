package remote

import (
	"errors"
	"sync"
	"time"

	"prun/ctl"
)

// Start-up messages combine along the tree. A daemon with children sends
// its parent one message for its subtree (tHellos): its own hello first (the
// parent takes a link only with its child's own hello first), then its
// children's and theirs, once every child answered. The launcher thus reads
// one start-up message per child of its own, not one per daemon.
//
// What fails is not held back: a child that cannot start (or a failure
// coming up from below) sends the subtree's hellos at once, the failure
// after them, naming its node as before. Nor does a slow child hold its
// parent past the parent's own watch (the connect-back limit, the connect
// timeout + 10 s from the session's start): a vertex waits for its children
// at most helloWait after its own hello is ready, then sends what it has;
// what comes later goes up on its own, after it.

// helloWait bounds a vertex's wait for its children's hellos, from its own.
// It must end well before its parent's watch of it (ConnectTimeout + 10 s
// from its session's start), which it does by the 10 s less the daemon's
// own start.
func (b Bootstrap) helloWait() time.Duration { return b.connectTimeout() }

// helloState combines a vertex's subtree's hellos.
type helloState struct {
	mu      sync.Mutex
	own     *hello
	got     []hello      // the subtree's, in the order they came, each its own first
	waiting map[int]bool // children that have not answered
	now     bool         // a failure: send as soon as the own hello is ready
	sent    bool
}

// expectHellos starts the wait for the children's hellos.
func (n *node) expectHellos(kids []int) {
	h := &n.hellos
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting = make(map[int]bool, len(kids))
	for _, v := range kids {
		h.waiting[v] = true
	}
}

// ownHello is this daemon's hello, ready: it goes up with its subtree's
// now, or when the children answered, or after helloWait.
func (n *node) ownHello(hi *hello) {
	if n.kids == nil {
		// A leaf: its hello alone, as every daemon's was.
		n.sendUp(tHello, hi)
		n.helloDone()
		return
	}
	h := &n.hellos
	h.mu.Lock()
	h.own = hi
	h.mu.Unlock()
	time.AfterFunc(n.boot.helloWait(), n.sendHellos)
	n.maybeSendHellos()
}

// childHello takes a hello (tHello, tHellos) that came from below, if this
// vertex's own has not gone up yet; false: it goes up as it is.
func (n *node) childHello(typ uint8, p []byte) bool {
	_, src, body, err := header(p)
	if err != nil {
		return false
	}
	var hs []hello
	switch typ {
	case tHello:
		var m hello
		if decode(body, &m) != nil {
			return false // the launcher says what is wrong with it
		}
		m.Vertex = int(src)
		hs = []hello{m}
	case tHellos:
		var m subtreeHellos
		if decode(body, &m) != nil {
			return false
		}
		hs = m.Hellos
	}
	h := &n.hellos
	h.mu.Lock()
	if h.sent {
		h.mu.Unlock()
		return false
	}
	h.got = append(h.got, hs...)
	delete(h.waiting, int(src)) // a later word of a child's subtree (src below it) changes nothing
	h.mu.Unlock()
	n.maybeSendHellos()
	return true
}

// helloFailure is a child that failed: nothing more will come from it, and
// the failure goes up at once, after the hellos.
func (n *node) helloFailure(v int) {
	h := &n.hellos
	h.mu.Lock()
	delete(h.waiting, v)
	h.mu.Unlock()
	n.helloNow()
}

// helloNow sends the subtree's hellos as soon as the own is ready: a
// failure waits to go up after them.
func (n *node) helloNow() {
	h := &n.hellos
	h.mu.Lock()
	h.now = true
	h.mu.Unlock()
	n.maybeSendHellos()
}

// maybeSendHellos sends the subtree's hellos if every child answered or a
// failure is waiting to go up.
func (n *node) maybeSendHellos() {
	h := &n.hellos
	h.mu.Lock()
	ready := h.own != nil && (len(h.waiting) == 0 || h.now)
	h.mu.Unlock()
	if ready {
		n.sendHellos()
	}
}

// sendHellos sends the own hello and the subtree's that came, once.
func (n *node) sendHellos() {
	h := &n.hellos
	h.mu.Lock()
	if h.sent || h.own == nil {
		h.mu.Unlock()
		return
	}
	h.sent = true
	own := *h.own
	own.Vertex = n.me
	all := append([]hello{own}, h.got...)
	h.got, h.waiting = nil, nil
	h.mu.Unlock()
	for _, m := range combineHellos(all) {
		n.sendUp(tHellos, m)
	}
	n.helloDone()
}

// helloBudget bounds a combined start-up message: hellos that would take
// it past go in the next one. A node's topology may be its hwloc XML (an
// asymmetric node's: tens of KiB), and a frame may not exceed ctl.MaxFrame.
const helloBudget = 4 << 20

// combineHellos makes a vertex's start-up messages of its subtree's hellos
// (its own first; hs is not changed): a topology that a hello before it on
// this link carried (alike nodes: most of them) goes as that hello's vertex
// (TopoOf) instead of again, and a message ends before a hello that would
// take it past helloBudget.
func combineHellos(hs []hello) []*subtreeHellos {
	seen := map[string]int{}
	out := []*subtreeHellos{{}}
	size := 0
	for _, h := range hs {
		if h.TopoOf == 0 && (h.Topo != "" || len(h.TopoXML) > 0) {
			key := h.Topo + "\x00" + string(h.TopoXML)
			if v, ok := seen[key]; ok {
				h.Topo, h.TopoXML, h.TopoOf = "", nil, v
			} else {
				seen[key] = h.Vertex
			}
		}
		n := 64 + len(h.Host) + len(h.Topo) + len(h.TopoXML)*4/3 // JSON, base64
		cur := out[len(out)-1]
		if len(cur.Hellos) > 0 && size+n > helloBudget {
			cur = &subtreeHellos{}
			out = append(out, cur)
			size = 0
		}
		cur.Hellos = append(cur.Hellos, h)
		size += n
	}
	return out
}

// helloDone lets what waits for this daemon's hello go up.
func (n *node) helloDone() { close(n.helloSent) }

// errHelloOutside is a hello of a vertex that is not in the subtree of the
// link it came over; errHelloTopo one that names the topology of a hello
// that did not come before it.
var (
	errHelloOutside = errors.New("a hello of a node outside its subtree")
	errHelloTopo    = errors.New("a hello naming the topology of a hello not received")
)

// inSubtree says whether vertex w is v or below it.
func inSubtree(w, v, fanout int) bool {
	for ; w > v; w = ctl.Parent(w, fanout) {
	}
	return w == v
}
