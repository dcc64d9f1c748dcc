package daemon

import (
	"maps"
	"slices"
	"sync"

	"prun/iof"
)

// rankTable is the record of one job's local ranks on one node, and the
// only code that takes its lock: the shell and its parts (restart, signals,
// pmiport, host's and pmijob's upcalls, inspect) read and change it through
// these operations alone, each one step under the lock. Its key set is
// fixed by add, before any rank starts.
type rankTable struct {
	maxRestarts int // the job's --max-restarts

	mu      sync.Mutex
	ranks   map[int]*rankState
	running int  // ranks whose last end is not yet reported
	ending  bool // every rank was signalled to end: none is restarted
}

// rankState is what the shell knows of one local rank.
type rankState struct {
	pid    int   // 0 until started, and after a failed start
	child  *proc // the running incarnation, a zombie from its exit until the job's end reaps it
	exited bool  // its last incarnation was reaped

	client clientState  // what its PMIx server (host.go) and PMI service (pmijob.go) saw
	again  restartState // --max-restarts (restart.go)
}

// clientState is what a rank's current incarnation told its PMIx server or
// PMI service.
type clientState struct {
	connected bool
	finalized bool
	aborted   bool // it called PMIx_Abort or PMI abort: its failure is not restarted
	pmiPort   bool // connected through -pmi-port
	// pmiServed is closed when its PMI connection's server returns.
	pmiServed <-chan struct{}
}

func newRankTable(maxRestarts int) *rankTable {
	return &rankTable{maxRestarts: maxRestarts, ranks: map[int]*rankState{}}
}

// add records the job's local ranks, none started yet.
func (t *rankTable) add(ranks []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running += len(ranks)
	for _, r := range ranks {
		t.ranks[r] = &rankState{}
	}
}

// list is the job's local ranks, in order.
func (t *rankTable) list() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.ranks))
}

// started records rank's new incarnation and returns its number (its
// restarts so far). served is when its PMI connection's server returns
// (nil: it has none yet, or a -pmi-port claim sets it, maybe already).
func (t *rankTable) started(rank int, child *proc, served <-chan struct{}) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.ranks[rank]
	st.pid, st.child = child.pid, child
	if served != nil {
		st.client.pmiServed = served
	}
	return st.again.restarts
}

// client updates what rank's current incarnation told its servers (host.go,
// pmijob.go); a rank not of this node is ignored.
func (t *rankTable) client(rank int, set func(*clientState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.ranks[rank]; ok {
		set(&st.client)
	}
}

// portClaim is what became of a -pmi-port connection's claim of a rank.
type portClaim int

const (
	portClaimed portClaim = iota
	portNoRank            // no such rank of this job on this node
	portTaken             // the rank is connected already
)

// claimPort lets rank connect once through -pmi-port; served is when that
// connection's server returns.
func (t *rankTable) claimPort(rank int, served <-chan struct{}) portClaim {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.ranks[rank]
	switch {
	case !ok:
		return portNoRank
	case st.client.pmiPort:
		return portTaken
	}
	st.client.pmiPort, st.client.pmiServed = true, served
	return portClaimed
}

// served is when rank's PMI connection's server returns (nil: it has none).
func (t *rankTable) served(rank int) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ranks[rank].client.pmiServed
}

// rankEnd is the table's verdict on an incarnation's end.
type rankEnd struct {
	restart int // > 0: the rank starts again, as this restart
	pid     int // the ended incarnation's (0: it never started)
	client  clientState
	held    []iof.Stream // its output streams that ended before it, now known to be its last
}

// ended records the end of rank's incarnation (failed: by a non-zero
// status or a signal, or it did not start) and decides whether it starts
// again (restartPolicy). The final end is not yet reported: reported
// counts it.
func (t *rankTable) ended(rank int, failed bool) rankEnd {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.ranks[rank]
	e := rankEnd{pid: st.pid, client: st.client}
	if t.restartable(st, failed) {
		e.restart = st.again.retire(st.child)
		st.child, st.client = nil, clientState{} // the next incarnation connects anew
		return e
	}
	st.exited = true
	e.held = st.again.takeHeld()
	return e
}

func (t *rankTable) restartable(st *rankState, failed bool) bool {
	return restartPolicy(restartCase{failed: failed, started: st.pid != 0, aborted: st.client.aborted,
		ending: t.ending, restarts: st.again.restarts, max: t.maxRestarts})
}

// notRestarted records that a rank whose restart was decided will not
// start again after all (the job began to end, or its start failed:
// started false), so that its end is final.
func (t *rankTable) notRestarted(rank int, started bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.ranks[rank]
	st.again.restarts = t.maxRestarts
	if !started {
		st.pid = 0 // reported as a launch failure, not as an exit
	}
}

// reported counts a rank's final end as reported and says whether it was
// the job's last here.
func (t *rankTable) reported() (last bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	return t.running == 0
}

// streamEnded records that stream s of incarnation n of rank ended, and
// says whether that end goes on now (the incarnation is the rank's last,
// and it ended); the end of the current incarnation's stream is held until
// its end decides (ended's held), that of an earlier one dropped.
func (t *rankTable) streamEnded(rank, n int, s iof.Stream) (forward bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.ranks[rank]
	current := st.again.restarts == n
	if current && !st.exited {
		st.again.endsHeld = append(st.again.endsHeld, s)
	}
	return current && st.exited
}

// end records that every rank was told to end: from now on none is
// restarted.
func (t *rankTable) end() {
	t.mu.Lock()
	t.ending = true
	t.mu.Unlock()
}

// isEnding says whether end was called.
func (t *rankTable) isEnding() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ending
}

// forLive calls f with the pid of each live rank among ranks (every rank
// when ranks is nil), under the lock: the pid is its rank's process, a
// zombie at worst, until f returns, since only the job's end reaps
// (incarnations, which takes the lock).
func (t *rankTable) forLive(ranks []int, f func(pid int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	send := func(st *rankState) {
		if !st.exited && st.pid != 0 {
			f(st.pid)
		}
	}
	if ranks == nil {
		for _, st := range t.ranks {
			send(st)
		}
		return
	}
	for _, r := range ranks {
		if st, ok := t.ranks[r]; ok {
			send(st)
		}
	}
}

// livePid is a live rank and its process.
type livePid struct{ rank, pid int }

// live lists the live ranks, in rank order.
func (t *rankTable) live() []livePid {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []livePid
	for r, st := range t.ranks {
		if !st.exited && st.pid > 0 {
			out = append(out, livePid{r, st.pid})
		}
	}
	slices.SortFunc(out, func(a, b livePid) int { return a.rank - b.rank })
	return out
}

// incarnations takes every incarnation of every rank out of the table, for
// the job's end to kill what they left and reap them: every rank has
// exited, so none of them is signalled (forLive) any more.
func (t *rankTable) incarnations() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*proc
	for _, st := range t.ranks {
		if st.child != nil {
			out = append(out, st.child)
			st.child = nil
		}
		out = append(out, st.again.old...)
		st.again.old = nil
	}
	return out
}

// endedAmong returns a rank among those in says are members whose last
// incarnation ended, reaped or not yet.
func (t *rankTable) endedAmong(in func(rank int) bool) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for r, st := range t.ranks {
		if in(r) && (st.exited || st.child != nil && st.child.ended() && !t.restartable(st, true)) {
			return r, true
		}
	}
	return 0, false
}

// count counts the ranks in says are members.
func (t *rankTable) count(in func(rank int) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for r := range t.ranks {
		if in(r) {
			n++
		}
	}
	return n
}
