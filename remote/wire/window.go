package wire

import (
	"errors"
	"sync"
)

var ErrNodeGone = errors.New("the node is gone")

// window is the count of the bytes of one stream the other end has not
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

// acquire waits until n more bytes fit (a chunk larger than the window goes
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

// kill wakes every waiter for good: the node is lost or closing.
func (w *Window) Kill() {
	w.Mu.Lock()
	w.Dead = true
	w.Cond.Broadcast()
	w.Mu.Unlock()
}
