package remote

import (
	"prun/remote/wire"
	"sync"

	"prun/ctl"
)

// The launcher's acknowledgements of output (output.go) to the nodes below
// one of its children go down together: those the launcher gives at once
// when it has written the last run it had queued of that subtree (a relay's
// batch of its subtree's runs), and those that queued up while the link was
// being written (whoever finds the link's queue idle writes). Several go as
// one frame (tBatch) to the child, which takes its own and passes the
// others on, again as one frame per next hop. No timer holds one back. An
// acknowledgement is a credit, so its order among other kinds of frames
// does not matter.

// ackQueues are the launcher's queues of acknowledgements, by child.
type ackQueues struct {
	fanout int
	send   func(dest int, typ uint8, payload []byte) error // the spawner's
	count  func(acks, frames int)                          // the counters' (stats)

	mu   sync.Mutex
	q    map[int][]wire.Queued // by child of the launcher
	busy map[int]bool          // its queue is being written
}

// push sends acknowledgements down: those through the same child of the
// launcher's as one frame, with those that queued up while the child's
// link was being written.
func (a *ackQueues) push(acks []outAck) {
	a.mu.Lock()
	var hops []int
	for _, k := range acks {
		hop := ctl.NextHop(0, k.v, a.fanout)
		if hop <= 0 {
			continue
		}
		if len(a.q[hop]) == 0 {
			hops = append(hops, hop)
		}
		a.q[hop] = append(a.q[hop], wire.Queued{Typ: wire.TOutputAck, P: wire.Frame(uint32(k.v), wire.ToLauncher, k.body)})
	}
	for _, hop := range hops {
		if a.busy[hop] {
			continue // its writer takes them
		}
		a.busy[hop] = true
		for len(a.q[hop]) > 0 {
			fs := a.q[hop]
			delete(a.q, hop)
			a.mu.Unlock()
			a.count(len(fs), wire.SendDown(a.send, hop, wire.ToLauncher, fs))
			a.mu.Lock()
		}
		delete(a.busy, hop)
	}
	a.mu.Unlock()
}
