package wire

import (
	"errors"
	"sync"
)

var ErrNodeGone = errors.New("the node is gone")

// Window is the count of the bytes of one stream the other end has not
// acknowledged yet: the launcher's for a node's stdin and preloads, a
// daemon's for its ranks' output (outCredit).
type Window struct {
	Mu       sync.Mutex
	Cond     *sync.Cond
	Limit    int
	Inflight int
	Dead     bool
}

func NewWindow(limit int) *Window {
	w := &Window{Limit: limit}
	w.Cond = sync.NewCond(&w.Mu)
	return w
}

// Acquire waits until n more bytes fit (a chunk larger than the window goes
// alone), or the node is gone.
func (w *Window) Acquire(n int) error {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	for !w.Dead && w.Inflight > 0 && w.Inflight+n > w.Limit {
		w.Cond.Wait()
	}
	if w.Dead {
		return ErrNodeGone
	}
	w.Inflight += n
	return nil
}
func (w *Window) Release(n int) {
	w.Mu.Lock()
	w.Inflight = max(w.Inflight-n, 0)
	w.Cond.Broadcast()
	w.Mu.Unlock()
}

// Kill wakes every waiter for good: the node is lost or closing.
func (w *Window) Kill() {
	w.Mu.Lock()
	w.Dead = true
	w.Cond.Broadcast()
	w.Mu.Unlock()
}

// OutCredit is a daemon's side of its output window: a window (above)
// whose waits also let a stream go on with a line the launcher has begun
// to print.
type OutCredit struct {
	Window
	mid     map[OutKey]bool // the stream's last run sent ended mid-line
	granted map[OutKey]bool // ... and the launcher printed a piece of it
}

func NewOutCredit(limit int) *OutCredit {
	c := &OutCredit{Window: Window{Limit: limit}, mid: map[OutKey]bool{}, granted: map[OutKey]bool{}}
	c.Cond = sync.NewCond(&c.Mu)
	return c
}

// Acquire waits until n more bytes of stream k may go (a run larger than
// the window goes alone; a granted continuation goes at once), and records
// whether this run ends mid-line (before it leaves: the grant its partial
// run earns may come back before the send returns). It reports false when
// the link is gone: the run is dropped.
func (c *OutCredit) Acquire(k OutKey, n int, partial bool) bool {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	for !c.Dead && c.Inflight > 0 && c.Inflight+n > c.Limit && !(c.mid[k] && c.granted[k]) {
		c.Cond.Wait()
	}
	if c.Dead {
		return false
	}
	delete(c.granted, k)
	if partial {
		c.mid[k] = true
	} else {
		delete(c.mid, k)
	}
	c.Inflight += n
	return true
}

// Ack takes an acknowledgement from the launcher.
func (c *OutCredit) Ack(n int, k OutKey, grant bool) {
	c.Mu.Lock()
	c.Inflight = max(c.Inflight-n, 0)
	if grant && c.mid[k] {
		c.granted[k] = true
	}
	c.Cond.Broadcast()
	c.Mu.Unlock()
}
