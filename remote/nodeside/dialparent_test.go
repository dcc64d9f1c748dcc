package nodeside

import (
	"crypto/rand"
	"net"
	"prun/remote/wire"
	"strconv"
	"sync"
	"testing"
	"time"

	"prun/ctl"
)

// parentOn listens on one port of each of ips, as a vertex's listeners do
// (ctl.ListenOn), and runs the listener's side of the handshake on every
// connection, after delay[ip] (a parent too busy to answer at once); an
// address in refuse refuses connections. It returns the port.
func parentOn(t *testing.T, secret []byte, ips []string, refuse map[string]bool, delay map[string]time.Duration) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	for try := 0; ; try++ {
		var lns []net.Listener
		port := 0
		ok := true
		for _, ip := range ips {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
			port = ln.Addr().(*net.TCPAddr).Port
		}
		if !ok {
			for _, ln := range lns {
				ln.Close()
			}
			if try > 20 {
				t.Fatalf("no port free on all of %v", ips)
			}
			continue
		}
		for i, ln := range lns {
			if refuse[ips[i]] {
				ln.Close() // the port stays free: nobody else asked for it
				continue
			}
			t.Cleanup(func() { ln.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
					wg.Add(1)
					go func() {
						defer wg.Done()
						time.Sleep(delay[ips[i]])
						ctl.Server(c, secret, 5*time.Second)
					}()
				}
			}()
		}
		return port
	}
}

// TestDialParentPrefersFirst: a daemon links to its parent at the first of
// the parent's addresses that takes its connection, however long the busy
// parent takes to answer the handshake there. It used to race all addresses
// to a finished handshake, 100 ms apart: the link then often ran over a
// later address of the parent's, such as another test cluster's bridge
// (198.18.0.254), and when that interface went away the link fell silent
// without a reset and the daemon gave its parent up (TestSimulatedTree256,
// 1 run in 5). A later address is still tried when the first refuses.
func TestDialParentPrefersFirst(t *testing.T) {
	t.Setenv("SSH_CONNECTION", "")
	secret := make([]byte, ctl.SecretSize)
	rand.Read(secret)
	ips := []string{"127.0.0.1", "127.0.0.2"}
	boot := func(port int) wire.Bootstrap {
		return wire.Bootstrap{Secret: secret, ParentPort: port, ParentAddrs: ips, ConnectTimeout: 5 * time.Second}
	}

	t.Run("busy", func(t *testing.T) {
		port := parentOn(t, secret, ips, nil, map[string]time.Duration{"127.0.0.1": 500 * time.Millisecond})
		l, err := dialParent(boot(port))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := l.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.1" {
			t.Errorf("linked to the parent at %s, want 127.0.0.1 (its first address, slow to answer)", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		port := parentOn(t, secret, ips, map[string]bool{"127.0.0.1": true}, nil)
		start := time.Now()
		l, err := dialParent(boot(port))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := l.RemoteAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
			t.Errorf("linked to the parent at %s, want 127.0.0.2 (the first refuses)", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v", d)
		}
	})
	t.Run("none", func(t *testing.T) {
		port := parentOn(t, secret, ips, map[string]bool{"127.0.0.1": true, "127.0.0.2": true}, nil)
		if l, err := dialParent(boot(port)); err == nil {
			l.Close()
			t.Fatal("linked to nobody")
		} else {
			t.Log(err)
		}
	})
}
