package remote

import (
	"bytes"
	"errors"
	"testing"

	"prun/daemon"
	"prun/iof"
	"prun/names"
	"prun/pmixsrv"
)

func TestMessagesRoundTrip(t *testing.T) {
	in := &msg{ID: 7, Host: "n1", Kind: "pmix", Procs: []pmixsrv.Proc{{Nspace: "a", Rank: pmixsrv.RankWildcard}},
		Data: []byte{1, 2, 3}, Info: []pmixsrv.Info{{Key: "k", Value: pmixsrv.Proc{Nspace: "b", Rank: 2}},
			{Key: "s", Value: "v"}, {Key: "n", Value: uint32(5)}},
		Entries: []names.Entry{{Key: "port", Value: "tcp://x", Publisher: "a:0"}},
		Event:   &daemon.Event{Kind: daemon.ProcExited, Nspace: "a", Rank: 3, Status: 2}}
	body := frame(5, 0, encode(in))
	dest, src, b, err := header(body)
	if err != nil || dest != 5 || src != 0 {
		t.Fatalf("header: %d %d %v", dest, src, err)
	}
	var r recvStream
	out, err := r.decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != 7 || out.Info[0].Value != (pmixsrv.Proc{Nspace: "b", Rank: 2}) || out.Info[2].Value != uint32(5) ||
		out.Entries[0].Value != "tcp://x" || out.Event.Rank != 3 || !bytes.Equal(out.Data, in.Data) {
		t.Fatalf("round trip: %+v", out)
	}
	// PMIx statuses survive as statuses; other errors as text.
	if err := errOf(&msg{}, pmixsrv.ErrNotFound).err(); !errors.Is(err, pmixsrv.ErrNotFound) {
		t.Errorf("status error came back as %v", err)
	}
	if err := errOf(&msg{}, errors.New("boom")).err(); err == nil || err.Error() != "boom" {
		t.Errorf("plain error came back as %v", err)
	}
	src2, st, p, partial, err := decodeOutput(encodeOutput(iof.Source{Job: 1, App: 2, Rank: 300}, iof.Stderr, []byte("hi"), true))
	if err != nil || src2 != (iof.Source{Job: 1, App: 2, Rank: 300}) || st != iof.Stderr || string(p) != "hi" || !partial {
		t.Errorf("output round trip: %v %v %q %v %v", src2, st, p, partial, err)
	}
}

func TestStreamsCarryTypesOnce(t *testing.T) {
	var (
		s      sendStream
		r      recvStream
		bodies [][]byte
	)
	collect := func(b []byte) error { bodies = append(bodies, b); return nil }
	for i := 0; i < 3; i++ {
		m := &msg{ID: uint64(i), Event: &daemon.Event{Kind: daemon.ProcStarted, Nspace: "prun.1.1", Rank: i, Node: "h1", Pid: 100 + i},
			Info: []pmixsrv.Info{{Key: "r", Value: pmixsrv.Rank(i)}}}
		if err := s.send(m, collect); err != nil {
			t.Fatal(err)
		}
	}
	if bodies[0][0] != bodyRestart || bodies[1][0] != bodyStream || len(bodies[1]) > len(bodies[0])/4 {
		t.Fatalf("bodies of %d, %d bytes (kinds %d, %d): the second should carry no types", len(bodies[0]), len(bodies[1]), bodies[0][0], bodies[1][0])
	}
	for i, b := range bodies {
		m, err := r.decode(b)
		if err != nil || m.ID != uint64(i) || m.Event.Rank != i || m.Info[0].Value != pmixsrv.Rank(i) {
			t.Fatalf("body %d: %+v, %v", i, m, err)
		}
	}
	// A body that cannot be read stops the stream until the sender restarts it.
	if _, err := r.decode(append([]byte{bodyStream}, 0xff, 0xff, 0xff)); err == nil {
		t.Fatal("garbage decoded")
	}
	if _, err := r.decode(bodies[2]); err == nil {
		t.Fatal("a stream's value decoded after a bad body")
	}
	if m, err := r.decode(bodies[0]); err != nil || m.ID != 0 {
		t.Fatalf("restart: %+v, %v", m, err)
	}
	// Self-contained bodies (broadcasts) read anywhere.
	var fresh recvStream
	if m, err := fresh.decode(encode(&msg{ID: 9})); err != nil || m.ID != 9 {
		t.Fatalf("self-contained body: %+v, %v", m, err)
	}
}

func TestCallsFailPending(t *testing.T) {
	var c calls
	got := make(chan error, 2)
	c.add(func(m *msg) { got <- m.err() })
	c.fail(errors.New("link lost"))
	if err := <-got; err == nil || err.Error() != "link lost" {
		t.Fatalf("pending call got %v", err)
	}
	if _, ok := c.add(func(*msg) {}); ok {
		t.Fatal("a call was accepted after the link was lost")
	}
}

// FuzzDecode feeds a daemon's or the launcher's frame parsing arbitrary
// bytes: errors, never a panic or a huge allocation.
func FuzzDecode(f *testing.F) {
	f.Add(frame(1, 0, encode(&msg{ID: 1, Host: "h", Procs: []pmixsrv.Proc{{Nspace: "x"}}})))
	var s sendStream
	s.send(&msg{ID: 2, Info: []pmixsrv.Info{{Key: "k", Value: "v"}}}, func(b []byte) error { f.Add(frame(0, 1, b)); return nil })
	f.Add(frame(0, 2, encodeOutput(iof.Source{Rank: 1}, iof.Stdout, []byte("line\n"), false)))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, body, err := header(p)
		if err != nil {
			return
		}
		var r recvStream
		r.decode(body)
		r.decode(body) // a second body on the same stream
		decodeOutput(body)
		decodeAck(body, preloadChunk)
		decodeChunk(body)
	})
}
