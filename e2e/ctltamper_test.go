package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"prun/internal/cluster"
)

// A man in the middle of one daemon's control link: prun-h2's connection
// to the launcher is routed, inside prun-h2's network namespace, to a relay
// of the test's, which passes it on to the launcher. Such a host cannot
// forge the handshake, but it can let it through and then alter the
// stream; every frame after the handshake must then fail on it.

// handshakeBytes is what each side of a control link writes before its
// first frame: the preamble (magic, wire version, 32 random bytes) and the
// 32-byte HMAC answer.
const handshakeBytes = 40 + 32

// mitm relays prun-h2's connections to the launcher's listener on port.
// flip, when set, names the direction ("up": the daemon's frames, "down":
// the launcher's) in which the relay flips one bit of the first frame after
// the handshake.
type mitm struct {
	conns atomic.Int32 // connections relayed
	flip  atomic.Value // string, read as each connection comes
}

// listenInNetns listens on addr inside host's network namespace: the
// socket is made on a thread moved there and back (a thread that could not
// return stays locked to its goroutine, which Go then ends with it).
func listenInNetns(t *testing.T, host, addr string) net.Listener {
	t.Helper()
	type res struct {
		ln  net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer home.Close()
		f, err := os.Open("/var/run/netns/" + host)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %v", host, err)}
			return
		}
		defer func() {
			if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
		}()
		// IP_TRANSPARENT: the relay answers as the launcher's address,
		// which is not one of the namespace's own.
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
			})
			return errors.Join(err, serr)
		}}
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		ch <- res{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ln
}

// interpose routes host's connections to the launcher's port to a relay
// and returns it: policy routing makes that port of the launcher's address
// local in host's namespace (the route's src is the host's own address, as
// the launcher's is none of its own), where the relay listens. The routes
// go at the test's end.
func (m *mn) interpose(t *testing.T, host string, port int) *mitm {
	t.Helper()
	p := strconv.Itoa(port)
	const table = "179"
	rule := []string{"rule", "add", "to", cluster.LauncherAddr, "ipproto", "tcp", "dport", p, "lookup", table}
	route := []string{"route", "add", "local", cluster.LauncherAddr, "dev", "lo", "table", table, "src", m.c.Addr(host)}
	for _, args := range [][]string{route, rule} {
		if out, err := m.c.InNetns(host, append([]string{"ip"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: ip %v: %v: %s", host, args, err, out)
		}
	}
	t.Cleanup(func() {
		for _, args := range [][]string{rule, route} {
			args[1] = "del"
			m.c.InNetns(host, append([]string{"ip"}, args...)...).Run()
		}
	})
	ln := listenInNetns(t, host, ":"+p)
	t.Cleanup(func() { ln.Close() })
	x := &mitm{}
	go func() {
		for {
			c1, err := ln.Accept()
			if err != nil {
				return
			}
			c2, err := net.Dial("tcp", net.JoinHostPort(cluster.LauncherAddr, p))
			if err != nil {
				c1.Close()
				continue
			}
			x.conns.Add(1)
			t.Cleanup(func() { c1.Close(); c2.Close() })
			flip, _ := x.flip.Load().(string)
			go x.pipe(c2, c1, flip == "up")
			go x.pipe(c1, c2, flip == "down")
		}
	}()
	return x
}

// pipe copies src to dst, flipping a bit of the first frame after the
// handshake if tamper. Either end's close closes both: a control link is
// over when one of its ends is.
func (x *mitm) pipe(dst, src net.Conn, tamper bool) {
	defer dst.Close()
	defer src.Close()
	at := int64(handshakeBytes + 7) // in the first frame's payload or tag
	var off int64
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if tamper && off <= at && at < off+int64(n) {
				buf[at-off] ^= 0x10
			}
			off += int64(n)
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
