package ctl

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A host on the network path between two vertices can relay their
// handshake, which it cannot forge, and then hold the stream. Every frame
// after the handshake must then fail on it: altered, replayed, reordered,
// taken from another link or cut short, it kills the link instead of being
// read. These tests play that host.

// tap is a link pair a (dialer) and b (listener's end) whose bytes pass
// through the test: b's go to a untouched; a's are relayed to b during the
// handshake, then captured, and b reads only what the test writes to toB.
type tap struct {
	a, b  *Link
	toB   io.Writer
	fromA chan []byte // a's writes after the handshake, one per read (a small frame's single write)
}

// pump copies src to dst until capture is set, then hands every read of
// src to out instead.
func pump(src io.Reader, dst io.Writer, capture *atomic.Bool, out chan<- []byte) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if capture.Load() {
				out <- append([]byte(nil), buf[:n]...)
			} else if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// quietLinks keeps heartbeats out of a test that counts frames.
func quietLinks(t *testing.T) { setLiveness(t, time.Hour, 10*time.Second) }

// tcpTap links a dialer through a relay to ln, whose secret is secret.
func tcpTap(t *testing.T, ln *Listener, secret []byte) *tap {
	t.Helper()
	relay, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	tp := &tap{fromA: make(chan []byte, 16)}
	var capture atomic.Bool
	go func() {
		c1, err := relay.Accept()
		if err != nil {
			return
		}
		c2, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			c1.Close()
			return
		}
		t.Cleanup(func() { c1.Close(); c2.Close() })
		tp.toB = c2
		go io.Copy(c1, c2)
		pump(c1, c2, &capture, tp.fromA)
	}()
	a, err := Dial(relay.Addr().String(), secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// b is delivered once it read a's whole handshake: nothing of it is
	// left in the relay when capturing starts.
	b := <-ln.Links()
	capture.Store(true)
	tp.a, tp.b = a, b
	t.Cleanup(func() { a.Close(); b.Close() })
	return tp
}

