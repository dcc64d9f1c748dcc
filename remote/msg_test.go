package remote

import (
	"bytes"
	"errors"
	"strings"
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
		Entries: []names.Entry{{Key: "port", Value: "tcp://x", Publisher: "a:0"}, {Key: "r", Value: pmixsrv.Rank(4), FirstRead: true}},
		Plan:    []byte(`{"Nspace":"a"}`),
		Event:   &daemon.Event{Kind: daemon.ProcExited, Nspace: "a", Rank: 3, Status: 2}}
	body := frame(5, 0, encode(in))
	dest, src, b, err := header(body)
	if err != nil || dest != 5 || src != 0 {
		t.Fatalf("header: %d %d %v", dest, src, err)
	}
	out, err := decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != 7 || out.Info[0].Value != (pmixsrv.Proc{Nspace: "b", Rank: 2}) || out.Info[2].Value != uint32(5) ||
		out.Entries[0].Value != "tcp://x" || out.Entries[1].Value != pmixsrv.Rank(4) || !out.Entries[1].FirstRead ||
		out.Event.Rank != 3 || !bytes.Equal(out.Data, in.Data) || string(out.Plan) != `{"Nspace":"a"}` {
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

// A value that cannot travel still makes an answer, with the error.
func TestEncodeUnsupported(t *testing.T) {
	m, err := decode(encode(&msg{ID: 4, Info: []pmixsrv.Info{{Key: "k", Value: struct{}{}}}}))
	if err != nil || m.ID != 4 || !strings.Contains(m.Err, "cannot encode message: ") || len(m.Info) != 0 {
		t.Fatalf("got %+v, %v", m, err)
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
	f.Add(frame(0, 1, encode(&msg{ID: 2, Info: []pmixsrv.Info{{Key: "k", Value: []pmixsrv.Info{{Key: "n", Value: pmixsrv.Rank(1)}}}},
		Entries: []names.Entry{{Key: "p", Value: "v"}}})))
	f.Add(frame(0, 2, encodeOutput(iof.Source{Rank: 1}, iof.Stdout, []byte("line\n"), false)))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, body, err := header(p)
		if err != nil {
			return
		}
		decode(body)
		decodeOutput(body)
		decodeAck(body, preloadChunk)
		decodeChunk(body)
	})
}
