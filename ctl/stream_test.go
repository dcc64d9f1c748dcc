package ctl

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// pipeEnd is one side of a pair of pipes, like an SSH session's stdio seen
// from either end (buffered, as an SSH channel is).
type pipeEnd struct {
	r *os.File
	w *os.File
}

func (p pipeEnd) Close() error { p.r.Close(); return p.w.Close() }

func pipes() (a, b pipeEnd) {
	ar, bw, _ := os.Pipe()
	br, aw, _ := os.Pipe()
	return pipeEnd{ar, aw}, pipeEnd{br, bw}
}

func TestStreamLinks(t *testing.T) {
	secret, _ := NewSecret()
	a, b := pipes()
	type res struct {
		l   *Link
		err error
	}
	got := make(chan res, 1)
	go func() {
		l, err := AcceptStream(b.r, b.w, b, secret, time.Second)
		got <- res{l, err}
	}()
	dl, err := DialStream(a.r, a.w, a, secret, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	al := r.l
	defer al.Close()
	if err := dl.Send(7, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if f, err := al.Recv(); err != nil || f.Type != 7 || string(f.Payload) != "hello" {
		t.Fatalf("got %v %q %v", f.Type, f.Payload, err)
	}
	if dl.LocalAddr() != nil || al.RemoteAddr() != nil {
		t.Error("a stream link has an address")
	}
	dl.Close()
	if _, err := al.Recv(); err == nil {
		t.Fatal("Recv after the peer closed")
	}
}

func TestStreamLinkWrongSecret(t *testing.T) {
	s1, _ := NewSecret()
	s2, _ := NewSecret()
	a, b := pipes()
	go AcceptStream(b.r, b.w, b, s2, time.Second)
	if _, err := DialStream(a.r, a.w, a, s1, 1, time.Second); err != ErrAuth {
		t.Fatalf("dial with the wrong secret: %v, want ErrAuth", err)
	}
}

func TestStreamLinkSilentPeer(t *testing.T) {
	// A peer that says nothing is dropped after the handshake timeout, and
	// a linked peer that goes silent after DeadAfter.
	secret, _ := NewSecret()
	a, _ := pipes()
	start := time.Now()
	if _, err := DialStream(a.r, a.w, a, secret, 1, 200*time.Millisecond); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("handshake with a silent peer: %v after %v", err, time.Since(start))
	}

	// A read deadline that passes fails the read as a timeout (which Recv
	// reports as a missing heartbeat).
	a, _ = pipes()
	sc := &streamConn{r: a.r, w: a.w, c: a}
	sc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	start = time.Now()
	_, err := sc.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 2*time.Second {
		t.Fatalf("read past its deadline: %v after %v", err, time.Since(start))
	}
}
