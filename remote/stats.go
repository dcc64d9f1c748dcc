package remote

import (
	"sync"

	"prun/ctl"
)

// Stats are the launcher's structural counters: the control-plane
// messages and bytes it handled, by phase, and the shape of the tree. They
// count frames, not time, so they do not depend on the machine's load; the
// tests assert them and --report exports them (docs/report.md).
type Stats struct {
	Daemons  int `json:"daemons"`
	Fanout   int `json:"fanout"`
	Children int `json:"launcher_children"` // the launcher's own links
	Depth    int `json:"depth"`             // links from the launcher to the deepest daemon

	Startup  Traffic `json:"startup"`  // until every daemon said hello
	Launch   Traffic `json:"launch"`   // the jobs' plans, sent down
	Teardown Traffic `json:"teardown"` // the closing broadcast and its answers
	// Run: frames between the start-up and the teardown but the plans and
	// the collectives': output, events, acknowledgements, requests, replies.
	Run Traffic `json:"run"`
	// Batches: frames of several messages (tBatch: what a vertex had queued
	// while it wrote, sent as one frame, counted once above); Batched: the
	// messages they carried.
	Batches int `json:"batches"`
	Batched int `json:"batched_messages"`
	// Collectives: the launcher's share of every collective that spanned
	// its links (a combined contribution in per child that takes part, a
	// result out per such child).
	Collectives     int     `json:"collectives"`
	CollTraffic     Traffic `json:"collective_traffic"`
	MaxCollMsgsIn   int     `json:"max_collective_messages_in"`
	MaxCollMsgsOut  int     `json:"max_collective_messages_out"`
	CollectivesLost int     `json:"collectives_failed"`
	// Signals: the signals the launcher sent its daemons (to a job's ranks,
	// all or some); SignalMsgs: the frames they took (counted in Run too);
	// MaxSignalMsgs: the most one took. A signal to many nodes goes down
	// the tree as a broadcast: a frame per link of the launcher's.
	Signals       int `json:"signals"`
	SignalMsgs    int `json:"signal_messages"`
	MaxSignalMsgs int `json:"max_signal_messages"`
	// Events: the PMIx events the launcher handed its daemons' servers (a
	// job's end, a rank's event for other nodes, ...); EventMsgs: the frames
	// they took (counted in Run too); MaxEventMsgs: the most one took. An
	// event for many nodes goes down the tree as a broadcast, as a signal.
	Events       int `json:"events"`
	EventMsgs    int `json:"event_messages"`
	MaxEventMsgs int `json:"max_event_messages"`
	// Forgets: the jobs that were over the launcher dropped from its
	// daemons (a persistent runtime's, a spawned job ended before the
	// launch); ForgetMsgs: the frames they took (counted in Run too);
	// MaxForgetMsgs: the most one took (a broadcast, as a signal).
	Forgets       int `json:"forgets"`
	ForgetMsgs    int `json:"forget_messages"`
	MaxForgetMsgs int `json:"max_forget_messages"`
	// OutputAcks: the acknowledgements of output the launcher sent down;
	// OutputAckMsgs: the frames they took (counted in Run too), fewer when
	// those to a child's subtree that queued up go as one (ackdown.go).
	OutputAcks    int `json:"output_acks"`
	OutputAckMsgs int `json:"output_ack_messages"`
	// Gathers: prun top's samples and prun stack's trees gathered along
	// the tree (gather.go); GatherMsgsIn, GatherMsgsOut: the replies and
	// requests they took (counted in Run too); MaxGatherMsgsIn: the most
	// replies one took (at most the launcher's children).
	Gathers         int `json:"gathers"`
	GatherMsgsIn    int `json:"gather_messages_in"`
	GatherMsgsOut   int `json:"gather_messages_out"`
	MaxGatherMsgsIn int `json:"max_gather_messages_in"`
}

// Traffic is messages and bytes (frame payloads) in and out of the launcher.
type Traffic struct {
	MsgsIn   int   `json:"messages_in"`
	MsgsOut  int   `json:"messages_out"`
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
}

func (tr *Traffic) in(n int)  { tr.MsgsIn++; tr.BytesIn += int64(n) }
func (tr *Traffic) out(n int) { tr.MsgsOut++; tr.BytesOut += int64(n) }

