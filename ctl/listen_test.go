package ctl

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// TestListenOn: a listener bound to the addresses it was given, all on one
// port, and to no other of the machine's: links come in through each,
// a connection to another local address of the same port is refused.
func TestListenOn(t *testing.T) {
	secret, _ := NewSecret()
	// 127.0.0.0/8 is all this machine's: three addresses to tell apart.
	l, err := ListenOn([]string{"127.0.0.1", "127.0.0.2"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if h := l.Hosts(); len(h) != 2 || h[0] != "127.0.0.1" || h[1] != "127.0.0.2" {
		t.Errorf("Hosts() = %q", h)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, h := range []string{"127.0.0.1", "127.0.0.2"} {
		k, err := Dial(net.JoinHostPort(h, port), secret, 1, 2*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", h, err)
		}
		select {
		case got := <-l.Links():
			got.Close()
		case <-time.After(5 * time.Second):
			t.Fatalf("no link through %s", h)
		}
		k.Close()
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.3", port), 2*time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.3:%s accepted a connection: the listener is bound to more than its addresses", port)
	}
	l.Close()
	if _, ok := <-l.Links(); ok {
		t.Error("a link after Close")
	}
}

// The port is taken on the second address: another port is found for both.
// The range is picked near a port the kernel just gave out; another
// program may hold one of its ports meanwhile, so a range is tried again
// (a few times) rather than the test skipped.
func TestListenOnBusyPort(t *testing.T) {
	secret, _ := NewSecret()
	var last error
	for attempt := 0; attempt < 10; attempt++ {
		ok, err := listenOnBusyPort(t, secret)
		if ok {
			return
		}
		last = err
	}
	t.Fatalf("no range of 4 ports free in 10 tries (a busy machine?): %v", last)
}

// listenOnBusyPort runs the test once; false with the error when the
// range it picked was not free.
func listenOnBusyPort(t *testing.T, secret []byte) (bool, error) {
	var held []net.Listener
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	// Occupy a range's ports on 127.0.0.2 but one, which 127.0.0.1 has free too.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	lo, hi := base, base+3
	for p := lo; p < hi; p++ {
		h, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(p)))
		if err != nil {
			return false, err
		}
		held = append(held, h)
	}
	l, err := ListenOn([]string{"127.0.0.1", "127.0.0.2"}, [][2]int{{lo, hi}}, secret)
	if err != nil {
		return false, err
	}
	defer l.Close()
	if p := l.Addr().(*net.TCPAddr).Port; p != hi {
		t.Errorf("port %d, want %d (the only one free on both)", p, hi)
	}
	return true, nil
}
