package remote

import (
	"prun/remote/wire"
	"sync"
)

// outCredit is a daemon's side of its output window: a window (wire/window.go)
// whose waits also let a stream go on with a line the launcher has begun
// to print.
type outCredit struct {
	wire.Window
	mid     map[wire.OutKey]bool // the stream's last run sent ended mid-line
	granted map[wire.OutKey]bool // ... and the launcher printed a piece of it
}

func newOutCredit(limit int) *outCredit {
	c := &outCredit{Window: wire.Window{Limit: limit}, mid: map[wire.OutKey]bool{}, granted: map[wire.OutKey]bool{}}
	c.Cond = sync.NewCond(&c.Mu)
	return c
}

// acquire waits until n more bytes of stream k may go (a run larger than
// the window goes alone; a granted continuation goes at once), and records
// whether this run ends mid-line (before it leaves: the grant its partial
// run earns may come back before the send returns). It reports false when
// the link is gone: the run is dropped.
func (c *outCredit) acquire(k wire.OutKey, n int, partial bool) bool {
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

// ack takes an acknowledgement from the launcher.
func (c *outCredit) ack(n int, k wire.OutKey, grant bool) {
	c.Mu.Lock()
	c.Inflight = max(c.Inflight-n, 0)
	if grant && c.mid[k] {
		c.granted[k] = true
	}
	c.Cond.Broadcast()
	c.Mu.Unlock()
}
