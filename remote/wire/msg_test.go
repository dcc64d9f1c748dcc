package wire

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
	in := &Notify{Status: -3, Source: pmixsrv.Proc{Nspace: "a", Rank: pmixsrv.RankWildcard}, Range: 2,
		Info: []pmixsrv.Info{{Key: "k", Value: pmixsrv.Proc{Nspace: "b", Rank: 2}}, {Key: "s", Value: "v"}, {Key: "n", Value: uint32(5)}}}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	dest, src, body, err := Header(Frame(5, 0, b))
	if err != nil || dest != 5 || src != 0 {
		t.Fatalf("header: %d %d %v", dest, src, err)
	}
	var out Notify
	if err := Decode(body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Source != in.Source || out.Info[0].Value != (pmixsrv.Proc{Nspace: "b", Rank: 2}) || out.Info[2].Value != uint32(5) || out.Range != 2 {
		t.Fatalf("round trip: %+v", out)
	}

	// A request's id and fields; an answer with its type.
	req := &PublishReq{Entries: []names.Entry{{Key: "port", Value: "tcp://x", Publisher: "a:0"}, {Key: "r", Value: pmixsrv.Rank(4), FirstRead: true}}}
	req.SetID(7)
	b, _ = Encode(req)
	var pr PublishReq
	if err := Decode(b, &pr); err != nil || pr.ID != 7 || pr.Entries[0].Value != "tcp://x" || pr.Entries[1].Value != pmixsrv.Rank(4) || !pr.Entries[1].FirstRead {
		t.Fatalf("request round trip: %+v, %v", pr, err)
	}
	id, rb, err := ReplyID(EncodeReply(9, []byte{1, 2, 3}, nil))
	if err != nil || id != 9 {
		t.Fatalf("reply id %d, %v", id, err)
	}
	if data, err := DecodeReply[[]byte](rb); err != nil || !bytes.Equal(data, []byte{1, 2, 3}) {
		t.Fatalf("reply: %v, %v", data, err)
	}
	ev := daemon.Event{Kind: daemon.ProcExited, Nspace: "a", Rank: 3, Status: 2}
	b, _ = Encode(&ev)
	var evOut daemon.Event
	if err := Decode(b, &evOut); err != nil || evOut != ev {
		t.Fatalf("event: %+v, %v", evOut, err)
	}

	// PMIx statuses survive as statuses; other errors as text; the name
	// service's errors as themselves.
	for _, want := range []error{pmixsrv.ErrNotFound, names.ErrDuplicate, names.ErrTimeout} {
		_, rb, _ := ReplyID(EncodeReply(1, None{}, want))
		if _, err := DecodeReply[None](rb); !errors.Is(err, want) {
			t.Errorf("%v came back as %v", want, err)
		}
	}
	_, rb, _ = ReplyID(EncodeReply(1, None{}, errors.New("boom")))
	if _, err := DecodeReply[None](rb); err == nil || err.Error() != "boom" {
		t.Errorf("plain error came back as %v", err)
	}
	src2, st, p, partial, err := DecodeOutput(EncodeOutput(iof.Source{Job: 1, App: 2, Rank: 300}, iof.Stderr, []byte("hi"), true))
	if err != nil || src2 != (iof.Source{Job: 1, App: 2, Rank: 300}) || st != iof.Stderr || string(p) != "hi" || !partial {
		t.Errorf("output round trip: %v %v %q %v %v", src2, st, p, partial, err)
	}
}

// A value that cannot travel: a request fails its call with the error; an
// answer becomes the error.
func TestEncodeUnsupported(t *testing.T) {
	bad := []pmixsrv.Info{{Key: "k", Value: struct{}{}}}
	if _, err := Encode(&Notify{Info: bad}); err == nil || !strings.Contains(err.Error(), "cannot encode message: ") {
		t.Fatalf("encode: %v", err)
	}
	var c Calls
	got := make(chan error, 1)
	req := &notifyReq{Info: bad}
	Ask(&c, req, func() error { _, err := Encode(req); return err }, func(_ None, err error) { got <- err })
	if err := <-got; err == nil || !strings.Contains(err.Error(), "cannot encode message: ") {
		t.Fatalf("call: %v", err)
	}
	_, rb, _ := ReplyID(EncodeReply(4, bad, nil))
	if _, err := DecodeReply[None](rb); err == nil || !strings.Contains(err.Error(), "cannot encode message: ") {
		t.Fatalf("answer: %v", err)
	}
}

// notifyReq is a request that carries values of any type (tests only).
type notifyReq struct {
	Request
	Info []pmixsrv.Info
}

func TestCallsFailPending(t *testing.T) {
	var c Calls
	got := make(chan error, 2)
	c.Add(func(_ []byte, err error) { got <- err })
	c.Fail(errors.New("link lost"))
	if err := <-got; err == nil || err.Error() != "link lost" {
		t.Fatalf("pending call got %v", err)
	}
	if _, ok := c.Add(func([]byte, error) {}); ok {
		t.Fatal("a call was accepted after the link was lost")
	}
}

// FuzzDecode feeds a daemon's or the launcher's frame parsing arbitrary
// bytes: errors, never a panic or a huge allocation.
func FuzzDecode(f *testing.F) {
	b, _ := Encode(&SpawnReq{Request: Request{ID: 1}, Parent: pmixsrv.Proc{Nspace: "x"}, Apps: []daemon.SpawnApp{{Cmd: "c", NP: 1}}})
	f.Add(Frame(1, 0, b))
	b, _ = Encode(&Notify{Info: []pmixsrv.Info{{Key: "k", Value: []pmixsrv.Info{{Key: "n", Value: pmixsrv.Rank(1)}}}}})
	f.Add(Frame(0, 1, b))
	b, _ = Encode(&PublishReq{Entries: []names.Entry{{Key: "p", Value: "v"}}})
	f.Add(Frame(0, 1, b))
	f.Add(Frame(0, 1, EncodeReply(3, Entries{{Key: "p", Value: pmixsrv.Rank(2)}}, nil)))
	f.Add(Frame(0, 2, EncodeOutput(iof.Source{Rank: 1}, iof.Stdout, []byte("line\n"), false)))
	b, _ = Encode(&SubtreeHellos{Hellos: []Hello{{Vertex: 1, Host: "a", Topo: "pack:1"}, {Vertex: 3, TopoOf: 1}}})
	f.Add(Frame(0, 1, b))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, body, err := Header(p)
		if err != nil {
			return
		}
		for _, m := range []any{&Hello{}, &SubtreeHellos{}, &NodeErr{}, &Notify{}, &SpawnReq{}, &PublishReq{}, &LookupReq{}, &daemon.Event{}, &CollFail{}} {
			Decode(body, m)
		}
		if _, rb, err := ReplyID(body); err == nil {
			DecodeReply[Entries](rb)
			DecodeReply[[]pmixsrv.ProcInfo](rb)
		}
		DecodeOutput(body)
		DecodeAck(body, PreloadChunk)
		DecodeChunk(body)
	})
}
