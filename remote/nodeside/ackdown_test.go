package nodeside

import (
	"testing"
	"time"

	"prun/ctl"
	"prun/remote/spawn"
	"prun/remote/wire"
)

// Vertex 1 takes its own of the launcher's acknowledgements and passes 3's
// subtree's on as one frame (the launcher's part: remote's
// TestAckQueuesCombine). Vertices 1 and 2 are the launcher's children; 3, 4
// are 1's, 7, 8 3's.
func TestAckBatchPassesOn(t *testing.T) {
	var fs []wire.Queued
	for _, v := range []int{1, 3, 7, 8, 4} {
		fs = append(fs, wire.Queued{Typ: wire.TOutputAck, P: wire.Frame(uint32(v), wire.ToLauncher, wire.EncodeOutAck(100*v, wire.OutKey{}, false))})
	}
	var batch []byte
	wire.SendDown(func(_ int, _ uint8, p []byte) error { batch = p; return nil }, 1, wire.ToLauncher, fs)
	_, _, body, err := wire.Header(batch)
	if err != nil {
		t.Fatal(err)
	}
	// Vertex 1 takes its own and passes 3's subtree's on as one frame.
	secret, _ := ctl.NewSecret()
	ln, err := ctl.ListenOn([]string{"127.0.0.1"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l1, err := ctl.Dial(ln.Addr().String(), secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l3 := <-ln.Links()
	defer l1.Close()
	defer l3.Close()
	n := &node{me: 1, boot: wire.Bootstrap{Fanout: 2, Hosts: make([]string, 8)}, out: wire.NewOutCredit(1 << 20)}
	n.out.Inflight = 1000
	n.kids = &spawn.Spawner{Me: 1, Boot: n.boot, Links: map[int]*ctl.Link{3: l1}}
	if err := n.ackBatch(body); err != nil {
		t.Fatal(err)
	}
	if n.out.Inflight != 900 {
		t.Errorf("vertex 1 took %d bytes of acknowledgements, want 100", 1000-n.out.Inflight)
	}
	f, err := l3.Recv()
	if err != nil {
		t.Fatal(err)
	}
	dest, _, body, err := wire.Header(f.Payload)
	if err != nil || f.Type != wire.TBatch || dest != 3 {
		t.Fatalf("vertex 1 passed on a frame of type %d to %d (%v)", f.Type, dest, err)
	}
	var got []int
	if _, err := wire.DecodeBatchOf(body, wire.AckDownAllowed, func(_ uint8, p []byte) {
		d, _, _, _ := wire.Header(p)
		got = append(got, int(d))
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 3 || got[1] != 7 || got[2] != 8 {
		t.Errorf("vertex 1 passed on acknowledgements for %v, want [3 7 8]", got)
	}
	// A batch of another kind from the parent is refused.
	if err := n.ackBatch(wire.EncodeBatch([]wire.Queued{{Typ: wire.TOutput, P: wire.Frame(1, 0, nil)}})); err == nil {
		t.Error("a batch of output from the parent was taken")
	}
}
