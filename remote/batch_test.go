package remote

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"prun/ctl"
	"prun/iof"
)

func TestBatchRoundTrip(t *testing.T) {
	in := []queued{
		{tOutput, outputFrame(3, iof.Source{Rank: 1}, iof.Stdout, []byte("a line\n"), false)},
		{tEvent, frame(toLauncher, 3, []byte(`{"Kind":1}`))},
		{tEnd, frame(toLauncher, 3, nil)},
	}
	var out []queued
	k, err := decodeBatch(encodeBatch(in), func(typ uint8, p []byte) { out = append(out, queued{typ, p}) })
	if err != nil || k != len(in) || len(out) != len(in) {
		t.Fatalf("%d frames back (%d counted), %v", len(out), k, err)
	}
	for i := range in {
		if out[i].typ != in[i].typ || !bytes.Equal(out[i].p, in[i].p) {
			t.Errorf("frame %d came back as %d %q, want %d %q", i, out[i].typ, out[i].p, in[i].typ, in[i].p)
		}
	}

	// Nothing of a malformed batch is handled.
	good := encodeBatch(in)
	for name, b := range map[string][]byte{
		"empty":        nil,
		"cut header":   good[:3],
		"cut frame":    good[:len(good)-1],
		"huge length":  append([]byte{tOutput}, binary.BigEndian.AppendUint32(nil, 1<<31)...),
		"a collective": encodeBatch([]queued{{tOutput, []byte("12345678")}, {tColl, []byte("12345678")}}),
		"a batch":      encodeBatch([]queued{{tBatch, good}}),
		"a hello":      encodeBatch([]queued{{tHello, frame(toLauncher, 1, []byte("{}"))}}),
	} {
		n := 0
		if _, err := decodeBatch(b, func(uint8, []byte) { n++ }); err == nil || n > 0 {
			t.Errorf("%s: %v, %d frames handled; want an error and none", name, err, n)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(encodeBatch([]queued{{tOutput, []byte("12345678abc")}, {tEvent, []byte("12345678{}")}}))
	f.Add([]byte{tOutput, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		k, err := decodeBatch(b, func(typ uint8, p []byte) {
			if !batchable(typ) {
				t.Fatalf("type %d handed on", typ)
			}
			total += 5 + len(p)
		})
		if err == nil && (total != len(b) || k == 0) {
			t.Fatalf("%d frames of %d bytes from a batch of %d", k, total, len(b))
		}
	})
}

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
	u.Send(tOutput, outputFrame(1, iof.Source{}, iof.Stdout, []byte("hello\n"), false))
	f, err := parent.Recv()
	if err != nil || f.Type != tOutput {
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
					typ := tOutput
					if s == 0 && i == each/2 {
						typ = tColl
					}
					u.Send(typ, frame(toLauncher, uint32(s), fmt.Appendf(nil, "%d", i)))
				}
			}()
		}
	}()
	next := make([]int, senders)
	frames, msgs := 0, 0
	take := func(typ uint8, p []byte) {
		msgs++
		_, src, body, _ := header(p)
		var i int
		fmt.Sscanf(string(body), "%d", &i)
		if i != next[src] {
			t.Fatalf("sender %d: message %d after %d", src, i, next[src]-1)
		}
		if (typ == tColl) != (src == 0 && i == each/2) {
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
		if f.Type == tBatch {
			if _, err := decodeBatch(f.Payload, take); err != nil {
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
	if err := u.Send(tOutput, frame(toLauncher, 1, nil)); err == nil {
		t.Error("a Send after the link closed succeeded")
	}
}
