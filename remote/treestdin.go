package remote

import (
	"errors"
	"sync"
)

var errNodeGone = errors.New("the node is gone")

// window is the count of the bytes of one stream the other end has not
// acknowledged yet: the launcher's for a node's stdin and preloads, a
// daemon's for its ranks' output (outCredit).
type window struct {
	mu       sync.Mutex
	cond     *sync.Cond
	limit    int
	inflight int
	dead     bool
}

func newWindow(limit int) *window {
	w := &window{limit: limit}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits until n more bytes fit (a chunk larger than the window goes
// alone), or the node is gone.
func (w *window) acquire(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.dead && w.inflight > 0 && w.inflight+n > w.limit {
		w.cond.Wait()
	}
	if w.dead {
		return errNodeGone
	}
	w.inflight += n
	return nil
}
func (w *window) release(n int) {
	w.mu.Lock()
	w.inflight = max(w.inflight-n, 0)
	w.cond.Broadcast()
	w.mu.Unlock()
}

// kill wakes every waiter for good: the node is lost or closing.
func (w *window) kill() {
	w.mu.Lock()
	w.dead = true
	w.cond.Broadcast()
	w.mu.Unlock()
}
