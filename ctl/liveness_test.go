package ctl

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// shortLiveness makes heartbeats and the silence limit short for a test.
func shortLiveness(t *testing.T) {
	setLiveness(t, 50*time.Millisecond, 250*time.Millisecond)
}

// setLiveness sets the heartbeat interval and the silence limit of the
// links a test makes, and restores them after it, under livenessMu.
func setLiveness(t *testing.T, every, dead time.Duration) {
	livenessMu.Lock()
	oldEvery, oldDead := HeartbeatEvery, DeadAfter
	HeartbeatEvery, DeadAfter = every, dead
	livenessMu.Unlock()
	t.Cleanup(func() {
		livenessMu.Lock()
		HeartbeatEvery, DeadAfter = oldEvery, oldDead
		livenessMu.Unlock()
	})
}

// rawPeer is the far end of a link, played by the test: it reads and
// writes only what the test does, and seals the frames it sends with send.
type rawPeer struct {
	net.Conn
	out direction
}

func (p *rawPeer) send(typ uint8, payload []byte) error {
	_, err := p.Write(p.out.seal(nil, typ, payload))
	return err
}

// linkedPeer is a link to a TCP peer that reads and sends only what the
// test does with the returned peer.
func linkedPeer(t *testing.T) (*Link, *rawPeer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := NewSecret()
	keys := make(chan linkKeys, 1)
	go func() {
		k, _, err := handshake(peer, secret, true, 0, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		keys <- k
	}()
	k, _, err := handshake(c, secret, false, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := newLink(c, k, 0)
	p := &rawPeer{Conn: peer, out: direction{aead: (<-keys).seal}}
	t.Cleanup(func() { l.Close(); peer.Close() })
	return l, p
}

// silentPeer is a link to a TCP peer that reads everything and sends only
// what the test writes to the returned conn.
func silentPeer(t *testing.T) (*Link, *rawPeer) {
	t.Helper()
	l, peer := linkedPeer(t)
	go func() { // the heartbeats of the link's end, discarded
		buf := make([]byte, 4096)
		for {
			if _, err := peer.Read(buf); err != nil {
				return
			}
		}
	}()
	return l, peer
}

func recvAsync(l *Link) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := l.Recv()
		ch <- err
	}()
	return ch
}

// A silent peer is lost after DeadAfter and half a heartbeat's interval.
func TestLinkSilentPeerLost(t *testing.T) {
	shortLiveness(t)
	l, _ := silentPeer(t)
	start := time.Now()
	_, err := l.Recv()
	var se *SilentError
	if !errors.As(err, &se) {
		t.Fatalf("Recv from a silent peer: %v, want a SilentError", err)
	}
	if d := time.Since(start); d < DeadAfter+HeartbeatEvery/2 || d > 5*time.Second {
		t.Errorf("lost after %v, want %v and half a heartbeat's interval", d, DeadAfter)
	}
	if got, want := err.Error(), "no heartbeat for 250ms"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

// A suspended link waits for its peer however long it is silent; resumed,
// it expects heartbeats again.
func TestLinkSuspendResume(t *testing.T) {
	shortLiveness(t)
	l, peer := silentPeer(t)
	got := recvAsync(l)
	l.Suspend() // while Recv waits, its deadline armed
	select {
	case err := <-got:
		t.Fatalf("Recv of a suspended link returned: %v", err)
	case <-time.After(6 * DeadAfter):
	}
	if err := peer.send(9, []byte("back")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Recv after the peer spoke: %v", err)
	}
	got = recvAsync(l)
	select {
	case err := <-got:
		t.Fatalf("Recv of a suspended link returned: %v", err)
	case <-time.After(4 * DeadAfter):
	}
	l.Resume()
	select {
	case err := <-got:
		var se *SilentError
		if !errors.As(err, &se) {
			t.Fatalf("resumed link: %v, want a SilentError", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a resumed link with a silent peer was never lost")
	}
}

// A link given a longer silence limit waits that long for a peer that
// sends nothing (a starved peer), and no longer.
func TestLinkSilenceLimit(t *testing.T) {
	shortLiveness(t)
	l, _ := silentPeer(t)
	limit := 4 * DeadAfter
	l.SetSilence(limit)
	start := time.Now()
	_, err := l.Recv()
	var se *SilentError
	if !errors.As(err, &se) || se.After != limit {
		t.Fatalf("Recv from a silent peer: %v, want a SilentError after %v", err, limit)
	}
	if d := time.Since(start); d < limit || d > limit+5*time.Second {
		t.Errorf("lost after %v, want %v", d, limit)
	}
}

// The silence limit grows with the tree: DeadAfter for small ones, a
// heartbeat's interval more per 64 daemons, at most 12 DeadAfters.
func TestSilence(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, DeadAfter}, {63, DeadAfter}, {256, DeadAfter + 4*HeartbeatEvery}, {1024, DeadAfter + 16*HeartbeatEvery},
		{100000, 12 * DeadAfter}} {
		if got := Silence(c.n); got != c.want {
			t.Errorf("Silence(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}

// A link given a longer silence limit also waits that long for a peer that
// reads nothing (a starved peer while a large frame goes out), not
// DeadAfter: at 1,024 daemons on one host, a vertex starved for over 5 s
// lost its link to its parent, which was sending it a fence's result.
func TestLinkSendWaitsSilenceLimit(t *testing.T) {
	shortLiveness(t)
	l, peer := linkedPeer(t)
	l.SetSilence(8 * DeadAfter)
	go func() { // starved for 3 DeadAfters, then reads everything
		time.Sleep(3 * DeadAfter)
		buf := make([]byte, 1<<20)
		for {
			if _, err := peer.Read(buf); err != nil {
				return
			}
		}
	}()
	// More than the sockets' buffers hold, so the write waits for the peer.
	if err := l.Send(TypeHeartbeat+1, make([]byte, 12<<20)); err != nil {
		t.Fatalf("Send to a peer that read nothing for 3 DeadAfters, within its silence limit: %v", err)
	}
}

// A link closed by a failed write says so to its reader, rather than "use
// of closed network connection" (a lost node's reason, at 1,024 daemons).
func TestLinkRecvAfterFailedWrite(t *testing.T) {
	shortLiveness(t)
	l, _ := linkedPeer(t)
	if err := l.Send(TypeHeartbeat+1, make([]byte, 12<<20)); err == nil {
		t.Fatal("Send to a peer that never reads succeeded")
	}
	if _, err := l.Recv(); err == nil || !strings.Contains(err.Error(), "failed write") {
		t.Errorf("Recv after a failed write: %v, want the write's failure", err)
	}
}
