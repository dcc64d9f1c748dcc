package peercred

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestPeerUID: the uid of a loopback peer is its socket's owner, for this
// process's own connection and for one made by another user (nobody, as a
// real process under setpriv).
func TestPeerUID(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Logf("%s: %v (skipped)", network, err)
			continue
		}
		defer ln.Close()
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		host := ln.Addr().(*net.TCPAddr).IP.String()

		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		p, err := OfConn(s)
		if err != nil || p.UID != os.Geteuid() {
			t.Errorf("%s: own connection: %v, %v; want uid %d", network, p, err, os.Geteuid())
		}
		if !Admit(p) {
			t.Errorf("%s: own connection %v not admitted", network, p)
		}
		c.Close()
		s.Close()

		if os.Geteuid() != 0 {
			continue
		}
		// bash's /dev/tcp connects as the user setpriv made it.
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-c",
			"exec 3<>/dev/tcp/"+host+"/"+port+"; sleep 10")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		s, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		p, err = OfConn(s)
		if err != nil || p.UID != 65534 {
			t.Errorf("%s: nobody's connection: %v, %v; want uid 65534", network, p, err)
		}
		if Admit(p) {
			t.Errorf("%s: nobody's connection %v admitted", network, p)
		}
		// Once the peer is gone its socket names nobody: refused.
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		time.Sleep(50 * time.Millisecond)
		if p, err = OfConn(s); err == nil {
			t.Errorf("%s: a closed peer's socket: %v, no error", network, p)
		}
		s.Close()
	}
}

// A peer that is not on loopback has no uid here.
func TestNotLocal(t *testing.T) {
	if _, err := Lookup(netipMust("198.18.0.1:1"), netipMust("198.18.0.2:2")); err != ErrNotLocal {
		t.Errorf("non-loopback peer: %v, want ErrNotLocal", err)
	}
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// BenchmarkOfConn: what admitting a connection costs (once per PMIx client).
func BenchmarkOfConn(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		if _, err := OfConn(s); err != nil {
			b.Fatal(err)
		}
	}
}
