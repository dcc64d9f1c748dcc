package ctl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// pair runs the listener's handshake on one end of a TCP loopback
// connection (a real socket, as the daemons will use) and returns the
// listener's result and the dialer's connection.
func pair(t *testing.T, secret []byte) (net.Conn, chan error, chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	res := make(chan error, 1)
	conns := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- err
			return
		}
		err = Handshake(c, secret, true, 2*time.Second)
		res <- err
		conns <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, res, conns
}

func TestHandshakeAndFrames(t *testing.T) {
	secret, _ := NewSecret()
	c, res, conns := pair(t, secret)
	if err := Handshake(c, secret, false, 2*time.Second); err != nil {
		t.Fatalf("dialer: %v", err)
	}
	if err := <-res; err != nil {
		t.Fatalf("listener: %v", err)
	}
	s := <-conns
	want := Frame{Type: 7, Payload: []byte("fence contribution")}
	go WriteFrame(c, want)
	got, err := ReadFrame(s)
	if err != nil || got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) {
		t.Fatalf("frame: %+v %v", got, err)
	}
}

// A listener refuses a peer without the secret, or with a wrong one, and
// reads nothing from it.
func TestHandshakeRefuses(t *testing.T) {
	secret, _ := NewSecret()
	wrong, _ := NewSecret()

	c, res, _ := pair(t, secret)
	if err := Handshake(c, wrong, false, 2*time.Second); !errors.Is(err, ErrAuth) {
		t.Errorf("dialer with a wrong secret: %v, want ErrAuth", err)
	}
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Errorf("listener against a wrong secret: %v, want ErrAuth", err)
	}

	// No secret at all: a peer that sends a frame straight away.
	c, res, _ = pair(t, secret)
	WriteFrame(c, Frame{Type: 1, Payload: bytes.Repeat([]byte("run /bin/evil "), 10)})
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Errorf("listener against a frame instead of a handshake: %v, want ErrAuth", err)
	}

	// A peer that connects and says nothing is dropped at the deadline.
	_, res, _ = pair(t, secret)
	select {
	case err := <-res:
		if !errors.Is(err, ErrAuth) {
			t.Errorf("silent peer: %v, want ErrAuth", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("a silent peer held the listener past its deadline")
	}
}

// The listener's answer cannot be reflected back to authenticate a dialer
// that lacks the secret (the roles differ).
func TestNoReflection(t *testing.T) {
	secret, _ := NewSecret()
	ch := bytes.Repeat([]byte{1}, 32)
	if bytes.Equal(mac(secret, ch, roleListener), mac(secret, ch, roleDialer)) {
		t.Fatal("listener and dialer answers coincide")
	}
}

func TestFrameLimits(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrame(&b, Frame{Payload: make([]byte, MaxFrame+1)}); err == nil {
		t.Error("oversized frame written")
	}
	b.Reset()
	b.Write([]byte{0xff, 0xff, 0xff, 0xff, 1})
	if _, err := ReadFrame(&b); err == nil {
		t.Error("oversized length accepted")
	}
	b.Reset()
	b.Write([]byte{0, 0, 0, 9, 1, 'a'})
	if _, err := ReadFrame(&b); err == nil {
		t.Error("truncated frame accepted")
	}
}

// FuzzReadFrame: any bytes give a frame or an error, never a panic or a
// huge allocation, and a frame read back re-encodes to its bytes.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 2, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		fr, err := ReadFrame(r)
		if err != nil {
			return
		}
		var b bytes.Buffer
		WriteFrame(&b, fr)
		if !bytes.Equal(b.Bytes(), data[:len(data)-r.Len()]) {
			t.Fatalf("re-encoding differs")
		}
		_ = io.Discard
	})
}

// A listener given port ranges takes a free port of them, skipping taken
// ones, and says so when none is left.
func TestListenPorts(t *testing.T) {
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	// three free ports in a row, found by the kernel
	var base int
	for try := 0; try < 50 && base == 0; try++ {
		probe, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := probe.Addr().(*net.TCPAddr).Port
		probe.Close()
		if p+2 > 65535 {
			continue
		}
		ok := true
		for q := p; q <= p+2 && ok; q++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(q)))
			if ok = err == nil; ok {
				l.Close()
			}
		}
		if ok {
			base = p
		}
	}
	if base == 0 {
		t.Fatal("no three free ports in a row")
	}
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+1)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var got []*Listener
	for range 2 {
		l, err := ListenOn([]string{"127.0.0.1"}, [][2]int{{base, base + 2}}, secret)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got = append(got, l)
	}
	ports := map[int]bool{}
	for _, l := range got {
		ports[l.Addr().(*net.TCPAddr).Port] = true
	}
	if !ports[base] || !ports[base+2] {
		t.Errorf("listeners on %v, want %d and %d", ports, base, base+2)
	}
	_, err = ListenOn([]string{"127.0.0.1"}, [][2]int{{base, base + 2}}, secret)
	if want := fmt.Sprintf("no free port in %d-%d", base, base+2); err == nil || err.Error() != want {
		t.Errorf("full range: %v, want %q", err, want)
	}
}