// Depth is the number of links from vertex 0 to the deepest of n daemons
// in a tree of fanout k.
func Depth(n, k int) int {
	d := 0
	for v := n; v > 0; v = ctl.Parent(v, k) {
		d++
	}
	return d
}

// stats counts the launcher's traffic.
type stats struct {
	mu    sync.Mutex
	s     Stats
	phase int // phaseStartup, phaseRun, phaseTeardown
	// inflight: per key, the collectives the launcher has contributions
	// of, oldest first. The next collective of the same participants may
	// start (a child that has its result contributes again) while the
	// launcher still sends the results of the last one.
	inflight map[string][]*collMsgs
}

const (
	phaseStartup = iota
	phaseRun
	phaseTeardown
)

type collMsgs struct {
	in, out   int
	answering bool // its results are going out: a contribution now is the next one's
}

func (st *stats) setPhase(p int) {
	st.mu.Lock()
	st.phase = p
	st.mu.Unlock()
}

// frame counts a frame in (up) or out of the launcher, outside collectives.
func (st *stats) frame(up bool, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var tr *Traffic
	switch st.phase {
	case phaseStartup:
		tr = &st.s.Startup
	case phaseTeardown:
		tr = &st.s.Teardown
	default:
		tr = &st.s.Run
	}
	if up {
		tr.in(n)
	} else {
		tr.out(n)
	}
}

// signal, event and forget count a signal, a PMIx event or a job's
// forgetting sent down to the daemons, which took k frames.
func (st *stats) signal(k int) { st.down(&st.s.Signals, &st.s.SignalMsgs, &st.s.MaxSignalMsgs, k) }
func (st *stats) event(k int)  { st.down(&st.s.Events, &st.s.EventMsgs, &st.s.MaxEventMsgs, k) }
func (st *stats) forget(k int) { st.down(&st.s.Forgets, &st.s.ForgetMsgs, &st.s.MaxForgetMsgs, k) }

func (st *stats) down(count, frames, most *int, k int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	*count++
	*frames += k
	*most = max(*most, k)
}

// acks counts acknowledgements of output sent down in frames.
func (st *stats) acks(acks, frames int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.OutputAcks += acks
	st.s.OutputAckMsgs += frames
}

// batched counts the messages of a batch the launcher read.
func (st *stats) batched(k int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Batches++
	st.s.Batched += k
}

// launch counts a plan sent down.
func (st *stats) launch(n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Launch.out(n)
}

// collIn counts a child's contribution to collective key.
func (st *stats) collIn(key string, n int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.CollTraffic.in(n)
	if st.inflight == nil {
		st.inflight = map[string][]*collMsgs{}
	}
	q := st.inflight[key]
	if len(q) == 0 || q[len(q)-1].answering {
		q = append(q, &collMsgs{})
		st.inflight[key] = q
	}
	q[len(q)-1].in++
}

// collOut counts a result sent down; the collective is over at the
// launcher when every child that contributed has its answer.
func (st *stats) collOut(key string, n int, failed bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.CollTraffic.out(n)
	q := st.inflight[key]
	if len(q) == 0 {
		return
	}
	c := q[0]
	c.answering = true
	c.out++
	if c.out < c.in {
		return
	}
	if len(q) == 1 {
		delete(st.inflight, key)
	} else {
		st.inflight[key] = q[1:]
	}
	st.s.Collectives++
	if failed {
		st.s.CollectivesLost++
	}
	st.s.MaxCollMsgsIn = max(st.s.MaxCollMsgsIn, c.in)
	st.s.MaxCollMsgsOut = max(st.s.MaxCollMsgsOut, c.out)
}

// Stats returns the counters so far.
func (t *Tree) Stats() Stats {
	t.stats.mu.Lock()
	defer t.stats.mu.Unlock()
	s := t.stats.s
	s.Daemons = len(t.cfg.Hosts)
	s.Fanout = t.cfg.Fanout
	s.Children = len(ctl.Children(0, t.cfg.Fanout, len(t.cfg.Hosts)))
	s.Depth = Depth(len(t.cfg.Hosts), t.cfg.Fanout)
	if g := t.gather; g != nil {
		g.Mu.Lock()
		s.Gathers, s.MaxGatherMsgsIn = g.Runs, g.MaxIn
		g.Mu.Unlock()
		s.GatherMsgsIn, s.GatherMsgsOut = int(g.In.Load()), int(g.Out.Load())
	}
	return s
}
