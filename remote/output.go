package remote

import (
	"prun/remote/wire"
	"sync"

	"prun/daemon"
	"prun/iof"
)

// Ranks' output comes up the tree with end-to-end flow control, the mirror
// of stdin's (node.go, remote/nodeside/stdin.go). A daemon sends its ranks' runs only within a window
// of bytes the launcher has not acknowledged; the launcher's link readers
// never wait on prun's stdout: they queue each run, per rank and stream, and
// a writer per stream hands the runs to the iof Writer in order, then
// acknowledges their bytes. A stalled reader of prun's stdout thus stops the
// writers, the acknowledgements, the daemons' iof readers and, through
// their full pipes, the ranks, as on one node; the links keep carrying
// everything else, heartbeats included. Relays only pass frames on.
//
// Queues per stream keep the iof Writer's contract: a stream in the middle
// of a long line holds its destination until the rest comes, and the rest
// must not wait behind another stream's run that waits for the hold. For the
// same reason the window does not stop a piece that continues a line the
// launcher has begun to print: with each partial run it writes, the
// launcher grants that stream one run beyond the window.
//
// The launcher holds at most a window per node (plus a run per stream it
// granted); outWindow sizes it by the number of nodes.

// outRun is a queued run (or, with end, a stream's end; with info, its
// source's host and pid) of node v.
type outRun struct {
	v       int
	p       []byte
	partial bool
	end     bool
	info    *sourceInfo
}

type sourceInfo struct {
	host string
	pid  int
}

// outStream is one stream's queue at the launcher; a writer goroutine runs
// while it is not empty.
type outStream struct {
	runs    []outRun
	running bool
}

// outNode is the launcher's account of one node's output.
type outNode struct {
	queued   int  // runs and ends not yet handed to the Writer
	unacked  int  // bytes written, not yet acknowledged
	deferred bool // ... and their acknowledgement waits for its hop (outFlow.pend)
	held     []daemon.Event
}

// outAck is an acknowledgement (encodeOutAck) for vertex v.
type outAck struct {
	v    int
	body []byte
}

// outFlow is the launcher's side: the queues and the accounts.
type outFlow struct {
	window int
	sink   iof.Sink
	// ack sends acknowledgements down (together, those through the same
	// child of the launcher's: ackdown.go). hop is the launcher's child a
	// vertex is reached through (nil: each its own).
	ack   func([]outAck)
	hop   func(v int) int
	event func(daemon.Event)

	mu      sync.Mutex
	streams map[wire.OutKey]*outStream
	nodes   []outNode // by vertex-1
	queued  int
	idle    *sync.Cond    // queued fell to 0
	hops    map[int]int   // runs and ends queued, by hop
	pend    map[int][]int // by hop, its vertices whose acknowledgement waits (deferred)
}

func newOutFlow(nodes, window int, sink iof.Sink, ack func([]outAck), event func(daemon.Event)) *outFlow {
	f := &outFlow{window: window, sink: sink, ack: ack, event: event, streams: map[wire.OutKey]*outStream{},
		nodes: make([]outNode, nodes), hops: map[int]int{}, pend: map[int][]int{}}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// push queues a run of node v (it takes p), or a stream's end.
func (f *outFlow) push(k wire.OutKey, r outRun) {
	f.mu.Lock()
	s := f.streams[k]
	if s == nil {
		s = &outStream{}
		f.streams[k] = s
	}
	s.runs = append(s.runs, r)
	f.nodes[r.v-1].queued++
	f.hops[f.hopOf(r.v)]++
	f.queued++
	start := !s.running
	s.running = true
	f.mu.Unlock()
	if start {
		go f.write(k, s)
	}
}

// event passes a node's event on, but its NodeJobDone only once the output
// the node sent before it is written: a job is not over while its output
// waits in a queue.
func (f *outFlow) pushEvent(v int, ev daemon.Event) {
	f.mu.Lock()
	if ev.Kind == daemon.NodeJobDone && f.nodes[v-1].queued > 0 {
		f.nodes[v-1].held = append(f.nodes[v-1].held, ev)
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	f.event(ev)
}

// write hands stream k's runs to the sink in order until the queue is empty.
func (f *outFlow) write(k wire.OutKey, s *outStream) {
	for {
		f.mu.Lock()
		if len(s.runs) == 0 {
			s.running = false
			delete(f.streams, k)
			f.mu.Unlock()
			return
		}
		r := s.runs[0]
		s.runs[0] = outRun{}
		s.runs = s.runs[1:]
		f.mu.Unlock()

		switch {
		case r.info != nil:
			if is, ok := f.sink.(iof.InfoSink); ok {
				is.SetSourceInfo(k.Src, r.info.host, r.info.pid)
			}
		case r.end:
			if e, ok := f.sink.(iof.Ender); ok {
				e.End(k.Src, k.St)
			}
		default:
			f.sink.Write(k.Src, k.St, r.p, r.partial)
		}

		f.mu.Lock()
		n := &f.nodes[r.v-1]
		n.queued--
		n.unacked += len(r.p)
		var held []daemon.Event
		if n.queued == 0 {
			held, n.held = n.held, nil
		}
		if f.queued--; f.queued == 0 {
			f.idle.Broadcast()
		}
		// Acknowledge in batches: at once when a quarter of the window is
		// written or the run was a piece of a line (its stream gets the
		// rest beyond the window), else when the launcher has nothing more
		// queued of the node's hop (the node may be waiting for exactly
		// this; a relay's batch of its subtree's runs is acknowledged
		// together). A node thus never waits for more than a quarter of
		// its window on its neighbours' runs.
		hop := f.hopOf(r.v)
		f.hops[hop]--
		var acks []outAck
		if n.unacked >= f.window/4 || r.partial {
			acks = append(acks, outAck{r.v, wire.EncodeOutAck(n.unacked, k, r.partial)})
			n.unacked = 0
		} else if n.unacked > 0 && !n.deferred {
			n.deferred = true
			f.pend[hop] = append(f.pend[hop], r.v)
		}
		if f.hops[hop] == 0 {
			delete(f.hops, hop)
			for _, w := range f.pend[hop] {
				m := &f.nodes[w-1]
				m.deferred = false
				if m.unacked > 0 {
					acks = append(acks, outAck{w, wire.EncodeOutAck(m.unacked, wire.OutKey{}, false)})
					m.unacked = 0
				}
			}
			delete(f.pend, hop)
		}
		f.mu.Unlock()
		if len(acks) > 0 {
			f.ack(acks)
		}
		for _, ev := range held {
			f.event(ev)
		}
	}
}

func (f *outFlow) hopOf(v int) int {
	if f.hop == nil {
		return v
	}
	return f.hop(v)
}

// wait returns when every queued run has been written.
func (f *outFlow) wait() {
	f.mu.Lock()
	for f.queued > 0 {
		f.idle.Wait()
	}
	f.mu.Unlock()
}