func tcpTaps(t *testing.T, n int) []*tap {
	t.Helper()
	secret, _ := NewSecret()
	ln, err := ListenOn([]string{"127.0.0.1"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var taps []*tap
	for range n {
		taps = append(taps, tcpTap(t, ln, secret))
	}
	return taps
}

// streamTap is tap over pipes, as a link over an SSH session's stdio.
func streamTap(t *testing.T) *tap {
	t.Helper()
	secret, _ := NewSecret()
	aIn, bToA, _ := os.Pipe()   // what b writes, a reads
	aOutR, aOut, _ := os.Pipe() // what a writes, the relay reads
	bIn, toB, _ := os.Pipe()    // what the relay writes, b reads
	t.Cleanup(func() {
		for _, f := range []*os.File{aIn, bToA, aOutR, aOut, bIn, toB} {
			f.Close()
		}
	})
	tp := &tap{toB: toB, fromA: make(chan []byte, 16)}
	var capture atomic.Bool
	go pump(aOutR, toB, &capture, tp.fromA)
	got := make(chan *Link, 1)
	go func() {
		l, _ := AcceptStream(bIn, bToA, closers{bIn, bToA}, secret, 2*time.Second)
		got <- l
	}()
	a, err := DialStream(aIn, aOut, closers{aIn, aOut}, secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil {
		t.Fatal("accept failed")
	}
	capture.Store(true)
	tp.a, tp.b = a, b
	t.Cleanup(func() { a.Close(); b.Close() })
	return tp
}

type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

// send sends a frame on a and returns its bytes on the wire, gathered
// from as many reads as it took.
func (tp *tap) send(t *testing.T, typ uint8, payload string) []byte {
	t.Helper()
	if err := tp.a.Send(typ, []byte(payload)); err != nil {
		t.Fatal(err)
	}
	var f []byte
	for len(f) < headerSize || len(f) < headerSize+int(binary.BigEndian.Uint32(f))+tagSize {
		select {
		case b := <-tp.fromA:
			f = append(f, b...)
		case <-time.After(5 * time.Second):
			t.Fatalf("the frame never reached the relay whole (%d bytes of it)", len(f))
		}
	}
	return f
}

// deliver writes bytes to b as the relay.
func (tp *tap) deliver(t *testing.T, bs ...[]byte) {
	t.Helper()
	for _, b := range bs {
		if _, err := tp.toB.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// recv expects the frame typ, payload at b.
func (tp *tap) recv(t *testing.T, typ uint8, payload string) {
	t.Helper()
	f, err := tp.b.Recv()
	if err != nil || f.Type != typ || string(f.Payload) != payload {
		t.Fatalf("Recv: type %d %q, %v; want type %d %q", f.Type, f.Payload, err, typ, payload)
	}
}

// refused expects b's next Recv to fail on an authentication failure, and
// b dead after it.
func (tp *tap) refused(t *testing.T) {
	t.Helper()
	f, err := tp.b.Recv()
	if err == nil {
		t.Fatalf("Recv returned a frame of type %d, %q: want the link killed", f.Type, f.Payload)
	}
	if !errors.Is(err, ErrFrameAuth) || !strings.Contains(err.Error(), "failed authentication") {
		t.Errorf("Recv: %v, want an authentication failure", err)
	}
	select {
	case <-tp.b.Done():
	case <-time.After(2 * time.Second):
		t.Error("the link lives on after a frame failed authentication")
	}
	if f, err := tp.b.Recv(); err == nil {
		t.Errorf("Recv after the failure returned a frame of type %d, %q", f.Type, f.Payload)
	}
	if err := tp.b.Send(7, []byte("still here")); err == nil {
		t.Error("Send on the killed link succeeded")
	}
}

func TestFramesAuthenticated(t *testing.T) {
	quietLinks(t)
	kinds := map[string]func(*testing.T) *tap{
		"tcp":    func(t *testing.T) *tap { return tcpTaps(t, 1)[0] },
		"stream": streamTap,
	}
	for kind, mk := range kinds {
		t.Run(kind, func(t *testing.T) { tamperings(t, mk) })
	}
	// A frame of another link between the same vertices, under the same
	// launch secret, at the same position in its stream.
	t.Run("other-link", func(t *testing.T) {
		taps := tcpTaps(t, 2)
		f := taps[0].send(t, 7, "spawn")
		taps[1].send(t, 7, "spawn")
		taps[1].deliver(t, f)
		taps[1].refused(t)
	})
}

// tamperings relays frames between a tap's ends, as they were sent and as a
// host on the path could alter them.
func tamperings(t *testing.T, mk func(*testing.T) *tap) {
	t.Run("relayed", func(t *testing.T) {
		tp := mk(t)
		tp.deliver(t, tp.send(t, 7, "one"), tp.send(t, 8, "two"))
		tp.recv(t, 7, "one")
		tp.recv(t, 8, "two")
	})
	t.Run("tampered-payload", func(t *testing.T) {
		tp := mk(t)
		f := tp.send(t, 7, "launch /bin/true")
		f[len(f)/2] ^= 1
		tp.deliver(t, f)
		tp.refused(t)
	})
	t.Run("tampered-type", func(t *testing.T) {
		tp := mk(t)
		f := tp.send(t, 7, "launch /bin/true")
		f[4] ^= 1
		tp.deliver(t, f)
		tp.refused(t)
	})
	t.Run("tampered-length", func(t *testing.T) {
		// Shortened by 4: the payload's last bytes would be
		// taken for the tag's first, and the tag's last for the
		// next frame's header.
		tp := mk(t)
		f := tp.send(t, 7, "launch /bin/true")
		binary.BigEndian.PutUint32(f, uint32(len("launch /bin/true")-4))
		tp.deliver(t, f)
		tp.refused(t)
	})
	t.Run("large", func(t *testing.T) {
		// Over smallFrame: written by writev, uncopied.
		tp := mk(t)
		big := strings.Repeat("0123456789abcdef", 20<<10)
		f1, f2 := tp.send(t, 7, big), tp.send(t, 8, "after")
		// A pipe holds less than the frame: b reads as it comes.
		go tp.toB.Write(append(f1, f2...))
		tp.recv(t, 7, big)
		tp.recv(t, 8, "after")
		f := tp.send(t, 7, big)
		f[len(f)/2] ^= 1
		go tp.toB.Write(f)
		tp.refused(t)
	})
	t.Run("tampered-last-byte", func(t *testing.T) {
		tp := mk(t)
		f := tp.send(t, 7, "launch /bin/true")
		f[len(f)-1] ^= 0x80
		tp.deliver(t, f)
		tp.refused(t)
	})
	t.Run("replayed", func(t *testing.T) {
		tp := mk(t)
		f := tp.send(t, 7, "kill 15")
		tp.deliver(t, f)
		tp.recv(t, 7, "kill 15")
		tp.deliver(t, f)
		tp.refused(t)
	})
	t.Run("reordered", func(t *testing.T) {
		tp := mk(t)
		f1, f2 := tp.send(t, 7, "first"), tp.send(t, 7, "second")
		tp.deliver(t, f2, f1)
		tp.refused(t)
	})
	t.Run("dropped", func(t *testing.T) {
		tp := mk(t)
		tp.send(t, 7, "first")
		tp.deliver(t, tp.send(t, 7, "second"))
		tp.refused(t)
	})
	t.Run("truncated-tag", func(t *testing.T) {
		tp := mk(t)
		f1, f2 := tp.send(t, 7, "first"), tp.send(t, 7, "second")
		tp.deliver(t, f1[:len(f1)-1], f2)
		tp.refused(t)
	})
	t.Run("injected", func(t *testing.T) {
		tp := mk(t)
		// A frame in the clear, as the wire carried them before,
		// and 16 bytes for a tag it cannot compute.
		tp.deliver(t, []byte{0, 0, 0, 4, 7, 'e', 'v', 'i', 'l'}, make([]byte, 16))
		tp.refused(t)
	})
}
