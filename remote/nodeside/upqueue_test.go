package nodeside

import (
	"fmt"
	"prun/remote/wire"
	"testing"
	"time"

	"prun/ctl"
	"prun/iof"
)

// upLink is a daemon's upward queue on a real link, and the parent's end.
func upLink(t *testing.T) (*upQueue, *ctl.Link) {
	t.Helper()
	secret, _ := ctl.NewSecret()
	ln, err := ctl.ListenOn([]string{"127.0.0.1"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	a, err := ctl.Dial(ln.Addr().String(), secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := <-ln.Links()
	t.Cleanup(func() { a.Close(); b.Close() })
	return newUpQueue(a), b
}

// The queue keeps the order of everything sent, batches only batchable
// frames, and sends a lone frame by itself at once (no timer holds it).
func TestUpQueue(t *testing.T) {
	u, parent := upLink(t)

	// A lone line goes alone, and at once.
	start := time.Now()
	u.Send(wire.TOutput, wire.OutputFrame(1, iof.Source{}, iof.Stdout, []byte("hello\n"), false))
	f, err := parent.Recv()
	if err != nil || f.Type != wire.TOutput {
		t.Fatalf("got %d, %v; want the output frame itself", f.Type, err)
	}
	t.Logf("a lone line took %v", time.Since(start))

	// Many frames from several senders, a collective among them: per
	// sender in order, the collective alone, fewer frames than messages.
	const senders, each = 4, 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range senders {
			go func() {
				for i := range each {
					typ := wire.TOutput
					if s == 0 && i == each/2 {
						typ = wire.TColl
					}
					u.Send(typ, wire.Frame(wire.ToLauncher, uint32(s), fmt.Appendf(nil, "%d", i)))
				}
			}()
		}
	}()
	next := make([]int, senders)
	frames, msgs := 0, 0
	take := func(typ uint8, p []byte) {
		msgs++
		_, src, body, _ := wire.Header(p)
		var i int
		fmt.Sscanf(string(body), "%d", &i)
		if i != next[src] {
			t.Fatalf("sender %d: message %d after %d", src, i, next[src]-1)
		}
		if (typ == wire.TColl) != (src == 0 && i == each/2) {
			t.Fatalf("sender %d, message %d: type %d", src, i, typ)
		}
		next[src]++
	}
	for msgs < senders*each {
		f, err := parent.Recv()
		if err != nil {
			t.Fatal(err)
		}
		frames++
		if f.Type == wire.TBatch {
			if _, err := wire.DecodeBatch(f.Payload, take); err != nil {
				t.Fatal(err)
			}
		} else {
			take(f.Type, f.Payload)
		}
	}
	<-done
	t.Logf("%d messages in %d frames", msgs, frames)
	if frames >= msgs {
		t.Errorf("%d messages in %d frames: nothing was batched", msgs, frames)
	}

	// Once the link is gone, Send fails (and drain does not wait).
	parent.Close()
	u.l.Close()
	u.drain(time.Second)
	if err := u.Send(wire.TOutput, wire.Frame(wire.ToLauncher, 1, nil)); err == nil {
		t.Error("a Send after the link closed succeeded")
	}
}
