package remote

import (
	"sync"

	"prun/ctl"
)

// The launcher's acknowledgements of output (output.go) go down through
// one queue per link of the launcher's: whoever finds a link's queue idle
// writes, and the acknowledgements that queued up meanwhile (a relay's
// batch of its subtree's runs, written to prun's stdout, is acknowledged
// node by node) go as one frame (tBatch) to that child. The child takes
// its own and passes the others on, again as one frame per next hop. No
// timer holds one back: a lone acknowledgement goes at once, as before. An
// acknowledgement is a credit, so its order among other kinds of frames
// does not matter; among acknowledgements the queue keeps it.

// ackDownAllowed are the kinds a batch from the parent may carry.
func ackDownAllowed(typ uint8) bool { return typ == tOutputAck }

// ackQueues are the launcher's queues of acknowledgements, by child.
type ackQueues struct {
	fanout int
	send   func(dest int, typ uint8, payload []byte) error // the spawner's
	count  func(acks, frames int)                          // the counters' (stats)

	mu   sync.Mutex
	q    map[int][]queued // by child of the launcher
	busy map[int]bool     // its queue is being written
}

// ackHeld bounds the acknowledgements a queue holds for a busy subtree:
// a subtree that keeps the launcher busy still gets its credits.
const ackHeld = 64

// push queues an acknowledgement (a tOutputAck body; nil: none) for vertex
// v, and sends what its child's queue holds when flush is set (the
// launcher has no more of that subtree's runs queued, or a grant that
// must go) or the queue is full.
func (a *ackQueues) push(v int, body []byte, flush bool) {
	hop := ctl.NextHop(0, v, a.fanout)
	if hop <= 0 {
		return
	}
	a.mu.Lock()
	if body != nil {
		a.q[hop] = append(a.q[hop], queued{tOutputAck, frame(uint32(v), toLauncher, body)})
	}
	if a.busy[hop] || !flush && len(a.q[hop]) < ackHeld {
		a.mu.Unlock() // the writer takes it, or a later push
		return
	}
	a.busy[hop] = true
	for len(a.q[hop]) > 0 {
		fs := a.q[hop]
		delete(a.q, hop)
		a.mu.Unlock()
		sendDown(a.send, hop, toLauncher, fs)
		a.count(len(fs), (len(fs)*(5+len(fs[0].p))+batchMax-1)/batchMax)
		a.mu.Lock()
	}
	delete(a.busy, hop)
	a.mu.Unlock()
}

// sendDown sends frames fs, each routed through child hop, as one frame
// when they are several (batchMax bounds each).
func sendDown(send func(int, uint8, []byte) error, hop int, src uint32, fs []queued) {
	for len(fs) > 0 {
		k, size := 1, len(fs[0].p)
		for k < len(fs) && size+5+len(fs[k].p) <= batchMax {
			size += 5 + len(fs[k].p)
			k++
		}
		if k == 1 {
			dest, _, _, _ := header(fs[0].p)
			send(int(dest), fs[0].typ, fs[0].p)
		} else {
			send(hop, tBatch, frame(uint32(hop), src, encodeBatch(fs[:k])))
		}
		fs = fs[k:]
	}
}

// ackBatch is a daemon's side: a batch of acknowledgements from its parent.
// It takes its own and passes the others on, a frame per next hop.
func (n *node) ackBatch(body []byte) error {
	var mine [][]byte
	down := map[int][]queued{}
	_, err := decodeBatchOf(body, ackDownAllowed, func(typ uint8, p []byte) {
		dest, _, b, err := header(p)
		switch {
		case err != nil:
		case int(dest) == n.me:
			mine = append(mine, b)
		default:
			if hop := ctl.NextHop(n.me, int(dest), n.boot.Fanout); hop > 0 {
				down[hop] = append(down[hop], queued{typ, p})
			}
		}
	})
	if err != nil {
		return err
	}
	for _, b := range mine {
		k, key, grant, err := decodeOutAck(b, 1<<40)
		if err != nil {
			return err
		}
		n.out.ack(k, key, grant)
	}
	if n.kids != nil {
		for hop, fs := range down {
			sendDown(n.kids.send, hop, toLauncher, fs)
		}
	}
	return nil
}
