package remote

import (
	"prun/remote/wire"
	"sync"
	"testing"

	"prun/daemon"
	"prun/iof"
)

// The acknowledgements to a child's subtree go as one frame to the
// launcher's child; a relay takes its own and passes the others on, one
// frame per next hop.
func TestAckQueuesCombine(t *testing.T) {
	type sent struct {
		dest int
		typ  uint8
		p    []byte
	}
	var out []sent
	acks, frames := 0, 0
	a := &ackQueues{fanout: 2, q: map[int][]wire.Queued{}, busy: map[int]bool{},
		send:  func(dest int, typ uint8, p []byte) error { out = append(out, sent{dest, typ, p}); return nil },
		count: func(k, f int) { acks += k; frames += f }}
	ack := func(v int) outAck { return outAck{v, wire.EncodeOutAck(100*v, wire.OutKey{}, false)} }
	// Vertices 1 and 2 are the launcher's children; 3, 4 are 1's, 7, 8 3's.
	a.push([]outAck{ack(2)})
	if len(out) != 1 || out[0].dest != 2 || out[0].typ != wire.TOutputAck {
		t.Fatalf("a lone acknowledgement went as %+v", out)
	}
	a.push([]outAck{ack(1), ack(3), ack(7), ack(8), ack(4)})
	if len(out) != 2 || out[1].dest != 1 || out[1].typ != wire.TBatch || acks != 6 || frames != 2 {
		t.Fatalf("vertex 1's subtree's acknowledgements went in %d frames (the last to %d, type %d); counted %d acks in %d frames",
			len(out), out[len(out)-1].dest, out[len(out)-1].typ, acks, frames)
	}
	dest, _, _, err := wire.Header(out[1].p)
	if err != nil || dest != 1 {
		t.Fatalf("the batch's header: %d, %v", dest, err)
	}

	// Vertex 1's part: nodeside's TestAckBatchPassesOn.
}

// The launcher acknowledges the runs of a relay's subtree together once it
// has written the last it had queued of that subtree, and a node's quarter
// window at once.
func TestOutFlowAcksByHop(t *testing.T) {
	var mu sync.Mutex
	var got [][]int // the vertices of each call
	gate := make(chan struct{})
	f := newOutFlow(4, 4<<10, gated(gate), func(acks []outAck) {
		mu.Lock()
		defer mu.Unlock()
		var vs []int
		for _, a := range acks {
			vs = append(vs, a.v)
		}
		got = append(got, vs)
	}, func(daemon.Event) {})
	f.hop = func(v int) int { return 1 } // every vertex below the launcher's child 1
	for v := 1; v <= 4; v++ {
		f.push(wire.OutKey{Src: iof.Source{Rank: v}, St: iof.Stdout}, outRun{v: v, p: []byte("a line\n")})
	}
	close(gate) // the writes wait until all four are queued
	f.wait()
	mu.Lock()
	calls := got
	mu.Unlock()
	if len(calls) != 1 || len(calls[0]) != 4 {
		t.Errorf("four nodes' runs queued together were acknowledged in calls %v, want one of four", calls)
	}
	// A quarter of the window goes at once, whatever is queued.
	mu.Lock()
	got = nil
	mu.Unlock()
	f.push(wire.OutKey{Src: iof.Source{Rank: 1}, St: iof.Stdout}, outRun{v: 1, p: make([]byte, 1<<10)})
	f.push(wire.OutKey{Src: iof.Source{Rank: 2}, St: iof.Stdout}, outRun{v: 2, p: []byte("x\n")})
	f.wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || len(got[0]) == 0 || got[0][0] != 1 {
		t.Errorf("acknowledgements %v; want vertex 1's quarter window first", got)
	}
}

// gated is a sink whose writes wait until its gate closes.
type gated chan struct{}

func (g gated) Write(iof.Source, iof.Stream, []byte, bool) { <-g }
