package nodeside

import (
	"prun/remote/wire"
	"sync"
	"time"
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

// helloState combines a vertex's subtree's hellos.
type helloState struct {
	mu      sync.Mutex
	own     *wire.Hello
	got     []wire.Hello // the subtree's, in the order they came, each its own first
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
func (n *node) ownHello(hi *wire.Hello) {
	if n.kids == nil {
		// A leaf: its hello alone, as every daemon's was.
		n.sendUp(wire.THello, hi)
		n.helloDone()
		return
	}
	h := &n.hellos
	h.mu.Lock()
	h.own = hi
	h.mu.Unlock()
	time.AfterFunc(n.boot.HelloWait(), n.sendHellos)
	n.maybeSendHellos()
}

// childHello takes a hello (tHello, tHellos) that came from below, if this
// vertex's own has not gone up yet; false: it goes up as it is.
func (n *node) childHello(typ uint8, p []byte) bool {
	_, src, body, err := wire.Header(p)
	if err != nil {
		return false
	}
	var hs []wire.Hello
	switch typ {
	case wire.THello:
		var m wire.Hello
		if wire.Decode(body, &m) != nil {
			return false // the launcher says what is wrong with it
		}
		m.Vertex = int(src)
		hs = []wire.Hello{m}
	case wire.THellos:
		var m wire.SubtreeHellos
		if wire.Decode(body, &m) != nil {
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
	all := append([]wire.Hello{own}, h.got...)
	h.got, h.waiting = nil, nil
	h.mu.Unlock()
	for _, m := range wire.CombineHellos(all) {
		n.sendUp(wire.THellos, m)
	}
	n.helloDone()
}

// helloDone lets what waits for this daemon's hello go up.
func (n *node) helloDone() { close(n.helloSent) }
