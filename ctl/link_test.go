package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// linkPair is a sender's link dialled to a listener and the listener's end.
func linkPair(t testing.TB) (*Link, *Link) {
	t.Helper()
	secret, _ := NewSecret()
	ln, err := ListenOn([]string{"127.0.0.1"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	a, err := Dial(ln.Addr().String(), secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := <-ln.Links()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func framePayload(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8), 'x'}, 100000) }

// A peer that does not read makes a Send time out part-way through a frame:
// the link is then dead, every later Send fails at once, and the peer reads
// whole frames, in order, then the end of the link; never the rest of a
// frame taken for a header (issue 24: "frame of 859059510 bytes").
func TestLinkWholeFramesOrDead(t *testing.T) {
	setLiveness(t, HeartbeatEvery, 300*time.Millisecond)
	a, b := linkPair(t)

	sent := 0
	var err error
	for ; sent < 2000; sent++ {
		if err = a.Send(9, framePayload(sent)); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("2000 frames of 300 kB went to a peer that reads nothing")
	}
	if !strings.Contains(err.Error(), "read nothing") {
		t.Errorf("the failed Send: %v", err)
	}
	// The peer starts reading: the link must not carry anything more.
	got := make(chan []Frame, 1)
	go func() {
		var fs []Frame
		for {
			f, err := b.Recv()
			if err != nil {
				got <- fs
				return
			}
			fs = append(fs, f)
		}
	}()
	for i := 0; i < 5; i++ {
		start := time.Now()
		if err := a.Send(9, framePayload(sent+1+i)); err == nil || time.Since(start) > 100*time.Millisecond {
			t.Errorf("Send on a dead link: %v after %v, want an error at once", err, time.Since(start))
		}
	}
	if err := a.Send(TypeHeartbeat, nil); err == nil {
		t.Error("a heartbeat went out on a dead link")
	}
	var fs []Frame
	select {
	case fs = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's Recv did not end after the link died")
	}
	if len(fs) > sent {
		t.Errorf("the peer read %d frames, %d were sent whole", len(fs), sent)
	}
	for i, f := range fs {
		if f.Type != 9 || !bytes.Equal(f.Payload, framePayload(i)) {
			t.Fatalf("frame %d of %d: type %d, %d bytes: not the frame sent", i, len(fs), f.Type, len(f.Payload))
		}
	}
	t.Logf("%d frames sent whole before the timeout; the peer read %d", sent, len(fs))
}

// A link over a stream (an SSH session's stdio) follows the same rule.
func TestStreamLinkWholeFramesOrDead(t *testing.T) {
	setLiveness(t, HeartbeatEvery, 300*time.Millisecond)
	secret, _ := NewSecret()
	x, y := pipes()
	ch := make(chan *Link, 1)
	go func() {
		l, _ := AcceptStream(y.r, y.w, y, secret, time.Second)
		ch <- l
	}()
	a, err := DialStream(x.r, x.w, x, secret, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	if b == nil {
		t.Fatal("accept failed")
	}
	defer a.Close()
	defer b.Close()
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1000 frames went to a peer that reads nothing")
		}
		if a.Send(9, framePayload(i)) != nil {
			break
		}
	}
	if err := a.Send(9, []byte("after")); err == nil {
		t.Error("Send on a dead stream link succeeded")
	}
}
