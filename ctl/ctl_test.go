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
func pair(t *testing.T, secret []byte) (net.Conn, chan error, chan *Link) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	res := make(chan error, 1)
	links := make(chan *Link, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- err
			return
		}
		l, err := Server(c, secret, 2*time.Second)
		res <- err
		links <- l
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, res, links
}

func TestHandshakeAndFrames(t *testing.T) {
	secret, _ := NewSecret()
	c, res, links := pair(t, secret)
	a, err := Client(c, secret, 1, 2*time.Second)
	if err != nil {
		t.Fatalf("dialer: %v", err)
	}
	defer a.Close()
	if err := <-res; err != nil {
		t.Fatalf("listener: %v", err)
	}
	b := <-links
	defer b.Close()
	for _, want := range []Frame{{Type: 7, Payload: []byte("fence contribution")}, {Type: 8, Payload: []byte{}}, {Type: 9, Payload: bytes.Repeat([]byte("output "), 20000)}} {
		go a.Send(want.Type, want.Payload)
		got, err := b.Recv()
		if err != nil || got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame: type %d, %d bytes, %v; want type %d, %d bytes", got.Type, len(got.Payload), err, want.Type, len(want.Payload))
		}
		// and back: the other direction has its own key and count
		go b.Send(want.Type+1, want.Payload)
		got, err = a.Recv()
		if err != nil || got.Type != want.Type+1 || !bytes.Equal(got.Payload, want.Payload) {
			t.Fatalf("frame back: type %d, %d bytes, %v", got.Type, len(got.Payload), err)
		}
	}
}

// A listener refuses a peer without the secret, or with a wrong one, and
// reads nothing from it.
func TestHandshakeRefuses(t *testing.T) {
	secret, _ := NewSecret()
	wrong, _ := NewSecret()

	c, res, _ := pair(t, secret)
	if _, err := Client(c, wrong, 1, 2*time.Second); !errors.Is(err, ErrAuth) {
		t.Errorf("dialer with a wrong secret: %v, want ErrAuth", err)
	}
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Errorf("listener against a wrong secret: %v, want ErrAuth", err)
	}

	// No secret at all: a peer that sends a frame straight away.
	c, res, _ = pair(t, secret)
	c.Write(append([]byte{0, 0, 0, 140, 1}, bytes.Repeat([]byte("run /bin/evil "), 10)...))
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Errorf("listener against a frame instead of a handshake: %v, want ErrAuth", err)
	}

	// A prun of wire version 1: 32 random bytes, its challenge, then its
	// answer to the first 32 bytes it read, and no version.
	c, res, _ = pair(t, secret)
	c.Write(bytes.Repeat([]byte{0x5a}, 64))
	if err := <-res; !errors.Is(err, ErrAuth) {
		t.Errorf("listener against a version 1 peer: %v, want ErrAuth", err)
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

// A prun of another wire version is refused, and told apart from a peer
// without the secret, on both sides.
func TestHandshakeVersion(t *testing.T) {
	secret, _ := NewSecret()
	c, res, _ := pair(t, secret)
	other := append(append([]byte(nil), magic...), WireVersion+1)
	c.Write(append(other, make([]byte, nonceSize)...))
	want := fmt.Sprintf("ctl: the peer speaks control-plane wire version %d, this prun version %d: run the same prun on every node", WireVersion+1, WireVersion)
	var ve *VersionError
	if err := <-res; !errors.As(err, &ve) || ve.Peer != WireVersion+1 || err.Error() != want {
		t.Errorf("listener against version %d: %v, want %q", WireVersion+1, err, want)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(append(other, make([]byte, nonceSize)...))
		io.Copy(io.Discard, c)
	}()
	if _, err := Dial(ln.Addr().String(), secret, 1, 2*time.Second); !errors.As(err, &ve) || ve.Peer != WireVersion+1 {
		t.Errorf("dialer against version %d: %v, want a VersionError", WireVersion+1, err)
	}
}

// The listener's answer cannot be reflected back to authenticate a dialer
// that lacks the secret (the roles differ).
func TestNoReflection(t *testing.T) {
	secret, _ := NewSecret()
	tr := bytes.Repeat([]byte{1}, 2*preambleSize)
	if bytes.Equal(mac(secret, roleListener, tr), mac(secret, roleDialer, tr)) {
		t.Fatal("listener and dialer answers coincide")
	}
}

// testKeys are the two ends' keys of a link whose handshake saw transcript.
func testKeys(t testing.TB, transcript []byte) (dialer, listener linkKeys) {
	t.Helper()
	secret := bytes.Repeat([]byte{7}, SecretSize)
	d, err := deriveKeys(secret, transcript, false)
	if err != nil {
		t.Fatal(err)
	}
	l, err := deriveKeys(secret, transcript, true)
	if err != nil {
		t.Fatal(err)
	}
	return d, l
}

func TestFrameLimits(t *testing.T) {
	d, l := testKeys(t, make([]byte, 2*preambleSize))
	// No sender seals an oversized frame; a length over MaxFrame is refused
	// as a forgery before anything is allocated for it.
	a, _ := linkPair(t)
	if err := a.Send(9, make([]byte, MaxFrame+1)); err == nil {
		t.Error("oversized frame sent")
	}
	if _, err := readFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 1}), &direction{aead: l.open}); !errors.Is(err, ErrFrameAuth) {
		t.Errorf("oversized length: %v, want ErrFrameAuth", err)
	}
	// A stream that ends inside a frame.
	out := direction{aead: d.seal}
	f := out.seal(nil, 3, []byte("abc"))
	if _, err := readFrame(bytes.NewReader(f[:len(f)-1]), &direction{aead: l.open}); err == nil || errors.Is(err, ErrFrameAuth) {
		t.Errorf("truncated frame: %v, want the stream's end", err)
	}
	if got, err := readFrame(bytes.NewReader(f), &direction{aead: l.open}); err != nil || got.Type != 3 || string(got.Payload) != "abc" {
		t.Errorf("whole frame: %d %q %v", got.Type, got.Payload, err)
	}
}

// FuzzReadFrame: any bytes give a frame or an error, never a panic or a
// huge allocation, and a frame that opens re-seals to its bytes.
func FuzzReadFrame(f *testing.F) {
	d, l := testKeys(f, make([]byte, 2*preambleSize))
	out := direction{aead: d.seal}
	f.Add(out.seal(nil, 2, []byte("abc")))
	f.Add([]byte{0, 0, 0, 3, 2, 'a', 'b', 'c'})
	f.Add([]byte{0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		fr, err := readFrame(r, &direction{aead: l.open})
		if err != nil {
			return
		}
		again := direction{aead: d.seal}
		if !bytes.Equal(again.seal(nil, fr.Type, fr.Payload), data[:len(data)-r.Len()]) {
			t.Fatalf("re-sealing differs")
		}
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

// seal is frame for tests, whose links never carry 2^56 frames.
func (s *direction) seal(dst []byte, typ uint8, payload []byte) []byte {
	b, err := s.frame(dst, typ, payload)
	if err != nil {
		panic(err)
	}
	return b
}
