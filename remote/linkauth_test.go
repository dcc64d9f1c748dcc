package remote

import (
	"errors"
	"io"
	"net"
	"prun/remote/spawn"
	"prun/remote/wire"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"prun/ctl"
)

// A frame of a child's link that fails authentication (here: altered on
// the way by a relay that passed the handshake on untouched) loses the
// child's node like any dead link, and the report names the failure: its
// first frame (the hello: the child is known by the vertex its handshake
// proved) or a later one.
func TestLinkAuthFailureLosesNode(t *testing.T) {
	for _, bad := range []int{0, 1} {
		t.Run(strconv.Itoa(bad), func(t *testing.T) { linkAuthFailure(t, bad) })
	}
}

func linkAuthFailure(t *testing.T, bad int) {
	secret, _ := ctl.NewSecret()
	ln, err := ctl.ListenOn([]string{"127.0.0.1"}, nil, secret)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	relay, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	// The relay passes everything on until capture is set; then it hands
	// each read of the child's (one small frame each) to the test.
	var capture atomic.Bool
	frames := make(chan []byte, 4)
	toParent := make(chan net.Conn, 1)
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
		toParent <- c2
		go io.Copy(c1, c2)
		buf := make([]byte, 64<<10)
		for {
			n, err := c1.Read(buf)
			if n > 0 {
				if capture.Load() {
					frames <- append([]byte(nil), buf[:n]...)
				} else {
					c2.Write(buf[:n])
				}
			}
			if err != nil {
				return
			}
		}
	}()
	child, err := ctl.Dial(relay.Addr().String(), secret, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	parentEnd := <-ln.Links()
	onWire := <-toParent

	lost := make(chan error, 1)
	s := spawn.NewSpawner(0, wire.Bootstrap{Fanout: 32, Hosts: []string{"prun-h1"}}, ln, func(uint8, []byte) {},
		func(v int, err error) { lost <- err })
	capture.Store(true)
	go s.ServeLink(parentEnd, 1)
	for i, typ := range []uint8{wire.THello, wire.TEvent}[:bad+1] {
		if err := child.Send(typ, wire.Frame(wire.ToLauncher, 1, []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
		f := <-frames
		if i == bad {
			f[len(f)/2] ^= 1
		}
		onWire.Write(f)
	}
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), "lost the connection to its daemon") || !errors.Is(err, ctl.ErrFrameAuth) {
			t.Errorf("the node was lost with %q, want its link's authentication failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a frame that failed authentication did not lose the node")
	}
}
