package daemon

import (
	"slices"
	"testing"

	"prun/iof"
)

// TestRankTableRestarts follows a rank through a failure that restarts it,
// held stream ends, and its final end.
func TestRankTableRestarts(t *testing.T) {
	tb := newRankTable(1)
	tb.add([]int{3, 1, 2})
	if got := tb.list(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("list = %v", got)
	}
	first := &proc{pid: 101}
	if n := tb.started(1, first, nil); n != 0 {
		t.Errorf("first incarnation = %d, want 0", n)
	}
	tb.client(1, func(c *clientState) { c.connected = true })
	tb.client(9, func(c *clientState) { t.Error("a rank not of this node was updated") })
	e := tb.ended(1, true)
	if e.restart != 1 || e.pid != 101 || !e.client.connected {
		t.Fatalf("failed end = %+v, want restart 1 of pid 101, connected", e)
	}
	// The first incarnation's stream ends late: dropped, not held.
	if tb.streamEnded(1, 0, iof.Stdout) {
		t.Error("an earlier incarnation's stream end was forwarded")
	}
	second := &proc{pid: 102}
	if n := tb.started(1, second, nil); n != 1 {
		t.Errorf("second incarnation = %d, want 1", n)
	}
	if tb.streamEnded(1, 1, iof.Stderr) {
		t.Error("a stream end before its rank's end was forwarded")
	}
	e = tb.ended(1, true) // restarts used up
	if e.restart != 0 || e.pid != 102 || e.client.connected || !slices.Equal(e.held, []iof.Stream{iof.Stderr}) {
		t.Fatalf("final end = %+v, want pid 102, not connected, stderr held", e)
	}
	if !tb.streamEnded(1, 1, iof.Stdout) {
		t.Error("a stream end after its rank's last end was not forwarded")
	}
	if tb.reported() {
		t.Error("the first of three ranks reported as the last")
	}
	if got := tb.incarnations(); len(got) != 2 || !slices.Contains(got, first) || !slices.Contains(got, second) {
		t.Errorf("incarnations = %v, want both of rank 1's", got)
	}
	if got := tb.incarnations(); len(got) != 0 {
		t.Errorf("incarnations taken twice: %v", got)
	}
}

// TestRankTableEnding: once every rank was told to end, a failure is
// final; a restart that then does not happen makes the end final too.
func TestRankTableEnding(t *testing.T) {
	tb := newRankTable(5)
	tb.add([]int{0, 1})
	tb.started(0, &proc{pid: 200}, nil)
	tb.started(1, &proc{pid: 201}, nil)
	if e := tb.ended(1, true); e.restart != 1 {
		t.Fatalf("failure before the end: %+v, want a restart", e)
	}
	tb.end()
	if !tb.isEnding() {
		t.Error("not ending after end")
	}
	tb.notRestarted(1, true)
	if e := tb.ended(1, true); e.restart != 0 || e.pid != 201 {
		t.Errorf("end of a rank not restarted: %+v, want final, pid 201", e)
	}
	if e := tb.ended(0, true); e.restart != 0 {
		t.Errorf("failure while ending: %+v, want final", e)
	}
	if tb.reported() || !tb.reported() {
		t.Error("the second of two reported ends is not the last")
	}
}

// TestRankTableLive: only started ranks that did not end are live, and
// only they are signalled; a failed start is reported as such (pid 0).
func TestRankTableLive(t *testing.T) {
	tb := newRankTable(0)
	tb.add([]int{0, 1, 2, 3})
	tb.started(2, &proc{pid: 302}, nil)
	tb.started(0, &proc{pid: 300}, nil)
	tb.started(3, &proc{pid: 303}, nil)
	tb.ended(3, false)
	if got, want := tb.live(), []livePid{{0, 300}, {2, 302}}; !slices.Equal(got, want) {
		t.Errorf("live = %v, want %v", got, want)
	}
	var pids []int
	tb.forLive(nil, func(pid int) { pids = append(pids, pid) })
	slices.Sort(pids)
	if !slices.Equal(pids, []int{300, 302}) {
		t.Errorf("forLive(all) gave %v", pids)
	}
	pids = nil
	tb.forLive([]int{1, 2, 3, 7}, func(pid int) { pids = append(pids, pid) })
	if !slices.Equal(pids, []int{302}) {
		t.Errorf("forLive(1, 2, 3, 7) gave %v", pids)
	}
	if e := tb.ended(1, true); e.pid != 0 || e.restart != 0 {
		t.Errorf("a failed start's end: %+v", e)
	}
	even := func(r int) bool { return r%2 == 0 }
	if n := tb.count(even); n != 2 {
		t.Errorf("count(even) = %d", n)
	}
	if r, ok := tb.endedAmong(func(r int) bool { return r != 3 }); !ok || r != 1 {
		t.Errorf("endedAmong(not 3) = %d, %v; want 1", r, ok)
	}
	if _, ok := tb.endedAmong(even); ok {
		t.Error("endedAmong(even): a rank of none that ended")
	}
}

// TestRankTablePort: a rank is claimed through -pmi-port once, and only a
// rank of this node.
func TestRankTablePort(t *testing.T) {
	tb := newRankTable(0)
	tb.add([]int{4})
	served := make(chan struct{})
	if c := tb.claimPort(4, served); c != portClaimed {
		t.Errorf("first claim = %v", c)
	}
	if c := tb.claimPort(4, nil); c != portTaken {
		t.Errorf("second claim = %v", c)
	}
	if c := tb.claimPort(5, nil); c != portNoRank {
		t.Errorf("claim of another node's rank = %v", c)
	}
	tb.started(4, &proc{pid: 400}, nil) // a -pmi-port rank has no inherited connection
	if tb.served(4) != (<-chan struct{})(served) {
		t.Error("the claim's connection was forgotten at the start")
	}
}
