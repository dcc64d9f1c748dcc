package nodeside

import (
	"prun/remote/wire"
	"sync"
	"time"
)

// closeState combines the answers to the closing broadcast: a daemon
// answers (tClosed) once for its subtree, when it has closed and each child
// it linked has answered or is gone, or after closeWait; the launcher reads
// one answer per child of its own instead of one per daemon.
type closeState struct {
	mu      sync.Mutex
	self    bool         // this daemon has closed
	waiting map[int]bool // children linked when the broadcast came, not yet answered
	count   int          // daemons of this subtree that closed
	early   map[int]int  // answers of children that came before the broadcast reached here
	sent    bool
}

// closeWait bounds a daemon's wait for its children's answers (the
// launcher waits 5 s for all of them).
const closeWait = 4 * time.Second

// closedHere is this daemon's own close done: it answers when its
// children have.
func (n *node) closedHere() {
	c := &n.closing
	c.mu.Lock()
	c.self = true
	c.count++
	c.waiting = map[int]bool{}
	if n.kids != nil {
		n.kids.Mu.Lock()
		for v := range n.kids.Links {
			c.waiting[v] = true
		}
		n.kids.Mu.Unlock()
	}
	for v, k := range c.early {
		if c.waiting[v] {
			delete(c.waiting, v)
			c.count += k
		}
	}
	c.mu.Unlock()
	time.AfterFunc(closeWait, func() { n.answerClose(true) })
	n.answerClose(false)
}

// childClosed is a child's answer for its subtree.
func (n *node) childClosed(p []byte) {
	_, src, body, err := wire.Header(p)
	if err != nil {
		return
	}
	var m wire.Closed
	if err := wire.Decode(body, &m); err != nil {
		return
	}
	c := &n.closing
	c.mu.Lock()
	v := int(src)
	if c.waiting != nil && c.waiting[v] {
		delete(c.waiting, v)
		c.count += m.Count
	} else if c.waiting == nil {
		// Before this daemon heard the broadcast (its child did first):
		// counted now, not waited for later.
		if c.early == nil {
			c.early = map[int]int{}
		}
		c.early[v] = m.Count
	}
	c.mu.Unlock()
	n.answerClose(false)
}

// closeGone is a child lost: no answer will come from it.
func (n *node) closeGone(v int) {
	c := &n.closing
	c.mu.Lock()
	if c.waiting != nil {
		delete(c.waiting, v)
	}
	c.mu.Unlock()
	n.answerClose(false)
}

// answerClose sends the subtree's answer once it is complete (or at the
// deadline, whatever has answered).
func (n *node) answerClose(deadline bool) {
	c := &n.closing
	c.mu.Lock()
	if c.sent || !c.self || (len(c.waiting) > 0 && !deadline) {
		c.mu.Unlock()
		return
	}
	c.sent = true
	count := c.count
	c.mu.Unlock()
	n.sendUp(wire.TClosed, &wire.Closed{Host: n.host, Count: count})
}
